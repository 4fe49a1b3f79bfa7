"""``--compact``: the tree-compressed exact visited set against Python's set, and runs with it
against runs with the packed states."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.explore.visited_sets import visited_set_for
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.kernels.visited import VisitedSet
from kraftcheck.checker.kernels.visited_compact import CompactVisitedSet
from kraftcheck.checker.model import Model
from kraftcheck.cli.main import cli
from kraftcheck.specs import spec_class

# states of 1 to 3 words over few values a word, so that halves repeat across states
states = st.integers(1, 3).flatmap(lambda nwords: st.tuples(
    st.just(nwords),
    st.lists(st.lists(st.tuples(*[st.sampled_from([0, 1, 7, 2**40 + 3, 2**63 - 1])] * nwords), max_size=300),
             min_size=1, max_size=8)))


def _bucketed(hashes: np.ndarray, nparts: int, shard_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows bucketed by shard part by part, as the engine gives them (``bucket_part``)."""
    n, nshards = hashes.shape[0], 1 << shard_bits
    order, offsets = np.empty(n, np.int64), np.zeros((nparts, nshards + 1), np.int64)
    cuts = np.linspace(0, n, nparts + 1).astype(int)
    for j in range(nparts):
        at = cuts[j]
        for k in range(nshards):
            rows = [r for r in range(cuts[j], cuts[j + 1]) if int(hashes[r]) >> (64 - shard_bits) == k]
            offsets[j, k] = at
            order[at: at + len(rows)] = rows
            at += len(rows)
        offsets[j, nshards] = at
    return order, offsets


@given(states, st.integers(0, 3), st.sampled_from([0, 1 << 30]))
@settings(max_examples=60, deadline=None)
def test_the_compact_set_matches_python_set(case, nparts, fine_growth_from_bytes):
    """Batch after batch (by ``insert``, or bucketed in 1 to 3 parts), across growths of the half
    tables and of the root's shards: first occurrences marked exactly, each state held once."""
    nwords, batches = case
    compact = CompactVisitedSet(nwords, shard_bits=2, initial_shard_cap=4,
                                fine_growth_from_bytes=fine_growth_from_bytes)
    seen: set[tuple[int, ...]] = set()
    for batch in batches:
        words = np.array(batch, dtype=np.uint64).reshape(len(batch), nwords)
        hashes = fingerprints(words)
        if nparts:
            order, offsets = _bucketed(hashes, nparts, 2)
            is_new = np.zeros(len(batch), np.uint8)
            compact.insert_bucketed(words, hashes, order, offsets, is_new)
        else:
            is_new = compact.insert(words, hashes, np.arange(len(batch), dtype=np.int64))
        expected = []
        for row in batch:
            expected.append(row not in seen)
            seen.add(row)
        assert is_new.astype(bool).tolist() == expected
    assert len(compact) == len(seen)
    left, right = compact.distinct_halves
    split = 1
    if nwords == 1:
        assert (left, right) == (len({r[0] & 0xFFFFFFFF for r in seen}), len({r[0] >> 32 for r in seen}))
    else:
        assert (left, right) == (len({r[:split] for r in seen}), len({r[split:] for r in seen}))


def test_a_reused_new_marks_buffer_and_a_subset_of_rows():
    """As the plain set: only the rows given are inserted, and a reused buffer's stale marks are
    cleared up to the last of them."""
    rng = np.random.default_rng(3)
    compact, plain = CompactVisitedSet(3, shard_bits=2, initial_shard_cap=4), VisitedSet(3, 2, 4)
    marks_compact, marks_plain = np.ones(500, np.uint8), np.ones(500, np.uint8)
    for _ in range(15):
        words = rng.integers(0, 4, (500, 3), dtype=np.uint64)
        used = int(rng.integers(1, 500))
        rows = np.sort(rng.choice(used, size=int(rng.integers(1, used + 1)), replace=False)).astype(np.int64)
        a = compact.insert(words, fingerprints(words), rows, rows.shape[0], marks_compact)[rows]
        b = plain.insert(words, fingerprints(words), rows, rows.shape[0], marks_plain)[rows]
        assert a.tolist() == b.tolist()
    assert len(compact) == len(plain)


def test_refusals():
    with pytest.raises(ValueError, match="split must be 1..2"):
        CompactVisitedSet(3, split=3)
    compact = CompactVisitedSet(2)
    with pytest.raises(TypeError, match="2 words per row"):
        compact.insert(np.zeros((4, 3), np.uint64), np.zeros(4, np.uint64), np.arange(4, dtype=np.int64))
    with pytest.raises(TypeError, match="fingerprint per row"):
        compact.insert(np.zeros((4, 2), np.uint64), np.zeros(3, np.uint64), np.arange(4, dtype=np.int64))


