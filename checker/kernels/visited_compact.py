"""The compact exact visited set: tree compression of packed states (Laarman et al., as in LTSmin).

A packed state is split into two halves, its first ``split`` words and the rest. Each half is
interned in a table of the distinct halves seen so far, which numbers it (a 31-bit index that
never changes). The state itself is kept as the pair of its halves' indices, one
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
filled before the root: each is split in parts by the top bits of the half's fingerprint, and
each part is filled by one thread; then the root's shards in parallel, as ``VisitedSet``'s are.
Each part of a half table grows alone, as the root's shards do (Lemire's multiply-shift home
slots, by 1.15 once the table passes 1 GiB), so growing holds one part or shard twice at most.

The readable reference is Python's ``set`` of the states' words (``tests/test_visited_compact.py``).
"""

from __future__ import annotations

import numpy as np
from numba import int64, njit, uint64

from kraftcheck.checker.kernels.hashing import GOLDEN, fingerprint_step
from kraftcheck.checker.kernels.prefetch import prefetch_row
from kraftcheck.checker.kernels.threads import run_parts, thread_count
from kraftcheck.checker.kernels.visited import (COARSE_GROWTH, EMPTY, FINE_GROWTH_FROM_BYTES, GROWTH, MAX_LOAD,
                                                MAX_SHARD_CAPACITY, PREFETCH_DISTANCE, VisitedSet, home_slot,
                                                insert_as_one_part, restore_from)

MAX_HALVES = (1 << 31) - 1  # a half's index takes 31 bits, so a pair of them is never all ones
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
    for k in range(table.shape[1] - 1):
        if table[slot, k] != words[row, lo + k]:
            return False
    return True


@njit(cache=True, inline="always")
def _intern_one(table, number, words, row, lo, h):
    """The index of the half ``words[row, lo:lo + width]`` (fingerprint ``h``) in one part of a
    half table (a slot: the half's ``width`` words, then its index); a new half gets ``number``."""
    capacity = table.shape[0]
    width = table.shape[1] - 1
    slot = home_slot(h, capacity)
    while True:
        if table[slot, 0] == EMPTY:
            for k in range(width):
                table[slot, k] = words[row, lo + k]
            table[slot, width] = number
            return number
        if _same_half(table, slot, words, row, lo):
            return int64(table[slot, width])
        slot += 1
        if slot == capacity:
            slot = 0


@njit(cache=True)
def given_rows(order, offsets, marks, rows):
    """The rows part j gives (``order[offsets[j, 0]:offsets[j, -1]]``, for every part j) into
    ``rows``, once each and, within a part, in increasing order; returns how many. Each part's
    rows are found by a pass over the span between its smallest and largest row only: a part's
    positions are dense in its own region of the engine's buffers, which may hold far more rows
    than are given (the regions are sized for every successor). ``marks`` is zero over every row,
    and is left so."""
    n = 0
    for j in range(offsets.shape[0]):
        first, last = offsets[j, 0], offsets[j, offsets.shape[1] - 1]
        if first == last:
            continue
        lo, hi = order[first], order[first]
        for i in range(first, last):
            r = order[i]
            marks[r] = 1
            lo = min(lo, r)
            hi = max(hi, r)
        for r in range(lo, hi + 1):
            if marks[r]:
                marks[r] = 0
                rows[n] = r
                n += 1
    return n


@njit(cache=True)
def half_hashes(words, rows, split, part_bits, threads, left_hashes, right_hashes, part_rows, owned, owned_count):
    """For each row r of ``rows``: the fingerprints of its halves ``words[r, :split]`` and
    ``words[r, split:]``; ``part_rows[h, p]`` counts the rows whose half h falls in part p of its
    table (the top ``part_bits`` of its fingerprint). The rows are also dealt to the threads that
    will intern their halves, by part (p % threads): half h's of thread t are
    ``owned[h, t, :owned_count[h, t]]``, in the order of ``rows``."""
    shift = uint64(64 - part_bits)
    nwords = words.shape[1]
    for i in range(rows.shape[0]):
        r = rows[i]
        a = half_hash(words, r, 0, split)
        b = half_hash(words, r, split, nwords)
        left_hashes[r], right_hashes[r] = a, b
        pa, pb = int64(a >> shift), int64(b >> shift)
        part_rows[0, pa] += 1
        part_rows[1, pb] += 1
        ta, tb = pa % threads, pb % threads
        owned[0, ta, owned_count[0, ta]] = r
        owned_count[0, ta] += 1
        owned[1, tb, owned_count[1, tb]] = r
        owned_count[1, tb] += 1


