"""The visited set: exact, sharded, open-addressing hash set of packed states.

TLC keeps a fingerprint set; here full packed states are stored, so no state is ever omitted by a
hash collision. The table is split into shards by the top bits of the fingerprint so that the
shards can be filled in parallel without atomics: each thread owns whole shards. Within a shard,
linear probing from a home slot chosen by the low 32 bits of the fingerprint. A slot whose first
word is all ones is empty (packing never produces that word: it uses at most 63 bits per word).

Compactness: a slot is exactly the packed words, with no per-entry overhead, so the bytes a state
costs are its words divided by the load factor. Shard capacities are not powers of two (the home
slot is ``low32 * capacity >> 32``, Lemire's multiply-shift range reduction), so once the set
passes 1 GiB a shard grows by a factor of 1.15 rather than 2 and the load stays between 0.70 and
0.8 (0.71 and 0.85 for fingerprints) instead of swinging between 0.4 and 0.8 (smaller sets
double: moving entries costs time, and there the bytes do not matter). A shard grows alone, so
growing never holds more than one shard twice. The readable reference for every kernel here is Python's ``set``
(``tests/test_kernels.py`` and ``tests/test_fingerprints.py`` compare them).
"""

from __future__ import annotations

import numpy as np
from numba import int64, njit, uint64

from kraftcheck.checker.kernels.hashing import fingerprint_row, fingerprints
from kraftcheck.checker.kernels.prefetch import prefetch_row
from kraftcheck.checker.kernels.rows import same_row
from kraftcheck.checker.kernels.threads import run_taking

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
# A shard grows once its load would pass MAX_LOAD, by GROWTH: between growths the load stays in
# [MAX_LOAD / GROWTH, MAX_LOAD]. Linear probing at 0.8 costs about 3 probes a hit and 13 a miss
# (Knuth), contiguous slots, so few cache lines.
MAX_LOAD = 0.8
GROWTH = 1.15
# A growth by 1.15 moves every entry again after a seventh more states: about 7 moves an entry in
# all, against 2 when doubling, which costs a tenth or more of a small run's time. Bytes matter
# only when the set is large, so a set below FINE_GROWTH_FROM_BYTES doubles its shards (load 0.4
# to 0.8) and only a larger one grows finely.
COARSE_GROWTH = 2.0
FINE_GROWTH_FROM_BYTES = 1 << 30
# Fingerprints are one word a slot: a higher load costs fewer bytes than it costs probes.
FINGERPRINT_MAX_LOAD = 0.85
FINGERPRINT_GROWTH = 1.2
MAX_SHARD_CAPACITY = (1 << 32) - 1  # the home slot takes 32 bits of the fingerprint
RESTORE_CHUNK_STATES = 1 << 20  # states inserted at a time when a set is rebuilt from a checkpoint's levels


@njit(cache=True, inline="always")
def home_slot(h, capacity):
    """The slot a fingerprint starts probing at: its low 32 bits scaled to ``0..capacity-1``."""
    return int64(((h & uint64(0xFFFFFFFF)) * uint64(capacity)) >> uint64(32))


@njit(cache=True, inline="always")
def _probe_insert(table, words, row, h):
    """Insert ``words[row]`` into one shard's table; True if it was not there."""
    nw = words.shape[1]
    capacity = table.shape[0]
    slot = home_slot(h, capacity)
    while True:
        if table[slot, 0] == EMPTY:
            for k in range(nw):
                table[slot, k] = words[row, k]
            return True
        if same_row(table, slot, words, row):
            return False
        slot += 1
        if slot == capacity:
            slot = 0


@njit(cache=True)
def bucket_by_shard(hashes, valid_rows, nrows, shard_bits, order, offsets):
    """Stable counting sort of ``valid_rows[:nrows]`` by shard (the top ``shard_bits`` of the hash).

    Afterwards the rows of shard k are ``order[offsets[k]:offsets[k + 1]]``, in input order.
    ``shard_bits`` is at least 1.
    """
    nshards = offsets.shape[0] - 1
    shift = uint64(64 - shard_bits)
    counts = np.zeros(nshards, np.int64)
    for i in range(nrows):
        counts[int64(hashes[valid_rows[i]] >> shift)] += 1
    offsets[0] = 0
    for k in range(nshards):
        offsets[k + 1] = offsets[k] + counts[k]
        counts[k] = offsets[k]
    for i in range(nrows):
        r = valid_rows[i]
        k = int64(hashes[r] >> shift)
        order[counts[k]] = r
        counts[k] += 1


