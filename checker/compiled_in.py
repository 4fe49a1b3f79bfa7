"""The values a spec module's jitted functions compile in, for the kernel cache's stamps.

numba freezes the globals a jitted function reads: a number, a string, an enum member, a numpy
array or a tuple of them is written into the compiled code as a constant. Such a value need not
come from a file the kernel cache's stamps cover: ``from limits import LIMIT`` beside a spec file
that is no package's, or ``LIMIT = int(os.environ["LIMIT"])`` in the spec's own file. Code
compiled with another value of it is stale, though every file is unchanged.

``module_constants`` says, for a module, what every jitted function defined in it reads.
``numba_cache`` adds it to numba's source stamp of each function that reaches the module: a
spec's function, and a generated kernel module's, which compiles the spec's functions in. Not to
the generated modules' names, which another selection of checks or another preset must share:
each function's cache entry is what goes stale.
"""

from __future__ import annotations

import enum
import hashlib
import sys
import types

MOST_ITEMS = 10_000  # a larger container is taken for data, not a constant numba compiles in


def names_used(code: types.CodeType) -> set[str]:
    """The global and attribute names ``code`` and the functions defined in it use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= names_used(const)
    return names


def frozen(value, depth: int = 0) -> bytes | None:
    """How a value numba compiles in as a constant is written into a digest; None for one it does
    not (a module, a list) or that is too large to be such a constant. A function or a class is
    compiled in too, by which one it is: ``STEP = fast if ... else slow`` or ``DT = np.int8 if ...
    else np.int64`` read by a jitted function; a function by its name and what its closure holds
    (a jitted helper made by a factory). So are a numpy dtype and a numba type."""
    kind = type(value)
    tag = f"{kind.__module__}.{kind.__qualname__}:".encode()
    if value is None or isinstance(value, (str, bytes)):
        return tag + repr(value).encode()
    if isinstance(value, enum.Enum):
        return tag + value.name.encode() + b"," + (frozen(value.value, depth + 1) or b"?")
    if isinstance(value, bool):
        return tag + repr(bool(value)).encode()
    if isinstance(value, (int, float, complex)):  # by the number, whatever repr a subclass has
        base = int if isinstance(value, int) else float if isinstance(value, float) else complex
        return tag + repr(base(value)).encode()
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.dtype):  # a record's fields included
        return tag + repr(value).encode()
    if numpy is not None and isinstance(value, numpy.generic):
        return tag + repr(value.dtype).encode() + b"," + value.tobytes()
    if numpy is not None and isinstance(value, numpy.ndarray):
        if value.dtype.hasobject:
            return None
        content = hashlib.sha256(numpy.ascontiguousarray(value).tobytes()).digest()
        return tag + f"{value.dtype!r}{value.shape}".encode() + content
    if kind.__module__.startswith("numba.core.types"):  # IDX = types.int32 if ... else types.int64
        return tag + str(value).encode()
    if isinstance(value, tuple) and len(value) <= MOST_ITEMS and depth < 20:
        return tag + b"(" + b",".join(frozen(v, depth + 1) or b"?" for v in value) + b")"
    if isinstance(value, type):
        return tag + f"{value.__module__}.{value.__qualname__}".encode()
    py = function_of(value)
    if py is not None and depth < 20:
        cells = []
        for cell in py.__closure__ or ():
            try:
                cells.append(cell.cell_contents)
            except ValueError:  # a cell not yet filled
                cells.append(None)
        return (tag + f"{py.__module__}.{py.__qualname__}".encode()
                + (frozen(tuple(cells), depth + 1) or b"?"))
    return None


def function_of(value) -> types.FunctionType | None:
    """The Python function ``value`` is (a numba dispatcher's own, or the one that defines a numba
    intrinsic), or None."""
    try:
        value = getattr(value, "py_func", value)
        if not isinstance(value, types.FunctionType) and isinstance(getattr(value, "_defn", None), types.FunctionType):
            value = value._defn  # numba.extending.intrinsic
    except Exception:  # an object whose attributes are computed, and fail
        return None
    return value if isinstance(value, types.FunctionType) else None


def _jitted_code(value, module_name: str) -> types.CodeType | None:
    """The code of ``value`` if it is a jitted function (a numba dispatcher, or the function that
    defines a numba intrinsic) defined in the module ``module_name``."""
    if isinstance(value, types.FunctionType):
        return None
    py = function_of(value)
    if py is not None and py.__module__ == module_name:
        return py.__code__
    return None


def names_read(module: dict) -> set[str]:
    """The global and attribute names the jitted functions defined in the module whose globals
    are ``module`` use."""
    name = module.get("__name__") or ""
    names: set[str] = set()
    for value in list(module.values()):
        code = _jitted_code(value, name)
        if code is not None:
            names |= names_used(code)
    return names


def module_constants(module: dict, names: set[str] | None = None) -> bytes:
    """The name and value of every constant that a jitted function defined in the module whose
    globals are ``module`` reads: its globals, and the attributes it reads of a module it names
    (``limits.LIMIT``). ``names``: ``names_read(module)``, if known."""
    if names is None:
        names = names_read(module)
    out: list[bytes] = []
    for n in sorted(names):
        if n not in module:
            continue
        value = module[n]
        if (f := frozen(value)) is not None:
            out.append(f"{n}=".encode() + f)
        _attributes_read(n, value, names, out, 0)
    return b"\0".join(out)


def _attributes_read(prefix: str, value, names: set[str], out: list[bytes], depth: int) -> None:
    """Add to ``out`` the attributes among ``names`` of ``value``, a module or an enum class, that
    are constants: ``limits.LIMIT``, ``cfg.limits.LIMIT`` (a module's module), ``Kind.A`` (an enum
    member whose value is computed when its module is imported)."""
    if isinstance(value, types.ModuleType):
        attributes = vars(value)
    elif isinstance(value, enum.EnumMeta):
        attributes = value.__members__
    else:
        return
    for a in sorted(names):
        if a in attributes:
            if (f := frozen(attributes[a])) is not None:
                out.append(f"{prefix}.{a}=".encode() + f)
            if depth < 3:
                _attributes_read(f"{prefix}.{a}", attributes[a], names, out, depth + 1)
