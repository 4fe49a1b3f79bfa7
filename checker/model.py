"""A spec instance made ready to explore: layout, numbered transition labels, selected checks.

Every (action, parameter values) pair gets a *label*, a small integer the explorers store per state
instead of the state itself; a trace is rebuilt by replaying labels from an initial state.
"""

from __future__ import annotations

import functools
import inspect
import os
import traceback
import types
from dataclasses import dataclass
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Sequence

import numpy as np

from kraftcheck.checker.errors import (KraftcheckError, SpecError, SpecRaised, UsageError, defined_at, spec_raised,
                                      wrote_and_declined)
from kraftcheck.checker.layout import SUCCESSOR_ELEMENT, Layout
from kraftcheck.checker.njit_check import require_njit
from kraftcheck.checker.spec import Action, ActionConstraint, Constraint, Field, Invariant, Spec, TransitionProperty
from kraftcheck.checker.action_returns import (bool_meaning, no_bool_error, not_a_bool, returns_no_bool,
                                              returns_nothing)
from kraftcheck.checker.writes import source_writes

MAX_LABELS = 65535  # labels are stored as uint16 per state
MAX_WORDS = 64  # the visited sets' kernels take a packed state of at most this many words
DEADLOCK = "deadlock"  # the name (and kind) of a deadlock violation


_interpreted: dict[int, Callable[..., Any]] = {}


def raising_function(model: "Model", error: BaseException) -> str:
    """Which of ``model``'s functions, run as Python, raised ``error`` (the outermost one in its
    traceback): "action Send", "invariant Safe"..."""
    named = {}
    for kind, items in (("action", model.actions), ("invariant", model.spec_invariants),
                        ("transition property", model.spec_properties), ("constraint", model.spec_constraints),
                        ("action constraint", model.spec_action_constraints)):
        for x in items:
            named.setdefault(python_function(x.fn).__code__, f"{kind} {x.name}")
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in named:
            return named[tb.tb_frame.f_code]
        tb = tb.tb_next
    return f"a function of spec {model.spec.name}"


def spec_call(spec: Spec, method: str) -> Any:
    """``spec.<method>()`` (``fields``, ``initial_states`` as a list...): what it raises is the
    spec's error, named with its line, not a traceback. A generator is run here (a method written
    with ``yield`` raises only when its items are taken)."""
    try:
        out = getattr(spec, method)()
        if isinstance(out, Mapping):  # one dict where a list of them belongs: the caller says so
            return out
        return list(out) if method == "initial_states" or isinstance(out, types.GeneratorType) else out
    except KraftcheckError as e:
        raise declared_at(e) from None
    except Exception as e:  # noqa: BLE001 - the spec's own code failed
        raise spec_raised(f"{method}() of spec {spec.name}", e, compiled_too=False) from None


# what each of a spec's declaring methods returns a list of, and how one is written
_DECLARES = {"fields": (Field, 'Int("x", 3)'), "actions": (Action, 'Action("Name", fn)'),
             "invariants": (Invariant, 'Invariant("Name", fn)'),
             "properties": (TransitionProperty, 'TransitionProperty("Name", fn)'),
             "constraints": (Constraint, 'Constraint("Name", fn)'),
             "action_constraints": (ActionConstraint, 'ActionConstraint("Name", fn)')}


def declared(spec: Spec, method: str) -> list[Any]:
    """``spec.<method>()`` (``fields``, ``actions``, ``invariants``...) as a list, refused in one
    line unless it is a list (or tuple, or generator) of the objects that method declares: one
    object rather than a list, a bare function where an ``Invariant`` belongs, a tuple of an
    action's pieces, were internal errors where kraftcheck first read a name from them."""
    out = spec_call(spec, method)
    cls, example = _DECLARES[method]
    kind = cls.__name__
    if isinstance(out, cls):
        raise SpecError(f"{method}() of spec {spec.name} returned one {kind}, not a list: return a list of them, "
                        f"[{example}, ...]")
    if isinstance(out, (str, bytes, Mapping)) or not isinstance(out, Iterable):
        raise SpecError(f"{method}() of spec {spec.name} returned {_shown(out)}: return a list of {kind} "
                        f"objects, [{example}, ...]")
    out = list(out)
    for x in out:
        if not isinstance(x, cls):
            fn = getattr(x, "py_func", x)
            hint = (f"; write {kind}(\"{fn.__name__}\", {fn.__name__})" if callable(x) and kind != "Field"
                    and hasattr(fn, "__name__") else f": each is written {example}")
            raise SpecError(f"{method}() of spec {spec.name} gives {_shown(x)}, which is no {kind}{hint}")
    return out


