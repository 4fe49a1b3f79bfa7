"""The visited set: exact, sharded, open-addressing hash set of packed states.

TLC keeps a fingerprint set; here full packed states are stored, so no state is ever omitted by a
hash collision. The table is split into shards by the top bits of the fingerprint so that the
shards can be filled in parallel without atomics: each thread owns whole shards. Within a shard,
linear probing from the low bits. A slot whose first word is all ones is empty (packing never
produces that word: it uses at most 63 bits per word).
"""

from __future__ import annotations

import numpy as np
from numba import int64, njit, uint64

from kraftcheck.checker.kernels.hashing import fingerprint_row
from kraftcheck.checker.kernels.threads import run_parts, thread_count

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
MAX_LOAD = 0.75


@njit(cache=True, inline="always")
def _probe_insert(table, mask, words, row, h):
    """Insert ``words[row]`` into one shard's table; True if it was not there."""
    nw = words.shape[1]
    slot = h & mask
    while True:
        if table[slot, 0] == EMPTY:
            for k in range(nw):
                table[slot, k] = words[row, k]
            return True
        same = True
        for k in range(nw):
            if table[slot, k] != words[row, k]:
                same = False
                break
        if same:
            return False
        slot = (slot + uint64(1)) & mask


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


@njit(cache=True, nogil=True)
def insert_rows(table, words, hashes, order, lo, hi, is_new):
    """Insert rows ``order[lo:hi]`` into one shard's table; mark first occurrences; return how many."""
    mask = uint64(table.shape[0] - 1)
    added = 0
    for j in range(lo, hi):
        r = order[j]
        if _probe_insert(table, mask, words, r, hashes[r]):
            is_new[r] = 1
            added += 1
    return added


@njit(cache=True, nogil=True)
def rehash(old, new):
    """Move every state of one shard's ``old`` table into its larger ``new`` table."""
    mask = uint64(new.shape[0] - 1)
    for j in range(old.shape[0]):
        if old[j, 0] != EMPTY:
            _probe_insert(new, mask, old, j, fingerprint_row(old, j))


class VisitedSet:
    """Python face of the sharded table: capacity management and validated calls.

    Each shard is its own array and grows on its own, so growing the set never holds two copies
    of the whole table at once (only of one shard).
    """

    def __init__(self, nwords: int, shard_bits: int = 4, initial_shard_cap: int = 1 << 12) -> None:
        if not 1 <= nwords <= 64:
            raise ValueError("a packed state has 1 to 64 words")
        if not 1 <= shard_bits <= 10:
            raise ValueError("shard_bits must be 1..10")
        if initial_shard_cap < 2 or initial_shard_cap & (initial_shard_cap - 1):
            raise ValueError("shard capacity must be a power of two")
        self.nwords = nwords
        self.shard_bits = shard_bits
        self.nshards = 1 << shard_bits
        self.shards = [np.full((initial_shard_cap, nwords), EMPTY, np.uint64) for _ in range(self.nshards)]
        self.shard_counts = [0] * self.nshards
        self._offsets = np.zeros(self.nshards + 1, np.int64)
        self._order = np.empty(0, np.int64)

    def __len__(self) -> int:
        return sum(self.shard_counts)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.shards)

    def insert(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int | None = None,
               is_new: np.ndarray | None = None) -> np.ndarray:
        """Insert ``words[rows[:nrows]]``; returns a uint8 array over ``words``, 1 on first occurrences.

        ``is_new``, if given, is that array (zeroed here), reused to spare an allocation per call.
        """
        if words.ndim != 2 or words.shape[1] != self.nwords or words.dtype != np.uint64:
            raise TypeError(f"insert() needs a 2-D uint64 array with {self.nwords} words per row")
        if hashes.shape[0] < words.shape[0] or hashes.dtype != np.uint64:
            raise TypeError("insert() needs one uint64 fingerprint per row")
        if rows.dtype != np.int64:
            raise TypeError("insert() needs int64 row numbers")
        nrows = rows.shape[0] if nrows is None else nrows
        if self._order.shape[0] < nrows:
            self._order = np.empty(max(nrows, 2 * self._order.shape[0]), np.int64)
        bucket_by_shard(hashes, rows, nrows, self.shard_bits, self._order, self._offsets)
        if is_new is None:
            is_new = np.zeros(words.shape[0], np.uint8)
        else:
            is_new[: words.shape[0]] = 0
        offsets = self._offsets.tolist()
        threads = min(thread_count(), self.nshards) if nrows > 4096 else 1

        def insert_shards(first: int) -> None:
            for k in range(first, self.nshards, threads):
                self._reserve(k, self.shard_counts[k] + offsets[k + 1] - offsets[k])
                self.shard_counts[k] += insert_rows(self.shards[k], words, hashes, self._order,
                                                    offsets[k], offsets[k + 1], is_new)

        run_parts(insert_shards, threads)
        return is_new

    def _reserve(self, k: int, load: int) -> None:
        """Grow shard k until ``load`` states fit under the maximum load factor."""
        cap = self.shards[k].shape[0]
        while load > MAX_LOAD * cap:
            cap *= 2
        if cap != self.shards[k].shape[0]:
            new = np.full((cap, self.nwords), EMPTY, np.uint64)
            rehash(self.shards[k], new)
            self.shards[k] = new


