"""Compiled kernels that do not depend on a spec: hashing and the visited set.

Every kernel takes arrays and scalars only, sits behind a Python wrapper that validates its
input, and has a plain-Python reference beside it that the tests compare it with.
"""
