"""The spec interface: what a model declares so the engine can explore it.

A spec is a class with a frozen ``Params`` dataclass and four methods, all evaluated once per run
in plain Python:

* ``fields()``          the state layout: named fields with bounded integer domains;
* ``initial_states()``  dicts of field values (missing fields are 0);
* ``actions()``         named actions, each a numba function ``fn(s, t, *params) -> bool``;
* ``invariants()`` / ``properties()``  predicates over a state / over a transition.

Action, invariant and property functions receive states as numpy structured values, read and
written by field name: ``s.rm_state[r]``, ``t.tm_state = COMMITTED``. An action returns False
*before touching* ``t`` when it is disabled; when enabled it writes the successor into ``t``
(which starts as a copy of ``s``) and returns True.
The same functions run compiled in the engine and as Python (the engine's interpreted tier, the
reference explorer), on states whose array fields are numpy arrays, so they keep to what numba
compiles: integers, indexing (``s.log[b][i]``, ``s.log[b, i]``, slices), numpy's array methods,
loops and calls to other such functions (docs/writing-a-spec.md, "Action functions").

Per-run configuration (protocol switches, bounds) belongs in ``Const`` fields: they cost no bits in
the packed state and are read like any other field.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import sys
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable, Mapping, Optional, Sequence

from kraftcheck.checker.errors import SpecError, UsageError
from kraftcheck.checker.imported_source import pin_imported_folder

# ----------------------------------------------------------------------------------------------
# State layout


@dataclass(frozen=True)
class Field:
    """One named state variable: a scalar or a fixed-shape array of integers in ``lo..lo+domain-1``.

    ``kind`` says only how a value is shown: ``int``, ``bool``, ``enum`` (``labels`` name the
    values) or ``set`` (a bitmask; ``labels`` name the members, bit i is ``labels[i]``).
    ``axis_labels`` name the positions of each axis (``None`` for an axis shown by number);
    ``index_labels`` is the first axis's, which lanes and symmetry read (giving only it is the
    same as ``axis_labels=(index_labels,)``). ``axis_names`` name the axes themselves
    (``("acceptor", "ballot", "value")``): trace tables then show an element with its axes
    named, ``votes[acceptor=a1, ballot=0, value=v2]``. A field with ``const`` set holds that value in every
    state and takes no bits. ``lo`` is the smallest value (``Int("max_bal", -1, 2)``): actions and
    traces see the value itself, the packed state holds ``value - lo``.
    """

    name: str
    domain: int
    shape: tuple[int, ...] = ()
    kind: str = "int"
    labels: tuple[str, ...] | None = None
    index_labels: tuple[str, ...] | None = None
    const: int | None = None
    doc: str = ""
    lo: int = 0
    axis_labels: tuple[tuple[str, ...] | None, ...] | None = None
    axis_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise SpecError(f"field name {self.name!r} is not a Python identifier")
        shape = self.shape
        if isinstance(shape, numbers.Integral) or not isinstance(shape, (tuple, list)) or \
                not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in shape):
            example = f"({shape},)" if isinstance(shape, numbers.Integral) else "(3,) or (2, 3)"
            raise SpecError(f"field {self.name}: shape must be a tuple of axis lengths, got {shape!r}: write "
                            f"{example} (() for a scalar)")
        object.__setattr__(self, "shape", tuple(int(n) for n in shape))
        for what in ("labels", "index_labels"):
            _refuse_one_string(f"field {self.name}", what, getattr(self, what))
        if self.domain < 1:
            raise SpecError(f"field {self.name}: domain must be at least 1, got {self.domain}")
        if self.domain > 2**31:
            raise SpecError(f"field {self.name}: domain {self.domain} exceeds the int32 range")
        if not -2**31 <= self.lo <= self.lo + self.domain - 1 < 2**31:
            raise SpecError(f"field {self.name}: values {self.lo}..{self.lo + self.domain - 1} exceed the int32 range")
        if any(n < 1 for n in self.shape):
            raise SpecError(f"field {self.name}: every dimension of shape must be >= 1")
        if self.kind not in ("int", "bool", "enum", "set"):
            raise SpecError(f"field {self.name}: unknown kind {self.kind!r}")
        if self.lo and self.kind != "int":
            raise SpecError(f"field {self.name}: only an Int field can start below or above 0")
        if self.const is not None and not self.lo <= self.const < max(self.lo + self.domain, self.const + 1):
            raise SpecError(f"field {self.name}: const value must be >= {self.lo}")
        self._settle_axis_labels()
        if self.axis_names is not None:
            names = tuple(self.axis_names)
            object.__setattr__(self, "axis_names", names)
            if len(names) != len(self.shape) or not all(isinstance(n, str) and n.isidentifier() for n in names) \
                    or len(set(names)) != len(names):
                raise SpecError(f"field {self.name}: axis_names must give each of its {len(self.shape)} axes its own "
                                f"name (a Python identifier), got {names!r}")

    def _settle_axis_labels(self) -> None:
        """Make ``axis_labels`` (one entry per axis) and ``index_labels`` (its first) agree."""
        axes = self.axis_labels
        if axes is not None:
            axes = tuple(None if a is None else tuple(str(x) for x in a) for a in axes)
            if len(axes) != len(self.shape):
                raise SpecError(f"field {self.name}: axis_labels must have one entry per axis of shape "
                                f"{self.shape} (None for an axis shown by number), got {len(axes)}")
            if self.index_labels is not None and tuple(self.index_labels) != axes[0]:
                raise SpecError(f"field {self.name}: give the first axis's labels once, in axis_labels or "
                                "index_labels")
            object.__setattr__(self, "index_labels", axes[0])
        elif self.index_labels is not None:
            axes = (tuple(self.index_labels),) + (None,) * max(len(self.shape) - 1, 0)
        if axes is not None and not any(axes):
            axes = None
        object.__setattr__(self, "axis_labels", axes)
        for axis, labels in enumerate(axes or ()):
            if labels is None:
                continue
            which = "index_labels" if axis == 0 else f"axis_labels[{axis}]"
            if not self.shape or len(labels) != self.shape[axis]:
                raise SpecError(f"field {self.name}: {which} must name every position of axis {axis} "
                                f"({self.shape[axis] if self.shape else 0}), got {len(labels)}")
            if len(set(labels)) != len(labels):
                raise SpecError(f"field {self.name}: {which} repeats a label")

    @property
    def size(self) -> int:
        """Number of integers the field holds."""
        return math.prod(self.shape)

    @property
    def hi(self) -> int:
        """The largest value the field can hold."""
        return self.lo + self.domain - 1

    @property
    def bits(self) -> int:
        """Bits one element needs in the packed state (0 for constants and one-value domains)."""
        if self.const is not None:
            return 0
        return (self.domain - 1).bit_length()

    def position_label(self, axis: int, i: int) -> str:
        """How position ``i`` of axis ``axis`` is written in an element's name: its label, or ``i``."""
        labels = self.axis_labels[axis] if self.axis_labels else None
        return labels[i] if labels is not None else str(i)

    def show_value(self, v: int) -> Any:
        """One element's value as a person reads it."""
        if self.kind == "bool":
            return bool(v)
        if self.kind == "enum" and self.labels is not None:
            return self.labels[v] if 0 <= v < len(self.labels) else v
        if self.kind == "set":
            names = self.labels or tuple(str(i) for i in range(self.domain.bit_length()))
            return [names[i] for i in range(len(names)) if v >> i & 1]
        return v


