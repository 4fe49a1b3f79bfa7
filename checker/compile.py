"""Compiling a model's kernels: in this process, or in a background process while the engine
explores with the interpreted tier.

Numba compiles a kernel the first time it is called with given argument types and keeps the
result in its on-disk cache. ``compile_kernels`` calls every kernel of a generated module once,
on empty arrays of exactly the types the engine passes (``KernelShapes``), so that afterwards
every call the engine makes is a cache hit. When all of them are compiled, a marker file beside
the module says so: a later run that finds it loads the kernels at once (well under a second);
one that does not starts ``python -m kraftcheck.checker.compile`` to build them, which leaves
every kernel it finished in numba's cache even if it is stopped half way.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable, Optional

import numba
import numpy as np

from kraftcheck.checker import detached
from kraftcheck.checker.disk_full import disk_full_advice, disk_full_reason, is_disk_full
from kraftcheck.checker.codegen import KernelCacheUnusable, import_kernel_module, imported_modules, kernel_cache_problem
from kraftcheck.checker.errors import KraftcheckBug, KraftcheckError, SpecError
from kraftcheck.checker.layout import ELEMENT, SUCCESSOR_ELEMENT
from kraftcheck.checker.files import atomic_write
from kraftcheck.checker.imported_source import imported_digest, imported_from
from kraftcheck.checker.kernels import successor_rows
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.kernels.table_expand import TableExpansion
from kraftcheck.checker.kernels.threads import per_thread_rows
from kraftcheck.checker.kernels.visited import EMPTY, VisitedSet, rehash

# Scratch rows per thread are spaced so threads never share a cache line (see Kernels).
SCRATCH_BYTES = 256
# Each compile process holds numba and LLVM (0.3-0.5 GB for the Kafka model's kernels).
MAX_COMPILE_PROCESSES = 4


@dataclass(frozen=True)
class KernelShapes:
    """Everything that decides the argument types of a model's kernels."""

    module_name: str
    module_path: str
    dtype_descr: list            # numpy's description of the structured state
    size: int                    # elements in a structured state
    nwords: int                  # uint64 words in a packed state
    nlabels: int
    nconsts: int
    kernel_names: list           # what each of EXPANDERS computes, for progress lines
    # {path: SHA-256} of every source file the kernels compile in, as the run imported it: a
    # process that compiles them checks its own imports against it (``refuse_other_sources``)
    sources: dict = field(default_factory=dict)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype([tuple(x[:2]) + ((tuple(x[2]),) if len(x) > 2 else ()) for x in self.dtype_descr])

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "KernelShapes":
        return cls(**json.loads(text))


def marker_path(module_path: str | Path) -> Path:
    return Path(str(module_path) + ".compiled")


def typed_marker_path(shapes: KernelShapes, key: str) -> Path:
    """The file, in the kernel cache of ``shapes``' module, that says numba's type inference
    accepted the call of a spec function ``key`` names (``typing_check.typing_keys``), so that a
    later run need not type it again. It is no kernel's marker: a damaged kernel module leaves it."""
    return Path(shapes.module_path).parent / f"kc_types_{key[:32]}.typed"


def is_compiled(shapes: KernelShapes) -> bool:
    """Every kernel of this module is in numba's cache: a finished compile said so, and numba's
    index of each is still there (``NUMBA_CACHE_DIR`` may have been changed or emptied since) and
    current: its stamp is the one numba would load it with (``numba_cache``: a constant the
    spec's functions compile in took another value, a helper's file changed). A stale kernel is
    compiled as a missing one is, in the background, not in the foreground as the run loads it."""
    if not marker_path(shapes.module_path).exists():
        return False
    module = import_kernel_module(shapes.module_name, Path(shapes.module_path))
    try:
        kernels = [module.pack_rows, module.unpack_rows, module.unpack_range, module.check]
        files = [k._cache._cache_file for k in kernels]
        for expand in module.EXPANDERS:  # a large layout's expanders compile two (kernels.table_expand)
            files += expand.cache_files() if hasattr(expand, "cache_files") else [expand._cache._cache_file]
        return all(os.path.exists(f._index_path) and f._load_index() for f in files)
    except AttributeError:  # numba keeps its cache differently: trust the marker
        return True


def _mark_compiled(module_path: str | Path) -> None:
    atomic_write(marker_path(module_path), f"numba {numba.__version__}\n")