MAX_FINGERPRINT = np.uint64(0xFFFFFFFFFFFFFFFE)  # all ones marks an empty slot


class FingerprintSet:
    """TLC's visited set: each state's 64-bit fingerprint only, 8 bytes a state (over the load
    factor) instead of its packed words. Two states with the same fingerprint count as one, so a
    run is exhaustive only up to hash collisions; ``collision_probability`` estimates them.

    The fingerprint all ones (the empty-slot marker) is stored as all ones but the last bit, which
    adds one more pair of colliding values out of 2^64.
    """

    def __init__(self, shard_bits: int = 4, initial_shard_cap: int = 1 << 12) -> None:
        self.table = VisitedSet(1, shard_bits, initial_shard_cap)

    def __len__(self) -> int:
        return len(self.table)

    @property
    def nbytes(self) -> int:
        return self.table.nbytes

    def insert(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int | None = None,
               is_new: np.ndarray | None = None) -> np.ndarray:
        """As ``VisitedSet.insert``; only ``hashes`` (the fingerprints) are stored, ``words`` unused."""
        if hashes.ndim != 1 or hashes.dtype != np.uint64:
            raise TypeError("insert() needs one uint64 fingerprint per row")
        fingerprints = np.minimum(hashes[: words.shape[0]], MAX_FINGERPRINT)
        return self.table.insert(fingerprints.reshape(-1, 1), fingerprints, rows, nrows, is_new)

    def fingerprints(self) -> np.ndarray:
        """Every stored fingerprint, sorted."""
        parts = [shard[:, 0][shard[:, 0] != EMPTY] for shard in self.table.shards]
        out = np.concatenate(parts) if parts else np.empty(0, np.uint64)
        out.sort()
        return out

    def collision_probability(self, generated: int) -> dict[str, float]:
        """TLC's two estimates of the probability that a collision hid a state:

        * ``optimistic``: distinct x (generated - distinct) / 2^64, as if fingerprints were
          uniformly random and each duplicate successor were one more chance to collide;
        * ``from_fingerprints``: 1 / (the smallest gap between two sorted fingerprints), the
          estimate TLC prints "based on the actual fingerprints".
        """
        distinct = len(self)
        optimistic = distinct * max(0, generated - distinct) / 2.0**64
        fps = self.fingerprints()
        if fps.shape[0] < 2:
            return {"optimistic": optimistic, "from_fingerprints": 0.0}
        smallest_gap = int(np.diff(fps).min())
        return {"optimistic": optimistic, "from_fingerprints": 1.0 / smallest_gap}
