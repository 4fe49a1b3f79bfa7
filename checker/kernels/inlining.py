"""A spec's action compiled only inside the kernel that calls it.

Numba compiles a jitted function a kernel calls on its own first (types it, lowers it, and has
LLVM optimise and generate code for it with every helper it calls), then links that code into the
kernel, where LLVM optimises it again. An action is called from one kernel only, its ``fire``
kernel, so its own compile is work thrown away: inlined at numba's level (``inline="always"``)
the action is typed and lowered once, inside the kernel. Its helpers stay calls, compiled once
and shared by every action that calls them. A cold compile is shorter so, the kernels as fast
(bench/RESULTS.md, "A cold first run on a fresh machine, and what int64 successors cost the
compile").
"""

from __future__ import annotations

from numba import njit
from numba.core.registry import CPUDispatcher


# the options a plain ``@njit``, ``@njit(cache=True)`` or ``@njit(nogil=True)`` leaves, and their
# values: an action compiled with others (fastmath, boundscheck, error_model, inline) keeps its
# own compile, since an inlined body takes the calling kernel's options
PLAIN_OPTIONS = {"nopython": (True,), "boundscheck": (None,), "nogil": (True, False)}


def inlined(function):
    """``function`` (a spec's ``@njit`` function) as a copy that numba inlines where it is called;
    anything else unchanged, so that what refuses it (a missing ``@njit``) says so as before."""
    if isinstance(function, CPUDispatcher) and all(
            value in PLAIN_OPTIONS.get(key, ()) for key, value in function.targetoptions.items()):
        return njit(inline="always")(function.py_func)
    return function
