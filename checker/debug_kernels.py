"""``KRAFTCHECK_DEBUG_KERNELS=1``: compiled code that checks every index, in a cache of its own.

numba's compiled code does not check an index against its array's bounds (a read past the end
returns whatever lies there, a write past it overwrites it) unless compiled with ``boundscheck``;
Python raises IndexError. Set in the environment of a run (the background compile's worker
inherits it), this mode compiles every kernel and every function of the spec with bounds checks,
so such an index raises IndexError on every tier and the run stops with the spec's error
(``errors.SpecRaised``). Its compiled code goes to a cache of its own (``kernels-debug`` and
``numba-debug`` beside the kernel cache), so it never stands in for the normal kernels, nor
they for it. Integer division by zero raises in both modes: numba's default error model,
``python``, is every kernel's and every ``@njit`` spec function's that does not set another.
Applied when ``kraftcheck.checker`` is imported, before any spec function is decorated (numba
picks a function's cache directory then).
"""

from __future__ import annotations

import os

ENV = "KRAFTCHECK_DEBUG_KERNELS"
# the folders under the cache root: the kernels, and the debug mode's kernels and numba cache
KERNELS, DEBUG_KERNELS, DEBUG_NUMBA = "kernels", "kernels-debug", "numba-debug"


def enabled() -> bool:
    return os.environ.get(ENV, "").strip() not in ("", "0")


def cache_root() -> str:
    """The kernel cache's root: ``KRAFTCHECK_CACHE_DIR``, else ``$XDG_CACHE_HOME/kraftcheck``."""
    return os.environ.get("KRAFTCHECK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kraftcheck")


def kernels_dir_name() -> str:
    """The kernel cache's folder under ``cache_root()``: the debug mode's is its own."""
    return DEBUG_KERNELS if enabled() else KERNELS


def apply() -> None:
    """In the debug mode: bounds checks in everything numba compiles from now on, cached apart."""
    if not enabled():
        return
    import numba
    numba.config.BOUNDSCHECK = 1
    numba.config.CACHE_DIR = os.path.join(cache_root(), DEBUG_NUMBA)
