"""A declared symmetry is checked before it is trusted (``--symmetry``).

``--symmetry`` keeps one state per orbit, which is right only when the spec's steps and verdicts
cannot tell permuted values apart: for every permutation p of the group and state s, the
successors of p(s) are the images of the successors of s (as sets), and every invariant,
constraint, transition property and action constraint gives p(s) (p(s) -> p(t)) the verdict it
gives s (s -> t). Then the states reachable from p(s0) are the images of those reachable from s0,
so the reduced search finds exactly the orbits of the reachable states, and the initial states
need not be symmetric themselves (the Kafka model's first leader is b1). A declaration that is
wrong does not fail by itself: the reduced search explores states that are no state of the spec
and gives counts that are no orbits (a sequence padded with a value that is also a permuted one:
the padding moves with the permutation, and the spec's next padding does not).

So before exploring, ``check_symmetry`` tries the claim on a bounded sample: the first
``SAMPLE_STATES`` reachable states in breadth-first order (inside the constraints), under the
generators of the group (for each symmetry set, the swap of its first two values and the rotation
of all of them: together they give every permutation, so steps symmetric under them are symmetric
under the whole group, on a set of states the group maps into itself). During the run the
states tried are no such set but representatives, whose break may show only under a product of
the generators, so there a group of ``EVERY_PERMUTATION_UP_TO`` permutations or fewer is tried
whole; before exploring, only one of ``EVERY_PERMUTATION_BEFORE`` or fewer, since that check is
not budgeted (the whole group of four brokers costs about a second compiled there, several on the
first tier). It runs the kernels the exploration runs (whatever tier they are), in a
few batches. A broken claim is a ``SpecError`` naming the permutation, the state, the action and
the fields where the state the spec computes differs from the one the symmetry promises. A sample
cannot prove the claim; it catches a declaration that is wrong from the first steps. During the
run, ``SymmetryAudit`` tries it again on the states of each chunk while its budget allows, deep
ones too.
"""

from __future__ import annotations

import time
from typing import Any, Optional

import numpy as np

from kraftcheck.checker.analyses.predicates import flat_rows
from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.explore.constraints import outside_constraints
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.model import Model
from kraftcheck.checker.symmetry import PermutationTables, declared_symmetry

SAMPLE_STATES = 200  # reachable states, breadth-first from the initial ones
# a group of this many permutations or fewer (four interchangeable values) is tried whole on each
# state during the run, not only its generators; before exploring, one of EVERY_PERMUTATION_BEFORE
EVERY_PERMUTATION_UP_TO = 24
EVERY_PERMUTATION_BEFORE = 6
PYTHON_SAMPLE = 40   # with the spec's functions run as Python (the reference explorer, --compile never)
_checked: set = set()  # (spec class, parameters, selected checks and constraints) found symmetric here


def check_symmetry(model: Model, kernels: Any, sample: Optional[int] = None) -> None:
    """Raise ``SpecError`` if the spec's declared symmetry fails on the sample (module docstring).
    ``kernels``: the exploration's (``successors``, ``violations``, ``pack``, ``unpack``); the
    sample is smaller when they run the spec as Python (a state costs milliseconds there). A spec
    and parameters found symmetric are not tried again in the same process."""
    key = (type(model.spec), repr(model.spec.params), tuple(model.check_names),
           tuple(c.name for c in model.constraints + model.action_constraints))
    if key in _checked:
        return
    if sample is None:
        sample = PYTHON_SAMPLE if type(kernels) is InterpretedKernels else SAMPLE_STATES
    sets = declared_symmetry(model.spec)
    tables = PermutationTables(model.layout, sets)
    generators = _generators(tables, [s.labels for s in sets], EVERY_PERMUTATION_BEFORE)
    if generators:
        _Trial(model, kernels, tables).run(generators, sample)
    _checked.add(key)