PREFETCH_DISTANCE = 16  # rows ahead whose home slot is requested while the current row probes


@njit(cache=True, nogil=True)
def insert_rows(table, words, hashes, order, lo, hi, is_new):
    """Insert rows ``order[lo:hi]`` into one shard's table; mark first occurrences; return how many.

    The home slot of the row PREFETCH_DISTANCE ahead is prefetched, so a row's probe seldom waits
    on memory (the probes of different rows are independent until they meet in the table)."""
    capacity = table.shape[0]
    added = 0
    for j in range(lo, min(hi, lo + PREFETCH_DISTANCE)):
        prefetch_row(table, home_slot(hashes[order[j]], capacity))
    for j in range(lo, hi):
        if j + PREFETCH_DISTANCE < hi:
            prefetch_row(table, home_slot(hashes[order[j + PREFETCH_DISTANCE]], capacity))
        r = order[j]
        if _probe_insert(table, words, r, hashes[r]):
            is_new[r] = 1
            added += 1
    return added


@njit(cache=True, nogil=True)
def insert_shard(table, words, hashes, order, offsets, k, is_new):
    """Insert shard k's rows of every part into the shard's table, part after part (row j of
    ``offsets`` bounds part j's rows of shard k: ``order[offsets[j, k]:offsets[j, k + 1]]``), so
    rows meet the table in candidate order; mark first occurrences; return how many."""
    added = 0
    for j in range(offsets.shape[0]):
        added += insert_rows(table, words, hashes, order, offsets[j, k], offsets[j, k + 1], is_new)
    return added


@njit(cache=True, nogil=True)
def rehash(old, new, rows_are_fingerprints):
    """Move every entry of one shard's ``old`` table into its larger ``new`` table.

    An entry's home slot comes from the same hash as when it was inserted: the fingerprint of its
    words, or, in a fingerprint set, the stored word itself (which is that fingerprint)."""
    for j in range(old.shape[0]):
        if old[j, 0] != EMPTY:
            h = old[j, 0] if rows_are_fingerprints else fingerprint_row(old, j)
            _probe_insert(new, old, j, h)


@njit(cache=True)
def smallest_gap_sorted(values):
    """The smallest difference between neighbours of a sorted uint64 array (2^64 - 1 if fewer than two)."""
    best = uint64(0xFFFFFFFFFFFFFFFF)
    for i in range(1, values.shape[0]):
        gap = values[i] - values[i - 1]
        if gap < best:
            best = gap
    return best


def restore_from(visited, words: np.ndarray) -> None:
    """Insert every state of ``words`` into ``visited``, RESTORE_CHUNK_STATES at a time (a
    level of a checkpoint is mapped from disk: a chunk at a time is read into memory)."""
    for lo in range(0, words.shape[0], RESTORE_CHUNK_STATES):
        chunk = np.ascontiguousarray(words[lo: lo + RESTORE_CHUNK_STATES])
        visited.insert(chunk, fingerprints(chunk), np.arange(chunk.shape[0], dtype=np.int64))


def rows_in_use(rows: np.ndarray, nrows: int) -> int:
    """How many leading rows of the buffers an insert of ``rows[:nrows]`` reads: a chunk may use
    only the start of buffers sized for the largest one, and the rest is neither read nor cleared."""
    return int(rows[:nrows].max()) + 1 if nrows else 0


def insert_as_one_part(visited, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int | None,
                       is_new: np.ndarray | None) -> np.ndarray:
    """``insert`` of a sharded set (``VisitedSet``, ``visited_compact.CompactVisitedSet``: its
    ``shard_bits`` and reusable ``_order``, ``_offsets``), whose words and fingerprints the caller
    has checked: ``rows[:nrows]`` bucketed by shard (the top bits of their fingerprints, as the
    engine buckets them), then ``insert_bucketed`` as one part. Returns the first-occurrence marks."""
    if rows.dtype != np.int64:
        raise TypeError("insert() needs int64 row numbers")
    nrows = rows.shape[0] if nrows is None else nrows
    used = rows_in_use(rows, nrows)
    if visited._order.shape[0] < nrows:
        visited._order = np.empty(max(nrows, 2 * visited._order.shape[0]), np.int64)
    bucket_by_shard(hashes, rows, nrows, visited.shard_bits, visited._order, visited._offsets)
    if is_new is None:
        is_new = np.zeros(words.shape[0], np.uint8)
    else:
        is_new[:used] = 0
    visited.insert_bucketed(words, hashes, visited._order, visited._offsets.reshape(1, -1), is_new)
    return is_new


