"""A disk that fills up: recognised wherever a run writes, and never the loss of what was found.

A full disk (or quota) during the exploration ends it as incomplete with ``incomplete_reason``
saying where (``disk_full_reason``), so the violations found so far still reach the summary, the
traces and the JSON report. After the exploration every output file is written on its own
(``write_kept``): one the disk (or anything else) refuses is named in ``unwritten``, and the
others, and the verdict, are still given.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any, Callable, Optional

# the disk (or the user's quota, or the file size limit) refused the bytes: not a bug, not bad input
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
DISK_FULL = "the disk is full"  # how every reason and message about it begins


def is_disk_full(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS


def disk_full_reason(e: OSError, directory: Any = None) -> str:
    """The ``incomplete_reason`` of an exploration the disk stopped: the file it was writing, or
    (a write that does not name its file) the ``directory`` it was writing in."""
    if e.filename:
        return f"{DISK_FULL} writing {e.filename}"
    return f"{DISK_FULL} writing in {directory}" if directory else DISK_FULL


def disk_full_advice(checkpoint: Optional[str]) -> str:
    """What to do about a run the disk stopped."""
    if checkpoint:
        return (f"{checkpoint} keeps the last finished level: free space (or move the directory to a larger disk), "
                f"then continue with --resume {checkpoint}")
    return "free space, or give the levels a larger disk: --checkpoint DIR there, or TMPDIR for the levels a run spills"


def stopped_by_full_disk(reason: str, checkpoint: Optional[str]) -> str:
    """One line for a run the disk stopped (``reason`` from ``disk_full_reason``): where, and what to do."""
    return f"{reason}: the run stopped before its end; {disk_full_advice(checkpoint)}"


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
        return f"{DISK_FULL} ({e.strerror or e})"
    if e.errno == errno.EPIPE:
        return "its reader went away (broken pipe)"
    return e.strerror or str(e)
