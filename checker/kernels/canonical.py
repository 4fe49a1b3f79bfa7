"""Canonical forms of packed states under a spec's symmetry, by brute force over the permutations.

``canonicalize_rows`` replaces each given row of a successor buffer by the lexicographically
smallest flat state (compared element by element in flat order) among its images under every
permutation of the group (the product of the spec's symmetry sets' permutation groups), repacks
it and recomputes its fingerprint, so the visited set only ever sees canonical states. It is
spec-independent: the layout and the permutations come as tables
(``checker.symmetry.PermutationTables``), so it compiles once for every spec. The identity must be
permutation 0. Called through ``checker.symmetry.Canonicaliser``, which validates the arguments.
"""

from __future__ import annotations

from numba import njit, uint64

from kraftcheck.checker.kernels.hashing import fingerprint_row


@njit(cache=True, nogil=True)
def canonicalize_rows(words, hashes, rows, lo, hi, elem_word, elem_shift, elem_mask, elem_const, src, value_table,
                      guard_elem, guard_value, value_map, size, varying, cur, cand, best):
    """Canonicalise ``words[rows[k]]`` for k in lo..hi in place, with fingerprints into ``hashes``.

    ``elem_*`` place every flat element in the words (``elem_const`` >= 0: a constant);
    ``src[p, j]`` is the element permutation p moves to j; its value v becomes
    ``value_map[p, value_table[j], v]`` (members or subsets of one set; values past the table are
    kept) unless ``value_table[j]`` is -1 (not a value that moves) or
    ``cur[guard_elem[j]] == guard_value[j]`` (a filler).
    ``varying`` lists, in flat order, the elements some permutation may change: the others are
    equal in every image, so comparing images on ``varying`` alone orders them as on all elements.
    ``cur``, ``cand`` and ``best`` are scratch rows of ``size`` int64 each (one set per thread).
    """
    nperms = src.shape[0]
    nwords = words.shape[1]
    width = value_map.shape[2]
    for k in range(lo, hi):
        r = rows[k]
        for j in range(size):
            if elem_const[j] >= 0:
                cur[j] = elem_const[j]
            elif elem_mask[j] == 0:
                cur[j] = 0
            else:
                cur[j] = int((words[r, elem_word[j]] >> uint64(elem_shift[j])) & uint64(elem_mask[j]))
            best[j] = cur[j]
        improved = False
        for p in range(1, nperms):
            order = 0  # 0: equal to best so far, -1: smaller
            larger = False
            for i in range(varying.shape[0]):
                j = varying[i]
                v = cur[src[p, j]]
                table = value_table[j]
                if table >= 0 and v < width and not (guard_elem[j] >= 0 and cur[guard_elem[j]] == guard_value[j]):
                    v = value_map[p, table, v]
                cand[j] = v
                if order == 0:
                    if v < best[j]:
                        order = -1
                    elif v > best[j]:
                        larger = True
                        break
            if not larger and order < 0:
                for i in range(varying.shape[0]):
                    best[varying[i]] = cand[varying[i]]
                improved = True
        if improved:
            for w in range(nwords):
                words[r, w] = uint64(0)
            for j in range(size):
                if elem_const[j] < 0 and elem_mask[j] != 0:
                    words[r, elem_word[j]] |= uint64(best[j]) << uint64(elem_shift[j])
        hashes[r] = fingerprint_row(words, r)
