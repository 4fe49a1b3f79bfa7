"""``--fingerprints``: TLC's fingerprint set and its two collision-probability estimates."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.reference import ReferenceExplorer, collision_probability
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.kernels.visited import EMPTY, MAX_FINGERPRINT, FingerprintSet
from kraftcheck.checker.model import Model
from kraftcheck.cli.main import cli
from kraftcheck.specs import spec_class


def _insert(fps: list[int]) -> tuple[FingerprintSet, np.ndarray]:
    s = FingerprintSet(shard_bits=2, initial_shard_cap=4)
    hashes = np.array(fps, np.uint64)
    words = np.zeros((len(fps), 3), np.uint64)  # ignored: only fingerprints are kept
    is_new = s.insert(words, hashes, np.arange(len(fps), dtype=np.int64))
    return s, is_new


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=0, max_size=300))
def test_the_fingerprint_set_keeps_each_fingerprint_once(fps):
    s, is_new = _insert(fps)
    capped = [min(f, int(MAX_FINGERPRINT)) for f in fps]
    first = {}
    for i, f in enumerate(capped):
        first.setdefault(f, i)
    assert [i for i in range(len(fps)) if is_new[i]] == sorted(first.values())
    assert len(s) == len(first)
    assert s.fingerprints().tolist() == sorted(first)
    # the estimates agree with the plain-Python ones
    generated = len(fps) + 7
    assert s.collision_probability(generated) == collision_probability(sorted(first), generated)


def test_the_empty_marker_is_never_stored():
    s, is_new = _insert([int(EMPTY), int(MAX_FINGERPRINT), 5])
    assert is_new.tolist() == [1, 0, 1]  # all ones and all-ones-but-one are one fingerprint
    assert s.fingerprints().tolist() == [5, int(MAX_FINGERPRINT)]


def test_bucketed_parts_with_unused_rows_between_them():
    """As the engine gives them: two parts in regions of their own, unused rows (all ones, and
    values never given) between and after; only the given rows' fingerprints are stored, all ones
    as all ones but the last bit."""
    s = FingerprintSet(shard_bits=2, initial_shard_cap=4)
    hashes = np.full(40, 123, np.uint64)  # the unused rows: a value no part gives
    hashes[:5] = [int(EMPTY), 7, 2**63, 7, 9]
    hashes[20:23] = [9, 11, int(MAX_FINGERPRINT)]
    order, offsets = [], np.zeros((2, 5), np.int64)
    for j, rows in enumerate((range(0, 5), range(20, 23))):
        offsets[j, 0] = len(order)
        for k in range(4):
            order += [r for r in rows if int(hashes[r]) >> 62 == k]
            offsets[j, k + 1] = len(order)
    is_new = np.zeros(40, np.uint8)
    s.insert_bucketed(np.zeros((40, 1), np.uint64), hashes, np.array(order, np.int64), offsets, is_new)
    assert s.fingerprints().tolist() == [7, 9, 11, 2**63, int(MAX_FINGERPRINT)]
    assert np.flatnonzero(is_new).tolist() == [0, 1, 2, 4, 21]


def test_estimates_by_hand():
    s, _ = _insert([10, 30, 1000, 1007])
    p = s.collision_probability(generated=14)
    assert p["optimistic"] == 4 * 10 / 2.0**64
    assert p["from_fingerprints"] == 1 / 7


def test_fingerprint_runs_match_exact_runs_and_the_reference():
    cls = spec_class("two_phase")
    exact = Engine().explore(Model(cls(cls.Params(rm=5))), Options(keep_going=True))
    fp = Engine().explore(Model(cls(cls.Params(rm=5))), Options(keep_going=True, fingerprints=True))
    ref = ReferenceExplorer().explore(Model(cls(cls.Params(rm=5))), Options(keep_going=True, fingerprints=True))
    for r in (fp, ref):
        assert (r.distinct_states, r.states_generated, r.depth) == \
            (exact.distinct_states, exact.states_generated, exact.depth)
    assert fp.collision_probability == ref.collision_probability
    assert 0 < fp.collision_probability["optimistic"] < 1e-9
    assert exact.collision_probability is None and not exact.fingerprints


@pytest.mark.parametrize("name,params", [("two_phase_eager_commit", {"rm": 3}), ("kafka", {})])
def test_estimates_of_a_run_stopped_in_a_level_count_only_what_it_counts(name, params):
    """Without --continue the run stops at its first violation, inside a chunk whose later new
    states already went into the fingerprint set; the estimates are over the states the run counts
    (the reference explorer's), as on Spark, not over everything the set holds (the default Kafka
    check: 490 fingerprints for 487 states)."""
    cls = spec_class(name)
    stopped = Engine().explore(Model(cls(cls.Params(**params))), Options(fingerprints=True))
    ref = ReferenceExplorer().explore(Model(cls(cls.Params(**params))), Options(fingerprints=True))
    assert stopped.status == ref.status == "violated"
    assert (stopped.distinct_states, stopped.states_generated) == (ref.distinct_states, ref.states_generated)
    assert stopped.collision_probability == ref.collision_probability


def test_a_run_stopped_at_its_first_initial_state_estimates_over_that_state_alone():
    """The four initial states are all inserted before the first is found to violate: the estimate
    from the fingerprints is over the one state counted (none: fewer than two), not a gap among
    four."""
    from constraint_specs import RisingEverywhere
    params = RisingEverywhere.Params(forbidden=0)
    stopped = Engine().explore(Model(RisingEverywhere(params)), Options(fingerprints=True))
    ref = ReferenceExplorer().explore(Model(RisingEverywhere(params)), Options(fingerprints=True))
    assert stopped.status == ref.status == "violated" and stopped.distinct_states == ref.distinct_states == 1
    assert stopped.collision_probability == ref.collision_probability == {"optimistic": 0.0, "from_fingerprints": 0.0}


def test_the_command_line_reports_the_estimates(tmp_path):
    result = CliRunner().invoke(cli, ["check", "--spec", "two_phase", "--param", "rm=4", "--fingerprints",
                                      "--json", str(tmp_path / "r.json"), "--no-color"], catch_exceptions=False)
    assert result.exit_code == 0
    text = " ".join(result.output.split())  # the terminal wraps at its width
    assert "hold over the complete state space (up to hash collisions)" in text
    assert "collision probability" in text and "from the fingerprints" in text
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["fingerprints"] is True and report["distinct_states"] == 1568
    assert set(report["collision_probability"]) == {"optimistic", "from_fingerprints"}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5000), max_size=400), min_size=2, max_size=8), st.sampled_from([0, 1 << 30]))
def test_fingerprints_stay_found_after_their_shard_grows(batches, fine_growth_from_bytes):
    """Batch after batch into tiny shards, so shards grow between batches (doubling, and by 1.2
    when the threshold is 0): a fingerprint inserted before a growth must still be found after it
    (a growth that re-slotted entries by another hash than insertion's stored some twice)."""
    s = FingerprintSet(shard_bits=2, initial_shard_cap=4, fine_growth_from_bytes=fine_growth_from_bytes)
    seen: set[int] = set()
    for batch in batches:
        hashes = np.array([f * 0x9E3779B97F4A7C15 % 2**64 for f in batch], np.uint64)
        is_new = s.insert(np.zeros((len(batch), 1), np.uint64), hashes, np.arange(len(batch), dtype=np.int64))
        expected = []
        for h in hashes.tolist():
            expected.append(h not in seen)
            seen.add(h)
        assert is_new.astype(bool).tolist() == expected
    assert len(s) == len(seen)
    assert s.fingerprints().tolist() == sorted(seen)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 2), min_size=0, max_size=200, unique=True))
