"""The compiled explorer: level-synchronous breadth-first search over packed states.

Per chunk of the current level: the generated ``expand`` kernel computes every successor (in
parallel over states) with its fingerprint and label; the visited set inserts them (in parallel
over shards); a serial pass keeps the first occurrences, in (source state, label) order, as the
next level with a parent index and label each; ``check`` evaluates the invariants on the new
states. Only the visited set, the current and next levels, and per state a uint32 parent and a
uint16 label are kept: a counterexample is rebuilt by replaying labels from an initial state.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import numba
import numpy as np

from kraftcheck.checker.codegen import NO_LABEL, uses_layout_table
from kraftcheck.checker.compile import (BackgroundCompile, KernelShapes, compile_error, compile_in_process, is_compiled,
                                        typed_marker_path, warm_up_engine_kernels)
from kraftcheck.checker.explore.compiled import ChunkBuffers, Kernels, RepeatTables, kernel_shapes  # noqa: F401 (API)
from kraftcheck.checker.errors import SpecError, SpecRaised, UsageError
from kraftcheck.checker.files import atomic_write
from kraftcheck.checker.disk_full import disk_full_reason, is_disk_full, write_kept
from kraftcheck.checker.bytecode import Untranslatable
from kraftcheck.checker.explore.bytecode_tier import BytecodeKernels, InterpreterCompile, interpreter_compile
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.explore.spec_raised import placed_at
from kraftcheck.checker.typing_check import check_spec_types
from kraftcheck.checker.explore.result import (Clock, Options, Progress, ProgressFn, Result, Step, Violation,
                                               describe_limit, memory_exceeded, memory_total, no_progress,
                                               replay_path)
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.kernels import successor_rows
from kraftcheck.checker.kernels.successor_rows import (NO_ROW, TALLY_FIRED, bucket_dense_part, bucket_part,
                                                      collect_dense_part, collect_part, seen_table_size, tally_width,
                                                      valid_rows_part)
from kraftcheck.checker.kernels.threads import per_thread_rows, run_parts, thread_count, using_threads
from kraftcheck.checker.explore.checkpoint import (MANIFEST, check_resumable, hold_checkpoint, run_identity,
                                                  write_manifest)
from kraftcheck.checker.explore.levels import INITIAL_PARENT, DiskLevels, MemoryLevels
from kraftcheck.checker.analyses.state_graph import GraphBuilder
from kraftcheck.checker.explore.stop import raise_if_stop_requested, stop_honoured
from kraftcheck.checker.kernels.visited import FingerprintSet, VisitedSet
from kraftcheck.checker.kernels.deadlock import first_stuck
from kraftcheck.checker.model import DEADLOCK, Model
from kraftcheck.checker.symmetry import canonical_step, canonicaliser_for
from kraftcheck.checker.symmetry_check import check_symmetry
from kraftcheck.checker.explore.concrete import concrete_trace

CANDIDATES_PER_CHUNK = 1 << 20  # successor rows the chunk buffers hold (the largest chunk)
# States per chunk are chosen so that a chunk yields about this many successors (enabled rows): the
# insert pass's working set (their words, fingerprints, row lists) then stays in the last-level
# cache, while a chunk is still long enough to pay for its few dozen kernel dispatches. Measured
# best at about 2^16 for both Two-Phase rm=9 (12 successors a state) and the default Kafka check
# (4.6 a state); a fixed 2^20 candidate rows gave Two-Phase 4 times that, 1.2x slower (bench/RESULTS.md).
SUCCESSORS_PER_CHUNK = 1 << 16
# On the distinct-successor path (``Kernels.distinct_successors``) a chunk's working set is its
# distinct successors, not its candidate rows, so larger chunks pay: more repeats are caught
# within a chunk instead of in the visited set. Its buffers hold more candidate rows (of which a
# part touches only what it keeps). Two-Phase rm=9 ran 0.88x the time with 2^22 rows and chunks
# of 2^21 successors against 2^20 and 2^19 (bench/RESULTS.md, session 15).
DISTINCT_CANDIDATES_PER_CHUNK = 1 << 22
DISTINCT_SUCCESSORS_PER_CHUNK = 1 << 21
# Whatever the path, a chunk's unpacked states (an int32 row each, which every action kernel
# reads) stay within this: the default Kafka check (147 ints a state, 75 labels) ran 1.2-1.4x
# slower with twice the 2^20 candidate rows, 16 MB of unpacked states (bench/RESULTS.md, session 14).
UNPACKED_BYTES_PER_CHUNK = 8 << 20
# The first tier explores for at most this many seconds (``KRAFTCHECK_INTERPRET_S`` sets either)
# while the kernels compile in the background, then the run waits for them: exploring takes a core
# the compile would use, and what it finds it finds early (the default Kafka check's shortest
# violation: 93 states). The Python tier: 1 s (a cold Two-Phase rm=7 ran 22.5 s interpreting
# throughout against 13.4 s compiling first; 1 s rather than 2 brought small models' first result
# 8-10% sooner, session 24). The bytecode tier, 20-40x faster: 1.5 s on every core (the compile
# runs at the lowest priority, so it has the cores the run leaves), time for a model of a few
# hundred thousand states (EWD840 N=7: 0.7-0.9 s) to end before its kernels compile. The default
# Kafka --continue took 25.3-30.4 s with the bytecode on one core until its kernels were ready,
# 22.2-23.6 s with 3 s of it, 20.8-24.3 s with 1 s (session 25); on two cores, 3 s of it took it
# 1.07x the time of 3 s on one core, 1.5 s 0.97x (bench/RESULTS.md, session 26).
INTERPRET_BUDGET_S = 1.0
BYTECODE_BUDGET_S = 1.5
RESUME_CHUNK_STATES = 1 << 20  # states re-inserted at a time when a checkpoint is resumed
# Parent links are uint32 and all ones marks an initial state: a state numbered past this could
# not be a parent. The run stops (incomplete) before it expands such a state.
MAX_NUMBERED_STATES = INITIAL_PARENT - 1
# Without --checkpoint the levels start in memory and move to a temporary directory (they
# "spill") once they hold more than this share of --max-memory (of the machine's memory without
# one). The share is small because the levels are cheap on disk (written in order, read once, in
# order) and the visited set, which cannot leave memory, is what a large run needs memory for:
# --records 2 --fingerprints peaked at 10.2 GB with its levels in memory, 5.1 GB with them on disk.
LEVELS_MEMORY_SHARE = 1 / 16
SPILL_PREFIX = "kraftcheck-levels-"  # the temporary directory's name starts so, under $TMPDIR


# "never": the Python tier throughout; "bytecode": the bytecode tier throughout (both for tests)
COMPILE_MODES = ("now", "background", "never", "bytecode")
# kernel modules (by name: a digest of the spec's sources and the versions) whose spec functions
# numba's type inference accepted in this process, whatever kernel cache they were written to
_TYPED_MODULES: set[str] = set()


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

    def explore(self, model: Model, options: Options = Options(), progress: ProgressFn = no_progress) -> Result:
        # a checkpoint directory is this run's alone, checked first; the run's threads are its options'
        with hold_checkpoint(model, options), using_threads(options.threads):
            return self._explore(model, options, progress)

    def _explore(self, model: Model, options: Options, progress: ProgressFn) -> Result:
        t0 = time.perf_counter()
        if options.record_graph and (not options.keep_going or options.fingerprints or options.checkpoint_dir):
            raise UsageError("recording the state graph needs every state explored and kept in memory: "
                             "keep_going (--continue), without fingerprints or a checkpoint")
        if options.record_graph and options.symmetry:
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
            kernels, builder, interpreter = self._kernels(model, mode, interpreter, progress, t0)
            init_words = kernels.pack(model.initial)
            # an interpreted start leaves the compiled kernels' own path to the background compile,
            # which puts it in numba's cache for the switch
            warm_up_engine_kernels(kernels.nwords, distinct_path=kernels.compiled)
            run = _Run(model, kernels, options, progress, self.shard_bits, self._chunk_states(model, options),
                       builder, self._spill_at(options))
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
                run.confirm_spec_compiles()  # the answer is given only for a spec numba accepts
            except KeyboardInterrupt:
                stop_honoured()
                result.interrupted = True
                result.incomplete_reason = "interrupted"
            except SpecError:
                run.confirm_spec_compiles()  # numba's refusal, as --compile now gives it, comes first
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
        return result

    def _kernels(self, model: Model, mode: str, interpreter: Optional[InterpreterCompile], progress: ProgressFn,
                 t0: float) -> tuple[Any, Optional[BackgroundCompile], Optional[InterpreterCompile]]:
        """The kernels the run starts with, the background compile if any, and ``interpreter``
        if those kernels are the bytecode tier's, which then need ``load_interpreter()`` once it
        is done (else it is stopped)."""
        builder: Optional[BackgroundCompile] = None
        if mode == "never":
            kernels: Any = InterpretedKernels(model)
        elif mode == "bytecode":
            kernels = first_tier_kernels(model)
        else:
            shapes = kernel_shapes(model)
            if mode != "now" and not is_compiled(shapes):
                kernels, builder = self._first_tier(model, shapes, load_interpreter=interpreter is None)
            else:
                kernels = self._compile_now(model, shapes, progress, t0)
        if interpreter is not None and not isinstance(kernels, BytecodeKernels):
            interpreter.stop()
            interpreter = None
        return kernels, builder, interpreter

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
        (DISTINCT_CANDIDATES_PER_CHUNK unless the successors are canonicalised or recorded, or
        every chunk is interpreted), and at most UNPACKED_BYTES_PER_CHUNK of unpacked states."""
        candidates = self.chunk_candidates
        if candidates is None:
            compiled = self.compile not in ("never", "bytecode") and not numba.config.DISABLE_JIT
            distinct = compiled and not (options.symmetry or options.record_graph or every_row_needed(model))
            candidates = DISTINCT_CANDIDATES_PER_CHUNK if distinct else CANDIDATES_PER_CHUNK
        unpacked = UNPACKED_BYTES_PER_CHUNK // (4 * model.layout.size)
        return max(1, min(candidates // max(1, len(model.labels)), unpacked))

    @staticmethod
    def _first_tier(model: Model, shapes: KernelShapes, load_interpreter: bool = True) -> tuple[Any, BackgroundCompile]:
        """The kernels to start with while ``shapes``' compile in the background: interpreted,
        or for a small layout whose table form (``codegen.write_kernel_module``: a few seconds to
        compile, about half as fast to run) is compiled already, that form. A small layout's
        background compile does its table form first, so that the run can take it meanwhile.
        Without ``load_interpreter`` (an installation's first run, whose helper compiles it), the
        bytecode tier's kernels are returned before their interpreter is loaded."""
        if uses_layout_table(model.layout):
            builder = BackgroundCompile(shapes)
        else:
            quick = kernel_shapes(model, table=True)
            if is_compiled(quick):
                return Kernels(model, compile_in_process(quick)), BackgroundCompile(shapes)
            builder = BackgroundCompile([quick, shapes])
        try:
            return first_tier_kernels(model, load=load_interpreter), builder
        except BaseException:  # the caller never gets the builder to stop
            builder.stop()
            raise

    @staticmethod
    def _compile_now(model: Model, shapes: KernelShapes, progress: ProgressFn, t0: float) -> "Kernels":
        def on_kernel(i: int, n: int, what: str) -> None:
            progress(Progress(0, 0, 0, 0, time.perf_counter() - t0, compiling=f"kernel {i + 1}/{n}: {what}"))

        try:
            module = compile_in_process(shapes, on_kernel)
        except numba.core.errors.NumbaError as e:
            raise compile_error(model.spec.name, e) from None
        return Kernels(model, module)


def first_tier_kernels(model: Model, load: bool = True) -> Any:
    """The bytecode tier (its interpreter loaded unless ``load`` is False), or the Python tier
    for a spec whose functions do not translate."""
    try:
        return BytecodeKernels(model, load=load)
    except Untranslatable as e:
        kernels = InterpretedKernels(model)
        kernels.why_python = str(e)
        return kernels


def interpret_budget(bytecode: bool = False) -> float:
    """``KRAFTCHECK_INTERPRET_S``, else INTERPRET_BUDGET_S (BYTECODE_BUDGET_S for the bytecode
    tier): seconds of the first tier before a run waits for its background compile."""
    text = os.environ.get("KRAFTCHECK_INTERPRET_S", "").strip()
    try:
        budget = float(text) if text else (BYTECODE_BUDGET_S if bytecode else INTERPRET_BUDGET_S)
    except ValueError:
        budget = -1.0
    if budget < 0:
        raise UsageError(f"KRAFTCHECK_INTERPRET_S must be a number of seconds of at least 0, not {text!r}")
    return budget


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
                 spill_at: Optional[int] = None) -> None:
        self.model, self.kernels, self.options, self.progress = model, kernels, options, progress
        self.builder = builder  # compiling the kernels in the background while we interpret
        # whether numba's verdict on the spec's functions is known (its refusal raised): the
        # kernels were compiled before the run (or it interprets throughout: compile "never");
        # else a compiled form, the background compile's failure or the typing check
        # (typing_check) tells
        self.spec_checked = builder is None or kernels.compiled
        self.interpret_budget = interpret_budget(isinstance(kernels, BytecodeKernels)) if builder is not None else 0.0
        self._waiting = False  # the interpreted tier's time is up: waiting for the compile
        self.interpreted_states = 0  # states expanded by the interpreted tier
        self.chunk_states = chunk_states
        self.expanded = 0  # states expanded by this run, and their successors: sizes the chunks
        self.successors = 0
        self.buffers = kernels.buffers(chunk_states)
        # recording the graph numbers every state, which answers "seen before?" too
        self.recorder = GraphBuilder(model, kernels.nwords) if options.record_graph else None
        self.visited: Any = None if options.record_graph else FingerprintSet(shard_bits) if options.fingerprints \
            else VisitedSet(kernels.nwords, shard_bits)
        # the new states a run that stopped at a violation had inserted past it: the fingerprint
        # set holds them, the counts do not (collision_probability leaves them out)
        self.past_cut: list[np.ndarray] = []
        self.checkpoint_dir = Path(options.checkpoint_dir) if options.checkpoint_dir else None
        self.levels: MemoryLevels = DiskLevels(kernels.nwords, self.checkpoint_dir) if self.checkpoint_dir \
            else MemoryLevels(kernels.nwords)
        self.spill_at = spill_at  # bytes of levels in memory past which they move to disk (None: never)
        self.spill_dir: Optional[Path] = None  # the temporary directory they moved to
        self.frontier = np.empty((0, kernels.nwords), np.uint64)  # the level being expanded
        # what a checkpoint's manifest records of its run (the spec's code hashed): only a checkpoint needs it
        self.identity = run_identity(model, options.fingerprints, options.symmetry) if self.checkpoint_dir else None
        # --symmetry: successors are canonicalised before they meet the visited set
        self.canon = canonicaliser_for(model) if options.symmetry else None
        # the model's initial state behind each state of the initial level (duplicates dropped)
        self.initial_sources = initial_sources(model, self.canon)
        self.result = Result(model=model, engine=Engine.name, fired=[0] * len(model.actions),
                             new_states=[0] * len(model.actions))
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

    # -- the search
    def load_interpreter(self, helper: InterpreterCompile) -> None:
        """An installation's first run, before it explores: numba types the spec's functions
        (needed before the answer anyway) while ``helper`` compiles the interpreter, which the
        bytecode tier then loads from numba's cache."""
        # for the progress and a failed compile's path; explore() starts its own
        self.clock = Clock(self.options.time_limit)
        self.confirm_spec_compiles(meanwhile="numba types the spec's functions while the interpreter compiles")
        helper.wait()
        self.kernels.load_interpreter()

    def explore(self, init_words: np.ndarray) -> None:
        self.clock = Clock(self.options.time_limit)
        level = self._resume() if self.options.resume else None
        if level is None:
            if self.checkpoint_dir is not None and not self.options.resume:
                # the manifest before any level, so that a run stopped at any moment resumes
                self._commit()
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
            outside = (masks & np.uint64(self.model.constraint_bits)) != 0
            inside = np.flatnonzero(~outside)
            found.update(self._check_outside(masks[outside], np.flatnonzero(outside), lambda p: (-1 - p, -1)))
            init_words, hashes = init_words[inside], hashes[inside]
        if self.recorder is not None:
            is_new = self.recorder.add_initial(init_words, hashes)
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
            self._switch_when_compiled()
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
                    raise self._placed(e, None if e.at is None else first + e.at) from None
            else:
                found_before = dict(self.found), dict(self.found_at)
                try:
                    spans = self._successors(level, lo, hi, first + lo, found_here)
                except SpecRaised as e:  # raised before the visited set met the chunk: maybe redo it compiled
                    if not (e.python_only and self._fall_back_to_compiled()):
                        raise self._placed(e, None if e.at is None else first + e.at) from None
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
        if nxt.shape[0]:  # an empty level ends the run: a resume before its final record redoes this expansion
            self._commit()
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
        """Expand ``level[lo:hi]`` and meet the visited set (or the graph recorder): afterwards
        ``buffers.valid`` holds the rows computed, in candidate order, and ``buffers.new_mark[p]``
        says whether row ``valid[p]`` is the first occurrence of a state not seen before. Returns
        each part's (start, count) in ``buffers.valid``; the parts are contiguous, so the rows
        are ``valid[:sum of counts]``.

        Per part, on its thread, right after its expansion: its valid rows, then (unless they
        must be canonicalised first, or go to the recorder) its rows for the visited set copied
        to dense arrays and bucketed by shard, self-loops and repeats within the part left out
        (``kernels/successor_rows.py``).

        A state with no successor but itself is a deadlock when the model checks for it, and
        successors outside a state or action constraint (TLC: counted as generated and checked
        against the invariants, but not kept) are left out of the visited set and the graph:
        violations found so go to ``found_here``."""
        buf, stride, canon, recorder = self.buffers, self.stride, self.canon, self.recorder
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
            if canon is None and recorder is None and not filtered:
                bucket(j)

        self.kernels.successors(level, lo, hi, buf, after_part)
        if canon is not None:
            for j in range(len(parts)):
                self._canonicalize(buf.words, buf.hashes, buf.valid[starts[j]:], counts[j])
        stuck_at = [i for i in stuck if i >= 0]
        if stuck_at:
            i = min(stuck_at)
            self._record_violation(DEADLOCK, DEADLOCK, first_index + i, -1)
            found_here[DEADLOCK] = i * stride + stride - 1  # after every successor of the state
        outside = np.empty(0, np.int64)
        if filtered:
            rows = np.concatenate([buf.valid[start: start + count] for start, count in zip(starts, counts)])
            outside = self._leave_outside(level, lo, first_index, rows, found_here)
        if (canon is not None or filtered) and recorder is None:
            run_parts(bucket, len(parts))
        if recorder is None:
            used = max(start + count for start, count in zip(starts, counts))  # positions in use
            self.visited.insert_bucketed(buf.dense_words[:used], buf.dense_hashes[:used], buf.order, offsets,
                                         buf.new_mark)
        spans = close_gaps((buf.valid, buf.new_mark), starts, counts)
        nrows = sum(counts)
        if recorder is not None:
            inside = buf.valid[:nrows]
            if outside.size:  # the graph is the constrained one: no transition leaves it
                inside = np.ascontiguousarray(inside[~np.isin(inside, outside)])
                recorder.add_leaving(buf.words, outside, level, lo, first_index, stride, buf.labels)  # fairness
            recorder.add_chunk(buf.words, buf.hashes, inside, inside.shape[0], buf.is_new, first_index, hi - lo,
                               stride, buf.labels)
            buf.is_new[outside] = 0
            np.take(buf.is_new, buf.valid[:nrows], out=buf.new_mark[:nrows])
        return spans

    def _leave_outside(self, level: np.ndarray, lo: int, first_index: int, rows: np.ndarray,
                       found_here: dict[str, int]) -> np.ndarray:
        """The candidate rows (of ``rows``, increasing) whose successor breaks a state constraint
        or whose transition breaks an action constraint. Each is checked against the invariants
        (the first violating row of each goes to ``found_here``) and, unless the graph is
        recorded, turned into a self-loop (its source's words), which nothing counts as new and
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
        bad = (masks & np.uint64(model.constraint_bits)) != 0
        if model.action_constraints:
            bad |= (buf.props[rows] & np.uint64(model.action_constraint_bits)) != 0
        where = np.flatnonzero(bad)
        outside = rows[where]
        found_here.update(self._check_outside(masks[where], outside,
                                              lambda r: (first_index + r // stride, int(buf.labels[r]))))
        if self.recorder is None and outside.size:
            buf.words[outside] = level[lo + outside // stride]
        return outside

    def _check_outside(self, masks: np.ndarray, rows: np.ndarray, at) -> dict[str, int]:
        """Invariants on states outside the constraints (TLC checks each as it is generated):
        ``masks[i]`` is row ``rows[i]``'s; ``at(row)`` gives the violation's (state index, label)
        for ``_record_violation``. Returns the checks newly violated -> the first such row."""
        found: dict[str, int] = {}
        for k, inv in enumerate(self.model.invariants):
            if inv.name in self.found or not masks.size:
                continue
            hits = np.flatnonzero((masks >> np.uint64(k)) & np.uint64(1))
            if hits.size:
                r = int(rows[hits[0]])
                self._record_violation(inv.name, "invariant", *at(r))
                found[inv.name] = r
        return found

    def _distinct_successors_only(self) -> bool:
        """Whether chunks take the compiled kernels' distinct-successor path: the successors that
        meet the visited set are all the engine needs, unless they must be canonicalised first
        (--symmetry), every transition is recorded (the state graph), or a state or action
        constraint leaves some successors out (``every_row_needed``)."""
        return (self.kernels.compiled and self.canon is None and self.recorder is None
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
                self._record_violation(DEADLOCK, DEADLOCK, first_index + i, -1)
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
                    self._record_violation(prop.name, "property", first_index + r // stride, r % stride)
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
        label, by which its violation is recorded, so that its path is rebuilt from finished
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
                self._record_violation(inv.name, "invariant", *at)
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
                self._record_violation(prop.name, "property", first + r // stride, int(labels[r]))
                found[prop.name] = r
        return found

    def _record_violation(self, name: str, kind: str, index: int, label: int) -> None:
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
        distinct = self.distinct + new_in_level
        if self.found and not self.options.keep_going:
            return True
        if self.options.max_states is not None and distinct > self.options.max_states:
            self.result.incomplete_reason = describe_limit(self.options, "max_states")
            return True
        if distinct > MAX_NUMBERED_STATES and more_work:
            self.result.incomplete_reason = (f"stopped at {MAX_NUMBERED_STATES:,} states: the engine numbers "
                                             "states with 32 bits (parent links)")
            return True
        if self.clock.expired() and more_work:
            self.result.incomplete_reason = describe_limit(self.options, "time_limit")
            return True
        if more_work and memory_exceeded(self.options):
            self.result.incomplete_reason = describe_limit(self.options, "max_memory")
            return True
        return False

    # -- checkpoints
    def _progress_record(self, finished: bool) -> dict[str, Any]:
        return {
            "levels": self.depth,
            "sizes": [int(p.shape[0]) for p in self.levels.parents],
            "checksums": self.levels.checksums,
            "initial_states": self.result.initial_states,
            "generated": self.generated,
            "fired": [int(x) for x in self.fired],
            "new_states": [int(x) for x in self.new_per_action],
            "interpreted_states": self.interpreted_states,
            "elapsed_s": self.elapsed_before + (self.clock.elapsed if self.clock else 0.0),
            "found": {name: list(at) for name, at in self.found_at.items()},
            "finished": finished,
            "status": self.result.status if finished else None,
        }

    def _commit(self) -> None:
        """After a finished level: its files are durable; say so in the manifest, atomically."""
        if self.checkpoint_dir is not None:
            write_manifest(self.checkpoint_dir, self.identity, self._progress_record(finished=False))

    def _resume(self) -> Optional[np.ndarray]:
        """Continue the run recorded in the checkpoint: map its levels, rebuild the visited set
        from their words, restore the counters; the frontier is its last finished level."""
        manifest = check_resumable(self.checkpoint_dir, self.identity)
        self.result.resumed_from_level = 0
        if manifest["levels"] == 0:  # stopped before its first level was durable: from the start
            self.levels.reopen(0, [])
            return None
        level = self.levels.reopen(manifest["levels"], manifest["sizes"], manifest["checksums"])
        for words in self.levels.words_of_level:
            for lo in range(0, words.shape[0], RESUME_CHUNK_STATES):
                chunk = np.ascontiguousarray(words[lo: lo + RESUME_CHUNK_STATES])
                self.visited.insert(chunk, fingerprints(chunk), np.arange(chunk.shape[0], dtype=np.int64))
            self.levels.release(words, words.shape[0])
        if len(self.visited) != self.distinct:
            raise SpecError(f"checkpoint {self.checkpoint_dir}: its levels hold {self.distinct} states but "
                            f"{len(self.visited)} distinct ones; the files are damaged")
        self.result.initial_states = manifest["initial_states"]
        self.generated = manifest["generated"]
        self.fired[:] = manifest["fired"]
        self.new_per_action[:] = manifest["new_states"]
        self.interpreted_states = manifest["interpreted_states"]
        self.elapsed_before = manifest["elapsed_s"]
        for name, (kind, index, label) in manifest["found"].items():
            self._record_violation(name, kind, index, label)
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
                if not (e.python_only and self._fall_back_to_compiled()):
                    at = None if e.at is None else -1 - e.at if first_index is None else first_index + e.at
                    raise self._placed(e, at) from None

    def _placed(self, e: SpecRaised, index: Optional[int], label: int = -1) -> SpecRaised:
        """``e`` with the path to state ``index`` (``spec_raised.placed_at``)."""
        trace = None if self.canon is not None else self._trace  # --symmetry's states are canonical
        return placed_at(self.model, e, index, label, trace, self.kernels.step)

    def _fall_back_to_compiled(self) -> bool:
        """The spec's code raised what only Python raises (``SpecRaised.python_only``: an error
        of the interpreted tier's, or of the spec's: numba refuses it too). Raise numba's error if
        numba refuses the spec; otherwise wait for the compiled kernels (past the run's time
        limit: the answer must not depend on the tier), take them and say True: the caller redoes
        its work with them. False when there are none to wait for (compiled already, or compile
        "never")."""
        if self.kernels.compiled or self.builder is None:
            return False
        self.confirm_spec_compiles()
        self._switch_when_compiled(wait=True)
        return True

    def confirm_spec_compiles(self, meanwhile: str = "explored; numba types the spec's functions before the answer") \
            -> None:
        """Before a run that interpreted gives its answer: raise the compile error that
        ``--compile now`` would raise (``compile_error``) if numba refuses the spec's functions.
        Known once a compiled form is ready; else numba's type inference of the spec's
        functions, without compiling them (``typing_check``), or the background compile's
        failure."""
        if self.spec_checked:
            return
        builder = self.builder
        if builder.ready_form() is not None:
            self.spec_checked = True
            return
        if builder.failed():
            self._switch_when_compiled()  # raises the compile's error
        marker = typed_marker_path(builder.shapes.module_path)
        if marker.exists() or builder.shapes.module_name in _TYPED_MODULES:  # an earlier run typed it
            self.spec_checked = True
            return
        self.progress(Progress(self.depth, self.distinct, self.generated, self.frontier_size,
                               self.elapsed_before + (self.clock.elapsed if self.clock else 0.0),
                               compiling=f"{builder.status}, {builder.elapsed:.0f} s",
                               meanwhile=meanwhile))
        try:
            check_spec_types(self.model)
        except numba.core.errors.NumbaError as e:
            self.spec_checked = True  # the verdict: refused
            raise compile_error(self.model.spec.name, e) from None
        except Exception:  # noqa: BLE001 - the check itself failed (numba's internals moved): the compile decides
            self._switch_when_compiled(wait=True)
        else:
            atomic_write(marker, f"numba {numba.__version__}\n")
            _TYPED_MODULES.add(builder.shapes.module_name)
        self.spec_checked = True

    def _switch_when_compiled(self, wait: bool = False) -> None:
        """Take each form of the compiled kernels once the background compile has it (between
        chunks, so nothing a chunk computed depends on which tier computed it); once the
        interpreted tier's time is up, or with ``wait``, wait for the first form."""
        builder = self.builder
        if builder is None:
            return
        if not self.kernels.compiled and (wait or self.clock.elapsed >= self.interpret_budget):
            self._wait_for_compile(past_time_limit=wait)
        ready = builder.ready_form()
        using = getattr(self.kernels.module, "__name__", None) if self.kernels.compiled else None
        if ready is not None and ready.module_name != using:
            # both forms pack states into the same words, so the visited set and the levels
            # carry over from one to the other
            self.kernels = Kernels(self.model, compile_in_process(ready))  # loads from numba's cache
            # the compiled kernels' own buffers: the distinct-successor path places each part in
            # a region of them (Kernels.dense_start) that the interpreted tier's do not have
            self.buffers = self.kernels.buffers(self.chunk_states)
            self.result.compile_s = builder.ready.get(ready.module_name, builder.finished_s)
            self.spec_checked = True  # a compiled form compiles every function of the spec
            if ready is builder.shapes:
                self.builder = None
        elif builder.failed():
            self.spec_checked = True  # the error raised here is numba's verdict
            # compile here, so the error is numba's own (it names the spec's line)
            try:
                compile_in_process(builder.shapes, processes=1)
            except numba.core.errors.NumbaError as e:
                raise compile_error(self.model.spec.name, e) from None
            raise SpecError(f"compiling the kernels failed in the background: {builder.error_text()[-2000:]}")

    def _wait_for_compile(self, past_time_limit: bool = False) -> None:
        """Leave the cores to the background compile until it has a form ready, fails, or the
        run's time limit passes (unless ``past_time_limit``)."""
        builder = self.builder
        builder.hurry()  # the run needs it now: no longer below everything else on the machine
        self._waiting = True
        try:
            while builder.ready_form() is None and not builder.failed() and \
                    (past_time_limit or not self.clock.expired()):
                time.sleep(0.05)
                raise_if_stop_requested()
                self._report(force=False)
        finally:
            self._waiting = False

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
            compiling = f"{self.builder.status}, {self.builder.elapsed:.0f} s" if self.builder else None
            meanwhile = "table form" if self.kernels.compiled else "waiting" if self._waiting else "interpreting"
            self.progress(Progress(self.depth, self.distinct, self.generated, self.frontier_size,
                                   self.elapsed_before + now, compiling=compiling, meanwhile=meanwhile,
                                   levels_spilled_to=str(self.spill_dir) if self.spill_dir else None))

    def finish(self) -> None:
        r = self.result
        r.distinct_states = self.distinct
        r.states_generated = self.generated
        r.depth = self.depth
        r.elapsed_s = self.elapsed_before + (self.clock.elapsed if self.clock else 0.0)
        r.fired = [int(x) for x in self.fired]
        r.new_states = [int(x) for x in self.new_per_action]
        r.interpreted_states = self.interpreted_states
        r.fingerprints = self.options.fingerprints
        r.symmetry = self.options.symmetry
        if self.options.fingerprints:
            past_cut = [fingerprints(np.ascontiguousarray(w)) for w in self.past_cut if w.shape[0]]
            r.collision_probability = self.visited.collision_probability(
                self.generated, np.concatenate(past_cut) if past_cut else None)
        r.conclude(list(self.found.values()), self.options.keep_going)
        if self.recorder is not None and not r.incomplete_reason and not r.interrupted:
            r.graph = self.recorder.finish(self.depth)
            r.graph.build_s = r.elapsed_s
            r.graph.recorded_by = "the check's exploration"
            if r.graph.size != r.distinct_states:
                raise RuntimeError(f"internal: the recorded graph has {r.graph.size} states, the run "
                                   f"{r.distinct_states}")
        self.recorder = None
        if self.checkpoint_dir is not None:
            r.checkpoint_dir = str(self.checkpoint_dir)
            if not r.incomplete_reason:  # the verdict is final: nothing left to resume (a full disk keeps it)
                write_kept("the checkpoint's record that its run finished", self.checkpoint_dir / MANIFEST,
                           lambda: write_manifest(self.checkpoint_dir, self.identity,
                                                  self._progress_record(finished=True)), r.unwritten)
        self.levels.close()
