"""numba's on-disk cache, as the kernel cache needs it: read from a folder it cannot write, and
every file in it checked against what was compiled into it.

* numba takes a cache folder only if it can write there (its locators probe it), so a read-only
  kernel cache (a CI cache, a read-only mount) would have every kernel compiled again elsewhere.
  ``read_only`` adds a locator, consulted after ``NUMBA_CACHE_DIR``'s, that reads the compiled
  kernels of such a cache from their ``__pycache__``; a run on it writes nothing
  (``compile.compile_in_process``).
* numba links a compiled function (``*.nbc``) as it finds it, under the name its index (``*.nbi``)
  gives: one function's file copied over another's was loaded as the other, and ran (a wrong
  count, in silence); a file cut short raised on every run. ``tolerate_damage`` makes numba write
  every index and compiled file with a digest of its name and content at its end (a keyed
  BLAKE2b; a compiled file's also covers the source stamp its index was written for) and check it
  before numba reads the file: one that does not match (another file's, changed, cut short, or
  written without it) is taken for a missing one: said on stderr, removed, and numba compiles
  that function again and writes it anew. numba's own reader ignores the digest (pickle ignores
  bytes after its end), so the files stay readable by numba without kraftcheck. This covers
  every numba cache of a process that imports ``kraftcheck.checker.kernels`` (which installs it;
  ``codegen`` imports it): the generated kernels', the installation's own kernels' and the spec
  files' functions'. It detects mistakes
  (a swapped, edited, truncated or old file), not someone who can write the cache on purpose:
  the key is no secret.
* numba saves an entry of a function in three steps: it reads the function's index, writes it back
  with the entry, and writes the entry's compiled code under the file name the index gives. Two
  processes that both read the index before either wrote it (two configurations of a spec
  compiling an invariant for their own structured states) both take ``.1.nbc``: the index names
  one's signature and the file holds the other's code, which numba alone loads for a state it was
  not compiled for (it refused the call: said as the spec's error, exit 2). ``tolerate_damage``
  makes a save hold ``LOCK_FILE`` of the cache folder to itself and a load share it, and binds
  each compiled file to the index entry it was written for (a digest of the entry's key before
  the file's own digest): one found under another entry is said on stderr and compiled again.
* numba keeps a function compiled as long as its own source file is unchanged, though it compiled
  in the helpers the function calls from other files: a spec's invariant calling a helper of
  another module kept the helper's old code after the helper was edited (and a run said "holds"
  where the edited spec is violated). ``tolerate_damage`` also makes the source stamp of a spec's
  function (every function outside kraftcheck's engine, the generated kernel modules and the
  installed packages) cover the sources it can reach (``reachable_files``), so a cache entry
  compiled against other sources is stale: numba compiles the function again, silently, as for an
  edit of its own file. It covers the constants those modules' jitted functions compile in too
  (``compiled_in``): a value imported from another file, or computed when the spec is imported.
  The generated kernel modules' names cover the same files (``codegen.sources_digest``), and the
  stamps of their functions the constants of the spec's modules they reach (below).
* The same holds inside the engine: an engine kernel compiles in the jitted helpers it calls from
  other files of the engine (``rows.same_row`` in the visited set's kernels), and a generated
  kernel module the engine's kernels it calls. An installation from a wheel writes every file
  anew, so numba's stamp (modification time and size) changes with it; a source checkout does
  not: a pull that changed only a helper's file left its callers' cache entries compiled against
  the old helper. The stamp of those functions covers the engine files they reach
  (``reachable_files(..., engine=True)``) as well; a generated module's function's, the spec's
  files it reaches and their modules' constants: its name stays the same for another value of a
  constant (configurations share the modules), its compiled code does not.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import io
import os
import pickle
import re
import shutil
import sys
import sysconfig
import threading
import time
import types
from pathlib import Path

from numba.core import caching

from kraftcheck.checker import compiled_in
from kraftcheck.checker.imported_source import imported_digest

_read_only_caches: set[str] = set()


def _in_tree_locator() -> type:
    return getattr(caching, "InTreeCacheLocator", None) or getattr(caching, "_InTreeCacheLocator")


class _ReadOnlyKernelCache(_in_tree_locator()):
    """numba's in-tree cache folder of a generated module in a read-only kernel cache."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if os.path.dirname(os.path.abspath(py_file)) not in _read_only_caches:
            return None
        self = cls(py_func, py_file)
        return self if os.path.isdir(self.get_cache_path()) else None


