"""The compact exact visited set: tree compression of packed states (Laarman et al., as in LTSmin).

A packed state is split into two halves, its first ``split`` words and the rest. Each half is
interned in a table of the distinct halves seen so far, which numbers it (a 31-bit index, in the
order halves first occur). The state itself is kept as the pair of its halves' indices, one
word, in a sharded root table (``visited.VisitedSet`` of one word a state). The map from a state
to its pair is one to one (a half's index names exactly one half), so the set is exact: no state
is ever omitted or counted twice, as with the packed states themselves. What it saves is the
structure of a model's states: few distinct halves over many states (each local part of the
state occurs with many others) make a state cost about one word over the root's load factor
instead of all its words. The halves of a state already held are already interned, so the half
tables hold exactly the halves of the states in the set.

A state of one word is split into its low 32 and high 31 bits.

Threads: the engine gives rows bucketed by the top bits of the state's fingerprint and each
thread owns whole shards of the root; the two half tables are shared by every shard, so they are
filled before the root, each by one thread (the two at once), and the root's shards then in
parallel as ``VisitedSet``'s are. Each half table grows as the root's shards do (Lemire's
multiply-shift home slots, by 1.15 once it passes 1 GiB), alone.

The readable reference is Python's ``set`` of the states' words (``tests/test_visited_compact.py``).
"""

from __future__ import annotations

import numpy as np
from numba import int64, njit, uint64

from kraftcheck.checker.kernels.hashing import GOLDEN, fingerprint_step, fingerprints
from kraftcheck.checker.kernels.threads import run_parts, thread_count
from kraftcheck.checker.kernels.visited import (COARSE_GROWTH, EMPTY, FINE_GROWTH_FROM_BYTES, GROWTH, MAX_LOAD,
                                                MAX_SHARD_CAPACITY, VisitedSet, bucket_by_shard, home_slot,
                                                restore_from, rows_in_use)

MAX_HALVES = (1 << 31) - 1  # a half's index takes 31 bits, so a pair of them is never all ones
LOW32 = np.uint64(0xFFFFFFFF)
# The root holds one word a state: a higher load costs fewer bytes than it costs probes (as for
# fingerprints), and its bytes are most of the set's.
ROOT_MAX_LOAD = 0.85


@njit(cache=True, inline="always")
def half_hash(words, row, lo, hi):
    """The fingerprint of ``words[row, lo:hi]``: a half of a state, or a half table's entry."""
    h = uint64(GOLDEN)
    for k in range(lo, hi):
        h = fingerprint_step(h, words[row, k])
    return h


@njit(cache=True, inline="always")
def _same_half(table, slot, words, row, lo):
    for k in range(table.shape[1]):
        if table[slot, k] != words[row, lo + k]:
            return False
    return True


@njit(cache=True, inline="always")
def _intern_one(table, index, count, words, row, lo):
    """The index of the half ``words[row, lo:lo + table.shape[1]]``; a new half gets ``count``."""
    capacity = table.shape[0]
    slot = home_slot(half_hash(words, row, lo, lo + table.shape[1]), capacity)
    while True:
        if table[slot, 0] == EMPTY:
            for k in range(table.shape[1]):
                table[slot, k] = words[row, lo + k]
            index[slot] = count
            return count
        if _same_half(table, slot, words, row, lo):
            return int64(index[slot])
        slot += 1
        if slot == capacity:
            slot = 0


@njit(cache=True, nogil=True)
def intern_halves(table, index, count, words, lo, order, first, last, out):
    """Intern the half ``words[r, lo:lo + table.shape[1]]`` of each row r of ``order[first:last]``
    (rows may repeat); ``out[r]`` its index. Returns the number of halves held afterwards (the new
    ones numbered from ``count`` on, in row order). The table has room for every row's half."""
    for j in range(first, last):
        r = order[j]
        i = _intern_one(table, index, count, words, r, lo)
        if i == count:
            count += 1
        out[r] = i
    return count


@njit(cache=True, nogil=True)
def rehash_halves(old, old_index, new, new_index):
    """Move every half of ``old`` (with its index) into the larger ``new``."""
    for j in range(old.shape[0]):
        if old[j, 0] != EMPTY:
            i = _intern_one(new, new_index, old_index[j], old, j, 0)
            if i != old_index[j]:
                raise RuntimeError("internal: a half table holds a half twice")


