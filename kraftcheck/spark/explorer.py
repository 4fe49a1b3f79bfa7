"""The Spark explorer: the local engine's level-synchronous BFS, one Spark job of two stages per level.

The driver keeps only counters and, per level, how many states each part file holds; the
executors do all the per-state work on numpy batches (``tasks.py``) and the levels, their
candidates and the visited set live in files under the work dir (``workdir.py``). A level's job
deduplicates the candidates its states' expansion wrote, then orders the new states and, in the
same tasks, expands them: the candidates of the next level are written before the driver knows
whether the run goes on, and are discarded if it stops. Every level's RDD is built afresh from
those files, so lineage never grows: level 40 costs what level 4 does for the same width.

States get exactly the local engine's global numbering (a candidate's key is
``parent * nlabels + label``, the order the local engine generates them in), so counts, coverage,
verdicts, the point where a run stops at its first violation, and counterexamples are the same.
"""

from __future__ import annotations

import atexit
import bisect
import dataclasses
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Optional

import numpy as np

from kraftcheck.checker.errors import SpecError, SpecRaised, UsageError
from kraftcheck.checker.explore.checkpoint import (MANIFEST, check_resume_depth, check_resume_states, check_resumable,
                                                   counts_for_manifest, read_manifest, restore_counts, run_identity,
                                                   write_manifest)
from kraftcheck.checker.explore.constraints import outside_constraints
from kraftcheck.checker.explore.kernel_audit import confirm_counterexamples
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.explore.result import (Options, Progress, ProgressFn, Result, Step, Violation, no_progress,
                                               replay_path)
from kraftcheck.checker.explore.spec_raised import placed
from kraftcheck.checker.explore.violations import initial_sources
from kraftcheck.checker.imported_source import imported_bytes
from kraftcheck.checker.explore.run_limits import Clock, depth_reached, limit_reached, stop_at_max_depth
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.kernels.threads import using_threads
from kraftcheck.checker.stop import deferred, raise_if_stop_requested, stop_honoured, stop_requested
from kraftcheck.checker.model import DEADLOCK, Model
from kraftcheck.checker.dirlock import LOCK_FILE, DirectoryLock, lock_directory
from kraftcheck.spark import leftovers, readiness, tasks, workdir
from kraftcheck.checker.disk_full import disk_full_reason
from kraftcheck.spark.failures import disk_full, driver_jvm_lost, task_error
from kraftcheck.spark.figures import LevelFigures, LevelMeter
from kraftcheck.spark.session import SparkRunError, start_context, stop_context
from kraftcheck.spark.waiting import wait_for
from kraftcheck.specs import SPEC_FILE_MODULE_PREFIX