@njit(cache=True, nogil=True)
def intern_halves(tables, counts, part_bits, words, lo, hashes, rows, out):
    """Intern the half at ``words[r, lo:]`` of each row r of ``rows``, in that order, in the part
    of the half table ``tables`` (one table a part; a slot: the half's words, then its index) its
    fingerprint's top ``part_bits`` choose; the caller gives each thread the rows of its own parts
    (``half_hashes``), so no other thread writes them. ``out[r]``: the half's index, its part's
    own number for it times the number of parts plus the part; a new half in part p gets the
    number ``counts[p]``, which then grows by one. Every part has room for every row's half. The
    home slot of the row PREFETCH_DISTANCE ahead is prefetched."""
    nparts = len(tables)
    shift = uint64(64 - part_bits)
    n = rows.shape[0]
    for i in range(n):
        if i + PREFETCH_DISTANCE < n:
            h = hashes[rows[i + PREFETCH_DISTANCE]]
            q = int64(h >> shift)
            prefetch_row(tables[q], home_slot(h, tables[q].shape[0]))
        r = rows[i]
        p = int64(hashes[r] >> shift)
        number = counts[p] * nparts + p
        k = _intern_one(tables[p], number, words, r, lo, hashes[r])
        if k == number:
            counts[p] += 1
        out[r] = k


@njit(cache=True, nogil=True)
def rehash_halves(old, new):
    """Move every half of ``old`` (with its index) into the larger ``new``."""
    width = old.shape[1] - 1
    for j in range(old.shape[0]):
        if old[j, 0] != EMPTY:
            number = int64(old[j, width])
            if _intern_one(new, number, old, j, 0, half_hash(old, j, 0, width)) != number:
                raise RuntimeError("internal: a half table holds a half twice")


@njit(cache=True)
def pair_keys(rows, left, right, keys, key_hashes):
    """Each given state's key, its halves' indices as one word (left's high), and the key's
    fingerprint (which places it in the root's shard table)."""
    for i in range(rows.shape[0]):
        r = rows[i]
        key = (uint64(left[r]) << uint64(32)) | uint64(right[r])
        keys[r, 0] = key
        key_hashes[r] = fingerprint_step(uint64(GOLDEN), key)


@njit(cache=True)
def split_single_words(words, rows, out):
    """A state of one word as two: its low 32 bits and its high 31 bits (the given rows only)."""
    for i in range(rows.shape[0]):
        r = rows[i]
        out[r, 0] = words[r, 0] & uint64(0xFFFFFFFF)
        out[r, 1] = words[r, 0] >> uint64(32)


class HalfTable:
    """The distinct halves of width ``nwords`` words, in ``2 ** part_bits`` parts by the top bits
    of the half's fingerprint: each an open-addressing table of halves, a slot holding the half's
    words and then its index, grown alone (so growing holds one part twice at most) before a batch so that the
    batch fits. Parts are filled in parallel, each by one thread."""

    def __init__(self, nwords: int, part_bits: int = 4, initial_cap: int = 1 << 10, max_load: float = MAX_LOAD,
                 growth: float = GROWTH, fine_growth_from_bytes: int = FINE_GROWTH_FROM_BYTES) -> None:
        self.nwords, self.part_bits, self.nparts = nwords, part_bits, 1 << part_bits
        self.max_load, self.growth, self.fine_growth_from_bytes = max_load, growth, fine_growth_from_bytes
        # a slot: the half's words, then its index (beside it, so that a hit costs one cache line)
        self.tables = [np.full((initial_cap, nwords + 1), EMPTY, np.uint64) for _ in range(self.nparts)]
        self.counts = np.zeros(self.nparts, np.int64)  # halves a part holds; its kernel counts new ones on
        self.max_part_count = (MAX_HALVES + 1) // self.nparts  # a part's numbers times nparts stay 31 bits

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tables)

    def _reserve(self, part: int, load: int) -> None:
        """Grow part ``part`` until ``load`` halves fit under the maximum load factor."""
        if load > self.max_part_count:
            raise MemoryError(f"the compact visited set would hold more than {MAX_HALVES} distinct halves")
        table = self.tables[part]
        cap = table.shape[0]
        fine = table.nbytes * self.nparts >= self.fine_growth_from_bytes  # parts fill evenly
        factor = self.growth if fine else COARSE_GROWTH
        while load > self.max_load * cap:
            cap = int(cap * factor) + 1
        if cap > MAX_SHARD_CAPACITY:
            raise MemoryError(f"a half table of the visited set would need {cap} slots (at most {MAX_SHARD_CAPACITY})")
        if cap != table.shape[0]:
            new = np.full((cap, self.nwords + 1), EMPTY, np.uint64)
            rehash_halves(table, new)
            self.tables[part] = new

    def reserve(self, part_rows: np.ndarray) -> None:
        """Make room in each part p for ``part_rows[p]`` more halves."""
        for p in np.flatnonzero(part_rows).tolist():
            self._reserve(p, self.counts[p] + int(part_rows[p]))