def read_only(directory: Path) -> None:
    """Let numba load the compiled kernels of the kernel cache ``directory``, which it cannot
    write, from their folder (``__pycache__`` beside them)."""
    _read_only_caches.add(os.path.abspath(directory))
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")
    if _ReadOnlyKernelCache not in impl._locator_classes:
        impl._locator_classes.insert(1, _ReadOnlyKernelCache)  # after NUMBA_CACHE_DIR's own


# what unpickling a file cut short or garbled raises
_DAMAGED = (pickle.UnpicklingError, EOFError, ValueError, IndexError, KeyError, TypeError)

_KEY = b"kraftcheck: numba cache file digest, version 1"
_MARK = b"\n#kraftcheck-digest-1:"
_DIGEST_SIZE = 32
_TRAILER_SIZE = len(_MARK) + _DIGEST_SIZE


def _digest(cache_file, path: str, content: bytes) -> bytes:
    """The digest of ``content`` written as the file ``path`` of numba's ``cache_file``: bound to
    the file's name, and a compiled file's to the source stamp of its index (numba reads one only
    after its index matched that stamp)."""
    h = hashlib.blake2b(key=_KEY, digest_size=_DIGEST_SIZE)
    h.update(os.path.basename(path).encode() + b"\0")
    if path != cache_file._index_path:
        h.update(repr(cache_file._source_stamp).encode() + b"\0")
    h.update(content)
    return h.digest()


def _matches(cache_file, path: str) -> bool:
    """Whether the file ``path`` (if it exists) ends with the digest of its name and content;
    a missing file is left to numba's own reader (nothing cached), one that cannot be read (a
    folder where it should be) does not match: numba's reader would raise on it."""
    try:
        with open(path, "rb") as f:
            content = f.read()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    body, mark, digest = content[:-_TRAILER_SIZE], content[-_TRAILER_SIZE:-_DIGEST_SIZE], content[-_DIGEST_SIZE:]
    return (len(content) >= _TRAILER_SIZE and mark == _MARK
            and hmac.compare_digest(digest, _digest(cache_file, path, body)))


# in every numba cache folder: a save holds it to itself, a load shares it (``tolerate_damage``)
LOCK_FILE = ".kraftcheck-numba.lock"


@contextlib.contextmanager
def _folder_lock(cache_file, exclusive: bool):
    """Hold the lock of ``cache_file``'s folder while inside: to itself (a save, which creates the
    file), or shared (a load, which writes nothing: a folder no save has locked yet goes without,
    and the check of each compiled file's entry finds what a save beside it leaves half done). A
    folder that cannot be written, or a file system without locks, goes without too: nothing
    keeps another writer out."""
    path = os.path.join(cache_file._cache_path, LOCK_FILE)
    try:
        fd = os.open(path, (os.O_RDWR | os.O_CREAT if exclusive else os.O_RDONLY) | os.O_CLOEXEC, 0o644)
    except OSError:
        yield
        return
    try:
        _wait_for_lock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, cache_file._cache_path)
        yield
    finally:
        os.close(fd)


LOCK_PATIENCE_S = 2.0  # a save takes milliseconds: a wait longer than this is said, once


