"""The reference explorer: breadth-first search in plain Python, slow and obviously correct.

States are tuples of ints; the visited set is a dict; actions run interpreted (their ``py_func``)
on ``SimpleNamespace`` objects whose arrays are lists. It shares nothing with the engine's packing,
hashing, visited set or compiled code, so when the two agree on counts, depth, verdicts and
counterexample lengths, the engine's machinery is right.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import numpy as np

from kraftcheck.checker.action_returns import bool_checked
from kraftcheck.checker.explore.result import Options, Progress, ProgressFn, Result, Step, Violation, no_progress
from kraftcheck.checker.explore.run_limits import Clock, limit_reached, stop_at_max_depth
from kraftcheck.checker.errors import KraftcheckError, SpecError, SpecRaised, spec_raised, wrote_and_declined
from kraftcheck.checker.layout import state_copier
from kraftcheck.checker.kernels.hashing import fingerprint_reference
from kraftcheck.checker.model import DEADLOCK, Model, python_arithmetic, python_function, raising_function
from kraftcheck.checker.explore.concrete import concrete_trace
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.explore.spec_raised import placed
from kraftcheck.checker.stop import raise_if_stop_requested, stop_honoured


class ReferenceExplorer:
    """Explores a model level by level, recording a parent and label for every distinct state.

    ``decide_symmetry`` (under ``--symmetry``): compare every state it expands with every other
    member of its orbit, a whole expansion per permutation of the group. A caller that checks the
    declaration otherwise (a test counting the orbits by brute force) may turn it off; the
    declaration is then tried only on the engine's first sample."""

    name = "reference"

    def __init__(self, decide_symmetry: bool = True) -> None:
        self.decide_symmetry = decide_symmetry

    @python_arithmetic
    def explore(self, model: Model, options: Options = Options(), progress: ProgressFn = no_progress,
                observer: Optional[RunObserver] = None) -> Result:
        layout = model.layout
        # each value they return checked to be a bool (``action_returns``)
        actions = [(bool_checked(f"action {lab.name}", python_function(lab.action.fn)), lab.values)
                   for lab in model.labels]
        invariants = [(inv.name, bool_checked(f"invariant {inv.name}", python_function(inv.fn)))
                      for inv in model.invariants]
        properties = [(p.name, bool_checked(f"transition property {p.name}", python_function(p.fn)))
                      for p in model.properties]
        constraints = [bool_checked(f"constraint {c.name}", python_function(c.fn)) for c in model.constraints]
        action_constraints = [bool_checked(f"action constraint {c.name}", python_function(c.fn))
                              for c in model.action_constraints]
        constrained = model.constrained
        fired = [0] * len(model.actions)
        new_states = [0] * len(model.actions)
        result = Result(model=model, engine=self.name, fired=fired, new_states=new_states)

        index: dict = {}  # state (or, with fingerprints, its fingerprint) -> its number
        # --symmetry: every state is replaced by its orbit's representative, computed here by brute
        # force on field values, sharing no code with the engine's tables and kernel
        canon = orbit_representative(model) if options.symmetry else (lambda flat: flat)
        # a declared symmetry is tried on the engine's sample before anything is explored (its
        # refusal names the field), then on every state expanded (refuse_unless_orbit_agrees)
        if options.symmetry:
            from kraftcheck.checker.explore.interpreted import InterpretedKernels
            from kraftcheck.checker.symmetry_check import SymmetryAudit, check_symmetry_interpreted
            check_symmetry_interpreted(model)
        # a state's fields are ints and numpy arrays of one buffer (Layout.to_object): copied
        # as such, faster than deepcopy
        copy_state = state_copier(layout)
        initial_source: list[int] = []  # per initial-level state: its index in model.initial

        def key(flat: tuple[int, ...]):
            if not options.fingerprints:
                return flat
            return min(fingerprint_reference(layout.pack(flat)), (1 << 64) - 2)

        parent: list[int] = []
        label_of: list[int] = []
        states: list[tuple[int, ...]] = []
        found: dict[str, Violation] = {}
        clock = Clock(options.time_limit)

        def stored_path(i: int) -> list[Step]:
            steps = []
            while i >= 0:
                steps.append(Step(label_of[i] if label_of[i] >= 0 else None, states[i]))
                i = parent[i]
            return steps[::-1]

        def step(flat: tuple[int, ...], lab: int):
            fn, values = actions[lab]
            before = layout.to_object(flat, read_only=True)
            after = copy_state(before)
            return layout.from_object(after) if fn(before, after, *values) else None

        def in_model(state, before=None, after=None) -> bool:
            """TLC's isInModel and isInActions: ``state`` (under --symmetry its orbit's
            representative) inside every state constraint, the transition ``before`` -> ``after``
            (None for an initial state) inside every action constraint."""
            return all(c(state) for c in constraints) and (before is None or all(c(before, after)
                                                                                 for c in action_constraints))

        def check_outside(obj, trace) -> bool:
            """A state outside the constraints is not kept, but TLC checks the invariants on it
            (every time it is generated); ``trace(name)`` gives its counterexample. True: stop."""
            for name, fn in invariants:
                if name not in found and not fn(obj):
                    found[name] = Violation(name, "invariant", trace(name))
            return bool(found) and not options.keep_going

        def path(i: int, last=None, prop=None, last_bad=None) -> list[Step]:
            """The trace to state i (then by ``last`` = (label, canonical successor)); under
            symmetry, de-canonicalised into a trace of the concrete model."""
            steps = stored_path(i) + ([Step(*last)] if last else [])
            if not options.symmetry:
                return steps
            first = i
            while parent[first] >= 0:
                first = parent[first]
            last_ok = last_bad
            if prop is not None:
                last_ok = lambda before, after: not prop(layout.to_object(before, read_only=True),  # noqa: E731
                                                         layout.to_object(after, read_only=True))
            return concrete_trace(model, steps, model.initial[initial_source[first]], step, canon, last_ok)

        def orbit_view(flat: tuple[int, ...]) -> tuple:
            """What the reduced search takes from a state: its invariants' and state constraints'
            verdicts, whether it moves, and per step the successor's orbit with the step's
            transition properties' and action constraints' verdicts."""
            before = layout.to_object(flat, read_only=True)
            steps, moved = set(), False
            for fn, values in actions:
                after = copy_state(before)
                if not fn(before, after, *values):
                    continue
                succ = layout.from_object(after)
                layout.check_domains(succ)
                moved = moved or succ != flat
                after = layout.to_object(succ, read_only=True)
                steps.add((canon(succ), tuple(bool(prop(before, after)) for _, prop in properties),
                           tuple(bool(c(before, after)) for c in action_constraints)))
            return (tuple(bool(fn(before)) for _, fn in invariants), tuple(bool(c(before)) for c in constraints),
                    moved, frozenset(steps))

        def shown(flat: tuple[int, ...]) -> str:
            return "[" + ", ".join(f"{k}={v}" for k, v in layout.show(flat).items()) + "]"

        def refuse_unless_orbit_agrees(flat: tuple[int, ...]) -> None:
            """Every member of the orbit of ``flat``, a state the reduced search expands for all of
            them, must give it the same view (``orbit_view``): then the orbits it reaches are those
            of the reachable states and its verdicts theirs. A sample of the states (the engine's
            trials) would let a declaration the spec breaks deep in the space count what are no
            orbits, hide a violation and answer holds; this explorer, the one the others are
            compared with, tries every state it expands under every permutation."""
            own = orbit_view(flat)
            for other in sorted(canon.images(flat)):
                if other != flat and orbit_view(other) != own:
                    # the engine's trial names the field and the action when a permutation it tries shows it
                    SymmetryAudit(model).state(InterpretedKernels(model), np.array([layout.pack(flat)], np.uint64))
                    raise SpecError(
                        f"the declared symmetry is not one of spec {model.spec.name}: the reachable state "
                        f"{shown(flat)} and its image {shown(other)} under a permutation "
                        "of the declared values differ in what the spec does there (their successors' orbits, "
                        "or the verdict of an invariant, a constraint or a transition property); see "
                        "docs/writing-a-spec.md, Declaring a symmetry")

        # the state the spec's functions run on, for the error if one raises: ("initial", flat),
        # ("state", i) or ("step", i, label, successor)
        evaluating: list = [None]

        def add(flat: tuple[int, ...], par: int, lab: int) -> bool:
            """Record a new state and check invariants; True when the run must stop."""
            index[key(flat)] = len(states)
            states.append(flat)
            parent.append(par)
            label_of.append(lab)
            obj = layout.to_object(flat, read_only=True)  # as every tier hands a check its state
            was, evaluating[0] = evaluating[0], ("state", len(states) - 1)
            for name, fn in invariants:
                if name not in found and not fn(obj):
                    found[name] = Violation(name, "invariant", path(len(states) - 1))
            evaluating[0] = was
            return bool(found) and not options.keep_going

        def spec_failed(e: Exception) -> SpecRaised:
            """The spec's function that raised ``e``, on the state ``evaluating`` says, with its path."""
            where = evaluating[0] or ("none",)
            steps = None if where[0] == "none" else [Step(None, where[1])] if where[0] == "initial" else \
                stored_path(where[1]) + ([Step(where[2], where[3])] if where[0] == "step" else [])
            return placed(model, spec_raised(raising_function(model, e), e), steps)

        stop = False
        frontier: list[int] = []
        if observer is not None:
            observer.run_started()
        try:
            for source, flat in enumerate(model.initial):
                result.states_generated += 1
                concrete = flat
                flat = canon(flat)
                evaluating[0] = ("initial", flat)
                if constraints and not in_model(layout.to_object(flat, read_only=True)):  # TLC: counted, checked, not kept
                    if check_outside(layout.to_object(flat, read_only=True), lambda _name: [Step(None, concrete)]):
                        stop = True
                        break
                    continue
                if key(flat) not in index:
                    initial_source.append(source)
                    frontier.append(len(states))
                    if add(flat, -1, -1):
                        stop = True
                        break
        except KraftcheckError:
            raise
        except Exception as e:  # noqa: BLE001 - the spec's own code failed
            raise spec_failed(e) from None
        # every initial state the spec gives is generated, one given twice twice (TLC's count)
        result.states_generated = model.initial_generated_through(source) if stop else model.initial_generated
        result.initial_states = model.initial_generated
        depth = 1 if frontier else 0
        level_starts = [0] if frontier else []
        if observer is not None and frontier and not stop:
            observer.level_finished(depth, len(states), result.states_generated)

        try:
            while frontier and not stop:
                if stop_at_max_depth(options, depth, result):
                    break
                next_frontier: list[int] = []
                for position, i in enumerate(frontier):
                    raise_if_stop_requested()
                    source = states[i]
                    if options.symmetry and self.decide_symmetry:
                        evaluating[0] = ("state", i)
                        refuse_unless_orbit_agrees(source)
                    before = layout.to_object(source, read_only=True)
                    pristine = copy_state(before)  # what an action that does not fire leaves
                    moved = False  # a successor other than the state itself (else: a deadlock)
                    for lab, (fn, values) in enumerate(actions):
                        evaluating[0] = ("state", i)
                        after = copy_state(before)
                        if not fn(before, after, *values):
                            if not layout.unchanged(after, pristine):
                                raise wrote_and_declined(str(model.labels[lab]), model.labels[lab].action.fn)
                            continue
                        succ = layout.from_object(after)
                        layout.check_domains(succ, step=model.labels[lab])
                        result.states_generated += 1
                        fired[model.label_action[lab]] += 1
                        moved = moved or succ != source
                        if properties or constrained:
                            # read-only from here, as the checks' states are: a property or action
                            # constraint that wrote it would change what the next one reads
                            after = layout.to_object(succ, read_only=True)
                        for name, prop in properties:
                            if name not in found and not prop(before, after):
                                found[name] = Violation(name, "property", path(i, (lab, canon(succ)), prop))
                                stop = stop or not options.keep_going
                        outside = None
                        if constrained:
                            evaluating[0] = ("step", i, lab, succ)
                            outside = layout.to_object(canon(succ), read_only=True) if options.symmetry else after
                            if in_model(outside, before, after):
                                outside = None
                        if outside is not None:
                            def outside_trace(name, i=i, lab=lab, succ=succ):
                                inv = dict(invariants)[name]
                                bad = lambda _before, after_: not inv(layout.to_object(after_, read_only=True))  # noqa: E731
                                return path(i, (lab, canon(succ)), None, bad)
                            stop = check_outside(outside, outside_trace) or stop
                            if stop:
                                break
                            continue
                        succ = canon(succ)
                        if key(succ) not in index:
                            new_states[model.label_action[lab]] += 1
                            next_frontier.append(len(states))
                            stop = add(succ, i, lab) or stop
                        if stop:
                            break
                    if stop:
                        break
                    if model.check_deadlock and not moved and DEADLOCK not in found:
                        found[DEADLOCK] = Violation(DEADLOCK, DEADLOCK, path(i))
                        if not options.keep_going:
                            stop = True
                            break
                    more_work = position + 1 < len(frontier) or bool(next_frontier)
                    reason = limit_reached(options, len(states), clock, more_work, memory=position % 1024 == 0)
                    if reason is not None:
                        result.incomplete_reason = reason
                        stop = True
                        break
                frontier = next_frontier
                if frontier:
                    depth += 1
                    level_starts.append(frontier[0])
                    if observer is not None and not stop:
                        observer.level_finished(depth, len(states), result.states_generated)
                progress(Progress(depth, len(states), result.states_generated, len(frontier), clock.elapsed))

        except KeyboardInterrupt:
            stop_honoured()
            result.interrupted = True
            result.incomplete_reason = "interrupted"
        except KraftcheckError:
            raise
        except Exception as e:  # noqa: BLE001 - the spec's own code failed: one line, as the engine says it
            raise spec_failed(e) from None
        result.settle(options, list(found.values()), len(states), result.states_generated, depth, clock.elapsed,
                      collision_probability=collision_probability(sorted(index), result.states_generated)
                      if options.fingerprints else None)
        if observer is not None:
            observer.run_finished(result, _FinishedReference(level_starts, stored_path))
        return result



