"""The visited set's one interface, and the one place that chooses which set a run keeps.

A run asks a visited set four things: insert these rows and say which are new; how many states
it holds; how many bytes; and, resuming a checkpoint, to be rebuilt from the states of the
checkpoint's levels. A set writes no checkpoint of its own: every state it holds is in the run's
levels, which the checkpoint keeps, so ``restore`` from them is its whole checkpoint.

Four sets answer (``visited_set_for`` chooses): ``VisitedSet``, the packed states themselves
(exact); ``CompactVisitedSet``, the states tree-compressed (exact: each half of a state interned
once, a state kept as the pair of its halves' indices, one word); ``FingerprintSet``, their 64-bit
fingerprints (TLC's, exact up to collisions); and ``StateIndex``, which also numbers every state
and keeps its parent, for recording the state graph. The first three also take rows already
bucketed by shard (``insert_bucketed``), the path of the engine's compiled chunks.
"""

from __future__ import annotations

from typing import Protocol, Union

import numpy as np

from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.kernels.state_index import StateIndex
from kraftcheck.checker.kernels.visited import FingerprintSet, VisitedSet
from kraftcheck.checker.kernels.visited_compact import CompactVisitedSet


class VisitedStates(Protocol):
    """What every visited set does."""

    def insert(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int | None = None,
               is_new: np.ndarray | None = None) -> np.ndarray:
        """Insert ``words[rows[:nrows]]`` (``hashes``: their fingerprints); a uint8 array over
        ``words``' rows, 1 on first occurrences (``is_new`` reused if given)."""

    def __len__(self) -> int:
        """The states held."""

    @property
    def nbytes(self) -> int:
        """The bytes the set holds."""

    def restore(self, words: np.ndarray) -> None:
        """Insert every state of ``words`` (one level of a checkpoint), in chunks."""


class ShardedVisitedStates(VisitedStates, Protocol):
    """A visited set that also takes rows bucketed by shard, part by part
    (``successor_rows.bucket_part``), as the engine's chunks give them."""

    def insert_bucketed(self, words: np.ndarray, hashes: np.ndarray, order: np.ndarray, offsets: np.ndarray,
                        is_new: np.ndarray) -> None:
        """Part j's rows of shard k are ``order[offsets[j, k]:offsets[j, k + 1]]``; first
        occurrences marked in ``is_new``, whose marks for those rows the caller has cleared."""


def warm_up_visited_set(options: Options, nwords: int) -> None:
    """Compile (or load from numba's cache) the kernels of the set ``visited_set_for`` gives that
    the engine's warm-up does not (``compile.warm_up_row_passes`` warms the packed set's): the
    tree-compressed set's, which an installation's first ``--compact`` run otherwise compiled in
    its first level, counted as exploring (14 s for 8,832 states). A small set, grown past its
    first tables, on rows of ``nwords`` words."""
    if options.keep_graph or options.fingerprints or not options.compact:
        return
    warm = CompactVisitedSet(nwords, 1, initial_shard_cap=16)
    rows = np.arange(1, 257, dtype=np.uint64)[:, None] * np.arange(1, nwords + 1, dtype=np.uint64)[None, :]
    warm.insert(rows, fingerprints(rows), np.arange(256, dtype=np.int64))


def visited_set_for(options: Options, nwords: int, shard_bits: int) -> Union[ShardedVisitedStates, StateIndex]:
    """The set a run keeps: the numbering index when it records the state graph (which needs
    every state's number, and answers "seen before?" too), fingerprints with ``--fingerprints``,
    the tree-compressed states with ``--compact``, else the packed states."""
    if options.keep_graph:
        return StateIndex(nwords)
    if options.fingerprints:
        return FingerprintSet(shard_bits)
    if options.compact:
        return CompactVisitedSet(nwords, shard_bits)
    return VisitedSet(nwords, shard_bits)
