"""Files the engine and every layer above it write: whole or not at all, and never in place of
something that is not a file.

Writing goes to a temporary file in the target's directory, is flushed to disk, then renamed over
the target, so a crash leaves either the old file or the new one, never half of one
(``atomic_write``, for the engine's own files). An output the user names (``write_output``) may
also be standard output, a device, a FIFO or a symlink: those are written through, not replaced.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Callable, Optional, Union

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


def _make_parents(directory: Path) -> list[Path]:
    """Make ``directory`` and its missing parents; the ones this call made, deepest first (one
    another process made meanwhile is not among them)."""
    missing = []
    while not directory.is_dir() and directory.parent != directory:
        missing.append(directory)
        directory = directory.parent
    made = []
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        except BaseException:
            _remove_empty(made[::-1])
            raise
        made.append(folder)
    return made[::-1]


def _remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) while they are empty: another writer's file keeps its folder."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def atomic_write_with(path: PathLike, writer: Callable[[Path], None]) -> Path:
    """Let ``writer`` produce a file at a temporary path (matplotlib, networkx writers), then
    rename it into place; nothing is left behind if the writer fails, not even the directories
    this call made for it (a run on a full disk leaves no empty --trace-dir)."""
    path = Path(path)
    made = _make_parents(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent)
    except BaseException:
        _remove_empty(made)
        raise
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
        _remove_empty(made)
        raise
    return path


def sync_directory(directory: PathLike) -> None:
    """Make ``directory``'s entries durable: fsyncing a file makes its bytes durable, not its name
    (a file created, or renamed into place, may be lost in a crash that keeps a later file)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- outputs a user names: reports, traces, tables, graphs -------------------------------------------

STDOUT = "-"


def descriptor_of(path: PathLike) -> Optional[int]:
    """The file descriptor of this process that ``path`` names (``-`` and ``/dev/stdout`` are 1,
    ``/dev/fd/3`` is 3), found by following its symlinks; None for any other path. Such a path is
    written through the descriptor: reopening it would truncate a file the shell appends to, and
    renaming onto it would replace the shell's file, or the system's ``/dev/stdout``."""
    text = os.fspath(path)
    if text == STDOUT:
        return 1
    pids = {"self", str(os.getpid())}
    for _ in range(40):  # the kernel's own limit on a chain of symlinks
        parent, name = os.path.split(os.path.normpath(text))
        parts = parent.split("/")
        if name.isdigit() and (parent == "/dev/fd" or (len(parts) == 4 and parts[1] == "proc" and parts[2] in pids
                                                       and parts[3] == "fd")):
            return int(name)
        if not os.path.islink(text):
            return None
        target = os.readlink(text)
        text = os.path.join(os.path.dirname(text), target)
    return None


def output_kind(path: PathLike) -> str:
    """How ``write_output`` writes ``path``: ``descriptor`` (standard output, ``/dev/fd/N``),
    ``special`` (a device, FIFO or socket, written into), or ``file`` (a regular file, new or
    existing, written whole by a rename; a symlink is followed to it and stays a symlink).
    Raises OSError for a symlink loop, or ``IsADirectoryError``."""
    if descriptor_of(path) is not None:
        return "descriptor"
    try:
        st = os.stat(path)  # follows symlinks
    except (FileNotFoundError, NotADirectoryError):  # a new file (its directory is another matter)
        return "file"
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", os.fspath(path))
    return "file" if stat.S_ISREG(st.st_mode) else "special"


def write_output(path: PathLike, data: Union[str, bytes]) -> None:
    """Write an output the user asked for (a report, a trace, a table) to ``path`` without harming
    what is there: ``-`` or a path to one of this process's descriptors writes through it; a
    device or FIFO is written into, never replaced; a regular file is replaced whole (temporary
    file and rename, as ``atomic_write``), through a symlink if ``path`` is one, which is kept.
    An OSError names ``path``."""
    payload = data.encode() if isinstance(data, str) else data
    try:
        kind = output_kind(path)
        if kind == "descriptor":
            _write_descriptor(descriptor_of(path), payload)
        elif kind == "special":
            with open(path, "wb", buffering=0) as f:  # no O_TRUNC effect on devices and FIFOs
                _write_all(f.write, payload)
        else:
            atomic_write(os.path.realpath(path), payload)
    except OSError as e:
        if not e.filename:
            e.filename = os.fspath(path)
        raise