def warm_up_engine_kernels(nwords: int, distinct_path: bool = True) -> None:
    """Compile (or load from numba's cache) the engine's kernels that no spec enters, for states
    of ``nwords`` words: those of every tier (``warm_up_row_passes``) and, with
    ``distinct_path``, those only the compiled kernels use (``warm_up_distinct_path``)."""
    warm_up_row_passes(nwords)
    if distinct_path:
        warm_up_distinct_path(nwords)


def warm_up_row_passes(nwords: int) -> None:
    """The visited set and the passes over successor rows, which the interpreted tier uses too."""
    one = np.zeros((1, nwords), np.uint64)
    visited = VisitedSet(nwords, 1, 4)
    visited.insert(one, fingerprints(one), np.zeros(1, np.int64))  # insert_shard too: insert() calls it
    # growing a shard: every run past a few thousand states does
    rehash(visited.shards[0], np.full((8, nwords), EMPTY, np.uint64), visited.rows_are_fingerprints)
    successor_rows.warm_up()


def warm_up_distinct_path(nwords: int) -> None:
    """The distinct-successor path (Kernels.distinct_successors, chunks.ChunkExpansion.distinct_chunk), on no
    rows, with the argument types the engine hands them: only compiled kernels take this path."""
    table = np.zeros((2, nwords + 1), np.uint64)
    words, hashes, rows = np.zeros((1, nwords), np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.int64)
    successor_rows.gather_part(table, 0, 1, words, hashes, rows, 0)
    successor_rows.reseat(table, 0, 1, 1, words, hashes, rows, 0, 0)
    offsets = per_thread_rows(1, 3, np.int64)
    new_mark, order = np.zeros(1, np.uint8), np.zeros(1, np.int64)
    successor_rows.bucket_dense_part(hashes, 0, 0, 1, new_mark, order, offsets[0])
    successor_rows.collect_dense_part(rows, 0, 0, 0, 1, new_mark, 1, np.zeros(1, np.int64), 0,
                                      per_thread_rows(1, 1, np.int64)[0], rows.copy(), rows.copy(), rows.copy(),
                                      np.zeros(1, np.uint32), np.zeros(1, np.uint16), rows.copy())
    VisitedSet(nwords, 1, 4).insert_bucketed(words[:0], hashes[:0], order, offsets, new_mark)


def compile_kernels(module: ModuleType, shapes: KernelShapes,
                    on_kernel: Callable[[int, int, str], None] = lambda i, n, name: None,
                    claim: Callable[[int], bool] = lambda i: True) -> None:
    """Call every kernel of ``module`` once on empty arrays of the engine's argument types, which
    compiles it (or loads it from numba's cache); ``on_kernel(i, n, what)`` before each. With
    ``claim``, only the kernels ``i`` it grants (processes compiling one module together)."""
    # built as the engine builds them (C-contiguous rows: the chunk's states of int32, successors and
    # the states the spec's functions read of int64; scratch a slice of a larger array), so the types match
    scratch = np.zeros((4, shapes.size), SUCCESSOR_ELEMENT)[0:2]
    state_scratch = np.zeros((4, shapes.size), SUCCESSOR_ELEMENT)[0:2]  # the invariants read int64 states
    flat = np.zeros((1, shapes.size), ELEMENT)
    words = np.zeros((1, shapes.nwords), np.uint64)
    hashes = np.zeros(1, np.uint64)
    labels = np.zeros(1, np.uint16)
    props = np.zeros(1, np.uint64)
    err = np.full(2, -1, np.int64)
    cv = np.zeros(max(1, shapes.nconsts), np.int32)
    rows = np.zeros((1, shapes.size), ELEMENT)
    successor_rows = np.zeros((1, shapes.size), SUCCESSOR_ELEMENT)
    # the longest first, so that processes compiling together end at about the same time
    steps: list[tuple[str, Callable[[], object]]] = [
        # the engine's own kernels (compiled once per installation) in two steps, so that two
        # processes share them
        ("engine kernels: distinct path", lambda: warm_up_distinct_path(shapes.nwords)),
        ("invariants", lambda: module.check(words, 0, 0, 0, state_scratch, hashes, cv, module.INVARIANT_SELECT)),
        ("engine kernels: row passes", lambda: warm_up_row_passes(shapes.nwords)),
        ("pack", lambda: module.pack_rows(successor_rows[:0], words[:0], cv)),
        ("unpack", lambda: module.unpack_rows(words[:0], rows[:0], cv)),
        ("unpack_range", lambda: module.unpack_range(words, 0, 0, 0, flat, cv)),
    ]
    table = np.zeros((1, shapes.nwords + 1), np.uint64)
    # a kernel run on no states still adds its count of transitions at its place in the tally
    tally = np.zeros((1, 1 + max([args[2] for args in module.EXPANDER_ARGS], default=0)), np.int64)[0]
    for k, (expand, args) in enumerate(zip(module.EXPANDERS, module.EXPANDER_ARGS)):
        call = (lambda expand=expand, args=args: expand(
            flat, 0, 0, scratch, words, hashes, labels, props, err, cv, False, words, 0, table, 0, 0, tally, *args))
        if hasattr(expand, "compile_fire"):
            # a large layout's actions share one expand kernel (kernels.table_expand): the step of
            # each compiles its fire kernel, one step more (first: the longest) the shared kernel
            if k == 0:
                expansion = TableExpansion(module.EXPANDERS, module.EXPANDER_ARGS)
                steps.insert(0, ("expand kernel of large layouts", lambda: expansion.compile_kernel(
                    flat, 0, 0, words, hashes, labels, props, err, cv, False, words, 0, table, 0, 0, tally)))
            call = expand.compile_fire
        steps.append((shapes.kernel_names[k], call))
    for i, (what, call) in enumerate(steps):
        if not claim(i):
            continue
        on_kernel(i, len(steps), what)
        call()