def _refuse_one_string(who: str, what: str, names: Any) -> None:
    """Refuse ``names`` given as one string where a sequence of names belongs: ``("idle")`` is the
    string "idle", which Python takes for the names i, d, l, e."""
    if isinstance(names, str):
        raise SpecError(f"{who}: {what} is the string {names!r}, which would be read as the names "
                        f"{', '.join(map(repr, names[:4]))}{'...' if len(names) > 4 else ''}; give a tuple of names: "
                        f"({names!r},) for one (a trailing comma makes a tuple)")


def Int(name: str, lo_or_maximum: int, hi: int | tuple[int, ...] | None = None, shape: tuple[int, ...] = (),
        **kw: Any) -> Field:
    """An integer field: ``Int(name, maximum)`` holds ``0..maximum``, ``Int(name, lo, hi)`` holds
    ``lo..hi`` (``Int("max_bal", -1, 2)``: the value -1 is read, written and shown as -1). Either
    form takes a ``shape`` after the bounds, positionally or by keyword."""
    if isinstance(hi, (tuple, list)):  # Int(name, maximum, shape): the form every older spec uses
        if shape:
            raise SpecError(f"field {name}: Int(name, maximum, shape) given a second shape {shape}")
        hi, shape = None, tuple(hi)
    lo, top = (0, lo_or_maximum) if hi is None else (lo_or_maximum, hi)
    if isinstance(lo, bool) or isinstance(top, bool) or not isinstance(lo, int) or not isinstance(top, int):
        raise SpecError(f"field {name}: Int bounds must be integers, got {lo_or_maximum!r} and {hi!r}")
    if hi is None and top < 0:  # Int(name, -1) read as a maximum: say how to write a range from -1
        raise SpecError(f"field {name}: Int({name!r}, {top}) holds 0..{top}, which is empty; for values from "
                        f"{top} up write Int({name!r}, {top}, hi)")
    if top < lo:
        raise SpecError(f"field {name}: Int({name!r}, {lo}, {top}) is empty; the upper bound must be >= the lower")
    return Field(name, top - lo + 1, tuple(shape), "int", lo=lo, **kw)


