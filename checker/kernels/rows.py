"""The comparisons of states the kernels make: packed rows word by word, unpacked rows value by
value.

The visited set, the state index and the successor-row passes all compare a row of one array
with a row of another inside their probe loops; the action kernels compare an unpacked successor
with its source after an action that did not fire. Both are inlined (``inline="always"``), so
sharing them costs nothing in those hot loops.
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


@njit(cache=True, inline="always")
def same_values(a, b):
    """Whether the rows ``a`` and ``b`` (a state's int32 row and a successor's int64 row, ``b``
    at least as long) hold the same values. It ORs every difference rather than stopping at the
    first, so LLVM vectorises it: the kernels call it after every instance that does not fire,
    where a difference is a spec's bug (``errors.wrote_and_declined``) and almost never met."""
    d = 0
    for k in range(a.shape[0]):
        d |= a[k] ^ b[k]
    return d == 0