def compile_processes() -> int:
    """How many processes compile one model's kernels together: ``KRAFTCHECK_COMPILE_PROCESSES``,
    else one per core this process may run on, at most ``MAX_COMPILE_PROCESSES``. The variable is
    taken up to the cores or ``MAX_COMPILE_PROCESSES``, whichever is more: each helper is an
    interpreter with numba loaded (hundreds of MB), and a count such as 99999 started that many."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    text = os.environ.get("KRAFTCHECK_COMPILE_PROCESSES", "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise SpecError(f"KRAFTCHECK_COMPILE_PROCESSES must be a whole number of at least 1, not {text!r}")
        return min(int(text), max(cores, MAX_COMPILE_PROCESSES))
    return max(1, min(cores, MAX_COMPILE_PROCESSES))


class _Claims:
    """Kernels handed out among processes compiling one module: whoever first creates a kernel's
    file in a shared directory compiles it (so a process that is quicker takes more)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def __call__(self, i: int) -> bool:
        try:
            os.close(os.open(os.path.join(self.directory, str(i)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False
        except FileNotFoundError:  # the folder went (a cache cleared under the compile): compile it, at worst twice
            return True


def compile_in_process(shapes: KernelShapes,
                       on_kernel: Callable[[int, int, str], None] = lambda i, n, name: None,
                       processes: Optional[int] = None) -> ModuleType:
    """Compile a kernel module and import it here; mark it compiled.

    Its kernels are compiled by ``processes`` processes at once (``compile_processes()`` if not
    given): this one and helpers (``python -m kraftcheck.checker.compile``) that take kernels from
    a shared list; numba's cache is the only thing they share, and once the helpers are done this
    process loads what they compiled from it. Processes compiling the same module (parallel checks
    of one model's switches share it) take turns: the first compiles, the others then find every
    kernel in numba's cache.
    """
    problem = kernel_cache_problem(Path(shapes.module_path).parent)
    if problem is not None:
        return _load_read_only(shapes, problem, on_kernel)
    module = import_kernel_module(shapes.module_name, Path(shapes.module_path))
    refuse_other_sources(shapes)
    processes = compile_processes() if processes is None else processes
    reported: set[int] = set()

    def once(i: int, n: int, what: str) -> None:  # the final pass reports only the helpers' kernels
        if i not in reported:
            reported.add(i)
            on_kernel(i, n, what)

    with _compile_lock(shapes.module_path):
        # left by a compile of this module killed before its finally (SIGKILL, the OOM killer): the lock
        # is ours, so no process compiles from it any more
        shutil.rmtree(claims_path(shapes.module_path), ignore_errors=True)
        if processes > 1 and not marker_path(shapes.module_path).exists():
            _compile_together(module, shapes, once, processes)
        compile_kernels(module, shapes, once)  # what helpers compiled loads from the cache
        if not marker_path(shapes.module_path).exists():
            _mark_compiled(shapes.module_path)
    return module


def refuse_other_sources(shapes: KernelShapes) -> None:
    """Raise ``SourcesChanged`` if a source file the kernels compile in was imported here
    otherwise than the run that asked for them imported it: saved in between (a background
    compile, or its helpers, import the spec again), the kernels would be the new file's, and the
    run would take them halfway through its exploration of the old. A file no module was
    imported from here is compiled into nothing (one of the spec's package that nothing imports)."""
    changed = [path for path, digest in shapes.sources.items()
               if imported_from(path) and imported_digest(path).hex() != digest]
    if changed:
        raise SourcesChanged(changed)


class SourcesChanged(SpecError):
    """A source file the run's kernels compile in changed after the run imported it."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        more = f" (and {len(paths) - 1} more)" if len(paths) > 1 else ""
        super().__init__(f"{paths[0]}{more} changed after the run imported it: the run explores the code it "
                         "imported, and kernels compiled from the file as it is now would not be that code (no "
                         "verdict); run the check again once the file is saved as it should be")


def _load_read_only(shapes: KernelShapes, problem: str,
                    on_kernel: Callable[[int, int, str], None]) -> ModuleType:
    """A kernel cache that cannot be written: its kernels are loaded from numba's cache if every
    one is there, without a lock or a marker (nothing is written); else the run is refused."""
    directory = Path(shapes.module_path).parent
    if not is_compiled(shapes):
        raise KernelCacheUnusable(directory, f"{problem}; the kernels of this run are not compiled in it")
    module = import_kernel_module(shapes.module_name, Path(shapes.module_path))
    try:
        compile_kernels(module, shapes, on_kernel)
    except OSError as e:  # numba found a kernel compiled for another machine or numba, and tried to save its own
        raise KernelCacheUnusable(directory, f"{problem}; numba could not use a kernel compiled in it ({e})") from None
    return module


def _compile_together(module: ModuleType, shapes: KernelShapes, on_kernel: Callable[[int, int, str], None],
                      processes: int) -> None:
    """Compile ``module``'s kernels here and in ``processes - 1`` helper processes, each taking the
    next kernel nobody has taken; return once every helper has ended. A helper that fails only
    leaves its kernels to the caller's final pass. Called under the module's compile lock."""
    claims = str(claims_path(shapes.module_path))
    # normally made anew (compile_in_process removed any left); if that removal failed, the kernels a
    # dead process claimed are compiled by the caller's final pass
    os.makedirs(claims, exist_ok=True)
    helpers = []
    try:
        job = dict(_job(shapes), claims=claims)
        for _ in range(processes - 1):
            helper = subprocess.Popen(worker_command(), stdin=subprocess.PIPE,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
            helper.stdin.write(json.dumps(job))
            helper.stdin.close()
            helpers.append(helper)
        compile_kernels(module, shapes, on_kernel, claim=_Claims(claims))
        for helper in helpers:
            helper.wait()
    finally:
        for helper in helpers:
            if helper.poll() is None:
                helper.kill()
                helper.wait()
        shutil.rmtree(claims, ignore_errors=True)


def claims_path(module_path: str | Path) -> Path:
    """Where the processes compiling a kernel module claim its kernels (``_Claims``): beside the
    module in the kernel cache, not in $TMPDIR, so that one left by a killed process (which runs no
    finally) is found and removed by the next compile of the module, or by ``kraftcheck cache clear``."""
    return Path(f"{module_path}.claims")


def _remove_claims_if_unlocked(module_path: str | Path) -> None:
    """Remove the claims folder of a module whose compile was just killed, unless another process
    has taken the module's compile lock meanwhile (its claims are then in that folder); a lock not
    taken leaves the folder to the next compile of the module."""
    with _compile_lock(module_path, wait=False) as held:
        if held:
            shutil.rmtree(claims_path(module_path), ignore_errors=True)


def worker_command() -> list[str]:
    """The command of a compile process: ``python -m kraftcheck.checker.compile``, except that
    ``-m`` would put the working directory first on ``sys.path``, where a folder named
    ``kraftcheck`` would stand in for the package (the worker then takes the run's own path from
    its job)."""
    return [sys.executable, "-c", "import sys; del sys.path[0]; from kraftcheck.checker.compile import _worker; "
            "sys.exit(_worker())"]


def _job(shapes: KernelShapes) -> dict:
    """What a compile process needs to import the same modules by the same names as this one
    (specs loaded from a file included)."""
    return {"shapes": json.loads(shapes.to_json()), "sys_path": sys.path,
            "modules": {name: getattr(sys.modules.get(name), "__file__", None)
                        for name in imported_modules(Path(shapes.module_path))}}


@contextlib.contextmanager
def _compile_lock(module_path: str | Path, wait: bool = True):
    """The module's compile lock (``<module>.lock``), held for the block; yields whether it is
    held. ``wait``: until it is free (not POSIX: the block runs without it, as concurrent compiles
    only duplicate work); else only if it is free now and can be taken (False otherwise)."""
    try:
        import fcntl
    except ImportError:
        yield wait
        return
    try:
        lock = open(str(module_path) + ".lock", "a")
    except OSError:
        if wait:
            raise
        yield False
        return
    with lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if wait:
                raise
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


# A background compile that the run outlives goes on alone for at most this long from its start
# (``KRAFTCHECK_COMPILE_TIME_LIMIT``, seconds), so that the next run finds the kernels compiled.
COMPILE_TIME_LIMIT_S = 1200.0


def keep_compiling() -> bool:
    """Whether a run that ends before its background compile leaves it to finish
    (``KRAFTCHECK_KEEP_COMPILING``, default 1; 0 stops it with the run, as tests do)."""
    return os.environ.get("KRAFTCHECK_KEEP_COMPILING", "1").strip() not in ("0", "false", "no")


def compile_time_limit() -> float:
    text = os.environ.get("KRAFTCHECK_COMPILE_TIME_LIMIT", "").strip()
    try:
        limit = float(text) if text else COMPILE_TIME_LIMIT_S
    except ValueError:
        limit = math.nan
    if not limit > 0:  # nan, 0 and below too: a background compile that stops before it starts
        raise SpecError(f"KRAFTCHECK_COMPILE_TIME_LIMIT must be a number of seconds greater than 0, not {text!r}")
    return limit


def give_way(pid: int) -> bool:
    """Process ``pid``, a background compile, to the lowest priority, and the helpers it starts
    with it: the run that started it takes the cores it wants first (its first tier; on an
    installation's first run, the interpreter's and the engine's own compile), and the compile
    has the rest. Set from here, as soon as the process exists, so that even its imports give
    way. The compile has a session of its own, which is a scheduling group of its own where
    Linux groups by session (autogroup): its processes' nice would only rank them within that
    group, so the group's nice is set, which ``hurry`` may set back to 0 (a process's own nice
    cannot be lowered without privileges). Without autogroup, the process's nice is set, for
    good. Returns whether the group's was."""
    if _set_group_nice(pid, 19):
        return True
    _set_process_nice(pid, 19)
    return False


_group_nice_wanted: dict[int, int] = {}  # pid -> the nice last asked for its group: what a retry writes


def _set_group_nice(pid: int, nice: int) -> bool:
    """Write ``nice`` to ``pid``'s autogroup; False where there is none. Linux refuses a second
    such write within 100 ms machine-wide (EAGAIN, as when runs start side by side): then a
    thread tries again, a few times, 0.11 s apart, writing the nice last asked for (a ``hurry``
    that came meanwhile is not undone by ``give_way``'s retry); if every try is refused, a
    positive nice goes to the process itself instead (``give_way``'s fallback)."""
    _group_nice_wanted[pid] = nice
    return _write_group_nice(pid, tries=5)


def _write_group_nice(pid: int, tries: int) -> bool:
    nice = _group_nice_wanted[pid]
    try:
        with open(f"/proc/{pid}/autogroup", "w") as group:
            group.write(str(nice))
        return True
    except OSError as e:
        if e.errno != errno.EAGAIN:
            return False  # not Linux, no autogroup, or the process has ended
    if tries > 1:
        def again() -> None:
            time.sleep(0.11)
            _write_group_nice(pid, tries - 1)
        threading.Thread(target=again, daemon=True, name="kraftcheck-nice").start()
    elif nice > 0:
        _set_process_nice(pid, nice)
    return True


def _set_process_nice(pid: int, nice: int) -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except (AttributeError, OSError):  # not POSIX, or it has ended already
        pass


class BackgroundCompile:
    """A ``python -m kraftcheck.checker.compile`` process building one model's kernels: one
    module, or several forms of them one after the other (``forms``: the one quickest to compile
    first, so that a run can take it while the next compiles).

    It runs in a session of its own, so Ctrl-C on the run does not reach it: a run that ends
    first leaves it to finish (``stop``), bounded by ``compile_time_limit()``, and the next run of
    the model finds its kernels compiled."""

    def __init__(self, forms: KernelShapes | list[KernelShapes]) -> None:
        self.forms = [forms] if isinstance(forms, KernelShapes) else list(forms)
        self.shapes = self.forms[-1]  # the form the compile ends with
        self.cache = Path(self.shapes.module_path).parent
        problem = kernel_cache_problem(self.cache)
        if problem is not None:  # before any work: the compile could keep nothing
            raise KernelCacheUnusable(self.cache, f"{problem}; the kernels of this run are not compiled in it")
        earlier = detached.take_failure(self.cache, self.shapes.module_name)
        if earlier is not None:  # the run that left it had ended: nobody has said it yet
            print(f"kernel cache: {earlier.said()}; compiling them again", file=sys.stderr, flush=True)
        self.started = time.perf_counter()
        self.finished_s: Optional[float] = None
        self.ready: dict[str, float] = {}  # module name -> seconds from the start until compiled
        self.status = "starting"
        self._stderr = tempfile.TemporaryFile()
        env = dict(os.environ)
        jobs = [_job(shapes) for shapes in self.forms]
        job = dict(jobs[0], then=[j["shapes"] for j in jobs[1:]], time_limit=compile_time_limit())
        job["modules"] = {name: file for j in jobs for name, file in j["modules"].items()}
        # the worker's scratch (whatever it writes to $TMPDIR goes in it), removed by the worker
        # when it ends, or here when the run stops it (its claims folder is in the kernel cache)
        self.scratch = tempfile.mkdtemp(prefix=detached.SCRATCH_PREFIX)
        job["scratch"] = self.scratch
        job["detached"] = str(self.cache)  # where it removes its entry if it is left to finish (``detached``)
        self.left_running = False
        self._grouped = False  # whether its scheduling group was niced (give_way)
        try:
            self.process = subprocess.Popen(worker_command(),
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                            env=env, text=True, start_new_session=True)
            self._grouped = give_way(self.process.pid)
            self.process.stdin.write(json.dumps(job))
            self.process.stdin.close()
        except BaseException:
            if getattr(self, "process", None) is not None and self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            shutil.rmtree(self.scratch, ignore_errors=True)
            self._stderr.close()
            raise
        self._reader = threading.Thread(target=self._read, daemon=True, name="kraftcheck-compile")
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            line = line.strip()
            if line.startswith("compiling "):
                self.status = line[len("compiling "):]
            elif line.startswith("compiled "):
                self.ready[line[len("compiled "):]] = self.elapsed
        self.process.wait()
        if self.process.returncode == 0:
            self.finished_s = time.perf_counter() - self.started

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def done(self) -> bool:
        """Finished successfully: every kernel of every form is in numba's cache."""
        return self.finished_s is not None

    def ready_form(self) -> Optional[KernelShapes]:
        """The last of ``forms`` whose kernels are all compiled so far, if any."""
        ready = [shapes for shapes in self.forms if shapes.module_name in self.ready]
        return ready[-1] if ready else (self.shapes if self.done() else None)

    def failed(self) -> bool:
        return self.process.poll() not in (None, 0) and not self._reader.is_alive()

    def error_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace").strip()

    def hurry(self) -> None:
        """The run waits for this compile: its scheduling group back to the default priority
        (where it has one; see ``give_way``), so that other work on the machine does not hold it up."""
        if self._grouped and self.process.poll() is None:
            _set_group_nice(self.process.pid, 0)

    def stop(self, keep: Optional[bool] = None) -> None:
        """The run is over: leave the worker to finish alone if it still runs and ``keep``
        (``keep_compiling()`` if not given; ``left_running`` says so), else end it (what it
        compiled so far stays cached)."""
        keep = keep_compiling() if keep is None else keep
        if keep and self.process.poll() is None:
            # at most one detached compile per kernel cache, one per kernel key (``detached.leave``)
            spec = self.shapes.module_name[len("kc_"):].rsplit("_model_", 1)[0]
            going = detached.leave(self.cache, self.process.pid, self.shapes.module_name, f"the kernels of spec {spec}",
                                   self.scratch)
            self.left_running = going is not None  # this compile, or one of the same kernels left before
            if going == self.process.pid:
                self._stderr.close()
                return
        if self.process.poll() is None:
            # the worker and its helpers at once (its session is their process group): a SIGTERM
            # waits for numba to come back from LLVM, which took seconds at times; numba's cache
            # is written file by file, each renamed into place, so nothing half-written stays
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
            self.process.wait()
        self._reader.join(timeout=5)
        self._stderr.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
        for shapes in self.forms:
            _remove_claims_if_unlocked(shapes.module_path)


def _worker() -> int:
    """The background process, or a helper of a compile (its job names a claims directory): read
    a job on stdin, compile, report each kernel on stdout."""
    # stopped by a SIGTERM (someone's, not the run's: BackgroundCompile.stop kills the process
    # group): exit through the finally clauses, which end the helpers and remove the claims folder
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    job = json.loads(sys.stdin.read())
    failure: Optional[BaseException] = None
    if "scratch" in job:  # temporary files go there, for the run to remove if it stops this compile
        tempfile.tempdir = job["scratch"]
    try:
        sys.path[:] = job["sys_path"]
        for name, file in job["modules"].items():
            if name in sys.modules:
                continue
            if importlib.util.find_spec(name) is None and file:  # a spec loaded from a file by path
                spec = importlib.util.spec_from_file_location(name, file)
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
        return _compile_job(job)
    except BaseException as e:
        failure = e
        raise
    finally:
        if "scratch" in job:
            shutil.rmtree(job["scratch"], ignore_errors=True)
        if "detached" in job:
            left = detached.forget(Path(job["detached"]), os.getpid())
            # no run is there to say it: the next one will (not a refusal of a spec saved since: its
            # kernels are those of a version no longer on disk, which no run will ask for)
            if left is not None and failure is not None and not isinstance(failure, SourcesChanged):
                detached.record_failure(Path(job["detached"]), left, _why_failed(failure, job, left.key))


def _why_failed(e: BaseException, job: dict, key: str) -> str:
    """A background compile's failure as the line ``kraftcheck cache status`` and the next run
    give: what stopped it, and what to do where that is known."""
    if isinstance(e, SystemExit):
        if e.code == 3:
            return (f"stopped at its time limit of {job.get('time_limit', COMPILE_TIME_LIMIT_S):g} s "
                    "(KRAFTCHECK_COMPILE_TIME_LIMIT); what it compiled is kept")
        if isinstance(e.code, int) and e.code - 128 in set(signal.Signals):
            return f"ended by signal {signal.Signals(e.code - 128).name}"
        return f"exited with {e.code!r}"
    if is_disk_full(e):
        reason = disk_full_reason(e)
        return f"{reason}: {disk_full_advice(None, reason)}"
    if isinstance(e, numba.core.errors.NumbaError):
        return str(compile_error(key[len("kc_"):].rsplit("_model_", 1)[0], e))
    return f"{type(e).__name__}: {e}"


def _compile_job(job: dict) -> int:
    """The worker's job, its modules imported: a helper's share of one module's kernels, or
    every form of the background compile, one after the other."""
    forms = [KernelShapes(**job["shapes"])] + [KernelShapes(**shapes) for shapes in job.get("then", [])]
    shapes = forms[0]
    deadline = time.monotonic() + job.get("time_limit", COMPILE_TIME_LIMIT_S)
    told = [True]

    def say(i: int, n: int, what: str) -> None:
        if time.monotonic() > deadline:
            raise SystemExit(3)  # left alone too long: what it compiled stays cached
        if told[0]:
            try:
                print(f"compiling {i + 1}/{n}: {what}", flush=True)
            except OSError:  # the run that started it has ended: compile on, silently
                told[0] = False

    if "claims" in job:
        parent = os.getppid()
        claims = _Claims(job["claims"])
        module = import_kernel_module(shapes.module_name, Path(shapes.module_path))
        refuse_other_sources(shapes)
        # a helper whose compile was stopped stops too, rather than compiling the rest alone
        compile_kernels(module, shapes, claim=lambda i: os.getppid() == parent and claims(i))
        return 0
    for shapes in forms:
        compile_in_process(shapes, say)
        if told[0]:
            try:
                print(f"compiled {shapes.module_name}", flush=True)
            except OSError:
                told[0] = False
    return 0


# A module kraftcheck generates (codegen's module names: "kc_", what it is, a 20-digit digest).
GENERATED_MODULE = re.compile(r"kc_\w+_[0-9a-f]{20}\.py")
# kraftcheck's own code that kernels compile in: its checker package (shipped specs live elsewhere)
CHECKER_DIR = Path(__file__).resolve().parent
# code numba names when a call meets one of its own or numpy's implementations: no one's fault in itself
LIBRARY_DIRS = tuple(Path(m.__file__).resolve().parent for m in (numba, np))


# numba's refusal to bind an inlined call's arguments ("Cannot bind 'args=[Var(a, FILE:LINE)]' to
# signature ...") names no File line, only where the call's arguments come from: a line of the
# calling function, its file's name without its folder
_ARGUMENT_PLACE = re.compile(r"Var\([^,()]+, ([^\s,():]+\.py):(\d+)\)")


def compile_error(model_name: str, error: BaseException) -> KraftcheckError:
    """A compile failure as one line, without numba's pipeline and source excerpts: numba's reason
    and the first line of the spec it names (a SpecError). When every line numba names is
    kraftcheck's own (a generated kernel module, a module of its checker package), the spec is
    not at fault: that line, numba's reason and a request to report it (a KraftcheckBug).

    A call numba inlines (every action, in its kernel) that it cannot bind names no File line,
    only where its arguments come from: in a kernel module kraftcheck generated, the call is
    kraftcheck's own, with the arguments the model's build has checked the spec's function takes
    (``model._refuse_arity``), so the fault is kraftcheck's; elsewhere, a file's name without its
    folder does not say whose it is. When numba names no place at all, whose code it is
    cannot be told, and the error says so rather than send the user to a line."""
    lines = [line.strip() for line in str(error).splitlines()]
    reason: list[str] = []
    for line in lines:
        if reason and (not line or line.startswith("File ")):
            if not reason[-1].endswith(":"):
                break
            if line:
                break
            continue
        if line and not line.startswith(("Failed in ", "During: ")):
            reason.append(line)
    places = [(m.group(1), m.group(2), _whose_code(m.group(1)))
              for m in (re.match(r'File "(.+)", line (\d+)', line) for line in lines) if m]
    call = None  # an inlined call numba could not bind: where its arguments are (a file's name, a line)
    if not places:
        call = next(((m.group(1), m.group(2)) for m in _ARGUMENT_PLACE.finditer(str(error))), None)
        if call is not None and GENERATED_MODULE.fullmatch(call[0]):
            places = [(_generated_module_path(call[0]), call[1], "generated")]
    text = " ".join(" ".join(reason).split())[:400] or str(error).strip()[:400]
    spec_places = [p for p in places if p[2] == "spec"]
    own_places = [p for p in places if p[2] in ("generated", "kraftcheck")]
    if own_places and not spec_places:
        file, line, whose = own_places[0]
        what = "a kernel module kraftcheck generated" if whose == "generated" else "a module of kraftcheck's"
        return KraftcheckBug(f"kraftcheck's own kernel code failed to compile at {os.path.abspath(file)}:{line} "
                             f"({what}), compiling the kernels of spec {model_name}: {text}; this is a bug of "
                             "kraftcheck's, not of the spec (no verdict): please report it with the command that ran")
    named = spec_places or [p for p in places if p[2] != "generated"]
    keep_to = ("a spec's functions keep to what both tiers run, interpreted and compiled (integers, fields, min/max, "
               "loops, @njit helpers: docs/writing-a-spec.md, 'Action functions')")
    if not named:
        named_by = f"numba names only where the arguments of a call it could not bind come from, {call[0]}:" \
                   f"{call[1]} (no folder)" if call else "numba names no line"
        return SpecError(f"the kernels of spec {model_name} failed to compile: {text}; {named_by}, so whose code it "
                         f"is cannot be told (no verdict): {keep_to}; if the spec's do, it is kraftcheck's bug: please "
                         "report it with the command that ran")
    return SpecError(f"the kernels of spec {model_name} failed to compile at {named[0][0]}:{named[0][1]}: {text}; "
                     f"{keep_to}: fix that line")


def _generated_module_path(name: str) -> str:
    """Where the generated kernel module ``name`` (a file's name, no folder) is: the kernel cache."""
    from kraftcheck.checker.codegen import cache_dir
    return str(cache_dir() / name)


def _whose_code(file: str) -> str:
    """Whose a file numba names is (numba writes it relative to the working directory): "generated"
    (a kernel module kraftcheck generated), "kraftcheck" (its checker package), "library" (numba's or
    numpy's) or "spec" (anything else: a spec's module, its helpers, kraftcheck's shipped specs)."""
    if GENERATED_MODULE.fullmatch(Path(file).name):
        return "generated"
    path = Path(os.path.abspath(file)).resolve()
    if path.is_relative_to(CHECKER_DIR):
        return "kraftcheck"
    if any(path.is_relative_to(d) for d in LIBRARY_DIRS):
        return "library"
    return "spec"


if __name__ == "__main__":
    sys.exit(_worker())
