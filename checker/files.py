"""Files the engine and every layer above it write: whole or not at all.

Writing goes to a temporary file in the target's directory, is flushed to disk, then renamed over
the target, so a crash leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Union

PathLike = Union[str, os.PathLike]


def _default_mode() -> int:
    """The mode ``open()`` would give a new file (mkstemp makes them private, 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: PathLike, data: Union[str, bytes]) -> Path:
    """Write ``data`` to ``path`` all at once: temp file in the same directory, fsync, rename."""
    payload = data.encode() if isinstance(data, str) else data
    return atomic_write_with(path, lambda tmp: tmp.write_bytes(payload))


def atomic_write_with(path: PathLike, writer: Callable[[Path], None]) -> Path:
    """Let ``writer`` produce a file at a temporary path (matplotlib, networkx writers), then
    rename it into place; nothing is left behind if the writer fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        writer(Path(tmp))
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, _default_mode())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path