def initial_states(spec: Spec) -> list[Mapping[str, Any]]:
    """``spec.initial_states()``, refused in one line unless it gives dicts of field values (one
    dict rather than a list of them, or a list of values, was an internal error)."""
    example = '[{"x": 0, "y": [0, 0]}]'
    states = spec_call(spec, "initial_states")
    if isinstance(states, Mapping):
        raise SpecError(f"initial_states() of spec {spec.name} returned one dict; return a list of them (or yield "
                        f"each), one per initial state: {example}")
    for values in states:
        if not isinstance(values, Mapping):
            raise SpecError(f"initial_states() of spec {spec.name} gives {_shown(values)}, which is no dict of field "
                            f"values: give one dict per initial state, {example}")
    return states


def _shown(x: Any) -> str:
    """``x`` as an error says it: a function by its name, anything else by its repr, shortened."""
    fn = getattr(x, "py_func", x)
    if callable(x) and hasattr(fn, "__name__"):
        return f"the function {fn.__name__}"
    text = repr(x)
    return f"{text[:80]}... (a {type(x).__name__})" if len(text) > 80 else f"{text} (a {type(x).__name__})"


def declared_at(e: KraftcheckError) -> KraftcheckError:
    """``e``, raised by kraftcheck's declarations (``Int``, ``Field``, ``Action``...) as the spec's
    code called them, with the spec's line that called them: a field past the int32 range built by
    a helper of the spec's names itself, not where. Other kinds (SpecRaised, which names its line
    already; a UsageError...) are left as they are."""
    if type(e) is not SpecError:
        return e
    checker = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frames = [f for f in traceback.extract_tb(e.__traceback__)  # "<string>": a dataclass's generated __init__
              if not f.filename.startswith((checker, "<"))]
    return SpecError(f"{e} (declared at {frames[-1].filename}:{frames[-1].lineno})") if frames else e


def spec_instance(cls: type, values: dict[str, Any]) -> Spec:
    """Spec ``cls`` with parameters ``values``: its ``Params``, then the spec. A ValueError or
    TypeError its code raises on the way is the spec refusing these values (a UsageError naming
    them, its message and its line); anything else it raises is the spec's error, as ``spec_call``
    says it."""
    given = " ".join(f"{k}={v!r}" for k, v in values.items()) or "(defaults)"
    try:
        return cls(cls.Params(**values))
    except KraftcheckError as e:
        raise declared_at(e) from None
    except (ValueError, TypeError) as e:
        raised = spec_raised(f"spec {cls.name}", e)
        at = f" (at {raised.file}:{raised.line})" if raised.file else ""
        raise UsageError(f"spec {cls.name} refuses the parameters {given}: {raised.error}{at}") from None
    except Exception as e:  # noqa: BLE001 - the spec's own code failed
        raise spec_raised(f"Params({given}) of spec {cls.name}", e, compiled_too=False) from None


