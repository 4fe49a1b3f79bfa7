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
from typing import Any, Optional

import numba
import numpy as np
from numba import njit

from kraftcheck.checker.codegen import NO_LABEL, load_kernels, write_kernel_module
from kraftcheck.checker.compile import (SCRATCH_BYTES, BackgroundCompile, KernelShapes, compile_error,
                                        compile_in_process, is_compiled)
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.explore.result import (Clock, Options, Progress, ProgressFn, Result, Step, Violation, describe_limit,
                                    memory_exceeded, no_progress)
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.kernels.threads import run_parts, split, thread_count
from kraftcheck.checker.kernels.visited import FingerprintSet, VisitedSet
from kraftcheck.checker.model import Model

CANDIDATES_PER_CHUNK = 1 << 20
# states per chunk while interpreting: small, so the switch to compiled kernels comes soon
INTERPRETED_CHUNK_STATES = 64


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

    compiled = True

    def __init__(self, model: Model, module=None) -> None:
        self.model = model
        self.module = module if module is not None else load_kernels(model)
        self.nwords = model.layout.nwords
        self.nlabels = len(model.labels)
        self.const_values = np.array([value for _, value in model.layout.consts] or [0], np.int32)
        self.threads = thread_count()
        # Two scratch records (source, successor) per thread, far enough apart that threads
        # never write to the same cache line (false sharing halved throughput).
        stride = 2 + -(-SCRATCH_BYTES // model.layout.dtype.itemsize)
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

    def step(self, flat: tuple[int, ...], label: int) -> Optional[tuple[int, ...]]:
        """The successor of ``flat`` under ``label`` (None if disabled), by the compiled action."""
        return self.model.step(flat, label)

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


def kernel_shapes(model: Model) -> KernelShapes:
    """The argument types of ``model``'s kernels, with the kernel module written to the cache."""
    name, path = write_kernel_module(model)
    return KernelShapes(module_name=name, module_path=str(path), dtype_descr=model.layout.dtype.descr,
                        size=model.layout.size, nwords=model.layout.nwords, nlabels=len(model.labels),
                        nconsts=len(model.layout.consts), kernel_names=[a.name for a in model.actions])


COMPILE_MODES = ("now", "background", "never")


class Engine:
    """Breadth-first exploration with the compiled kernels.

    ``compile`` says when they are built: ``now``, before exploring (in this process); or
    ``background``: if they are not in the cache yet, a separate process compiles them while this
    one explores with the interpreted tier (``InterpretedKernels``, identical results, much
    slower), switching to the compiled kernels between two chunks once they are ready; a run that
    ends first never waits for them. ``never`` interprets throughout (tests of the first tier).
    """

    name = "engine"

    def __init__(self, chunk_candidates: int = CANDIDATES_PER_CHUNK, shard_bits: int = 4,
                 compile: str = "now") -> None:
        if compile not in COMPILE_MODES:
            raise ValueError(f"compile must be one of {', '.join(COMPILE_MODES)}")
        self.chunk_candidates = chunk_candidates
        self.shard_bits = shard_bits
        self.compile = compile

    def explore(self, model: Model, options: Options = Options(), progress: ProgressFn = no_progress) -> Result:
        t0 = time.perf_counter()
        mode = "now" if numba.config.DISABLE_JIT else self.compile
        builder: Optional[BackgroundCompile] = None
        if mode == "never":
            kernels: Any = InterpretedKernels(model)
        else:
            shapes = kernel_shapes(model)
            if mode == "now" or is_compiled(shapes.module_path):
                kernels = self._compile_now(model, shapes, progress, t0)
            else:
                builder = BackgroundCompile(shapes)
                kernels = InterpretedKernels(model)
        init_words = kernels.pack(model.initial)
        _warm_up_generic(init_words)
        run = _Run(model, kernels, options, progress, self.shard_bits,
                   max(1, self.chunk_candidates // max(1, len(model.labels))), builder)
        result = run.result
        result.compile_s = time.perf_counter() - t0 if builder is None else 0.0
        result.compiled_in_background = builder is not None
        try:
            run.explore(init_words)
        except KeyboardInterrupt:
            result.interrupted = True
            result.incomplete_reason = "interrupted"
        finally:
            if builder is not None:
                builder.stop()
        run.finish()
        return result

    @staticmethod
    def _compile_now(model: Model, shapes: KernelShapes, progress: ProgressFn, t0: float) -> "Kernels":
        def on_kernel(i: int, n: int, what: str) -> None:
            progress(Progress(0, 0, 0, 0, time.perf_counter() - t0, compiling=f"kernel {i + 1}/{n}: {what}"))

        try:
            module = compile_in_process(shapes, on_kernel)
        except numba.core.errors.NumbaError as e:
            raise compile_error(model.spec.name, e) from None
        return Kernels(model, module)


def _warm_up_generic(init_words: np.ndarray) -> None:
    """Compile (or load from numba's cache) the spec-independent kernels before the clock starts."""
    VisitedSet(init_words.shape[1], 1, 4).insert(init_words[:1].copy(), fingerprints(init_words[:1]),
                                                 np.zeros(1, np.int64))
    _valid_rows(np.zeros(1, np.uint16), 1, np.zeros(1, np.int64))
    z = np.zeros(1, np.int64)
    _collect_new(z, 0, 1, np.zeros(1, np.uint8), np.zeros(1, np.uint16), np.zeros(1, np.int64), 0,
                 z.copy(), z.copy(), z.copy(), np.zeros(1, np.uint32), np.zeros(1, np.uint16))


class _Run:
    """State of one exploration: levels, parents, labels, violations found."""

    def __init__(self, model: Model, kernels: Any, options: Options, progress: ProgressFn,
                 shard_bits: int, chunk_states: int, builder: Optional[BackgroundCompile] = None) -> None:
        self.model, self.kernels, self.options, self.progress = model, kernels, options, progress
        self.builder = builder  # compiling the kernels in the background while we interpret
        self.interpreted_states = 0  # states expanded by the interpreted tier
        self.chunk_states = chunk_states
        self.buffers = kernels.buffers(chunk_states)
        self.visited: Any = FingerprintSet(shard_bits) if options.fingerprints else \
            VisitedSet(kernels.nwords, shard_bits)
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
        found = self._check_new(level, 0, np.arange(level.shape[0]),
                                [np.full(level.shape[0], 0xFFFFFFFF, np.uint32)], [np.zeros(level.shape[0], np.uint16)])
        if found and not self.options.keep_going:  # stop at the first violating initial state
            cut = min(found.values())
            for name in [name for name, row in found.items() if row > cut]:
                del self.found[name]
            level = level[: cut + 1]
            self.generated = cut + 1
        self._add_level(np.full(level.shape[0], 0xFFFFFFFF, np.uint32), np.zeros(level.shape[0], np.uint16))
        if found and not self.options.keep_going:
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
        lo = 0
        while lo < level.shape[0]:
            self._switch_when_compiled()
            hi = min(level.shape[0], lo + (self.chunk_states if self.kernels.compiled else INTERPRETED_CHUNK_STATES))
            if not self.kernels.compiled:
                self.interpreted_states += hi - lo
            self.kernels.successors(level, lo, hi, buf)
            nrows = _valid_rows(buf.labels, (hi - lo) * stride, buf.valid)
            self.generated += nrows
            found_here: dict[str, int] = {}  # check -> candidate row where it was violated
            if self.model.properties:
                found_here.update(self._check_properties(buf.props, buf.valid[:nrows], buf.labels, first + lo,
                                                         stride))
            self.visited.insert(buf.words, buf.hashes, buf.valid, nrows, buf.is_new)
            n = _collect_new(buf.valid, nrows, stride, buf.is_new, buf.labels, self.label_action, first + lo,
                             self.fired, self.new_per_action, buf.new_rows, buf.new_parent, buf.new_label)
            new_words = buf.words[buf.new_rows[:n]]
            next_words.append(new_words)
            next_parents.append(buf.new_parent[:n].copy())
            next_labels.append(buf.new_label[:n].copy())
            self.frontier_size = level.shape[0] - hi + new_so_far + n
            found_here.update(self._check_new(new_words, self.distinct + new_so_far, buf.new_rows[:n],
                                              next_parents, next_labels))
            if found_here and not self.options.keep_going:
                n = self._stop_at_first_violation(found_here, buf, nrows, n)
                next_parents[-1], next_labels[-1] = next_parents[-1][:n], next_labels[-1][:n]
            new_so_far += n
            if self._limits_hit(new_so_far, more_work=hi < level.shape[0] or new_so_far > 0):
                if new_so_far:  # the partial level counts, as in the reference explorer
                    self._add_level(np.concatenate(next_parents), np.concatenate(next_labels))
                self._report(force=True)
                return None
            self._report(force=False)
            lo = hi
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

    def _stop_at_first_violation(self, found_here: dict[str, int], buf: ChunkBuffers, nrows: int, n: int) -> int:
        """Make a run that stops at its first violation count exactly what the reference explorer
        counts: everything up to the violating candidate row, nothing the chunk computed after it
        (so counts do not depend on chunk sizes or tiers). Returns how many new states to keep."""
        cut = min(found_here.values())
        for name, row in found_here.items():
            if row > cut:  # found later in the chunk than where the run stops
                del self.found[name]
        valid = buf.valid[:nrows]
        k = int(np.searchsorted(valid, cut, side="right"))
        tail = valid[k:]
        actions = self.label_action[buf.labels[tail].astype(np.int64)]
        np.subtract.at(self.fired, actions, 1)
        np.subtract.at(self.new_per_action, actions[buf.is_new[tail] == 1], 1)
        self.generated -= nrows - k
        return int(np.searchsorted(buf.new_rows[:n], cut, side="right"))

    def _check_new(self, words: np.ndarray, first_index: int, rows: np.ndarray, pending_parents=None,
                   pending_labels=None) -> dict[str, int]:
        """Check invariants on new states; the checks newly violated -> the row (``rows[i]`` for
        the i-th new state) where each was violated first."""
        if not self.model.invariants or not words.shape[0]:
            return {}
        masks = self.kernels.violations(words)
        bad = np.flatnonzero(masks)
        found: dict[str, int] = {}
        if not bad.size:
            return found
        for k, inv in enumerate(self.model.invariants):
            if inv.name in self.found:
                continue
            hits = bad[(masks[bad] >> np.uint64(k)) & np.uint64(1) == 1]
            if hits.size:
                index = first_index + int(hits[0])
                self.found[inv.name] = Violation(inv.name, "invariant",
                                                 self._trace(index, pending_parents, pending_labels))
                found[inv.name] = int(rows[hits[0]])
        return found

    def _check_properties(self, props: np.ndarray, rows: np.ndarray, labels: np.ndarray, first: int,
                          stride: int) -> dict[str, int]:
        bad_rows = rows[props[rows] != 0]
        found: dict[str, int] = {}
        if not bad_rows.size:
            return found
        for k, prop in enumerate(self.model.properties):
            if prop.name in self.found:
                continue
            hits = bad_rows[(props[bad_rows] >> np.uint64(k)) & np.uint64(1) == 1]
            if hits.size:
                r = int(hits[0])
                steps = self._trace(first + r // stride)
                succ = self.kernels.step(steps[-1].state, int(labels[r]))
                steps.append(Step(int(labels[r]), succ))
                self.found[prop.name] = Violation(prop.name, "property", steps)
                found[prop.name] = r
        return found

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
            state = self.kernels.step(state, label)
            if state is None:
                raise SpecError(f"internal: replaying {self.model.labels[label]} found it disabled")
            steps.append(Step(label, state))
        return steps

    def _parent_of(self, index: int, pending_parents, pending_labels) -> tuple[int, int]:
        if index >= self.distinct and not self.level_start:  # an initial state, being checked
            return -1, -1
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

    # -- the two tiers
    def _switch_when_compiled(self) -> None:
        """Take the compiled kernels once the background compile has finished (between chunks,
        so nothing a chunk computed depends on which tier computed it)."""
        builder = self.builder
        if builder is None or self.kernels.compiled:
            return
        if builder.done():
            shapes = kernel_shapes(self.model)
            self.kernels = Kernels(self.model, compile_in_process(shapes))  # loads from numba's cache
            self.result.compile_s = builder.finished_s
            self.builder = None
        elif builder.failed():
            # compile here, so the error is numba's own (it names the spec's line)
            try:
                compile_in_process(kernel_shapes(self.model))
            except numba.core.errors.NumbaError as e:
                raise compile_error(self.model.spec.name, e) from None
            raise SpecError(f"compiling the kernels failed in the background: {builder.error_text()[-2000:]}")

    # -- reporting
    def _report(self, force: bool) -> None:
        now = self.clock.elapsed
        if force or now - self.last_progress >= 0.25:
            self.last_progress = now
            compiling = f"{self.builder.status}, {self.builder.elapsed:.0f} s" if self.builder else None
            self.progress(Progress(self.depth, self.distinct, self.generated, self.frontier_size, now,
                                   compiling=compiling))

    def finish(self) -> None:
        r = self.result
        r.distinct_states = self.distinct
        r.states_generated = self.generated
        r.depth = self.depth
        r.elapsed_s = self.clock.elapsed if self.clock else 0.0
        r.fired = [int(x) for x in self.fired]
        r.new_states = [int(x) for x in self.new_per_action]
        r.interpreted_states = self.interpreted_states
        r.fingerprints = self.options.fingerprints
        if self.options.fingerprints:
            r.collision_probability = self.visited.collision_probability(self.generated)
        r.conclude(list(self.found.values()), self.options.keep_going)
