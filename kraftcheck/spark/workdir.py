"""Where a Spark run keeps its data: the levels and the visited set as files under one work dir.

Executors and the driver read and write the same directory, so on a cluster it must be a shared
file system (NFS, a mounted volume); on one machine any directory works. Layout:

``levels/level-LLLL/part-PPPPP.{words,parents,labels}``
    the states first reached at BFS level L, in the local engine's order, cut in P parts of
    consecutive global indices: packed words (``nwords`` uint64 each), the global index of each
    state's parent (uint64; ``INITIAL_PARENT`` for an initial state) and its label (uint16).
``visited/bucket-BBBBB/runs-FFFF-LLLL.fps`` (and ``.words``)
    the states of levels F..L whose fingerprint falls in hash bucket B, sorted by (fingerprint,
    words): the 64-bit fingerprints in ``.fps``, the packed states beside them in ``.words`` (none
    with ``--fingerprints``, where the fingerprints are the visited set). The visited set,
    partitioned by hash exactly as each level's candidates are. A bucket's runs cover levels 0..L
    without gaps; each level adds a run of its new states, merged with the runs before it while
    they are not much larger (``MERGE_RATIO``), so a bucket has a few runs of decreasing size
    whatever the depth, and each state is rewritten a few times in all.
``candidates/level-LLLL/from-TTTTT.{words,keys,bounds}``
    the candidate successors of level L's states in range T (the states an ordering task wrote
    as part T, or the T-th of P even slices after a resume): packed words, keys (int64,
    ``index * nlabels + label`` with the index counted from the range's first state) and, since
    they are grouped by hash bucket, the P + 1 offsets where each bucket's candidates start. The
    next job's deduplication reads them; the driver removes them once that job is done, and a
    resumed run removes them all and expands its last level again.

The files of levels and visited runs are fsynced with their folders, and their sizes and SHA-256
digests go to the manifest, which a resume checks every file against before any is read
(``damage``). Every file is written under a temporary name and renamed, with a name that depends only on what
it holds, so a task that Spark runs twice writes the same file twice and a reader never sees half.
A run counts once its ``.fps`` file exists (written last). Runs a merge replaced are removed by
the driver once the level that merged them is committed (``stale_runs``), never by a task: a task
Spark runs again must find the runs its first attempt read.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path
from typing import Optional

import numpy as np

from kraftcheck.checker.disk_full import is_disk_full
from kraftcheck.checker.explore.checkpoint import RESTORE, CheckpointDamaged, check_level_file, file_checksum
from kraftcheck.checker.files import file_digest, sync_directory

INITIAL_PARENT = np.uint64(0xFFFFFFFFFFFFFFFF)  # the parent index of an initial state
_RUN = re.compile(r"runs-(\d{4,})-(\d{4,})\.fps$")


def level_dir(root: str, level: int) -> Path:
    return Path(root) / "levels" / f"level-{level:04d}"


def part_path(root: str, level: int, part: int, kind: str) -> Path:
    return level_dir(root, level) / f"part-{part:05d}.{kind}"


def candidates_dir(root: str, level: int) -> Path:
    return Path(root) / "candidates" / f"level-{level:04d}"


def candidate_path(root: str, level: int, task: int, kind: str) -> Path:
    """The ``kind`` file (``words``, ``keys`` or ``bounds``) of level ``level``'s candidates from range ``task``."""
    return candidates_dir(root, level) / f"from-{task:05d}.{kind}"


def remove_candidates(root: str, level: Optional[int] = None) -> None:
    """Remove level ``level``'s candidate files (every level's, and their folder, if None)."""
    shutil.rmtree(Path(root) / "candidates" if level is None else candidates_dir(root, level), ignore_errors=True)


def bucket_dir(root: str, bucket: int) -> Path:
    return Path(root) / "visited" / f"bucket-{bucket:05d}"


def run_path(root: str, bucket: int, first: int, last: int, kind: str = "fps") -> Path:
    """The ``kind`` file (``fps`` or ``words``) of bucket ``bucket``'s run of levels first..last."""
    return bucket_dir(root, bucket) / f"runs-{run_name(first, last)}.{kind}"