def python_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The interpreted body of a numba function (itself when JIT is disabled).

    The numba functions it calls (helpers shared by several actions) are interpreted too: the body
    is rebuilt over a copy of its globals in which every dispatcher is replaced by its interpreted
    version, so a helper never receives a plain Python state object in compiled form.
    """
    py = getattr(fn, "py_func", None)
    if py is None:
        return fn
    key = id(fn)
    if key in _interpreted:
        return _interpreted[key]
    env = dict(py.__globals__)
    clone = types.FunctionType(py.__code__, env, py.__name__, py.__defaults__, py.__closure__)
    clone.__doc__, clone.__wrapped__ = py.__doc__, py
    _interpreted[key] = clone
    for name, value in py.__globals__.items():
        if name in py.__code__.co_names and hasattr(value, "py_func"):
            env[name] = python_function(value)
    return clone


def python_arithmetic(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, which runs a spec's functions as Python, with numpy's integer division or modulo by
    zero raising (FloatingPointError, a spec's error like any other): an array field's element is
    a numpy integer there, and numpy's division by zero gives 0 with a warning where Python's
    integers, the bytecode and the compiled kernels raise, so a Python tier would explore on and
    give a verdict the others refuse. numpy's error state is per thread: set around each call."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(divide="raise"):
            return fn(*args, **kwargs)
    return run


# what a function that gives None, which reads as False, would silently do
_NOTHING_MEANS = {"action": "the action would silently not fire there",
                  "invariant": "the invariant would be reported violated there",
                  "transition property": "the property would be reported violated there",
                  "constraint": "the state would silently be left out of the search",
                  "action constraint": "the step would silently be left out of the search"}


# what the kernels and tiers hand each kind of function, after an action's parameters
_CALLED_WITH = {"action": "s, t", "invariant": "s", "constraint": "s", "transition property": "s, t",
                "action constraint": "s, t"}


def _refuse_arity(kind: str, name: str, fn: Callable[..., Any], params: Sequence[str] = ()) -> None:
    """Refuse the ``kind`` ``name`` unless ``fn`` can be called as every tier calls it: the state
    (and the successor), then one argument per declared parameter (``params``, an action's)."""
    py = python_function(fn)
    args = _CALLED_WITH[kind].split(", ") + list(params)
    try:
        inspect.signature(py).bind(*args)
    except TypeError as e:
        declared = f"; its declared parameters: {', '.join(params) or 'none'}" if kind == "action" else ""
        raise SpecError(f"{kind} {name} ({defined_at(py)}) cannot be called as every tier "
                        f"calls it, {py.__name__}({', '.join(args)}) ({e}{declared}): an "
                        f"action takes the state s, the successor t and one argument per Param it declares; an "
                        f"invariant or a constraint takes s; a transition property or an action constraint s and "
                        f"t") from None
    except ValueError:  # no signature to read: what calls it says
        return


def _refuse_returns(kind: str, name: str, fn: Callable[..., Any]) -> None:
    """Refuse the ``kind`` ("action", "invariant"...) ``name`` if its source shows it may return
    nothing or returns a literal that is no bool (``action_returns``): a SpecError saying where."""
    nothing = returns_nothing(fn)
    if nothing is not None:
        line, file, how = nothing
        raise SpecError(f"{kind} {name} may return nothing ({how}, {file}:{line}), which reads as False: "
                        f"{_NOTHING_MEANS[kind]}; return {bool_meaning(kind)}")
    literal = returns_no_bool(fn)
    if literal is not None:
        line, file, what = literal
        raise no_bool_error(f"{kind} {name}", f"returns no bool ({what}, at {file}:{line})")


def _refuse_state_writes(kind: str, name: str, fn: Callable[..., Any]) -> None:
    """Refuse the check or constraint ``kind`` ``name`` if its source surely assigns to a field of
    a state it is handed (``writes.source_writes``; ``s``, and ``t`` for one of a step): a check
    only reads, and a write would change what the checks after it read, on some tiers and not
    others. A write through a view the reading does not follow is met where it runs (the Python
    tiers hand these states read-only; ``KernelAudit`` runs the spec's Python on the compiled
    kernels' states)."""
    step = kind in ("transition property", "action constraint")
    states = ((0, "the step's source state"), (1, "the step's successor")) if step else ((0, "its state"),)
    code = python_function(fn).__code__
    for index, what in states:
        written = source_writes(fn, index)
        if written is not None:
            field, line, file = written
            named = code.co_varnames[index]  # the function's own name for that state
            raise SpecError(f"{kind} {name} assigns to {what} {named} ({named}.{field}, {file}:{line}): it only "
                            "reads the states it is handed; compute into a local variable instead")


def _bool(value: Any, kind: str, x: Any) -> bool:
    """``value``, which the spec's ``kind`` ``x`` (an Action, Invariant...) returned, checked to
    be a bool (``action_returns.not_a_bool``)."""
    return value if value is True or value is False else not_a_bool(value, f"{kind} {x.name}", x.fn)


@dataclass(frozen=True)
class Label:
    """One action instance."""

    action_index: int
    action: Action
    values: tuple[int, ...]

    @property
    def name(self) -> str:
        return self.action.name

    def shown_params(self) -> dict[str, Any]:
        return {p.name: p.show(v) for p, v in zip(self.action.params, self.values)}

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.shown_params().items())
        return f"{self.name}({args})" if args else self.name


