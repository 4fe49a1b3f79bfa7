"""The digest of a source file as this process imported it, not as the file is now.

A run explores with the functions Python read when it imported the spec. A spec saved while the
run goes on (an author editing it during a long check) must not change what the run takes that
code to be: numba's cache stamps (``numba_cache``), the kernel modules' names (``codegen``), a
checkpoint's record of the spec's code (``explore.spec_code``) and the background compile each
read the file, and a run that took kernels compiled from the edited file halfway through would
count a state space that neither version has.

So a file from which a module was imported is digested once per import (the first time a digest
is asked for; for a spec's folder and the modules the spec's module refers to, as its class
is defined: ``pin_imported_folder``) and that digest
is kept for as long as the module is the one imported: a module imported again (a new module
object, or ``importlib.reload``, which gives it a new ``__spec__``) is digested again; a file
imported under two names (``--spec my.py:X``, then ``import my``) is digested as its latest import.
A file no module was imported from has no code in memory: its digest is the file's as it is now,
and a compile refuses no such file (``compile.refuse_other_sources``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import linecache
import os
import sys
import sysconfig
import types
from typing import Optional

# path -> ((mtime_ns, size), SHA-256): a file read again only when it changed
_current: dict[str, tuple[tuple[int, int], bytes]] = {}
# id of a module -> (the module, its __spec__ when digested, the digest then)
_pinned: dict[int, tuple[types.ModuleType, object, bytes]] = {}
# absolute source path -> name of the module imported from it (rebuilt when sys.modules grows)
_module_names: dict[str, str] = {}
_indexed: list = [None]  # the _modules_state() the index was built at
_bytes: dict[str, bytes] = {}  # real path -> the bytes its latest pinned import read
_folders_pinned: dict[str, tuple] = {}  # folder -> the _modules_state() when its modules were last pinned


def current_digest(path: str) -> bytes:
    """The SHA-256 of the file ``path`` now (b"missing" if it cannot be read)."""
    try:
        st = os.stat(path)
        stamp = (st.st_mtime_ns, st.st_size)
        known = _current.get(path)
        if known is None or known[0] != stamp:
            with open(path, "rb") as f:
                known = _current[path] = (stamp, hashlib.sha256(f.read()).digest())
        return known[1]
    except OSError:
        return b"missing"


def imported_digest(path: str) -> bytes:
    """The SHA-256 of ``path`` as the module imported from it was read (see the module's
    docstring); the file's digest now if no module was imported from it."""
    path = _real(path)
    module = _module_from(path)
    if module is None:
        return current_digest(path)
    spec = getattr(module, "__spec__", None)
    pin = _pinned.get(id(module))
    if pin is None or pin[0] is not module or pin[1] is not spec:
        pin = _pinned[id(module)] = (module, spec, _pin_text(module, path))
    return pin[2]