def _wait_for_lock(fd: int, mode: int, folder: str) -> None:
    """Take the lock of ``fd`` in ``mode``; a wait past LOCK_PATIENCE_S (another process holding it,
    stopped with Ctrl-Z, say) is said on stderr before it goes on waiting, rather than in silence."""
    waited, pause = 0.0, 0.005
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if waited >= LOCK_PATIENCE_S:
                break
            time.sleep(pause)
            waited += pause
            pause = min(0.1, pause * 2)
        except OSError:  # ENOLCK: a file system without locks
            return
    print(f"kernel cache: waiting for another process that holds {os.path.join(folder, LOCK_FILE)} "
          f"(saving into or reading that folder); a stopped one (Ctrl-Z) holds it until it goes on or ends",
          file=sys.stderr, flush=True)
    try:
        fcntl.flock(fd, mode)
    except OSError:
        pass


# the index entry a save or load of this thread is about (numba's key: signature, machine, bytecode)
_entry = threading.local()
_ENTRY_MARK = b"\n#kraftcheck-entry-1:"
_ENTRY_SIZE = len(_ENTRY_MARK) + _DIGEST_SIZE
_OTHER_ENTRY = "was compiled for another signature than its index entry names (two processes saved at once)"


def _entry_block(key) -> bytes:
    """What a compiled file holds, before its own digest, of the index entry ``key`` it was written
    for. numba's reader ignores it as it ignores the digest (bytes after the pickle's end)."""
    return _ENTRY_MARK + hashlib.blake2b(repr(key).encode(), key=_KEY, digest_size=_DIGEST_SIZE).digest()


def _entry_of(path: str) -> bytes | None:
    """The entry block of the compiled file ``path`` (whose digest matched), None if it has none:
    written by a kraftcheck that did not bind compiled code to its entry."""
    try:
        with open(path, "rb") as f:
            f.seek(-(_TRAILER_SIZE + _ENTRY_SIZE), os.SEEK_END)
            block = f.read(_ENTRY_SIZE)
    except OSError:
        return None
    return block if block.startswith(_ENTRY_MARK) else None


def _drop(path: str, why: str) -> None:
    print(f"kernel cache: {path} {why}; recompiling it", file=sys.stderr, flush=True)
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)  # numba's save could not put its file in place of a folder
        else:
            os.unlink(path)
    except OSError:
        pass  # read-only: numba's save then fails, and a read-only run is refused (compile._load_read_only)


_MISMATCH = "does not match what was compiled into it"


def _check_numba_internals(cache_file) -> None:
    """Fail at import, not in silence, if numba no longer keeps its cache the way these hooks
    assume: its files written through ``_open_for_write``, read by ``_load_index`` and
    ``_load_data``, named by ``_index_path`` and ``_data_path``, stamped by ``_source_stamp``."""
    def names(method: str) -> tuple:
        return getattr(getattr(getattr(cache_file, method, None), "__code__", None), "co_names", ())

    missing = [what for what, method, name in [
        ("its index written through _open_for_write", "_save_index", "_open_for_write"),
        ("its compiled files written through _open_for_write", "_save_data", "_open_for_write"),
        ("its index read from _index_path", "_load_index", "_index_path"),
        ("its compiled files read from _data_path", "_load_data", "_data_path"),
        ("a source stamp kept as _source_stamp", "__init__", "_source_stamp"),
        ("its index path kept as _index_path", "__init__", "_index_path"),
        ("an entry saved by save, its compiled file through _save_data", "save", "_save_data"),
        ("an entry loaded by load, its compiled file through _load_data", "load", "_load_data"),
        ("a cache folder kept as _cache_path", "__init__", "_cache_path"),
    ] if name not in names(method)]
    cache_init = getattr(caching.Cache.__init__, "_numba_init", caching.Cache.__init__)
    if "IndexDataCacheFile" not in getattr(getattr(cache_init, "__code__", None), "co_names", ()):
        missing.append("a function's cache file made in Cache.__init__")
    if cache_file is None or missing:
        import numba
        changed = "no IndexDataCacheFile" if cache_file is None else f"changed ({'; '.join(missing)})"
        raise ImportError(f"kraftcheck cannot check numba {numba.__version__}'s cache files: "
                          f"numba.core.caching has {changed}; install a numba version kraftcheck supports")


