"""The compiled explorer: level-synchronous breadth-first search over packed states.

Per chunk of the current level: the generated ``expand`` kernel computes every successor (in
parallel over states) with its fingerprint and label; the visited set inserts them (in parallel
over shards); a serial pass keeps the first occurrences, in (source state, label) order, as the
next level with a parent index and label each; ``check`` evaluates the invariants on the new
states. Only the visited set, the current and next levels, and per state a uint32 parent and a
uint16 label are kept: a counterexample is rebuilt by replaying labels from an initial state.

This module is the run's skeleton (``Engine``: the kernels, the run, its end; ``_Run``: level by
level, chunk by chunk, the limits, the progress snapshots and the run's events). Each concern
beside it has a module of its own: a chunk's expansion (``chunks.py``), the visited set
(``visited_sets.py``), the violations and their traces (``violations.py``), the tiers
(``tiers.py``), the levels (``levels.py``), their spill to disk (``spill.py``) and the checkpoint
(``checkpoint_writer.py``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

import numba
import numpy as np

from kraftcheck.checker.analyses.state_graph import GraphBuilder
from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.compile import BackgroundCompile, warm_up_engine_kernels
from kraftcheck.checker.disk_full import disk_full_reason, is_disk_full
from kraftcheck.checker.errors import SpecError, SpecRaised, UsageError
from kraftcheck.checker.explore.bytecode_tier import BytecodeKernels, InterpreterCompile, interpreter_compile
from kraftcheck.checker.explore.checkpoint import HeldCheckpoint, hold_checkpoint
from kraftcheck.checker.explore.checkpoint_writer import CheckpointWriter
from kraftcheck.checker.explore.chunks import ChunkExpansion, every_row_needed
from kraftcheck.checker.explore.compiled import ChunkBuffers, Kernels, kernel_shapes  # noqa: F401 (API)
from kraftcheck.checker.explore.constraints import outside_constraints
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.explore.kernel_audit import KernelAudit, confirm_counterexamples
from kraftcheck.checker.explore.levels import INITIAL_PARENT, DiskLevels, MemoryLevels
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.explore.result import Options, Progress, ProgressFn, Result, Step, no_progress
from kraftcheck.checker.explore.run_limits import Clock, limit_reached, stop_at_max_depth
from kraftcheck.checker.explore.spill import LevelSpill, spill_threshold
from kraftcheck.checker.explore.tiers import COMPILE_MODES, Tiers, interpret_budget, start_kernels
from kraftcheck.checker.explore.violations import Violations
from kraftcheck.checker.explore.visited_sets import visited_set_for, warm_up_visited_set
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.kernels.successor_rows import valid_rows_part
from kraftcheck.checker.kernels.threads import thread_count, using_threads
from kraftcheck.checker.model import DEADLOCK, Model
from kraftcheck.checker.stop import raise_if_stop_requested, stop_honoured
from kraftcheck.checker.symmetry import canonicaliser_for
from kraftcheck.checker.symmetry_check import check_symmetry

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
# Whatever the path, a chunk's unpacked states (an int32 row each) stay within this. A large
# layout's actions read them 16 states at a time, so a chunk need not fit a cache; each chunk
# costs hand-offs to the threads and Python's work between its steps, which fewer, larger chunks
# pay less often (8 MiB, when every action's kernel passed over the whole chunk: bench/RESULTS.md,
# "Where two threads' wall seconds go").
UNPACKED_BYTES_PER_CHUNK = 32 << 20
# Parent links are uint32 and all ones marks an initial state: a state numbered past this could
# not be a parent. The run stops (incomplete) before it expands such a state.
MAX_NUMBERED_STATES = INITIAL_PARENT - 1


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
    directory (0: from the first level on); None: ``spill.LEVELS_MEMORY_SHARE`` of ``Options.max_memory``.
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
        mode = self.compile
        if numba.config.DISABLE_JIT:
            # numba off: the spec's functions run as Python on the interpreted tier, the one the
            # compiled tiers are audited against, for every layout: a layout packed by its table calls
            # its actions through addresses, which Python cannot, and the generated kernels run as
            # Python once read int32 records, where numpy's arithmetic wrapped (s.b * s.b with
            # b = 50,000: an invariant violated compiled 'held')
            mode = "never"
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
            warm_up_visited_set(options, kernels.nwords)
            run = _Run(model, kernels, options, progress, self.shard_bits, self._chunk_states(model, options),
                       builder, spill_threshold(options, self.spill_levels_at), observer, held)
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
                run.stopped_within_level = True
                result.interrupted = True
                result.incomplete_reason = "interrupted"
            except SpecError:
                run.tiers.confirm_spec_compiles()  # numba's refusal, as --compile now gives it, comes first
                raise
            except OSError as e:  # a full disk ends the run incomplete; what it found is kept
                if not is_disk_full(e):
                    raise
                run.stopped_within_level = True
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

    def _chunk_states(self, model: Model, options: Options) -> int:
        """The most states a chunk holds (its buffers are sized for them): ``chunk_candidates``
        candidate rows if given, else as many as the path the run will take wants
        (DISTINCT_CANDIDATES_PER_CHUNK unless the successors are kept for the graph, or
        every chunk is interpreted), and at most UNPACKED_BYTES_PER_CHUNK of unpacked states."""
        candidates = self.chunk_candidates
        if candidates is None:
            compiled = self.compile not in ("never", "bytecode") and not numba.config.DISABLE_JIT
            distinct = compiled and not (options.keep_graph or every_row_needed(model))
            candidates = DISTINCT_CANDIDATES_PER_CHUNK if distinct else CANDIDATES_PER_CHUNK
        unpacked = UNPACKED_BYTES_PER_CHUNK // (4 * model.layout.size)
        return max(1, min(candidates // max(1, len(model.labels)), unpacked))


class _Run:
    """One exploration: the levels, level by level, chunk by chunk (``chunks.py``), with the
    limits, the progress snapshots and the run's events; the tiers (``tiers.py``), the violations
    (``violations.py``), the spill (``spill.py``) and the checkpoint (``checkpoint_writer.py``)
    each in their own object."""

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
        checkpoint_dir = Path(options.checkpoint_dir) if options.checkpoint_dir else None
        self.checkpoint = CheckpointWriter(checkpoint_dir, held)
        self.levels: MemoryLevels = DiskLevels(kernels.nwords, checkpoint_dir) if checkpoint_dir \
            else MemoryLevels(kernels.nwords)
        self.spill = LevelSpill(spill_at)
        self.frontier = np.empty((0, kernels.nwords), np.uint64)  # the level being expanded
        # --symmetry: successors are canonicalised before they meet the visited set
        canon = canonicaliser_for(model) if options.symmetry else None
        self.violations = Violations(model, lambda: self.levels.parent_of, lambda: self.tiers.kernels.step, canon)
        self.fired = np.zeros(len(model.actions), np.int64)
        self.new_per_action = np.zeros(len(model.actions), np.int64)
        self.chunks = ChunkExpansion(model, self.tiers, self.visited, self.graph_builder, canon, self.violations,
                                     self.fired, self.new_per_action, shard_bits)
        # the compiled kernels against the spec's Python, on a sample (and the declared symmetry)
        self.audit = KernelAudit(model, symmetry=options.symmetry)
        self.generated = 0
        # the counts when the last level was finished: a run stopped within a level (an interrupt,
        # a full disk) reports these, which its distinct states and depth (finished levels only)
        # and its checkpoint agree with; the partial level is redone on a resume
        self.at_finished_level: tuple[int, Any, Any] = (0, self.fired.copy(), self.new_per_action.copy())
        self.stopped_within_level = False
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
    def elapsed(self) -> float:
        """Seconds of exploration, this run's and those of the run it resumes."""
        return self.elapsed_before + (self.clock.elapsed if self.clock else 0.0)

    @property
    def spill_dir(self) -> Optional[Path]:
        """The temporary directory the levels spilled to (None: they did not)."""
        return self.spill.directory

    @property
    def level_starts(self) -> list[int]:
        """The number of each level's first state."""
        return self.levels.level_start

    def trace(self, index: int) -> list[Step]:
        """The path from an initial state to state ``index`` (``observer.FinishedRun``)."""
        return self.violations.trace(index)

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
        level = self.checkpoint.resume(self) if self.options.resume else None
        if level is None:
            if not self.options.resume:
                # the manifest before any level, so that a run stopped at any moment resumes
                self.checkpoint.commit(self)
            if self.observer is not None:
                self.observer.run_started()
            level = self._initial_level(init_words)
        # the level being expanded is an attribute, not passed along, so that a spill (which
        # replaces it by the same states mapped from disk) leaves no reference to it in memory
        self.frontier = level
        while self.frontier is not None and self.frontier.shape[0]:
            if stop_at_max_depth(self.options, self.depth, self.result):
                return
            self.frontier = self._expand_level()

    def _initial_level(self, init_words: np.ndarray) -> Optional[np.ndarray]:
        hashes = fingerprints(init_words)
        if self.violations.canon is not None:
            init_words = init_words.copy()
            self.chunks.canonicalize(init_words, hashes, np.arange(init_words.shape[0], dtype=np.int64),
                                     init_words.shape[0])
        found: dict[str, int] = {}
        inside = np.arange(init_words.shape[0], dtype=np.int64)
        if self.model.constraints:  # TLC: an initial state outside is counted and checked, not kept
            masks = self._violations(init_words)
            outside = outside_constraints(self.model, masks)
            inside = np.flatnonzero(~outside)
            # an invariant is noted at the first initial state that violates it, as the reference
            # explorer notes it: one outside the constraints only if no earlier state inside does
            inside_masks = np.where(outside, np.uint64(0), masks & np.uint64((1 << len(self.model.invariants)) - 1))
            before = np.bitwise_or.accumulate(np.concatenate([np.zeros(1, np.uint64), inside_masks[:-1]]))
            found.update(self.violations.outside_constraints(masks[outside] & ~before[outside],
                                                             np.flatnonzero(outside), lambda p: (-1 - p, -1)))
            init_words, hashes = init_words[inside], hashes[inside]
        if self.graph_builder is not None:
            is_new = self.graph_builder.add_initial(init_words, hashes)
        else:
            is_new = self.visited.insert(init_words, hashes, np.arange(init_words.shape[0], dtype=np.int64))
        kept = inside[is_new.astype(bool)]  # the level's states' places among the initial states
        level = init_words[is_new.astype(bool)]
        # every initial state the spec gives is generated, one given twice twice (TLC's count)
        self.generated = self.model.initial_generated
        self.result.initial_states = self.model.initial_generated
        self.levels.add(level, np.full(level.shape[0], INITIAL_PARENT, np.uint32), np.zeros(level.shape[0], np.uint16))
        found.update(self._check_new(level, 0, kept))
        stop = bool(found) and not self.options.keep_going
        if stop:  # stop at the first violating initial state
            cut = min(found.values())
            self.violations.forget_after(found, cut)
            keep = int(np.searchsorted(kept, cut, side="right"))
            self.past_cut.append(level[keep:])
            self.levels.truncate_pending(keep)
            self.generated = self.model.initial_generated_through(cut)
        level = self.levels.finish_level()
        self.note_finished_level()
        if stop:
            return None
        self._level_finished()
        return level

    def _expand_level(self) -> Optional[np.ndarray]:
        """Expand ``self.frontier``, chunk by chunk; returns the next level (None: the run stops)."""
        first = self.levels.level_start[-1]
        new_so_far = 0
        chunks, violations = self.chunks, self.violations
        stride = chunks.stride
        if stride == 0:
            return self._level_without_successors(first)
        lo = 0
        while lo < self.frontier.shape[0]:
            raise_if_stop_requested()
            if self.spill.due(self.levels, self.frontier):
                self._spill()
            level = self.frontier
            self.tiers.switch_when_compiled()
            buf = self.buffers  # read after the switch: the compiled kernels bring buffers of their own
            hi = min(level.shape[0], lo + (self._compiled_chunk_states() if self.kernels.compiled
                                           else min(self.chunk_states, self.kernels.chunk_states)))
            if not self.kernels.compiled:
                self.interpreted_states += hi - lo
            try:
                self.audit.chunk(self.kernels, level, lo, hi, first + lo)
            except SpecRaised as e:  # the spec's Python raised on audited state first + e.at
                raise violations.placed_from(e, first) from None
            found_here: dict[str, int] = {}  # check -> candidate row where it was violated
            distinct_only = chunks.distinct_successors_only()
            if distinct_only:
                try:
                    nrows, n, new_words = chunks.distinct_chunk(level, lo, hi, first + lo, found_here)
                except SpecRaised as e:  # the spec's error on state first + e.at
                    raise violations.placed_from(e, first) from None
            else:
                found_before = violations.saved()
                try:
                    spans = chunks.successors(level, lo, hi, first + lo, found_here)
                except SpecRaised as e:  # raised before the visited set met the chunk: maybe redo it compiled
                    if not (e.python_only and self.tiers.fall_back_to_compiled()):
                        raise violations.placed_from(e, first) from None
                    violations.restore(found_before)  # a deadlock it found is found again
                    self.interpreted_states -= hi - lo
                    continue
                nrows = sum(nv for _, nv in spans)
                if self.model.properties:
                    found_here.update(violations.of_properties(buf.props, buf.valid[:nrows], buf.labels, first + lo,
                                                               stride))
                n = chunks.collect_new(spans, first + lo)
                new_words = buf.words[buf.new_rows[:n]]
            self.levels.release(level, hi)
            self.expanded += hi - lo
            self.successors += nrows
            self.generated += nrows
            self.levels.add(new_words, buf.new_parent[:n], buf.new_label[:n])
            self.frontier_size = level.shape[0] - hi + new_so_far + n
            found_here.update(self._check_new(new_words, self.distinct + new_so_far, buf.new_rows[:n],
                                              (buf.new_parent[:n], buf.new_label[:n]), found_here))
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
                self.note_finished_level()  # and so do its counts, should an interrupt come after
                self._report(force=True)
                return None
            self._report(force=False)
            lo = hi
        nxt = self.levels.finish_level()
        self.note_finished_level()
        if nxt.shape[0]:  # an empty level ends the run: a resume before its final manifest redoes this expansion
            self._level_finished()
        self._report(force=True)
        return nxt

    def _level_without_successors(self, first: int) -> np.ndarray:
        """The frontier of a model with no action instances (a parameter of 0, say): no state has a
        successor, so each is a deadlock, the first reported if deadlocks are checked; the next
        level is empty and the run ends (the chunk kernels index candidate rows by the instances)."""
        level = self.frontier
        self.levels.release(level, level.shape[0])
        self.expanded += level.shape[0]
        if level.shape[0] and self.model.check_deadlock and DEADLOCK not in self.violations.found:
            self.violations.note(DEADLOCK, DEADLOCK, first, -1)
        nxt = self.levels.finish_level()
        self.note_finished_level()
        self._report(force=True)
        return nxt

    def note_finished_level(self) -> None:
        """The counts a stop within the next level reports (``at_finished_level``)."""
        self.at_finished_level = (self.generated, self.fired.copy(), self.new_per_action.copy())

    def _level_finished(self) -> None:
        """A level is finished: durable in the checkpoint, then told to the observer."""
        self.checkpoint.commit(self)
        if self.observer is not None:
            self.observer.level_finished(self.depth, self.distinct, self.generated)

    def _spill(self) -> None:
        """Between two chunks, the levels past their share of memory: on with them on disk
        (``spill.py``)."""
        self.levels, self.frontier, self.result.levels_spilled = self.spill.move(
            self.levels, self.frontier, self.depth, self.distinct + self.levels.pending_count)
        self._report(force=True)

    def remove_spilled_levels(self) -> None:
        """The run is over: its spilled levels' directory goes (open mappings keep their pages
        until dropped, so the traces already built, and ``trace``, still work)."""
        self.spill.remove(self.levels)

    def _compiled_chunk_states(self) -> int:
        """States in the next chunk: about SUCCESSORS_PER_CHUNK successors (on the distinct-
        successor path DISTINCT_SUCCESSORS_PER_CHUNK) at the rate seen so far, within what the
        buffers hold (results do not depend on chunk sizes)."""
        if not self.successors:
            return self.chunk_states
        rate = self.successors / self.expanded
        target = DISTINCT_SUCCESSORS_PER_CHUNK if self.chunks.distinct_successors_only() else SUCCESSORS_PER_CHUNK
        return max(1, min(self.chunk_states, int(target / rate)))

    def _stop_at_first_violation(self, found_here: dict[str, int], buf: ChunkBuffers, nrows: int, n: int) -> int:
        """Make a run that stops at its first violation count exactly what the reference explorer
        counts: everything up to the violating candidate row, nothing the chunk computed after it
        (so counts do not depend on chunk sizes or tiers). Returns how many new states to keep."""
        cut = min(found_here.values())
        self.violations.forget_after(found_here, cut)
        label_action = self.chunks.label_action
        valid = buf.valid[:nrows]
        k = int(np.searchsorted(valid, cut, side="right"))
        np.subtract.at(self.fired, label_action[buf.labels[valid[k:]].astype(np.int64)], 1)
        self.generated -= nrows - k
        keep = int(np.searchsorted(buf.new_rows[:n], cut, side="right"))
        np.subtract.at(self.new_per_action, label_action[buf.new_label[keep:n].astype(np.int64)], 1)
        return keep

    def _check_new(self, words: np.ndarray, first_index: int, rows: np.ndarray,
                   steps: Optional[tuple[np.ndarray, np.ndarray]] = None,
                   noted_in_chunk: Optional[dict[str, int]] = None) -> dict[str, int]:
        """Check invariants on new states (state ``first_index + i`` is ``words[i]``, candidate row
        ``rows[i]``); the checks newly violated, or violated at an earlier row than the chunk noted
        them (``noted_in_chunk``) -> the row where each was first (``Violations.of_invariants``)."""
        if not self.model.invariants or not words.shape[0]:
            return {}
        return self.violations.of_invariants(self._violations(words, first_index), first_index, rows, steps,
                                             noted_in_chunk)

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
                    raise self.violations.placed_from(e, first, step) from None

    def _limits_hit(self, new_in_level: int, more_work: bool) -> bool:
        if self.violations.found and not self.options.keep_going:
            return True
        reason = limit_reached(self.options, self.distinct + new_in_level, self.clock, more_work, MAX_NUMBERED_STATES)
        if reason is not None:
            self.result.incomplete_reason = reason
        return reason is not None

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
        self.progress(Progress(self.depth, self.distinct, self.generated, self.frontier_size, self.elapsed,
                               compiling=compiling, meanwhile=meanwhile))

    def finish(self) -> None:
        r = self.result
        r.interpreted_states = self.interpreted_states
        probability = None
        # a run stopped while its visited set was rebuilt from a checkpoint holds only part of
        # the checkpoint's fingerprints: estimates from them would understate the collisions
        if self.options.fingerprints and len(self.visited) >= self.distinct:
            past_cut = [fingerprints(np.ascontiguousarray(w)) for w in self.past_cut if w.shape[0]]
            probability = self.visited.collision_probability(self.generated,
                                                             np.concatenate(past_cut) if past_cut else None)
        generated, fired, new_per_action = (self.at_finished_level if self.stopped_within_level
                                            else (self.generated, self.fired, self.new_per_action))
        confirm_counterexamples(self.model, list(self.violations.found.values()))
        r.settle(self.options, list(self.violations.found.values()), self.distinct, generated, self.depth,
                 self.elapsed, fired, new_per_action, probability)
        if self.graph_builder is not None and not r.incomplete_reason and not r.interrupted:
            r.graph = self.graph_builder.finish(self.depth)
            r.graph.build_s = r.elapsed_s
            r.graph.built_by = "the check's exploration"
            if r.graph.size != r.distinct_states:
                raise RuntimeError(f"internal: the graph built has {r.graph.size} states, the run "
                                   f"{r.distinct_states}")
        self.graph_builder = self.chunks.graph_builder = None
        if self.checkpoint.directory is not None:
            self.checkpoint.finish(self)
        self.levels.close()
