"""Benchmark: how many distinct halves a model's packed states have, for tree compression.

Reads the states of a checkpoint's levels (``level-NNNN.words``: each level's packed words, uint64,
``--nwords`` a state, levels in order) and prints, per candidate split of a state into two
halves, how many distinct halves the states of the first k levels hold, k over the last six
levels (to extrapolate their growth), and the same counted per shard of the visited set (the top
6 bits of the state's fingerprint: what half tables of their own per shard would hold). The
splits: by words (word 0 | words 1-2, words 0-1 | word 2, ...) and inside a word at its fields'
boundaries (``checker/layout.py`` places them; ``--bit-splits``). What ``CompactVisitedSet``
(``checker/kernels/visited_compact.py``) stores follows: one word a state in the root, the words
of each distinct half in the half tables. Memory: the states and a few copies (about 8 GB for
60 M states of three words); time: sorts, about 10 s a count at 60 M states.

    kraftcheck check --brokers 3 --min-isr 2 --records 2 --continue --threads 1 --fingerprints \\
        --max-states 60000000 --checkpoint DIR
    .venv/bin/python bench/visited_halves.py DIR --bit-splits 1:6,1:12,1:18,1:27,1:36,1:42,1:45,1:48,1:57
"""

from __future__ import annotations

import argparse
import glob

import numpy as np

from kraftcheck.checker.kernels.hashing import fingerprints

SHARD_BITS = 6  # the engine's shards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("directory", help="a checkpoint's directory (its level-*.words files)")
    parser.add_argument("--nwords", type=int, default=3, help="words a state")
    parser.add_argument("--bit-splits", default="", metavar="W:B,...",
                        help="also split inside word W at bit B: (words before W, W's low B bits) | the rest")
    args = parser.parse_args()
    files = sorted(glob.glob(f"{args.directory}/level-*.words"))
    levels = [np.fromfile(f, np.uint64).reshape(-1, args.nwords) for f in files]
    ends = np.cumsum([level.shape[0] for level in levels])
    words = np.concatenate(levels)
    del levels
    print(f"{words.shape[0]:,} states in {len(files)} levels; states by level (cumulative, last six): "
          f"{[int(e) for e in ends[-6:]]}")

    def ids(column: np.ndarray) -> np.ndarray:
        return np.unique(column, return_inverse=True)[1].astype(np.uint64).reshape(-1)

    def key_of(columns: list[np.ndarray]) -> np.ndarray:
        """One uint64 a row naming its tuple of ``columns`` (dense ids combined pairwise)."""
        key = ids(columns[0])
        for column in columns[1:]:
            key = ids((key << np.uint64(32)) | ids(column))
        return key

    def growth(key: np.ndarray) -> list[int]:
        first = np.sort(np.unique(key, return_index=True)[1])
        return [int(np.searchsorted(first, e)) for e in ends[-6:]]

    cols = [words[:, k].copy() for k in range(args.nwords)]
    halves: dict[str, list[np.ndarray]] = {}
    for k in range(args.nwords):
        halves[f"word {k}"] = [cols[k]]
    for split in range(1, args.nwords):
        halves[f"words 0-{split - 1}"] = cols[:split]
        halves[f"words {split}-{args.nwords - 1}"] = cols[split:]
    for item in filter(None, args.bit_splits.split(",")):
        w, b = map(int, item.split(":"))
        low, high = cols[w] & np.uint64((1 << b) - 1), cols[w] >> np.uint64(b)
        halves[f"words 0-{w - 1} + word {w}[:{b}]"] = cols[:w] + [low]
        halves[f"word {w}[{b}:] + words {w + 1}-{args.nwords - 1}"] = [high] + cols[w + 1:]
    shard = fingerprints(np.ascontiguousarray(words)) >> np.uint64(64 - SHARD_BITS)
    for name, columns in halves.items():
        key = key_of(columns)
        counts = growth(key)
        per_shard = growth(ids((shard << np.uint64(32)) | key))[-1]
        print(f"{name:28s} distinct by level {counts}  per state {counts[-1] / words.shape[0]:.4f}  "
              f"per shard, summed {per_shard:,}")


if __name__ == "__main__":
    main()
