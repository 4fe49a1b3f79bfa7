"""Breadth-first search with stubborn sets: how much a safety-preserving partial-order reduction
would leave out of a model's state space, in plain Python, for measuring (bench/partial_order.py).

At every state the search expands the enabled instances of a *stubborn set* of action instances
instead of all of them (Valmari, "Stubborn sets for reduced state space generation", Advances in
Petri Nets 1990, LNCS 483). Both reductions below share its closure:

* an enabled instance in the set brings in every instance dependent on it (``access.dependent``:
  one may write what the other reads or writes, on any state);
* a disabled one brings in a *necessary enabling set*: every instance that may write an element
  it read on this state while declining (the fields it read, recorded as it ran, crossed with the
  elements its source may read, ``access.action_accesses``). An action is deterministic: on any
  state that agrees on those elements it reads the same and declines again.

So along any path from the state that uses no instance of the set, the disabled ones stay
disabled and the enabled ones stay enabled and commute with every step taken: a path ``v a w``
with ``a`` the first instance of the set on it can be reordered ``a v w``, to the same state,
with ``a`` expanded here.

``visible``: the ample sets of Peled ("All from one, one for all: on model checking using
representatives", CAV 1993; Clarke, Grumberg and Peled, *Model Checking*, MIT Press 1999, ch. 10),
which keep every sequence of *visible* values (the elements the selected checks read,
``access.visible_positions``) up to repetition:

* C0, C1: the closure of one enabled seed, the smallest over every seed;
* C2: a state is expanded in full unless its ample set holds no visible instance (one that may
  write a visible element);
* C3, for breadth-first search: a state is expanded in full unless every successor of its ample
  set is a state not visited yet (and not itself). On a cycle of the reduced graph, the edge into
  the state visited first leaves a state that found it visited, which was therefore expanded in
  full: every cycle holds a fully expanded state, Peled's cycle condition. (Bošnački, Leue and
  Lluch Lafuente, "Partial-order reduction for general state exploring algorithms", SPIN 2006,
  LNCS 3925, study weaker provisos for BFS; this is the plainest sound one.)

An invariant reads only visible elements, so it is violated in the reduced graph if and only if
in the full one. A transition property P(s, t) reads visible elements too: a step that changes a
visible element is kept (as its visible values); one that changes none is judged as P(x, x),
which the reduced search evaluates on every state it reaches; where that is false it cannot
decide P (``Reduced.undecided``). A violation it finds is real, but the trace need not be the
shortest (the step a check reads may be put off).

``reach``: reachability of each check's violation, with *up-sets* (Schmidt, "Stubborn sets for
standard properties", ICATPN 1999, LNCS 1639): the set is the closure of, for every invariant that
holds on the state, the instances that may write an element it read there (a violation further on
needs one of them first), and for every transition property, every instance that may write
something it reads, and the instances that may write what P(x, x) read on the state. Take a
shortest path from a reached state to a violation: it holds an instance of the set (the up-set),
the first of them is enabled here (else it would stay disabled) and moves to the front, and the
rest is one step shorter; by induction the reduced graph reaches the same violation in as many
steps. (A state where P(x, x) is false is expanded in full: a step from it that writes nothing P
reads violates P.) So each check is violated if and only if it is in the full graph, at the same (shortest)
depth, and no cycle proviso is needed; a state from which no check can change is not expanded.

``dependence`` drops C2: it preserves no check's verdict, and shows what the dependency relation
alone would let a reduction leave out.

Not taken: symmetry, state or action constraints, fingerprints, limits, and the deadlock check
(the model's ``check_deadlock`` must be off: a state whose only successors are itself needs its
own care).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from kraftcheck.checker.access import action_accesses, check_accesses, dependent, visible_positions
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.layout import state_copier
from kraftcheck.checker.model import Model, python_function


@dataclass
class Reduced:
    """What a reduced search found: counts as the reference explorer's (distinct, generated,
    depth), the checks violated with the depth of the first violating state met, and how often
    each condition forced a state to be expanded in full."""

    distinct: int = 0
    generated: int = 0
    depth: int = 0
    violated: dict = field(default_factory=dict)  # check name -> depth (states) of the first violation met
    undecided: set = field(default_factory=set)  # transition properties P(x, x) false somewhere: not decided
    reduced_states: int = 0  # states expanded by a proper subset of their enabled instances
    full_single: int = 0  # states with at most one enabled instance (nothing to reduce)
    full_visible: int = 0  # fully expanded: every stubborn set held an enabled visible instance
    full_stubborn: int = 0  # fully expanded: the smallest stubborn set held every enabled instance
    full_proviso: int = 0  # fully expanded by C3: an ample successor was visited already


class _Recorder:
    """A state handed to an action in place of the state itself, recording the fields read."""

    __slots__ = ("_state", "_read")

    def __init__(self, state, read: set) -> None:
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_read", read)

    def __getattr__(self, name):
        self._read.add(name)
        return getattr(self._state, name)

    def __setattr__(self, name, value) -> None:
        setattr(self._state, name, value)


def _bits(mask: int):
    """The positions of a bit set's members, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


