"""A run's exclusive hold of a directory it writes (a checkpoint, a Spark work directory).

Two runs writing the same directory at once corrupt each other's files (one truncates a file the
other has mapped: SIGBUS). ``lock_directory`` takes a non-blocking ``flock`` on
``DIR/.kraftcheck.lock`` and writes who holds it (pid, host, command line, since when, what for)
into that file; a second run is refused at once with ``DirectoryBusy`` naming the holder. The
kernel drops a ``flock`` when its holder dies, however it dies (SIGKILL included), so a lock is
never stale and nothing needs cleaning up by hand: a file left behind by a killed run is simply
taken by the next one. ``release`` removes the file while still holding the lock, and a taker
checks after locking that the path still names the file it locked (else it locked a removed file
and tries again), so a removal never lets two runs hold the same directory.

``flock`` locks belong to an open file description: two holds in one process exclude each other
too. On a network file system without working locks the hold is only as good as the file system's.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shlex
import socket
import sys
import time
from pathlib import Path
from typing import Any, Optional

from kraftcheck.checker.errors import UsageError

LOCK_FILE = ".kraftcheck.lock"


class DirectoryBusy(UsageError):
    """Another process holds the directory (exit 2): the message names it and says what to do."""

    def __init__(self, path: Path, purpose: str, holder: dict[str, Any]) -> None:
        self.path = Path(path)
        self.purpose = purpose
        self.holder = holder
        stop = f"or stop it: kill {holder['pid']}" if holder.get("host") == socket.gethostname() and "pid" in holder \
            else "or stop it"
        super().__init__(f"{path} is in use by {_describe(holder)}; {purpose} cannot share it: wait for that run "
                         f"to end ({stop}), or give this one another directory")


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "another process (it has not yet said which)"
    since = holder.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since)) if isinstance(since, (int, float)) else "?"
    return (f"{holder.get('purpose', 'another run')}: pid {holder.get('pid', '?')} on {holder.get('host', '?')} "
            f"since {when}, command: {holder.get('command', '?')}")


class DirectoryLock:
    """The hold of one directory; ``release()`` (or leaving its ``with`` block) gives it up."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = Path(path)
        self._fd: Optional[int] = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Give the directory up (again: nothing). The file goes first, while still locked."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.unlink(self.path / LOCK_FILE)
        except OSError:
            pass  # a read-only or vanished directory: the lock goes with the descriptor all the same
        os.close(fd)

    def __enter__(self) -> "DirectoryLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)  # no unlink from a finaliser: the file is harmless, the lock is not


VANISHED_RETRIES = 100  # a directory removed again and again as it is made is refused, not retried forever


def lock_directory(path: Path, purpose: str) -> DirectoryLock:
    """Hold ``path`` (created if absent) for this process, or raise ``DirectoryBusy`` at once if
    another holds it. ``purpose`` says what for, in the holder entry and in a refusal."""
    path = Path(path)
    lock_path = path / LOCK_FILE
    vanished = 0
    while True:
        try:
            path.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise  # a full disk, as anywhere else in a run
            if e.errno == errno.ENOENT and vanished < VANISHED_RETRIES:
                # the holder released the directory and removed it, once empty, between our mkdir and our
                # open (a gate's --out): made again, it is free
                vanished += 1
                continue
            raise UsageError(f"cannot take {path} for {purpose}: {e.strerror or e} ({lock_path}); choose a "
                             "directory this user can write") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise DirectoryBusy(path, purpose, holder) from None
        except OSError as e:  # ENOLCK: a file system without locks
            os.close(fd)
            raise UsageError(f"cannot take {path} for {purpose}: its file system refuses a lock ({e.strerror or e}); "
                             "choose a directory on a local disk") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the holder released (and removed) the file between our open and our lock
            os.close(fd)
            continue
        _write_holder(fd, purpose)
        return DirectoryLock(path, fd)


def _write_holder(fd: int, purpose: str) -> None:
    entry = {"pid": os.getpid(), "host": socket.gethostname(), "command": shlex.join(sys.argv),
             "since": time.time(), "purpose": purpose}
    data = (json.dumps(entry) + "\n").encode()
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:
        pass  # a full disk: the hold stands all the same, a refusal just cannot name it


def _read_holder(fd: int) -> dict[str, Any]:
    """The holder entry; a holder that has just locked may not have written it yet."""
    for _ in range(3):
        try:
            data = os.pread(fd, 1 << 16, 0)
            if data:
                return json.loads(data)
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    return {}