class _FinishedReference(NamedTuple):
    """What the observer sees of a finished reference run (``observer.FinishedRun``)."""

    level_starts: list[int]
    trace: Callable[[int], list[Step]]


def collision_probability(fingerprints: list[int], generated: int) -> dict[str, float]:
    """TLC's two estimates (see ``FingerprintSet.collision_probability``), in plain Python."""
    distinct = len(fingerprints)
    optimistic = distinct * max(0, generated - distinct) / 2.0**64
    if distinct < 2:
        return {"optimistic": optimistic, "from_fingerprints": 0.0}
    return {"optimistic": optimistic,
            "from_fingerprints": 1.0 / min(b - a for a, b in zip(fingerprints, fingerprints[1:]))}


def orbit_representative(model: Model):
    """flat -> the smallest flat state (as a tuple) among the images of ``flat`` under every
    permutation of the spec's symmetric values (with several symmetry sets, every combination of
    one permutation per set): each field's values are rearranged along its declared axes and
    mapped through the permutation as members or subsets."""
    import functools
    import itertools

    import numpy as np

    from kraftcheck.checker.symmetry import check_declaration, declared_symmetry
    sets = declared_symmetry(model.spec)
    layout = model.layout
    declared = check_declaration(layout, sets)
    group = list(itertools.product(*(itertools.permutations(range(s.size)) for s in sets)))

    def image(values: dict, perms: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
        out: list[int] = []
        for f in layout.fields:
            v = np.array(values[f.name], dtype=np.int64)
            mapped = None
            for d, perm in zip(declared, perms):
                if f.name not in d:
                    continue
                where_from = [perm.index(i) for i in range(len(perm))]  # position i of the image comes from here
                for axis in d[f.name].axes:
                    v = np.take(v, where_from, axis=axis)
                if d[f.name].holds != "other":
                    mapped = (d[f.name], perm)
            items = np.ravel(v).tolist()
            if mapped is not None:
                p, perm = mapped
                n = len(perm)
                filler = p.unless is not None and values[p.unless[0]] == p.unless[1]
                if p.holds == "member" and not filler:
                    items = [perm[x] if x < n else x for x in items]
                elif p.holds == "subset":
                    items = [sum(1 << perm[i] for i in range(n) if m >> i & 1) for m in items]
            out.extend(items)
        return tuple(out)

    @functools.lru_cache(maxsize=1 << 16)  # a successor is met again and again; the images are slow
    def representative(flat: tuple[int, ...]) -> tuple[int, ...]:
        values = layout.values(flat)
        return min(image(values, perms) for perms in group)

    def images(flat: tuple[int, ...]) -> set[tuple[int, ...]]:
        """Every member of ``flat``'s orbit."""
        values = layout.values(flat)
        return {image(values, perms) for perms in group}

    representative.images = images

    return representative