def Bool(name: str, shape: tuple[int, ...] = (), **kw: Any) -> Field:
    """A boolean field (0 or 1)."""
    return Field(name, 2, shape, "bool", **kw)


def Enum(name: str, labels: Sequence[str], shape: tuple[int, ...] = (), **kw: Any) -> Field:
    """A field whose values ``0..len(labels)-1`` are named by ``labels``."""
    _refuse_one_string(f"field {name}", "Enum's labels", labels)
    return Field(name, len(labels), shape, "enum", labels=tuple(labels), **kw)


def Set(name: str, members: Sequence[str], shape: tuple[int, ...] = (), **kw: Any) -> Field:
    """A subset of ``members`` held as a bitmask: bit i stands for ``members[i]``."""
    _refuse_one_string(f"field {name}", "Set's members", members)
    return Field(name, 2 ** len(members), shape, "set", labels=tuple(members), **kw)


def Const(name: str, value: int, kind: str = "int", labels: Sequence[str] | None = None, **kw: Any) -> Field:
    """A per-run setting: the same value in every state, free in the packed encoding."""
    if not isinstance(value, numbers.Integral):  # 2.5 was taken, and the first step "changed" it to 2
        raise SpecError(f"field {name}: a Const holds an integer, got {value!r} (a {type(value).__name__}); "
                        f"keep other settings in the spec's Params and give the Const a number")
    value = int(value)
    if value < 0:  # a negative setting is an Int field of one value
        return Field(name, 1, (), kind, labels=tuple(labels) if labels else None, const=value, lo=value, **kw)
    return Field(name, value + 1, (), kind, labels=tuple(labels) if labels else None, const=value, **kw)


# ----------------------------------------------------------------------------------------------
# Actions and properties


@dataclass(frozen=True)
class Param:
    """One parameter of an action: an integer ``0..count-1``, shown through ``labels``."""

    name: str
    count: int
    labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # a count that is no integer was an internal error; a negative one an action never tried
        if not isinstance(self.count, numbers.Integral) or isinstance(self.count, bool) or self.count < 0:
            raise SpecError(f"action parameter {self.name}: count must be a whole number of values (0..count-1), "
                            f"got {self.count!r}")
        object.__setattr__(self, "count", int(self.count))
        if self.labels is not None:
            _refuse_one_string(f"action parameter {self.name}", "labels", self.labels)
            labels = tuple(str(x) for x in self.labels)
            if len(labels) != self.count:  # a value without a label was an internal error in traces
                raise SpecError(f"action parameter {self.name}: labels must name each of its {self.count} values, "
                                f"got {len(labels)}: {labels!r}")
            object.__setattr__(self, "labels", labels)

    def show(self, v: int) -> Any:
        return self.labels[v] if self.labels is not None else v


def _refuse_name_and_function(kind: str, name: Any, fn: Any, example: str) -> None:
    """Refuse a declaration whose name is no string or whose function is no function: the two
    swapped (``Invariant(ok, "Ok")``) were an internal error or a message about a "plain Python
    function" named by numba's repr."""
    if not isinstance(name, str) or not name or not callable(fn):
        raise SpecError(f"{kind} {getattr(getattr(name, 'py_func', name), '__name__', name)!r}: the name comes first, "
                        f"then the function: {example}, not {type(name).__name__}, {type(fn).__name__}")


