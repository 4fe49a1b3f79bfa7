"""The driver's temporary directories, named by their owner's pid, and the sweep of dead owners' ones.

A Spark driver leaves files in the temporary directory: its JVM's scratch (block managers, shuffle
files: ``spark.local.dir``), copies of spec files served to the executors, the temporary work dir
of a run without ``--work-dir``. Each is removed on every exit the driver survives; a driver killed
outright (SIGKILL, a lost machine) cannot, so every such directory carries its owner's pid and the
next Spark run on the machine removes those whose owner is gone. A live owner's are never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

SCRATCH_PREFIX = "kraftcheck-spark-local-"  # the driver JVM's spark.local.dir
SHIP_PREFIX = "kraftcheck-ship-"             # spec files served to the executors
WORK_PREFIX = "kraftcheck-spark-"            # a run's temporary work dir (no --work-dir)
_OWNED = re.compile(r"^kraftcheck-(?:spark-local|ship|spark)-(\d+)-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def sweep(directory: str | None = None) -> list[Path]:
    """Remove the driver directories in ``directory`` (the temporary directory) whose owner pid
    is not running; returns what was removed."""
    root = Path(directory or tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        found = _OWNED.match(entry.name)
        if not found or int(found.group(1)) == os.getpid() or _alive(int(found.group(1))):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def scratch_dir() -> Path:
    """A new scratch directory for this driver's JVM."""
    return Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))


def work_dir() -> Path:
    """A new temporary work dir for a run without ``--work-dir``."""
    return Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-"))


def ship_dir(module: str) -> Path:
    """Where this driver serves the copy of spec module ``module`` from (one per module and process)."""
    return Path(tempfile.gettempdir()) / f"{SHIP_PREFIX}{os.getpid()}-{module}"
