"""Shard tables that grow in place (``checker/kernels/shard_memory.py``): what a growth keeps, what
it refuses, and that a set grown through them holds what Python's ``set`` holds."""

from __future__ import annotations

import numpy as np
import pytest

from kraftcheck.checker.kernels import shard_memory
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.kernels.shard_memory import MAPPED_FROM_BYTES, RESERVE_FACTOR, ShardTable
from kraftcheck.checker.kernels.visited import (EMPTY, FingerprintSet, VisitedSet, _probe_insert, insert_side, rehash,
                                                rehash_in_place)


MAPPED_ROWS = MAPPED_FROM_BYTES // 24 + 1  # the smallest mapped table of 3 columns


def test_a_small_table_grows_into_a_new_array_and_hands_back_the_old() -> None:
    table = ShardTable(1000, 3, EMPTY)
    assert table.array.shape == (1000, 3) and (table.array == EMPTY).all()
    table.array[:] = np.arange(3000, dtype=np.uint64).reshape(1000, 3)
    old = table.grow(MAPPED_ROWS, keep=True)  # into a mapping of its own
    assert np.array_equal(old, np.arange(3000, dtype=np.uint64).reshape(1000, 3))
    assert table.array.shape == (MAPPED_ROWS, 3) and (table.array == EMPTY).all()
    assert table.array.flags.writeable and table.array.flags.c_contiguous


@pytest.mark.parametrize("rows", [RESERVE_FACTOR * MAPPED_ROWS, RESERVE_FACTOR * MAPPED_ROWS + 1])
def test_a_mapped_table_grows_keeping_its_entries_or_not(rows: int) -> None:
    """Within the mapping, and past its end (mremap, which keeps the pages' contents)."""
    for keep in (True, False):
        table = ShardTable(MAPPED_ROWS, 3, EMPTY)
        table.array[:] = 9
        assert table.grow(rows, keep=keep) is None
        assert table.array.shape == (rows, 3)
        assert (table.array[:MAPPED_ROWS] == (9 if keep else EMPTY)).all()
        assert (table.array[MAPPED_ROWS:] == EMPTY).all()


def test_a_growth_refuses_a_smaller_size() -> None:
    table = ShardTable(100, 2, EMPTY)
    with pytest.raises(ValueError, match="grows"):
        table.grow(100, keep=True)
    assert table.array.shape == (100, 2)


def test_a_view_held_across_a_growth_that_moves_the_mapping_is_refused_not_left_dangling() -> None:
    table = ShardTable(MAPPED_ROWS, 3, EMPTY)
    table.array[:] = 6
    held = table.array[:10]
    with pytest.raises(BufferError):
        table.grow(RESERVE_FACTOR * MAPPED_ROWS + 1, keep=True)
    assert table.array.shape == (MAPPED_ROWS, 3) and (table.array == 6).all()  # as it was, still usable
    del held
    table.grow(RESERVE_FACTOR * MAPPED_ROWS + 1, keep=True)


def test_memory_the_system_refuses_is_a_memory_error() -> None:
    with pytest.raises(MemoryError, match="could not map"):
        ShardTable(1 << 50, 8, EMPTY)
    table = ShardTable(MAPPED_ROWS, 3, EMPTY)
    table.array[:] = 5
    with pytest.raises(MemoryError, match="could not grow"):
        table.grow(1 << 50, keep=True)
    assert table.array.shape == (MAPPED_ROWS, 3) and (table.array == 5).all()  # unchanged, still usable


def _fingerprint_table(cap: int, prints: list[int]) -> np.ndarray:
    """A one-column shard of capacity ``cap`` holding ``prints`` (fingerprints: the word is its
    own hash, so a test chooses each entry's home slot)."""
    table = np.full((cap, 1), EMPTY, np.uint64)
    words = np.array(prints, np.uint64).reshape(-1, 1)
    rehash(words, table, True)
    return table


def _findable(table: np.ndarray) -> set[int]:
    """The entries of a one-column fingerprint shard, each checked to be found from its home slot."""
    entries = table[table[:, 0] != EMPTY, 0]
    for word in entries:
        assert not _probe_insert(table, np.array([[word]], np.uint64), 0, word)  # found, not inserted
    return set(entries.tolist())


def _low(slot: int, cap: int) -> int:
    """A fingerprint whose home slot at capacity ``cap`` is ``slot``."""
    return (slot << 32) // cap + 1


