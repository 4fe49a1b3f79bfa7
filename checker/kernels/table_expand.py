"""The action kernels of large layouts: one expand kernel for every spec, calling each action's
small ``fire`` kernel through a function pointer.

A spec whose layout packs by a table (``codegen.uses_layout_table``: the Kafka model) does not
get one whole expand kernel per action. Typing and lowering that kernel (the loop over the
states, packing, the repeat table's probe, the tally) is the same work for every action, and was
most of a cold compile (bench/RESULTS.md, "Where a cold compile's seconds go"). Instead each
action gets a ``fire`` kernel that only runs the action's instances on one state, copies the
successors that fired into rows of a buffer and says how many; the rest is one kernel
(``codegen.table_expand_source``), compiled once per installation, which takes ``fire`` as a
first-class function (numba's ``FunctionType``): its compilation does not depend on which function
it is handed.

``TableExpander`` puts the two together behind the signature of a generated expand kernel, so
the engine calls either kind alike.
"""

from __future__ import annotations

import numpy as np
from numba import cfunc, typeof, types
from numba.core.caching import FunctionCache

# What every ``fire`` kernel takes and returns: the address of the first of a batch of source
# states (int32 rows), the bytes from one to the next, how many; the addresses (``kernels.addresses``:
# no reference counting) of the successor rows (one per instance and state, and one more), of their
# labels, of their states' places in the batch and of their transition-property masks; the
# action's first label; the selected properties' mask; the address of the successors' counts of
# changed elements (written by a ``fire`` that notes only what its action changed: ``packs``).
# Returns the instances that fired.
FIRE_SIGNATURE = types.int64(types.uint64, types.uint64, types.int64, types.uint64, types.uint64, types.uint64,
                             types.uint64, types.int64, types.int64, types.uint64)
FIRE_TYPE = types.FunctionType(FIRE_SIGNATURE)


class _FireAddress(types.WrapperAddressProtocol):
    """A compiled ``fire`` kernel as numba takes a first-class function: its address. Handing
    numba the dispatcher instead costs 37 us a call (it looks the address up again each time),
    this 3.6 us."""

    def __init__(self, address: int) -> None:
        self.address = address

    def __wrapper_address__(self) -> int:
        return self.address

    def signature(self):
        return FIRE_SIGNATURE


class TableExpander:
    """One action of a large layout: ``kernel`` (the generic expand kernel) with the action's
    ``fire`` (the generated Python function, compiled here as a C callback), its number of
    instances and whether ``fire`` leaves only the elements each successor changed (``packs``)
    bound, called with the arguments of a generated expand kernel (``codegen._action_kernel``)."""

    def __init__(self, kernel, fire, instances: int, packs: bool = False) -> None:
        if instances < 0:
            raise ValueError(f"an action has at least 0 instances, not {instances}")
        self.kernel = kernel
        self.fire = fire
        self.instances = instances
        self.packs = bool(packs)
        self._compiled = None
        self._address = None
        self._entry_points: dict = {}

    def cache_index_paths(self) -> list[str]:
        """Where numba's cache indexes what this expander compiles (``fire`` and the generic
        kernel), found without compiling anything (numba's internals: AttributeError if they
        change)."""
        return [FunctionCache(self.fire)._cache_file._index_path, self.kernel._cache._cache_file._index_path]

    def compile_fire(self) -> None:
        """Compile (or load from numba's cache) this action's ``fire`` kernel alone."""
        if self._compiled is None:
            self._compiled = cfunc(FIRE_SIGNATURE, cache=True)(self.fire)
            self._address = _FireAddress(self._compiled.address)

    def compile_kernel(self, *args) -> None:
        """Compile (or load from numba's cache) the generic expand kernel alone, for these
        arguments (those of ``__call__``)."""
        self._entry_point(args, with_fire=False)

    def _entry_point(self, args: tuple, with_fire: bool = True):
        # numba would compile the generic kernel anew for each ``fire`` handed to it (each
        # dispatcher is a type of its own): compiled for FIRE_TYPE instead, it is compiled once.
        # numba's ``typeof`` of every argument on every call cost the Kafka model a fifth of its
        # time: what decides an argument's numba type is read here instead, and typeof runs once
        key = tuple(_type_key(a) for a in args)
        entry = self._entry_points.get(key)
        if with_fire:
            self.compile_fire()
        if entry is None:
            entry = self.kernel.compile((FIRE_TYPE, types.int64, types.boolean) + tuple(typeof(a) for a in args))
            self._entry_points[key] = entry
        return entry

    def __call__(self, *args):
        entry = self._entry_point(args)
        return entry(self._address, self.instances, self.packs, *args)


def _type_key(value) -> tuple:
    """What decides ``value``'s numba type as an argument: an array's dtype, dimensions, layout,
    writeability and alignment; a scalar's Python type (the engine's integers fit int64)."""
    if isinstance(value, np.ndarray):
        flags = value.flags
        return (value.dtype, value.ndim, flags.c_contiguous, flags.f_contiguous, flags.writeable, flags.aligned)
    return (type(value),)