MODES = ("none", "visible", "reach", "dependence")


class _Sets:
    """The static relations between instances that the stubborn sets are built from."""

    def __init__(self, model: Model) -> None:
        layout = model.layout
        access = action_accesses(model)
        n = len(access)
        visible, _ = visible_positions(model)
        self.visible = sum(1 << i for i, a in enumerate(access) if a.writes & visible)
        self.dependents = [sum(1 << j for j in range(n) if j != i and dependent(access[i], access[j]))
                           for i in range(n)]
        writers: dict[int, int] = {}
        for j, a in enumerate(access):
            for pos in a.writes:
                writers[pos] = writers.get(pos, 0) | (1 << j)
        self.field_of = {e.flat: e.field.name for e in layout.elements}

        def by_field(reads) -> dict[str, int]:
            """Per field: the instances that may write one of ``reads``'s elements in it."""
            out: dict[str, int] = {}
            for pos in reads:
                out[self.field_of[pos]] = out.get(self.field_of[pos], 0) | writers.get(pos, 0)
            return out

        self.enablers = [by_field(a.reads) for a in access]
        check_reads = {name: a.reads for name, a in check_accesses(model).items()}
        self.invariant_writers = [by_field(check_reads[x.name]) for x in model.invariants]
        self.property_writers = [by_field(check_reads[x.name]) for x in model.properties]
        # reach: every instance that may write what a transition property reads
        self.property_relevant = 0
        for x in model.properties:
            for mask in by_field(check_reads[x.name]).values():
                self.property_relevant |= mask


def explore_reduced(model: Model, mode: str = "reach", closure: Optional[Callable[..., "Closure"]] = None) -> Reduced:
    """Breadth-first search of ``model`` to the end (``--continue``), every state expanded by a
    stubborn set: ``visible`` (C0-C3), ``reach`` (up-sets), ``none`` (the full search, for
    comparison) or ``dependence`` (C0, C1 and C3 without the visibility condition: it preserves no
    check's verdict, and measures what the dependency relation alone would let a reduction leave
    out); see the module's docstring. ``closure``: what builds the stubborn sets on a state, called as
    ``Closure`` is (default ``Closure``; bench/partial_order.py passes a subclass)."""
    if mode not in MODES:
        raise UsageError(f"unknown reduction {mode!r}; choose from: {', '.join(MODES)}")
    if model.constrained:
        raise UsageError("the partial-order reduction does not take state or action constraints")
    if model.check_deadlock:
        raise UsageError("the partial-order reduction does not check deadlocks: build the model with deadlock=False")
    layout = model.layout
    actions = [(python_function(lab.action.fn), lab.values) for lab in model.labels]
    invariants = [(inv.name, python_function(inv.fn)) for inv in model.invariants]
    properties = [(p.name, python_function(p.fn)) for p in model.properties]
    copy_state = state_copier(layout)
    sets = _Sets(model) if mode != "none" else None
    closure = closure or Closure

    out = Reduced()
    index: dict = {}

    def add(flat: tuple, depth: int) -> None:
        index[flat] = len(index)
        obj = layout.to_object(flat)
        for name, fn in invariants:
            if name not in out.violated and not fn(obj):
                out.violated[name] = depth
        if mode == "visible":
            for name, fn in properties:
                if name not in out.undecided and not fn(obj, obj):
                    out.undecided.add(name)

    frontier = []
    out.generated += model.initial_generated  # every initial state given, duplicates included (TLC's count)
    for flat in model.initial:
        if flat not in index:
            add(flat, 1)
            frontier.append(flat)
    depth = 1 if frontier else 0
    while frontier:
        following = []
        for flat in frontier:
            before = layout.to_object(flat)
            successors: dict[int, tuple] = {}
            for lab, (fn, values) in enumerate(actions):
                after = copy_state(before)
                if fn(before, after, *values):
                    successors[lab] = layout.from_object(after)
            chosen = sorted(successors)
            if mode in ("visible", "dependence"):
                if len(successors) > 1:
                    visible = sets.visible if mode == "visible" else 0
                    ample = _visible_ample(closure(successors, before, actions, sets, copy_state), visible, out)
                    if ample is not None and all(successors[lab] not in index and successors[lab] != flat
                                                 for lab in ample):
                        out.reduced_states += 1
                        chosen = ample
                    elif ample is not None:
                        out.full_proviso += 1
                elif successors:
                    out.full_single += 1
            elif mode == "reach" and successors:
                chosen = _reach_ample(closure(successors, before, actions, sets, copy_state), invariants, properties,
                                      out)
            for lab in chosen:
                succ = successors[lab]
                out.generated += 1
                after = layout.to_object(succ)
                for name, prop in properties:
                    if name not in out.violated and not prop(before, after):
                        out.violated[name] = depth + 1
                if succ not in index:
                    add(succ, depth + 1)
                    following.append(succ)
        frontier = following
        if frontier:
            depth += 1
    out.distinct, out.depth = len(index), depth
    return out