_ENGINE = os.path.dirname(os.path.abspath(__file__))  # kraftcheck.checker: versioned with the installation
# the standard library's and the installed packages' folders (a venv's site-packages)
_INSTALLED = tuple(sorted({os.path.abspath(p) for k in ("stdlib", "platstdlib", "purelib", "platlib")
                           if (p := sysconfig.get_paths().get(k))}))
_GENERATED = re.compile(r"kc_\w+_[0-9a-f]{20}$")  # a generated kernel module's name


def _tracked(module: dict, engine: bool = False) -> str | None:
    """The source file of the module whose globals are ``module``, if its functions' sources are
    tracked: not a generated kernel module (its name covers its sources) or an installed package's
    (but kraftcheck's own Kafka model), and kraftcheck's engine only with ``engine``."""
    path, name = module.get("__file__"), module.get("__name__") or ""
    if not isinstance(path, str) or not path.endswith(".py") or _GENERATED.match(name):
        return None
    path = os.path.abspath(path)
    if path.startswith(_ENGINE + os.sep):
        return path if engine else None
    if not name.startswith("kraftcheck.") and any(path.startswith(root + os.sep) for root in _INSTALLED):
        return None  # the Kafka model of an installed kraftcheck is tracked: it is a spec
    return path


def file_digest(path: str) -> bytes:
    """The SHA-256 of the file ``path`` as this process imported the module read from it
    (``imported_source``): a file saved while a run goes on does not change the stamps of the code
    in memory."""
    return imported_digest(path)


def _engines_own(module: dict) -> bool:
    """Whether the module whose globals are ``module`` is kraftcheck's engine's or a generated
    kernel module."""
    path, name = module.get("__file__"), module.get("__name__") or ""
    return bool(_GENERATED.match(name)) or (
        isinstance(path, str) and os.path.abspath(path).startswith(_ENGINE + os.sep))


def reachable_files(py_func, engine: bool = False) -> set[str] | None:
    """The source files ``py_func`` can reach: its module's, and those of the functions, numba
    dispatchers, classes and modules it names (globals, attributes of a module it names, its
    closure), and in turn theirs; each with the other modules of its package folder, as
    ``codegen.sources_digest``; the functions that define numba intrinsics it names, and what
    tuples, lists, sets and dicts it names hold, are followed too. Generated kernel modules and
    installed packages end the walk, and so do the modules of kraftcheck's engine unless
    ``engine``. None for a function of kraftcheck's engine or a generated kernel module (unless
    ``engine``: then only for the others), or an installed package's."""
    reached = _reach(py_func, engine)
    return None if reached is None else reached[0]


def reachable(py_func, engine: bool = False) -> tuple[set[str], list[bytes]] | None:
    """What ``py_func`` compiles in: the source files it can reach (``reachable_files``) and, for
    each module of a spec's that the walk went through, its file's name (not its folder, as the
    files) with the constants its jitted functions compile in (``compiled_in.module_constants``);
    None where ``reachable_files`` is. With ``engine``, for a generated kernel module's function,
    whose walk goes through the spec's functions it calls, as an engine function's never does."""
    reached = _reach(py_func, engine)
    if reached is None:
        return None
    files, modules = reached
    return files, sorted(os.path.basename(m["__file__"]).encode() + b"\0" + _module_constants(m) for m in modules)


# id of a module's globals -> (the globals, how many names they held, each name its jitted functions
# read with its value then, their constants)
_constants_of: dict[int, tuple[dict, int, tuple, bytes]] = {}
_UNBOUND = object()