class SymmetryAudit:
    """The declared symmetry tried again during the run, on states the exploration expands: a
    declaration wrong only past the first ``SAMPLE_STATES`` states (a step that breaks it deep in
    the space) passes ``check_symmetry``, and the reduced search would count what are no orbits in
    silence. ``kernel_audit.KernelAudit`` hands it batches of each chunk's states while
    ``within`` its budget (the reference explorer, which decides the claim itself, asks it for the
    detail of a break); each is tried under the permutations ``check_symmetry`` tries, with the
    run's kernels: a broken claim is the same ``SpecError``."""

    def __init__(self, model: Model) -> None:
        self.model = model
        sets = declared_symmetry(model.spec)
        self.tables = PermutationTables(model.layout, sets)
        self.generators = _generators(self.tables, [s.labels for s in sets], EVERY_PERMUTATION_UP_TO)
        self.tried = 0  # states tried so far
        # CPU seconds of the trials (the thread's, not the wall's): on a loaded machine the wall's
        # budget would try fewer states, and whether a deep break is seen would depend on the load
        self.spent = 0.0
        self._started = time.perf_counter()

    def _left(self, share: float, floor: float) -> float:
        """CPU seconds the trials may still take: ``share`` of the run's time so far, or ``floor``."""
        return max(floor, share * (time.perf_counter() - self._started)) - self.spent

    def within(self, share: float, floor: float) -> bool:
        """Whether the trials so far took less than ``share`` of the run's time, or ``floor`` seconds
        of CPU."""
        return self._left(share, floor) >= 0

    def affordable(self, share: float, floor: float, most: int) -> int:
        """How many states the next trial may take: none past the budget ``within`` keeps to; else
        as many (1 to ``most``) as what is left of it pays for at the CPU a state has taken so far,
        one while none has been tried. A batch sized by ``most`` alone overran the budget by that
        many states' trials (a Kafka state under 24 permutations in the Python tier: 0.15 s of CPU)."""
        left = self._left(share, floor)
        if not self.generators or left < 0:
            return 0
        if not self.tried or self.spent <= 0:
            return 1
        return max(1, min(most, int(left * self.tried / self.spent)))

    def state(self, kernels: Any, words: np.ndarray) -> None:
        """Try the claim on the packed states ``words`` (rows) with ``kernels`` (the run's)."""
        if not self.generators:
            return
        t0 = time.thread_time()
        try:
            trial = _Trial(self.model, kernels, self.tables)
            rows = flat_rows(kernels, np.ascontiguousarray(words, dtype=np.uint64)).astype(np.int64)
            own = trial.expand(rows)
            for p, text in self.generators:
                trial.compare(rows, own, p, text)
        finally:
            self.spent += time.thread_time() - t0
        self.tried += len(words)


def _generators(tables: PermutationTables, labels: list[tuple[str, ...]], every_up_to: int
                ) -> list[tuple[int, str]]:
    """The permutations a trial compares states under, as (index in ``tables``, text): for each
    symmetry set of two values or more, the one that swaps its first two values and the one that
    rotates them all (the others fixed); then, when the group has ``every_up_to`` permutations or
    fewer, every other one but the identity."""
    perms = [tuple(p) for p in tables.perms.tolist()]
    identity = perms[0]
    out: list[tuple[int, str]] = []
    start = 0
    for n, names in zip(tables.sizes, labels):
        moves = []
        if n >= 2:
            moves.append(((1, 0) + tuple(range(2, n)), f"swapping {names[0]} and {names[1]}"))
        if n >= 3:
            moves.append((tuple(range(1, n)) + (0,), "the rotation " + " -> ".join(names + (names[0],))))
        for perm, text in moves:
            out.append((perms.index(identity[:start] + perm + identity[start + n:]), text))
        start += n
    if len(perms) <= every_up_to:
        # the generators alone miss a break that only a product of them shows on the states tried
        # (representatives): a step at c = (6, 5, 0) of (0, 5, 6)'s orbit is the reversal's, which
        # neither the swap nor the rotation gives
        tried = {p for p, _ in out}
        names = [n for group in labels for n in group]
        for p, perm in enumerate(perms):
            if p and p not in tried:
                moved = [f"{names[i]} -> {names[j]}" for i, j in enumerate(_flat(perm, tables.sizes)) if i != j]
                out.append((p, "the permutation " + ", ".join(moved)))
    return out


