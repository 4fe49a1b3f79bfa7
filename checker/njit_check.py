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
    function, if it calls a function of the spec's own that is not, or if it or a helper it calls
    draws random numbers."""
    require_deterministic(what, fn)
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


# modules whose functions answer otherwise from one call to the next (numba compiles np.random and
# random, with a generator state of its own)
_RANDOM_MODULES = ("random", "numpy.random", "secrets", "uuid", "time", "datetime")
# a module's attribute that is one of those: np.random.random(), os.urandom(16)
_RANDOM_ATTRIBUTES = {"numpy": ("random",), "os": ("urandom", "getrandom")}


def require_deterministic(what: str, fn: Callable[..., Any]) -> None:
    """Raise SpecError naming ``what`` if ``fn``, or a helper of the spec's own it calls, uses
    random numbers or the clock. The engine calls a spec's function more than once on a state (the
    first tier in Python, the compiled kernels, the audit between them, a counterexample's replay),
    and one call's answer is taken for every call: a random answer is not explored, it gives counts
    that are no state space's and a "holds" that was not earned."""
    py = getattr(fn, "py_func", fn)
    if not isinstance(py, types.FunctionType):
        return
    found = _random_use(py, set())
    if found is not None:
        used, caller = found
        raise SpecError(f"{what} uses {used} in {caller.__name__} ({where(caller)}): a spec's functions must give "
                        "the same answer every time they are called on a state (kraftcheck calls each more than "
                        "once, in Python and compiled), so a random choice would be sampled, not explored. Make "
                        "the choice an action parameter (each value an instance: Param(...)), and the checker "
                        "explores every value")


def _random_use(py: types.FunctionType, seen: set[int]) -> Any:
    """(what, function) for the first use of random numbers or the clock in ``py`` or the
    ``@njit`` helpers it reaches; None if it has none."""
    if id(py) in seen:
        return None
    seen.add(id(py))
    for name, attribute in _global_loads(py.__code__):
        value = py.__globals__.get(name)
        if isinstance(value, types.ModuleType):
            module = value.__name__
            if module in _RANDOM_MODULES or module.startswith("numpy.random"):
                return f"{name}{'.' + attribute if attribute else ''} (module {module})", py
            if attribute in _RANDOM_ATTRIBUTES.get(module, ()):
                return f"{name}.{attribute}", py
        elif isinstance(value, Dispatcher):
            found = _random_use(value.py_func, seen)
            if found is not None:
                return found
        elif value is not None:
            module = _module_of(value)
            if module in _RANDOM_MODULES or module.startswith(("numpy.random", "_random")):
                return f"{name} (from {module})", py
            if isinstance(value, types.FunctionType) and module.split(".")[0] not in _LIBRARIES:
                found = _random_use(value, seen)  # a plain helper (require_njit refuses it, but names the use first)
                if found is not None:
                    return found
    return None


def _module_of(value: Any) -> str:
    """The module a global's value comes from: a function's or class's own, a bound method's
    owner's (``np.random.random`` is a method of numpy's global generator), else its type's (a
    generator object, ``np.random.default_rng()``)."""
    module = getattr(value, "__module__", None) if isinstance(value, (type, types.FunctionType)) else None
    if module is None and getattr(value, "__self__", None) is not None:
        module = type(value.__self__).__module__
    if module is None and not callable(value):
        module = type(value).__module__
    return module or getattr(value, "__module__", None) or ""


@functools.lru_cache(maxsize=None)
def _global_loads(code: types.CodeType) -> tuple[tuple[str, str], ...]:
    """(global name, the attribute read from it next or "") for every global ``code`` loads, in
    comprehensions and nested functions too."""
    instructions = list(dis.get_instructions(code))
    loads = []
    for i, ins in enumerate(instructions):
        if ins.opname == "LOAD_GLOBAL":
            nxt = instructions[i + 1] if i + 1 < len(instructions) else None
            attribute = nxt.argval if nxt is not None and nxt.opname in ("LOAD_ATTR", "LOAD_METHOD") else ""
            loads.append((ins.argval, attribute))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            loads += _global_loads(const)
    return tuple(loads)


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
