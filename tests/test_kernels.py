"""Each compiled kernel against its plain-Python reference."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftcheck.checker.explore.engine import Kernels
from kraftcheck.checker.kernels.hashing import fingerprint_reference, fingerprints
from kraftcheck.checker.kernels.threads import CACHE_LINE, per_thread_rows, split
from kraftcheck.checker.kernels.successor_rows import bucket_part, collect_part, seen_table_size, valid_rows_part
from kraftcheck.checker.kernels.visited import FingerprintSet, VisitedSet
from kraftcheck.checker.layout import Layout
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Bool, Const, Enum, Int, Set
from kraftcheck.specs.two_phase import TwoPhase, TwoPhaseParams

from successor_rows_reference import bucket_reference, collect_reference, valid_rows_reference

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


def test_compiled_successors_carry_the_fingerprints_of_their_words():
    """The action kernels fingerprint each successor as they pack it: that must be exactly the
    fingerprint ``fingerprints()`` gives the packed words (initial states, resumed levels and the
    fingerprint set use that one), for a one-word and a two-word layout alike."""
    from kraftcheck.checker.codegen import NO_LABEL
    for rm in (3, 20):
        model = Model(TwoPhase(TwoPhaseParams(rm)))
        kernels = Kernels(model)
        assert kernels.nwords == (1 if rm == 3 else 2)
        level = kernels.pack(model.initial)
        for _ in range(4):
            out = kernels.successors(level)
            rows = np.flatnonzero(out.labels[: level.shape[0] * kernels.nlabels] != NO_LABEL)
            assert rows.size
            assert out.hashes[rows].tolist() == fingerprints(out.words[rows]).tolist()
            level = np.unique(out.words[rows], axis=0)


@given(st.data())
@settings(max_examples=40, deadline=None)
def test_a_state_object_flattens_as_numpy_flattens_it(data):
    """Layout.from_object takes to_object's states (numpy arrays in one buffer), nested lists of
    a field's shape, and anything else (numpy arrays of their own, tuples, lists of another shape)
    through numpy, as it always did."""
    import types
    layout = Layout([Int("a", 9, (2, 3)), Int("v", 9, (4,)), Bool("b"), Int("d", 9, (2, 2, 2))])
    flat = tuple(data.draw(st.integers(0, 8)) for _ in range(layout.size))
    obj = layout.to_object(flat)
    assert layout.from_object(obj) == flat
    name = data.draw(st.sampled_from(["a", "v", "d"]))
    as_numpy = types.SimpleNamespace(**vars(obj))
    setattr(as_numpy, name, np.array(getattr(obj, name)))
    assert layout.from_object(as_numpy) == flat
    grown = types.SimpleNamespace(**vars(obj))
    as_lists = np.asarray(getattr(obj, name)).tolist()
    setattr(grown, name, as_lists + as_lists[:1])  # nested lists, one row too many: not the shape
    assert len(layout.from_object(grown)) > len(flat)


def test_the_reference_explorer_refuses_an_action_that_writes_and_says_it_did_not_fire():
    from kraftcheck.checker.errors import SpecError
    from kraftcheck.checker.explore.reference import ReferenceExplorer
    from kraftcheck.checker.explore.result import Options
    from kraftcheck.specs.die_hard import DieHard

    class Sloppy(DieHard):
        def actions(self):
            from numba import njit

            from kraftcheck.checker.spec import Action

            @njit
            def fill_and_deny(s, t):
                t.big = 5
                return False
            return [Action("FillAndDeny", fill_and_deny)]

    with pytest.raises(SpecError, match="action FillAndDeny changed the successor but returned False"):
        ReferenceExplorer().explore(Model(Sloppy()), Options())


def test_layout_rejects_out_of_domain_values():
    layout = Layout([Enum("e", ("x", "y", "z")), Set("s", ("a", "b"))])
    import pytest
    from kraftcheck.checker.errors import SpecError
    with pytest.raises(SpecError, match="e = 3 is outside its domain 0..2"):
        layout.pack((3, 0))


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_successor_row_passes_match_their_references(data):
    """valid_rows_part, bucket_part and collect_part on one part of a random chunk, against the
    list-based references (tests/successor_rows_reference.py); several parts side by side give
    what the whole chunk gives."""
    stride = data.draw(st.integers(1, 5))
    nstates = data.draw(st.integers(1, 12))
    nw = data.draw(st.integers(1, 2))
    shard_bits = data.draw(st.integers(1, 3))
    no_label = 99
    rows = nstates * stride
    sources = np.array(data.draw(st.lists(st.lists(st.integers(0, 3), min_size=nw, max_size=nw),
                                          min_size=nstates + 2, max_size=nstates + 2)), np.uint64)
    first_source = data.draw(st.integers(0, 2))
    words = np.array(data.draw(st.lists(st.lists(st.integers(0, 3), min_size=nw, max_size=nw),
                                        min_size=rows, max_size=rows)), np.uint64)
    # a hash is a function of the words, with collisions between different words
    pool = data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=3))
    hash_of: dict = {}
    for w in words.tolist():
        hash_of.setdefault(tuple(w), data.draw(st.sampled_from(pool)))
    hashes = np.array([hash_of[tuple(w)] for w in words.tolist()], np.uint64)
    labels = np.array([data.draw(st.sampled_from([no_label, r % stride])) for r in range(rows)], np.uint16)
    cut = data.draw(st.integers(0, nstates))  # two parts: states 0..cut-1 and cut..nstates-1
    parts = [(0, cut), (cut, nstates)]
    valid = np.full(rows, -1, np.int64)
    new_mark = np.ones(rows, np.uint8)  # stale marks: bucket_part clears those of its rows
    dense_words, dense_hashes = np.zeros((rows, nw), np.uint64), np.zeros(rows, np.uint64)
    order, probe = np.full(rows, -1, np.int64), np.full(rows, -1, np.int64)
    offsets = np.zeros((2, (1 << shard_bits) + 1), np.int64)
    # a repeat-finding table left dirty by an earlier generation, which must count as empty
    seen = np.full(seen_table_size(rows), (5 << 32) | 1, np.int64)
    listed_words = [tuple(int(x) for x in w) for w in words]
    listed_sources = [tuple(int(x) for x in w) for w in sources]
    for j, (a, b) in enumerate(parts):
        lo = a * stride
        nv = valid_rows_part(labels, lo, b * stride, no_label, valid)
        expected_valid = valid_rows_reference(labels.tolist(), lo, b * stride, no_label)
        assert valid[lo: lo + nv].tolist() == expected_valid
        m = bucket_part(words, hashes, valid, lo, nv, sources, first_source, stride, shard_bits, dense_words,
                        dense_hashes, new_mark, probe, order, offsets[j], seen, 6 + j)
        shards = bucket_reference(listed_words, hashes.tolist(), expected_valid, listed_sources, first_source,
                                  stride, shard_bits)
        assert m == sum(len(s) for s in shards)
        assert offsets[j, 0] == lo and offsets[j, -1] == lo + m
        for k, expected in enumerate(shards):  # positions p in valid, for the rows valid[p]
            assert valid[order[offsets[j, k]: offsets[j, k + 1]]].tolist() == expected
        bucketed = order[lo: lo + m]  # what the visited set reads: the bucketed positions' words and hashes
        assert dense_words[bucketed].tolist() == words[valid[bucketed]].tolist()
        assert dense_hashes[bucketed].tolist() == hashes[valid[bucketed]].tolist()
        assert not new_mark[lo: lo + nv].any()
    # new marks as a visited set would leave them, then the collect pass
    marks = [data.draw(st.integers(0, 1)) for _ in range(rows)]  # per position of valid
    new_mark[:] = marks
    nactions = 3
    label_action = np.array([k % nactions for k in range(stride)], np.int64)
    fired, new = np.zeros((2, nactions), np.int64), np.zeros((2, nactions), np.int64)
    out_rows, out_parent, out_label = np.empty(rows, np.int64), np.empty(rows, np.uint32), np.empty(rows, np.uint16)
    for j, (a, b) in enumerate(parts):
        lo = a * stride
        part_valid = valid_rows_reference(labels.tolist(), lo, b * stride, no_label)
        n = collect_part(valid, lo, len(part_valid), stride, new_mark, labels, label_action, 1000, fired[j],
                         new[j], out_rows, out_parent, out_label)
        e_rows, e_parents, e_labels, e_fired, e_new = collect_reference(
            part_valid, stride, marks[lo: lo + len(part_valid)], labels.tolist(), label_action.tolist(), 1000,
            nactions)
        assert out_rows[lo: lo + n].tolist() == e_rows
        assert out_parent[lo: lo + n].tolist() == e_parents
        assert out_label[lo: lo + n].tolist() == e_labels
        assert fired[j].tolist() == e_fired and new[j].tolist() == e_new


@given(st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), max_size=300), min_size=1, max_size=8),
       st.integers(1, 3), st.booleans())
@settings(max_examples=40, deadline=None)
def test_bucketed_inserts_match_python_set(batches, nparts, fingerprint_set):
    """insert_bucketed (rows bucketed part by part, as the engine gives them) marks exactly the
    first occurrences in row order, batch after batch, across shard growths; for the exact set
    and the fingerprint set."""
    visited = FingerprintSet(shard_bits=2, initial_shard_cap=4) if fingerprint_set else \
        VisitedSet(2, shard_bits=2, initial_shard_cap=4)
    seen = set()
    for batch in batches:
        words = np.array(batch, dtype=np.uint64).reshape(len(batch), 2)
        hashes = fingerprints(words)
        order = np.empty(len(batch), np.int64)
        offsets = np.zeros((nparts, 5), np.int64)
        cuts = np.linspace(0, len(batch), nparts + 1).astype(int)
        for j in range(nparts):
            shards = [[r for r in range(cuts[j], cuts[j + 1]) if int(hashes[r]) >> 62 == k] for k in range(4)]
            at = cuts[j]
            for k, rows in enumerate(shards):
                offsets[j, k] = at
                order[at: at + len(rows)] = rows
                at += len(rows)
            offsets[j, 4] = at
        is_new = np.zeros(len(batch), np.uint8)
        visited.insert_bucketed(words, hashes, order, offsets, is_new)
        expected = []
        for row in batch:
            key = fingerprint_reference(row) if fingerprint_set else row
            expected.append(key not in seen)
            seen.add(key)
        assert is_new.astype(bool).tolist() == expected
    assert len(visited) == len(seen)


@given(st.integers(1, 4), st.integers(1, 70), st.sampled_from([np.int64, np.uint8, np.uint32]))
def test_per_thread_rows_never_share_a_cache_line(parts, n, dtype):
    """Each thread's row of counters starts at least a cache line after the previous row's last
    element, so no two rows can meet in one line, wherever the allocation starts."""
    rows = per_thread_rows(parts, n, dtype)
    assert rows.shape == (parts, n) and rows.dtype == dtype and not rows.any()
    for j in range(parts - 1):
        last_of_row = rows[j, n - 1:].__array_interface__["data"][0]
        first_of_next = rows[j + 1].__array_interface__["data"][0]
        assert first_of_next - (last_of_row + rows.itemsize) >= CACHE_LINE


@functools.cache
def compiled_keep_first():
    """``successor_rows.self_loop_lines`` and ``keep_first_lines`` compiled as a function of their
    own, as the action kernels compile the same lines into their loops (with a ring between the
    two, whose order of probes the table does not depend on)."""
    from numba import int64, njit, uint64

    from kraftcheck.checker.kernels.successor_rows import keep_first_lines, self_loop_lines
    source = "def keep_first(words, hashes, p, row, sources, source, table, mask, generation):\n"
    source += "".join(f"    {line}\n" for line in self_loop_lines("words", "p", "sources", "source", "same"))
    source += "    if same:\n        return 0\n"
    source += "".join(f"    {line}\n" for line in keep_first_lines("words", "hashes", "p", "row", "table", "mask",
                                                                    "generation", "kept"))
    source += "    return kept\n"
    namespace = {"int64": int64, "uint64": uint64}
    exec(source, namespace)  # noqa: S102 (text of this project's own kernel generator)
    return njit(namespace["keep_first"])


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_distinct_successor_passes_match_their_references(data):
    """The probe the action kernels compile in (keep_first_lines; the table growing on the way, as
    RepeatTables.grow does it), gather_part, bucket_dense_part, sort_by_high_half and
    collect_dense_part on random successors, against the list-based references
    (tests/successor_rows_reference.py)."""
    from successor_rows_reference import bucket_dense_reference, collect_dense_reference, first_occurrences_reference

    from kraftcheck.checker.kernels.successor_rows import (bucket_dense_part, collect_dense_part, gather_part,
                                                           reseat, sort_by_high_half)
    keep_first = compiled_keep_first()
    nw = data.draw(st.integers(1, 2))
    n = data.draw(st.integers(0, 40))
    stride = data.draw(st.integers(1, 5))
    plo = data.draw(st.integers(0, 3))  # the part's first position
    successors = []
    for _ in range(n):
        words = tuple(data.draw(st.integers(0, 3)) for _ in range(nw))
        source = tuple(data.draw(st.integers(0, 3)) for _ in range(nw))
        row = data.draw(st.integers(0, 8 * stride - 1))
        successors.append((words, row, source))
    expected = first_occurrences_reference(successors)
    size = data.draw(st.sampled_from([2, 4, 128]))
    most = 128
    table = np.full((most, nw + 1), 7, np.uint64)  # stale entries of generation 0, which never counts
    generation = data.draw(st.integers(1, 3))
    cap = plo + n + 2
    dense_words, dense_hashes = np.zeros((cap, nw), np.uint64), np.zeros(cap, np.uint64)
    dense_rows = np.zeros(cap, np.int64)
    sources = np.array([s for _, _, s in successors] or [(0,) * nw], np.uint64).reshape(-1, nw)
    kept = 0
    for i, (words, row, _) in enumerate(successors):
        if kept + 1 > size * 3 // 4:  # grow, as a kernel that stopped makes its caller do
            moved = gather_part(table, size, generation, dense_words, dense_hashes, dense_rows, plo)
            assert moved == kept
            reseat(table, size, min(most, 4 * size) - 1, generation, dense_words, dense_hashes, dense_rows, plo,
                   plo + moved)
            size = min(most, 4 * size)
        scratch = plo  # the kernels pack each successor at the part's first position
        dense_words[scratch] = words
        dense_hashes[scratch] = fingerprint_reference(words)  # as the kernels' pack; tiny tables collide
        kept += keep_first(dense_words, dense_hashes, scratch, row, sources, i, table, size - 1, generation)
    got = gather_part(table, size, generation, dense_words, dense_hashes, dense_rows, plo)
    assert got == kept == len(expected)
    gathered = {tuple(int(x) for x in dense_words[p]): int(dense_rows[p]) for p in range(plo, plo + got)}
    assert gathered == expected
    assert dense_hashes[plo: plo + got].tolist() == fingerprints(dense_words[plo: plo + got]).tolist()

    shard_bits = data.draw(st.integers(1, 3))
    order = np.full(cap, -1, np.int64)
    offsets = np.zeros((1 << shard_bits) + 1, np.int64)
    new_mark = np.ones(cap, np.uint8)  # stale marks: bucket_dense_part clears its positions'
    bucket_dense_part(dense_hashes, plo, plo + got, shard_bits, new_mark, order, offsets)
    shards = bucket_dense_reference(dense_hashes.tolist(), plo, plo + got, shard_bits)
    assert offsets[0] == plo and offsets[-1] == plo + got
    for k, positions in enumerate(shards):
        assert order[offsets[k]: offsets[k + 1]].tolist() == positions
    assert not new_mark[plo: plo + got].any()

    marks = [data.draw(st.integers(0, 1)) for _ in range(cap)]
    new_mark[:] = marks
    nactions = 2
    label_action = np.array([k % nactions for k in range(stride)], np.int64)
    per_action = np.zeros(nactions, np.int64)
    keys, room = np.zeros(cap, np.int64), np.zeros(cap, np.int64)
    out_rows, out_pos = np.empty(cap, np.int64), np.empty(cap, np.int64)
    out_parent, out_label = np.empty(cap, np.uint32), np.empty(cap, np.uint16)
    found = collect_dense_part(dense_rows, plo, plo + got, 0, (8 * stride).bit_length(), new_mark, stride,
                               label_action, 1000, per_action, keys, room, out_rows, out_parent, out_label, out_pos)
    e_rows, e_parents, e_labels, e_pos, e_new = collect_dense_reference(
        dense_rows.tolist(), plo, plo + got, marks, stride, label_action.tolist(), 1000, nactions)
    assert found == len(e_rows)
    assert out_rows[plo: plo + found].tolist() == e_rows
    assert out_parent[plo: plo + found].tolist() == e_parents
    assert out_label[plo: plo + found].tolist() == e_labels
    assert out_pos[plo: plo + found].tolist() == e_pos
    assert per_action.tolist() == e_new

    values = data.draw(st.lists(st.integers(0, 2**23 - 1), max_size=50))  # more than two radix digits
    keys = np.array([0] + [(v << 32) | i for i, v in enumerate(values)], np.int64)
    sort_by_high_half(keys, np.zeros_like(keys), 1, len(values), 23)
    assert keys[1:].tolist() == sorted(((v << 32) | i for i, v in enumerate(values)))


@pytest.mark.parametrize("spec,params", [("two_phase", {"rm": 4}), ("kafka", {"brokers": 3, "min_isr": 2})])
def test_distinct_successors_are_the_first_occurrences_of_the_successor_rows(spec, params):
    """Kernels.distinct_successors keeps, per part, exactly the successors that are neither
    self-loops nor repeats, each with its first candidate row in ``successors``' rows (and the same
    transitions per action and first rows violating each property), also when the repeat tables
    start far too small and must grow within a part."""
    from kraftcheck.api import make_spec
    from kraftcheck.checker.codegen import NO_LABEL
    from kraftcheck.checker.explore.compiled import RepeatTables
    from kraftcheck.checker.kernels.successor_rows import NO_ROW, TALLY_FIRED
    model = Model(make_spec(spec, params))
    kernels = Kernels(model)
    level = kernels.pack(model.initial)
    nl, na = kernels.nlabels, len(model.actions)
    checked = 0
    for _ in range(6):
        n = level.shape[0]
        out = kernels.buffers(n)
        tables = RepeatTables(kernels.threads, out.valid.shape[0], kernels.nwords, kernels.tally_width)
        tables.per_state = 0.01  # tables far too small: every part grows its own
        ends = kernels.distinct_successors(level, 0, n, out, tables, lambda j, a, b, end: None)
        parts = kernels.parts(n)
        starts = [kernels.dense_start(j, out) for j in range(len(parts))]
        got = [{tuple(out.dense_words[p].tolist()): int(out.dense_rows[p]) for p in range(start, end)}
               for start, end in zip(starts, ends)]
        fired = [tables.tally[j][TALLY_FIRED: TALLY_FIRED + na].tolist() for j in range(len(parts))]
        firsts = [tables.tally[j][TALLY_FIRED + na:].tolist() for j in range(len(parts))]
        assert all(ends[j] - starts[j] == len(got[j]) for j in range(len(parts)))
        kernels.successors(level, 0, n, out)
        for j, (a, b) in enumerate(parts):
            expected: dict = {}
            e_fired, e_firsts = [0] * na, [NO_ROW] * len(model.properties)
            for r in range(a * nl, b * nl):
                if out.labels[r] == NO_LABEL:
                    continue
                e_fired[model.label_action[out.labels[r]]] += 1
                for k in range(len(model.properties)):
                    if int(out.props[r]) >> k & 1:
                        e_firsts[k] = min(e_firsts[k], r)
                words = tuple(out.words[r].tolist())
                if words != tuple(level[r // nl].tolist()):
                    expected.setdefault(words, r)
            assert got[j] == expected
            assert fired[j] == e_fired and firsts[j] == e_firsts
            checked += len(expected)
        rows = np.flatnonzero(out.labels[: n * nl] != NO_LABEL)
        level = np.unique(out.words[rows], axis=0)
    assert checked > 100