def test_the_run_keeps_the_set_asked_for():
    assert isinstance(visited_set_for(Options(compact=True), 3, 6), CompactVisitedSet)
    assert type(visited_set_for(Options(), 3, 6)) is VisitedSet
    with pytest.raises(UsageError, match="--compact"):
        Options(compact=True, fingerprints=True)


def _summary(r):
    return (r.status, r.distinct_states, r.states_generated, r.depth, r.coverage(),
            [(v.check, v.depth, [s.label for s in v.steps]) for v in r.violations])


@pytest.mark.parametrize("name, params, options", [
    ("two_phase", {"rm": 5}, Options(keep_going=True)),
    ("die_hard", {}, Options(keep_going=True)),
    ("kafka", {}, Options(keep_going=True, max_states=200_000)),
])
def test_compact_runs_count_as_exact_runs(name, params, options, monkeypatch):
    """Every count, verdict and trace of a run with the compact set is the packed set's (the set
    held, at the end, every state the run counted)."""
    import dataclasses
    held = []
    bucketed = CompactVisitedSet.insert_bucketed

    def insert_bucketed(self, *args):
        bucketed(self, *args)
        held[:] = [len(self)]

    monkeypatch.setattr(CompactVisitedSet, "insert_bucketed", insert_bucketed)
    cls = spec_class(name)
    plain = Engine().explore(Model(cls(cls.Params(**params))), options)
    assert not held
    compact = Engine().explore(Model(cls(cls.Params(**params))), dataclasses.replace(options, compact=True))
    assert plain.distinct_states > 0
    assert _summary(compact) == _summary(plain)
    assert held[0] >= compact.distinct_states


@pytest.mark.parametrize("stopped_compact, resumed_compact", [(True, True), (True, False), (False, True)])
def test_a_compact_run_resumes_from_its_checkpoint(tmp_path, stopped_compact, resumed_compact):
    """The set is rebuilt from the checkpoint's levels (``restore``) and the run ends as an
    uninterrupted one; a checkpoint holds levels, not the set, so either set resumes it."""
    cls = spec_class("two_phase")
    model = lambda: Model(cls(cls.Params(rm=6)))  # noqa: E731
    full = Engine().explore(model(), Options(keep_going=True))
    stopped = Engine().explore(model(), Options(keep_going=True, max_depth=9, checkpoint_dir=str(tmp_path),
                                                compact=stopped_compact))
    assert stopped.status == "incomplete"
    resumed = Engine().explore(model(), Options(keep_going=True, checkpoint_dir=str(tmp_path), resume=True,
                                                compact=resumed_compact))
    assert resumed.resumed_from_level == 9
    assert _summary(resumed) == _summary(full)


def test_the_command_line_refuses_compact_with_fingerprints():
    said = CliRunner().invoke(cli, ["check", "--spec", "two_phase", "--compact", "--fingerprints", "--no-color"])
    assert said.exit_code == 2
    assert "--compact" in said.output and "--fingerprints" in said.output


def test_the_command_line_runs_compact(tmp_path):
    reports = []
    for flags in ([], ["--compact"]):
        said = CliRunner().invoke(cli, ["check", "--spec", "two_phase", "--param", "rm=4", "--no-color",
                                        "--json", str(tmp_path / "r.json"), *flags])
        assert said.exit_code == 0, said.output
        reports.append(json.loads((tmp_path / "r.json").read_text()))
    counts = [{k: r[k] for k in ("distinct_states", "states_generated", "depth")} for r in reports]
    assert counts[0]["distinct_states"] > 288 and counts[1] == counts[0]
    # the report says which set counted them, in its options and its result
    assert [(r["options"]["compact"], r["compact"]) for r in reports] == [(False, False), (True, True)]


def test_the_python_api_takes_compact():
    from kraftcheck import api

    plain, compact = (api.check("two_phase", rm=4, compact=c) for c in (False, True))
    assert (compact.compact, plain.compact) == (True, False)
    assert (compact.distinct_states, compact.states_generated) == (plain.distinct_states, plain.states_generated)