@dataclass(frozen=True)
class Action:
    """A named action ``fn(s, t, *params) -> bool``, instantiated for every parameter value."""

    name: str
    fn: Callable[..., bool]
    params: tuple[Param, ...] = ()
    doc: str = ""

    def __post_init__(self) -> None:
        _refuse_name_and_function("action", self.name, self.fn, 'Action("Name", fn, (Param("i", 3),))')
        # a single Param where a sequence of them belongs was an internal error deep in the build
        if isinstance(self.params, Param) or not isinstance(self.params, (tuple, list)) or \
                not all(isinstance(p, Param) for p in self.params):
            raise SpecError(f"action {self.name}: params is {self.params!r}; give a tuple of Param, "
                            f"one for each parameter after (s, t): params=(Param(\"i\", 3),)")
        object.__setattr__(self, "params", tuple(self.params))
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):  # a trace shows the values by name: one of them would be lost
            raise SpecError(f"action {self.name}: two of its parameters are named "
                            f"{next(n for n in names if names.count(n) > 1)!r}; give each its own name")

    @property
    def instances(self) -> int:
        return math.prod(p.count for p in self.params)

    def param_values(self, flat: int) -> tuple[int, ...]:
        """The parameter tuple of instance ``flat`` (the last parameter varies fastest)."""
        values = []
        for p in reversed(self.params):
            flat, v = divmod(flat, p.count)
            values.append(v)
        return tuple(reversed(values))

    def flat_index(self, values: Sequence[int]) -> int:
        flat = 0
        for p, v in zip(self.params, values):
            if not 0 <= v < p.count:
                raise SpecError(f"action {self.name}: {p.name}={v} outside 0..{p.count - 1}")
            flat = flat * p.count + v
        return flat


@dataclass(frozen=True)
class Invariant:
    """A named predicate ``fn(s) -> bool`` that must hold in every reachable state."""

    name: str
    fn: Callable[..., bool]
    doc: str = ""

    def __post_init__(self) -> None:
        _refuse_name_and_function("invariant", self.name, self.fn, 'Invariant("Name", fn)')


@dataclass(frozen=True)
class TransitionProperty:
    """A named predicate ``fn(s, t) -> bool`` that must hold for every transition s -> t."""

    name: str
    fn: Callable[..., bool]
    doc: str = ""

    def __post_init__(self) -> None:
        _refuse_name_and_function("transition property", self.name, self.fn, 'TransitionProperty("Name", fn)')


@dataclass(frozen=True)
class Constraint:
    """A state constraint (TLC's ``CONSTRAINT``): ``fn(s) -> bool``. A state that breaks it is
    counted as generated and checked against the invariants, but it is not kept as a distinct
    state and not expanded: the search stays inside the states that satisfy every constraint."""

    name: str
    fn: Callable[..., bool]
    doc: str = ""

    def __post_init__(self) -> None:
        _refuse_name_and_function("constraint", self.name, self.fn, 'Constraint("Name", fn)')


@dataclass(frozen=True)
class ActionConstraint:
    """An action constraint (TLC's ``ACTION_CONSTRAINT``): ``fn(s, t) -> bool``. A transition
    s -> t that breaks it is not taken: as with a state constraint, TLC still counts t as
    generated and checks it against the invariants (and the transition against the transition
    properties), but t is not kept or expanded from there."""

    name: str
    fn: Callable[..., bool]
    doc: str = ""

    def __post_init__(self) -> None:
        _refuse_name_and_function("action constraint", self.name, self.fn, 'ActionConstraint("Name", fn)')


# ----------------------------------------------------------------------------------------------
# Presentation hooks (traces): who owns which state, where an action happens, what "available" means


@dataclass(frozen=True)
class LaneTouch:
    """Where one action instance happens, for trace pictures and sequence diagrams.

    ``lane`` is the lane the action runs on; ``receives_from`` are lanes whose message it consumes
    (drawn as arrows into ``lane``); ``sends_to`` are lanes it sends a message to (arrows out).
    """

    lane: str
    receives_from: tuple[str, ...] = ()
    sends_to: tuple[str, ...] = ()


@dataclass(frozen=True)
class Predicate:
    """A named condition on states for the graph analyses (``--availability``, liveness): the words a
    report uses for it, and ``holds(columns)``, which gets a batch of states as columns (field name
    -> numpy array whose first axis is the state, ``Layout.columns``) and returns a boolean array.
    Write it with numpy operators (``<``, ``==``, ``&``, ``|``, ``~``, ``.all(axis=1)``), not ``and``
    / ``or`` / ``any()``: it runs on millions of states at once."""

    description: str  # e.g. "the partition has a leader"
    holds: Callable[[Mapping[str, Any]], Any]


