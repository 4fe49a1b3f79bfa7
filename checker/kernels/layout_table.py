"""Packing and unpacking states by a table of their elements, for layouts too large to unroll.

Small layouts get pack and unpack generated as unrolled code (``codegen``), with every element's
word, shift and domain written into the text. Large ones (``codegen.uses_layout_table``) read the
same facts from a table handed to every kernel at run time, in its ``cv`` argument. Then nothing
compiled depends on how many bits an element takes or what its domain is: only on the state's
fields and shapes. Every configuration of a spec with the same fields (other fault
bounds, other switches held in constants) reuses the compiled kernels of the first, and these
functions themselves are compiled once per installation. The reference they must agree with is
``Layout.pack`` and ``Layout.unpack`` (``tests/test_layout_table.py``).

The table, an int32 array (``table``):

====================  ============================================================
``[0]``               SIZE, the elements of a state
``[1]``               NWORDS, its packed words
``[2 : 3 + NWORDS]``  where each word's elements start (and, last, SIZE): the
                      elements of word j are ``start[j] .. start[j + 1] - 1``
then SIZE each:       ``lo``, ``span``: v is in the element's domain if
                      lo <= v < lo + span (a constant c has lo = c, span = 1);
                      ``shift``; ``mask``, the element's bits set (0 when it takes
                      none: a constant, or a domain of one value); ``word``, the
                      packed word that holds it. An element is packed as v - lo
                      and unpacked as lo + its bits.
====================  ============================================================

The kernels index the table with unsigned integers, test a domain with one unsigned comparison
and pack a word in the same loop: written so, LLVM vectorises the loop, and the table packs a
state as fast as unrolled code does. With signed indices numba checks every index for wraparound,
which keeps LLVM from vectorising (bench/RESULTS.md, "Warm speed against today's commit").
"""

from __future__ import annotations

import numpy as np
from numba import int32, njit, uint64

from kraftcheck.checker.kernels.hashing import GOLDEN, fingerprint_step

HEADER = 2


def table(layout) -> np.ndarray:
    """The table of ``layout`` (a ``checker.layout.Layout``) that these kernels read."""
    n, nwords = layout.size, layout.nwords
    starts = [0] * (nwords + 1)
    for e in layout.elements:
        starts[e.word + 1] = e.flat + 1
    for j in range(1, nwords + 1):  # a word's elements end where the next word's start
        starts[j] = max(starts[j], starts[j - 1])
    lo, span, shift, mask, word = [], [], [], [], []
    for e in layout.elements:
        const = e.field.const
        lo.append(e.field.lo if const is None else const)
        span.append(e.field.domain if const is None else 1)
        shift.append(e.shift)
        mask.append((1 << e.bits) - 1 if const is None else 0)
        word.append(e.word)
    out = np.array([n, nwords, *starts, *lo, *span, *shift, *mask, *word], np.int64)
    if out.max() > np.iinfo(np.int32).max or out.min() < np.iinfo(np.int32).min:
        raise ValueError("a domain or constant of this layout does not fit the table's int32 entries")
    return out.astype(np.int32)


@njit(cache=True, inline="always")
def _columns(cv):
    """Where the table's columns start, as unsigned indices: (lo, span, shift, mask)."""
    n = uint64(cv[0])
    lo = uint64(HEADER + cv[1] + 1)
    return lo, lo + n, lo + uint64(2) * n, lo + uint64(3) * n


@njit(cache=True, inline="always")
def word_column(cv):
    """Where the table's ``word`` column starts, as an unsigned index."""
    return uint64(HEADER + cv[1] + 1) + uint64(4) * uint64(cv[0])


@njit(cache=True, inline="always")
def table_columns(cv):
    """Where each column of the table starts: (lo, span, shift, mask, word)."""
    lo, span, shift, mask = _columns(cv)
    return lo, span, shift, mask, word_column(cv)


