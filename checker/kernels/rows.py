"""The one comparison of packed states that every table of states makes: word by word.

The visited set, the state index and the successor-row passes all compare a row of one array
with a row of another inside their probe loops; it is inlined there (``inline="always"``), so
sharing it costs nothing in those hot loops.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, inline="always")
def same_row(a, i, b, j):
    """Whether row i of ``a`` and row j of ``b`` hold the same words."""
    for w in range(a.shape[1]):
        if a[i, w] != b[j, w]:
            return False
    return True
