"""The action kernels of large layouts: one expand kernel for every spec, calling each action's
small ``fire`` kernel through its address.

A spec whose layout packs by a table (``codegen.uses_layout_table``: the Kafka model) does not
get one whole expand kernel per action. Typing and lowering that kernel (the loop over the
states, packing, the repeat table's probe, the tally) is the same work for every action, and was
most of a cold compile (bench/RESULTS.md, "Where a cold compile's seconds go"). Instead each
action gets a ``fire`` kernel that only runs the action's instances on a batch of states, notes
the successors that fired in rows of a buffer and says how many; the rest is one kernel
(``codegen.table_expand_source``), compiled once per installation, which runs every action on a
batch of states before the next batch, calling each ``fire`` through its address
(``call_fire``): its compilation does not depend on which functions it is handed.

``TableExpander`` is one action's ``fire``, compiled as a C callback; ``TableExpansion`` puts
the actions of a model together behind one call.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import cfunc, typeof, types
from numba.core.caching import FunctionCache
from numba.extending import intrinsic

# What every ``fire`` kernel takes and returns: the address of the first of a batch of source
# states (int32 rows), the bytes from one to the next, how many; the addresses (``kernels.addresses``:
# no reference counting) of the successor rows (one per instance and state, and one more), of their
# labels, of their states' places in the batch and of their transition-property masks; the
# action's first label; the selected properties' mask; the address of the successors' counts of
# changed elements and that of the batch's twin, its states as int64 rows (both used by a ``fire``
# that notes only what its action changed: ``packs``). Returns the instances that fired, or -1.
FIRE_SIGNATURE = types.int64(types.uint64, types.uint64, types.int64, types.uint64, types.uint64, types.uint64,
                             types.uint64, types.int64, types.int64, types.uint64, types.uint64)

# What the generic kernel leaves in ``err[1]`` when an action wrote element e of a state's twin
# and did not restore it: ``UNEXPECTED_WRITE - e`` (labels are never negative).
UNEXPECTED_WRITE = -2


@intrinsic
def call_fire(typingctx, address, states_at, state_stride, count, succ_at, labels_at, sources_at, props_at,
              base, select, changes_at, twin_at):
    """Call the ``fire`` kernel compiled at ``address`` (a C callback of FIRE_SIGNATURE): the
    generic kernel takes every action's as an integer, so one compilation serves any number of
    actions (a tuple of first-class functions would be a type per count)."""
    arguments = FIRE_SIGNATURE.args

    def codegen(context, builder, signature, args):
        function = ir.FunctionType(context.get_value_type(FIRE_SIGNATURE.return_type),
                                   [context.get_value_type(t) for t in arguments])
        pointer = builder.inttoptr(args[0], function.as_pointer())
        return builder.call(pointer, [context.cast(builder, v, t, want)
                                      for v, t, want in zip(args[1:], signature.args[1:], arguments)])
    return FIRE_SIGNATURE.return_type(types.uint64, states_at, state_stride, count, succ_at, labels_at, sources_at,
                                      props_at, base, select, changes_at, twin_at), codegen


class TableExpander:
    """One action of a large layout: its ``fire`` kernel (the generated Python function, compiled
    here as a C callback), its number of instances and whether ``fire`` leaves only the elements
    each successor changed (``packs``), with ``kernel``, the generic expand kernel that calls it
    (``TableExpansion``)."""

    def __init__(self, kernel, fire, instances: int, packs: bool = False) -> None:
        if instances < 0:
            raise ValueError(f"an action has at least 0 instances, not {instances}")
        self.kernel = kernel
        self.fire = fire
        self.instances = instances
        self.packs = bool(packs)
        self._compiled = None
        self._address = None

    def cache_files(self) -> list:
        """numba's cache files of what this expander compiles (``fire`` and the generic kernel),
        found without compiling anything (numba's internals: AttributeError if they change)."""
        return [FunctionCache(self.fire)._cache_file, self.kernel._cache._cache_file]

    def compile_fire(self) -> None:
        """Compile (or load from numba's cache) this action's ``fire`` kernel alone."""
        if self._compiled is None:
            self._compiled = cfunc(FIRE_SIGNATURE, cache=True)(self.fire)
            self._address = self._compiled.address

    @property
    def address(self) -> int:
        """Where the compiled ``fire`` kernel is (compiled first if it is not)."""
        self.compile_fire()
        return self._address


class TableExpansion:
    """Actions of a large layout (``TableExpander``s, all with the same generic ``kernel``) with
    the arguments that place each in its model (``codegen._model_source``'s EXPANDER_ARGS: stride,
    base, fired_at, properties_at, select), called as one: every instance of every action on the
    chunk's unpacked states ``flat[lo:hi]`` (the arguments of a generated expand kernel, without
    the scratch rows and the per-action ones)."""

    def __init__(self, expanders, places) -> None:
        expanders, places = list(expanders), list(places)
        if not expanders or len(expanders) != len(places):
            raise ValueError(f"a table expansion needs its actions and as many places: {len(expanders)}, {len(places)}")
        if len({id(e.kernel) for e in expanders}) != 1 or len({(p[0], p[3], p[4]) for p in places}) != 1:
            raise ValueError("a table expansion's actions share one generic kernel, stride, properties_at and select")
        self.kernel = expanders[0].kernel
        self.expanders = expanders
        self.stride, self.properties_at, self.select = places[0][0], places[0][3], places[0][4]
        self.instances = np.array([e.instances for e in expanders], np.int64)
        self.packs = np.array([e.packs for e in expanders], np.bool_)
        self.bases = np.array([p[1] for p in places], np.int64)
        self.fired_ats = np.array([p[2] for p in places], np.int64)
        self._fires = None
        self._entry_points: dict = {}

    def fires(self) -> np.ndarray:
        """Every action's compiled ``fire`` address (each compiled, or loaded, first)."""
        if self._fires is None:
            self._fires = np.array([e.address for e in self.expanders], np.uint64)
        return self._fires

    def compile_kernel(self, *args) -> None:
        """Compile (or load from numba's cache) the generic expand kernel alone, for these
        arguments (those of ``__call__``)."""
        self._entry_point(args)

    def _entry_point(self, args: tuple):
        # numba's ``typeof`` of every argument on every call cost the Kafka model a fifth of its
        # time: what decides an argument's numba type is read here instead, and typeof runs once
        key = tuple(_type_key(a) for a in args)
        entry = self._entry_points.get(key)
        if entry is None:
            # typed by a stand-in for the addresses: compiling the kernel needs no fire compiled
            head = (np.zeros(len(self.expanders), np.uint64), self.instances, self.packs, self.bases, self.fired_ats)
            entry = self.kernel.compile(tuple(typeof(a) for a in head + args + self._places()))
            self._entry_points[key] = entry
        return entry

    def _places(self) -> tuple:
        return (self.stride, self.properties_at, self.select)

    def __call__(self, flat, lo, hi, out_words, out_hash, out_label, out_prop, err, cv, dense, sources,
                 source_offset, seen, seen_mask, generation, tally):
        if flat.ndim != 2 or flat.dtype != np.int32 or not flat.flags.c_contiguous or not 0 <= lo <= hi <= flat.shape[0]:
            # the kernel reaches a batch's rows through one address, as rows one after another
            raise ValueError(f"a large layout's expand kernel takes the chunk's states as C-contiguous int32 rows "
                             f"and a range of them, not {flat.dtype} {flat.shape} {lo}..{hi}")
        args = (flat, lo, hi, out_words, out_hash, out_label, out_prop, err, cv, dense, sources, source_offset,
                seen, seen_mask, generation, tally)
        entry = self._entry_point(args)
        return entry(self.fires(), self.instances, self.packs, self.bases, self.fired_ats, *args, *self._places())


def _type_key(value) -> tuple:
    """What decides ``value``'s numba type as an argument: an array's dtype, dimensions, layout,
    writeability and alignment; a scalar's Python type (the engine's integers fit int64)."""
    if isinstance(value, np.ndarray):
        flags = value.flags
        return (value.dtype, value.ndim, flags.c_contiguous, flags.f_contiguous, flags.writeable, flags.aligned)
    return (type(value),)