class SparkExplorer:
    """Explores a model on Spark and returns what the local engine would.

    Give an existing ``spark`` (SparkContext or SparkSession; it is left running) or a ``master``
    URL (default ``local[*]``, or spark-submit's) and ``conf``: then ``explore`` starts a context
    and stops it, Java process included. ``work_dir`` (new or
    empty; on a cluster, a file system every executor sees) holds the levels and the visited set;
    without one, a temporary directory is used and removed. ``partitions``: hash buckets and
    tasks a stage (default: twice Spark's default parallelism; a small level runs a task a core).
    ``wait_s``: how long a context it starts may wait for the master, then for an executor; and,
    unless ``spark.kraftcheck.noExecutorWait`` says otherwise, how long a level may go without any
    executor on a cluster before the run stops incomplete.
    """

    name = "spark"

    def __init__(self, spark: Any = None, master: Optional[str] = None, conf: Optional[dict[str, str]] = None,
                 work_dir: Optional[str] = None, partitions: Optional[int] = None,
                 wait_s: float = readiness.DEFAULT_WAIT_S) -> None:
        self.spark = spark
        self.wait_s = wait_s
        self.master = master
        self.conf = dict(conf or {})
        self.work_dir = work_dir
        self.partitions = partitions

    def explore(self, model: Model, options: Options = Options(), progress: ProgressFn = no_progress,
                observer: Optional[RunObserver] = None) -> Result:
        if options.symmetry:
            raise UsageError("--symmetry works with the compiled engine and --engine reference, not on Spark")
        if not model.labels:  # its tasks index candidate rows by the instances, 0 of them
            raise UsageError(f"{model.spec.title()} has no action instances, so only its initial states: check it "
                             f"with the local engine (--engine engine), not on Spark")
        if options.checkpoint_dir and self.work_dir and Path(options.checkpoint_dir) != Path(self.work_dir):
            raise UsageError("give the Spark run's directory once: --work-dir, --checkpoint or --resume")
        readiness.no_executor_wait(self.conf, self.wait_s)  # a bad setting refused before anything starts
        root, temporary, lock, new = self._take_work_dir(options)
        try:
            try:
                # refused before any long work (compiling, starting Spark), if it must be
                if temporary and _off_this_machine(self.master):
                    raise UsageError(_NO_SHARED_DIR.format(master=self.master))
                resumed_partitions = self._resumable_partitions(model, options, root) if options.resume else None
                t0 = time.perf_counter()
                with using_threads(options.threads):  # the driver's own kernels: the run's threads
                    kernels = _driver_kernels(model)
            except BaseException:
                if temporary:
                    shutil.rmtree(root, ignore_errors=True)
                raise
            # Ctrl-C and SIGTERM are taken where the driver waits, never inside a py4j call
            with deferred(), using_threads(options.threads):
                return self._explore_on_spark(model, options, progress, root, temporary, kernels,
                                              time.perf_counter() - t0, resumed_partitions, observer)
        finally:
            if lock is not None:
                lock.release()
                if new:  # made for a run that never wrote a level (Spark did not start, say)
                    try:
                        root.rmdir()
                    except OSError:
                        pass

    @staticmethod
    def _resumable_partitions(model: Model, options: Options, root: Path) -> int:
        """The partitions of the run in ``root``, which this run may resume: of this model, not
        finished, every file as its manifest says; a clear refusal (exit 2) otherwise."""
        partitions = read_manifest(root)["identity"].get("partitions")
        manifest = check_resumable(root, run_identity_on_spark(model, partitions, options.fingerprints),
                                   options.keep_going)
        level_start = manifest.get("level_start", [])
        check_resume_depth(root, len(level_start), options.max_depth)
        # the states of its finished levels, as ``distinct`` counts them
        check_resume_states(root, level_start[-1] + sum(manifest["part_counts"][-1]) if level_start else 0,
                            options.max_states)
        damaged = workdir.damage(str(root), manifest, partitions)
        if damaged:
            raise UsageError(f"--resume {root}: the work dir does not hold the levels its manifest names "
                             f"({damaged}); it cannot be resumed: start the run afresh in a new --work-dir")
        return partitions

    def _explore_on_spark(self, model: Model, options: Options, progress: ProgressFn, root: Path, temporary: bool,
                          kernels: Any, compile_s: float, resumed_partitions: Optional[int],
                          observer: Optional[RunObserver]) -> Result:
        try:
            sc, owned = self._context(progress)
        except BaseException as e:
            if temporary:  # Spark did not start: leave no empty work dir behind
                shutil.rmtree(root, ignore_errors=True)
            if isinstance(e, KeyboardInterrupt):
                stop_honoured()  # stopped while Spark started: the command line says "interrupted", exit 130
            raise
        if temporary and _off_this_machine(getattr(sc, "master", None)):  # spark-submit's master, say
            if owned:
                stop_context(sc)
            shutil.rmtree(root, ignore_errors=True)
            raise UsageError(_NO_SHARED_DIR.format(master=sc.master))
        shipped = None
        try:
            shipped = ship_spec_files(sc, type(model.spec))
            # a resumed run keeps its partitioning (the visited runs are cut by it)
            partitions = resumed_partitions or self.partitions or max(2, 2 * sc.defaultParallelism)
            run = _SparkRun(model, kernels, options, progress, sc, str(root), partitions, self.wait_s, observer)
            run.result.compile_s = compile_s
            try:
                run.explore()
            except KeyboardInterrupt:
                stop_honoured()
                run.result.interrupted = True
                run.result.incomplete_reason = "interrupted"
            except Exception as e:
                run.stopped_by(e)
            result = run.finish()
            result.checkpoint_dir = None if temporary else str(root)  # where --resume continues it
            return result
        finally:
            if owned:
                stop_context(sc)
                if shipped is not None:  # served to the executors until the context stops
                    shutil.rmtree(shipped, ignore_errors=True)
            if temporary:
                shutil.rmtree(root, ignore_errors=True)

    def _context(self, progress: ProgressFn) -> tuple[Any, bool]:
        if self.spark is None:
            return start_context(self.master, self.conf, self.wait_s, progress), True
        return getattr(self.spark, "sparkContext", self.spark), False

    def _take_work_dir(self, options: Options) -> tuple[Path, bool, Optional[DirectoryLock], bool]:
        """The work dir, whether it is a temporary one, this run's hold of it for its whole life
        (None for a temporary one; the kernel drops it if the driver dies) and whether it was made
        for this run. A work dir another run holds is refused at once naming that run, before
        anything else is said about it; then, under the hold, a new run's must be empty, a resumed
        run's must hold a manifest."""
        directory = options.checkpoint_dir or self.work_dir
        if directory is None:
            return leftovers.work_dir(), True, None, False
        # executors run in directories of their own: a relative path, or ~, means nothing there
        root = Path(directory).expanduser().absolute()
        if options.resume and not root.is_dir():  # the hold would make it: a mistyped path stays unmade
            raise UsageError(f"--resume {directory}: no Spark run to resume there ({MANIFEST} is missing)")
        if root.exists() and not root.is_dir():
            raise UsageError(f"--work-dir {root} is not an empty directory; give a new or empty one")
        new = not root.exists()
        lock = lock_directory(root, _PURPOSE)  # DirectoryBusy if a run holds it
        try:
            if options.resume and not (root / MANIFEST).exists():
                raise UsageError(f"--resume {directory}: no Spark run to resume there ({MANIFEST} is missing)")
            if not options.resume and any(p.name != LOCK_FILE for p in root.iterdir()):
                raise UsageError(f"--work-dir {root} is not an empty directory; give a new or empty one")
        except BaseException:
            lock.release()
            raise
        return root, False, lock, new

_PURPOSE = "a Spark run (kraftcheck check --engine spark)"


