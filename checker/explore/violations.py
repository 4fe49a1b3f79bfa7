"""The violations an engine run finds, where it found them, and their counterexamples.

A violation is noted where it is found (a state's number, and for a transition property or a
step out of the constraints the label of the step): its trace is rebuilt at once from the
finished levels, by replaying labels from an initial state (``result.replay_path``). Under
``--symmetry`` the levels hold canonical states, so the path of canonical states is rebuilt first
and then walked on the concrete model (``concrete.concrete_trace``). Where each was found goes
into a checkpoint's manifest, from which a resumed run notes it again.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from kraftcheck.checker.errors import SpecRaised
from kraftcheck.checker.explore.concrete import concrete_trace
from kraftcheck.checker.explore.result import Step, Violation, replay_path
from kraftcheck.checker.explore.spec_raised import placed_at
from kraftcheck.checker.model import Model
from kraftcheck.checker.symmetry import canonical_step


def initial_sources(model: Model, canon) -> list[int]:
    """For each state of the initial level, in order, the index in ``model.initial`` of the
    initial state it stands for: every one without symmetry, the first of each orbit with it
    (those outside a state constraint are not in the level)."""
    if canon is None and not model.constraints:
        return list(range(len(model.initial)))
    seen, out = set(), []
    for i, flat in enumerate(model.initial):
        c = canon.canonical_flat(flat) if canon is not None else flat
        if model.constraints and not model.in_model(None, c):
            continue
        if c not in seen:
            seen.add(c)
            out.append(i)
    return out


class Violations:
    """The checks a run found violated: each check's ``Violation`` (``found``) and where it was
    (``found_at``: kind, state number, label). ``parent_of()`` gives the run's current parent
    links (its levels move to disk when they spill) and ``step()`` its current kernels' step (the
    tiers change); ``canon`` is the run's canonicaliser under ``--symmetry``, else None."""

    def __init__(self, model: Model, parent_of: Callable[[], Callable[[int], tuple[int, int]]],
                 step: Callable[[], Callable[[tuple[int, ...], int], Optional[tuple[int, ...]]]],
                 canon: Any = None) -> None:
        self.model, self.parent_of, self.step, self.canon = model, parent_of, step, canon
        # the model's initial state behind each state of the initial level (duplicates dropped)
        self.initial_sources = initial_sources(model, canon)
        self.found: dict[str, Violation] = {}
        self.found_at: dict[str, tuple[str, int, int]] = {}  # check -> (kind, state index, label)

    def __contains__(self, name: str) -> bool:
        return name in self.found

    def __bool__(self) -> bool:
        return bool(self.found)

    def saved(self) -> tuple[dict, dict]:
        """What ``restore`` puts back: a chunk redone with other kernels finds its violations again."""
        return dict(self.found), dict(self.found_at)

    def restore(self, saved: tuple[dict, dict]) -> None:
        self.found, self.found_at = saved

    def note(self, name: str, kind: str, index: int, label: int) -> None:
        """A violation of ``name`` at state ``index`` (for a property: by action ``label`` from it;
        a negative ``index`` is the initial state ``-1 - index``, outside the state constraints)."""
        if index < 0:  # an initial state outside the state constraints: not in any level
            steps = [Step(None, self.model.initial[-1 - index])]
        elif self.canon is not None:
            steps = self._concrete_trace(index, kind, label, name)
        else:
            steps = self.trace(index)
            if label >= 0:  # a transition property's step, or the step to a state outside the constraints
                steps.append(Step(label, self.step()(steps[-1].state, label)))
        self.found[name] = Violation(name, kind, steps)
        self.found_at[name] = (kind, index, label)

    def forget_after(self, found_here: dict[str, int], cut: int) -> None:
        """Forget the violations of ``found_here`` (check -> candidate row) found past row ``cut``
        of the chunk, where the run stops."""
        for name, row in found_here.items():
            if row > cut:  # found later in the chunk than where the run stops
                del self.found[name]
                del self.found_at[name]

    def of_invariants(self, masks: np.ndarray, first_index: int, rows: np.ndarray,
                      steps: Optional[tuple[np.ndarray, np.ndarray]] = None,
                      noted_in_chunk: Optional[dict[str, int]] = None) -> dict[str, int]:
        """The invariants newly violated by new states whose check masks are ``masks`` (state
        ``first_index + i`` is the i-th) -> the row (``rows[i]``) where each was violated first.
        ``steps``: each new state's parent and label, by which its violation is noted, so that
        its path is rebuilt from finished levels only (reading back the level being built
        flushes its files, which a full disk refuses: the violation would be lost with the run).
        ``noted_in_chunk``: the checks the chunk has noted already (check -> row: on successors
        outside the state constraints, checked before the new states); one that a new state at an
        earlier row violates is noted again there, as the reference explorer, taking the rows in
        order, finds it first."""
        bad = np.flatnonzero(masks)
        if not bad.size:
            return {}

        def noted(name: str, i: int) -> int:
            at = (first_index + i, -1) if steps is None else (int(steps[0][i]), int(steps[1][i]))
            self.note(name, "invariant", *at)
            return int(rows[i])

        return self._first_of_each(self.model.invariants, masks, bad, noted,
                                   lambda i: int(rows[i]), noted_in_chunk or {})

    def of_properties(self, props: np.ndarray, rows: np.ndarray, labels: np.ndarray, first: int,
                      stride: int) -> dict[str, int]:
        """The transition properties newly violated by the candidate rows ``rows`` (``props``: each
        row's mask; row r is label ``labels[r]`` from state ``first + r // stride``) -> the first
        violating row of each."""
        bad_rows = rows[props[rows] != 0]
        if not bad_rows.size:
            return {}

        def noted(name: str, r: int) -> int:
            self.note(name, "property", first + r // stride, int(labels[r]))
            return r

        return self._first_of_each(self.model.properties, props, bad_rows, noted)

    def outside_constraints(self, masks: np.ndarray, rows: np.ndarray, at) -> dict[str, int]:
        """Invariants on states outside the constraints (TLC checks each as it is generated):
        ``masks[i]`` is row ``rows[i]``'s; ``at(row)`` gives the violation's (state index, label)
        for ``note``. Returns the checks newly violated -> the first such row."""
        def noted(name: str, i: int) -> int:
            self.note(name, "invariant", *at(int(rows[i])))
            return int(rows[i])

        return self._first_of_each(self.model.invariants, masks, np.flatnonzero(masks), noted)

    def _first_of_each(self, checks: list, masks: np.ndarray, candidates: np.ndarray, noted, row_of=None,
                       noted_at: Optional[dict[str, int]] = None) -> dict[str, int]:
        """For each of ``checks`` (bit k of a mask is the k-th) not found violated before whose bit
        is set in ``masks`` at one of ``candidates`` (increasing): ``noted(name, candidate)`` at the
        first such candidate, which notes the violation and gives the row it is said to be at.
        A check found before at a row of ``noted_at`` (check -> row) is noted again if its first
        candidate's row (``row_of(candidate)``) comes before that."""
        found: dict[str, int] = {}
        for k, check in enumerate(checks):
            earlier_than = (noted_at or {}).get(check.name)
            if check.name in self.found and earlier_than is None:
                continue
            hits = candidates[(masks[candidates] >> np.uint64(k)) & np.uint64(1) == 1]
            if hits.size and (earlier_than is None or row_of(int(hits[0])) < earlier_than):
                found[check.name] = noted(check.name, int(hits[0]))
        return found

    def trace(self, index: int) -> list[Step]:
        """Replay the labels on the path to state ``index`` from its initial state (the initial
        level leaves out those outside a state constraint: its places are not ``model.initial``'s)."""
        sources = self.initial_sources
        return replay_path(self.model, index, self.parent_of(), self.step(),
                           initial=lambda i: self.model.initial[sources[i]])

    def placed(self, e: SpecRaised, index: Optional[int], label: int = -1) -> SpecRaised:
        """``e`` with the path to state ``index`` (``spec_raised.placed_at``)."""
        trace = None if self.canon is not None else self.trace  # --symmetry's states are canonical
        return placed_at(self.model, e, index, label, trace, self.step())

    def placed_from(self, e: SpecRaised, first: int, step: int = 1) -> SpecRaised:
        """``e``, raised on the ``e.at``-th of the states numbered ``first``, ``first + step``, ...,
        with the path to that state."""
        return self.placed(e, None if e.at is None else first + step * e.at)

    def _concrete_trace(self, index: int, kind: str, label: int, name: str) -> list[Step]:
        """--symmetry: the path of canonical states to ``index`` (and, for a transition property,
        the violating step by ``label``), rebuilt as a trace of the concrete model."""
        canonical = self.canon.canonical_flat
        model, step = self.model, self.step()
        start: list[tuple[int, ...]] = []

        def initial(i: int) -> tuple[int, ...]:
            start.append(model.initial[self.initial_sources[i]])
            return canonical(start[0])

        path = replay_path(model, index, self.parent_of(), canonical_step(step, canonical), initial=initial)
        last_ok = None
        if label >= 0:  # a transition property's step, or the step to a state outside the constraints
            path.append(Step(label, canonical(step(path[-1].state, label))))
            last_ok = lambda before, after: name in model.violated_properties(before, after)  # noqa: E731
            if kind == "invariant":
                last_ok = lambda before, after: name in model.violated_invariants(after)  # noqa: E731
        return concrete_trace(model, path, start[0], step, canonical, last_ok)
