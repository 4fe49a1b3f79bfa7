"""The compiled explorer: level-synchronous breadth-first search over packed states.

Per chunk of the current level: the generated ``expand`` kernel computes every successor (in
parallel over states) with its fingerprint and label; the visited set inserts them (in parallel
over shards); a serial pass keeps the first occurrences, in (source state, label) order, as the
next level with a parent index and label each; ``check`` evaluates the invariants on the new
states. Only the visited set, the current and next levels, and per state a uint32 parent and a
uint16 label are kept: a counterexample is rebuilt by replaying labels from an initial state.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import numba
import numpy as np

from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.compile import BackgroundCompile, warm_up_engine_kernels
from kraftcheck.checker.explore.compiled import ChunkBuffers, Kernels, RepeatTables, kernel_shapes  # noqa: F401 (API)
from kraftcheck.checker.errors import SpecError, SpecRaised, UsageError
from kraftcheck.checker.disk_full import disk_full_reason, is_disk_full, write_kept
from kraftcheck.checker.explore.bytecode_tier import BytecodeKernels, interpreter_compile
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.explore.spec_raised import placed_at
from kraftcheck.checker.explore.tiers import COMPILE_MODES, Tiers, interpret_budget, start_kernels
from kraftcheck.checker.explore.visited_sets import visited_set_for
from kraftcheck.checker.explore.result import (Options, Progress, ProgressFn, Result, Step, Violation, no_progress,
                                               replay_path)
from kraftcheck.checker.explore.run_limits import Clock, describe_limit, limit_reached, memory_total
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.kernels import successor_rows
from kraftcheck.checker.kernels.successor_rows import (NO_ROW, TALLY_FIRED, bucket_dense_part, bucket_part,
                                                      collect_dense_part, collect_part, seen_table_size, tally_width,
                                                      valid_rows_part)
from kraftcheck.checker.kernels.threads import per_thread_rows, run_parts, thread_count, using_threads
from kraftcheck.checker.explore.checkpoint import (MANIFEST, HeldCheckpoint, counts_for_manifest, hold_checkpoint,
                                                  restore_counts, write_manifest)
from kraftcheck.checker.explore.levels import INITIAL_PARENT, DiskLevels, MemoryLevels
from kraftcheck.checker.analyses.state_graph import GraphBuilder
from kraftcheck.checker.stop import raise_if_stop_requested, stop_honoured
from kraftcheck.checker.kernels.deadlock import first_stuck
from kraftcheck.checker.model import DEADLOCK, Model
from kraftcheck.checker.symmetry import canonical_step, canonicaliser_for
from kraftcheck.checker.symmetry_check import check_symmetry
from kraftcheck.checker.explore.concrete import concrete_trace
from kraftcheck.checker.explore.constraints import outside_constraints

CANDIDATES_PER_CHUNK = 1 << 20  # successor rows the chunk buffers hold (the largest chunk)
# States per chunk are chosen so that a chunk yields about this many successors: the insert pass's
# working set then stays in the last-level cache, while a chunk still pays for its kernel dispatches
# ("Figures behind the code's design" in bench/RESULTS.md holds the measurements of these sizes).
SUCCESSORS_PER_CHUNK = 1 << 16
# On the distinct-successor path (``Kernels.distinct_successors``) a chunk's working set is its
# distinct successors, not its candidate rows, so larger chunks pay: more repeats are caught
# within a chunk instead of in the visited set.
DISTINCT_CANDIDATES_PER_CHUNK = 1 << 22
DISTINCT_SUCCESSORS_PER_CHUNK = 1 << 21
# Whatever the path, a chunk's unpacked states (an int32 row each, which every action kernel
# reads) stay within this: past it they leave the cache.
UNPACKED_BYTES_PER_CHUNK = 8 << 20
# Parent links are uint32 and all ones marks an initial state: a state numbered past this could
# not be a parent. The run stops (incomplete) before it expands such a state.
MAX_NUMBERED_STATES = INITIAL_PARENT - 1
# Without --checkpoint the levels start in memory and move to a temporary directory (they
# "spill") once they hold more than this share of --max-memory (of the machine's memory without
# one): the levels are cheap on disk (written in order, read once, in order), and the visited set,
# which cannot leave memory, is what a large run needs memory for.
LEVELS_MEMORY_SHARE = 1 / 16
SPILL_PREFIX = "kraftcheck-levels-"  # the temporary directory's name starts so, under $TMPDIR


class Engine:
    """Breadth-first exploration with the compiled kernels.

    ``compile`` says when they are built: ``now``, before exploring (in this process); or
    ``background``: if they are not in the cache yet, a separate process compiles them while this
    one explores with the interpreted tier (``InterpretedKernels``, identical results, much
    slower) for at most ``interpret_budget()`` seconds, then waits for them, switching to the
    compiled kernels between two chunks once they are ready; a run that ends first never waits
    for them, but gives its answer only once numba is known to accept the spec's functions (a
    compiled form, or numba's type inference of them: ``typing_check``), and redoes with the
    compiled kernels any chunk whose Python the interpreted tier could not run. A small layout's
    compile builds its table form first (``codegen.write_kernel_module``: quick to compile, about
    half as fast to run), which the run takes while the unrolled form compiles, then the unrolled
    form. ``never`` runs the Python tier throughout, ``bytecode`` the bytecode tier (tests).

    ``spill_levels_at``: bytes the levels may hold in memory before they spill to a temporary
    directory (0: from the first level on); None: LEVELS_MEMORY_SHARE of ``Options.max_memory``.
    A checkpoint's levels are on disk from the start.
    """

    name = "engine"

    def __init__(self, chunk_candidates: Optional[int] = None, shard_bits: int = 6,
                 compile: str = "now", spill_levels_at: Optional[int] = None) -> None:
        if compile not in COMPILE_MODES:
            raise ValueError(f"compile must be one of {', '.join(COMPILE_MODES)}")
        if spill_levels_at is not None and spill_levels_at < 0:
            raise ValueError("spill_levels_at must be a number of bytes of at least 0")
        self.chunk_candidates = chunk_candidates
        self.shard_bits = shard_bits
        self.compile = compile
        self.spill_levels_at = spill_levels_at

    def explore(self, model: Model, options: Options = Options(), progress: ProgressFn = no_progress,
                observer: Optional[RunObserver] = None) -> Result:
        """Explore ``model``; ``progress`` gets a snapshot now and then, ``observer`` (if any) the
        run's events (``observer.py``)."""
        # a checkpoint directory is this run's alone, checked first; the run's threads are its options'
        with hold_checkpoint(model, options) as held, using_threads(options.threads):
            return self._explore(model, options, progress, observer, held)

    def _explore(self, model: Model, options: Options, progress: ProgressFn, observer: Optional[RunObserver],
                 held: HeldCheckpoint) -> Result:
        t0 = time.perf_counter()
        if options.keep_graph and (not options.keep_going or options.fingerprints or options.checkpoint_dir):
            raise UsageError("recording the state graph needs every state explored and kept in memory: "
                             "keep_going (--continue), without fingerprints or a checkpoint")
        if options.keep_graph and options.symmetry:
            raise UsageError("--symmetry explores one state per orbit; the graph analyses need every state")
        if options.symmetry:
            canonicaliser_for(model)  # the spec's refusal, before anything is compiled
        mode = "now" if numba.config.DISABLE_JIT else self.compile
        thread_count()  # a bad KRAFTCHECK_THREADS (the default when options.threads is None) refused first
        if mode == "background":
            interpret_budget()  # a bad setting refused before anything is compiled
        builder: Optional[BackgroundCompile] = None
        # an installation's first run: the first tier's interpreter compiles in a helper process
        # from now on, beside this process's own work (a spec whose tier does not need it stops it)
        interpreter = interpreter_compile() if mode == "background" else None
        try:
            kernels, builder, interpreter = start_kernels(model, mode, interpreter, progress, t0)
            init_words = kernels.pack(model.initial)
            # an interpreted start leaves the compiled kernels' own path to the background compile,
            # which puts it in numba's cache for the switch
            warm_up_engine_kernels(kernels.nwords, distinct_path=kernels.compiled)
            run = _Run(model, kernels, options, progress, self.shard_bits, self._chunk_states(model, options),
                       builder, self._spill_at(options), observer, held)
        except BaseException:  # an initial state outside its domain, say: the helper goes, the compile as always
            if interpreter is not None:
                interpreter.stop()
            if builder is not None:
                builder.stop()
            raise
        result = run.result
        result.compile_s = time.perf_counter() - t0 if builder is None else None
        result.compiled_in_background = builder is not None
        if builder is not None or mode in ("never", "bytecode"):
            result.first_tier = "bytecode" if isinstance(kernels, BytecodeKernels) else \
                "python" if isinstance(kernels, InterpretedKernels) else None  # None: a table form compiled
            result.first_tier_python_because = getattr(kernels, "why_python", None)
        try:
            try:
                if interpreter is not None:
                    run.load_interpreter(interpreter)
                if options.symmetry:  # a declared symmetry is tried on a sample before it is trusted
                    check_symmetry(model, kernels)
                run.explore(init_words)
                run.tiers.confirm_spec_compiles()  # the answer is given only for a spec numba accepts
            except KeyboardInterrupt:
                stop_honoured()
                result.interrupted = True
                result.incomplete_reason = "interrupted"
            except SpecError:
                run.tiers.confirm_spec_compiles()  # numba's refusal, as --compile now gives it, comes first
                raise
            except OSError as e:  # a full disk ends the run incomplete; what it found is kept
                if not is_disk_full(e):
                    raise
                result.incomplete_reason = disk_full_reason(e, run.spill_dir or options.checkpoint_dir)
            finally:
                if interpreter is not None:
                    interpreter.stop()
                if builder is not None:
                    builder.stop()
                    result.compile_continues = builder.left_running
            run.finish()
        finally:
            run.remove_spilled_levels()  # whatever ends the run: an error, a second Ctrl-C
        if observer is not None:
            observer.run_finished(result, run)
        return result

    def _spill_at(self, options: Options) -> Optional[int]:
        """Bytes of levels in memory past which they spill to disk; None when they start there."""
        if options.checkpoint_dir:
            return None
        if self.spill_levels_at is not None:
            return self.spill_levels_at
        return int(LEVELS_MEMORY_SHARE * (options.max_memory or memory_total()))

    def _chunk_states(self, model: Model, options: Options) -> int:
        """The most states a chunk holds (its buffers are sized for them): ``chunk_candidates``
        candidate rows if given, else as many as the path the run will take wants
        (DISTINCT_CANDIDATES_PER_CHUNK unless the successors are canonicalised or kept for the graph, or
        every chunk is interpreted), and at most UNPACKED_BYTES_PER_CHUNK of unpacked states."""
        candidates = self.chunk_candidates
        if candidates is None:
            compiled = self.compile not in ("never", "bytecode") and not numba.config.DISABLE_JIT
            distinct = compiled and not (options.symmetry or options.keep_graph or every_row_needed(model))
            candidates = DISTINCT_CANDIDATES_PER_CHUNK if distinct else CANDIDATES_PER_CHUNK
        unpacked = UNPACKED_BYTES_PER_CHUNK // (4 * model.layout.size)
        return max(1, min(candidates // max(1, len(model.labels)), unpacked))


def every_row_needed(model: Model) -> bool:
    """Whether the engine needs every successor row of a chunk, not only the distinct ones: a
    state or action constraint leaves some out of the search (the candidate-row path). (The
    deadlock check works on either path.)"""
    return model.constrained


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


def close_gaps(columns: tuple[np.ndarray, ...], starts: list[int], counts: list[int]) -> list[tuple[int, int]]:
    """Parts wrote ``counts[j]`` rows each from ``starts[j]`` of every column; move them down so
    they lie one after another from row 0, in part order. Returns each part's (start, count) there."""
    spans, n = [], 0
    for start, count in zip(starts, counts):
        if start != n:
            for column in columns:
                column[n: n + count] = column[start: start + count]
        spans.append((n, count))
        n += count
    return spans


class _Run:
    """State of one exploration: the levels, the visited set, counters, violations found."""

    def __init__(self, model: Model, kernels: Any, options: Options, progress: ProgressFn,
                 shard_bits: int, chunk_states: int, builder: Optional[BackgroundCompile] = None,
                 spill_at: Optional[int] = None, observer: Optional[RunObserver] = None,
                 held: HeldCheckpoint = HeldCheckpoint(None, None)) -> None:
        self.model, self.options, self.progress, self.observer = model, options, progress, observer
        self.result = Result(model=model, engine=Engine.name, fired=[0] * len(model.actions),
                             new_states=[0] * len(model.actions))
        # the kernels and their buffers, which change when the compiled kernels are taken
        self.tiers = Tiers(model, kernels, builder, chunk_states, self.result, self._announce,
                           lambda: self._report(force=False), lambda: self.distinct, observer)
        self.interpreted_states = 0  # states expanded by the interpreted tier
        self.chunk_states = chunk_states
        self.expanded = 0  # states expanded by this run, and their successors: sizes the chunks
        self.successors = 0
        self.visited = visited_set_for(options, kernels.nwords, shard_bits)
        # building the state graph: the visited set numbers every state, the builder keeps the transitions
        self.graph_builder = GraphBuilder(model, self.visited) if options.keep_graph else None
        # the new states a run that stopped at a violation had inserted past it: the fingerprint
        # set holds them, the counts do not (collision_probability leaves them out)
        self.past_cut: list[np.ndarray] = []
        self.checkpoint_dir = Path(options.checkpoint_dir) if options.checkpoint_dir else None
        self.levels: MemoryLevels = DiskLevels(kernels.nwords, self.checkpoint_dir) if self.checkpoint_dir \
            else MemoryLevels(kernels.nwords)
        self.spill_at = spill_at  # bytes of levels in memory past which they move to disk (None: never)
        self.spill_dir: Optional[Path] = None  # the temporary directory they moved to
        self.frontier = np.empty((0, kernels.nwords), np.uint64)  # the level being expanded
        # what a checkpoint's manifest says of its run, and the manifest a resume continues
        self.identity, self.resumed_manifest = held
        # --symmetry: successors are canonicalised before they meet the visited set
        self.canon = canonicaliser_for(model) if options.symmetry else None
        # the model's initial state behind each state of the initial level (duplicates dropped)
        self.initial_sources = initial_sources(model, self.canon)
        self.fired = np.zeros(len(model.actions), np.int64)
        self.new_per_action = np.zeros(len(model.actions), np.int64)
        self.label_action = np.array(model.label_action, np.int64)
        self.stride = len(model.labels)  # candidate rows per source state
        self.shard_bits = shard_bits
        # per part of a chunk (at most one per thread): shard offsets of its rows for the visited
        # set, and its coverage counts
        most_parts = max(1, thread_count())
        self._offsets = per_thread_rows(most_parts, (1 << shard_bits) + 1, np.int64)
        # per part, the table that finds repeats within the part (bucket_part); pages untouched
        # beyond what the largest part uses are never allocated
        self._seen = np.zeros((most_parts, seen_table_size(self.buffers.valid.shape[0])), np.int64)
        self._generation = 0
        self._repeat_tables = RepeatTables(most_parts, self.buffers.valid.shape[0], kernels.nwords,
                                           tally_width(len(model.actions), model.kernel_property_count))
        self._fired_parts = per_thread_rows(most_parts, len(model.actions), np.int64)
        self._new_parts = per_thread_rows(most_parts, len(model.actions), np.int64)
        self.found: dict[str, Violation] = {}
        self.found_at: dict[str, tuple[str, int, int]] = {}  # check -> (kind, state index, label)
        self.generated = 0
        self.elapsed_before = 0.0  # exploration time of the run this one resumes
        self.clock: Optional[Clock] = None
        self.last_progress = 0.0
        self.frontier_size = 0

    @property
    def distinct(self) -> int:
        return self.levels.distinct

    @property
    def depth(self) -> int:
        return self.levels.depth

    @property
    def kernels(self) -> Any:
        return self.tiers.kernels

    @property
    def buffers(self) -> ChunkBuffers:
        return self.tiers.buffers

    @property
    def level_starts(self) -> list[int]:
        """The number of each level's first state."""
        return self.levels.level_start

    def trace(self, index: int) -> list[Step]:
        """The path from an initial state to state ``index`` (``observer.FinishedRun``)."""
        return self._trace(index)

    # -- the search
    def load_interpreter(self, helper: InterpreterCompile) -> None:
        """An installation's first run, before it explores: numba types the spec's functions
        (needed before the answer anyway) while ``helper`` compiles the interpreter, which the
        bytecode tier then loads from numba's cache."""
        # for the progress and a failed compile's path; explore() starts its own
        self.clock = self.tiers.clock = Clock(self.options.time_limit)
        self.tiers.load_interpreter(helper)

    def explore(self, init_words: np.ndarray) -> None:
        self.clock = self.tiers.clock = Clock(self.options.time_limit)
        level = self._resume() if self.options.resume else None
        if level is None:
            if self.checkpoint_dir is not None and not self.options.resume:
                # the manifest before any level, so that a run stopped at any moment resumes
                self._commit()
            if self.observer is not None:
                self.observer.run_started()
            level = self._initial_level(init_words)
        # the level being expanded is an attribute, not passed along, so that a spill (which
        # replaces it by the same states mapped from disk) leaves no reference to it in memory
        self.frontier = level
        while self.frontier is not None and self.frontier.shape[0]:
            if self.options.max_depth is not None and self.depth >= self.options.max_depth:
                self.result.incomplete_reason = describe_limit(self.options, "max_depth")
                return
            self.frontier = self._expand_level()

    def _canonicalize(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int) -> None:
        """Replace the given rows by their canonical forms (--symmetry): compiled (a kernel compiled
        once per installation) unless the first tier is the Python one."""
        if self.kernels.compiled or isinstance(self.kernels, BytecodeKernels):
            self.canon.canonicalize(words, hashes, rows, nrows)
        else:
            self.canon.canonicalize_interpreted(words, hashes, rows, nrows)

    def _initial_level(self, init_words: np.ndarray) -> Optional[np.ndarray]:
        hashes = fingerprints(init_words)
        if self.canon is not None:
            init_words = init_words.copy()
            self._canonicalize(init_words, hashes, np.arange(init_words.shape[0], dtype=np.int64),
                               init_words.shape[0])
        found: dict[str, int] = {}
        inside = np.arange(init_words.shape[0], dtype=np.int64)
        if self.model.constraints:  # TLC: an initial state outside is counted and checked, not kept
            masks = self._violations(init_words)
            outside = outside_constraints(self.model, masks)
            inside = np.flatnonzero(~outside)
            found.update(self._check_outside(masks[outside], np.flatnonzero(outside), lambda p: (-1 - p, -1)))
            init_words, hashes = init_words[inside], hashes[inside]
        if self.graph_builder is not None:
            is_new = self.graph_builder.add_initial(init_words, hashes)
        else:
            is_new = self.visited.insert(init_words, hashes, np.arange(init_words.shape[0], dtype=np.int64))
        kept = inside[is_new.astype(bool)]  # the level's states' places among the initial states
        level = init_words[is_new.astype(bool)]
        self.generated = len(self.model.initial)
        self.result.initial_states = len(self.model.initial)
        self.levels.add(level, np.full(level.shape[0], INITIAL_PARENT, np.uint32), np.zeros(level.shape[0], np.uint16))
        found.update(self._check_new(level, 0, kept))
        stop = bool(found) and not self.options.keep_going
        if stop:  # stop at the first violating initial state
            cut = min(found.values())
            self._forget_found_after(found, cut)
            keep = int(np.searchsorted(kept, cut, side="right"))
            self.past_cut.append(level[keep:])
            self.levels.truncate_pending(keep)
            self.generated = cut + 1
        level = self.levels.finish_level()
        if stop:
            return None
        self._commit()
        self._level_finished()
        return level

    def _expand_level(self) -> Optional[np.ndarray]:
        """Expand ``self.frontier``, chunk by chunk; returns the next level (None: the run stops)."""
        first = self.levels.level_start[-1]
        new_so_far = 0
        stride = len(self.model.labels)
        lo = 0
        while lo < self.frontier.shape[0]:
            raise_if_stop_requested()
            self._spill_if_due()
            level = self.frontier
            self.tiers.switch_when_compiled()
            buf = self.buffers  # read after the switch: the compiled kernels bring buffers of their own
            hi = min(level.shape[0], lo + (self._compiled_chunk_states() if self.kernels.compiled
                                           else min(self.chunk_states, self.kernels.chunk_states)))
            if not self.kernels.compiled:
                self.interpreted_states += hi - lo
            found_here: dict[str, int] = {}  # check -> candidate row where it was violated
            distinct_only = self._distinct_successors_only()
            if distinct_only:
                try:
                    nrows, n, new_words = self._distinct_chunk(level, lo, hi, first + lo, found_here)
                except SpecRaised as e:  # the spec's error on state first + e.at
                    raise self._placed_from(e, first) from None
            else:
                found_before = dict(self.found), dict(self.found_at)
                try:
                    spans = self._successors(level, lo, hi, first + lo, found_here)
                except SpecRaised as e:  # raised before the visited set met the chunk: maybe redo it compiled
                    if not (e.python_only and self.tiers.fall_back_to_compiled()):
                        raise self._placed_from(e, first) from None
                    self.found, self.found_at = found_before  # a deadlock it found is found again
                    self.interpreted_states -= hi - lo
                    continue
                nrows = sum(nv for _, nv in spans)
                if self.model.properties:
                    found_here.update(self._check_properties(buf.props, buf.valid[:nrows], buf.labels, first + lo,
                                                             stride))
                n = self._collect_new(spans, first + lo)
                new_words = buf.words[buf.new_rows[:n]]
            self.levels.release(level, hi)
            self.expanded += hi - lo
            self.successors += nrows
            self.generated += nrows
            self.levels.add(new_words, buf.new_parent[:n], buf.new_label[:n])
            self.frontier_size = level.shape[0] - hi + new_so_far + n
            found_here.update(self._check_new(new_words, self.distinct + new_so_far, buf.new_rows[:n],
                                              (buf.new_parent[:n], buf.new_label[:n])))
            if found_here and not self.options.keep_going:
                if distinct_only:  # the rows after the cut are needed one by one: compute them all
                    self.kernels.successors(level, lo, hi, buf)
                    if nrows != valid_rows_part(buf.labels, 0, (hi - lo) * stride, NO_LABEL, buf.valid):
                        raise RuntimeError("internal: a chunk expanded twice gave different successors")
                n = self._stop_at_first_violation(found_here, buf, nrows, n)
                self.past_cut.append(new_words[n:].copy())
                self.levels.truncate_pending(n)
            new_so_far += n
            if self._limits_hit(new_so_far, more_work=hi < level.shape[0] or new_so_far > 0):
                self.levels.finish_level()  # the partial level counts, as in the reference explorer
                self._report(force=True)
                return None
            self._report(force=False)
            lo = hi
        nxt = self.levels.finish_level()
        if nxt.shape[0]:  # an empty level ends the run: a resume before its final manifest redoes this expansion
            self._commit()
            self._level_finished()
        self._report(force=True)
        return nxt

    def _spill_if_due(self) -> None:
        """Between two chunks: once the levels in memory pass ``spill_at`` bytes, move them to a
        new temporary directory and go on with them there (``DiskLevels.spill``)."""
        if self.spill_at is None or self.spill_dir is not None:
            return
        if self.levels.held_bytes(self.frontier) <= self.spill_at:
            return
        self.spill_dir = Path(tempfile.mkdtemp(prefix=SPILL_PREFIX))
        self.result.levels_spilled = {"directory": str(self.spill_dir), "at_level": self.depth,
                                      "at_distinct": self.distinct + self.levels.pending_count,
                                      "levels_bytes": self.levels.held_bytes(self.frontier),
                                      "threshold_bytes": self.spill_at}
        self.levels = DiskLevels.spill(self.levels, self.spill_dir, self.frontier)
        self.frontier = self.levels.words_of_level[-1] if self.depth else self.frontier
        self._report(force=True)

    def remove_spilled_levels(self) -> None:
        """The run is over: its spilled levels' directory goes (open mappings keep their pages
        until dropped, so the traces already built, and ``_trace``, still work)."""
        if self.spill_dir is not None:
            self.levels.close()
            shutil.rmtree(self.spill_dir, ignore_errors=True)

    def _successors(self, level: np.ndarray, lo: int, hi: int, first_index: int,
                    found_here: Optional[dict[str, int]] = None) -> list[tuple[int, int]]:
        """Expand ``level[lo:hi]`` and meet the visited set (or the graph builder): afterwards
        ``buffers.valid`` holds the rows computed, in candidate order, and ``buffers.new_mark[p]``
        says whether row ``valid[p]`` is the first occurrence of a state not seen before. Returns
        each part's (start, count) in ``buffers.valid``; the parts are contiguous, so the rows
        are ``valid[:sum of counts]``.

        Per part, on its thread, right after its expansion: its valid rows, then (unless they
        must be canonicalised first, or go to the graph builder) its rows for the visited set copied
        to dense arrays and bucketed by shard, self-loops and repeats within the part left out
        (``kernels/successor_rows.py``).

        A state with no successor but itself is a deadlock when the model checks for it, and
        successors outside a state or action constraint (TLC: counted as generated and checked
        against the invariants, but not kept) are left out of the visited set and the graph:
        violations found so go to ``found_here``."""
        buf, stride, canon, graph_builder = self.buffers, self.stride, self.canon, self.graph_builder
        filtered = self.model.constrained
        deadlock = self.model.check_deadlock and DEADLOCK not in self.found
        found_here = {} if found_here is None else found_here
        parts = self.kernels.parts(hi - lo)
        starts = [a * stride for a, _ in parts]
        counts = [0] * len(parts)
        offsets = self._offsets[: len(parts)]
        shard_bits = self.shard_bits
        self._generation += 1
        generation = self._generation

        def bucket(j: int) -> None:
            bucket_part(buf.words, buf.hashes, buf.valid, starts[j], counts[j], level, lo, stride, shard_bits,
                        buf.dense_words, buf.dense_hashes, buf.new_mark, buf.probe, buf.order, offsets[j],
                        self._seen[j], generation)

        stuck = [-1] * len(parts)

        def after_part(j: int, a: int, b: int) -> None:
            counts[j] = valid_rows_part(buf.labels, starts[j], b * stride, NO_LABEL, buf.valid)
            if deadlock:  # on the successors as computed, before any is canonicalised
                stuck[j] = first_stuck(buf.words, buf.labels, level, lo, a, b, stride, NO_LABEL)
            if canon is None and graph_builder is None and not filtered:
                bucket(j)

        self.kernels.successors(level, lo, hi, buf, after_part)
        if canon is not None:
            for j in range(len(parts)):
                self._canonicalize(buf.words, buf.hashes, buf.valid[starts[j]:], counts[j])
        stuck_at = [i for i in stuck if i >= 0]
        if stuck_at:
            i = min(stuck_at)
            self._note_violation(DEADLOCK, DEADLOCK, first_index + i, -1)
            found_here[DEADLOCK] = i * stride + stride - 1  # after every successor of the state
        outside = np.empty(0, np.int64)
        if filtered:
            rows = np.concatenate([buf.valid[start: start + count] for start, count in zip(starts, counts)])
            outside = self._leave_outside(level, lo, first_index, rows, found_here)
        if (canon is not None or filtered) and graph_builder is None:
            run_parts(bucket, len(parts))
        if graph_builder is None:
            used = max(start + count for start, count in zip(starts, counts))  # positions in use
            self.visited.insert_bucketed(buf.dense_words[:used], buf.dense_hashes[:used], buf.order, offsets,
                                         buf.new_mark)
        spans = close_gaps((buf.valid, buf.new_mark), starts, counts)
        nrows = sum(counts)
        if graph_builder is not None:
            inside = buf.valid[:nrows]
            if outside.size:  # the graph is the constrained one: no transition leaves it
                inside = np.ascontiguousarray(inside[~np.isin(inside, outside)])
                graph_builder.add_leaving(buf.words, outside, level, lo, first_index, stride, buf.labels)  # fairness
            graph_builder.add_chunk(buf.words, buf.hashes, inside, inside.shape[0], buf.is_new, first_index, hi - lo,
                               stride, buf.labels)
            buf.is_new[outside] = 0
            np.take(buf.is_new, buf.valid[:nrows], out=buf.new_mark[:nrows])
        return spans

    def _leave_outside(self, level: np.ndarray, lo: int, first_index: int, rows: np.ndarray,
                       found_here: dict[str, int]) -> np.ndarray:
        """The candidate rows (of ``rows``, increasing) whose successor breaks a state constraint
        or whose transition breaks an action constraint. Each is checked against the invariants
        (the first violating row of each goes to ``found_here``) and, unless the graph is
        built, turned into a self-loop (its source's words), which nothing counts as new and
        the visited set never meets. Returns them."""
        buf, model, stride = self.buffers, self.model, self.stride
        masks = np.zeros(rows.shape[0], np.uint64)
        if model.constraints or model.invariants:
            try:
                masks = self.kernels.violations(np.ascontiguousarray(buf.words[rows]))
            except SpecRaised as e:  # on the successor of row rows[e.at]; _expand_level may redo the chunk
                r = None if e.at is None else int(rows[e.at])
                raise self._placed(e, None if r is None else first_index + r // stride,
                                   -1 if r is None else int(buf.labels[r])) from None
        props = buf.props[rows] if model.action_constraints else None  # buf.props: a placeholder without
        where = np.flatnonzero(outside_constraints(model, masks, props))
        outside = rows[where]
        found_here.update(self._check_outside(masks[where], outside,
                                              lambda r: (first_index + r // stride, int(buf.labels[r]))))
        if self.graph_builder is None and outside.size:
            buf.words[outside] = level[lo + outside // stride]
        return outside

    def _check_outside(self, masks: np.ndarray, rows: np.ndarray, at) -> dict[str, int]:
        """Invariants on states outside the constraints (TLC checks each as it is generated):
        ``masks[i]`` is row ``rows[i]``'s; ``at(row)`` gives the violation's (state index, label)
        for ``_note_violation``. Returns the checks newly violated -> the first such row."""
        found: dict[str, int] = {}
        for k, inv in enumerate(self.model.invariants):
            if inv.name in self.found or not masks.size:
                continue
            hits = np.flatnonzero((masks >> np.uint64(k)) & np.uint64(1))
            if hits.size:
                r = int(rows[hits[0]])
                self._note_violation(inv.name, "invariant", *at(r))
                found[inv.name] = r
        return found

    def _distinct_successors_only(self) -> bool:
        """Whether chunks take the compiled kernels' distinct-successor path: the successors that
        meet the visited set are all the engine needs, unless they must be canonicalised first
        (--symmetry), every transition is kept (the state graph), or a state or action
        constraint leaves some successors out (``every_row_needed``)."""
        return (self.kernels.compiled and self.canon is None and self.graph_builder is None
                and not every_row_needed(self.model))

    def _distinct_chunk(self, level: np.ndarray, lo: int, hi: int, first_index: int,
                        found_here: dict[str, int]) -> tuple[int, int, np.ndarray]:
        """Expand ``level[lo:hi]`` keeping only each part's distinct successors (no self-loop or
        repeat is ever written out), meet the visited set, and collect the new states into
        ``buffers.new_rows``, ``new_parent`` and ``new_label`` in candidate order, as
        ``_successors`` and ``_collect_new`` do for every row. Transition properties violated here
        go to ``found_here``. Returns (transitions, new states, their words)."""
        buf, stride, shard_bits = self.buffers, self.stride, self.shard_bits
        parts = self.kernels.parts(hi - lo)
        starts = [self.kernels.dense_start(j, buf) for j in range(len(parts))]  # positions in the dense arrays
        offsets = self._offsets[: len(parts)]
        tables = self._repeat_tables
        # the deadlock check: asked to (mark_moves), the kernels set the label of a state's first
        # row to 0 once it has a successor other than itself (codegen._placed_successor_lines)
        deadlock = self.model.check_deadlock and DEADLOCK not in self.found
        if deadlock:
            buf.labels[: (hi - lo) * stride: stride] = NO_LABEL

        def bucket(j: int, a: int, b: int, end: int) -> None:
            bucket_dense_part(buf.dense_hashes, starts[j], end, shard_bits, buf.new_mark, buf.order, offsets[j])

        ends = self.kernels.distinct_successors(level, lo, hi, buf, tables, bucket, mark_moves=deadlock)
        if deadlock:
            stuck = np.flatnonzero(buf.labels[: (hi - lo) * stride: stride] == NO_LABEL)
            if stuck.size:
                i = int(stuck[0])
                self._note_violation(DEADLOCK, DEADLOCK, first_index + i, -1)
                found_here[DEADLOCK] = i * stride + stride - 1  # after every successor of the state
        used = max(ends)
        self.visited.insert_bucketed(buf.dense_words[:used], buf.dense_hashes[:used], buf.order, offsets,
                                     buf.new_mark)
        tally = tables.tally[: len(parts)]
        fired = tally[:, TALLY_FIRED: TALLY_FIRED + len(self.model.actions)].sum(axis=0)
        self.fired += fired
        if self.model.properties:
            firsts = tally[:, TALLY_FIRED + len(self.model.actions):].min(axis=0)
            for k, prop in enumerate(self.model.properties):
                r = int(firsts[k])
                if r != NO_ROW and prop.name not in self.found:
                    self._note_violation(prop.name, "property", first_index + r // stride, r % stride)
                    found_here[prop.name] = r
        found = [0] * len(parts)
        new = self._new_parts

        def collect(j: int) -> None:
            a, b = parts[j]
            row_bits = ((b - a) * stride).bit_length()  # the part's rows, from its first
            found[j] = collect_dense_part(buf.dense_rows, starts[j], ends[j], a * stride, row_bits, buf.new_mark,
                                          stride, self.label_action, first_index, new[j], buf.probe, buf.order,
                                          buf.new_rows, buf.new_parent, buf.new_label, buf.new_pos)

        run_parts(collect, len(parts))
        close_gaps((buf.new_rows, buf.new_parent, buf.new_label, buf.new_pos), starts, found)
        self.new_per_action += new[: len(parts)].sum(axis=0)
        new[: len(parts)] = 0
        n = sum(found)
        return int(fired.sum()), n, buf.dense_words[buf.new_pos[:n]]

    def _collect_new(self, spans: list[tuple[int, int]], first_index: int) -> int:
        """The new states of a chunk whose rows met the visited set: their rows, parents and
        labels into ``buffers.new_rows``, ``new_parent``, ``new_label`` (in candidate order);
        coverage counted. Returns how many."""
        buf, stride = self.buffers, self.stride
        found = [0] * len(spans)
        fired, new = self._fired_parts, self._new_parts

        def part(j: int) -> None:
            start, count = spans[j]
            found[j] = collect_part(buf.valid, start, count, stride, buf.new_mark, buf.labels, self.label_action,
                                    first_index, fired[j], new[j], buf.new_rows, buf.new_parent, buf.new_label)

        run_parts(part, len(spans))
        close_gaps((buf.new_rows, buf.new_parent, buf.new_label), [start for start, _ in spans], found)
        if len(spans):
            self.fired += fired[: len(spans)].sum(axis=0)
            self.new_per_action += new[: len(spans)].sum(axis=0)
            fired[: len(spans)] = 0
            new[: len(spans)] = 0
        return sum(found)

    def _compiled_chunk_states(self) -> int:
        """States in the next chunk: about SUCCESSORS_PER_CHUNK successors (on the distinct-
        successor path DISTINCT_SUCCESSORS_PER_CHUNK) at the rate seen so far, within what the
        buffers hold (results do not depend on chunk sizes)."""
        if not self.successors:
            return self.chunk_states
        rate = self.successors / self.expanded
        target = DISTINCT_SUCCESSORS_PER_CHUNK if self._distinct_successors_only() else SUCCESSORS_PER_CHUNK
        return max(1, min(self.chunk_states, int(target / rate)))

    def _forget_found_after(self, found_here: dict[str, int], cut: int) -> None:
        for name, row in found_here.items():
            if row > cut:  # found later in the chunk than where the run stops
                del self.found[name]
                del self.found_at[name]

    def _stop_at_first_violation(self, found_here: dict[str, int], buf: ChunkBuffers, nrows: int, n: int) -> int:
        """Make a run that stops at its first violation count exactly what the reference explorer
        counts: everything up to the violating candidate row, nothing the chunk computed after it
        (so counts do not depend on chunk sizes or tiers). Returns how many new states to keep."""
        cut = min(found_here.values())
        self._forget_found_after(found_here, cut)
        valid = buf.valid[:nrows]
        k = int(np.searchsorted(valid, cut, side="right"))
        np.subtract.at(self.fired, self.label_action[buf.labels[valid[k:]].astype(np.int64)], 1)
        self.generated -= nrows - k
        keep = int(np.searchsorted(buf.new_rows[:n], cut, side="right"))
        np.subtract.at(self.new_per_action, self.label_action[buf.new_label[keep:n].astype(np.int64)], 1)
        return keep

    def _check_new(self, words: np.ndarray, first_index: int, rows: np.ndarray,
                   steps: Optional[tuple[np.ndarray, np.ndarray]] = None) -> dict[str, int]:
        """Check invariants on new states; the checks newly violated -> the row (``rows[i]`` for
        the i-th new state) where each was violated first. ``steps``: each new state's parent and
        label, by which its violation is noted, so that its path is rebuilt from finished
        levels only (reading back the level being built flushes its files, which a full disk
        refuses: the violation would be lost with the run)."""
        if not self.model.invariants or not words.shape[0]:
            return {}
        masks = self._violations(words, first_index)
        bad = np.flatnonzero(masks)
        found: dict[str, int] = {}
        if not bad.size:
            return found
        for k, inv in enumerate(self.model.invariants):
            if inv.name in self.found:
                continue
            hits = bad[(masks[bad] >> np.uint64(k)) & np.uint64(1) == 1]
            if hits.size:
                i = int(hits[0])
                at = (first_index + i, -1) if steps is None else (int(steps[0][i]), int(steps[1][i]))
                self._note_violation(inv.name, "invariant", *at)
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
                self._note_violation(prop.name, "property", first + r // stride, int(labels[r]))
                found[prop.name] = r
        return found

    def _note_violation(self, name: str, kind: str, index: int, label: int) -> None:
        """A violation of ``name`` at state ``index`` (for a property: by action ``label`` from it)."""
        if index < 0:  # an initial state outside the state constraints: not in any level
            steps = [Step(None, self.model.initial[-1 - index])]
        elif self.canon is not None:
            steps = self._concrete_trace(index, kind, label, name)
        else:
            steps = self._trace(index)
            if label >= 0:  # a transition property's step, or the step to a state outside the constraints
                steps.append(Step(label, self.kernels.step(steps[-1].state, label)))
        self.found[name] = Violation(name, kind, steps)
        self.found_at[name] = (kind, index, label)

    def _limits_hit(self, new_in_level: int, more_work: bool) -> bool:
        if self.found and not self.options.keep_going:
            return True
        reason = limit_reached(self.options, self.distinct + new_in_level, self.clock, more_work, MAX_NUMBERED_STATES)
        if reason is not None:
            self.result.incomplete_reason = reason
        return reason is not None

    # -- checkpoints
    def _manifest_counters(self, finished: bool) -> dict[str, Any]:
        return {"levels": self.depth, "sizes": [int(p.shape[0]) for p in self.levels.parents],
                "checksums": self.levels.checksums, "interpreted_states": self.interpreted_states,
                **counts_for_manifest(self.result, self.generated, self.fired, self.new_per_action,
                                      self.elapsed_before + (self.clock.elapsed if self.clock else 0.0),
                                      self.found_at, finished)}

    def _level_finished(self) -> None:
        if self.observer is not None:
            self.observer.level_finished(self.depth, self.distinct, self.generated)

    def _commit(self) -> None:
        """After a finished level: its files are durable; say so in the manifest, atomically."""
        if self.checkpoint_dir is not None:
            write_manifest(self.checkpoint_dir, self.identity, self._manifest_counters(finished=False))

    def _resume(self) -> Optional[np.ndarray]:
        """Continue the run kept in the checkpoint: map its levels, rebuild the visited set
        from their words, restore the counters; the frontier is its last finished level."""
        manifest = self.resumed_manifest  # checked resumable under the directory's hold
        self.result.resumed_from_level = 0
        if manifest["levels"] == 0:  # stopped before its first level was durable: from the start
            self.levels.reopen(0, [])
            return None
        level = self.levels.reopen(manifest["levels"], manifest["sizes"], manifest["checksums"])
        for words in self.levels.words_of_level:
            self.visited.restore(words)
            self.levels.release(words, words.shape[0])
        if len(self.visited) != self.distinct:
            raise SpecError(f"checkpoint {self.checkpoint_dir}: its levels hold {self.distinct} states but "
                            f"{len(self.visited)} distinct ones; the files are damaged")
        self.generated, self.elapsed_before = restore_counts(manifest, self.result, self.fired, self.new_per_action,
                                                             self._note_violation)
        self.interpreted_states = manifest["interpreted_states"]
        self.result.resumed_from_level = self.depth
        return level

    # -- the two tiers
    def _violations(self, words: np.ndarray, first_index: Optional[int] = None) -> np.ndarray:
        """``kernels.violations(words)`` of states ``first_index`` on (None: the initial states,
        in ``model.initial``'s order); if the interpreted tier's Python fails on code numba
        compiles (``SpecRaised.python_only``), the compiled kernels' (it only reads ``words``, so it
        can be redone; the chunk that asks goes on with the buffers it holds, the next takes the
        compiled ones). Any other error of the spec's stops the run, placed on its state."""
        while True:
            try:
                return self.kernels.violations(words)
            except SpecRaised as e:
                if not (e.python_only and self.tiers.fall_back_to_compiled()):
                    # the initial states are numbered -1, -2, ... (spec_raised.placed_at)
                    first, step = (-1, -1) if first_index is None else (first_index, 1)
                    raise self._placed_from(e, first, step) from None

    def _placed_from(self, e: SpecRaised, first: int, step: int = 1) -> SpecRaised:
        """``e``, raised on the ``e.at``-th of the states numbered ``first``, ``first + step``, ...,
        with the path to that state."""
        return self._placed(e, None if e.at is None else first + step * e.at)

    def _placed(self, e: SpecRaised, index: Optional[int], label: int = -1) -> SpecRaised:
        """``e`` with the path to state ``index`` (``spec_raised.placed_at``)."""
        trace = None if self.canon is not None else self._trace  # --symmetry's states are canonical
        return placed_at(self.model, e, index, label, trace, self.kernels.step)

    # -- traces
    def _trace(self, index: int) -> list[Step]:
        """Replay the labels on the path to state ``index`` from its initial state."""
        return replay_path(self.model, index, self.levels.parent_of, self.kernels.step)

    def _concrete_trace(self, index: int, kind: str, label: int, name: str) -> list[Step]:
        """--symmetry: the path of canonical states to ``index`` (and, for a transition property,
        the violating step by ``label``), rebuilt as a trace of the concrete model."""
        canonical = self.canon.canonical_flat
        model = self.model
        start: list[tuple[int, ...]] = []

        def initial(i: int) -> tuple[int, ...]:
            start.append(model.initial[self.initial_sources[i]])
            return canonical(start[0])

        path = replay_path(model, index, self.levels.parent_of, canonical_step(self.kernels.step, canonical),
                           initial=initial)
        last_ok = None
        if label >= 0:  # a transition property's step, or the step to a state outside the constraints
            path.append(Step(label, canonical(self.kernels.step(path[-1].state, label))))
            last_ok = lambda before, after: name in model.violated_properties(before, after)  # noqa: E731
            if kind == "invariant":
                last_ok = lambda before, after: name in model.violated_invariants(after)  # noqa: E731
        return concrete_trace(model, path, start[0], self.kernels.step, canonical, last_ok)

    # -- reporting
    def _report(self, force: bool) -> None:
        now = self.clock.elapsed
        if force or now - self.last_progress >= 0.25:
            self.last_progress = now
            self.progress(Progress(self.depth, self.distinct, self.generated, self.frontier_size,
                                   self.elapsed_before + now, compiling=self.tiers.compiling,
                                   meanwhile=self.tiers.meanwhile,
                                   levels_spilled_to=str(self.spill_dir) if self.spill_dir else None))

    def _announce(self, compiling: Optional[str], meanwhile: str) -> None:
        """A progress snapshot saying what the run does while ``compiling`` goes on."""
        self.progress(Progress(self.depth, self.distinct, self.generated, self.frontier_size,
                               self.elapsed_before + (self.clock.elapsed if self.clock else 0.0),
                               compiling=compiling, meanwhile=meanwhile))

    def finish(self) -> None:
        r = self.result
        r.interpreted_states = self.interpreted_states
        probability = None
        if self.options.fingerprints:
            past_cut = [fingerprints(np.ascontiguousarray(w)) for w in self.past_cut if w.shape[0]]
            probability = self.visited.collision_probability(self.generated,
                                                             np.concatenate(past_cut) if past_cut else None)
        r.settle(self.options, list(self.found.values()), self.distinct, self.generated, self.depth,
                 self.elapsed_before + (self.clock.elapsed if self.clock else 0.0), self.fired, self.new_per_action,
                 probability)
        if self.graph_builder is not None and not r.incomplete_reason and not r.interrupted:
            r.graph = self.graph_builder.finish(self.depth)
            r.graph.build_s = r.elapsed_s
            r.graph.built_by = "the check's exploration"
            if r.graph.size != r.distinct_states:
                raise RuntimeError(f"internal: the graph built has {r.graph.size} states, the run "
                                   f"{r.distinct_states}")
        self.graph_builder = None
        if self.checkpoint_dir is not None:
            r.checkpoint_dir = str(self.checkpoint_dir)
            if not r.incomplete_reason:  # the verdict is final: nothing left to resume (a full disk keeps it)
                write_kept("the checkpoint's record that its run finished", self.checkpoint_dir / MANIFEST,
                           lambda: write_manifest(self.checkpoint_dir, self.identity,
                                                  self._manifest_counters(finished=True)), r.unwritten)
        self.levels.close()
