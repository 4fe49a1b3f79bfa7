"""The compiled explorer: level-synchronous breadth-first search over packed states.

Per chunk of the current level: the generated ``expand`` kernel computes every successor (in
parallel over states) with its fingerprint and label; the visited set inserts them (in parallel
over shards); a serial pass keeps the first occurrences, in (source state, label) order, as the
next level with a parent index and label each; ``check`` evaluates the invariants on the new
states. Only the visited set, the current and next levels, and per state a uint32 parent and a
uint16 label are kept: a counterexample is rebuilt by replaying labels from an initial state.
"""

from __future__ import annotations

import time
from typing import Optional

import numba
import numpy as np
from numba import njit

from kraftcheck.checker.codegen import NO_LABEL, load_kernels
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.explore.result import (Clock, Options, Progress, ProgressFn, Result, Step, Violation, describe_limit,
                                    memory_exceeded, no_progress)
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.kernels.threads import run_parts, split, thread_count
from kraftcheck.checker.kernels.visited import VisitedSet
from kraftcheck.checker.model import Model

CANDIDATES_PER_CHUNK = 1 << 20


@njit(cache=True)
def _valid_rows(labels, nrows, rows):
    """Row numbers, in order, of the successors actually computed (label not NO_LABEL); how many."""
    n = 0
    for r in range(nrows):
        if labels[r] != NO_LABEL:
            rows[n] = r
            n += 1
    return n


@njit(cache=True)
def _collect_new(rows, nrows, stride, is_new, labels, label_action, first_index, fired, new_per_action,
                 out_rows, out_parent, out_label):
    """Keep first occurrences in candidate order; count coverage per action."""
    n = 0
    for j in range(nrows):
        r = rows[j]
        a = label_action[labels[r]]
        fired[a] += 1
        if is_new[r]:
            new_per_action[a] += 1
            out_rows[n] = r
            out_parent[n] = first_index + r // stride
            out_label[n] = labels[r]
            n += 1
    return n


class ChunkBuffers:
    """Arrays for the successors of up to ``states`` states, allocated once and reused per chunk
    (fresh arrays per chunk left freed-but-retained memory behind and cost page faults)."""

    def __init__(self, states: int, nlabels: int, layout, with_props: bool) -> None:
        rows = max(1, states * nlabels)
        self.states = states
        # the chunk's states unpacked once, read by every action kernel
        self.recs = layout.new_records(max(1, states))
        self.flat = self.recs.view(np.int32).reshape(max(1, states), layout.size)
        for index, value in layout.consts:
            self.flat[:, index] = value
        if not numba.config.DISABLE_JIT:
            self.recs = self.recs.view(np.ndarray)
        self.words = np.empty((rows, layout.nwords), np.uint64)
        self.hashes = np.empty(rows, np.uint64)
        self.labels = np.empty(rows, np.uint16)
        self.props = np.zeros(rows if with_props else 1, np.uint64)
        self.valid = np.empty(rows, np.int64)
        self.is_new = np.zeros(rows, np.uint8)
        self.new_rows = np.empty(rows, np.int64)
        self.new_parent = np.empty(rows, np.uint32)
        self.new_label = np.empty(rows, np.uint16)