def _write_descriptor(fd: int, payload: bytes) -> None:
    """Write through descriptor ``fd``; 1 and 2 through Python's own streams, so the output
    keeps its place among what was already printed there."""
    stream = {1: sys.stdout, 2: sys.stderr}.get(fd)
    if stream is not None:
        stream.flush()
        target = getattr(stream, "buffer", None)
        if target is not None:
            target.write(payload)
            target.flush()
            return
        fd = stream.fileno()
    _write_all(lambda data: os.write(fd, data), payload)


def _write_all(write: Callable[[memoryview], int], payload: bytes) -> None:
    """``write`` (one unbuffered write, which may take fewer bytes than it is given: a pipe, a
    device, a signal in the middle) until every byte of ``payload`` is written. Python retries a
    write a signal interrupted before it wrote anything (PEP 475)."""
    view = memoryview(payload)
    while view:
        view = view[write(view):]


DIGEST = "sha256"  # of a checkpoint's manifest and level files, and of a spec's source files


def file_digest(path: PathLike) -> str:
    """The hex ``DIGEST`` of the file at ``path``, read in pieces."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, DIGEST).hexdigest()


# a manifest, a matrix or a baseline file: far larger than any is
CONFIG_MAX_BYTES = 64 * 2**20


class NotARegularFileError(OSError):
    """An input named by the user is not a regular file (a FIFO, a device, a socket, a directory):
    reading a FIFO waits for a writer without end, a device such as ``/dev/zero`` reads without
    end, and neither is a file a person meant to give."""

    def __str__(self) -> str:  # what it is and what to do, without OSError's errno and repr of the name
        return self.strerror


def _kind(mode: int) -> str:
    """What a file of ``mode`` (``st_mode``) is, as a person names it."""
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


def _refuse(path: PathLike, mode: int) -> NotARegularFileError:
    # a pipe or a device is what <(command) and /dev/stdin give: the user meant a command's output
    streamed = " (write a command's output to a file first)" if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) else ""
    return NotARegularFileError(errno.EINVAL, f"it is {_kind(mode)}, not a regular file; name the file itself"
                                f"{streamed}", os.fspath(path))


def not_a_file(path: PathLike) -> Optional[str]:
    """What ``path`` names when that exists and is not a regular file once symlinks are followed
    (``a directory``, ``a pipe (FIFO)``, ``a character device``...); None for a regular file or a
    path that names nothing."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(mode) else _kind(mode)


def open_regular(path: PathLike):
    """``path`` opened for reading in binary, refused (``NotARegularFileError``) unless it is a
    regular file; nothing else is opened, so a FIFO never waits for its writer. OSError as ``open``
    raises it."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise _refuse(path, mode)
    # O_NONBLOCK: a FIFO put in the file's place since the stat opens at once and is refused below
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    f = open(fd, "rb")
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        f.close()
        raise _refuse(path, mode)
    return f


def read_at_most(path: Union[str, Path], limit: int) -> Optional[bytes]:
    """The bytes of file ``path``, None if it holds more than ``limit`` (a file that grows as it is
    read, or one of ``/proc``'s, which say they hold 0). A path that is not a regular file (a FIFO,
    ``<(command)``, ``/dev/zero``) is refused with ``NotARegularFileError``; other OSError as
    ``open`` raises it."""
    with open_regular(path) as f:
        if os.fstat(f.fileno()).st_size > limit:
            return None
        raw = f.read(limit + 1)
    return None if len(raw) > limit else raw
