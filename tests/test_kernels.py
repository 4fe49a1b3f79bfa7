"""Each compiled kernel against its plain-Python reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftcheck.checker.explore.engine import Kernels
from kraftcheck.checker.kernels.hashing import fingerprint_reference, fingerprints
from kraftcheck.checker.kernels.threads import split
from kraftcheck.checker.kernels.visited import VisitedSet
from kraftcheck.checker.layout import Layout
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Bool, Const, Enum, Int, Set
from kraftcheck.specs.two_phase import TwoPhase, TwoPhaseParams

words_63 = st.integers(min_value=0, max_value=2**63 - 1)


@given(st.lists(st.tuples(words_63, words_63), min_size=1, max_size=50))
@settings(max_examples=50, deadline=None)
def test_fingerprints_match_reference(rows):
    arr = np.array(rows, dtype=np.uint64)
    assert fingerprints(arr).tolist() == [fingerprint_reference(r) for r in rows]


@given(st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), max_size=300), min_size=1, max_size=8),
       st.sampled_from([0, 1 << 30]))
@settings(max_examples=40, deadline=None)
def test_visited_set_matches_python_set(batches, fine_growth_from_bytes):
    """Batch after batch, across shard growths (doubling, and by 1.15 when the threshold is 0)."""
    visited = VisitedSet(2, shard_bits=2, initial_shard_cap=4, fine_growth_from_bytes=fine_growth_from_bytes)
    seen = set()
    for batch in batches:
        words = np.array(batch, dtype=np.uint64).reshape(len(batch), 2)
        rows = np.arange(0, len(batch), dtype=np.int64)
        is_new = visited.insert(words, fingerprints(words), rows)
        expected = []
        for row in batch:
            expected.append(row not in seen)
            seen.add(row)
        assert is_new.astype(bool).tolist() == expected
    assert len(visited) == len(seen)


def test_a_reused_new_marks_buffer_is_right_at_the_rows_given():
    """insert() clears a reused is_new buffer only up to the last row it is given (a small chunk in
    buffers sized for a large one): the marks at the given rows are still exactly the first
    occurrences, whatever the buffer held before."""
    rng = np.random.default_rng(7)
    visited, seen = VisitedSet(1, shard_bits=2, initial_shard_cap=4), set()
    is_new = np.ones(1000, np.uint8)  # stale marks everywhere
    for _ in range(20):
        words = rng.integers(0, 50, (1000, 1), dtype=np.uint64)
        used = int(rng.integers(1, 1000))
        rows = np.sort(rng.choice(used, size=int(rng.integers(1, used + 1)), replace=False)).astype(np.int64)
        marks = visited.insert(words, fingerprints(words), rows, rows.shape[0], is_new)
        for r in rows:
            value = int(words[r, 0])
            assert marks[r] == (value not in seen)
            seen.add(value)


def test_split_covers_range_without_overlap():
    for lo, hi, parts in [(0, 10, 3), (5, 6, 4), (0, 0, 2), (3, 100, 7)]:
        ranges = split(lo, hi, parts)
        covered = [i for a, b in ranges for i in range(a, b)]
        assert covered == list(range(lo, hi))
        assert len(ranges) <= parts


def test_layout_packs_at_most_63_bits_per_word():
    layout = Layout([Int("a", 2**30, (3,)), Set("s", tuple("abcdefghijklmnopqrst")), Bool("b"), Const("c", 7)])
    # a[0] and a[1] take 62 bits of word 0; a[2] (31), s (20) and b (1) go to word 1; c takes none
    assert layout.nwords == 2
    assert [e.word for e in layout.elements][:5] == [0, 0, 1, 1, 1]
    assert layout.elements[-1].bits == 0
    assert all(e.shift + e.bits <= 63 for e in layout.elements)


@given(st.data())
@settings(max_examples=30, deadline=None)
def test_compiled_pack_matches_reference_pack(data):
    model = Model(TwoPhase(TwoPhaseParams(5)))
    kernels = Kernels(model)
    layout = model.layout
    flats = []
    for _ in range(data.draw(st.integers(1, 20))):
        flat = tuple(e.field.const if e.field.const is not None else data.draw(st.integers(0, e.field.domain - 1))
                     for e in layout.elements)
        flats.append(flat)
    packed = kernels.pack(flats)
    assert [tuple(int(w) for w in row) for row in packed] == [layout.pack(f) for f in flats]
    assert kernels.unpack(packed) == flats
    assert [layout.unpack(layout.pack(f)) for f in flats] == flats


def test_layout_rejects_out_of_domain_values():
    layout = Layout([Enum("e", ("x", "y", "z")), Set("s", ("a", "b"))])
    import pytest
    from kraftcheck.checker.errors import SpecError
    with pytest.raises(SpecError, match="e = 3 is outside its domain 0..2"):
        layout.pack((3, 0))
