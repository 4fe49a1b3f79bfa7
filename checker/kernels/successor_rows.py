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

from kraftcheck.checker.kernels.hashing import fingerprint_row
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


@njit(cache=True, inline="always")
def shard_starts(offsets, first):
    """A counting sort's counts per shard k in ``offsets[k + 1]`` -> in ``offsets[k]``, where shard
    k's first position goes (shard 0's at ``first``). Placing a position in shard k then
    increments ``offsets[k]``, which ends where shard k + 1 begins."""
    offsets[0] = first
    for k in range(offsets.shape[0] - 2):
        offsets[k + 1] += offsets[k]


@njit(cache=True, inline="always")
def shard_bounds(offsets, first):
    """After placing: shard k's positions are ``order[offsets[k]:offsets[k + 1]]`` again."""
    for k in range(offsets.shape[0] - 1, 0, -1):
        offsets[k] = offsets[k - 1]
    offsets[0] = first


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
    shard_starts(offsets, vlo)
    for i in range(vlo, vlo + m):
        p = probe[i]
        k = int64(dense_hashes[p] >> shift)
        order[offsets[k]] = p
        offsets[k] += 1
    shard_bounds(offsets, vlo)
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
    keep_first_dense(words.copy(), np.zeros(1, np.uint64), z.copy(), 0, 0, np.zeros(2, np.int64), 1)


# --- The distinct-successor path: the action kernels keep only first occurrences (see
# ``Kernels.distinct_successors``). Each part counts into a ``tally`` row of int64:
TALLY_KEPT = 0  # distinct successors in the part's repeat table
TALLY_LIMIT = 1  # how many it may hold before it must grow (RepeatTables.limit)
TALLY_STOPPED = 2  # the state a kernel stopped before (the table must grow first), else -1
TALLY_FIRED = 3  # from here, per action: the instances that fired (transitions)
NO_ROW = np.iinfo(np.int64).max  # a property's first violating row, while none violates it


def tally_width(nactions: int, nproperties: int) -> int:
    """The int64 counters of a part's tally: the three above, transitions per action, and the
    first row violating each transition property."""
    return TALLY_FIRED + nactions + nproperties


# A part's repeat table is larger than a core's own caches, and whether a successor is new there
# decides a branch: a probe that waited for its line would cost a trip to the shared cache per
# successor. The kernels pack each successor into a small ring instead, request its line
# (``prefetch.prefetch_row``), and probe it PENDING - 1 successors later, once the line has come;
# the table keeps first occurrences whatever the order of its probes, so the results are the same.
PENDING = 8


def self_loop_lines(words: str, p: str, sources: str, source: str, same: str) -> list[str]:
    """Lines of code that set ``same`` to whether the successor at ``words[p]`` equals its source
    state ``sources[source]``: a self-loop, which cannot be new (its source is visited)."""
    return [
        f"{same} = True",
        f"for kf_k in range({words}.shape[1]):",
        f"    if {words}[{p}, kf_k] != {sources}[{source}, kf_k]:",
        f"        {same} = False",
        "        break",
    ]