#: What "the system can serve" means for ``--availability``.
Availability = Predicate


@dataclass(frozen=True)
class Fairness:
    """A fairness requirement of a liveness property: weak (``WF``) or strong (``SF``) fairness of
    the disjunction of the actions ``actions`` names (TLA+'s ``WF_vars(A \\/ B)``). Each name is an
    action as a whole (``Phase2a``: any of its instances), an instance or a partly bound one
    (``Phase2a(b=1)``: every instance whose parameter ``b`` shows as ``1``, whatever the others), or,
    alone, ``Name(*)``: one requirement per instance (``\\A p: WF(Name(p))``).

    Weak: the behaviour may not keep the disjunction enabled forever without taking it. Strong:
    it may not enable it infinitely often without taking it. Names are checked against the model
    before exploring (``checker.analyses.liveness.fairness_requirements``). Write ``WF(...)`` or
    ``SF(...)``; a plain string in ``Liveness.fair`` is weak fairness of that one name."""

    strong: bool
    actions: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.actions, str):
            raise SpecError(f"Fairness actions must be a tuple of names, e.g. ({self.actions!r},), not one string")
        object.__setattr__(self, "actions", tuple(self.actions))  # hashable and fixed, whatever was passed
        if not self.actions or not all(isinstance(a, str) and a.strip() for a in self.actions):
            raise SpecError(f"{self.kind}() needs one or more action names, e.g. {self.kind}(\"Fetch\", "
                            f"\"Phase2a(b=1)\"); got {self.actions!r}")
        if len(self.actions) > 1 and any(a.replace(" ", "").endswith("(*)") for a in self.actions):
            raise SpecError(f"{self.kind}{self.actions!r}: Name(*) stands alone (one requirement per instance), "
                            "not in a disjunction; declare it separately")

    @property
    def kind(self) -> str:
        return "SF" if self.strong else "WF"

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(self.actions)})"


def WF(*actions: str) -> Fairness:
    """Weak fairness of the disjunction of ``actions`` (see ``Fairness``)."""
    return Fairness(False, tuple(actions))


def SF(*actions: str) -> Fairness:
    """Strong fairness of the disjunction of ``actions`` (see ``Fairness``)."""
    return Fairness(True, tuple(actions))


@dataclass(frozen=True)
class Liveness:
    """A liveness property checked by ``kraftcheck check --liveness``, under the fairness ``fair``
    declares: ``after`` leads to ``eventually`` (TLA+'s ``after ~> eventually``: whenever ``after``
    holds, ``eventually`` holds then or later); without ``after``, ``eventually`` holds infinitely
    often (``[]<>eventually``); with ``once=True`` (and no ``after``), every behaviour reaches
    ``eventually`` at least once from its initial state (``<>eventually``).

    ``fair``: ``WF(...)`` / ``SF(...)`` requirements (``Fairness``), or plain strings, each weak
    fairness of that one name. A step that leaves the state unchanged takes nothing."""

    name: str
    eventually: Predicate
    after: Predicate | None = None
    fair: tuple[str | Fairness, ...] = ()
    doc: str = ""
    once: bool = False

    def __post_init__(self) -> None:
        if self.once and self.after is not None:
            raise SpecError(f"liveness property {self.name}: once=True is <>eventually from the initial states; "
                            "it takes no after= (write after ~> eventually without once)")
        for p, what in ((self.eventually, "eventually"), (self.after, "after")):
            if p is not None and not isinstance(p, Predicate):
                raise SpecError(f"liveness property {self.name}: {what} must be a Predicate, not {type(p).__name__}")
        if isinstance(self.fair, (str, Fairness)):
            raise SpecError(f"liveness property {self.name}: fair must be a tuple of requirements, e.g. "
                            f"fair=({str(self.fair)!r},), not one {type(self.fair).__name__}")
        for entry in self.fair:
            if not isinstance(entry, (str, Fairness)):
                raise SpecError(f"liveness property {self.name}: fairness entry {entry!r} is neither a name nor "
                                "WF(...) / SF(...)")

    def formula(self) -> str:
        goal = self.eventually.description
        if self.once:
            return f"<>({goal})"
        return f"[]<>({goal})" if self.after is None else f"({self.after.description}) ~> ({goal})"


