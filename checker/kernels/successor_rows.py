"""Passes over one chunk's successor rows, run part by part on the worker threads.

A chunk's candidate rows are split into parts (contiguous ranges of source states, one per
thread: the rows of states ``a..b-1`` are ``a * stride .. b * stride - 1``). Each pass reads and
writes only its own part's range of the shared buffers, so the parts run side by side without
locks, and the results, read part after part, are in candidate order whatever the number of
parts:

- ``valid_rows_part``: the rows actually computed (label not ``no_label``);
- ``bucket_part``: of those, the rows that must meet the visited set, bucketed by shard. A
  successor equal to its own source state (a self-loop, common in specs written after TLA+ text)
  is left out: its source is visited already, so it cannot be new (Two-Phase Commit's successors
  are 37 % self-loops). So is a repeat of a successor earlier in the same part: only the first
  occurrence can be new;
- ``collect_part``: after the visited set has marked first occurrences, the new rows with their
  parent index and label, and the per-action counts of transitions and new states.

The successor buffers hold a row for every action instance of every state, most of them disabled
(Two-Phase Commit rm=9: 12 successors in 47 rows a state), so ``bucket_part`` copies the words
and hashes of the rows that meet the visited set into dense arrays, position p for ``valid[p]``:
the visited set reads them from there.

Their readable references are in ``tests/successor_rows_reference.py``; ``tests/test_kernels.py``
compares the two.
"""

from __future__ import annotations

import numpy as np
from numba import int64, njit, uint64

from kraftcheck.checker.kernels.rows import same_row


@njit(cache=True, nogil=True)
def valid_rows_part(labels, row_lo, row_hi, no_label, valid):
    """Write the rows ``r`` in ``row_lo..row_hi-1`` with ``labels[r] != no_label``, in order, to
    ``valid[row_lo:]``; return how many."""
    n = 0
    for r in range(row_lo, row_hi):
        if labels[r] != no_label:
            valid[row_lo + n] = r
            n += 1
    return n


@njit(cache=True)
def seen_table_size(rows):
    """Entries of a ``seen`` table that serves a part of up to ``rows`` valid rows: the smallest
    power of two at least twice ``rows``."""
    size = 1
    while size < 2 * rows:
        size *= 2
    return size


@njit(cache=True, nogil=True)
def bucket_part(words, hashes, valid, vlo, nvalid, sources, first_source, stride, shard_bits, dense_words,
                dense_hashes, dense_new, probe, order, offsets, seen, generation):
    """Rows ``valid[vlo:vlo+nvalid]`` of one part: clear each row's new mark ``dense_new[p]``,
    leave out self-loops (row ``r``'s words equal those of its source, ``sources[first_source + r
    // stride]``) and repeats of a row earlier in the part, copy the words and hash of each other
    row to the same position p of ``dense_words`` and ``dense_hashes`` (so the visited set reads a
    compact array, not rows spread over the candidate buffers; the positions of the rows left out
    are not written), and bucket those positions stably by shard (the top ``shard_bits`` of the
    hash) into ``order``: shard k's are ``order[offsets[k]:offsets[k + 1]]``, with ``offsets[0] ==
    vlo``. ``probe`` is scratch of the same size as ``order``. Returns the number of positions
    bucketed.

    Repeats are found with ``seen``, a small open-addressing table of positions private to the
    part (a power of two long, at least twice ``nvalid``): an entry is ``generation << 32 | p``,
    and an entry of another generation is empty, so a new ``generation`` per call empties it
    without a pass over it. Sibling states sit side by side in a level and commute, so many of a
    chunk's successors repeat within it (four in five for Two-Phase Commit): each repeat then costs
    a probe of this cache-resident table instead of one of the visited set, which is far larger
    than the caches."""
    nshards = offsets.shape[0] - 1
    shift = uint64(64 - shard_bits)
    nw = words.shape[1]
    mask = seen_table_size(nvalid) - 1
    stamp = int64(generation) << 32
    for k in range(nshards + 1):
        offsets[k] = 0
    m = 0
    # The source of row r is r // stride; rows come in increasing order, so it is followed
    # instead of divided for (an integer division by a run-time value is slow, and this loop
    # sees every successor).
    source = first_source + (valid[vlo] // stride if nvalid else 0)  # the first row's
    next_source_row = (source - first_source + 1) * stride  # the first row of the next source
    for p in range(vlo, vlo + nvalid):
        r = valid[p]
        dense_new[p] = 0
        while r >= next_source_row:
            source += 1
            next_source_row += stride
        if same_row(words, r, sources, source):
            continue
        h = hashes[r]
        slot = int64(h >> uint64(32)) & mask
        repeat = False
        while True:
            entry = seen[slot]
            if entry >> 32 != generation:
                seen[slot] = stamp | p
                break
            other = entry & 0xFFFFFFFF
            if dense_hashes[other] == h and same_row(dense_words, other, words, r):
                repeat = True
                break
            slot = (slot + 1) & mask
        if repeat:
            continue
        # only what meets the visited set is copied: most rows are self-loops or repeats
        dense_hashes[p] = h
        for w in range(nw):
            dense_words[p, w] = words[r, w]
        probe[vlo + m] = p
        m += 1
        offsets[int64(h >> shift) + 1] += 1
    offsets[0] = vlo
    for k in range(nshards):
        offsets[k + 1] += offsets[k]
    # offsets[k] is where shard k's next position goes; after placing, where shard k + 1 begins
    for i in range(vlo, vlo + m):
        p = probe[i]
        k = int64(dense_hashes[p] >> shift)
        order[offsets[k]] = p
        offsets[k] += 1
    for k in range(nshards, 0, -1):
        offsets[k] = offsets[k - 1]
    offsets[0] = vlo
    return m


@njit(cache=True, nogil=True)
def collect_part(valid, vlo, nvalid, stride, new_mark, labels, label_action, first_index, fired, new_per_action,
                 out_rows, out_parent, out_label):
    """Rows ``valid[vlo:vlo+nvalid]`` of one part, after the visited set marked first occurrences
    (``new_mark[p]`` for the row ``valid[p]``): count each row's action in ``fired`` and each new
    row's in ``new_per_action``; write the new rows, in order, to ``out_rows[vlo:]`` with their
    parent's global index (``first_index + r // stride``) and label. Returns how many are new."""
    n = 0
    for p in range(vlo, vlo + nvalid):
        r = valid[p]
        a = label_action[labels[r]]
        fired[a] += 1
        if new_mark[p]:
            new_per_action[a] += 1
            out_rows[vlo + n] = r
            out_parent[vlo + n] = first_index + r // stride
            out_label[vlo + n] = labels[r]
            n += 1
    return n


def warm_up() -> None:
    """Compile (or load from numba's cache) these kernels on tiny arrays."""
    z = np.zeros(1, np.int64)
    words = np.zeros((1, 1), np.uint64)
    valid_rows_part(np.zeros(1, np.uint16), 0, 1, 0, z.copy())
    bucket_part(words, np.zeros(1, np.uint64), z.copy(), 0, 0, words, 0, 1, 1, words.copy(), np.zeros(1, np.uint64),
                np.zeros(1, np.uint8), z.copy(), z.copy(), np.zeros(3, np.int64), np.zeros(2, np.int64), 1)
    collect_part(z, 0, 0, 1, np.zeros(1, np.uint8), np.zeros(1, np.uint16), z.copy(), 0, z.copy(), z.copy(),
                 z.copy(), np.zeros(1, np.uint32), np.zeros(1, np.uint16))
