"""A software prefetch for compiled kernels: ``prefetch_row(table, row)`` asks the CPU to start
loading the cache line of ``table[row, 0]`` now, so a probe issued a few iterations later finds it
in cache instead of waiting on memory. Visited-set inserts are random reads into a table far
larger than the caches; without the hint each costs a full memory round trip in turn.

It is LLVM's ``llvm.prefetch`` (read, high locality, data cache); it never faults and has no
effect on results, which is why interpreted code (``NUMBA_DISABLE_JIT=1``) may skip it.
"""

from __future__ import annotations

from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic


def _prefetch_row_interpreted(table, row):
    """Interpreted kernels (``NUMBA_DISABLE_JIT=1``) have no cache to warm: nothing to do."""
    return None


@intrinsic
def _prefetch_row_compiled(typingctx, table, row):
    """Hint: ``table[row, 0]`` (a 2-D array) will be read soon."""
    if not isinstance(table, types.Array) or table.ndim != 2 or not isinstance(row, types.Integer):
        return None
    sig = types.void(table, row)

    def codegen(context, builder, signature, args):
        arrty = signature.args[0]
        array = context.make_array(arrty)(context, builder, args[0])
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, arrty, array,
                                       [index, context.get_constant(types.intp, 0)], wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        # rw = 0 (read), locality = 3 (keep in all cache levels), cache type = 1 (data)
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


prefetch_row = _prefetch_row_interpreted if config.DISABLE_JIT else _prefetch_row_compiled
