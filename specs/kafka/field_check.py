"""Before any work, the Kafka model's own code reads and writes only fields the state has.

A switch an action reads (``s.k_…``) must be registered in ``params.switches()`` and a state
variable declared in ``state.build_fields``; otherwise no tier can run the action: the interpreted
one raises where the line runs, numba refuses it when it types the action, each after the run has
spent its time. ``unknown_fields`` finds such a name from the code alone: it walks every action,
invariant and transition property of the spec, and every ``@njit`` function they call (through a
global or a module attribute such as ``controller.elect``), and lists each attribute read or
written on a local variable (the state, the successor, or a helper's parameters holding them) that
is no field, and each global name they use that their module does not define (a helper renamed or
not imported). Reading the bytecode takes about 0.1 s for the whole model, once per function.
"""

from __future__ import annotations

import builtins
import dis
import functools
import types
from typing import Callable, Iterable, NamedTuple

from numba.core.dispatcher import Dispatcher


class FieldUse(NamedTuple):
    file: str
    line: int
    function: str
    name: str
    writes: bool
    undefined: bool = False  # a global name the function's module does not define


@functools.lru_cache(maxsize=None)
def _scan(py: Callable) -> tuple[tuple[FieldUse, ...], tuple[Dispatcher, ...]]:
    """(attribute uses on local variables, @njit functions called) of one Python function."""
    uses, callees = [], []
    line = py.__code__.co_firstlineno
    prev, module = None, None
    for ins in dis.get_instructions(py):
        if ins.positions is not None and ins.positions.lineno:
            line = ins.positions.lineno
        if ins.opname in ("CACHE", "PRECALL", "EXTENDED_ARG"):
            continue
        if ins.opname == "LOAD_GLOBAL":
            obj = py.__globals__.get(ins.argval)
            if obj is None and ins.argval not in py.__globals__ and not hasattr(builtins, ins.argval):
                uses.append(FieldUse(py.__code__.co_filename, line, py.__name__, ins.argval, False, True))
            if isinstance(obj, Dispatcher):
                callees.append(obj)
            module = obj if isinstance(obj, types.ModuleType) else None
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and module is not None:
            obj = getattr(module, ins.argval, None)
            if isinstance(obj, Dispatcher):
                callees.append(obj)
            module = None
        else:
            module = None
            on_local = prev is not None and prev.opname == "LOAD_FAST"
            if ins.opname == "STORE_ATTR" or (ins.opname == "LOAD_ATTR" and on_local):
                uses.append(FieldUse(py.__code__.co_filename, line, py.__name__, ins.argval,
                                     ins.opname == "STORE_ATTR"))
        prev = ins
    return tuple(uses), tuple(callees)


def unknown_fields(functions: Iterable[Callable], fields: set[str]) -> list[FieldUse]:
    """Every read or write of a name that is not in ``fields``, in ``functions`` and the @njit
    functions they call, in the order found (the first is the one to report)."""
    out, seen = [], set()
    todo = list(functions)
    while todo:
        fn = todo.pop(0)
        py = getattr(fn, "py_func", fn)
        if id(py) in seen or not isinstance(py, types.FunctionType):
            continue
        seen.add(id(py))
        uses, callees = _scan(py)
        out.extend(use for use in uses if use.undefined or use.name not in fields)
        todo.extend(callees)
    return out


def describe(use: FieldUse) -> str:
    """The error for an unknown name: the file and line first, then what to do."""
    if use.undefined:
        return (f"{use.file}:{use.line}: {use.function} calls or reads {use.name!r}, which its module does not "
                f"define; define or import it there")
    verb = "writes" if use.writes else "reads"
    if use.name.startswith("k_"):
        fix = ("register the switch in switches() (specs/kafka/params.py), which turns the options into the "
               "model's Const fields (docs/model.md, 'Adding a safeguard switch')")
    else:
        fix = "declare the field in build_fields (specs/kafka/state.py), or correct the name"
    return f"{use.file}:{use.line}: {use.function} {verb} {use.name!r}, which is no field of the Kafka model; {fix}"