def keep_first_lines(words: str, hashes: str, p: str, row: str, table: str, mask: str, generation: str,
                     kept: str) -> list[str]:
    """The repeat table's probe, as lines of code that the action kernels compile in place (the
    arguments are the expressions to use): the successor at ``words[p]`` (fingerprint
    ``hashes[p]``), of candidate row ``row``, not a self-loop, sets ``kept`` to 1 if it enters the
    part's repeat table (a state not met before in this part), else 0. Of a repeat, the table
    keeps the smaller candidate row of the two: the first occurrence in candidate order, whatever
    order the kernels meet them in.

    ``table`` (``mask + 1`` entries used, open addressing from the fingerprint's high half) holds
    per entry a state's words and ``generation << 32 | row``; an entry of another generation is
    empty. The words are in the entry so that a probe reads one cache line, not three.

    Text, not a function: numba counts references to the arrays handed to a helper, inlined or
    not, with atomic increments and decrements at every call, on the hot path of every successor
    (bench/RESULTS.md, "The repeat-table probe compiled in place"). ``tests/test_kernels.py``
    compiles these lines into a function and compares it with its reference.
    """
    nw = f"{words}.shape[1]"
    return [
        f"{kept} = 0",
        f"kf_slot = int64({hashes}[{p}] >> uint64(32)) & {mask}",
        "while True:",
        f"    kf_stamp = int64({table}[kf_slot, {nw}])",
        f"    if kf_stamp >> 32 != {generation}:",
        f"        for kf_k in range({nw}):",
        f"            {table}[kf_slot, kf_k] = {words}[{p}, kf_k]",
        f"        {table}[kf_slot, {nw}] = uint64((int64({generation}) << 32) | {row})",
        f"        {kept} = 1",
        "        break",
        "    kf_same = True",
        f"    for kf_k in range({nw}):",  # words first: the entry has one column more
        f"        if {words}[{p}, kf_k] != {table}[kf_slot, kf_k]:",
        "            kf_same = False",
        "            break",
        "    if kf_same:",
        f"        if {row} < (kf_stamp & 0xFFFFFFFF):",
        f"            {table}[kf_slot, {nw}] = uint64((int64({generation}) << 32) | {row})",
        "        break",
        f"    kf_slot = (kf_slot + 1) & {mask}",
    ]


@njit(cache=True, nogil=True)
def gather_part(table, size, generation, words, hashes, rows, plo):
    """The distinct successors in a part's repeat table (its first ``size`` entries, those of
    ``generation``) into positions ``plo..`` of the dense arrays: words, fingerprint, candidate
    row. Returns how many."""
    nw = words.shape[1]
    n = 0
    for slot in range(size):
        stamp = int64(table[slot, nw])
        if stamp >> 32 == generation:
            p = plo + n
            for k in range(nw):
                words[p, k] = table[slot, k]
            hashes[p] = fingerprint_row(words, p)
            rows[p] = stamp & 0xFFFFFFFF
            n += 1
    return n


@njit(cache=True, nogil=True)
def reseat(table, size, mask, generation, words, hashes, rows, plo, phi):
    """Empty the first ``size`` entries of a repeat table, then enter positions ``plo..phi-1`` of
    the dense arrays (distinct states, as ``gather_part`` left them) using ``mask + 1`` entries:
    what a part's table needs when it grows."""
    nw = words.shape[1]
    for slot in range(size):
        table[slot, nw] = 0  # generation 0 is never current
    for p in range(plo, phi):
        slot = int64(hashes[p] >> uint64(32)) & mask
        while int64(table[slot, nw]) >> 32 == generation:
            slot = (slot + 1) & mask
        for k in range(nw):
            table[slot, k] = words[p, k]
        table[slot, nw] = uint64((int64(generation) << 32) | rows[p])


@njit(cache=True, nogil=True)
def note_property_rows(tally, first, mask, row):
    """Candidate ``row`` violates the transition properties whose bits are set in ``mask``: keep
    for each the smallest such row, at ``tally[first + k]``."""
    k = 0
    while mask:
        if mask & uint64(1) and row < tally[first + k]:
            tally[first + k] = row
        mask >>= uint64(1)
        k += 1


@njit(cache=True, nogil=True)
def bucket_dense_part(hashes, plo, phi, shard_bits, dense_new, order, offsets):
    """Positions ``plo..phi-1`` of a part's dense arrays (its distinct successors): clear their new
    marks and bucket them stably by shard (the top ``shard_bits`` of the hash) into ``order``, as
    ``bucket_part`` does: shard k's are ``order[offsets[k]:offsets[k + 1]]``, ``offsets[0] == plo``."""
    nshards = offsets.shape[0] - 1
    shift = uint64(64 - shard_bits)
    for k in range(nshards + 1):
        offsets[k] = 0
    for p in range(plo, phi):
        dense_new[p] = 0
        offsets[int64(hashes[p] >> shift) + 1] += 1
    shard_starts(offsets, plo)
    for p in range(plo, phi):
        k = int64(hashes[p] >> shift)
        order[offsets[k]] = p
        offsets[k] += 1
    shard_bounds(offsets, plo)