class Closure:
    """Stubborn sets on one state: the closure of a set of instances under C1. (A subclass may
    change the closure for measuring: bench/partial_order.py's optimistic bound.)"""

    def __init__(self, successors, before, actions, sets: _Sets, copy_state) -> None:
        self.successors = successors  # enabled instance -> its successor (a flat state)
        self.enabled = sum(1 << lab for lab in successors)
        self.before, self.actions, self.sets, self.copy_state = before, actions, sets, copy_state
        self._enabling: dict[int, int] = {}  # disabled instance -> its necessary enabling set here

    def necessary_enabling(self, lab: int) -> int:
        """Every instance that may write an element ``lab`` read here while declining."""
        if lab not in self._enabling:
            fn, values = self.actions[lab]
            read: set = set()
            fn(_Recorder(self.before, read), _Recorder(self.copy_state(self.before), read), *values)
            by_field = self.sets.enablers[lab]
            mask = 0
            for name in read:
                mask |= by_field.get(name, 0)
            self._enabling[lab] = mask
        return self._enabling[lab]

    def close(self, stubborn: int, stop: int = 0) -> int:
        """The smallest superset of ``stubborn`` closed under C1 (or, as soon as it meets
        ``stop``, what it has grown to)."""
        done = 0
        while stubborn & ~done and not stubborn & stop:
            lab = (stubborn & ~done).bit_length() - 1
            done |= 1 << lab
            stubborn |= self.sets.dependents[lab] if self.enabled >> lab & 1 else self.necessary_enabling(lab)
        return stubborn


def _visible_ample(closure: Closure, visible: int, out: Reduced) -> Optional[list[int]]:
    """The enabled instances of the smallest stubborn set grown from one enabled seed that holds no
    enabled ``visible`` instance (C0-C2 of the module's docstring), or None (counted) when every
    such set is all of them."""
    enabled = closure.enabled
    enabled_visible = enabled & visible
    best: Optional[int] = None
    seeds = enabled & ~visible
    for seed in _bits(seeds):
        stubborn = closure.close(1 << seed, stop=enabled_visible)
        if stubborn & enabled_visible:
            continue
        ample = stubborn & enabled
        if best is None or bin(ample).count("1") < bin(best).count("1"):
            best = ample
            if ample & (ample - 1) == 0:
                break
    if best is None or best == enabled:
        if best is None:
            out.full_visible += 1
        else:
            out.full_stubborn += 1
        return None
    return list(_bits(best))


def _reach_ample(closure: Closure, invariants, properties, out: Reduced) -> list[int]:
    """The enabled instances of the stubborn set closed over the up-sets of every check on this
    state (``reach`` in the module's docstring): for an invariant that holds here and for P(x, x)
    of a transition property, the instances that may write an element it read here; for a
    transition property, every instance that may write what it reads."""
    sets, before = closure.sets, closure.before
    required = sets.property_relevant
    for (name, fn), writers in zip(invariants, sets.invariant_writers):
        read: set = set()
        if fn(_Recorder(before, read)):
            for field_name in read:
                required |= writers.get(field_name, 0)
    for (name, fn), writers in zip(properties, sets.property_writers):
        read = set()
        if not fn(_Recorder(before, read), _Recorder(before, read)):
            # a step here that writes nothing P reads violates P: every step here is judged
            out.full_stubborn += 1
            return list(_bits(closure.enabled))
        for field_name in read:
            required |= writers.get(field_name, 0)
    ample = closure.close(required) & closure.enabled
    if ample == closure.enabled:
        out.full_stubborn += 1
    else:
        out.reduced_states += 1
    return list(_bits(ample))
