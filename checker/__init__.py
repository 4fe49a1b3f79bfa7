"""kraftcheck's engine: spec interface, state encoding, compiled kernels and explorers.

The lowest layer: it imports no spec, invariant, trace or command-line code."""

__version__ = "0.2.0"

# before any spec function runs: numba's cache of a spec file's functions may name the module the
# command line loaded that file as (file_modules)
from kraftcheck.checker.file_modules import install_finder as _install_finder  # noqa: E402

_install_finder()

# KRAFTCHECK_DEBUG_KERNELS=1: bounds-checked compiled code, set before any spec function is decorated
from kraftcheck.checker import debug_kernels as _debug_kernels  # noqa: E402

_debug_kernels.apply()