# ----------------------------------------------------------------------------------------------
# Symmetry (``--symmetry``): which permutations of a value set map states to states


@dataclass(frozen=True)
class Permuted:
    """How field ``field`` moves when the symmetric values are permuted.

    ``axes``: the axes of the field indexed by the values (``(0,)`` for a per-broker array,
    ``(0, 1)`` for a broker x broker one). ``holds``: what an element holds, ``"member"`` (a value's
    index; larger values such as "none" are kept), ``"subset"`` (a bitmask of values) or
    ``"other"``. ``unless=(field, value)``: while scalar field ``field`` holds ``value`` this field
    is a filler (say 0 for "no sender") and is not a member, so it is left as it is.
    """

    field: str
    axes: tuple[int, ...] = ()
    holds: str = "other"
    unless: Optional[tuple[str, int]] = None

    def __post_init__(self) -> None:
        if not isinstance(self.axes, (tuple, list)) or \
                not all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in self.axes):
            example = f"({self.axes},)" if isinstance(self.axes, numbers.Integral) else "(0,) or (0, 1)"
            raise SpecError(f"symmetry: field {self.field}: axes must be a tuple of the axes the values index, got "
                            f"{self.axes!r}: write axes={example}")
        object.__setattr__(self, "axes", tuple(int(a) for a in self.axes))
        if self.holds not in ("member", "subset", "other"):
            raise SpecError(f"symmetry: field {self.field}: holds must be member, subset or other, not {self.holds!r}")


@dataclass(frozen=True)
class Symmetry:
    """The spec's claim that permuting the values ``labels`` (0..n-1: the brokers) maps every state
    to a state, every transition to a transition, every initial state's successors to successors,
    and keeps every invariant's and property's verdict. ``fields`` say how each field moves; a field
    not named is left as it is. ``checker.symmetry`` checks the declaration against the fields'
    own metadata (``index_labels``, ``Set`` and ``Enum`` labels) so that no per-value field is
    forgotten. A spec with several sets of interchangeable values (acceptors and values) declares
    one ``Symmetry`` per set, TLC's ``Permutations(A) \\cup Permutations(V)``: permuting them
    all at once (their product group) is the claim then, and a field may move with several sets
    (axes indexed by acceptors, values that name values)."""

    labels: tuple[str, ...]
    fields: tuple[Permuted, ...]

    def __post_init__(self) -> None:
        _refuse_one_string("symmetry", "labels", self.labels)
        if isinstance(self.fields, Permuted) or not isinstance(self.fields, (tuple, list)) or \
                not all(isinstance(p, Permuted) for p in self.fields):
            raise SpecError(f"symmetry: fields must be a tuple of Permuted, one per field that moves, "
                            f"(Permuted(\"f\", axes=(0,)),), got {self.fields!r:.120}")
        object.__setattr__(self, "labels", tuple(self.labels))
        object.__setattr__(self, "fields", tuple(self.fields))

    @property
    def size(self) -> int:
        return len(self.labels)


# ----------------------------------------------------------------------------------------------
# Parameters


def param(default: Any, help: str, *, minimum: int | None = None, maximum: int | None = None,
          choices: Sequence[Any] | None = None) -> Any:
    """Declare one spec parameter inside a ``Params`` dataclass, with its help and allowed range."""
    meta = {"help": help, "min": minimum, "max": maximum, "choices": tuple(choices) if choices else None}
    return dataclasses.field(default=default, metadata=meta)


def annotation_kind(f: dataclasses.Field) -> type:
    """int, bool or str, from a parameter's annotation (``int``, ``Optional[int]``, ``str | None``...)."""
    text = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    for name, kind in (("bool", bool), ("int", int), ("str", str)):
        if name in text:
            return kind
    return str


