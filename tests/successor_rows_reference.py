"""Readable references for ``checker/kernels/successor_rows.py``: the same passes over one part of
a chunk's successor rows, written with Python lists, for ``tests/test_kernels.py`` to compare."""

from __future__ import annotations


def valid_rows_reference(labels: list[int], row_lo: int, row_hi: int, no_label: int) -> list[int]:
    """The rows of ``row_lo..row_hi-1`` whose successor was computed, in order."""
    return [r for r in range(row_lo, row_hi) if labels[r] != no_label]


def bucket_reference(words: list[tuple[int, ...]], hashes: list[int], valid: list[int],
                     sources: list[tuple[int, ...]], first_source: int, stride: int,
                     shard_bits: int) -> list[list[int]]:
    """Per shard, in order, the valid rows that are neither self-loops (a successor equal to its
    own source state) nor repeats of an earlier such row."""
    shards: list[list[int]] = [[] for _ in range(1 << shard_bits)]
    seen: set[tuple[int, ...]] = set()
    for r in valid:
        if words[r] == sources[first_source + r // stride] or words[r] in seen:
            continue
        seen.add(words[r])
        shards[hashes[r] >> (64 - shard_bits)].append(r)
    return shards


def collect_reference(valid: list[int], stride: int, new_mark: list[int], labels: list[int],
                      label_action: list[int], first_index: int, nactions: int):
    """(new rows, their parents, their labels, transitions per action, new states per action);
    ``new_mark[i]`` says whether ``valid[i]`` is new."""
    rows, parents, out_labels = [], [], []
    fired, new = [0] * nactions, [0] * nactions
    for r, mark in zip(valid, new_mark):
        a = label_action[labels[r]]
        fired[a] += 1
        if mark:
            new[a] += 1
            rows.append(r)
            parents.append(first_index + r // stride)
            out_labels.append(labels[r])
    return rows, parents, out_labels, fired, new
