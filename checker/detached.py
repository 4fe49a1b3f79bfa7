"""Background compiles that outlive their run ("detached"): at most one per kernel cache.

A run that ends before its background compile leaves it to finish, so that the next run finds
the kernels compiled (``compile.BackgroundCompile.stop``). Many short runs of different models
would leave one such process each (100-500 MB apiece), most of them waiting for a compile lock.
So each kernel cache keeps a register of its detached compiles, one file per process in
``<cache>/detached/``, and ``leave`` enforces, under a lock on the register:

* one process per kernel key: a compile of a key already detached is stopped instead (the one
  that started earlier is further on);
* at most one detached compile: the newest request wins, older ones of other keys are stopped.

A stopped compile loses only the kernel it was compiling: every one it finished is in numba's
cache, and the next run of its model compiles the rest. ``kraftcheck cache status`` lists the
register (``running``), ``kraftcheck cache clear`` stops them (``stop_all``).

A detached compile that fails has no run left to tell: it leaves why in the register
(``record_failure``), which ``kraftcheck cache status`` lists (``failures``) and the next
background compile of the same kernels takes and says (``take_failure``): each run of a model
whose compile fails after its run (a full disk, the compile's time limit) would otherwise say the
compile goes on in the background while none ever finds the kernels compiled.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Optional

REGISTER = "detached"
FAILED = ".failed"  # a failed compile's record in the register: <kernel module>.failed
SCRATCH_PREFIX = "kraftcheck-compile-"  # a background compile's scratch folder (compile.BackgroundCompile)


@dataclass(frozen=True)
class Detached:
    """One detached compile: its process (pid and start time, so a reused pid is never taken
    for it), the kernel module it ends with (``key``), what it compiles, since when."""

    pid: int
    started: float      # the process's start time, as psutil gives it
    key: str
    what: str
    since: float        # when its run left it (time.time())
    scratch: Optional[str] = None  # its scratch folder, which it removes as it ends; a stopped one cannot


@dataclass(frozen=True)
class Failure:
    """A detached compile that failed: the kernel module it was to end with, what it compiled,
    when it failed, and why (one line)."""

    key: str
    what: str
    when: float
    why: str

    def said(self) -> str:
        """The failure as one clause: what failed, when, and why."""
        at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.when))
        model = self.key.rsplit("_", 1)[-1][:8]  # as `kraftcheck cache status` names the model
        return f"the background compile of {self.what} ({model}) that a run left failed at {at}: {self.why}"


def register_dir(cache: Path) -> Path:
    return Path(cache) / REGISTER


@contextlib.contextmanager
def _locked(cache: Path) -> Iterator[Path]:
    directory = register_dir(cache)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: two runs ending at once may each stop the other's compile
        yield directory
        return
    with open(directory / ".lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield directory


def process_start(pid: int) -> Optional[float]:
    """When process ``pid`` started (None if there is none, or it has ended)."""
    import psutil
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process.create_time()
    except (psutil.Error, OSError):
        return None


def _entries(directory: Path) -> list[tuple[Path, Detached]]:
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            found.append((path, Detached(**json.loads(path.read_text()))))
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)  # unreadable: it names no process to stop
    return found


def _alive(entry: Detached) -> bool:
    return process_start(entry.pid) == entry.started


def _stop(entry: Detached) -> None:
    """End a detached compile and the helpers it started (its session is their process group),
    and wait until it is gone (unless it is a child of this process: its ``Popen`` reaps it)."""
    if not _alive(entry):
        return
    try:
        os.killpg(entry.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(entry.pid, signal.SIGKILL)
    # gone before this returns (a killed process on a busy machine lingers for a while)
    import psutil
    with contextlib.suppress(psutil.Error):
        process = psutil.Process(entry.pid)
        if process.ppid() != os.getpid():  # a child of this process is reaped by its Popen, not here
            process.wait(timeout=STOP_WAIT_S)
    _remove_scratch(entry)


def _remove_scratch(entry: Detached) -> None:
    """The scratch folder of a compile that has ended: one that ended by a SIGKILL (ours, the OOM
    killer's, kill -9) never ran the finally that removes it."""
    if entry.scratch and Path(entry.scratch).name.startswith(SCRATCH_PREFIX):  # a register names only those
        shutil.rmtree(entry.scratch, ignore_errors=True)


STOP_WAIT_S = 5.0  # at most this long for a stopped compile to be gone


def leave(cache: Path, pid: int, key: str, what: str, scratch: Optional[str] = None) -> Optional[int]:
    """Process ``pid`` (a background compile ending with kernel module ``key``) is to go on
    after its run: register it unless a detached compile of the same key runs already, in which
    case ``pid`` is stopped instead; stop every other detached compile of ``cache``. Returns the
    pid of the compile of ``key`` that goes on (``pid``, or the one detached before), None if
    none does: ``pid`` has ended, or the register cannot be written (a full disk at the end of a
    run), when the caller stops ``pid`` rather than leave a compile no one can see or stop (and
    the run's verdict is not lost to an OSError on its way out)."""
    started = process_start(pid)
    if started is None:
        return None
    try:
        return _register(cache, pid, started, key, what, scratch)
    except OSError:
        return None


def _register(cache: Path, pid: int, started: float, key: str, what: str, scratch: Optional[str]) -> int:
    """``leave``'s work under the register's lock."""
    with _locked(cache) as directory:
        entries = [(path, e) for path, e in _entries(directory)]
        alive = []
        for path, entry in entries:
            if _alive(entry) and entry.pid != pid:
                alive.append((path, entry))
            else:
                if not _alive(entry):
                    _remove_scratch(entry)
                path.unlink(missing_ok=True)
        same = [entry for _, entry in alive if entry.key == key]
        if same:
            _stop(Detached(pid, started, key, what, time.time()))
            return same[0].pid
        for path, entry in alive:
            _stop(entry)
            path.unlink(missing_ok=True)
        own = Detached(pid, started, key, what, time.time(), scratch)
        tmp = directory / f".{pid}.json.tmp"
        tmp.write_text(json.dumps(asdict(own)))
        os.replace(tmp, directory / f"{pid}.json")
    return pid


def running(cache: Path) -> list[Detached]:
    """The detached compiles of ``cache`` still running (read only: nothing is removed)."""
    directory = register_dir(cache)
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            entry = Detached(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if _alive(entry):
            found.append(entry)
    return found


def stop_all(cache: Path) -> list[Detached]:
    """Stop every detached compile of ``cache``; return those that were running."""
    if not register_dir(cache).is_dir():
        return []
    with _locked(cache) as directory:
        stopped = []
        for path, entry in _entries(directory):
            if _alive(entry):
                _stop(entry)
                stopped.append(entry)
            else:
                _remove_scratch(entry)
            path.unlink(missing_ok=True)
    return stopped


def forget(cache: Path, pid: int) -> Optional[Detached]:
    """A detached compile that ends removes its own entry (others are removed once seen dead).
    Returns the entry, if its run had left it one (None: its run is still there, or stopped it)."""
    path = register_dir(cache) / f"{pid}.json"
    try:
        entry: Optional[Detached] = Detached(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        entry = None
    with contextlib.suppress(OSError):
        path.unlink()
    return entry


def record_failure(cache: Path, entry: Detached, why: str) -> None:
    """Compile ``entry`` failed after its run had ended: keep why for ``failures`` and
    ``take_failure``. A disk too full even for this line keeps nothing (as before)."""
    failure = Failure(entry.key, entry.what, time.time(), " ".join(why.split())[:600])
    directory = register_dir(cache)
    tmp = directory / f".{entry.key}{FAILED}.tmp"
    try:
        tmp.write_text(json.dumps(asdict(failure)))
        os.replace(tmp, directory / f"{entry.key}{FAILED}")
    except OSError:
        tmp.unlink(missing_ok=True)


def _read_failure(path: Path) -> Optional[Failure]:
    try:
        return Failure(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def failures(cache: Path) -> list[Failure]:
    """The failed detached compiles of ``cache`` that no background compile has taken since
    (read only)."""
    directory = register_dir(cache)
    if not directory.is_dir():
        return []
    return [f for f in map(_read_failure, sorted(directory.glob(f"*{FAILED}"))) if f is not None]


def take_failure(cache: Path, key: str) -> Optional[Failure]:
    """The failure a detached compile of kernel module ``key`` left, if any, removed from the
    register: a new compile of ``key`` starts."""
    path = register_dir(cache) / f"{key}{FAILED}"
    failure = _read_failure(path)
    with contextlib.suppress(OSError):
        path.unlink()
    return failure