class VisitedSet:
    """Python face of the sharded table: capacity management and validated calls.

    Each shard is its own array and grows on its own, so growing the set never holds two copies
    of the whole table at once (only of one shard).
    """

    def __init__(self, nwords: int, shard_bits: int = 6, initial_shard_cap: int = 1 << 10,
                 max_load: float = MAX_LOAD, growth: float = GROWTH, rows_are_fingerprints: bool = False,
                 fine_growth_from_bytes: int = FINE_GROWTH_FROM_BYTES) -> None:
        if not 1 <= nwords <= 64:
            raise ValueError("a packed state has 1 to 64 words")
        if not 1 <= shard_bits <= 10:
            raise ValueError("shard_bits must be 1..10")
        if not 2 <= initial_shard_cap <= MAX_SHARD_CAPACITY:
            raise ValueError(f"shard capacity must be 2..{MAX_SHARD_CAPACITY}")
        if not 0.1 <= max_load <= 0.95 or growth <= 1.0:
            raise ValueError("max_load must be in [0.1, 0.95] and growth above 1")
        self.nwords = nwords
        self.shard_bits = shard_bits
        self.nshards = 1 << shard_bits
        self.max_load = max_load
        self.growth = growth
        self.rows_are_fingerprints = rows_are_fingerprints
        self.fine_growth_from_bytes = fine_growth_from_bytes
        self.shards = [np.full((initial_shard_cap, nwords), EMPTY, np.uint64) for _ in range(self.nshards)]
        self.shard_counts = [0] * self.nshards
        self._offsets = np.zeros(self.nshards + 1, np.int64)
        self._order = np.empty(0, np.int64)

    def __len__(self) -> int:
        return sum(self.shard_counts)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.shards)

    @property
    def capacity(self) -> int:
        return sum(t.shape[0] for t in self.shards)

    def restore(self, words: np.ndarray) -> None:
        """Insert every state of ``words`` (a level of a checkpoint)."""
        restore_from(self, words)

    def insert(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int | None = None,
               is_new: np.ndarray | None = None) -> np.ndarray:
        """Insert ``words[rows[:nrows]]``; returns a uint8 array over ``words``, 1 on first occurrences.

        ``is_new``, if given, is that array, reused to spare an allocation per call: it is zeroed
        here up to the last row given, which is all a caller may read (buffers sized for the
        largest chunk are not cleared whole for a small one).
        """
        if words.ndim != 2 or words.shape[1] != self.nwords or words.dtype != np.uint64:
            raise TypeError(f"insert() needs a 2-D uint64 array with {self.nwords} words per row")
        if hashes.shape[0] < words.shape[0] or hashes.dtype != np.uint64:
            raise TypeError("insert() needs one uint64 fingerprint per row")
        return insert_as_one_part(self, words, hashes, rows, nrows, is_new)

    def insert_bucketed(self, words: np.ndarray, hashes: np.ndarray, order: np.ndarray, offsets: np.ndarray,
                        is_new: np.ndarray) -> None:
        """Insert rows already bucketed by shard, part by part (``successor_rows.bucket_part``):
        part j's rows of shard k are ``order[offsets[j, k]:offsets[j, k + 1]]``. Marks first
        occurrences in ``is_new``, whose marks for those rows the caller has cleared."""
        if words.ndim != 2 or words.shape[1] != self.nwords or words.dtype != np.uint64:
            raise TypeError(f"insert_bucketed() needs a 2-D uint64 array with {self.nwords} words per row")
        if hashes.shape[0] < words.shape[0] or hashes.dtype != np.uint64 or order.dtype != np.int64:
            raise TypeError("insert_bucketed() needs one uint64 fingerprint per row and int64 row numbers")
        if offsets.ndim != 2 or offsets.shape[1] != self.nshards + 1 or offsets.dtype != np.int64:
            raise TypeError(f"insert_bucketed() needs int64 offsets of shape (parts, {self.nshards + 1})")
        offsets = np.ascontiguousarray(offsets)  # callers' rows may be padded apart; one compiled layout
        per_shard = (offsets[:, 1:] - offsets[:, :-1]).sum(axis=0).tolist()
        rows = sum(per_shard)

        def insert_into(k: int, _: int) -> None:
            if per_shard[k]:
                self._reserve(k, self.shard_counts[k] + per_shard[k])
                self.shard_counts[k] += insert_shard(self.shards[k], words, hashes, order, offsets, k, is_new)

        if rows > 4096:  # the threads take the shards one by one: a shard's growth holds up no other
            run_taking(insert_into, self.nshards)
        else:
            for k in range(self.nshards):
                insert_into(k, 0)

    def _reserve(self, k: int, load: int) -> None:
        """Grow shard k until ``load`` states fit under the maximum load factor."""
        cap = self.shards[k].shape[0]
        # shards fill evenly, so one shard's size times their number is the set's
        fine = self.shards[k].nbytes * self.nshards >= self.fine_growth_from_bytes
        factor = self.growth if fine else COARSE_GROWTH
        while load > self.max_load * cap:
            cap = int(cap * factor) + 1
        if cap > MAX_SHARD_CAPACITY:
            raise MemoryError(f"a shard of the visited set would need {cap} slots (at most {MAX_SHARD_CAPACITY})")
        if cap != self.shards[k].shape[0]:
            new = np.full((cap, self.nwords), EMPTY, np.uint64)
            rehash(self.shards[k], new, self.rows_are_fingerprints)
            self.shards[k] = new


