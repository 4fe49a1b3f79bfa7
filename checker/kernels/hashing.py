"""64-bit fingerprints of packed states (splitmix64's finalizer, chained over the words).

Fingerprints only choose a slot and a shard: the visited set compares full packed states, so a
collision costs a probe, never a missed state (with ``--fingerprints`` they are the visited set).

(numba's on-disk cache of these functions is keyed by this file's size and time: editing the file
invalidates caches written when it was imported under another module name, as before the package
became ``kraftcheck.checker``.)
"""

from __future__ import annotations

import warnings

import numpy as np
from numba import config, njit, uint64

if config.DISABLE_JIT:  # interpreted uint64 arithmetic wraps on purpose, as it does compiled
    warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


@njit(cache=True, inline="always")
def mix64(x):
    x = (x ^ (x >> uint64(30))) * uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> uint64(27))) * uint64(0x94D049BB133111EB)
    return x ^ (x >> uint64(31))


@njit(cache=True, inline="always")
def fingerprint_step(h, word):
    """The fingerprint so far, ``h`` (``uint64(GOLDEN)`` before the first word), chained with
    the next word of the state."""
    return mix64(h ^ word) + uint64(GOLDEN)


@njit(cache=True, inline="always")
def fingerprint_row(words, row):
    """Fingerprint of the packed state ``words[row, :]``."""
    h = uint64(GOLDEN)
    for k in range(words.shape[1]):
        h = fingerprint_step(h, words[row, k])
    return h


@njit(cache=True)
def _fingerprints(words, out):
    for i in range(words.shape[0]):
        out[i] = fingerprint_row(words, i)


def fingerprints(words: np.ndarray) -> np.ndarray:
    """Fingerprints of a batch of packed states (a 2-D uint64 array, one state per row)."""
    if words.ndim != 2 or words.dtype != np.uint64:
        raise TypeError("fingerprints() needs a 2-D uint64 array of packed states")
    out = np.empty(words.shape[0], np.uint64)
    _fingerprints(np.ascontiguousarray(words), out)
    return out


def mix64_reference(x: int) -> int:
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def fingerprint_reference(words: tuple[int, ...]) -> int:
    """Plain-Python fingerprint of one packed state; the compiled kernel must agree."""
    h = GOLDEN
    for w in words:
        h = (mix64_reference(h ^ w) + GOLDEN) & M64
    return h
