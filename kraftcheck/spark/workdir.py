"""Where a Spark run keeps its data: the levels and the visited set as files under one work dir.

Executors and the driver read and write the same directory, so on a cluster it must be a shared
file system (NFS, a mounted volume); on one machine any directory works. Layout:

``levels/level-LLLL/part-PPPPP.{words,parents,labels}``
    the states first reached at BFS level L, in the local engine's order, cut in P parts of
    consecutive global indices: packed words (``nwords`` uint64 each), the global index of each
    state's parent (uint64; ``INITIAL_PARENT`` for an initial state) and its label (uint16).
``visited/bucket-BBBBB/level-LLLL.words`` (and ``.fps``)
    the states of level L whose fingerprint falls in hash bucket B, sorted by (fingerprint,
    words), one sorted run per level, with their fingerprints beside them: the visited set,
    partitioned by hash exactly as each level's candidates are. A lookup searches the 64-bit
    fingerprints and compares one row. With ``--fingerprints`` the words file holds the sorted
    fingerprints themselves and there is no ``.fps``.

Every file is written under a temporary name and renamed, with a name that depends only on what
it holds, so a task that Spark runs twice writes the same file twice and a reader never sees half.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

INITIAL_PARENT = np.uint64(0xFFFFFFFFFFFFFFFF)  # the parent index of an initial state
_RUN = re.compile(r"level-(\d{4,})\.words$")


def level_dir(root: str, level: int) -> Path:
    return Path(root) / "levels" / f"level-{level:04d}"


def part_path(root: str, level: int, part: int, kind: str) -> Path:
    return level_dir(root, level) / f"part-{part:05d}.{kind}"


def bucket_dir(root: str, bucket: int) -> Path:
    return Path(root) / "visited" / f"bucket-{bucket:05d}"


def run_path(root: str, bucket: int, level: int, kind: str = "words") -> Path:
    return bucket_dir(root, bucket) / f"level-{level:04d}.{kind}"


def run_path_of(words_path: Path, kind: str) -> Path:
    """The ``kind`` file beside a run's words file (exact mode keeps its fingerprints there)."""
    return words_path.with_suffix(f".{kind}")


def save(path: Path, array: np.ndarray) -> None:
    """Write ``array``'s bytes to ``path`` atomically (temporary file in the same directory, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(np.ascontiguousarray(array).tobytes())
    os.replace(tmp, path)


def load(path: Path, dtype, nwords: int = 0) -> np.ndarray:
    """A file written by ``save``, as an array (rows of ``nwords`` words when ``nwords`` > 0)."""
    data = np.fromfile(path, dtype=dtype)
    return data.reshape(-1, nwords) if nwords else data


def load_slice(path: Path, dtype, lo: int, hi: int, nwords: int = 0) -> np.ndarray:
    """Rows ``lo..hi`` of a file written by ``save``, reading only those."""
    width = max(1, nwords)
    itemsize = np.dtype(dtype).itemsize * width
    with open(path, "rb") as f:
        f.seek(lo * itemsize)
        data = np.frombuffer(f.read((hi - lo) * itemsize), dtype=dtype).copy()
    return data.reshape(-1, nwords) if nwords else data


def visited_runs(root: str, bucket: int, before_level: int) -> list[Path]:
    """The sorted runs of ``bucket`` of levels before ``before_level`` (a re-run task must not see
    the run it wrote itself the first time)."""
    directory = bucket_dir(root, bucket)
    if not directory.is_dir():
        return []
    runs = []
    for path in sorted(directory.iterdir()):
        m = _RUN.match(path.name)
        if m and int(m.group(1)) < before_level:
            runs.append(path)
    return runs
