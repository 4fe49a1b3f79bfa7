"""A directory held by one run is refused to any other at once, and free again when the holder
releases it or dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from kraftcheck.checker.dirlock import LOCK_FILE, DirectoryBusy, lock_directory
from kraftcheck.checker.errors import UsageError


def test_a_second_hold_is_refused_naming_the_holder_and_free_after_release(tmp_path):
    first = lock_directory(tmp_path / "d", "a checkpointed run")
    assert (tmp_path / "d" / LOCK_FILE).exists()
    # a second open file description, as a second run has: flock excludes it even in this process
    with pytest.raises(DirectoryBusy) as busy:
        lock_directory(tmp_path / "d", "a resumed run")
    assert isinstance(busy.value, UsageError)  # exit 2 in the command line
    message = str(busy.value)
    assert f"pid {os.getpid()}" in message and "a checkpointed run" in message and "a resumed run" in message
    assert busy.value.holder["host"] and busy.value.holder["since"] > 0
    first.release()
    first.release()  # twice: nothing
    assert not (tmp_path / "d" / LOCK_FILE).exists()
    with lock_directory(tmp_path / "d", "again") as second:
        assert second.held
    assert not second.held


def test_a_killed_holder_leaves_the_directory_free(tmp_path):
    """The kernel drops the lock of a process that dies, SIGKILL included: no stale lock."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
         "from kraftcheck.checker.dirlock import lock_directory\n"
         "lock = lock_directory(Path(sys.argv[1]), 'a held directory')\nprint('held', flush=True)\n"
         "time.sleep(600)\n", str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DirectoryBusy) as busy:
            lock_directory(tmp_path, "a second run")
        assert f"pid {holder.pid}" in str(busy.value)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    assert (tmp_path / LOCK_FILE).exists()  # left behind by the killed holder, and harmless
    lock_directory(tmp_path, "after the kill").release()


def test_a_directory_removed_between_its_making_and_the_lock_files_open_is_made_again(tmp_path, monkeypatch):
    """Another holder releasing the directory removes it once empty (a CI gate's --out); if that
    comes between this lock's mkdir and its open, the open finds no directory: the lock makes it
    again and takes it, instead of refusing it as one this user cannot write."""
    import kraftcheck.checker.dirlock as dirlock
    target = tmp_path / "out"
    real_open, removed = os.open, []

    def open_after_removal(path, flags, mode=0o777, **kw):
        if str(path).endswith(LOCK_FILE) and not removed:
            removed.append(True)
            os.rmdir(target)  # the other holder's removal lands here
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(dirlock.os, "open", open_after_removal)
    with lock_directory(target, "a test"):
        assert removed and (target / LOCK_FILE).is_file()