def test_the_smallest_gap_is_that_of_the_whole_sorted_set(fps):
    s, _ = _insert(fps)
    ordered = sorted(fps)
    expected = min((b - a for a, b in zip(ordered, ordered[1:])), default=None)
    assert s.smallest_gap() == expected


def test_a_kafka_space_larger_than_the_first_tables_counts_exactly():
    """Millions of states through the fingerprint engine, across many shard growths:
    every count equals the exact engine's (no two of these states share a fingerprint). The exact
    engine's counts of this model are those this project's gate records for it (kraftcheck.toml,
    whose run test_ci.py checks against them): not explored a second time here."""
    from pathlib import Path

    from kraftcheck.ci.manifest import load
    cls = spec_class("kafka")
    params = cls.Params(min_isr_changes=0)
    (exact,) = [check.counts for check in load(Path(__file__).parents[1] / "kraftcheck.toml").checks
                if check.spec == "kafka" and not check.invariants and cls.Params(**check.params) == params]
    fp = Engine().explore(Model(cls(params)), Options(keep_going=True, fingerprints=True))
    assert exact["distinct"] > 1_000_000
    assert (fp.status, fp.distinct_states, fp.states_generated, fp.depth) == \
        ("holds", exact["distinct"], exact["generated"], exact["depth"])
