"""A disk that fills up: recognised wherever a run writes, and never the loss of what was found.

A full disk during the exploration ends it as incomplete with ``incomplete_reason`` saying where
(``disk_full_reason``), so the violations found so far still reach the summary, the traces and
the JSON report; so does an exceeded quota or file size limit (``ulimit -f``), each said as what
it is (``NO_ROOM``), not as a full disk. After the exploration every output file is written on
its own (``write_kept``): one the disk (or anything else) refuses is named in ``unwritten``, and
the others, and the verdict, are still given.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional

# what refused the bytes, by errno (not a bug, not bad input), as every reason and message about
# it begins: the disk, the user's quota, or the file size limit (ulimit -f: Python ignores SIGXFSZ,
# so the write fails with EFBIG; a file system's own largest file gives it too)
NO_ROOM = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
           errno.EFBIG: "the file size limit is exceeded"}
DISK_FULL_ERRNOS = tuple(NO_ROOM)
DISK_FULL = NO_ROOM[errno.ENOSPC]
# what to do, by errno: (with a checkpoint to resume, without one)
_ADVICE = {errno.ENOSPC: ("free space (or move the directory to a larger disk)",
                          "free space, or give the levels a larger disk: --checkpoint DIR there, or TMPDIR for the "
                          "levels a run spills"),
           errno.EDQUOT: ("free space within the quota, or have it raised (or move the directory where it has room)",
                          "free space within the quota or have it raised, or give the levels a disk outside it: "
                          "--checkpoint DIR there, or TMPDIR for the levels a run spills"),
           errno.EFBIG: ("raise the file size limit (ulimit -f) in the shell that runs it",
                         "raise the file size limit (ulimit -f) in the shell that runs it, or give the levels a file "
                         "system that takes larger files: --checkpoint DIR there, or TMPDIR for the levels a run "
                         "spills")}


def is_disk_full(e: BaseException) -> bool:
    """The system refused the bytes for want of room: a full disk, a quota or a file size limit."""
    return isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS


def is_disk_full_reason(reason: Optional[str]) -> bool:
    """``reason`` (an ``incomplete_reason``) is one ``disk_full_reason`` gave."""
    return bool(reason) and reason.startswith(tuple(NO_ROOM.values()))


def disk_full_reason(e: OSError, directory: Any = None) -> str:
    """The ``incomplete_reason`` of an exploration the disk stopped: what refused the bytes, and
    the file it was writing, or (a write that does not name its file) the ``directory`` it was
    writing in."""
    what = NO_ROOM.get(e.errno, DISK_FULL)
    if e.filename:
        return f"{what} writing {e.filename}"
    return f"{what} writing in {directory}" if directory else what


# what to do, by errno, when the refused file was compiled code (the kernel cache, numba's cache)
_CACHE_PLACES = ("KRAFTCHECK_CACHE_DIR (and NUMBA_CACHE_DIR, where numba's cache of the spec's functions goes) set "
                 "to a directory there")
_CACHE_ADVICE = {errno.ENOSPC: f"free space, or give the compiled code a disk with room: {_CACHE_PLACES}",
                 errno.EDQUOT: "free space within the quota or have it raised, or give the compiled code a disk "
                               f"outside it: {_CACHE_PLACES}",
                 errno.EFBIG: "raise the file size limit (ulimit -f) in the shell that runs it: compiled code "
                              "takes files of a few megabytes"}


def is_compiled_code_file(path: Any) -> bool:
    """``path`` is a file of the kernel cache or of numba's cache (its own ``NUMBA_CACHE_DIR``, or
    a ``__pycache__`` beside a spec's or kraftcheck's sources)."""
    from kraftcheck.checker.debug_kernels import cache_root
    full = os.path.realpath(str(path))
    roots = [cache_root(), os.environ.get("NUMBA_CACHE_DIR") or ""]
    return "__pycache__" in full.split(os.sep) or any(
        root and full.startswith(os.path.realpath(root) + os.sep) for root in roots)


def disk_full_advice(checkpoint: Optional[str], reason: str = DISK_FULL) -> str:
    """What to do about a run stopped for ``reason`` (from ``disk_full_reason``)."""
    code = next((code for code, what in NO_ROOM.items() if reason.startswith(what)), errno.ENOSPC)
    written = reason.split(" writing ", 1)[1] if " writing " in reason else None
    if written is not None and is_compiled_code_file(written):  # compiling, not keeping levels
        return _CACHE_ADVICE[code]
    resumable, fresh = _ADVICE[code]
    if checkpoint:
        return f"{checkpoint} keeps the last finished level: {resumable}, then continue with --resume {checkpoint}"
    return fresh


def stopped_by_full_disk(reason: str, checkpoint: Optional[str]) -> str:
    """One line for a run the disk stopped (``reason`` from ``disk_full_reason``): where, and what to do."""
    return f"{reason}: the run stopped before its end; {disk_full_advice(checkpoint, reason)}"


@dataclass(frozen=True)
class UnwrittenFile:
    """An output that could not be written: what it is, where it was to go, and the system's reason."""

    what: str  # "the trace of invariant X", "the JSON report"
    path: str
    reason: str
    check: Optional[str] = None  # a counterexample's file: the check it is the trace of

    def __str__(self) -> str:
        return f"{self.what} was not written to {self.path}: {self.reason}"


def write_kept(what: str, path: Any, write: Callable[[], Any], unwritten: list[UnwrittenFile],
               check: Optional[str] = None) -> bool:
    """Run ``write`` (which writes ``path``); if the system refuses it (a full disk, but also a
    permission, an I/O error, a reader of a pipe gone), note it in ``unwritten`` and return False
    instead of raising, so that the next output and the verdict are still given. ``check``: the
    check whose counterexample the file is."""
    try:
        write()
    except OSError as e:
        unwritten.append(UnwrittenFile(what, str(path), unwritten_reason(e), check))
        return False
    return True


def unwritten_reason(e: OSError) -> str:
    """Why an output was not written, as the summary and the report say it."""
    if is_disk_full(e):
        return f"{NO_ROOM[e.errno]} ({e.strerror or e})"
    if e.errno == errno.EPIPE:
        return "its reader went away (broken pipe)"
    return e.strerror or str(e)
