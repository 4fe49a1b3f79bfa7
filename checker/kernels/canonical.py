"""Canonical forms of packed states under a spec's symmetry: the smallest image over the group,
found without trying every permutation on every element.

``canonicalize_rows`` replaces each given row of a successor buffer by the lexicographically
smallest flat state (compared element by element in flat order) among its images under every
permutation of the group (the product of the spec's symmetry sets' permutation groups), repacks
it and recomputes its fingerprint, so the visited set only ever sees canonical states. It is
spec-independent: the layout and the permutations come as tables
(``checker.symmetry.KernelTables``), so it compiles once for every spec. The identity must be
permutation 0. Called through ``checker.symmetry.Canonicaliser``, which validates the arguments.

Only the elements some permutation may change are compared (the others are equal in every
image), in flat order, and read straight from the packed words: a state is never unpacked. The
search has two stages:

* The leading compared elements that stay in place and only have their value mapped (Kafka's
  ISR, ELR and leader come first) cut the candidates at once: for each such value the tables list
  the permutations by the image they give it, smallest first, as bit masks, and the candidates
  become those of the first list that holds any. This keeps exactly the permutations whose image
  is smallest on those elements, whatever they are.
* Each remaining candidate is compared with the best so far from the first element after those,
  and drops out at its first larger element (most do at once); the best one's image is read
  lazily, once per element, and an element both take from the same place, its value unmapped, is
  not read at all (a swap of two brokers leaves the others' elements where they are).

The result is the same smallest image the brute force over every permutation gives (the readable
twin, ``Canonicaliser.canonical_flat``, and the reference explorer's ``orbit_representative``
compute it so); only the order of the work differs. A state whose best image is itself (most
successors of a canonical state) is left as it is: only its fingerprint is computed. A row met
again soon (a successor reached from several states) takes its canonical form from a small memo
of recent rows.
"""

from __future__ import annotations

from numba import config, int64, njit, uint64

from kraftcheck.checker.kernels.hashing import fingerprint_row

if config.DISABLE_JIT:  # interpreted kernels (NUMBA_DISABLE_JIT=1) cannot call numba's intrinsic
    def trailing_zeros(x):
        """The number of zero bits below the lowest one of ``x`` (not 0)."""
        x = int(x)
        return (x & -x).bit_length() - 1
else:
    from numba.cpython.unsafe.numbers import trailing_zeros

# a compared element's place in the packed words, one int64: bits 0-5 shift, 6-31 word, 32- bits
PLACE_WORD, PLACE_BITS, WORD_MASK = 6, 32, (1 << 26) - 1


