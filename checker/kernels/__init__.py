"""Compiled kernels that do not depend on a spec: hashing and the visited set.

Every kernel takes arrays and scalars only, sits behind a Python wrapper that validates its
input, and has a plain-Python reference beside it that the tests compare it with.
"""

from kraftcheck.checker import numba_cache

# every process that compiles or loads a kernel writes and checks numba's cache files with their
# digest, a helper process that imports only a kernel module as much as the run
numba_cache.tolerate_damage()