@njit(cache=True, nogil=True)
def keep_first_dense(words, hashes, rows, plo, phi, seen, generation):
    """Positions ``plo..phi-1`` of a part's dense arrays, distinct states until they were
    replaced by their canonical forms (``--symmetry``), which may repeat: keep one position per
    state, with the smallest candidate row ``rows[p]`` of its copies (the first occurrence in
    candidate order), moved down to ``plo..`` in the order first met; return the end.

    Repeats are found with ``seen`` as in ``bucket_part`` (at least ``seen_table_size(phi -
    plo)`` entries, ``generation << 32 | position``, other generations empty)."""
    mask = seen_table_size(phi - plo) - 1
    stamp = int64(generation) << 32
    nw = words.shape[1]
    m = plo
    for p in range(plo, phi):
        h = hashes[p]
        slot = int64(h >> uint64(32)) & mask
        while True:
            entry = seen[slot]
            if entry >> 32 != generation:  # a state not met before in this part: kept at m
                seen[slot] = stamp | m
                if m != p:  # m < p: position m was read already
                    for w in range(nw):
                        words[m, w] = words[p, w]
                    hashes[m] = h
                    rows[m] = rows[p]
                m += 1
                break
            other = entry & 0xFFFFFFFF
            if hashes[other] == h and same_row(words, other, words, p):
                if rows[p] < rows[other]:
                    rows[other] = rows[p]
                break
            slot = (slot + 1) & mask
    return m


RADIX_BITS = 11  # digits of the row sort in collect_dense_part: 2048 counters, 16 KB, stay in L1


@njit(cache=True, nogil=True)
def sort_by_high_half(keys, scratch, lo, n, bits):
    """Sort ``keys[lo:lo+n]`` (int64, ``value << 32 | payload`` with ``value < 2^bits``) by value,
    stably, with ``scratch[lo:lo+n]`` as room: a least-significant-digit radix sort, a few
    sequential passes instead of a comparison sort's n log n."""
    counts = np.empty(1 << RADIX_BITS, np.int64)
    digit_mask = (1 << RADIX_BITS) - 1
    passes = 0
    for shift in range(32, 32 + bits, RADIX_BITS):
        src, dst = (keys, scratch) if passes % 2 == 0 else (scratch, keys)
        for d in range(1 << RADIX_BITS):  # loops, not slice assignments: those take numba seconds to compile
            counts[d] = 0
        for i in range(lo, lo + n):
            counts[(src[i] >> shift) & digit_mask] += 1
        total = lo
        for d in range(1 << RADIX_BITS):
            c = counts[d]
            counts[d] = total
            total += c
        for i in range(lo, lo + n):
            d = (src[i] >> shift) & digit_mask
            dst[counts[d]] = src[i]
            counts[d] += 1
        passes += 1
    if passes % 2:
        for i in range(lo, lo + n):
            keys[i] = scratch[i]


@njit(cache=True, nogil=True)
def collect_dense_part(rows, plo, phi, first_row, row_bits, new_mark, stride, label_action, first_index,
                       new_per_action, keys, scratch, out_rows, out_parent, out_label, out_pos):
    """Positions ``plo..phi-1`` of a part's dense arrays, after the visited set marked the new
    ones (``new_mark[p]``): write the new ones in candidate order (by ``rows[p]``, each in
    ``first_row .. first_row + 2^row_bits - 1``) to ``out_rows[plo:]``, with their parent's global
    index (``first_index + row // stride``), label (``row % stride``) and position (``out_pos``);
    count each one's action in ``new_per_action``. ``keys`` and ``scratch`` are room over the
    same positions. Returns how many are new."""
    n = np.int64(0)  # not the literal 0, for which numba would compile the sort a second time
    for p in range(plo, phi):
        if new_mark[p]:
            keys[plo + n] = ((rows[p] - first_row) << 32) | (p - plo)
            n += 1
    sort_by_high_half(keys, scratch, plo, n, row_bits)
    for j in range(plo, plo + n):
        key = keys[j]
        row = first_row + (key >> 32)
        label = row % stride
        new_per_action[label_action[label]] += 1
        out_rows[j] = row
        out_parent[j] = first_index + row // stride
        out_label[j] = label
        out_pos[j] = plo + (key & 0xFFFFFFFF)
    return n