def _pin_text(module: types.ModuleType, path: str) -> bytes:
    """The digest of ``path`` now, its text kept as the source ``inspect`` gives of the module's
    functions: the bytecode tier and the analysis of what an action writes read the functions'
    source, and would otherwise read a file saved since the import (a spec imported, edited, then
    checked from the same Python session would be explored in bytecode as saved, compiled as
    imported). The bytes are kept too, for what ships the spec to other processes
    (``imported_bytes``)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return b"missing"
    _bytes[path] = data
    try:
        lines = importlib.util.decode_source(data).splitlines(keepends=True)
    except (SyntaxError, UnicodeDecodeError):
        lines = None
    if lines is not None:
        # no modification time: linecache.checkcache keeps such an entry, as it keeps a loader's
        for name in {path, getattr(module, "__file__", path)}:
            linecache.cache[name] = (len(data), None, lines, name)
    return hashlib.sha256(data).digest()


def pin_imported_folder(path: Optional[str], module: Optional[types.ModuleType] = None) -> None:
    """Digest now the file ``path`` (a module being imported), the files beside it that modules
    were imported from, and those of the modules ``module`` (the one being imported) refers to
    (``from lib.helper import f``, ``import lib``) wherever they lie, Python's own and installed
    packages apart: called as a spec's class is defined, so that a spec or a helper saved moments
    later, before the run first asks for a digest, is not taken for the code in memory."""
    if not isinstance(path, str) or not path.endswith(".py"):
        return
    imported_digest(path)
    for source in _referenced_files(module):
        imported_digest(source)
    folder = os.path.dirname(_real(path))
    if _folders_pinned.get(folder) == _modules_state():  # no module imported since (classes made at run time)
        return
    _folders_pinned[folder] = _modules_state()
    if _indexed[0] != _modules_state():
        _index()
    for source in [p for p in _module_names if os.path.dirname(p) == folder]:
        imported_digest(source)


_INSTALLED = tuple(sorted({os.path.realpath(p) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")
                           if (p := sysconfig.get_paths().get(k))}))


def _referenced_files(module: Optional[types.ModuleType]) -> set[str]:
    """The files of the modules that ``module``'s names are, or hold a function or class of, but
    Python's own and installed packages'."""
    files: set[str] = set()
    for value in list(getattr(module, "__dict__", {}).values()):
        try:
            value = getattr(value, "py_func", value)  # a numba dispatcher's Python function
            name = value.__name__ if isinstance(value, types.ModuleType) else \
                getattr(value, "__module__", None) if isinstance(value, (types.FunctionType, type)) else None
        except Exception:  # noqa: BLE001 - an object whose attributes raise refers to nothing here
            continue
        source = _file_of(sys.modules.get(name)) if isinstance(name, str) else None
        if source is not None and not source.startswith(_INSTALLED):
            files.add(source)
    return files


def imported_bytes(path: str) -> Optional[bytes]:
    """The bytes of ``path`` as the module imported from it was read (None if no module was):
    what Spark ships to its executors, which must run the driver's code even if the file was
    saved since."""
    if not imported_from(path):
        return None
    imported_digest(path)
    return _bytes.get(_real(path))


def imported_from(path: str) -> bool:
    """Whether a module of this process was imported from the file ``path``: only then is its
    code in memory, and in what a compile here makes."""
    return _module_from(_real(path)) is not None


def changed_since_import(paths: dict[str, str]) -> list[str]:
    """Of ``paths`` ({path: hex SHA-256 as imported, from ``imported_digest``}), those a module
    of this process was imported from whose file now reads otherwise (a file nothing imported is
    no code of the run's, whatever it reads)."""
    return [p for p, digest in paths.items() if imported_from(p) and current_digest(p).hex() != digest]


def _module_from(path: str) -> Optional[types.ModuleType]:
    """The module imported from ``path`` last (a file imported under two names, saved in
    between, holds two codes: the latest import is the one a run is given, ``import my`` after
    ``--spec my.py:X``)."""
    if _indexed[0] != _modules_state():
        _index()
    name = _module_names.get(path)
    if name is None:  # the index is current: no module was imported from it
        return None
    module = sys.modules.get(name)
    if module is None or _file_of(module) != path:  # replaced since, the count of modules unchanged
        _index()
        name = _module_names.get(path)
        module = sys.modules.get(name) if name is not None else None
    return module if module is not None and _file_of(module) == path else None


def _index() -> None:
    _module_names.clear()
    for name, module in list(sys.modules.items()):  # in the order of import: the last one stays
        path = _file_of(module)
        if path is not None:
            _module_names[path] = name
    _indexed[0] = _modules_state()


def _modules_state() -> tuple:
    """What changes whenever a module is imported: their count, and the last one (a module
    inserted after another was removed keeps the count, not the last entry)."""
    last = next(reversed(sys.modules), None)
    return len(sys.modules), last, id(sys.modules.get(last))


_real_paths: dict[str, str] = {}  # an absolute path -> its real one (the index reads every module's)


def _real(path: str) -> str:
    """``path`` with its symbolic links resolved: a module imported through a linked folder is
    found by its file's real path too, as spec_code names it."""
    if not os.path.isabs(path):  # relative to the working directory, which may change
        return os.path.realpath(path)
    real = _real_paths.get(path)
    if real is None:
        real = _real_paths[path] = os.path.realpath(path)
    return real


def _file_of(module: object) -> Optional[str]:
    path = getattr(module, "__file__", None)
    return _real(path) if isinstance(path, str) and path.endswith(".py") else None