@pytest.mark.parametrize("new_cap", [23, 32, 65])
@pytest.mark.parametrize("side_rows", [1, 2, 64])
def test_a_shard_rehashed_in_place_holds_the_same_entries_each_found_from_its_home(new_cap: int,
                                                                                    side_rows: int) -> None:
    """Crowded homes at the start (entries far from home, which must go aside), a cluster at the
    end that wraps to the start (whose new probes may run off the end), and a side buffer smaller
    than what goes aside (the kernel stops, and resumes with a larger one)."""
    cap = 20
    prints = [_low(0, cap) + i for i in range(6)] + [_low(19, cap) + i for i in range(4)] + [_low(9, cap)]
    table = _fingerprint_table(cap, prints)
    assert _findable(table) == set(prints)
    grown = np.full((new_cap, 1), EMPTY, np.uint64)
    grown[:cap] = table
    side = np.empty((side_rows, 1), np.uint64)
    resume, nside, rounds = cap - 1, 0, 0
    while resume >= 0:
        resume, nside = rehash_in_place(grown, cap, True, resume, side, nside)
        if resume >= 0:
            side = np.concatenate([side, np.empty_like(side)])
        rounds += 1
    insert_side(grown, side, nside, True)
    assert _findable(grown) == set(prints)
    assert nside >= 1 and (rounds > 1) == (side_rows < nside)


def _grown_set(fine_from: int) -> tuple[VisitedSet, list[np.ndarray]]:
    rng = np.random.default_rng(11)
    pool = rng.integers(0, 1 << 62, size=(120_000, 3), dtype=np.int64).view(np.uint64)
    visited = VisitedSet(3, shard_bits=1, fine_growth_from_bytes=fine_from)
    marks = []
    for _ in range(5):
        batch = np.ascontiguousarray(pool[rng.integers(0, pool.shape[0], size=50_000)])
        marks.append(visited.insert(batch, fingerprints(batch), np.arange(batch.shape[0], dtype=np.int64)).copy())
    return visited, marks


def _stored(visited: VisitedSet) -> np.ndarray:
    return np.unique(np.concatenate([s[s[:, 0] != EMPTY] for s in visited.shards]), axis=0)


@pytest.mark.parametrize("fine_from", [1 << 40, 1 << 12])
def test_a_set_grown_in_place_equals_one_grown_afresh(fine_from: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same inserts into a set whose shards grow in place (mapped from 64 KiB here) and one
    whose shards grow into new arrays (no table reaches the threshold) give the same marks and
    hold the same states."""
    monkeypatch.setattr(shard_memory, "MAPPED_FROM_BYTES", 1 << 16)
    in_place, marks_in_place = _grown_set(fine_from)
    assert all(t.mapped for t in in_place._tables)  # both shards did grow in place
    monkeypatch.setattr(shard_memory, "MAPPED_FROM_BYTES", 1 << 60)
    afresh, marks_afresh = _grown_set(fine_from)
    assert all(np.array_equal(a, b) for a, b in zip(marks_in_place, marks_afresh))
    assert len(in_place) == len(afresh) and np.array_equal(_stored(in_place), _stored(afresh))
    assert _stored(in_place).shape[0] == len(in_place)


@pytest.mark.parametrize("mapped_from", [MAPPED_FROM_BYTES, 256])  # small tables as arrays; all but the first mapped
@pytest.mark.parametrize("fine_from", [1 << 40, 1 << 12])  # doubling; growth by 1.15 from 4 KiB
def test_a_set_grown_many_times_holds_what_a_python_set_holds(fine_from: int, mapped_from: int,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shard_memory, "MAPPED_FROM_BYTES", mapped_from)
    rng = np.random.default_rng(7)
    pool = rng.integers(0, 1 << 62, size=(20_000, 2), dtype=np.int64).view(np.uint64)
    exact = VisitedSet(2, shard_bits=2, initial_shard_cap=4, fine_growth_from_bytes=fine_from)
    prints = FingerprintSet(shard_bits=2, initial_shard_cap=4, fine_growth_from_bytes=fine_from)
    seen: set[tuple[int, int]] = set()
    for _ in range(12):
        batch = np.ascontiguousarray(pool[rng.integers(0, pool.shape[0], size=5_000)])
        rows = np.arange(batch.shape[0], dtype=np.int64)
        expected = []
        for w in map(tuple, batch.tolist()):
            expected.append(w not in seen)
            seen.add(w)
        hashes = fingerprints(batch)
        assert exact.insert(batch, hashes, rows).astype(bool).tolist() == expected
        assert prints.insert(batch, hashes, rows).astype(bool).tolist() == expected
    assert len(exact) == len(prints) == len(seen)
    stored = {tuple(r) for s in exact.shards for r in s[s[:, 0] != EMPTY].tolist()}
    assert stored == seen
