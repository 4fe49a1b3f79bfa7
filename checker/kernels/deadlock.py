"""The deadlock check of the candidate-row path: which source state has no successor but itself."""

from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True)
def first_stuck(words, labels, sources, first_source, a, b, stride, no_label):
    """The first state i of ``a .. b - 1`` (chunk positions; its source is ``sources[first_source
    + i]``) whose candidate rows ``i * stride .. i * stride + stride - 1`` hold no successor other
    than the state itself (a row whose label is not ``no_label`` and whose words differ from the
    source's): TLC's deadlock, with a self-loop not counted as a way out. -1 if there is none."""
    nw = words.shape[1]
    for i in range(a, b):
        src = first_source + i
        moved = False
        for r in range(i * stride, i * stride + stride):
            if labels[r] != no_label:
                for w in range(nw):
                    if words[r, w] != sources[src, w]:
                        moved = True
                        break
                if moved:
                    break
        if not moved:
            return i
    return -1