class Kernels:
    """The compiled kernels of one model, with validated batch entry points.

    The breadth-first engine uses them chunk by chunk; a distributed engine can call the same
    ``successors`` and ``violations`` on any batch of packed states.
    """

    def __init__(self, model: Model) -> None:
        self.model = model
        self.module = load_kernels(model)
        self.nwords = model.layout.nwords
        self.nlabels = len(model.labels)
        self.const_values = np.array([value for _, value in model.layout.consts] or [0], np.int32)
        self.threads = thread_count()
        # Two scratch records (source, successor) per thread, far enough apart that threads
        # never write to the same cache line (false sharing halved throughput).
        stride = 2 + -(-256 // model.layout.dtype.itemsize)
        recs = model.layout.new_records(stride * self.threads)
        flat = recs.view(np.int32).reshape(stride * self.threads, model.layout.size)
        rec_arg = recs if numba.config.DISABLE_JIT else recs.view(np.ndarray)
        self._scratch = [(rec_arg[stride * j: stride * j + 2], flat[stride * j: stride * j + 2])
                         for j in range(self.threads)]

    def _parts(self, lo: int, hi: int) -> list[tuple[int, int]]:
        return split(lo, hi, self.threads if hi - lo >= 256 else 1)

    def _check_batch(self, words: np.ndarray) -> None:
        if words.ndim != 2 or words.shape[1] != self.nwords or words.dtype != np.uint64:
            raise TypeError(f"packed states must be a 2-D uint64 array with {self.nwords} words per row")

    def pack(self, flats: list[tuple[int, ...]]) -> np.ndarray:
        rows = np.array(flats, dtype=np.int32).reshape(len(flats), self.model.layout.size)
        words = np.zeros((len(flats), self.nwords), np.uint64)
        bad = self.module.pack_rows(rows, words, self.const_values)
        if bad >= 0:
            self.model.layout.check_domains(flats[bad])
        return words

    def unpack(self, words: np.ndarray) -> list[tuple[int, ...]]:
        self._check_batch(words)
        rows = np.zeros((words.shape[0], self.model.layout.size), np.int32)
        self.module.unpack_rows(words, rows, self.const_values)
        return [tuple(int(x) for x in r) for r in rows]

    def buffers(self, states: int) -> "ChunkBuffers":
        return ChunkBuffers(states, self.nlabels, self.model.layout, bool(self.model.properties))

    def successors(self, words: np.ndarray, lo: int = 0, hi: Optional[int] = None,
                   out: Optional["ChunkBuffers"] = None) -> "ChunkBuffers":
        """Every successor of ``words[lo:hi]``, in ``out`` (allocated if not given).

        The successor of state lo + i under label k sits at row ``i * nlabels + k``, with its
        fingerprint, its label (``NO_LABEL`` where that action instance is disabled) and, if the
        model has transition properties, the mask of those it violates.
        """
        self._check_batch(words)
        hi = words.shape[0] if hi is None else hi
        if not 0 <= lo <= hi <= words.shape[0]:
            raise IndexError(f"successors(): bad range {lo}..{hi} of {words.shape[0]} states")
        n = hi - lo
        out = self.buffers(n) if out is None else out
        if out.states < n:
            raise ValueError(f"successors(): buffers hold {out.states} states, asked for {n}")
        err = np.full(2, -1, np.int64)
        parts = self._parts(0, n)

        def expand_part(j: int) -> None:
            a, b = parts[j]
            recs, flat = self._scratch[j]
            self.module.unpack_range(words, lo + a, lo + b, a, out.flat)
            for expand in self.module.EXPANDERS:
                expand(out.recs, out.flat, a, b, recs[1:], flat[1], out.words, out.hashes, out.labels,
                       out.props, err, self.const_values)

        run_parts(expand_part, len(parts))
        if err[0] >= 0:  # re-run that step in Python for a precise message
            state = self.unpack(words[lo + err[0]: lo + err[0] + 1])[0]
            self.model.step(state, int(err[1]))
            raise SpecError(f"action {self.model.labels[err[1]]} produced a value outside its field's domain")
        return out

    def violations(self, words: np.ndarray, lo: int = 0, hi: Optional[int] = None) -> np.ndarray:
        """Bitmask of violated invariants (bit k = ``model.invariants[k]``) for ``words[lo:hi]``."""
        self._check_batch(words)
        hi = words.shape[0] if hi is None else hi
        out = np.zeros(hi - lo, np.uint64)
        if self.model.invariants and hi > lo:
            parts = self._parts(lo, hi)

            def check_part(j: int) -> None:
                a, b = parts[j]
                recs, flat = self._scratch[j]
                self.module.check(words, a, b, a - lo, recs, flat, out, self.const_values)

            run_parts(check_part, len(parts))
        return out


class Engine:
    """Breadth-first exploration with the compiled kernels."""

    name = "engine"

    def __init__(self, chunk_candidates: int = CANDIDATES_PER_CHUNK, shard_bits: int = 4) -> None:
        self.chunk_candidates = chunk_candidates
        self.shard_bits = shard_bits

    def explore(self, model: Model, options: Options = Options(), progress: ProgressFn = no_progress) -> Result:
        t0 = time.perf_counter()
        kernels = Kernels(model)
        init_words = kernels.pack(model.initial)
        self._warm_up(kernels, init_words)
        compile_s = time.perf_counter() - t0
        run = _Run(model, kernels, options, progress, self.shard_bits,
                   max(1, self.chunk_candidates // max(1, len(model.labels))))
        result = run.result
        result.compile_s = compile_s
        try:
            run.explore(init_words)
        except KeyboardInterrupt:
            result.interrupted = True
            result.incomplete_reason = "interrupted"
        run.finish()
        return result

    @staticmethod
    def _warm_up(kernels: Kernels, init_words: np.ndarray) -> None:
        """Compile (or load from numba's cache) every kernel before the clock starts."""
        kernels.successors(init_words, 0, 1)
        kernels.violations(init_words, 0, 1)
        VisitedSet(kernels.nwords, 1, 4).insert(init_words[:1].copy(), fingerprints(init_words[:1]),
                                                np.zeros(1, np.int64))
        buf = kernels.successors(init_words, 0, 1)
        _valid_rows(buf.labels, 1, buf.valid)
        z = np.zeros(1, np.int64)
        _collect_new(z, 0, 1, np.zeros(1, np.uint8), np.zeros(1, np.uint16), np.zeros(1, np.int64), 0,
                     z.copy(), z.copy(), z.copy(), np.zeros(1, np.uint32), np.zeros(1, np.uint16))


class _Run:
    """State of one exploration: levels, parents, labels, violations found."""

    def __init__(self, model: Model, kernels: Kernels, options: Options, progress: ProgressFn,
                 shard_bits: int, chunk_states: int) -> None:
        self.model, self.kernels, self.options, self.progress = model, kernels, options, progress
        self.chunk_states = chunk_states
        self.buffers = kernels.buffers(chunk_states)
        self.visited = VisitedSet(kernels.nwords, shard_bits)
        self.result = Result(model=model, engine=Engine.name, fired=[0] * len(model.actions),
                             new_states=[0] * len(model.actions))
        self.fired = np.zeros(len(model.actions), np.int64)
        self.new_per_action = np.zeros(len(model.actions), np.int64)
        self.label_action = np.array(model.label_action, np.int64)
        self.parents: list[np.ndarray] = []  # per level, uint32 global parent index
        self.labels: list[np.ndarray] = []   # per level, uint16 label (0 for initial states)
        self.level_start: list[int] = []
        self.found: dict[str, Violation] = {}
        self.distinct = 0
        self.generated = 0
        self.depth = 0
        self.clock: Optional[Clock] = None
        self.last_progress = 0.0
        self.frontier_size = 0

    # -- the search
    def explore(self, init_words: np.ndarray) -> None:
        self.clock = Clock(self.options.time_limit)
        hashes = fingerprints(init_words)
        is_new = self.visited.insert(init_words, hashes, np.arange(init_words.shape[0], dtype=np.int64))
        level = init_words[is_new.astype(bool)]
        self.generated = init_words.shape[0]
        self.result.initial_states = init_words.shape[0]
        self._add_level(np.full(level.shape[0], 0xFFFFFFFF, np.uint32), np.zeros(level.shape[0], np.uint16))
        if self._check_new(level, 0):
            return
        while level.shape[0]:
            if self.options.max_depth is not None and self.depth >= self.options.max_depth:
                self.result.incomplete_reason = describe_limit(self.options, "max_depth")
                return
            level = self._expand_level(level)
            if level is None:
                return

    def _expand_level(self, level: np.ndarray) -> Optional[np.ndarray]:
        first = self.level_start[-1]
        next_words, next_parents, next_labels = [], [], []
        new_so_far = 0
        stride = len(self.model.labels)
        buf = self.buffers
        for lo in range(0, level.shape[0], self.chunk_states):
            hi = min(level.shape[0], lo + self.chunk_states)
            self.kernels.successors(level, lo, hi, buf)
            nrows = _valid_rows(buf.labels, (hi - lo) * stride, buf.valid)
            self.generated += nrows
            if self.model.properties:
                self._check_properties(buf.props, buf.valid[:nrows], buf.labels, first + lo, stride)
            self.visited.insert(buf.words, buf.hashes, buf.valid, nrows, buf.is_new)
            n = _collect_new(buf.valid, nrows, stride, buf.is_new, buf.labels, self.label_action, first + lo,
                             self.fired, self.new_per_action, buf.new_rows, buf.new_parent, buf.new_label)
            new_words = buf.words[buf.new_rows[:n]]
            next_words.append(new_words)
            next_parents.append(buf.new_parent[:n].copy())
            next_labels.append(buf.new_label[:n].copy())
            self.frontier_size = level.shape[0] - hi + new_so_far + n
            stop = self._check_new(new_words, self.distinct + new_so_far, next_parents, next_labels)
            new_so_far += n
            if stop or self._limits_hit(new_so_far, more_work=hi < level.shape[0] or new_so_far > 0):
                if new_so_far:  # the partial level counts, as in the reference explorer
                    self._add_level(np.concatenate(next_parents), np.concatenate(next_labels))
                self._report(force=True)
                return None
            self._report(force=False)
        nxt = np.concatenate(next_words) if next_words else np.empty((0, self.kernels.nwords), np.uint64)
        del next_words
        if nxt.shape[0]:
            self._add_level(np.concatenate(next_parents), np.concatenate(next_labels))
        self._report(force=True)
        return nxt

    def _add_level(self, parents: np.ndarray, labels: np.ndarray) -> None:
        self.level_start.append(self.distinct)
        self.parents.append(parents)
        self.labels.append(labels)
        self.distinct += parents.shape[0]
        self.depth += 1

    def _check_new(self, words: np.ndarray, first_index: int, pending_parents=None, pending_labels=None) -> bool:
        """Check invariants on new states; True when the run must stop."""
        if not self.model.invariants or not words.shape[0]:
            return False
        masks = self.kernels.violations(words)
        bad = np.flatnonzero(masks)
        if not bad.size:
            return False
        for k, inv in enumerate(self.model.invariants):
            if inv.name in self.found:
                continue
            hits = bad[(masks[bad] >> np.uint64(k)) & np.uint64(1) == 1]
            if hits.size:
                index = first_index + int(hits[0])
                self.found[inv.name] = Violation(inv.name, "invariant",
                                                 self._trace(index, pending_parents, pending_labels))
        return not self.options.keep_going

    def _check_properties(self, props: np.ndarray, rows: np.ndarray, labels: np.ndarray, first: int,
                          stride: int) -> None:
        bad_rows = rows[props[rows] != 0]
        if not bad_rows.size:
            return
        for k, prop in enumerate(self.model.properties):
            if prop.name in self.found:
                continue
            hits = bad_rows[(props[bad_rows] >> np.uint64(k)) & np.uint64(1) == 1]
            if hits.size:
                r = int(hits[0])
                steps = self._trace(first + r // stride)
                succ = self.model.step(steps[-1].state, int(labels[r]))
                steps.append(Step(int(labels[r]), succ))
                self.found[prop.name] = Violation(prop.name, "property", steps)

    def _limits_hit(self, new_in_level: int, more_work: bool) -> bool:
        distinct = self.distinct + new_in_level
        if self.found and not self.options.keep_going:
            return True
        if self.options.max_states is not None and distinct > self.options.max_states:
            self.result.incomplete_reason = describe_limit(self.options, "max_states")
            return True
        if self.clock.expired() and more_work:
            self.result.incomplete_reason = describe_limit(self.options, "time_limit")
            return True
        if more_work and memory_exceeded(self.options):
            self.result.incomplete_reason = describe_limit(self.options, "max_memory")
            return True
        return False

    # -- traces
    def _trace(self, index: int, pending_parents=None, pending_labels=None) -> list[Step]:
        """Replay the labels on the path to state ``index`` from its initial state."""
        labels = []
        while True:
            parent, label = self._parent_of(index, pending_parents, pending_labels)
            if parent < 0:
                break
            labels.append(label)
            index = parent
        state = self.model.initial[index]  # initial states are the first indices, in order
        steps = [Step(None, state)]
        for label in reversed(labels):
            state = self.model.step(state, label)
            if state is None:
                raise SpecError(f"internal: replaying {self.model.labels[label]} found it disabled")
            steps.append(Step(label, state))
        return steps

    def _parent_of(self, index: int, pending_parents, pending_labels) -> tuple[int, int]:
        if index >= self.distinct:  # a state of the level being built
            offset = index - self.distinct
            for p, lab in zip(pending_parents, pending_labels):
                if offset < p.shape[0]:
                    return int(p[offset]), int(lab[offset])
                offset -= p.shape[0]
            raise IndexError(index)
        level = int(np.searchsorted(self.level_start, index, side="right")) - 1
        if level == 0:
            return -1, -1
        offset = index - self.level_start[level]
        return int(self.parents[level][offset]), int(self.labels[level][offset])

    # -- reporting
    def _report(self, force: bool) -> None:
        now = self.clock.elapsed
        if force or now - self.last_progress >= 0.25:
            self.last_progress = now
            self.progress(Progress(self.depth, self.distinct, self.generated, self.frontier_size, now))

    def finish(self) -> None:
        r = self.result
        r.distinct_states = self.distinct
        r.states_generated = self.generated
        r.depth = self.depth
        r.elapsed_s = self.clock.elapsed if self.clock else 0.0
        r.fired = [int(x) for x in self.fired]
        r.new_states = [int(x) for x in self.new_per_action]
        r.conclude(list(self.found.values()), self.options.keep_going)