@njit(cache=True)
def pack(f, words, hashes, row, cv):
    """Pack the successor ``f`` (an int64 row, as actions write it) into ``words[row]`` and its
    fingerprint into ``hashes[row]``; False if an element is outside its domain or a constant
    changed (``words[row]`` may then hold anything, ``hashes[row]`` is not written)."""
    lo, span, shift, mask = _columns(cv)
    bad = 0
    h = uint64(GOLDEN)
    for j in range(cv[1]):
        w = uint64(0)
        k, end = uint64(cv[HEADER + j]), uint64(cv[HEADER + j + 1])
        while k < end:  # no branch in the loop: LLVM vectorises it
            # the distance from the smallest value, which the word holds; below it, it wraps to a
            # large uint64 that the domain test refuses
            d = uint64(f[k] - cv[lo + k])
            bad |= d >= uint64(cv[span + k])
            w |= (d & uint64(cv[mask + k])) << uint64(cv[shift + k])
            k += uint64(1)
        words[row, j] = w
        h = fingerprint_step(h, w)
    if bad:
        return False
    hashes[row] = h
    return True


@njit(cache=True, inline="always")
def pack_element(words, row, value, k, cv):
    """Put ``value``, element ``k``'s, into its place in ``words[row]`` (a packed state, the other
    elements' bits kept); 1 if it is outside the element's domain (or changes a constant), else 0
    (``pack``'s test, element by element)."""
    lo, span, shift, mask = _columns(cv)
    e = uint64(k)
    d = uint64(value - cv[lo + e])
    m = uint64(cv[mask + e])
    sh = uint64(cv[shift + e])
    w = cv[word_column(cv) + e]
    words[row, w] = (words[row, w] & ~(m << sh)) | ((d & m) << sh)
    return uint64(d >= uint64(cv[span + e]))


@njit(cache=True, inline="always")
def pack_changes(succ, k, changed, sources, source, words, hashes, row, cv):
    """Pack the successor a ``fire`` kernel left as the ``changed`` (element, value) pairs of row
    ``k`` of ``succ`` (``codegen._packing_fire_kernel``) over its source's packed words
    ``sources[source]``, into ``words[row]``, and its fingerprint into ``hashes[row]``; False,
    ``hashes[row]`` not written, if a value is outside its element's domain (``pack``'s test).
    The expand kernel of large layouts does the same written out in its loop
    (``codegen.table_expand_source``): this is its readable form, which the tests check."""
    for w in range(sources.shape[1]):
        words[row, w] = sources[source, w]
    bad = uint64(0)
    for c in range(changed):
        bad |= pack_element(words, row, succ[k, 2 * c + 1], succ[k, 2 * c], cv)
    if bad:
        return False
    h = uint64(GOLDEN)
    for w in range(sources.shape[1]):
        h = fingerprint_step(h, words[row, w])
    hashes[row] = h
    return True


@njit(cache=True, inline="always")
def unpack(words, row, f, cv):
    """Unpack ``words[row]`` into the state ``f``, an int32 row (constants included)."""
    lo, span, shift, mask = _columns(cv)
    for j in range(cv[1]):
        w = words[row, j]
        k, end = uint64(cv[HEADER + j]), uint64(cv[HEADER + j + 1])
        while k < end:
            f[k] = cv[lo + k] + int32((w >> uint64(cv[shift + k])) & uint64(cv[mask + k]))
            k += uint64(1)


@njit(cache=True)
def set_consts(f, cv):
    """Write the constant elements (and those of a one-value domain) into ``f``."""
    lo, span, shift, mask = _columns(cv)
    k = uint64(0)
    while k < uint64(cv[0]):
        if cv[mask + k] == 0:
            f[k] = cv[lo + k]
        k += uint64(1)


@njit(cache=True, inline="always")
def restore(src, dst):
    for k in range(src.shape[0]):
        dst[k] = src[k]


@njit(cache=True)
def pack_rows(flat_rows, words, cv):
    """Pack every row; the first row that does not pack, or -1."""
    hashes = np.empty(flat_rows.shape[0], np.uint64)
    for r in range(flat_rows.shape[0]):
        if not pack(flat_rows[r], words, hashes, r, cv):
            return r
    return -1


@njit(cache=True)
def unpack_rows(words, flat_rows, cv):
    for r in range(words.shape[0]):
        unpack(words, r, flat_rows[r], cv)


@njit(cache=True, nogil=True)
def unpack_range(words, lo, hi, offset, flat, cv):
    """Unpack words[lo:hi] into the int32 rows flat[offset:] of the chunk's states."""
    for j in range(hi - lo):
        unpack(words, lo + j, flat[offset + j], cv)
