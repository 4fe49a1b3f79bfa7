"""The whole reachable state graph, built by the compiled kernels, for the graph analyses.

A breadth-first search like the engine's, with the same kernels, that numbers every state
(``StateIndex``: ids are the engine's breadth-first numbers) and keeps every transition, self-loops
and parallel transitions included, so the transition count equals the engine's generated count
less the initial states. The result is in compressed sparse row form (``CompiledGraph``):

* per state: its packed words (``nwords`` x 8 bytes), the breadth-first parent (8 bytes) and the
  label that reached it (2 bytes), and a transition offset (8 bytes);
* per transition: the target id (4 bytes) and the label (2 bytes).

So a state costs 8 x nwords + 18 bytes plus about 8 to 16 in the index while building, and a
transition 6 bytes (the reversed graph, built by the analyses that need it, 4 more). No invariant
is checked here: the analyses ask their own questions of the states (``predicates.py``).

Under a state or action constraint the graph is the constrained one, as TLC's: a successor outside
a constraint is neither a state nor a transition of it. It is kept only as a *leaving* step (its
source and label, 6 bytes), because it still enables its action in its source: TLC decides
``ENABLED`` on the spec's actions alone, whatever the constraints, so fairness must too
(``checker.analyses.liveness``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numba
import numpy as np

from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.errors import OverBudget
from kraftcheck.checker.explore.result import Progress, ProgressFn, Step, no_progress
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.explore.constraints import outside_constraints
from kraftcheck.checker.kernels.state_index import StateIndex
from kraftcheck.checker.model import Model

CANDIDATES_PER_CHUNK = 1 << 20


@dataclass(frozen=True)
class GraphSummary:
    """What a report says of the graph an analysis ran over, kept once the graph is freed."""

    states: int
    transitions: int
    depth: int
    built_by: str
    nbytes: int
    build_s: float


@dataclass
class CompiledGraph:
    model: Model
    states: np.ndarray        # (n, nwords) uint64, state i in row i
    parent: np.ndarray        # int64 breadth-first parent, -1 for initial states
    parent_label: np.ndarray  # uint16 label of the transition from the parent
    offsets: np.ndarray       # int64 (n + 1): transitions of v are offsets[v]:offsets[v+1]
    targets: np.ndarray       # uint32 target of each transition
    labels: np.ndarray        # uint16 label of each transition
    initial: int              # states 0..initial-1 are the initial ones
    depth: int
    build_s: float = 0.0
    built_by: str = "a recording pass"  # or "the check's exploration" (Options.keep_graph); reports' recorded_by
    # steps to a different state outside a constraint, by source (increasing) and label
    leaving_sources: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    leaving_labels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint16))
    _reversed: Optional[tuple[np.ndarray, np.ndarray]] = None
    # fairness (label bits, weak, strong) -> the states a fair run can start from (liveness's vacuity
    # test): it depends on the fairness alone, so the properties that share one share it
    _fair_runs: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def summary(self) -> GraphSummary:
        return GraphSummary(self.size, self.transitions, self.depth, self.built_by, self.nbytes, self.build_s)

    def analysis_bytes(self) -> int:
        """About what an analysis allocates over the graph: the reversed graph (4 bytes a
        transition, 8 a state), components and marks (8 + a few bytes a state), and a batch of
        unpacked states for the predicates."""
        reverse = 0 if self._reversed is not None else 4 * self.transitions + 8 * (self.size + 1)
        return reverse + 16 * self.size + (1 << 18) * 4 * self.model.layout.size

    def check_budget(self, max_memory: Optional[int], extra_per_state: int = 0) -> None:
        """Refuse (OverBudget, saying what to do) when analysing would go over ``max_memory``;
        ``extra_per_state``: bytes a state an analysis needs beyond ``analysis_bytes``."""
        from kraftcheck.checker.explore.result import memory_in_use
        if max_memory is None:
            return
        used, need = memory_in_use(), self.analysis_bytes() + extra_per_state * self.size
        if used + need > max_memory:
            raise OverBudget("--max-memory",
                             f"analysing the state graph ({self.size:,} states, {self.transitions:,} transitions) "
                             f"needs about {need / 2**30:.1f} GiB more than the {used / 2**30:.1f} GiB in use, over "
                             f"the memory budget ({max_memory / 2**30:.1f} GiB); raise --max-memory, or to shrink "
                             f"the model, {self.model.spec.smaller_model_hint()}")

    def reversed(self) -> tuple[np.ndarray, np.ndarray]:
        """The transposed graph ``(offsets, sources)``, built on first use and kept (4 bytes a
        transition and 8 a state): every analysis that walks backwards shares it."""
        if self._reversed is None:
            from kraftcheck.checker.analyses.graph_kernels import reverse
            self._reversed = reverse(self.offsets, self.targets)
        return self._reversed

    @property
    def size(self) -> int:
        return self.states.shape[0]

    @property
    def transitions(self) -> int:
        return self.targets.shape[0]

    @property
    def nbytes(self) -> int:
        arrays = [self.states, self.parent, self.parent_label, self.offsets, self.targets, self.labels,
                  self.leaving_sources, self.leaving_labels]
        return sum(a.nbytes for a in arrays + list(self._reversed or ()))

    def leaving_bits(self, label_bit: np.ndarray) -> np.ndarray:
        """Per state, the OR of ``label_bit`` over the labels of its leaving steps: what they
        enable there (``graph_kernels``'s ``leaving``); empty when the graph has none."""
        from kraftcheck.checker.analyses.graph_kernels import NO_LEAVING
        if not self.leaving_sources.size:
            return NO_LEAVING
        out = np.zeros(self.size, np.uint64)
        np.bitwise_or.at(out, self.leaving_sources, label_bit[self.leaving_labels])
        return out

    def leaving_from(self, v: int) -> set[int]:
        """The labels of state ``v``'s leaving steps."""
        lo, hi = np.searchsorted(self.leaving_sources, [v, v + 1])
        return {int(lab) for lab in self.leaving_labels[lo:hi]}

    def labels_to(self, i: int) -> list[int]:
        """The labels of the breadth-first (so shortest) path from an initial state to state ``i``."""
        out = []
        while self.parent[i] >= 0:
            out.append(int(self.parent_label[i]))
            i = int(self.parent[i])
        return out[::-1]

    def initial_of(self, i: int) -> int:
        while self.parent[i] >= 0:
            i = int(self.parent[i])
        return i

    def source_of(self, e: int) -> int:
        """The state transition ``e`` leaves from."""
        return int(np.searchsorted(self.offsets, e, side="right")) - 1

    def steps(self, start: int, labels: list[int]) -> list[Step]:
        """Replay ``labels`` from state ``start`` by the model's own action functions."""
        model = self.model
        state = model.layout.unpack(tuple(int(w) for w in self.states[start]))
        out = [Step(None, state)]
        for lab in labels:
            state = model.step(state, lab)
            if state is None:
                raise RuntimeError(f"internal: {model.labels[lab]} is disabled on a path of the graph")
            out.append(Step(lab, state))
        return out


def model_kernels(model: Model, compile: str = "now", progress: ProgressFn = no_progress) -> Any:
    """The model's compiled kernels (``compile="now"``), or the interpreted tier (``"never"``, and
    with numba disabled, as the engine takes it then)."""
    from kraftcheck.checker.explore.compiled import kernel_shapes
    from kraftcheck.checker.explore.interpreted import InterpretedKernels
    from kraftcheck.checker.explore.tiers import compile_now
    if compile == "never" or numba.config.DISABLE_JIT:
        return InterpretedKernels(model)
    return compile_now(model, kernel_shapes(model), progress, time.perf_counter())


class GraphBuilder:
    """Numbers states and keeps every transition, chunk by chunk, for a breadth-first search that
    expands states in id order: ``build_graph`` here, or the engine itself (``Options.keep_graph``),
    where it takes the visited set's place. ``finish`` gives the ``CompiledGraph``."""

    def __init__(self, model: Model, index: StateIndex) -> None:
        self.model = model
        self.index = index  # empty: the builder numbers every state in it
        self.initial = 0
        self.degree_parts: list[np.ndarray] = []
        self.target_parts: list[np.ndarray] = []
        self.label_parts: list[np.ndarray] = []
        self.leaving_source_parts: list[np.ndarray] = []
        self.leaving_label_parts: list[np.ndarray] = []
        self._ids = np.empty(0, np.int64)
        self.transitions = 0

    @property
    def count(self) -> int:
        return self.index.count

    @property
    def nbytes(self) -> int:
        return self.index.nbytes + sum(a.nbytes for parts in (self.degree_parts, self.target_parts, self.label_parts)
                                       for a in parts)

    def add_initial(self, words: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """Number the initial states; a uint8 array, 1 on first occurrences."""
        n = words.shape[0]
        is_new = np.zeros(n, np.uint8)
        ids = np.empty(n, np.int64)
        self.index.add(words, hashes, np.arange(n, dtype=np.int64), n, ids, 0, 1 << 62, np.zeros(n, np.uint16),
                       is_new)
        self.index.parent[: self.index.count] = -1
        self.initial = self.index.count
        return is_new

    def add_chunk(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int, is_new: np.ndarray,
                  first: int, sources: int, stride: int, labels: np.ndarray) -> None:
        """The successors of states ``first .. first + sources - 1``: candidate row ``r`` (of
        ``rows[:nrows]``, increasing) is the successor of state ``first + r // stride`` under label
        ``labels[r]``. Marks first occurrences in ``is_new``."""
        if self._ids.shape[0] < words.shape[0]:
            self._ids = np.empty(words.shape[0], np.int64)
        self.index.add(words, hashes, rows, nrows, self._ids, first, stride, labels, is_new)
        valid = rows[:nrows]
        self.degree_parts.append(np.bincount(valid // stride, minlength=sources).astype(np.int64))
        self.target_parts.append(self._ids[valid].astype(np.uint32))
        self.label_parts.append(labels[valid].copy())
        self.transitions += nrows

    def add_leaving(self, words: np.ndarray, rows: np.ndarray, level: np.ndarray, lo: int, first: int, stride: int,
                    labels: np.ndarray) -> None:
        """Candidate rows ``rows`` (increasing) whose successor lies outside a constraint: row ``r``
        is the successor of ``level[lo + r // stride]``, state ``first + r // stride``. Those that
        change the state are kept as leaving steps (a step back to the state itself enables
        nothing, as inside the graph)."""
        if not rows.size:
            return
        moved = rows[(words[rows] != level[lo + rows // stride]).any(axis=1)]
        self.leaving_source_parts.append((first + moved // stride).astype(np.uint32))
        self.leaving_label_parts.append(labels[moved].astype(np.uint16))

    def finish(self, depth: int) -> CompiledGraph:
        """The graph, its transitions copied part by part (each part freed once copied, so the
        copy costs one part beyond the graph, not the whole graph again)."""
        index = self.index
        index.trim()
        offsets = np.zeros(index.count + 1, np.int64)
        expanded = 0
        for part in self.degree_parts:
            # running sums continue from the previous part's last offset
            np.cumsum(part, out=offsets[expanded + 1: expanded + 1 + part.shape[0]])
            offsets[expanded + 1: expanded + 1 + part.shape[0]] += offsets[expanded]
            expanded += part.shape[0]
        # states never expanded (the last level has none; a limit may leave some) have no transitions
        offsets[expanded + 1:] = offsets[expanded]
        self.degree_parts = []
        targets = _joined(self.target_parts, np.uint32)
        labels = _joined(self.label_parts, np.uint16)
        return CompiledGraph(model=self.model, states=index.states, parent=index.parent,
                             parent_label=index.parent_label, offsets=offsets, targets=targets, labels=labels,
                             initial=self.initial, depth=depth,
                             leaving_sources=_joined(self.leaving_source_parts, np.uint32),
                             leaving_labels=_joined(self.leaving_label_parts, np.uint16))


def _joined(parts: list[np.ndarray], dtype) -> np.ndarray:
    """The parts end to end; empties ``parts`` as it goes, freeing each part once copied."""
    out = np.empty(sum(p.shape[0] for p in parts), dtype)
    at = 0
    while parts:
        part = parts.pop(0)
        out[at: at + part.shape[0]] = part
        at += part.shape[0]
        del part
    return out


def outside_mask(model: Model, kernels: Any, buf: Any, rows: np.ndarray) -> np.ndarray:
    """Per candidate row of ``rows``: whether its successor breaks a selected state constraint or
    its step breaks a selected action constraint (not in the graph)."""
    if not rows.size or not model.constrained:
        return np.zeros(rows.shape[0], bool)
    masks = kernels.violations(np.ascontiguousarray(buf.words[rows])) if model.constraints else None
    props = buf.props[rows] if model.action_constraints else None  # buf.props: a placeholder without
    return outside_constraints(model, masks, props)


def build_graph(model: Model, kernels: Any = None, max_states: Optional[int] = None,
                max_memory: Optional[int] = None, progress: ProgressFn = no_progress,
                chunk_candidates: int = CANDIDATES_PER_CHUNK) -> CompiledGraph:
    """Build the graph of every reachable state and transition of ``model`` (inside its constraints, with
    the leaving steps: see the module docstring).

    Refuses (OverBudget, saying what to do) above ``max_states`` states or once the process uses
    more than ``max_memory`` bytes: a graph analysis needs the whole graph.
    """
    from kraftcheck.checker.explore.result import memory_in_use
    t0 = time.perf_counter()
    kernels = kernels if kernels is not None else model_kernels(model)
    nlabels = len(model.labels)
    chunk_states = max(1, chunk_candidates // max(1, nlabels))
    buf = kernels.buffers(chunk_states)
    builder = GraphBuilder(model, StateIndex(kernels.nwords))
    init_words = kernels.pack(model.initial)
    if model.constraints:  # an initial state outside is not in the graph (the engine's _initial_level)
        inside = ~outside_constraints(model, kernels.violations(init_words))
        init_words = np.ascontiguousarray(init_words[inside])
    builder.add_initial(init_words, fingerprints(init_words))
    is_new = np.zeros(buf.words.shape[0], np.uint8)  # one mark per row of the buffers
    level_lo, level_hi, depth = 0, builder.count, 1
    last = 0.0
    while level_lo < level_hi:
        lo = level_lo
        while lo < level_hi:
            hi = min(level_hi, lo + chunk_states)
            # the states to expand are copied out: the index may grow (and move its arrays) below
            frontier = builder.index.states[lo:hi].copy()
            kernels.successors(frontier, 0, hi - lo, buf)
            rows = np.flatnonzero(buf.labels[: (hi - lo) * nlabels] != NO_LABEL).astype(np.int64)
            if model.constrained:
                bad = outside_mask(model, kernels, buf, rows)
                builder.add_leaving(buf.words, rows[bad], frontier, 0, lo, nlabels, buf.labels)
                rows = np.ascontiguousarray(rows[~bad])
            builder.add_chunk(buf.words, buf.hashes, rows, rows.shape[0], is_new, lo, hi - lo, nlabels, buf.labels)
            if max_states is not None and builder.count > max_states:
                raise OverBudget("--max-states",
                                 f"the state graph of {model.spec.title()} has more than {max_states} states "
                                 "(the limit given); raise it, or to shrink the model, "
                                 f"{model.spec.smaller_model_hint()}")
            now = time.perf_counter() - t0
            if now - last >= 0.25:
                last = now
                if max_memory is not None and memory_in_use() > max_memory:
                    raise OverBudget("--max-memory",
                                     f"recording the state graph of {model.spec.title()} went over the memory "
                                     f"budget ({max_memory / 2**30:.1f} GiB) at {builder.count} states and "
                                     f"{builder.transitions} transitions; raise --max-memory, or to shrink "
                                     f"the model, {model.spec.smaller_model_hint()}")
                progress(Progress(depth, builder.count, builder.transitions, level_hi - hi + builder.count - level_hi,
                                  now))
            lo = hi
        level_lo, level_hi = level_hi, builder.count
        if level_hi > level_lo:
            depth += 1
    graph = builder.finish(depth)
    graph.build_s = time.perf_counter() - t0
    progress(Progress(depth, graph.size, graph.transitions, 0, graph.build_s))
    return graph


def graph_to_analyse(model: Model, graph: Optional[CompiledGraph] = None, max_states: Optional[int] = None,
                     max_memory: Optional[int] = None, progress: ProgressFn = no_progress
                     ) -> tuple[CompiledGraph, Any]:
    """``(graph, kernels)`` for an analysis of ``model``: the graph given (built by the check)
    or one built now, after checking the analysis fits ``max_memory``."""
    kernels = model_kernels(model)
    if graph is None:
        graph = build_graph(model, kernels, max_states=max_states, max_memory=max_memory, progress=progress)
    graph.check_budget(max_memory)
    return graph, kernels
