"""Output locations checked before any work starts, for every command.

A run can take an hour; finding out only at its end that ``--json`` points into a directory that
cannot be written loses the result. So each command checks every file and directory it will write
first: a directory must exist or be creatable, must accept new files (probed by creating and
removing a temporary file, since permission bits do not tell, e.g. under /proc or on a read-only
mount), and a path must not be the wrong kind (a file where a directory is needed, or the
reverse). Nothing is left behind by the check: no directory is created and the probe is removed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

from kraftcheck.checker.errors import UsageError


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _probe(directory: Path, option: str, shown: str) -> None:
    existing = _nearest_existing(directory)
    if not existing.is_dir():
        raise UsageError(f"cannot write {option} {shown}: {existing} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".kraftcheck-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"cannot write {option} {shown}: {existing} does not accept new files "
                         f"({e.strerror or e}); choose another location") from None


def check_output_file(path: Optional[os.PathLike | str], option: str) -> None:
    """``path`` can be written as a file (``-`` means standard output and always can)."""
    if path is None or str(path) == "-":
        return
    p = Path(path).expanduser()
    if str(path).endswith(("/", os.sep)) or p.is_dir():
        raise UsageError(f"{option} {path} is a directory; give a file name")
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"cannot write {option} {path}: the file exists and is not writable")
    _probe(p.parent if str(p.parent) else Path("."), option, str(path))


def check_output_dir(path: Optional[os.PathLike | str], option: str) -> None:
    """``path`` is a directory that exists, or can be created, and accepts new files."""
    if path is None:
        return
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise UsageError(f"{option} {path} exists and is not a directory; give a directory")
    _probe(p, option, str(path))