def _flat(perm: tuple[int, ...], sizes: tuple[int, ...]) -> list[int]:
    """A product permutation (each set's over 0..n-1) over the sets' values numbered in a row."""
    out, start = [], 0
    for n in sizes:
        out.extend(start + v for v in perm[start:start + n])
        start += n
    return out


class _Trial:
    """The checks on one model's sample, with its kernels and permutation tables."""

    def __init__(self, model: Model, kernels: Any, tables: PermutationTables) -> None:
        self.model, self.kernels, self.tables = model, kernels, tables
        self.layout = model.layout
        self.nlabels = len(model.labels)
        self.prop_mask = (1 << model.kernel_property_count) - 1
        self.check_mask = (1 << (len(model.invariants) + len(model.constraints))) - 1

    def run(self, generators: list[tuple[int, str]], sample: int) -> None:
        states, own = self.reachable(sample)
        if states.shape[0]:
            for p, text in generators:
                self.compare(states, own, p, text)

    # -- states
    def rows(self, flats) -> np.ndarray:
        return np.array(list(flats), np.int64).reshape(-1, self.layout.size)

    def image(self, rows: np.ndarray, p: int) -> np.ndarray:
        """``PermutationTables.image`` of every row (flat states), vectorised."""
        t = self.tables
        out = rows[:, t.src[p]]
        width = t.value_map.shape[2]
        for j in np.flatnonzero(t.value_table >= 0):
            v = out[:, j]
            mapped = v < width
            g = t.guard_elem[j]
            if g >= 0:
                mapped &= rows[:, g] != t.guard_value[j]
            out[mapped, j] = t.value_map[p, t.value_table[j], v[mapped]]
        return out

    def inside(self, rows: np.ndarray) -> np.ndarray:
        """The rows that satisfy every selected state constraint."""
        if not self.model.constraints or not rows.shape[0]:
            return rows
        masks = self.kernels.violations(self.kernels.pack(list(map(tuple, rows.tolist()))))
        return rows[~outside_constraints(self.model, masks)]

    def expand(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The successors of ``rows``: (source index, successor rows, transition masks, labels) per
        candidate that fires, and each state's check mask (invariants, then constraints)."""
        kernels = self.kernels
        words = kernels.pack(list(map(tuple, rows.tolist())))
        buf = kernels.buffers(words.shape[0])
        kernels.successors(words, 0, words.shape[0], buf)
        valid = np.flatnonzero(buf.labels[:words.shape[0] * self.nlabels] != NO_LABEL)
        succ = flat_rows(kernels, buf.words[valid]).astype(np.int64)
        props = (buf.props[valid].astype(np.int64) & self.prop_mask) if self.prop_mask else np.zeros(valid.size,
                                                                                                      np.int64)
        checks = kernels.violations(words).astype(np.int64) & self.check_mask
        return valid // self.nlabels, succ, props, buf.labels[valid].astype(np.int64), checks

    def reachable(self, sample: int) -> tuple[np.ndarray, tuple]:
        """The first ``sample`` distinct states inside the constraints, breadth-first (flat rows),
        and their expansion (``expand``'s, as one batch), each state expanded once."""
        seen: dict[bytes, np.ndarray] = {}
        parts = []
        level = self.inside(self.rows(self.model.initial))
        while level.shape[0] and len(seen) < sample:
            new: dict[bytes, np.ndarray] = {}
            for row in level:
                key = row.tobytes()
                if key not in seen and key not in new:
                    new[key] = row
                    if len(seen) + len(new) >= sample:
                        break
            if not new:
                break
            source, succ, props, labels, checks = self.expand(np.array(list(new.values())))
            parts.append((source + len(seen), succ, props, labels, checks))
            seen.update(new)
            level = self.inside(succ[~outside_constraints(self.model, props=props.astype(np.uint64))])
        states = np.array(list(seen.values()), np.int64).reshape(-1, self.layout.size)
        if not parts:
            return states, ()
        return states, tuple(np.concatenate(column) for column in zip(*parts))

    # -- the claim
    def compare(self, states: np.ndarray, own: tuple, p: int, text: str) -> None:
        """The successors and verdicts of each state's image are the images of its own (``own``:
        the states' ``expand``)."""
        images = self.image(states, p)
        source, succ, props, labels, checks = own
        try:
            isource, isucc, iprops, ilabels, ichecks = self.expand(images)
        except SpecError as e:
            raise SpecError(f"the declared symmetry fails ({text}): on the image of a reachable state, {e}") from None
        differ = np.flatnonzero(checks != ichecks)
        if differ.size:
            k = int(differ[0])
            names = [f"invariant {x.name}" for x in self.model.invariants] + \
                [f"constraint {x.name}" for x in self.model.constraints]
            bit = int(checks[k] ^ ichecks[k]).bit_length() - 1
            self.refuse(text, f"{names[bit]} holds on one of {self.show(states[k])} and its image "
                              f"{self.show(images[k])} and not on the other", [])
        # per state: the images of its successors (with the step's verdicts), and its image's successors
        promised = {(int(k), t.tobytes()): (int(m), int(lab))
                    for k, t, m, lab in zip(source, self.image(succ, p), props, labels)}
        got = {(int(k), t.tobytes()): (int(m), int(lab)) for k, t, m, lab in zip(isource, isucc, iprops, ilabels)}
        if promised.keys() == got.keys():
            wrong = [key for key, (mask, _) in got.items() if mask != promised[key][0]]
            if wrong:
                k, label = wrong[0][0], got[wrong[0]][1]
                self.refuse(text, f"a transition property or action constraint judges the step "
                                  f"{self.model.labels[label]} from {self.show(images[k])}, the image of "
                                  f"{self.show(states[k])}, otherwise than the step it is the image of", [])
            return
        extra = sorted(got.keys() - promised.keys())
        missing = sorted(promised.keys() - got.keys())
        first = min(extra[:1] + missing[:1])[0]
        s, img = self.show(states[first]), self.show(images[first])
        row = lambda key: np.frombuffer(key[1], np.int64)  # noqa: E731
        if extra and extra[0][0] == first:
            t = row(extra[0])
            others = [row(key) for key in promised if key[0] == first]
            self.refuse(text, f"from {img}, the image of reachable state {s}, {self.model.labels[got[extra[0]][1]]} "
                              f"leads to {self.show(t)}, which is no image of a successor of {s}",
                        self.nearest(t, self.rows(others)))
        t = row(missing[0])
        others = [row(key) for key in got if key[0] == first]
        self.refuse(text, f"{self.model.labels[promised[missing[0]][1]]} leads from reachable state {s} to a state "
                          f"whose image {self.show(t)} is no successor of the image {img}",
                    self.nearest(t, self.rows(others)))

    # -- saying what broke
    def nearest(self, flat: np.ndarray, candidates: np.ndarray) -> list[str]:
        """The fields where ``flat`` differs from the closest of ``candidates`` (fewest fields)."""
        if not candidates.shape[0]:
            return []
        differ = candidates != np.asarray(flat, np.int64)
        per_field = np.stack([differ[:, self.layout.field_slices[f.name]].any(axis=1) for f in self.layout.fields],
                             axis=1)
        best = int(per_field.sum(axis=1).argmin())
        return [f.name for f, d in zip(self.layout.fields, per_field[best]) if d]

    def show(self, flat) -> str:
        """A state as traces show it, on one line."""
        shown = self.layout.show(tuple(int(x) for x in flat))
        return "[" + ", ".join(f"{k}={v}" for k, v in shown.items()) + "]"

    def refuse(self, text: str, what: str, fields: list[str]) -> None:
        """The refusal: the fields first (where the spec's state differs from the promised one),
        then the states and the action, then what to do."""
        broken = f": field {', '.join(fields)} {'break' if len(fields) > 1 else 'breaks'} it" if fields \
            else ""
        raise SpecError(f"the declared symmetry is not one of spec {self.model.spec.name} ({text}){broken}; {what}. "
                        "Every field that holds a permuted value must move with the permutation, and a filler "
                        "(a sequence's padding, a 'none') must be a value outside every permuted set, or be declared "
                        "with unless=; see docs/writing-a-spec.md, Declaring a symmetry")


def check_symmetry_interpreted(model: Model) -> None:
    """``check_symmetry`` with the spec's functions run as Python (the reference explorer's)."""
    check_symmetry(model, InterpretedKernels(model))
