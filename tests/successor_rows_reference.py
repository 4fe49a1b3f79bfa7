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


def first_occurrences_reference(successors: list[tuple[tuple[int, ...], int, tuple[int, ...]]]) -> dict:
    """The distinct-successor path (``keep_first_lines``, then ``gather_part``): of (words, candidate
    row, source's words) met in any order, the states that are not self-loops, each with its
    smallest candidate row."""
    kept: dict[tuple[int, ...], int] = {}
    for words, row, source in successors:
        if words != source:
            kept[words] = min(row, kept.get(words, row))
    return kept


def bucket_dense_reference(hashes: list[int], plo: int, phi: int, shard_bits: int) -> list[list[int]]:
    """Per shard, in order, the positions ``plo..phi-1``."""
    shards: list[list[int]] = [[] for _ in range(1 << shard_bits)]
    for p in range(plo, phi):
        shards[hashes[p] >> (64 - shard_bits)].append(p)
    return shards


def collect_dense_reference(rows: list[int], plo: int, phi: int, new_mark: list[int], stride: int,
                            label_action: list[int], first_index: int, nactions: int):
    """(new rows in candidate order, their parents, labels, positions, new states per action)."""
    new = sorted((rows[p], p) for p in range(plo, phi) if new_mark[p])
    per_action = [0] * nactions
    for row, _ in new:
        per_action[label_action[row % stride]] += 1
    return ([r for r, _ in new], [first_index + r // stride for r, _ in new], [r % stride for r, _ in new],
            [p for _, p in new], per_action)
