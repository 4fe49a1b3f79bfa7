"""Which elements of the state each action instance may read and write, and which the checks read.

Partial-order reduction (``explore/partial_order.py``) needs to know when two action instances
are independent: neither writes what the other reads or writes. This module reads every action
from its source with the bytecode translator (``checker/bytecode.py``, which inlines every helper
the action calls) once per instance, its parameters bound to the instance's values, so that
``s.log[b]`` in ``Fetch(f=b2)`` is the one element ``log[1]``, not all of ``log``. Every load of
the state (``s``, and ``t`` before it is written, which holds the same values) is a read, every
store into ``t`` a write:

* at a constant position: that element;
* at a position computed at run time (an index read from the state, a loop variable): every
  element that index can reach, the others held as given (``g[i][b]`` with ``b`` a constant: the
  column ``b``; ``g[b][i]``: the row ``b``).

Every branch counts, taken or not (a branch on a constant is folded, as Python would take it),
so the sets are over-approximations: what an instance can read or write on any state. A function
the translator cannot read (``bytecode.Untranslatable``) reads and writes every element.
Invariants and transition properties are read the same way: their reads are the *visible*
elements. ``tests/test_partial_order.py`` checks the claims against what actions do on reachable
states (writes: the elements that change; reads: an element outside the read set changed, the
action must do the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence, Union

from kraftcheck.checker.bytecode import (Assembler, ArrayRef, Const, Reg, StateRef, Translator, Untranslatable, _Frame,
                                         _Function)
from kraftcheck.checker.layout import Layout


@dataclass(frozen=True)
class Access:
    """What one function may read and write: flat positions (``Layout``'s), as frozensets.
    ``everything``: the translator could not read it (``why``), so it touches every element."""

    reads: frozenset
    writes: frozenset
    everything: bool = False
    why: str = ""


class _RecordingTranslator(Translator):
    """The bytecode translator with the parameters bound to constants, recording every position of
    the state a load or store may reach."""

    def __init__(self, layout: Layout) -> None:
        super().__init__(layout, Assembler())
        self.param_values: Sequence[int] = ()
        self.reads: set = set()
        self.writes: set = set()
        self._starts: dict[int, frozenset] = {}  # register holding a computed position -> the positions it can take

    def _program(self, func: _Function, args: list[str], states: Sequence[int], writable: tuple[int, ...]
                 ) -> list[int]:
        """As ``Translator._program``, but a parameter the body never reassigns is bound to its
        instance's value (a constant, which indices and branches fold), not to a register."""
        self.reads, self.writes, self._starts = set(), set(), {}
        self.writable = writable
        names: dict = {}
        for name, space in zip(args, states):
            if func.assigned.get(name):
                raise Untranslatable(f"{func.fn.__name__} assigns its state argument {name}")
            names[name] = StateRef(space)
        for name, value in zip(args[len(states):], self.param_values):
            names[name] = self.asm.reg() if func.assigned.get(name) else Const(int(value))
        self.stack = [_Frame(func, names, None, None)]
        self.block(func.tree.body)
        return []

    def subscript(self, array: ArrayRef, index, node):
        out = super().subscript(array, index, node)
        if array.space == 2:
            return out
        address = out.address if hasattr(out, "address") else out.offset
        if isinstance(address, Reg):
            # the part indexed starts at one of these positions: each start the array may have,
            # plus the index (a constant, or any position along the axis) times the axis' stride
            steps = [index.value] if isinstance(index, Const) else range(array.shape[0])
            self._starts[address.r] = frozenset(start + i * array.strides[0]
                                                for start in self._positions(array.offset) for i in steps)
        return out

    def _positions(self, address: Union[Const, Reg]) -> frozenset:
        """The positions a computed position (or a part's first position) can take."""
        if isinstance(address, Const):
            return frozenset((address.value,))
        known = self._starts.get(address.r)
        if known is None:
            raise Untranslatable("a position the access reading cannot bound")
        return known

    def load(self, space: int, address):
        if space in (0, 1):
            self.reads.update(self._positions(address))
        return super().load(space, address)

    def store(self, space: int, address, value, node) -> None:
        self.writes.update(self._positions(address))
        super().store(space, address, value, node)


def _access(translator: _RecordingTranslator, fn: Callable, states: Sequence[int], values: Sequence[int],
            writable: tuple[int, ...], everything: frozenset) -> Access:
    translator.param_values = tuple(values)
    try:
        translator.program(fn, states, len(values), writable=writable)
    except Untranslatable as e:
        return Access(everything, everything, True, str(e))
    # a constant field holds one value in every state (writing another is a domain error): reading
    # it depends on nothing
    return Access(frozenset(translator.reads) & everything, frozenset(translator.writes))


def _variable_positions(layout: Layout) -> frozenset:
    """Every position of a field that is not constant."""
    return frozenset(e.flat for e in layout.elements if e.field.const is None)


def action_accesses(model) -> list[Access]:
    """Per label (action instance) of ``model``, what it may read and write."""
    layout = model.layout
    everything = _variable_positions(layout)
    t = _RecordingTranslator(layout)
    return [_access(t, lab.action.fn, (0, 1), lab.values, (1,), everything) for lab in model.labels]


def check_accesses(model) -> dict[str, Access]:
    """Per selected invariant, transition property and constraint of ``model`` (by name), what it
    may read."""
    everything = _variable_positions(model.layout)
    t = _RecordingTranslator(model.layout)
    checks = [(x.name, x.fn, (0,)) for x in list(model.invariants) + list(model.constraints)]
    checks += [(x.name, x.fn, (0, 1)) for x in list(model.properties) + list(model.action_constraints)]
    return {name: _access(t, fn, states, (), (), everything) for name, fn, states in checks}


def visible_positions(model) -> tuple[frozenset, list[str]]:
    """The positions the selected invariants and transition properties (and the constraints) may
    read, and the names of the checks the translator could not read (which then read all)."""
    accesses = check_accesses(model)
    visible = frozenset().union(*(a.reads for a in accesses.values()))
    return visible, [name for name, a in accesses.items() if a.everything]


def dependent(a: Access, b: Access) -> bool:
    """Whether two instances may fail to commute: one writes what the other reads or writes."""
    return bool(a.writes & (b.reads | b.writes) or b.writes & a.reads)