@njit(cache=True, nogil=True)
def canonicalize_rows(words, hashes, rows, lo, hi, source, table, guard, guard_value, value_map, dest, keep, prefix,
                      levels, nlevels, everyone, cand, bestv, seen, out, memo_key, memo_filled, memo_words, memo_hash):
    """Canonicalise ``words[rows[k]]`` for k in lo..hi in place, with fingerprints into ``hashes``.

    Compared element i (in flat order) of permutation p's image is the element at
    ``source[i * nperms + p]`` (a place: see PLACE_WORD), its value v becoming
    ``value_map[p, table[i], v]`` (members or subsets of one set; values past the table are kept)
    unless ``table[i]`` is -1 (not a value that moves) or the element at place ``guard[i]`` holds
    ``guard_value[i]`` (a filler). ``dest[i]`` is element i's own place; ``keep`` masks, per word,
    the bits of the elements never compared. The first ``prefix`` compared elements stay in place
    (only their values map): for a value v of table t, ``levels[t, v, l]`` (l < ``nlevels[t, v]``)
    is the bit mask (``everyone``'s words) of the permutations giving v its l-th smallest image.
    ``cand`` (as many words as ``everyone``), ``bestv`` (one per compared element), ``seen`` (one
    more: which of ``bestv`` hold the present best candidate's image, by a count kept in its last
    entry between calls) and ``out`` (one per word) are scratch, one set per thread.

    ``memo_*`` remember recent rows (a slot per fingerprint's low bits, a power of two of them; one
    memo per thread, kept between calls): ``memo_filled`` whether a slot holds a row yet,
    ``memo_key`` the row's fingerprint, ``memo_words`` its
    words then its canonical form's, ``memo_hash`` the canonical form's fingerprint. A row met
    again (the same successor reached from several states, as commuting actions do) takes its
    canonical form from there, after its words are compared in full.
    """
    nperms = value_map.shape[0]
    width = value_map.shape[2]
    ncompared = table.shape[0]
    nwords = words.shape[1]
    nmask = everyone.shape[0]
    # a place's value: words[r, place >> PLACE_WORD & WORD_MASK] >> (place & 63), masked to its
    # place >> PLACE_BITS bits, written out where it is read (a helper taking the words would cost
    # a reference count a call)
    slots = memo_key.shape[0]
    for k in range(lo, hi):
        r = rows[k]
        raw = fingerprint_row(words, r)
        slot = int64(raw & uint64(slots - 1))
        if memo_filled[slot] and memo_key[slot] == raw:
            same = True
            for w in range(nwords):
                if memo_words[slot, w] != words[r, w]:
                    same = False
                    break
            if same:
                for w in range(nwords):
                    words[r, w] = memo_words[slot, nwords + w]
                hashes[r] = memo_hash[slot]
                continue
        memo_filled[slot] = True
        memo_key[slot] = raw
        for w in range(nwords):
            memo_words[slot, w] = words[r, w]
        for w in range(nmask):
            cand[w] = everyone[w]
        for i in range(prefix):
            g = guard[i]
            if g >= 0 and int64((words[r, g >> PLACE_WORD & WORD_MASK] >> uint64(g & 63))
                                & ((uint64(1) << uint64(g >> PLACE_BITS)) - uint64(1))) == guard_value[i]:
                continue  # a filler: the same in every image
            s = source[i * nperms]
            v = int64((words[r, s >> PLACE_WORD & WORD_MASK] >> uint64(s & 63))
                      & ((uint64(1) << uint64(s >> PLACE_BITS)) - uint64(1)))
            if v >= width:
                continue
            t = table[i]
            for level in range(nlevels[t, v]):
                hit = False
                for w in range(nmask):
                    if cand[w] & levels[t, v, level, w] != uint64(0):
                        hit = True
                if hit:
                    for w in range(nmask):
                        cand[w] &= levels[t, v, level, w]
                    break
        best = -1
        epoch = seen[ncompared] + 1  # bestv[i] holds the best candidate's image where seen[i] == epoch
        for w in range(nmask):
            x = cand[w]
            while x != uint64(0):
                low = trailing_zeros(x)
                x ^= uint64(1) << uint64(low)
                p = w * 64 + int64(low)
                if best < 0:
                    best = p
                    continue
                for i in range(prefix, ncompared):
                    sp = source[i * nperms + p]
                    sb = source[i * nperms + best]
                    t = table[i]
                    if sp == sb and t < 0:
                        continue  # the same element, its value unmapped: equal
                    mapped = t >= 0
                    g = guard[i]
                    if mapped and g >= 0:
                        mapped = int64((words[r, g >> PLACE_WORD & WORD_MASK] >> uint64(g & 63))
                                       & ((uint64(1) << uint64(g >> PLACE_BITS)) - uint64(1))) != guard_value[i]
                    if seen[i] != epoch:
                        y = int64((words[r, sb >> PLACE_WORD & WORD_MASK] >> uint64(sb & 63))
                                  & ((uint64(1) << uint64(sb >> PLACE_BITS)) - uint64(1)))
                        if mapped and y < width:
                            y = value_map[best, t, y]
                        bestv[i] = y
                        seen[i] = epoch
                    v = int64((words[r, sp >> PLACE_WORD & WORD_MASK] >> uint64(sp & 63))
                              & ((uint64(1) << uint64(sp >> PLACE_BITS)) - uint64(1)))
                    if mapped and v < width:
                        v = value_map[p, t, v]
                    if v != bestv[i]:
                        if v < bestv[i]:
                            best = p
                            epoch += 1
                        break
        seen[ncompared] = epoch
        if best > 0:
            for w in range(nwords):
                out[w] = words[r, w] & keep[w]
            for i in range(ncompared):
                t = table[i]
                s = source[i * nperms + best]
                v = int64((words[r, s >> PLACE_WORD & WORD_MASK] >> uint64(s & 63))
                          & ((uint64(1) << uint64(s >> PLACE_BITS)) - uint64(1)))
                if t >= 0 and v < width:
                    g = guard[i]
                    if g < 0 or int64((words[r, g >> PLACE_WORD & WORD_MASK] >> uint64(g & 63))
                                      & ((uint64(1) << uint64(g >> PLACE_BITS)) - uint64(1))) != guard_value[i]:
                        v = value_map[best, t, v]
                d = dest[i]
                out[d >> PLACE_WORD & WORD_MASK] |= ((uint64(v) & ((uint64(1) << uint64(d >> PLACE_BITS)) - uint64(1)))
                                                     << uint64(d & 63))
            for w in range(nwords):
                words[r, w] = out[w]
            raw = fingerprint_row(words, r)
        hashes[r] = raw
        for w in range(nwords):
            memo_words[slot, nwords + w] = words[r, w]
        memo_hash[slot] = raw