class CompactVisitedSet:
    """Python face of the tree-compressed set: the two half tables and the root's shards
    (``visited_sets.VisitedStates``, exact), with validated calls.

    ``split``: the words of a state's first half (default: half its words, rounded down; a state
    of one word is split into 32 and 31 bits). The Kafka model's states at ``--records 2`` (3
    words) share their halves most at the word boundaries so: 33,128 distinct first words and
    4,769,531 distinct pairs of the last two over its first 60,007,838 states (bench/RESULTS.md).
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
        self.halves = tuple(HalfTable(nw, initial_cap=initial_shard_cap, fine_growth_from_bytes=fine_growth_from_bytes)
                            for nw in (self.split, width - self.split))
        self.root = VisitedSet(1, shard_bits, initial_shard_cap, ROOT_MAX_LOAD, GROWTH,
                               fine_growth_from_bytes=fine_growth_from_bytes)
        self.shard_bits, self.nshards = shard_bits, self.root.nshards
        self._offsets = np.zeros(self.nshards + 1, np.int64)
        self._order = np.empty(0, np.int64)
        # per row of a call: each half's fingerprint and index, the pair key and its fingerprint
        # (buffers reused from call to call)
        self._marks = np.zeros(0, np.uint8)  # zero between calls (given_rows)
        self._rows = np.empty(0, np.int64)  # the rows a call gives
        self._owned = np.empty((2, 1, 0), np.int64)  # the rows each thread interns, for each half
        self._half_hashes = (np.empty(0, np.uint64), np.empty(0, np.uint64))
        self._indices = (np.empty(0, np.uint32), np.empty(0, np.uint32))
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
        # shards by the state's fingerprint, as the engine buckets them (the same state, the same shard)
        return insert_as_one_part(self, words, hashes, rows, nrows, is_new)

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
        if self._keys.shape[0] < nrows:
            size = max(nrows, 2 * self._keys.shape[0])
            self._marks = np.zeros(size, np.uint8)
            self._half_hashes = (np.empty(size, np.uint64), np.empty(size, np.uint64))
            self._indices = (np.empty(size, np.uint32), np.empty(size, np.uint32))
            self._keys, self._key_hashes = np.empty((size, 1), np.uint64), np.empty(size, np.uint64)
        given = int((offsets[:, -1] - offsets[:, 0]).sum())
        if self._rows.shape[0] < given:
            self._rows = np.empty(max(given, 2 * self._rows.shape[0]), np.int64)
        rows = self._rows[:given_rows(order, offsets, self._marks, self._rows)]
        if self.single_word:
            if self._split_words.shape[0] < nrows:
                self._split_words = np.empty((max(nrows, 2 * self._split_words.shape[0]), 2), np.uint64)
            split_single_words(words, rows, self._split_words)
            words = self._split_words[:nrows]
        nparts = self.halves[0].nparts
        # each part of a half table is filled by one thread (both halves' parts p % threads == t by thread t)
        threads = min(thread_count(), nparts) if rows.shape[0] > 4096 else 1
        if self._owned.shape[1] < threads or self._owned.shape[2] < rows.shape[0]:
            size = max(rows.shape[0], 2 * self._owned.shape[2])
            self._owned = np.empty((2, max(threads, self._owned.shape[1]), size), np.int64)
        owned_count = np.zeros((2, threads), np.int64)
        part_rows = np.zeros((2, nparts), np.int64)
        half_hashes(words, rows, self.split, self.halves[0].part_bits, threads, self._half_hashes[0],
                    self._half_hashes[1], part_rows, self._owned, owned_count)
        for table, count in zip(self.halves, part_rows):
            table.reserve(count)
        owned = self._owned
        jobs = [(h, tuple(table.tables), table.counts, table.part_bits, lo, hashes_, out)
                for h, (table, lo, hashes_, out) in enumerate(zip(self.halves, (0, self.split), self._half_hashes,
                                                                 self._indices))]

        def intern(thread: int) -> None:
            for h, tables, counts, part_bits, lo, hashes_, out in jobs:
                mine = owned[h, thread, :owned_count[h, thread]]
                intern_halves(tables, counts, part_bits, words, lo, hashes_, mine, out)

        run_parts(intern, threads)
        pair_keys(rows, self._indices[0], self._indices[1], self._keys, self._key_hashes)
        self.root.insert_bucketed(self._keys[:nrows], self._key_hashes, order, offsets, is_new)
