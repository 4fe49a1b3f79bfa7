"""The module name a spec file loaded by path gets, and how that name is found again in a process
that imported the same file under its own name.

``kraftcheck check --spec my.py:X`` imports ``my.py`` as ``kraftcheck_spec_my_<digest of its
path>`` (``file_module_name``): a name of its own, so two spec files called ``my.py`` never meet
in one process. numba's on-disk cache of the file's ``@njit(cache=True)`` functions lives beside
the file (or under ``NUMBA_CACHE_DIR``) and is keyed by the file and the function, not by the
module's name; but what it caches remembers that name, and loading it imports the module by
name again. A process that imported the file as ``my`` (``import my; kraftcheck.check(my.X)``)
would then fail with ``ModuleNotFoundError: kraftcheck_spec_my_...``. ``install_finder`` adds an
import finder, consulted only after every other one has failed and only for such names, that
answers with the module already imported from that same file. (The other order needs nothing:
the CLI puts the file's folder on ``sys.path``, so ``my`` imports.)
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Optional

# the start of the module name a spec file loaded by path is imported under
SPEC_FILE_MODULE_PREFIX = "kraftcheck_spec_"


def file_module_name(path: Path) -> str:
    """The module name of the spec file ``path`` (absolute): stable between runs, so compiled
    kernels that import its functions are found in numba's cache."""
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    stem = "".join(c if c.isalnum() else "_" for c in path.stem)
    return f"{SPEC_FILE_MODULE_PREFIX}{stem}_{digest}"


def _imported_as(name: str) -> Optional[ModuleType]:
    """A module already imported (under another name) from the file whose ``file_module_name`` is ``name``."""
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not file or not file.endswith(".py"):
            continue
        try:
            if file_module_name(Path(os.path.realpath(file))) == name:
                return module
        except (OSError, ValueError):
            continue
    return None


class _SameFileFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``kraftcheck_spec_*`` names among modules imported under another name."""

    def __init__(self) -> None:
        self._own_spec: dict = {}  # alias -> the module's own __spec__, while the import runs

    def find_spec(self, fullname, path=None, target=None):
        if path is not None or not fullname.startswith(SPEC_FILE_MODULE_PREFIX):
            return None
        module = _imported_as(fullname)
        if module is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, origin=module.__file__)

    def create_module(self, spec):
        module = _imported_as(spec.name)
        if module is not None:
            self._own_spec[spec.name] = module.__spec__
        return module

    def exec_module(self, module):
        # already executed under its own name; importing set its __spec__ to this alias's: undone
        own = self._own_spec.pop(module.__spec__.name, None)
        if own is not None:
            module.__spec__ = own


_FINDER = _SameFileFinder()


def install_finder() -> None:
    """Let ``kraftcheck_spec_*`` names resolve to the same file imported under another name (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