MAX_FINGERPRINT = np.uint64(0xFFFFFFFFFFFFFFFE)  # all ones marks an empty slot


@njit(cache=True)
def clamp_given(hashes, order, offsets, out):
    """``out[r] = min(hashes[r], MAX_FINGERPRINT)`` for each row r that a part gives
    (``order[offsets[j, 0]:offsets[j, -1]]``); ``np.minimum`` over those rows is its reference."""
    for j in range(offsets.shape[0]):
        for i in range(offsets[j, 0], offsets[j, offsets.shape[1] - 1]):
            r = order[i]
            out[r] = min(hashes[r], uint64(MAX_FINGERPRINT))


class FingerprintSet:
    """TLC's visited set: each state's 64-bit fingerprint only, 8 bytes a state (over the load
    factor) instead of its packed words. Two states with the same fingerprint count as one, so a
    run is exhaustive only up to hash collisions; ``collision_probability`` estimates them.

    The fingerprint all ones (the empty-slot marker) is stored as all ones but the last bit, which
    adds one more pair of colliding values out of 2^64.
    """

    def __init__(self, shard_bits: int = 6, initial_shard_cap: int = 1 << 10,
                 fine_growth_from_bytes: int = FINE_GROWTH_FROM_BYTES) -> None:
        self.table = VisitedSet(1, shard_bits, initial_shard_cap, FINGERPRINT_MAX_LOAD, FINGERPRINT_GROWTH,
                                rows_are_fingerprints=True, fine_growth_from_bytes=fine_growth_from_bytes)
        self._fingerprints = np.empty(0, np.uint64)  # the clamped fingerprints of a call, reused

    def __len__(self) -> int:
        return len(self.table)

    @property
    def nbytes(self) -> int:
        return self.table.nbytes

    def restore(self, words: np.ndarray) -> None:
        """Insert the fingerprint of every state of ``words`` (a level of a checkpoint)."""
        restore_from(self, words)

    def insert(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int | None = None,
               is_new: np.ndarray | None = None) -> np.ndarray:
        """As ``VisitedSet.insert``; only ``hashes`` (the fingerprints) are stored, ``words`` unused."""
        if hashes.ndim != 1 or hashes.dtype != np.uint64:
            raise TypeError("insert() needs one uint64 fingerprint per row")
        nrows = rows.shape[0] if nrows is None else nrows
        fingerprints = self._clamped(hashes, words.shape[0], rows_in_use(rows, nrows))
        return self.table.insert(fingerprints.reshape(-1, 1), fingerprints, rows, nrows, is_new)

    def insert_bucketed(self, words: np.ndarray, hashes: np.ndarray, order: np.ndarray, offsets: np.ndarray,
                        is_new: np.ndarray) -> None:
        """As ``VisitedSet.insert_bucketed``; only ``hashes`` (the fingerprints) are stored."""
        if hashes.ndim != 1 or hashes.dtype != np.uint64:
            raise TypeError("insert_bucketed() needs one uint64 fingerprint per row")
        fingerprints = self._buffer(words.shape[0])
        # only the given rows: the engine's parts lie in regions sized for every successor, mostly unused
        clamp_given(hashes, order, np.ascontiguousarray(offsets), fingerprints)
        self.table.insert_bucketed(fingerprints.reshape(-1, 1), fingerprints, order, offsets, is_new)

    def _buffer(self, rows: int) -> np.ndarray:
        """The reused buffer of a call's clamped fingerprints, ``rows`` long."""
        if self._fingerprints.shape[0] < rows:
            self._fingerprints = np.empty(rows, np.uint64)
        return self._fingerprints[:rows]

    def _clamped(self, hashes: np.ndarray, rows: int, used: int) -> np.ndarray:
        """The reused buffer of ``rows`` fingerprints, its first ``used`` the given ones with all
        ones (the empty-slot marker) stored as all ones but the last bit; the rest not read."""
        fingerprints = self._buffer(rows)
        np.minimum(hashes[:used], MAX_FINGERPRINT, out=fingerprints[:used])
        return fingerprints

    def _sorted_shards(self):
        """Each shard's fingerprints, sorted, in shard order; shards hold disjoint ranges of the
        top bits, so together they are every fingerprint in order (one shard copied at a time)."""
        for shard in self.table.shards:
            column = shard[:, 0]
            out = column[column != EMPTY]
            out.sort()
            yield out

    def fingerprints(self) -> np.ndarray:
        """Every stored fingerprint, sorted."""
        parts = list(self._sorted_shards())
        return np.concatenate(parts) if parts else np.empty(0, np.uint64)

    def smallest_gap(self, leaving_out: np.ndarray | None = None) -> int | None:
        """The smallest difference between two stored fingerprints (None with fewer than two),
        without holding a sorted copy of the whole set; the fingerprints ``leaving_out`` (clamped
        as stored) taken out first."""
        best: int | None = None
        previous: int | None = None
        for part in self._sorted_shards():
            if leaving_out is not None and leaving_out.size:
                part = part[~np.isin(part, leaving_out)]
            if not part.shape[0]:
                continue
            gaps = [int(smallest_gap_sorted(part))] if part.shape[0] > 1 else []
            if previous is not None:  # the gap across the boundary with the previous shard
                gaps.append(int(part[0]) - previous)
            if gaps:
                best = min(gaps) if best is None else min(best, *gaps)
            previous = int(part[-1])
        return best

    def collision_probability(self, generated: int, leaving_out: np.ndarray | None = None) -> dict[str, float]:
        """TLC's two estimates of the probability that a collision hid a state:

        * ``optimistic``: distinct x (generated - distinct) / 2^64, as if fingerprints were
          uniformly random and each duplicate successor were one more chance to collide;
        * ``from_fingerprints``: 1 / (the smallest gap between two sorted fingerprints), the
          estimate TLC prints "based on the actual fingerprints".

        ``leaving_out``: fingerprints in the set of states the run does not count (a run that
        stopped at a violation inside a chunk inserted the chunk's later new states already).
        """
        leaving_out = None if leaving_out is None else np.unique(np.minimum(leaving_out, MAX_FINGERPRINT))
        distinct = len(self) - (0 if leaving_out is None else leaving_out.size)
        optimistic = distinct * max(0, generated - distinct) / 2.0**64
        gap = self.smallest_gap(leaving_out)
        if gap is None:
            return {"optimistic": optimistic, "from_fingerprints": 0.0}
        if gap == 0:
            raise RuntimeError("internal: the fingerprint set holds a fingerprint twice")
        return {"optimistic": optimistic, "from_fingerprints": 1.0 / gap}