class Model:
    """Spec + layout + labels + the invariants and transition properties to check."""

    def __init__(self, spec: Spec, check: Sequence[str] | None = None, constraints: Sequence[str] | None = None,
                 deadlock: bool | None = None) -> None:
        self.spec = spec
        self.layout = Layout(declared(spec, "fields"))
        if self.layout.nwords > MAX_WORDS:
            raise SpecError(f"spec {spec.name}: a state takes {self.layout.nwords} 64-bit words "
                            f"({self.layout.state_bits} bits of fields); at most {MAX_WORDS}: give its fields "
                            "fewer elements or narrower domains")
        self.actions: list[Action] = declared(spec, "actions")
        if not self.actions:
            raise SpecError(f"spec {spec.name} declares no actions")
        names = [a.name for a in self.actions]
        if len(set(names)) != len(names):
            raise SpecError(f"spec {spec.name}: duplicate action names")
        for a in self.actions:
            _refuse_arity("action", a.name, a.fn, [p.name for p in a.params])
            _refuse_returns("action", a.name, a.fn)
            written = source_writes(a.fn)
            if written is not None:
                field, line, file = written
                raise SpecError(f"action {a.name} assigns to its source state (s.{field}, {file}:{line}): an action "
                                f"reads s and writes only t, the successor; write t.{field} instead")
        self.labels: list[Label] = []
        self.action_base: list[int] = []
        for i, a in enumerate(self.actions):
            self.action_base.append(len(self.labels))
            self.labels.extend(Label(i, a, a.param_values(k)) for k in range(a.instances))
        if len(self.labels) > MAX_LABELS:
            raise SpecError(f"spec {spec.name} has {len(self.labels)} action instances; at most {MAX_LABELS}")
        self.label_action = [lab.action_index for lab in self.labels]

        all_invariants = declared(spec, "invariants")
        all_properties = declared(spec, "properties")
        if len(all_invariants) > 64 or len(all_properties) > 64:
            raise SpecError("at most 64 invariants and 64 transition properties are supported")
        # every check of the spec, selected or not: the kernels compile them all in and evaluate
        # the selected ones (``invariant_select``, ``property_select``), so that runs checking
        # different selections share the compiled kernels
        self.spec_invariants: list[Invariant] = list(all_invariants)
        self.spec_properties: list[TransitionProperty] = list(all_properties)
        known = [x.name for x in all_invariants + all_properties]
        if len(set(known)) != len(known):
            raise SpecError(f"spec {spec.name}: duplicate invariant or property names")
        if check:
            unknown = [n for n in check if n not in known]
            if unknown:
                constraint = unknown[0] in [c.name for c in list(spec.constraints()) + list(spec.action_constraints())]
                raise UsageError(
                    f"unknown invariant {unknown[0]!r} for spec {spec.name}; "
                    f"choose from: {', '.join(known) or '(none)'}"
                    + (f" ({unknown[0]} is a constraint: --constraint selects constraints)" if constraint else ""))
            all_invariants = [x for x in all_invariants if x.name in check]
            all_properties = [x for x in all_properties if x.name in check]
        # a missing @njit named now, not as numba's error in a generated file after exploring
        for a in self.actions:
            require_njit(f"action {a.name} of spec {spec.name}", a.fn)
        for x in self.spec_invariants:
            require_njit(f"invariant {x.name} of spec {spec.name}", x.fn)
        for x in self.spec_properties:
            require_njit(f"transition property {x.name} of spec {spec.name}", x.fn)
        self.invariants: list[Invariant] = all_invariants
        self.properties: list[TransitionProperty] = all_properties
        self.invariant_select = sum(1 << k for k, x in enumerate(self.spec_invariants) if x in all_invariants)
        self.property_select = sum(1 << k for k, x in enumerate(self.spec_properties) if x in all_properties)

        self._select_constraints(spec, known, constraints)
        for kind, items in (("invariant", self.spec_invariants), ("transition property", self.spec_properties),
                            ("constraint", self.spec_constraints), ("action constraint", self.spec_action_constraints)):
            for x in items:
                _refuse_arity(kind, x.name, x.fn)
                _refuse_returns(kind, x.name, x.fn)
                _refuse_state_writes(kind, x.name, x.fn)
        #: whether a reachable state with no successor other than itself is a violation
        #: (``deadlock``: None takes the spec's ``check_deadlock``, as TLC's CHECK_DEADLOCK)
        self.check_deadlock: bool = bool(spec.check_deadlock if deadlock is None else deadlock)

        seen = set()
        self.initial: list[tuple[int, ...]] = []  # each initial state once, in the order first given
        #: the initial states ``initial_states()`` gives, each time it gives one (a state given twice
        #: counted twice): what a run counts as initial states and generated, as TLC counts every
        #: state its Init generates, duplicates included
        self.initial_generated = 0
        self._first_given: list[int] = []  # per state of self.initial: initial_generated when first given
        for values in initial_states(spec):
            flat = self.layout.flat_from_values(values)
            self.initial_generated += 1
            if flat not in seen:
                seen.add(flat)
                self.initial.append(flat)
                self._first_given.append(self.initial_generated)
        if not self.initial:
            raise SpecError(f"spec {spec.name} has no initial state")

    def initial_generated_through(self, i: int) -> int:
        """The initial states generated up to the first time ``initial_states()`` gives
        ``self.initial[i]``, that one included (duplicates counted): what a run that stops at that
        initial state has generated."""
        return self._first_given[i]

    def _select_constraints(self, spec: Spec, checks: list[str], selected: Sequence[str] | None) -> None:
        """The spec's state and action constraints, and those this run applies (``selected``
        names, default all). The kernels compile in every one and evaluate the selected ones as
        extra bits after the selected invariants (``kernel_invariants``) and transition
        properties (``kernel_properties``)."""
        self.spec_constraints: list[Constraint] = declared(spec, "constraints")
        self.spec_action_constraints: list[ActionConstraint] = declared(spec, "action_constraints")
        names = [c.name for c in self.spec_constraints + self.spec_action_constraints]
        if len(set(names)) != len(names) or set(names) & set(checks) or DEADLOCK in set(names) | set(checks):
            raise SpecError(f"spec {spec.name}: a constraint's name repeats another constraint's, an invariant's or "
                            f"a property's, or is {DEADLOCK!r}; give each its own name")
        for c in self.spec_constraints + self.spec_action_constraints:
            what = "action constraint" if isinstance(c, ActionConstraint) else "constraint"
            if not isinstance(c, (Constraint, ActionConstraint)):
                raise SpecError(f"spec {spec.name}: constraints() and action_constraints() must return "
                                f"kraftcheck.Constraint and kraftcheck.ActionConstraint objects, not {c!r}")
            require_njit(f"{what} {c.name} of spec {spec.name}", c.fn)  # and the helpers it calls
        if len(self.spec_invariants) + len(self.spec_constraints) > 64 or \
                len(self.spec_properties) + len(self.spec_action_constraints) > 64:
            raise SpecError("at most 64 invariants and state constraints, and 64 transition properties and action "
                            "constraints, are supported")
        if selected is not None:
            unknown = [n for n in selected if n not in names]
            if unknown:
                raise UsageError(f"unknown constraint {unknown[0]!r} for spec {spec.name}; "
                                 f"choose from: {', '.join(names) or '(the spec declares none)'}"
                                 + (f" ({unknown[0]} is an invariant or property: --invariant selects those)"
                                    if unknown[0] in checks else ""))
        chosen = set(names if selected is None else selected)
        self.constraints: list[Constraint] = [c for c in self.spec_constraints if c.name in chosen]
        self.action_constraints: list[ActionConstraint] = [c for c in self.spec_action_constraints
                                                           if c.name in chosen]
        # what the kernels compile in and evaluate: the checks, then the constraints
        self.kernel_invariants = self.spec_invariants + [Invariant(c.name, c.fn, c.doc) for c in self.spec_constraints]
        self.kernel_properties = self.spec_properties + [TransitionProperty(c.name, c.fn, c.doc)
                                                         for c in self.spec_action_constraints]
        base = len(self.spec_invariants)
        self.kernel_invariant_select = self.invariant_select | sum(
            1 << (base + k) for k, c in enumerate(self.spec_constraints) if c in self.constraints)
        base = len(self.spec_properties)
        self.kernel_property_select = self.property_select | sum(
            1 << (base + k) for k, c in enumerate(self.spec_action_constraints) if c in self.action_constraints)
        # in a mask of the kernels: the bits of the constraints (after the selected checks')
        self.constraint_bits = ((1 << len(self.constraints)) - 1) << len(self.invariants)
        self.action_constraint_bits = ((1 << len(self.action_constraints)) - 1) << len(self.properties)

    @property
    def constrained(self) -> bool:
        """Whether some successors may lie outside the search (a state or action constraint)."""
        return bool(self.constraints or self.action_constraints)

    @property
    def kernel_property_count(self) -> int:
        """Bits of a transition mask: the selected properties, then the action constraints."""
        return len(self.properties) + len(self.action_constraints)

    def in_model(self, before: tuple[int, ...] | None, after: tuple[int, ...]) -> bool:
        """Whether ``after`` (reached from ``before``; None for an initial state) satisfies every
        selected state constraint and, from ``before``, every selected action constraint.
        What a constraint raises is the spec's error (``SpecRaised``), found again in Python for
        its line."""
        try:
            return self._in_model(before, after)
        except KraftcheckError:
            raise
        except Exception as e:  # noqa: BLE001 - numba's exception names no line of the spec's
            raise self._constraint_raised(before, after, e) from None

    def _in_model(self, before: tuple[int, ...] | None, after: tuple[int, ...]) -> bool:
        if self.constraints:
            s = self.layout.structured_from_flat(after)[0]
            if not all(_bool(c.fn(s), "constraint", c) for c in self.constraints):
                return False
        if before is not None and self.action_constraints:
            s, t = self.layout.structured_from_flat(before)[0], self.layout.successor_structured_from_flat(after)[0]
            return all(_bool(c.fn(s, t), "action constraint", c) for c in self.action_constraints)
        return True

    @python_arithmetic
    def _constraint_raised(self, before: tuple[int, ...] | None, after: tuple[int, ...],
                           error: Exception) -> SpecRaised:
        """The constraint that raised ``error`` on ``after`` (from ``before``), run again as
        Python for its line; the state is ``after`` (an initial one when ``before`` is None)."""
        to = self.layout.to_object
        name = f"a constraint of spec {self.spec.name}"
        try:
            for c in self.constraints:
                name = f"constraint {c.name}"
                python_function(c.fn)(to(after))
            for c in self.action_constraints if before is not None else ():
                name = f"action constraint {c.name}"
                python_function(c.fn)(to(before), to(after))
            found = spec_raised(f"a constraint of spec {self.spec.name}", error)  # none raised as Python
        except Exception as e:  # noqa: BLE001 - the line, from Python
            found = spec_raised(name, e)
        shown = self.layout.show(after)
        return found.place(shown, [(None, shown)] if before is None else None)

    @property
    def check_names(self) -> list[str]:
        return [x.name for x in self.invariants] + [x.name for x in self.properties]

    def label_for(self, action: str, values: Sequence[int] = ()) -> int:
        """The label of action ``action`` with parameter values ``values``."""
        for i, a in enumerate(self.actions):
            if a.name == action:
                if len(values) != len(a.params):
                    raise SpecError(f"action {action} takes {len(a.params)} parameter(s), got {len(values)}")
                return self.action_base[i] + a.flat_index(values)
        raise SpecError(f"spec {self.spec.name} has no action {action!r}")

    # -- single steps, evaluated by the compiled action functions (the engine's own code path)
    def step(self, flat: tuple[int, ...], label: int) -> tuple[int, ...] | None:
        """The successor of ``flat`` under ``label``, or None if the action is disabled there."""
        lab = self.labels[label]
        # the structured states the kernels hand an action: the state's, and the successor's
        # (wider: the value an action writes is checked against its domain as computed)
        s = self.layout.structured_from_flat(flat)
        t = self.layout.successor_structured_from_flat(flat)
        written = t.view(SUCCESSOR_ELEMENT)
        if not _bool(lab.action.fn(s[0], t[0], *lab.values), "action", lab.action):
            if tuple(written.tolist()) != tuple(flat):
                raise wrote_and_declined(str(lab), lab.action.fn)
            return None
        succ = tuple(written.tolist())
        self.layout.check_domains(succ, step=lab)
        return succ

    def violated_invariants(self, flat: tuple[int, ...]) -> list[str]:
        s = self.layout.structured_from_flat(flat)[0]
        return [inv.name for inv in self.invariants if not _bool(inv.fn(s), "invariant", inv)]

    def violated_properties(self, before: tuple[int, ...], after: tuple[int, ...]) -> list[str]:
        s, t = self.layout.structured_from_flat(before)[0], self.layout.successor_structured_from_flat(after)[0]
        return [p.name for p in self.properties if not _bool(p.fn(s, t), "transition property", p)]

    def enabled_labels(self, flat: tuple[int, ...]) -> list[int]:
        return [lab for lab in range(len(self.labels)) if self.step(flat, lab) is not None]