def validate_params(params: Any) -> None:
    """Check every parameter against its declared type, range and choices."""
    for f in dataclasses.fields(params):
        v = getattr(params, f.name)
        meta = f.metadata
        if v is None and f.default is None:  # "not given": the spec picks its own default
            continue
        expected = annotation_kind(f)
        if expected is int and (not isinstance(v, int) or isinstance(v, bool)):
            raise UsageError(f"parameter {f.name} must be an integer, got {v!r}")
        if expected is bool and not isinstance(v, bool):
            raise UsageError(f"parameter {f.name} must be true or false, got {v!r}")
        if expected is str and not isinstance(v, str):
            raise UsageError(f"parameter {f.name} must be a string, got {v!r}")
        lo, hi = meta.get("min"), meta.get("max")
        if lo is not None and v < lo or hi is not None and v > hi:
            raise UsageError(f"parameter {f.name}={v} is out of range: allowed {lo}..{hi}")
        if meta.get("choices") and v not in meta["choices"]:
            allowed = ", ".join(map(str, meta["choices"]))
            raise UsageError(f"parameter {f.name}={v!r} is not allowed: choose one of {allowed}")


# ----------------------------------------------------------------------------------------------
# The spec


class Spec:
    """Base class of every model. Subclasses set ``name``, ``summary`` and ``Params``."""

    name: ClassVar[str]
    summary: ClassVar[str]
    Params: ClassVar[type]
    #: Small parameter sets (keyword dicts for ``Params``) on which the conformance tests compare
    #: every explorer with the reference explorer; keep each to a few thousand states.
    examples: ClassVar[tuple[dict[str, Any], ...]] = ()
    #: Parameter sets on which the conformance tests compare every explorer under ``--symmetry``
    #: (only for a spec that declares a symmetry).
    symmetric_examples: ClassVar[tuple[dict[str, Any], ...]] = ()
    #: Whether a reachable state with no successor other than itself is an error (a violation of
    #: kind ``deadlock``), as TLC's ``CHECK_DEADLOCK`` (on by default, as in TLC). A spec whose
    #: terminal states are intended (a protocol that finishes) sets it to False and says why in
    #: its docstring; ``--deadlock`` / ``--no-deadlock`` override it for one run.
    check_deadlock: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # the spec's module is being imported: its files' digests now are the code's in memory
        # (a file saved later, during a run, is not compiled into it: imported_source)
        module = sys.modules.get(cls.__module__)
        pin_imported_folder(getattr(module, "__file__", None), module)

    def __init__(self, params: Any = None) -> None:
        if not dataclasses.is_dataclass(getattr(self, "Params", None)):  # an internal error in validate_params
            raise SpecError(f"spec {getattr(self, 'name', type(self).__name__)}: Params must be a dataclass, "
                            f"@dataclass(frozen=True) class ...Params: with fields declared by param(...), got "
                            f"{getattr(self, 'Params', None)!r}")
        self.params = params if params is not None else self.Params()
        validate_params(self.params)
        self.check_params()

    def check_params(self) -> None:
        """Reject contradictory parameter combinations with a UsageError (override as needed)."""

    # -- what a spec declares
    def fields(self) -> list[Field]:
        raise NotImplementedError

    def initial_states(self) -> Iterable[dict[str, Any]]:
        raise NotImplementedError

    def actions(self) -> list[Action]:
        raise NotImplementedError

    def invariants(self) -> list[Invariant]:
        return []

    def properties(self) -> list[TransitionProperty]:
        return []

    def constraints(self) -> list[Constraint]:
        """State constraints (TLC's CONSTRAINT): the search keeps only states that satisfy them."""
        return []

    def action_constraints(self) -> list[ActionConstraint]:
        """Action constraints (TLC's ACTION_CONSTRAINT): transitions that break one are not taken."""
        return []

    # -- optional presentation hooks, used by traces (never by the engine)
    main_lane: ClassVar[str] = "global"

    def lanes(self) -> dict[str, tuple[str, ...]]:
        """Lane name -> the state it owns, for trace tables, pictures and sequence diagrams.

        A lane is a participant: the controller, each broker. Its state is named by selectors:
        ``"field"`` (the whole field) or ``"field[label]"`` (one position of the field's first
        axis, named by its ``index_labels``). The first lane is the main one (``--broker B`` keeps
        it beside lane B). Every non-constant field element must belong to exactly one lane.

        Default: the participants are the most used ``index_labels`` (the brokers, say, rather than
        the record numbers some ghost fields are indexed by): position ``label`` of every field
        indexed by them belongs to lane ``label`` (``rm_state[rm1]`` to lane ``rm1``); every other
        field to lane ``main_lane``. Override when a per-broker array is really the controller's
        (its copy of each broker's epoch).
        """
        fields = [f for f in self.fields() if f.const is None]
        label_sets = [f.index_labels for f in fields if f.index_labels is not None]
        participants = max(label_sets, key=label_sets.count) if label_sets else None
        out: dict[str, list[str]] = {}
        for f in fields:
            if f.index_labels is None or f.index_labels != participants:
                out.setdefault(self.main_lane, []).append(f.name)
        for f in fields:
            if f.index_labels is not None and f.index_labels == participants:
                for label in f.index_labels:
                    out.setdefault(label, []).append(f"{f.name}[{label}]")
        return {lane: tuple(sel) for lane, sel in out.items()}

    def action_lanes(self, action: str, params: dict[str, Any]) -> LaneTouch | None:
        """Where action ``action`` with shown parameter values ``params`` happens.

        None (default): traces derive it from each step: the action runs on the lane of a
        parameter whose state changed (else on the first lane whose state changed); it sends to the
        other lanes whose state changed and receives from parameter lanes whose state did not.
        """
        return None

    def trace_terms(self, model: Any, steps: Sequence[tuple[Optional[int], tuple[int, ...]]]) -> Optional[dict]:
        """A trace in the domain's own terms, for ``kraftcheck trace show / render / export /
        report`` (``--model-names`` skips it): given the model and the trace's steps (label or None,
        flat state), plain data as ``traces/spec_terms.py`` describes. None (the default): traces
        show the spec's fields."""
        return None

    def availability(self) -> Availability | None:
        """What ``--availability`` checks can always be regained; None: the spec offers no such
        analysis (the default)."""
        return None

    def liveness(self) -> list[Liveness]:
        """The liveness properties ``--liveness`` checks, each with its fairness; default none."""
        return []

    def symmetry(self) -> Optional[Symmetry | Sequence[Symmetry]]:
        """The permutations that map this model's states and transitions to its own, for
        ``--symmetry``: a ``Symmetry``, or a list of them for several sets of interchangeable
        values; None (the default): the model declares none, and --symmetry is refused.
        Raise a UsageError to say why these parameters are not symmetric."""
        return None

    def stricter_variant(self) -> Optional[tuple[str, "Spec"]]:
        """(what it is, spec) of a variant whose behaviours are some of this model's (the real
        system's, when this one over-approximates it), or None. Each counterexample is replayed on
        it: does the real system have it too?"""
        return None

    def availability_variants(self) -> dict[str, Any]:
        """Name -> ``Params`` of the settings ``--availability`` compares (e.g. one per recovery
        strategy). Default: empty, meaning only the run's own settings."""
        return {}

    def smaller_model_hint(self) -> str:
        """How to make this model's state space smaller, said to a user whose run is too large for a
        limit ('..., or to shrink the model, HINT'): an imperative phrase. Default: smaller values of
        its integer parameters, or a state constraint; a spec whose parameters say more (which of
        them are bounds) says it here."""
        constraint = "add a state constraint that bounds the search (Spec.constraints)"
        if not dataclasses.is_dataclass(self.Params):
            return f"give smaller parameters or {constraint}"
        numbers = [f.name for f in dataclasses.fields(self.Params) if annotation_kind(f) is int]
        if not numbers:  # switches and choices only: nothing to lower
            return constraint
        named = numbers[0] if len(numbers) == 1 else ", ".join(numbers[:-1]) + f" or {numbers[-1]}"
        return f"give smaller values of {named} (--param {numbers[0]}=N) or {constraint}"

    # -- identity
    def options(self) -> dict[str, Any]:
        """Every option that shapes the state graph, for reports and trace files."""
        return dataclasses.asdict(self.params)

    def changed_options(self) -> dict[str, Any]:
        """The options whose values differ from the spec's defaults (all of them when ``Params()``
        cannot be built: a parameter without a default, or defaults the spec itself refuses)."""
        try:
            defaults = dataclasses.asdict(self.Params())
        except Exception:  # noqa: BLE001 - the spec's own code: the run's parameters are valid, only a headline
            defaults = {}
        return {k: v for k, v in self.options().items() if defaults.get(k, object()) != v}

    def title(self) -> str:
        """The spec's name and only the options that differ from its defaults, for headers."""
        changed = self.changed_options()
        shown = ", ".join(f"{k}={v}" for k, v in changed.items()) if changed else "default options"
        return f"{self.name} ({shown})"

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"{self.name}({args})"
