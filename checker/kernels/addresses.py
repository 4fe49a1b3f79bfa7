"""Arrays seen through raw addresses, which numba does not reference-count.

Every array numba makes from another (a row ``a[i]``, a ``view``) takes a reference to the
memory's owner with an atomic increment, and drops it with an atomic decrement. Where the owner is
shared by the worker threads (a chunk's unpacked states) and the view is made per state, the two
cores fight over one cache line, as the first form of ``kernels.table_expand``'s call per state
and action did (bench/RESULTS.md, "One expand kernel for every large layout").
An array built by ``numba.carray`` from an address has no owner, so nothing is counted; the
caller keeps the memory alive (it holds the array the address was taken from).
"""

from __future__ import annotations

from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def as_voidptr(typingctx, address):
    """The integer ``address`` as a ``void *``, which ``numba.carray`` takes with a dtype."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)
    return types.voidptr(types.uint64), codegen



@njit(cache=True, inline="never")
def keep_alive(owner):
    """A use of ``owner`` where it is called: numba frees an array after its last use, so a
    function that reads it through addresses past that point calls this at its end."""
    return owner.shape[0]
