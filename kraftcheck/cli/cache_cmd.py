"""``kraftcheck cache``: the kernel cache, seen and cleared.

``status`` says where the cache is (``KRAFTCHECK_CACHE_DIR``), how large it is, the models whose
kernels it holds (compiled or not yet) and the background compiles left running by runs that
ended first (``checker.detached``: at most one per cache), and the caches beside it of the other
mode (``KRAFTCHECK_DEBUG_KERNELS``: ``kernels-debug`` and ``numba-debug``, or the normal
``kernels``). ``clear`` stops those compiles and removes all of them; it refuses (exit 2) while a
process that uses a kernel cache runs (a check, or a Python session that ran one: each holds a
shared lock on it, ``codegen.note_cache_in_use``), since removing kernels under it would break its
next import of one, and when a folder so named holds anything kraftcheck does not write there
(``KRAFTCHECK_CACHE_DIR=$HOME`` names the user's own ``$HOME/kernels``, if there is one).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from pathlib import Path

import click

from kraftcheck.checker import detached
from kraftcheck.checker.codegen import IN_USE_FILE, cache_dir
from kraftcheck.checker.debug_kernels import DEBUG_KERNELS, DEBUG_NUMBA, KERNELS
from kraftcheck.checker.errors import UsageError


def _size(directory: Path) -> int:
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _models(directory: Path) -> list[tuple[str, bool]]:
    """(spec of each model module in the cache, whether its kernels were all compiled)."""
    found = []
    for module in sorted(directory.glob("kc_*_model_*.py")):
        spec = module.stem[len("kc_"):].rsplit("_model_", 1)[0]
        found.append((f"{spec} ({module.stem.rsplit('_', 1)[1][:8]})", Path(f"{module}.compiled").exists()))
    return found


# the names kraftcheck writes in a kernel cache, and numba in its cache (numba-debug): generated
# modules and their markers (kc_...; .kc_... while written), the in-use lock and other locks of
# its own (.kraftcheck-...), the background compiles' register, Python's and numba's caches of the
# modules (numba's: a folder per source folder, <name>_<sha1 of its path>, and its index and data files)
_OWN_ENTRY = re.compile(r"\.?kc_.*|\.in-use|\.kraftcheck-.*|detached|__pycache__|kernels|.+_[0-9a-f]{40}|.+\.nb[ic]",
                        re.DOTALL)


def _not_a_cache_entry(directory: Path) -> str | None:
    """The first name in ``directory`` that kraftcheck (or numba, in its cache) does not write,
    if any: such a folder is not only a cache of kraftcheck's, and none of it may be removed."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return None  # unreadable: removing it says why
    return next((name for name in names if not _OWN_ENTRY.fullmatch(name)), None)


def _file_in_the_way(directory: Path) -> Path | None:
    """The file standing where ``directory`` or a folder above it should be, if any."""
    for path in (directory, *directory.parents):
        if path.exists():
            return None if path.is_dir() else path
    return None


def _beside(directory: Path) -> list[tuple[Path, str]]:
    """The caches beside the kernel cache ``directory`` (the other mode's), that exist, each with
    what it holds."""
    what = {KERNELS: "the kernels", DEBUG_KERNELS: "the debug mode's kernels",
            DEBUG_NUMBA: "the debug mode's numba cache (spec functions and kernels)"}
    return [(directory.parent / name, text) for name, text in what.items()
            if name != directory.name and (directory.parent / name).is_dir()]


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


@click.group()
def cache() -> None:
    """The kernel cache (KRAFTCHECK_CACHE_DIR): its content and its background compiles."""


@cache.command()
def status() -> None:
    """Where the cache is, its size, its models, its background compiles (running, or failed
    after their run), and the caches of the other mode (KRAFTCHECK_DEBUG_KERNELS) beside it."""
    from kraftcheck.cli.terminal import byte_size
    directory = cache_dir()
    click.echo(f"kernel cache   {directory}")
    blocker = _file_in_the_way(directory)
    if blocker is not None:
        click.echo(f"               unusable: {blocker} is a file; point KRAFTCHECK_CACHE_DIR at a writable directory")
        return
    if not directory.is_dir():
        click.echo("               empty (a first run creates it)")
    else:
        _content(directory)
    for other, what in _beside(directory):
        click.echo(f"beside it      {other}: {what}, {byte_size(_size(other))}")
        if other.name != DEBUG_NUMBA:
            _say_compiles(detached.running(other))


