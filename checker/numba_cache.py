"""numba's on-disk cache, as the kernel cache needs it: read from a folder it cannot write, and
a damaged file in it taken for a missing one.

* numba takes a cache folder only if it can write there (its locators probe it), so a read-only
  kernel cache (a CI cache, a read-only mount) would have every kernel compiled again elsewhere.
  ``read_only`` adds a locator, consulted after ``NUMBA_CACHE_DIR``'s, that reads the compiled
  kernels of such a cache from their ``__pycache__``; a run on it writes nothing
  (``compile.compile_in_process``).
* numba unpickles an index (``*.nbi``) or a compiled kernel (``*.nbc``) as it finds it: one cut
  short raised on every run until deleted by hand. ``tolerate_damage`` makes numba take such a
  file for a missing one: it says so on stderr, removes it, and numba compiles that function
  again and writes it anew. A file whose bytes were changed but still unpickle is not detected
  (docs/engine.md, "What is checked in the kernel cache").
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

from numba.core import caching

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


def _damaged(path: str) -> None:
    print(f"kernel cache: {path} was damaged; recompiling it", file=sys.stderr, flush=True)
    try:
        os.unlink(path)
    except OSError:
        pass  # read-only: numba's save then fails, and a read-only run is refused (compile._load_read_only)


def tolerate_damage() -> None:
    """Make numba take a damaged index or compiled-kernel file for a missing one (once)."""
    cache_file = getattr(caching, "IndexDataCacheFile", None)
    if cache_file is None or getattr(cache_file, "_kraftcheck_tolerant", False):
        return  # numba keeps its cache differently: as it is
    load_index, load_data = cache_file._load_index, cache_file._load_data

    def _load_index(self):
        try:
            return load_index(self)
        except _DAMAGED:
            _damaged(self._index_path)
            return {}  # nothing cached: numba compiles, and writes the index anew

    def _load_data(self, name):
        try:
            return load_data(self, name)
        except _DAMAGED:
            _damaged(self._data_path(name))
            raise OSError(f"{name} was damaged") from None  # numba's load takes it for a missing file

    cache_file._load_index, cache_file._load_data = _load_index, _load_data
    cache_file._kraftcheck_tolerant = True
