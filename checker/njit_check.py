"""Before anything runs: every function a spec hands the engine, and every function of the
spec's own that those call, is compiled by numba (``@njit``).

Without this, a spec whose action or helper lacks ``@njit`` runs interpreted (the interpreted
tier calls the Python bodies) and then fails under the compiled kernels with numba's "Untyped
global name", pointing into a generated file. Here it is named, with its file and line, before
any exploring.
"""

from __future__ import annotations

import dis
import functools
import inspect
import types
from typing import Any, Callable, Iterator

import numba
from numba.core.dispatcher import Dispatcher
from numba.core.typing.templates import builtin_registry

from kraftcheck.checker.errors import SpecError

# functions of these packages are numba's business (it supports some of them, and says so)
_LIBRARIES = ("numpy", "numba", "math", "cmath", "operator", "builtins", "llvmlite")


def where(fn: Callable[..., Any]) -> str:
    """``file:line`` of a function's definition, or its name if it has none."""
    code = getattr(fn, "__code__", None)
    try:
        return f"{inspect.getsourcefile(fn)}:{code.co_firstlineno}" if code else getattr(fn, "__name__", repr(fn))
    except TypeError:
        return getattr(fn, "__name__", repr(fn))


def require_njit(what: str, fn: Callable[..., Any]) -> None:
    """Raise SpecError naming ``what`` (e.g. "action FillBig") if ``fn`` is not an ``@njit``
    function, or if it calls a function of the spec's own that is not."""
    if numba.config.DISABLE_JIT:  # everything runs as plain Python then
        return
    if not isinstance(fn, Dispatcher):
        raise SpecError(f"{what} ({where(fn)}) is a plain Python function: decorate it with "
                        "@njit(cache=True) (from numba import njit); kraftcheck compiles every action, "
                        "invariant, transition property and constraint")
    registered = {id(f) for f, _ in builtin_registry.globals}  # @register_jitable and @overload
    for helper, caller in _plain_helpers(fn.py_func, registered, set()):
        if not isinstance(helper, types.FunctionType):  # a module-level list, dict or set it reads
            name, value = helper
            raise SpecError(f"{what} reads the module-level {type(value).__name__} {name} in {caller.__name__} "
                            f"({where(caller)}): numba freezes module-level values into the compiled code and "
                            f"cannot freeze a {type(value).__name__}; make {name} a tuple (or an integer constant)")
        raise SpecError(f"{what} calls {helper.__name__} ({where(helper)}) from {caller.__name__}, a plain "
                        f"Python function: decorate {helper.__name__} with @njit(cache=True) too (numba "
                        "compiles only what is compiled)")


def _plain_helpers(py: types.FunctionType, registered: set[int],
                   seen: set[int]) -> Iterator[tuple[Any, types.FunctionType]]:
    """(helper, caller) for every plain Python function of the spec's own that ``py`` reaches
    through the globals it loads, following ``@njit`` helpers; and ((name, value), caller) for
    every module-level list, dict or set one of them reads, which numba cannot compile (the
    interpreted tier would run it, the compiled one refuse it)."""
    if id(py) in seen:
        return
    seen.add(id(py))
    for name in _global_names(py.__code__):
        value = py.__globals__.get(name)
        if isinstance(value, (list, dict, set)):
            yield (name, value), py
        elif isinstance(value, Dispatcher):
            yield from _plain_helpers(value.py_func, registered, seen)
        elif (isinstance(value, types.FunctionType) and id(value) not in registered
              and not (value.__module__ or "").split(".")[0] in _LIBRARIES):
            yield value, py


@functools.lru_cache(maxsize=None)
def _global_names(code: types.CodeType) -> tuple[str, ...]:
    """The global names ``code`` loads. Remembered per code object: every Model reads its spec's
    helpers again (one per counterexample written), and disassembling them took 0.2 s a time."""
    names = [i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # comprehensions, nested functions
            names += _global_names(const)
    return tuple(names)