@njit(cache=True, nogil=True)
def pair_keys(left, right, order, first, last, keys, key_hashes):
    """A state's key, its halves' indices as one word (left's high), and the key's fingerprint
    (which places it in the root's shard table), for each row of ``order[first:last]``."""
    for j in range(first, last):
        r = order[j]
        key = (uint64(left[r]) << uint64(32)) | uint64(right[r])
        keys[r, 0] = key
        key_hashes[r] = fingerprint_step(uint64(GOLDEN), key)


@njit(cache=True)
def split_single_words(words, out):
    """A state of one word as two: its low 32 bits and its high 31 bits."""
    for r in range(words.shape[0]):
        out[r, 0] = words[r, 0] & uint64(0xFFFFFFFF)
        out[r, 1] = words[r, 0] >> uint64(32)


class HalfTable:
    """The distinct halves of width ``nwords`` words: an open-addressing table of the halves with
    each one's index beside it, grown (alone) before each batch so that the batch fits."""

    def __init__(self, nwords: int, initial_cap: int = 1 << 10, max_load: float = MAX_LOAD,
                 growth: float = GROWTH, fine_growth_from_bytes: int = FINE_GROWTH_FROM_BYTES) -> None:
        self.nwords = nwords
        self.max_load, self.growth, self.fine_growth_from_bytes = max_load, growth, fine_growth_from_bytes
        self.table = np.full((initial_cap, nwords), EMPTY, np.uint64)
        self.index = np.zeros(initial_cap, np.uint32)
        self.count = 0

    @property
    def nbytes(self) -> int:
        return self.table.nbytes + self.index.nbytes

    def reserve(self, load: int) -> None:
        """Grow until ``load`` halves fit under the maximum load factor."""
        if load > MAX_HALVES:
            raise MemoryError(f"the compact visited set would hold more than {MAX_HALVES} distinct halves")
        cap = self.table.shape[0]
        factor = self.growth if self.nbytes >= self.fine_growth_from_bytes else COARSE_GROWTH
        while load > self.max_load * cap:
            cap = int(cap * factor) + 1
        if cap > MAX_SHARD_CAPACITY:
            raise MemoryError(f"a half table of the visited set would need {cap} slots (at most {MAX_SHARD_CAPACITY})")
        if cap != self.table.shape[0]:
            table = np.full((cap, self.nwords), EMPTY, np.uint64)
            index = np.zeros(cap, np.uint32)
            rehash_halves(self.table, self.index, table, index)
            self.table, self.index = table, index

    def intern(self, words: np.ndarray, lo: int, order: np.ndarray, first: int, last: int, out: np.ndarray) -> None:
        """``out[r]``: the index of the half ``words[r, lo:lo + nwords]``, r in ``order[first:last]``."""
        self.reserve(self.count + (last - first))
        self.count = intern_halves(self.table, self.index, self.count, words, lo, order, first, last, out)