def save(path: Path, array: np.ndarray, durable: bool = True) -> Optional[dict]:
    """Write ``array``'s bytes to ``path`` atomically (temporary file in the same directory,
    rename); ``durable``: on disk (file and rename) before this returns, so that the manifest
    that names it, written after, never names data a crash can take back, and its size and
    digest returned for the manifest (``checkpoint.file_checksum``; None if not durable). A full
    disk raises ``OSError`` ENOSPC (numpy's own ``tofile`` says only "N requested and M written")."""
    root = path.parent.parent.parent  # every file is at ROOT/KIND/FOLDER/FILE
    if not root.is_dir():  # a work dir removed mid-run stays removed: no task recreates it
        raise FileNotFoundError(errno.ENOENT, "the work dir is gone", str(root))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    written = None
    try:
        with open(tmp, "wb") as f:
            f.write(np.ascontiguousarray(array).reshape(-1).view(np.uint8))  # no copy of the bytes
            if durable:
                f.flush()
                os.fsync(f.fileno())
                written = file_checksum(os.fstat(f.fileno()).st_size, file_digest(tmp))
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)  # a full disk keeps no half file
        if is_disk_full(e) and not e.filename:
            raise OSError(e.errno, e.strerror, str(path)) from None  # a failed flush names no file
        raise
    if durable:
        sync_directory(path.parent)
    return written


def sync_folders(root: str) -> None:
    """Make the work dir's folder entries durable (a new level's folder in ``levels``; ``levels``
    and ``visited`` themselves): ``save`` syncs a file and the folder it is in, not the folders above."""
    for folder in (Path(root) / "levels", Path(root) / "visited", Path(root)):
        sync_directory(folder)


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


def runs_present(root: str, bucket: int) -> list[tuple[int, int]]:
    """(first, last) level of every complete run of ``bucket``, in order."""
    directory = bucket_dir(root, bucket)
    if not directory.is_dir():
        return []
    return sorted((int(m.group(1)), int(m.group(2))) for m in map(_RUN.match, os.listdir(directory)) if m)


def run_cover(runs: list[tuple[int, int]], through: int) -> list[tuple[int, int]]:
    """The runs that hold levels 0..``through`` once each: from level 0 on, the run reaching
    furthest (a merged run over the runs it replaced, if those are still there), ignoring runs
    past ``through`` (a task run again must not read what its first attempt wrote)."""
    cover, start = [], 0
    while start <= through:
        reach = [last for first, last in runs if first == start and last <= through]
        if not reach:
            raise FileNotFoundError(f"no visited run starts at level {start} (runs present: {runs})")
        cover.append((start, max(reach)))
        start = max(reach) + 1
    return cover


def visited_runs(root: str, bucket: int, through: int) -> list[tuple[int, int]]:
    """The runs of ``bucket`` that hold its states of levels 0..``through``, oldest first."""
    return run_cover(runs_present(root, bucket), through) if through >= 0 else []


def run_size(root: str, bucket: int, run: tuple[int, int]) -> int:
    """States in a run (from its file's size: 8 bytes a fingerprint)."""
    return run_path(root, bucket, *run).stat().st_size // 8


def stale_runs(root: str, bucket: int, through: int) -> list[tuple[int, int]]:
    """Runs of ``bucket`` not in the cover of levels 0..``through``: replaced by a merge, or (after
    a killed driver) written for a level that was never committed."""
    present = runs_present(root, bucket)
    keep = set(run_cover(present, through)) if through >= 0 else set()
    return [run for run in present if run not in keep]


def remove_run(root: str, bucket: int, run: tuple[int, int]) -> None:
    """Remove a run, its ``.fps`` first (then it no longer counts), then its ``.words``."""
    for kind in ("fps", "words"):
        run_path(root, bucket, *run, kind).unlink(missing_ok=True)


def damage(root: str, manifest: dict, partitions: int) -> Optional[str]:
    """What in ``root`` does not hold the finished levels ``manifest`` describes: a part file or a
    visited run missing, cut short or changed since its writer recorded its size and digest
    (``level_files``, ``visited_files``), or a bucket whose runs are not the ones named; None if
    everything is there as written. A resumed run must not build on files that are gone or damaged."""
    if "level_files" not in manifest:
        return "its files carry no checksums (written by an earlier kraftcheck), so they cannot be verified"
    try:
        for level, parts in enumerate(manifest["level_files"]):
            for part, files in enumerate(parts):
                for kind, written in files.items():
                    check_level_file(part_path(root, level, part, kind), written)
        through = len(manifest["level_files"]) - 1
        for bucket in range(partitions):
            named = manifest["visited_files"].get(str(bucket), {})
            try:
                cover = visited_runs(root, bucket, through)
            except FileNotFoundError as e:
                return f"bucket {bucket}'s visited set: {e}"
            if sorted(run_name(*run) for run in cover) != sorted(named):
                return (f"bucket {bucket}'s visited runs are {[run_name(*run) for run in cover]} where the "
                        f"manifest names {sorted(named)}")
            for run in cover:
                for kind, written in named[run_name(*run)].items():
                    check_level_file(run_path(root, bucket, *run, kind), written)
    except CheckpointDamaged as e:
        return str(e).removesuffix(f"; {RESTORE}")
    return None


def run_name(first: int, last: int) -> str:
    """How a manifest names a run of levels first..last (its files' name without the kind)."""
    return f"{first:04d}-{last:04d}"