def ship_spec_files(sc: Any, spec_class: type) -> Optional[Path]:
    """Send a spec loaded from a file (``--spec my_spec.py:MySpec``) to the executors, under the
    module name the driver gave it, with the ``.py`` files beside it (which it may import, as a
    script would): executors build the model by importing the spec class's module by name, and
    the file is not on their path. Returns the directory the renamed copy is served from (Spark
    serves it until the context stops; the caller removes it then), None if nothing was shipped."""
    module = sys.modules.get(spec_class.__module__)
    path = getattr(module, "__file__", None)
    if module is None or path is None or not spec_class.__module__.startswith(SPEC_FILE_MODULE_PREFIX):
        return None  # an installed or importable module: executors import it as the driver did
    # one place per module name and process: Spark refuses a second file of one name from another
    # path in one context, and another driver's copy may go away while this one runs
    shipped = leftovers.ship_dir(spec_class.__module__)
    if not shipped.exists():
        shipped.mkdir()
        atexit.register(shutil.rmtree, shipped, True)  # a context given by the caller outlives explore
    copy = shipped / f"{spec_class.__module__}.py"
    # the text the driver imported: a file saved since would have the executors refuse the run
    imported = imported_bytes(path)
    if imported is not None:
        copy.write_bytes(imported)
    else:
        shutil.copyfile(path, copy)
    sc.addPyFile(str(copy))
    for beside in sorted(Path(path).parent.glob("*.py")):
        if beside.resolve() != Path(path).resolve():
            sc.addPyFile(str(beside))
    return shipped


_NO_SHARED_DIR = ("--engine spark with master {master}: the levels and the visited set need a directory that the "
                  "driver and every executor see (NFS, a mounted volume), and the default is a temporary "
                  "directory of the driver's; give one with --work-dir DIR")


def _identity(root: str) -> Optional[tuple[int, int]]:
    """The work dir's device and inode (None if it is gone): a directory made anew under its name differs."""
    try:
        st = os.stat(root)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _off_this_machine(master: Optional[str]) -> bool:
    """Whether executors of ``master`` may run on other machines (anything but ``local``)."""
    return master is not None and not master.startswith("local")


def run_identity_on_spark(model: Model, partitions: int, fingerprints: bool = False) -> dict[str, Any]:
    """What must be the same for a work dir to be resumed: the local engine's identity of a run
    (fingerprints or not included), the engine, and the partition count (the visited runs are cut
    by it)."""
    return {**run_identity(model, fingerprints=fingerprints), "engine": "spark", "partitions": partitions,
            "visited_runs": "merged by fingerprint"}  # an older work dir, one run a level, is not resumed


def _driver_kernels(model: Model) -> Any:
    """Compile the kernels on the driver (into the shared cache the executors then load from),
    once numba's typing has accepted the spec's functions and their return types (``type_spec_once``)."""
    import numba
    from kraftcheck.checker.compile import compile_error, compile_in_process
    from kraftcheck.checker.explore.compiled import Kernels, kernel_shapes
    from kraftcheck.checker.explore.tiers import type_spec_once
    shapes = kernel_shapes(model)
    type_spec_once(model, shapes)
    try:
        return Kernels(model, compile_in_process(shapes))
    except numba.core.errors.NumbaError as e:
        raise compile_error(model.spec.name, e) from None


# a level whose expansion generated fewer transitions runs a task per core, not per partition
# (``_SparkRun._stage_tasks``): about a second of one core's work (docs/spark.md, "Design")
SMALL_LEVEL_TRANSITIONS = 1_000_000

# the driver expands the initial states in chunks of at most this many (any size gives the same answer)
DRIVER_CHUNK_STATES = 4096


@dataclasses.dataclass(frozen=True)
class _Expansion:
    """A level's expansion, its candidates written: range t holds the states firsts[t] ..
    firsts[t + 1]; one summary per non-empty range (``tasks.expand_states``), keys global."""

    firsts: tuple[int, ...]
    summaries: list[dict]


@dataclasses.dataclass(frozen=True)
class _FinishedSpark:
    """What a run observer's ``run_finished`` sees of a Spark run: its levels and paths."""

    level_starts: list[int]
    trace: Any


