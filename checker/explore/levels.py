"""Where the levels of a breadth-first search live: in memory, or in files under a directory.

A level is the states first reached at one depth: their packed words (the frontier the next
level is expanded from), and per state the index of its parent and the label of the action that
reached it (what a counterexample is rebuilt from). The engine adds each chunk's new states to the
level being built, then finishes the level.

``MemoryLevels`` keeps the parents and labels of every level and the words of the newest one.
``DiskLevels`` streams every level's words, parents and labels into three files
(``level-NNNN.words``, ``.parents``, ``.labels``), maps the newest finished level's words back from
disk (the frontier) and reads a parent and label back from the files when a trace asks, so
resident memory holds the visited set and one chunk's buffers, whatever the width of a level, and
the process holds a few files open, whatever the depth.
Durable (``--checkpoint``), it fsyncs every finished level, keeps every level's words, and
records each finished file's size and SHA-256 (``checksums``, hashed from the bytes as they are
written, not read back): the files of every finished level are what a checkpoint needs
(``checkpoint.py``), the visited set being the union of all levels' words; ``reopen`` checks
them against the checkpoint's record before mapping any. Not durable (``DiskLevels.spill``: a
run's levels moved to a temporary directory once they outgrow their share of memory), it fsyncs
nothing, hashes nothing and deletes a level's words once the level has been expanded: only the
parents and labels are needed later.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from pathlib import Path
from typing import Optional

import numpy as np

from kraftcheck.checker.disk_full import is_disk_full
from kraftcheck.checker.explore.checkpoint import (LEVEL_FILE, LEVEL_KINDS, CheckpointDamaged, check_level_file,
                                                   file_checksum, forget_found_digests, level_path)
from kraftcheck.checker.files import DIGEST, file_digest

INITIAL_PARENT = 0xFFFFFFFF  # the parent index of an initial state


class MemoryLevels:
    """Every level's parents and labels in memory; the newest level's words."""

    def __init__(self, nwords: int) -> None:
        self.nwords = nwords
        self.parents: list[np.ndarray] = []  # per finished level, uint32 global parent index
        self.labels: list[np.ndarray] = []   # per finished level, uint16 label
        self.level_start: list[int] = []     # global index of each level's first state
        self.sizes: list[int] = []           # states of each finished level
        self.distinct = 0
        # the finished levels' parents and labels, summed as they finish: held_bytes runs every
        # level, and summing every level each time made a deep narrow run quadratic in its depth
        self._finished_bytes = 0
        self.pending_parents: list[np.ndarray] = []
        self.pending_labels: list[np.ndarray] = []
        # The words of the level being built go into one buffer, and the next level's into the
        # buffer of the level just expanded: a level's words were concatenated from its chunks into
        # fresh memory, and first touching a large array's fresh pages (huge pages the kernel may
        # have to compact first) cost more than the copy, on one thread between the hand-offs.
        self._building = np.empty((0, nwords), np.uint64)
        self._built = 0
        self._starts: list[int] = []  # where each chunk's words start in ``_building``
        self._expanding = np.empty((0, nwords), np.uint64)  # the buffer of the last finished level
        # the most rows each buffer has held: its pages written so far stay resident
        self._building_touched = self._expanding_touched = 0

    @property
    def depth(self) -> int:
        return len(self.level_start)

    def add(self, words: np.ndarray, parents: np.ndarray, labels: np.ndarray) -> None:
        """New states of the level being built (copied: parents and labels are views of the
        engine's reused buffers)."""
        words = np.asarray(words, np.uint64).reshape(-1, self.nwords)
        end = self._built + words.shape[0]
        if end > self._building.shape[0]:  # twice what is needed: a growing level seldom outgrows it
            bigger = np.empty((max(2 * end, 1024), self.nwords), np.uint64)  # untouched rows take no memory
            bigger[: self._built] = self._building[: self._built]
            self._building, self._building_touched = bigger, self._built
        self._building[self._built: end] = words
        self._starts.append(self._built)
        self._built = end
        self._building_touched = max(self._building_touched, end)
        self.pending_parents.append(np.array(parents, np.uint32))
        self.pending_labels.append(np.array(labels, np.uint16))

    @property
    def pending_words(self) -> list[np.ndarray]:
        """The words of each chunk of the level being built (views of its buffer)."""
        ends = self._starts[1:] + [self._built]
        return [self._building[a: b] for a, b in zip(self._starts, ends)]

    def truncate_pending(self, keep_last: int) -> None:
        """Keep only the first ``keep_last`` states of the last chunk added."""
        self._built = min(self._built, self._starts[-1] + keep_last)
        self.pending_parents[-1] = self.pending_parents[-1][:keep_last]
        self.pending_labels[-1] = self.pending_labels[-1][:keep_last]

    @property
    def pending_count(self) -> int:
        return sum(p.shape[0] for p in self.pending_parents)

    def held_bytes(self, frontier: np.ndarray) -> int:
        """Bytes of memory the levels will hold at most: every finished level's parents and
        labels; the words of the level expanded (``frontier``) and of the level being built twice
        over (its buffer grows by copying them), or for each what its buffer held before, if more;
        and the parents and labels being built twice over (``finish_level`` concatenates them)."""
        pending = sum(p.nbytes + lab.nbytes for p, lab in zip(self.pending_parents, self.pending_labels))
        row = 8 * self.nwords
        return (self._finished_bytes
                + max(frontier.nbytes, row * self._expanding_touched)
                + row * max(2 * self._built, self._building_touched) + 2 * pending)

    def finish_level(self) -> np.ndarray:
        """Close the level being built (if it has states) and return its words (the new frontier).
        They are a view of a buffer the level after next is built in: the engine expands the
        frontier before it finishes the next level, and drops it then."""
        words = self._building[: self._built]
        if words.shape[0]:
            self._add_finished_level(np.concatenate(self.pending_parents), np.concatenate(self.pending_labels))
        self._building, self._expanding = self._expanding, self._building
        self._building_touched, self._expanding_touched = self._expanding_touched, self._building_touched
        self._built = 0
        self._starts = []
        self.pending_parents, self.pending_labels = [], []
        return words

    def _add_finished_level(self, parents: np.ndarray, labels: np.ndarray) -> None:
        self.parents.append(parents)
        self.labels.append(labels)
        self._finished_bytes += parents.nbytes + labels.nbytes
        self._note_finished_level(parents.shape[0])

    def _note_finished_level(self, size: int) -> None:
        self.level_start.append(self.distinct)
        self.sizes.append(int(size))
        self.distinct += int(size)

    def parent_of(self, index: int) -> tuple[int, int]:
        """(parent index, label) of state ``index``; (-1, -1) for an initial state."""
        if index >= self.distinct:  # a state of the level being built
            if not self.level_start:
                return -1, -1
            offset = index - self.distinct
            for p, lab in zip(self.pending_parents, self.pending_labels):
                if offset < p.shape[0]:
                    return int(p[offset]), int(lab[offset])
                offset -= p.shape[0]
            raise IndexError(index)
        level = int(np.searchsorted(self.level_start, index, side="right")) - 1
        if level == 0:
            return -1, -1
        offset = index - self.level_start[level]
        return int(self.parents[level][offset]), int(self.labels[level][offset])

    def release(self, frontier: np.ndarray, upto: int) -> None:
        """The engine has expanded ``frontier[:upto]`` (a level's words): nothing to give back
        when the level is in memory (the engine drops it whole afterwards)."""
        return None

    def close(self) -> None:
        return None


def _map(path: Path, dtype, width: Optional[int] = None) -> np.ndarray:
    """A finished level's file as a plain (writable, copy-on-write) ndarray over the mapping, so
    compiled kernels see the same array type as in memory."""
    count = path.stat().st_size // (np.dtype(dtype).itemsize * (width or 1))
    if count == 0:
        return np.empty((0, width) if width else 0, dtype)
    shape = (count, width) if width else (count,)
    return np.memmap(path, dtype=dtype, mode="c", shape=shape).view(np.ndarray)


def _read_one(fd: int, dtype, offset: int) -> int:
    """Element ``offset`` of the file ``fd`` of ``dtype`` elements."""
    size = np.dtype(dtype).itemsize
    return int(np.frombuffer(os.pread(fd, size, offset * size), dtype)[0])


def _mapping_of(array: np.ndarray) -> Optional[mmap.mmap]:
    """The mmap under an array made by ``_map`` (None for an empty level, which maps nothing)."""
    base = array.base
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "_mmap", None) or getattr(base, "base", None)
    return base