class CompactVisitedSet:
    """Python face of the tree-compressed set: the two half tables and the root's shards
    (``visited_sets.VisitedStates``, exact), with validated calls.

    ``split``: the words of a state's first half (default: half its words, rounded down; a state
    of one word is split into 32 and 31 bits).
    """

    def __init__(self, nwords: int, shard_bits: int = 6, initial_shard_cap: int = 1 << 10,
                 split: int | None = None, fine_growth_from_bytes: int = FINE_GROWTH_FROM_BYTES) -> None:
        if not 1 <= nwords <= 64:
            raise ValueError("a packed state has 1 to 64 words")
        self.nwords = nwords
        self.single_word = nwords == 1
        width = 2 if self.single_word else nwords
        self.split = 1 if self.single_word else (nwords // 2 if split is None else split)
        if not 1 <= self.split < width:
            raise ValueError(f"split must be 1..{width - 1} words for a state of {nwords}")
        self.width = width
        self.halves = (HalfTable(self.split, initial_shard_cap, fine_growth_from_bytes=fine_growth_from_bytes),
                       HalfTable(width - self.split, initial_shard_cap, fine_growth_from_bytes=fine_growth_from_bytes))
        self.root = VisitedSet(1, shard_bits, initial_shard_cap, ROOT_MAX_LOAD, GROWTH,
                               fine_growth_from_bytes=fine_growth_from_bytes)
        self.shard_bits, self.nshards = shard_bits, self.root.nshards
        self._offsets = np.zeros(self.nshards + 1, np.int64)
        self._order = np.empty(0, np.int64)
        # per row of a call: the halves' indices, the pair key and its fingerprint (reused buffers)
        self._left = self._right = np.empty(0, np.int64)
        self._keys = np.empty((0, 1), np.uint64)
        self._key_hashes = np.empty(0, np.uint64)
        self._split_words = np.empty((0, 2), np.uint64)

    def __len__(self) -> int:
        return len(self.root)

    @property
    def nbytes(self) -> int:
        return self.root.nbytes + sum(h.nbytes for h in self.halves)

    @property
    def distinct_halves(self) -> tuple[int, int]:
        """How many distinct first and second halves the set holds."""
        return self.halves[0].count, self.halves[1].count

    def restore(self, words: np.ndarray) -> None:
        """Insert every state of ``words`` (a level of a checkpoint)."""
        restore_from(self, words)

    def _check(self, words: np.ndarray, hashes: np.ndarray, call: str) -> None:
        if words.ndim != 2 or words.shape[1] != self.nwords or words.dtype != np.uint64:
            raise TypeError(f"{call}() needs a 2-D uint64 array with {self.nwords} words per row")
        if hashes.ndim != 1 or hashes.shape[0] < words.shape[0] or hashes.dtype != np.uint64:
            raise TypeError(f"{call}() needs one uint64 fingerprint per row")

    def insert(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int | None = None,
               is_new: np.ndarray | None = None) -> np.ndarray:
        """As ``VisitedSet.insert``: a uint8 array over ``words``, 1 on first occurrences."""
        self._check(words, hashes, "insert")
        if rows.dtype != np.int64:
            raise TypeError("insert() needs int64 row numbers")
        nrows = rows.shape[0] if nrows is None else nrows
        used = rows_in_use(rows, nrows)
        if self._order.shape[0] < nrows:
            self._order = np.empty(max(nrows, 2 * self._order.shape[0]), np.int64)
        # shards by the state's fingerprint, as the engine buckets them (the same state, the same shard)
        bucket_by_shard(hashes, rows, nrows, self.shard_bits, self._order, self._offsets)
        if is_new is None:
            is_new = np.zeros(words.shape[0], np.uint8)
        else:
            is_new[:used] = 0
        self.insert_bucketed(words, hashes, self._order, self._offsets.reshape(1, -1), is_new)
        return is_new

    def insert_bucketed(self, words: np.ndarray, hashes: np.ndarray, order: np.ndarray, offsets: np.ndarray,
                        is_new: np.ndarray) -> None:
        """As ``VisitedSet.insert_bucketed``: part j's rows of shard k are
        ``order[offsets[j, k]:offsets[j, k + 1]]``; first occurrences marked in ``is_new``."""
        self._check(words, hashes, "insert_bucketed")
        if order.dtype != np.int64:
            raise TypeError("insert_bucketed() needs int64 row numbers")
        if offsets.ndim != 2 or offsets.shape[1] != self.nshards + 1 or offsets.dtype != np.int64:
            raise TypeError(f"insert_bucketed() needs int64 offsets of shape (parts, {self.nshards + 1})")
        offsets = np.ascontiguousarray(offsets)
        nrows = words.shape[0]
        if self.single_word:
            if self._split_words.shape[0] < nrows:
                self._split_words = np.empty((nrows, 2), np.uint64)
            split_single_words(words, self._split_words[:nrows])
            words = self._split_words[:nrows]
        if self._left.shape[0] < nrows:
            size = max(nrows, 2 * self._left.shape[0])
            self._left, self._right = np.empty(size, np.int64), np.empty(size, np.int64)
            self._keys, self._key_hashes = np.empty((size, 1), np.uint64), np.empty(size, np.uint64)
        # every part's rows, in the engine's order: order[offsets[j, 0]:offsets[j, -1]] for each part j
        spans = [(int(offsets[j, 0]), int(offsets[j, -1])) for j in range(offsets.shape[0])]
        left, right, keys, key_hashes = self._left, self._right, self._keys, self._key_hashes
        halves = ((self.halves[0], 0, left), (self.halves[1], self.split, right))
        threads = min(2, thread_count()) if sum(b - a for a, b in spans) > 4096 else 1

        def intern(which: int) -> None:
            for t in range(which, 2, threads):
                table, lo, out = halves[t]
                for a, b in spans:
                    if b > a:
                        table.intern(words, lo, order, a, b, out)

        run_parts(intern, threads)
        for a, b in spans:
            pair_keys(left, right, order, a, b, keys, key_hashes)
        self.root.insert_bucketed(keys[:nrows], key_hashes, order, offsets, is_new)