class _SparkRun:
    """One exploration: the driver's counters and the per-level bookkeeping of part files."""

    def __init__(self, model: Model, kernels: Any, options: Options, progress: ProgressFn, sc: Any, root: str,
                 partitions: int, wait_s: float = readiness.DEFAULT_WAIT_S,
                 observer: Optional[RunObserver] = None) -> None:
        self.model, self.kernels, self.options, self.progress = model, kernels, options, progress
        self.sc, self.root, self.partitions = sc, root, partitions
        self.nlabels = len(model.labels)
        recipe = tasks.ModelRecipe.of(model)
        self.recipe = recipe  # in each job's closure (tasks.ModelRecipe says why not a broadcast)
        self.run_id = recipe.identity
        self.cache_dir = os.environ.get("KRAFTCHECK_CACHE_DIR")  # the executors use the driver's, if set
        self.task_threads = int(sc.getConf().get("spark.task.cpus", "1"))  # the cores a task is given
        self.level_start: list[int] = []              # global index of each level's first state
        self.part_counts: list[tuple[int, ...]] = []  # states per part file, per level
        self.level_files: list[list[dict]] = []  # per level, per part: kind -> size and digest
        self.run_files: dict[int, dict[tuple[int, int], dict]] = {}  # bucket -> run -> kind -> size and digest
        self.generated = 0
        self.fired = np.zeros(len(model.actions), np.int64)
        self.new_per_action = np.zeros(len(model.actions), np.int64)
        self.found: dict[str, Violation] = {}
        self.found_at: dict[str, tuple[str, str, int]] = {}  # check -> (kind, "initial" or "key", value)
        self._initial_sources: list[int] = []  # model.initial's index of each initial-level place
        self.cut: Optional[tuple[int, int]] = None  # (level, key) where a run stopped inside a level
        self.expansion: Optional[_Expansion] = None  # the last level's expansion, once its candidates are written
        self.result = Result(model=model, engine=SparkExplorer.name)
        self.clock = Clock(options.time_limit)
        self.elapsed_before = 0.0  # exploration time of the run this one resumes
        self.identity = run_identity_on_spark(model, partitions, options.fingerprints)
        self.meter = LevelMeter(sc, f"kraftcheck-{uuid.uuid4().hex[:12]}", partitions)
        self.jvm_lost = False  # the driver's Java process is gone: nothing more is asked of Spark
        self.executors_gone = False  # no executor left: no more jobs
        # on a cluster, how long a level's job may wait without any executor
        self.wait_s = readiness.no_executor_wait(sc.getConf(), wait_s)
        self.observer = observer
        self.root_identity = _identity(root)  # the work dir this run writes (not a new one of that name)

    @property
    def depth(self) -> int:
        return len(self.level_start)

    @property
    def distinct(self) -> int:
        return self.level_start[-1] + sum(self.part_counts[-1]) if self.level_start else 0

    # -- the search
    def explore(self) -> None:
        if self.observer is not None:
            self.observer.run_started()
        if self.options.resume:
            stop = self._resume()
        else:
            stop = self._initial_level()
            if not stop:
                self._commit()
        frontier = sum(self.part_counts[-1])
        while not stop and frontier:
            raise_if_stop_requested()
            if stop_at_max_depth(self.options, self.depth, self.result):
                return
            level = self.depth - 1
            self.meter.start(level)
            try:
                if self.expansion is None:  # the initial level, or the last level of a resumed run
                    self.expansion = self._expand_frontier()
                stop, frontier = self._expand_level()
            except BaseException as e:
                if not driver_jvm_lost(e, self.sc):  # a JVM gone has no tags, and no figures to ask
                    self.meter.stop(level)
                raise
            self.meter.stop(level)
            figures = self.meter.read_level(level, frontier)
            self.progress(Progress(self.depth, self.distinct, self.generated, frontier,
                                   self.elapsed_before + self.clock.elapsed, engine=SparkExplorer.name,
                                   shuffle_bytes=figures.shuffle_write_bytes if figures else None))
            if stop:
                return
            self._commit()
            stop = self._limits_hit(more_work=frontier > 0)

    def _initial_level(self) -> bool:
        """Level 0, on the driver (the initial states are few): files, visited runs, invariants."""
        model = self.model
        words = self.kernels.pack(model.initial)  # Model deduplicates initial states, in order
        rows = np.arange(words.shape[0])  # their rows in model.initial
        if self.options.fingerprints:  # states with one fingerprint are one, the first kept
            _, first = np.unique(tasks.clipped(fingerprints(words)), return_index=True)
            rows = np.sort(first)
            words = words[rows]
        n = words.shape[0]
        self.result.initial_states = model.initial_generated  # one given twice counted twice, as TLC does
        hits: dict[str, int] = {}
        inside = np.ones(n, bool)
        masks = np.zeros(n, np.uint64)
        if model.constraints or model.invariants:
            try:
                masks = self.kernels.violations(words)
            except SpecRaised as e:  # initial state i is numbered -1 - i
                if e.at is None:
                    raise
                raise self._placed(e, (-1 - int(rows[e.at]), ())) from None
        if model.constraints:  # TLC: an initial state outside is counted and checked, but not kept
            inside = ~outside_constraints(model, masks)
        if model.invariants:
            for k, inv in enumerate(model.invariants):
                bad = np.flatnonzero((masks >> np.uint64(k)) & np.uint64(1))
                if bad.size:
                    hits[inv.name] = int(bad[0])
        stop = bool(hits) and not self.options.keep_going
        if stop:  # as the local engine: count the initial states up to the first violating one
            cut = min(hits.values())
            hits = {name: i for name, i in hits.items() if i == cut}
            n = cut + 1
        words = words[:n][inside[:n]]
        self._initial_sources = [int(r) for r in rows[:n][inside[:n]]]
        # every initial state the spec gives is generated (up to the violating one), duplicates included
        self.generated = model.initial_generated_through(int(rows[n - 1])) if stop else model.initial_generated
        n = words.shape[0]
        self.level_files.append([{kind: workdir.save(workdir.part_path(self.root, 0, 0, kind), data)
                                  for kind, data in (("words", words),
                                                     ("parents", np.full(n, workdir.INITIAL_PARENT, np.uint64)),
                                                     ("labels", np.zeros(n, np.uint16)))}])
        hashes = fingerprints(words)
        buckets = tasks.bucket_of(hashes, self.partitions, self.options.fingerprints)
        for b in range(self.partitions):
            if self.options.fingerprints:
                self._written_run(tasks.add_run(self.root, b, 0, np.sort(tasks.clipped(hashes[buckets == b]))))
            else:
                run_words, run_fps = tasks.exact_run(words[buckets == b])
                self._written_run(tasks.add_run(self.root, b, 0, run_fps, run_words))
        self.level_start.append(0)
        self.part_counts.append((n,))
        for name, i in hits.items():
            self._note_violation(name, "invariant", "initial", i)
        self.progress(Progress(1, n, n, n, self.clock.elapsed, engine=SparkExplorer.name))
        return stop

    def _plan(self, firsts: tuple[int, ...] = (), expand_next: bool = False) -> tasks.LevelPlan:
        level = self.depth - 1
        start, size = self.level_start[level], sum(self.part_counts[level])
        p = self.partitions
        return tasks.LevelPlan(root=self.root, run=self.run_id, level=level, part_counts=self.part_counts[level],
                               level_start=start, splits=tuple(start + size * t // p for t in range(p + 1)),
                               nwords=self.kernels.nwords, nlabels=self.nlabels, cache_dir=self.cache_dir,
                               fingerprints=self.options.fingerprints, firsts=firsts, expand_next=expand_next,
                               threads=self.task_threads)

    def _expand_frontier(self) -> "_Expansion":
        """Expand the last level on its own: the initial states on the driver, which holds them
        already (one range); a resumed run's last level as a one-stage Spark job (P even ranges)."""
        plan = self._plan()
        if plan.level == 0:
            size = plan.splits[-1]
            words = tasks.read_frontier(plan, 0, size)
            try:
                summary = tasks.expand_states(plan, self.kernels, 0, 0, words,
                                             chunk_states=max(1, min(size, DRIVER_CHUNK_STATES)))
            except tasks.SpecErrorAt as e:
                raise self._placed(e.error, (e.index, e.labels)) from None
            return self._expansion((0,) + (size,) * self.partitions, [summary])
        recipe, p = self.recipe, self.partitions
        summaries = self._run_job(lambda: self.sc.parallelize(range(p), p).map(
            lambda t: tasks.expand(plan, recipe, t)).collect())
        return self._expansion(plan.splits, sorted(summaries, key=lambda r: r["task"]))

    def _expansion(self, firsts: tuple[int, ...], summaries: list[dict]) -> "_Expansion":
        """The expansion summaries of ranges starting at ``firsts``, with their keys made global."""
        nl = self.nlabels

        def globalised(key: int, first: int) -> int:
            return key if key == tasks.NO_HIT else key + first * nl

        out = []
        for r in summaries:
            first = firsts[r["task"]]
            out.append({**r, "properties": [globalised(k, first) for k in r["properties"]],
                        "outside": [globalised(k, first) for k in r["outside"]],
                        "deadlock": globalised(r["deadlock"], first)})
        return _Expansion(tuple(firsts), out)

    def _expand_level(self) -> tuple[bool, int]:
        """One level as one job of two stages: deduplicate its candidates by hash bucket, then
        order the new states by parent range, write them and expand them (the next level's
        candidates, unless ``--max-depth`` ends the run first); the driver gets one small summary
        per task. Returns whether the run stops at a violation, and how many new states the
        level has."""
        expansion = self.expansion
        plan = self._plan(expansion.firsts, expand_next=not depth_reached(self.options, self.depth + 1))
        recipe, p = self.recipe, self.partitions
        groups = tasks.stage_groups(p, self._stage_tasks(expansion))
        group_of = tuple(g for g, group in enumerate(groups) for _ in group)
        new_states = self.sc.parallelize(range(len(groups)), len(groups)).mapPartitionsWithIndex(
            lambda g, _: tasks.deduplicate_buckets(plan, groups[g]))
        stats = new_states.partitionBy(len(groups), lambda t: group_of[t]).mapPartitionsWithIndex(
            lambda g, items: tasks.order_parts(plan, recipe, groups[g], items))
        parts = sorted(self._run_job(stats.collect), key=lambda s: s["task"])
        workdir.remove_candidates(self.root, plan.level)  # read by this job only
        for s in parts:
            for written in s["runs"]:
                self._written_run(written)
        self.expansion = None
        ranges, written_parts = expansion.summaries, parts
        hits = self._first_violations(ranges, parts)
        stop = bool(hits) and not self.options.keep_going
        if stop:
            cut = min(key for _, key in hits.values())
            hits = {name: at for name, at in hits.items() if at[1] == cut}
            ranges, parts = self._cut_at(plan, expansion, parts, cut)
            self.cut = (plan.level + 1, cut)
        for r in ranges:
            self.generated += r["generated"]
            self.fired += r["fired"]
        for s in parts:
            self.new_per_action += s["new"]
        new = sum(s["count"] for s in parts)
        if new:  # a level without new states is not a level (the search is over)
            self.level_start.append(plan.splits[-1])
            self.part_counts.append(tuple(s["count"] for s in parts))
            self.level_files.append([s["files"] for s in written_parts])
            if plan.expand_next and not stop:
                firsts = tuple(np.cumsum([plan.splits[-1]] + list(self.part_counts[-1])).tolist())
                self.expansion = self._expansion(firsts, [s["next"] for s in parts])
        if self.expansion is None:  # expanded for nothing: the run stops here
            workdir.remove_candidates(self.root, plan.level + 1)
        for name, (kind, key) in hits.items():
            self._note_violation(name, kind, "key", key)
        return stop, new

    def _stage_tasks(self, expansion: "_Expansion") -> int:
        """Tasks a stage for the level whose expansion is ``expansion``: one a partition, or, for
        a level of fewer than SMALL_LEVEL_TRANSITIONS transitions, one a core (Spark's default
        parallelism), each for a few buckets and parts: a task costs a fixed part of Spark's
        scheduling and the Python worker's start of a task, which such a level's work does not
        repay, while the balance that more tasks than cores gives is worth little at its size."""
        transitions = sum(r["generated"] for r in expansion.summaries)
        if transitions >= SMALL_LEVEL_TRANSITIONS:
            return self.partitions
        return max(1, min(self.partitions, self.sc.defaultParallelism))

    def _first_violations(self, ranges: list[dict], parts: list[dict]) -> dict[str, tuple[str, int]]:
        """Checks not violated before and violated in this level -> (kind, smallest violating key):
        invariants on the new states (``parts``) and on the successors outside the constraints,
        transition properties and deadlocks (the expansion's ``ranges``)."""
        hits: dict[str, tuple[str, int]] = {}
        for kind, checks, found_in in (("invariant", self.model.invariants, ((parts, "invariants"),
                                                                              (ranges, "outside"))),
                                       ("property", self.model.properties, ((ranges, "properties"),))):
            for k, check in enumerate(checks):
                keys = [s[field][k] for summaries, field in found_in for s in summaries if s[field][k] != tasks.NO_HIT]
                if keys and check.name not in self.found:
                    hits[check.name] = (kind, min(keys))
        keys = [s["deadlock"] for s in ranges if s["deadlock"] != tasks.NO_HIT]
        if keys and DEADLOCK not in self.found:  # key: the stuck state's last candidate row
            hits[DEADLOCK] = (DEADLOCK, min(keys))
        return hits

    def _cut_at(self, plan: tasks.LevelPlan, expansion: "_Expansion", parts: list[dict],
                cut: int) -> tuple[list[dict], list[dict]]:
        """The level's summaries counting only what the local engine counts when it stops at the
        transition with key ``cut``: every expansion range and order part before the ones holding
        its parent in full, those up to it."""
        recipe = self.recipe
        parent = cut // self.nlabels
        r = bisect.bisect_right(expansion.firsts, parent) - 1
        t = bisect.bisect_right(plan.splits, parent) - 1
        lo = expansion.firsts[r]
        partial = self._run_job(lambda: self.sc.parallelize([t], 1).map(
            lambda task: tasks.count_until(plan, recipe, lo, task, cut)).collect())[0]
        ranges = [x for x in expansion.summaries if x["task"] < r]
        ranges.append({"generated": partial["generated"], "fired": partial["fired"]})
        return ranges, parts[:t] + [{**parts[t], "count": partial["count"], "new": partial["new"]}]

    def _run_job(self, job):
        """``job()``'s value: the job runs on a thread of its own (with this thread's job tags),
        and this thread waits between py4j calls for it (``waiting``), so that Ctrl-C or SIGTERM
        stops the waiting, and the jobs are cancelled on a connection that is not in the middle
        of an answer. On a cluster, no executor for ``wait_s`` seconds while the job waits ends
        the run (``readiness.NoExecutorLeft``). A failure says the failed task's error; a full
        disk is an ``OSError``; a work dir that vanished meanwhile, a ``UsageError``; a spec's
        own error in a task (returned, not raised: ``tasks.spec_errors_returned``) is raised."""
        from pyspark.util import InheritableThread

        def run() -> Any:
            # a cancelled job's tasks are interrupted (their Python workers ended), not left to
            # run on into files the run's end removes
            self.sc.setLocalProperty("spark.job.interruptOnCancel", "true")
            return job()

        watch = readiness.executors_come_and_go(self.sc)
        seen = [0.0]  # when an executor was last seen, in seconds since the job started

        def check(elapsed: float) -> None:
            raise_if_stop_requested()
            if watch:
                if readiness.executors(self.sc):
                    seen[0] = elapsed
                elif elapsed - seen[0] > self.wait_s:
                    raise readiness.NoExecutorLeft(self.sc.master, self.wait_s)

        try:
            value = wait_for(run, check, self._cancel_jobs, "kraftcheck-spark-job", InheritableThread)
        except (KeyboardInterrupt, readiness.NoExecutorLeft):
            raise
        except Exception as e:
            if driver_jvm_lost(e, self.sc):
                raise
            self._check_work_dir()
            full = disk_full(e)
            if full is not None:
                raise full from None
            if type(e).__module__.startswith(("py4j", "pyspark")):
                raise SparkRunError(f"a Spark job failed: {task_error(e)}") from None
            raise
        for item in value if isinstance(value, list) else ():
            if isinstance(item, tasks.RaisedBySpec):
                error = item.error()
                module = sys.modules.get(type(self.model.spec).__module__)
                if getattr(error, "file", None) and Path(error.file).name == f"{getattr(module, '__name__', '')}.py":
                    error.file = module.__file__  # the executors ran a shipped copy: name the spec's own file
                raise self._placed(error, item.place)
        return value

    def _cancel_jobs(self, thread: Any) -> None:
        """Cancel the running jobs and wait (a while) until no task runs: the run's end removes
        files that a task still running would then fail to read, with a traceback in Spark's log."""
        try:
            self.sc.cancelAllJobs()
            thread.join(30)
            deadline = time.monotonic() + 10
            tracker = self.sc._jsc.sc().statusTracker()
            while time.monotonic() < deadline and sum(e.numRunningTasks() for e in tracker.getExecutorInfos()):
                time.sleep(0.05)
        except Exception:  # noqa: BLE001: a JVM that is gone has no jobs left to cancel
            self.jvm_lost = True

    def stopped_by(self, error: Exception) -> None:
        """The run stopped on ``error``: a lost driver JVM ends it as an interrupt would (exit
        130), a full disk or executors gone for good as an incomplete run (exit 3), each with the
        statistics of the levels finished; any other error is raised."""
        if driver_jvm_lost(error, self.sc):
            self.jvm_lost = True
            self.result.interrupted = True
            self.result.incomplete_reason = ("interrupted" if stop_requested() else
                                             "the Spark driver's Java process ended (killed, or out of memory)")
            stop_honoured()
            return
        if isinstance(error, readiness.NoExecutorLeft):
            self.executors_gone = True
            self.result.incomplete_reason = str(error)
            return
        full = disk_full(error)
        if full is None:
            raise error
        # as the local engine says it: the command line adds what to do (--resume the work dir)
        self.result.incomplete_reason = disk_full_reason(full)

    def _check_work_dir(self) -> None:
        """Stop (exit 2) if the work dir was removed or replaced while this run went on: its
        levels are gone, and a manifest written now would claim them."""
        if _identity(self.root) != self.root_identity:
            raise UsageError(f"the work dir {self.root} was removed (or replaced) while the run was going on; "
                             "the levels explored are gone with it: start the run again in a new --work-dir")

    def _limits_hit(self, more_work: bool) -> bool:
        reason = limit_reached(self.options, self.distinct, self.clock, more_work)
        if reason:
            self.result.incomplete_reason = reason
        return reason is not None

    # -- counterexamples
    def _note_violation(self, name: str, kind: str, where: str, value: int) -> None:
        """The violation at initial state ``value`` (``where`` = "initial") or at the transition
        with key ``value`` (``where`` = "key"): the path to its parent, then that step."""
        if where == "initial":
            steps = [Step(None, self.model.initial[value])]
        elif kind == DEADLOCK:  # the path to the stuck state, whose every successor is itself
            steps = self._trace(value // self.nlabels)
        else:
            label = value % self.nlabels
            steps = self._trace(value // self.nlabels)
            steps.append(Step(label, self.model.step(steps[-1].state, label)))
        self.found[name] = Violation(name, kind, steps)
        self.found_at[name] = (kind, where, value)

    # -- durable levels and resume
    def _manifest_content(self, finished: bool) -> dict[str, Any]:
        """What the manifest says of the run: its levels and their files, the counts, the figures."""
        return {"level_start": self.level_start, "part_counts": [list(c) for c in self.part_counts],
                "initial_sources": self._initial_sources,
                **counts_for_manifest(self.result, self.generated, self.fired, self.new_per_action,
                                      self.elapsed_before + self.clock.elapsed, self.found_at, finished),
                "spark_levels": [dataclasses.asdict(f) for f in self.meter.figures.levels],
                "spark_figures_unavailable": self.meter.figures.unavailable,
                "level_files": self.level_files,
                "visited_files": self._visited_files()}

    def _commit(self) -> None:
        """After a finished level (its files are in place): say so in the manifest, atomically;
        then remove the visited runs that the level's merges replaced (no task reads them now)."""
        self._check_work_dir()
        try:
            workdir.sync_folders(self.root)  # the files were synced by their writers, their folders here
        except FileNotFoundError:
            self._check_work_dir()  # removed just now: say so
            raise
        write_manifest(Path(self.root), self.identity, self._manifest_content(finished=False))
        self._remove_stale_runs()
        if self.observer is not None:
            self.observer.level_finished(self.depth, self.distinct, self.generated)

    def _written_run(self, written: dict) -> None:
        """A visited run a task (or the driver) wrote, with its files' sizes and digests."""
        first, last = map(int, written["run"].split("-"))
        self.run_files.setdefault(written["bucket"], {})[first, last] = written["files"]

    def _visited_files(self) -> dict[str, dict[str, dict]]:
        """For the manifest: each bucket's runs that hold the finished levels, with their files'
        sizes and digests (not the runs a merge replaced, nor those of a level not finished)."""
        through = self.depth - 1
        return {str(b): {workdir.run_name(*run): runs[run] for run in workdir.run_cover(list(runs), through)}
                for b, runs in sorted(self.run_files.items())}

    def _remove_stale_runs(self) -> None:
        for b in range(self.partitions):
            for run in workdir.stale_runs(self.root, b, self.depth - 1):
                workdir.remove_run(self.root, b, run)
                self.run_files.get(b, {}).pop(run, None)

    def _resume(self) -> bool:
        """Continue from the manifest's last finished level: drop what a killed run wrote after it,
        restore the counters and the violations found so far."""
        manifest = check_resumable(Path(self.root), self.identity)
        self.level_start = list(manifest["level_start"])
        self.part_counts = [tuple(c) for c in manifest["part_counts"]]
        # a work dir written before the manifest kept them: what the initial level keeps but for
        # fingerprints that collide
        self._initial_sources = manifest.get("initial_sources") or initial_sources(self.model, None)
        self.level_files = manifest["level_files"]
        self.run_files = {int(b): {tuple(map(int, name.split("-"))): files for name, files in runs.items()}
                          for b, runs in manifest["visited_files"].items()}
        finished = len(self.level_start)
        for path in (Path(self.root) / "levels").glob("level-*"):
            if int(path.name.split("-")[1]) >= finished:
                shutil.rmtree(path)
        workdir.remove_candidates(self.root)  # the last level is expanded again
        self._remove_stale_runs()  # runs of the level being built, and runs a merge replaced
        # the figures of the levels explored before (work dirs of earlier versions have none)
        self.meter.figures.levels = [LevelFigures(**f) for f in manifest.get("spark_levels", [])]
        self.meter.figures.unavailable = manifest.get("spark_figures_unavailable")
        self.generated, self.elapsed_before = restore_counts(manifest, self.result, self.fired, self.new_per_action,
                                                             self._note_violation)
        self.result.resumed_from_level = finished
        return False

    def _collision_probability(self) -> dict[str, float]:
        """TLC's two estimates, as the local ``FingerprintSet.collision_probability`` gives them:
        the buckets hold consecutive ranges of fingerprints, so the smallest gap is the smallest
        within a bucket or between one bucket's largest and the next non-empty one's smallest."""
        root, through, p = self.root, self.depth - 1, self.partitions
        # a run that stopped inside its last level counts that level up to the violation only
        cut = (*self.cut, self.nlabels) if self.cut is not None and self.cut[0] == through else None
        summaries = sorted(self._run_job(lambda: self.sc.parallelize(range(p), p).map(
            lambda b: tasks.fingerprint_summary(root, b, through, p, cut)).collect()), key=lambda x: x["bucket"])
        filled = [x for x in summaries if x["count"]]
        distinct = sum(x["count"] for x in filled)
        optimistic = distinct * max(0, self.generated - distinct) / 2.0**64
        gaps = [x["gap"] for x in filled if x["gap"] is not None]
        gaps += [b["min"] - a["max"] for a, b in zip(filled, filled[1:])]
        return {"optimistic": optimistic, "from_fingerprints": 1.0 / min(gaps) if gaps else 0.0}

    def _link(self, index: int) -> tuple[int, int]:
        """The parent index and label of state ``index``, read from its part file alone."""
        level = bisect.bisect_right(self.level_start, index) - 1
        offset = index - self.level_start[level]
        for part, count in enumerate(self.part_counts[level]):
            if offset < count:
                parent = workdir.load_slice(workdir.part_path(self.root, level, part, "parents"), np.uint64,
                                            offset, offset + 1)[0]
                label = workdir.load_slice(workdir.part_path(self.root, level, part, "labels"), np.uint16,
                                           offset, offset + 1)[0]
                return (-1 if parent == workdir.INITIAL_PARENT else int(parent)), int(label)
            offset -= count
        raise SpecError(f"internal: state {index} is in no part file of level {level}")

    def _trace(self, index: int) -> list[Step]:
        # the initial level leaves out the initial states outside a state constraint (and, with
        # --fingerprints, those whose fingerprint an earlier one has): its places are not model.initial's
        sources = self._initial_sources
        return replay_path(self.model, index, self._link, self.model.step,
                           initial=lambda i: self.model.initial[sources[i]])

    def _placed(self, error: SpecError, place: Optional[tuple[int, tuple[int, ...]]]) -> SpecError:
        """A spec's error with the state it was raised on and the path to it, as the local engine
        reports it: ``place`` is explored state ``index`` (``-1 - i``: initial state i) and the
        labels of the steps from it (``tasks.SpecErrorAt``); None, or a path that cannot be
        replayed, leaves the error as it is (the path is a help; the error is what is reported)."""
        if place is None or not isinstance(error, SpecRaised):
            return error
        index, labels = place
        try:
            steps = [Step(None, self.model.initial[-1 - index])] if index < 0 else self._trace(index)
            for label in labels:
                steps.append(Step(label, self.model.step(steps[-1].state, label)))
        except Exception:  # noqa: BLE001 - see above
            return error
        return placed(self.model, error, steps)

    def finish(self) -> Result:
        r = self.result
        collisions = None
        if self.options.fingerprints and not (self.jvm_lost or self.executors_gone):
            collisions = self._collision_probability()
        confirm_counterexamples(self.model, list(self.found.values()))
        r.settle(self.options, list(self.found.values()), self.distinct, self.generated, self.depth,
                 self.elapsed_before + self.clock.elapsed, fired=self.fired, new_states=self.new_per_action,
                 collision_probability=collisions)
        r.spark = self.meter.figures.report()
        workdir.remove_candidates(self.root)  # a stopped run's expansion of its last level
        if not r.incomplete_reason:  # the verdict is final: nothing left to resume
            self._check_work_dir()
            write_manifest(Path(self.root), self.identity, self._manifest_content(finished=True))
        if self.observer is not None:
            self.observer.run_finished(r, _FinishedSpark(self.level_start, self._trace))
        return r