class DiskLevels(MemoryLevels):
    """Every level's words, parents and labels in files under ``directory``; finished levels are
    mapped from disk. The level being built goes straight to its files too: the parent and label
    of one of its states (a trace asked for before the level is finished) are read back from them,
    so memory holds nothing per state of any level. ``durable``: fsync every finished level and
    keep every level's words (a checkpoint); else fsync nothing and delete each level's words once
    the next level is finished (it has been expanded by then)."""

    def __init__(self, nwords: int, directory: Path, durable: bool = True) -> None:
        super().__init__(nwords)
        self.durable = durable
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._files: Optional[tuple] = None
        self._pending = 0      # states of the level being built, in its files
        self._last_chunk = 0   # how many of them the last add() wrote
        # Only the newest finished level's words are mapped (the frontier), with the mapping under
        # them, so that expanded pages can be dropped from memory; the parents and labels of a
        # finished level are read back from its files when a trace asks (``parent_of``). A mapping
        # holds its file open: one per file of every level ran out of file descriptors past a few
        # hundred levels (1,024 descriptors, the usual limit), an internal error mid-run.
        self.frontier_words = np.empty((0, nwords), np.uint64)
        self._frontier_map: Optional[mmap.mmap] = None
        self._words_kept_from = 0  # not durable: the first level whose words file is not deleted yet
        # durable: per finished level, kind -> file_checksum (size and digest) of its file
        self.checksums: list[dict[str, dict]] = []
        self._hashes: Optional[tuple] = None  # of the level being built, as its bytes are written
        self._rehash = False  # a truncation made the running hashes wrong: hash the files once finished

    def path(self, level: int, kind: str) -> Path:
        return level_path(self.directory, level, kind)

    def _open(self) -> tuple:
        if self._files is None:
            level = self.depth
            self._files = tuple(open(self.path(level, kind), "w+b") for kind in LEVEL_KINDS)
            self._hashes = tuple(hashlib.new(DIGEST) for _ in LEVEL_KINDS) if self.durable else None
            self._rehash = False
        return self._files

    @classmethod
    def spill(cls, memory: MemoryLevels, directory: Path, frontier: np.ndarray) -> "DiskLevels":
        """Levels not durable under ``directory`` holding what ``memory`` holds: every finished
        level's parents and labels, the words of the last one (``frontier``, the level being
        expanded) and the level being built, which goes on in files. Returns them; the caller
        drops ``memory`` and expands the returned ``frontier_words`` instead of ``frontier``
        (the same states, mapped), so that both leave memory."""
        disk = cls(memory.nwords, directory, durable=False)
        last = memory.depth - 1
        for level, (parents, labels) in enumerate(zip(memory.parents, memory.labels)):
            words = frontier if level == last else np.empty((0, memory.nwords), np.uint64)
            for kind, array in (("words", words), ("parents", parents), ("labels", labels)):
                with open(disk.path(level, kind), "wb") as f:
                    f.write(memoryview(np.ascontiguousarray(array)))  # no copy of a level in memory
            disk._map_level(level)
        for words, parents, labels in zip(memory.pending_words, memory.pending_parents, memory.pending_labels):
            disk.add(words, parents, labels)
        return disk

    def held_bytes(self, frontier: np.ndarray) -> int:
        """Nothing per state: the levels are files, mapped (what of them is resident is in the
        process's resident memory, which --max-memory counts)."""
        return 0

    def add(self, words: np.ndarray, parents: np.ndarray, labels: np.ndarray) -> None:
        files = self._open()
        for k, (f, a, dtype) in enumerate(zip(files, (words, parents, labels), (np.uint64, np.uint32, np.uint16))):
            data = memoryview(np.ascontiguousarray(a, dtype))
            f.write(data)
            if self._hashes is not None:
                self._hashes[k].update(data)
        self._last_chunk = int(np.shape(parents)[0])
        self._pending += self._last_chunk

    @property
    def pending_count(self) -> int:
        return self._pending

    def truncate_pending(self, keep_last: int) -> None:
        drop = self._last_chunk - keep_last
        self._pending -= drop
        self._last_chunk = keep_last
        files = self._open()
        self._rehash = True
        for f, size in zip(files, (8 * self.nwords, 4, 2)):
            f.flush()
            f.truncate(f.tell() - drop * size)
            f.seek(0, os.SEEK_END)

    def parent_of(self, index: int) -> tuple[int, int]:
        if not self.level_start:
            return -1, -1
        if index >= self.distinct:  # a state of the level being built, in its open files
            offset = index - self.distinct
            if offset >= self._pending:
                raise IndexError(index)
            _, parents_file, labels_file = self._open()
            for f in (parents_file, labels_file):
                f.flush()
            return (_read_one(parents_file.fileno(), np.uint32, offset),
                    _read_one(labels_file.fileno(), np.uint16, offset))
        level = int(np.searchsorted(self.level_start, index, side="right")) - 1
        if level == 0:
            return -1, -1
        offset = index - self.level_start[level]
        out = []
        for kind, dtype in (("parents", np.uint32), ("labels", np.uint16)):
            fd = os.open(self.path(level, kind), os.O_RDONLY)
            try:
                out.append(_read_one(fd, dtype, offset))
            finally:
                os.close(fd)
        return out[0], out[1]

    def finish_level(self) -> np.ndarray:
        """Close the level's files (durable: flushed and fsynced), map them, return its words.
        Not durable: the words of the levels before it, expanded now, are deleted."""
        count = self._pending
        self._pending = self._last_chunk = 0
        if self._files is not None:
            entries = {}
            for kind, f, digest in zip(LEVEL_KINDS, self._files, self._hashes or (None,) * len(LEVEL_KINDS)):
                f.flush()
                if self.durable:
                    os.fsync(f.fileno())
                    entries[kind] = file_checksum(os.fstat(f.fileno()).st_size, file_digest(self.path(self.depth, kind))
                                                 if self._rehash else digest.hexdigest())
                f.close()
            self._files = self._hashes = None
            if self.durable and count:
                self.checksums.append(entries)
        if not self.durable:
            self._delete_expanded_words()
        if count == 0:
            for kind in ("words", "parents", "labels"):
                self.path(self.depth, kind).unlink(missing_ok=True)
            return np.empty((0, self.nwords), np.uint64)
        return self._map_level(self.depth)

    def _delete_expanded_words(self) -> None:
        """Every finished level has been expanded once a new level is finished: their words files
        go (a mapping still open keeps its pages until the engine drops the array)."""
        self._drop_frontier()
        for level in range(self._words_kept_from, self.depth):
            self.path(level, "words").unlink(missing_ok=True)
        self._words_kept_from = self.depth

    def _drop_frontier(self) -> None:
        """Forget the mapped words of the newest level (the engine holds them while it expands)."""
        self.frontier_words = np.empty((0, self.nwords), np.uint64)
        self._frontier_map = None

    def level_words(self, level: int) -> np.ndarray:
        """The words of finished ``level``, mapped from its file (a durable run keeps every level's)."""
        if level == self.depth - 1 and self.frontier_words.shape[0]:
            return self.frontier_words
        return _map(self.path(level, "words"), np.uint64, self.nwords)

    def _map_level(self, level: int) -> np.ndarray:
        """Note finished ``level`` (its size from its parents file) and map its words, the new
        frontier."""
        self._note_finished_level(self.path(level, "parents").stat().st_size // 4)
        self.frontier_words = _map(self.path(level, "words"), np.uint64, self.nwords)
        self._frontier_map = _mapping_of(self.frontier_words)
        return self.frontier_words

    def release(self, frontier: np.ndarray, upto: int) -> None:
        """Drop the pages of ``frontier[:upto]`` from this process's memory: they were read once
        to be expanded, so resident memory stays one chunk of the frontier, not the whole level
        (the pages stay in the OS's file cache, and a later read maps them again)."""
        mapping = self._frontier_map
        if frontier is self.frontier_words and mapping is not None:
            end = upto * 8 * self.nwords // mmap.PAGESIZE * mmap.PAGESIZE
            if end > 0:
                mapping.madvise(mmap.MADV_DONTNEED, 0, min(end, len(mapping)))

    def reopen(self, levels: int, sizes: list[int], checksums: Optional[list[dict[str, dict]]] = None) \
            -> np.ndarray:
        """Map the first ``levels`` finished levels (as a checkpoint recorded them: ``sizes``
        states each, ``checksums`` their files' sizes and digests), once every one of their files
        is found to be as recorded (else ``CheckpointDamaged`` names the first that is not), and
        drop anything written after them; returns the last level's words."""
        checksums = checksums or []
        if len(checksums) != levels or len(sizes) != levels:
            raise CheckpointDamaged(f"checkpoint {self.directory}: it records {levels} levels but sizes of "
                                    f"{len(sizes)} and checksums of {len(checksums)}")
        for level in range(levels):
            for kind, size in zip(LEVEL_KINDS, (8 * self.nwords, 4, 2)):
                checksum = checksums[level].get(kind)
                if checksum is None or checksum["bytes"] != sizes[level] * size:
                    raise CheckpointDamaged(f"checkpoint {self.directory}: level {level} holds {sizes[level]:,} "
                                            f"states but its {kind} file is recorded as {checksum}")
                check_level_file(self.path(level, kind), checksum)
        for level in range(levels):
            self._map_level(level)  # each maps its words in turn: the last level's stay mapped
        forget_found_digests()
        self.checksums = list(checksums)
        for extra in self.directory.glob("level-*"):  # a file of another name is not the run's: left
            written = LEVEL_FILE.fullmatch(extra.name)
            if written and int(written.group(1)) >= levels:
                extra.unlink()
        return self.frontier_words if levels else np.zeros((0, self.nwords), np.uint64)

    def close(self) -> None:
        if self._files is not None:
            for f in self._files:
                try:
                    f.close()
                except OSError as e:
                    # what is left to flush belongs to a level the disk stopped, which no one reads
                    # (a finished level was flushed by finish_level): the run ends incomplete anyway
                    if not is_disk_full(e):
                        raise
            self._files = None