def test_two_threads_fill_the_half_tables_as_one():
    """Above a few thousand rows each part of a half table is filled by one of two threads: the
    marks and counts are still Python's set's, batch after batch."""
    from kraftcheck.checker.kernels.threads import using_threads
    rng = np.random.default_rng(11)
    compact, seen = CompactVisitedSet(3, shard_bits=2, initial_shard_cap=4), set()
    with using_threads(2):
        for _ in range(4):
            words = rng.integers(0, 40, (20_000, 3), dtype=np.uint64) * np.uint64(2**40 + 1)
            is_new = compact.insert(words, fingerprints(words), np.arange(20_000, dtype=np.int64))
            expected = []
            for row in map(tuple, words.tolist()):
                expected.append(row not in seen)
                seen.add(row)
            assert is_new.astype(bool).tolist() == expected
    assert len(compact) == len(seen) and compact.distinct_halves == (len({r[:1] for r in seen}),
                                                                      len({r[1:] for r in seen}))


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 60)), min_size=1, max_size=4), st.randoms())
@settings(max_examples=60, deadline=None)
def test_given_rows_lists_each_given_row_once(parts, rnd):
    """Each part's rows lie in a region of its own with unused rows after them, as the engine's
    buffers are laid out; ``given_rows`` lists every row some part gives, once, each part's in
    increasing order, and leaves the marks zero."""
    from kraftcheck.checker.kernels.visited_compact import given_rows
    nshards = 4
    order, offsets, expected, region = [], np.zeros((len(parts), nshards + 1), np.int64), [], 0
    for j, (count, gap) in enumerate(parts):
        rows = list(range(region, region + count))
        region += count + gap
        rnd.shuffle(rows)  # bucketed by shard: any order within the part
        cuts = sorted(rnd.randint(0, count) for _ in range(nshards - 1))
        offsets[j] = [len(order)] + [len(order) + c for c in cuts] + [len(order) + count]
        order += rows
        expected.append(sorted(rows))
    marks = np.zeros(region + 1, np.uint8)
    out = np.full(len(order) + 1, -1, np.int64)
    n = given_rows(np.array(order, np.int64), offsets, marks, out)
    assert out[:n].tolist() == [r for rows in expected for r in rows]
    assert not marks.any()


def test_rows_outside_the_parts_are_not_inserted():
    """The engine gives two parts with unused rows between and after them (rows left from earlier
    chunks): on two threads, only the given rows are inserted, and marked as Python's set says."""
    from kraftcheck.checker.kernels.threads import using_threads
    rng = np.random.default_rng(5)
    compact, seen = CompactVisitedSet(3, shard_bits=2, initial_shard_cap=4), set()
    with using_threads(2):
        for _ in range(3):
            words = rng.integers(0, 40, (60_000, 3), dtype=np.uint64) * np.uint64(2**40 + 1)
            hashes = fingerprints(words)
            parts = [np.arange(0, 9_000), np.arange(30_000, 37_000)]
            order = []
            offsets = np.zeros((2, compact.nshards + 1), np.int64)
            for j, rows in enumerate(parts):
                shard = hashes[rows] >> np.uint64(64 - compact.shard_bits)
                offsets[j, 0] = len(order)
                for k in range(compact.nshards):
                    order += rows[shard == k].tolist()
                    offsets[j, k + 1] = len(order)
            is_new = np.zeros(60_000, np.uint8)
            compact.insert_bucketed(words, hashes, np.array(order, np.int64), offsets, is_new)
            expected = []
            for row in map(tuple, words[np.concatenate(parts)].tolist()):
                expected.append(row not in seen)
                seen.add(row)
            assert is_new[np.concatenate(parts)].astype(bool).tolist() == expected
            assert not is_new[9_000:30_000].any() and not is_new[37_000:].any()
    assert len(compact) == len(seen)


WARM_THEN_EXPLORE = """
import sys
from numba.core.registry import CPUDispatcher
import odd_specs
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.explore.visited_sets import warm_up_visited_set
from kraftcheck.checker.kernels import visited_compact
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class

def compiled():
    return {name: tuple(f.signatures) for name, f in vars(visited_compact).items() if isinstance(f, CPUDispatcher)}

cls = getattr(odd_specs, sys.argv[1], None) or spec_class(sys.argv[1])
model = Model(cls(cls.Params()))
options = Options(keep_going=True, compact=True)
warm_up_visited_set(options, model.layout.nwords)
before = compiled()
result = Engine(compile="now").explore(model, options)
print(before == compiled(), sum(1 for s in before.values() if s), model.layout.nwords, result.distinct_states)
"""


@pytest.mark.parametrize("name", ["die_hard", "TwoWordCounters"])
def test_the_warm_up_compiles_every_kernel_a_compact_run_calls(tmp_path, name):
    """An installation's first ``--compact`` run compiled the set's kernels in its first level,
    counted as exploring; the engine's warm-up (``visited_sets.warm_up_visited_set``) calls each of
    them first, so a run after it compiles none (a process of its own: numba's dispatchers keep
    what one process compiled or loaded; states of one word, whose halves are split bits, and of
    two)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", WARM_THEN_EXPLORE, name], capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    same, warmed, nwords, states = out.stdout.split()
    assert same == "True" and int(warmed) >= 5 and int(states) > 1, out.stdout
    assert int(nwords) == (1 if name == "die_hard" else 2)