def _module_constants(module: dict) -> bytes:
    """``compiled_in.module_constants``, computed again only when the module's globals changed:
    a name added (a module still being imported: a jitted function it calls as it is imported,
    ``LIMIT = limit_of(N)``, has its stamp taken before the rest of the module is defined), or a
    global its jitted functions read bound to another value."""
    known = _constants_of.get(id(module))
    if known is not None and known[0] is module and known[1] == len(module) and \
            all(module.get(n, _UNBOUND) is v for n, v in known[2]):
        return known[3]
    size = len(module)
    names = compiled_in.names_read(module)
    values = tuple((n, module[n]) for n in sorted(names) if n in module)
    constants = compiled_in.module_constants(module, names)
    _constants_of[id(module)] = (module, size, values, constants)
    return constants


def _reach(py_func, engine: bool) -> tuple[set[str], list[dict]] | None:
    """``reachable_files``, with the globals of each tracked module the walk went through that
    is not kraftcheck's engine's (its kernels read no constant computed at import)."""
    start = py_func.__globals__
    if engine != _engines_own(start) or (not engine and _tracked(start) is None):
        return None
    files: set[str] = set()
    modules: dict[int, dict] = {}
    seen: set[int] = set()
    todo = [py_func]
    while todo:
        value = todo.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, (tuple, list, set, frozenset, dict)):  # functions kept in a container
            if len(value) <= compiled_in.MOST_ITEMS:
                todo += list(value.values() if isinstance(value, dict) else value)
            continue
        function = compiled_in.function_of(value)
        if isinstance(value, types.ModuleType):
            module, names = vars(value), None
        elif function is not None:
            module, names = function.__globals__, compiled_in.names_used(function.__code__)
        elif isinstance(value, type):
            module, names = vars(sys.modules.get(getattr(value, "__module__", None) or "", sys)), None
        else:
            continue
        path = _tracked(module, engine)
        if path is not None:
            files.add(path)
            if not path.startswith(_ENGINE + os.sep):
                modules[id(module)] = module
            folder = os.path.dirname(path)
            if os.path.exists(os.path.join(folder, "__init__.py")):
                files.update(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py"))
        elif module is not start:  # a generated module's own text is its name's: walk what it calls
            continue
        if function is not None:
            named = [module[n] for n in names if n in module]
            named += [c.cell_contents for c in function.__closure__ or () if _has_contents(c)]
            ids = {id(v) for v in named}
            for m in named:  # grows: an attribute of a module it names (kafka_state.records_below)
                if isinstance(m, types.ModuleType):
                    found = [v for n in names if id(v := vars(m).get(n)) not in ids]
                    ids.update(id(v) for v in found)
                    named += found
            todo += named
    return files, list(modules.values())


def reachable_sources_digest(py_func, engine: bool = False) -> str | None:
    """A digest of the sources ``py_func`` can reach (``reachable_files``), None if not tracked: of
    their contents and file names, not their folders, so that two checkouts of the same sources
    sharing a kernel cache (a generated module's numba files are in the cache) agree on it rather
    than each compiling again what the other wrote; and of the constants that the jitted
    functions of the spec's modules it reaches compile in (``reachable``)."""
    files, constants = reachable(py_func, engine) or (None, [])
    if files is None:
        return None
    h = hashlib.sha256()
    for name, digest in sorted((os.path.basename(path).encode(), file_digest(path)) for path in files):
        h.update(name + b"\0" + digest)
    for entry in constants:
        h.update(entry + b"\1")
    return h.hexdigest()


def _has_contents(cell) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:  # an empty cell
        return False


def tolerate_damage() -> None:
    """Make numba write a digest at the end of every index and compiled-kernel file, and take a
    file whose digest does not match, or that does not unpickle, for a missing one (once); bind
    each compiled file to its index entry, and save and load under the cache folder's lock."""
    cache_file = getattr(caching, "IndexDataCacheFile", None)
    if getattr(cache_file, "_kraftcheck_tolerant", False):
        return  # hooked already (the checks below would read the hooks)
    _check_numba_internals(cache_file)
    load_index, load_data, open_for_write = cache_file._load_index, cache_file._load_data, cache_file._open_for_write
    save, load = cache_file.save, cache_file.load

    def _save(self, key, data):
        with _folder_lock(self, exclusive=True):
            _entry.key = key
            try:
                return save(self, key, data)
            finally:
                _entry.key = None

    def _load(self, key):
        with _folder_lock(self, exclusive=False):
            _entry.key = key
            try:
                return load(self, key)
            finally:
                _entry.key = None

    def _load_index(self):
        if not _matches(self, self._index_path):
            _drop(self._index_path, _MISMATCH)
            return {}  # nothing cached: numba compiles, and writes the index anew
        try:
            return load_index(self)
        except _DAMAGED:
            _drop(self._index_path, "was damaged")
            return {}

    def _load_data(self, name):
        path = self._data_path(name)
        if not _matches(self, path):
            _drop(path, _MISMATCH)
            raise OSError(f"{name} {_MISMATCH}")  # numba's load takes it for a missing file
        entry = _entry_of(path)
        if entry != _entry_block(getattr(_entry, "key", None)):
            if entry is not None:  # else an older kraftcheck's file: compiled again, as a stale one, in silence
                print(f"kernel cache: {path} {_OTHER_ENTRY}; recompiling it", file=sys.stderr, flush=True)
            raise OSError(f"{name} {_OTHER_ENTRY}")  # numba compiles it and writes the file again
        try:
            return load_data(self, name)
        except _DAMAGED:
            _drop(path, "was damaged")
            raise OSError(f"{name} was damaged") from None

    @contextlib.contextmanager
    def _open_for_write(self, filepath):
        buffer = io.BytesIO()
        yield buffer
        content = buffer.getvalue()
        if filepath != self._index_path:
            content += _entry_block(getattr(_entry, "key", None))
        try:
            with open_for_write(self, filepath) as f:  # numba's: a temporary file, renamed when whole
                f.write(content + _MARK + _digest(self, filepath, content))
        except OSError as e:  # a write names no file: say which one the disk (or a limit) refused
            if e.filename is None:
                e.filename = filepath
            raise

    cache_file._load_index, cache_file._load_data = _load_index, _load_data
    cache_file.save, cache_file.load = _save, _load
    cache_file._open_for_write = _open_for_write
    cache_file._kraftcheck_tolerant = True

    cache_file._source_stamp = property(_source_stamp, _set_source_stamp)
    cache_init = caching.Cache.__init__

    def __init__(self, py_func):
        cache_init(self, py_func)
        self._cache_file._kraftcheck_py_func = py_func

    __init__._numba_init = cache_init
    caching.Cache.__init__ = __init__


def _source_stamp(cache_file):
    """numba's source stamp of a function's cache file (its own file's), with the digest of the
    sources the function reaches (``reachable_sources_digest``) if they are tracked, or of the
    engine's files for a function of the engine or of a generated kernel module: a cache entry
    compiled against other sources is then stale, as for an edit of its own file. The name of the
    function's module too: a compiled entry asks for that module by name as it loads, and a spec
    file that is no package's is imported under a name made of its path, so a copy of its folder
    with numba's cache beside it (``cp -r``, a folder moved) would load entries asking for the
    original's module (ModuleNotFoundError). Taken when numba first reads or writes the cache, once
    every module it reaches is imported, and kept."""
    own = cache_file.__dict__.get("_numba_source_stamp")
    py_func = cache_file.__dict__.pop("_kraftcheck_py_func", None)
    if py_func is not None:
        sources = reachable_sources_digest(py_func) or reachable_sources_digest(py_func, engine=True)
        if sources is not None:
            own = cache_file.__dict__["_numba_source_stamp"] = (own, sources, py_func.__module__)
    return own


def _set_source_stamp(cache_file, stamp) -> None:
    cache_file.__dict__["_numba_source_stamp"] = stamp