def _content(directory: Path) -> None:
    from kraftcheck.cli.terminal import byte_size
    click.echo(f"size           {byte_size(_size(directory))}")
    if os.environ.get("NUMBA_CACHE_DIR"):
        click.echo(f"numba's cache  {os.environ['NUMBA_CACHE_DIR']} (NUMBA_CACHE_DIR; not counted above)")
    models = _models(directory)
    click.echo(f"models         {len(models)}")
    for name, compiled in models:
        click.echo(f"  {name:<40} {'compiled' if compiled else 'not compiled yet'}")
    running = detached.running(directory)
    click.echo(f"background compiles left running: {len(running) or 'none'}")
    _say_compiles(running)
    # a failure the kernels were compiled after since (--compile now) is no longer news
    failed = [f for f in detached.failures(directory) if not (directory / f"{f.key}.py.compiled").exists()]
    if failed:
        click.echo(f"background compiles that failed after their run: {len(failed)} (the next run of the model "
                   "compiles again)")
        for failure in failed:
            click.echo(f"  {failure.said()}")


def _say_compiles(running: list) -> None:
    for entry in running:
        click.echo(f"  pid {entry.pid}: {entry.what} (module {entry.key}), since {_when(entry.since)}")


@cache.command()
def clear() -> None:
    """Stop the cache's background compiles and remove it, with the debug mode's caches beside
    it (not while in use, nor a folder holding anything kraftcheck does not write there)."""
    try:
        _clear()
    except UsageError as e:
        click.echo(f"kraftcheck: error: {e}", err=True)
        sys.exit(2)


def _clear() -> None:
    directory = cache_dir()
    blocker = _file_in_the_way(directory)
    if blocker is not None:
        raise UsageError(f"the kernel cache {directory} cannot be a directory: {blocker} is a file; remove it by "
                         "hand or point KRAFTCHECK_CACHE_DIR elsewhere")
    beside = [other for other, _ in _beside(directory)]
    if not directory.exists() and not beside:
        click.echo(f"kernel cache {directory}: nothing to clear")
        return
    caches = [d for d in (directory, *beside) if d.exists()]
    for d in caches:  # before anything is locked, stopped or removed
        foreign = _not_a_cache_entry(d)
        if foreign is not None:
            raise UsageError(f"{d} holds {foreign!r}, which kraftcheck does not write there: it is not (only) a "
                             f"kernel cache of kraftcheck's, so nothing was removed; remove what you mean to by hand, "
                             f"or point KRAFTCHECK_CACHE_DIR at a folder of kraftcheck's own")
    locks = []
    try:
        for d in caches:  # every lock before anything is stopped: a refusal changes nothing
            if d.name != DEBUG_NUMBA:  # a debug run holds kernels-debug's lock, which covers it
                locks.append(_exclusive(d))
        for d in caches:
            try:
                stopped = detached.stop_all(d) if d.name != DEBUG_NUMBA else []
                shutil.rmtree(d)
            except OSError as e:
                raise UsageError(f"the kernel cache {d} could not be removed ({e.strerror or e}): "
                                 "it may be read-only") from None
            stops = f"; stopped {len(stopped)} background compile{'s' if len(stopped) != 1 else ''}" if stopped else ""
            click.echo(f"kernel cache {d} removed{stops}")
    finally:
        for lock in locks:
            if lock is not None:
                os.close(lock)


def _exclusive(directory: Path) -> int | None:
    """The cache's in-use lock to this process alone, or UsageError if a process uses the cache."""
    try:
        import fcntl
        fd = os.open(directory / IN_USE_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except (ImportError, OSError):
        return None  # not POSIX, or read-only (rmtree then says so)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UsageError(f"the kernel cache {directory} is in use by a running process (a check, or a Python "
                         "session that ran one): clear it once that has ended") from None
    return fd
