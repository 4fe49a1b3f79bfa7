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

from checker.kernels.hashing import fingerprint_row
from checker.kernels.threads import run_parts, thread_count

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
MAX_LOAD = 0.75


@njit(cache=True, inline="always")
def _probe_insert(table, base, mask, words, row, h):
    """Insert ``words[row]`` into the shard starting at ``base``; True if it was not there."""
    nw = words.shape[1]
    slot = h & mask
    while True:
        pos = base + slot
        if table[pos, 0] == EMPTY:
            for k in range(nw):
                table[pos, k] = words[row, k]
            return True
        same = True
        for k in range(nw):
            if table[pos, k] != words[row, k]:
                same = False
                break
        if same:
            return False
        slot = (slot + uint64(1)) & mask


@njit(cache=True)
def bucket_by_shard(hashes, valid_rows, shard_bits, order, offsets):
    """Stable counting sort of ``valid_rows`` by shard (the top ``shard_bits`` of the hash).

    Afterwards the rows of shard k are ``order[offsets[k]:offsets[k + 1]]``, in input order.
    ``shard_bits`` is at least 1.
    """
    nshards = offsets.shape[0] - 1
    shift = uint64(64 - shard_bits)
    counts = np.zeros(nshards, np.int64)
    for i in range(valid_rows.shape[0]):
        counts[int64(hashes[valid_rows[i]] >> shift)] += 1
    offsets[0] = 0
    for k in range(nshards):
        offsets[k + 1] = offsets[k] + counts[k]
        counts[k] = offsets[k]
    for i in range(valid_rows.shape[0]):
        r = valid_rows[i]
        k = int64(hashes[r] >> shift)
        order[counts[k]] = r
        counts[k] += 1


@njit(cache=True, nogil=True)
def insert_by_shard(table, shard_cap, shard_counts, words, hashes, order, offsets, is_new, first, step):
    """Insert the bucketed rows of shards ``first, first + step, ...``; mark first occurrences.

    Threads given different ``first`` touch disjoint shards, so they need no locks.
    """
    nshards = offsets.shape[0] - 1
    mask = uint64(shard_cap - 1)
    for k in range(first, nshards, step):
        base = k * shard_cap
        added = 0
        for j in range(offsets[k], offsets[k + 1]):
            r = order[j]
            if _probe_insert(table, base, mask, words, r, hashes[r]):
                is_new[r] = 1
                added += 1
        shard_counts[k] += added


@njit(cache=True, nogil=True)
def rehash(old, old_cap, new, new_cap, first, step):
    """Move the states of shards ``first, first + step, ...`` of ``old`` into ``new``."""
    nshards = old.shape[0] // old_cap
    mask = uint64(new_cap - 1)
    for k in range(first, nshards, step):
        for j in range(k * old_cap, (k + 1) * old_cap):
            if old[j, 0] != EMPTY:
                _probe_insert(new, k * new_cap, mask, old, j, fingerprint_row(old, j))


class VisitedSet:
    """Python face of the sharded table: capacity management and validated calls."""

    def __init__(self, nwords: int, shard_bits: int = 4, initial_shard_cap: int = 1 << 12) -> None:
        if not 1 <= nwords <= 64:
            raise ValueError("a packed state has 1 to 64 words")
        if not 1 <= shard_bits <= 10:
            raise ValueError("shard_bits must be 1..10")
        if initial_shard_cap & (initial_shard_cap - 1):
            raise ValueError("shard capacity must be a power of two")
        self.nwords = nwords
        self.shard_bits = shard_bits
        self.nshards = 1 << shard_bits
        self.shard_cap = initial_shard_cap
        self.table = np.full((self.nshards * self.shard_cap, nwords), EMPTY, np.uint64)
        self.shard_counts = np.zeros(self.nshards, np.int64)
        self._offsets = np.zeros(self.nshards + 1, np.int64)

    def __len__(self) -> int:
        return int(self.shard_counts.sum())

    @property
    def nbytes(self) -> int:
        return self.table.nbytes

    def insert(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Insert ``words[rows]``; returns a uint8 array over ``words`` with 1 on first occurrences."""
        if words.ndim != 2 or words.shape[1] != self.nwords or words.dtype != np.uint64:
            raise TypeError(f"insert() needs a 2-D uint64 array with {self.nwords} words per row")
        if hashes.shape[0] < words.shape[0] or hashes.dtype != np.uint64:
            raise TypeError("insert() needs one uint64 fingerprint per row")
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        order = np.empty(rows.shape[0], np.int64)
        bucket_by_shard(hashes, rows, self.shard_bits, order, self._offsets)
        incoming = np.diff(self._offsets)
        self._reserve(int((self.shard_counts + incoming).max()) if rows.size else 0)
        is_new = np.zeros(words.shape[0], np.uint8)
        threads = min(thread_count(), self.nshards) if rows.size > 4096 else 1
        run_parts(lambda j: insert_by_shard(self.table, self.shard_cap, self.shard_counts, words, hashes,
                                            order, self._offsets, is_new, j, threads), threads)
        return is_new

    def _reserve(self, shard_load: int) -> None:
        cap = self.shard_cap
        while shard_load > MAX_LOAD * cap:
            cap *= 2
        if cap == self.shard_cap:
            return
        old, old_cap = self.table, self.shard_cap
        new = np.full((self.nshards * cap, self.nwords), EMPTY, np.uint64)
        threads = min(thread_count(), self.nshards)
        run_parts(lambda j: rehash(old, old_cap, new, cap, j, threads), threads)
        self.table, self.shard_cap = new, cap
