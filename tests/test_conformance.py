"""Every explorer agrees with the reference explorer on every registered spec at small parameters.

This is the suite a new backend must pass: identical counts, depth, verdicts, coverage and
counterexample lengths, with and without --continue.
"""

from __future__ import annotations

import pytest
from counterexample_support import assert_counterexample_replays

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class, spec_names

# beside the registered specs: state and action constraints and deadlocks, in every form TLC gives
# them (tests/constraint_specs.py; a module on the tests' path, which the Spark fixture ships)
CONSTRAINT_SPECS = ["constraint_specs:Counters", "constraint_specs:Rising", "constraint_specs:RisingFromTwo"]
# and two symmetry sets, acceptors and values (tests/symmetry_specs.py, shipped likewise)
SYMMETRY_SPECS = ["symmetry_specs:Voting"]
TEST_SPECS = CONSTRAINT_SPECS + SYMMETRY_SPECS
CASES = [(name, example) for name in spec_names() + TEST_SPECS for example in spec_class(name).examples]
SYMMETRIC_CASES = [(name, example) for name in spec_names() + TEST_SPECS
                   for example in spec_class(name).symmetric_examples]


def test_every_spec_declares_conformance_examples():
    assert [name for name in spec_names() if not spec_class(name).examples] == []


def _model(name, example):
    cls = spec_class(name)
    return Model(cls(cls.Params(**example)))


_reference_cache: dict = {}


def _reference(name, example, keep_going):
    key = (name, tuple(sorted(example.items())), keep_going)
    if key not in _reference_cache:
        _reference_cache[key] = ReferenceExplorer().explore(_model(name, example), Options(keep_going=keep_going))
    return _reference_cache[key]


@pytest.mark.parametrize("name,example", CASES, ids=[f"{n}-{e}" for n, e in CASES])
def test_complete_exploration_agrees_and_replays(explorer, name, example):
    """A complete run (``--continue``) counts exactly what the reference explorer counts and
    reports the reference's violations (one a check), and each counterexample replays step by step
    on the model; ``test_some_examples_violate`` makes sure there are some to replay. One
    exploration serves both: the second was the same run again (on Spark, a job per level)."""
    model = _model(name, example)
    expected = _reference(name, example, keep_going=True)
    got = explorer.explore(model, Options(keep_going=True))
    assert got.agreed() == expected.agreed()
    for v in got.violations:
        assert_counterexample_replays(model, v)


# The cases with a violation (test_some_examples_violate keeps this list true). On the others a run
# that stops at its first violation never stops: every explorer (and Result.conclude) reads
# keep_going only once a violation is found, or to resume a run that found one, so it would be
# test_complete_exploration_agrees_and_replays's run again: 153 runs, a fifth of this module's
# time on a fresh clone (Spark's first-violation runs alone about 60 s), that learnt nothing more.
VIOLATING_CASES = [(name, example) for name, example in CASES if f"{name}-{example}" in {
    "two_phase_eager_commit-{'rm': 2}", "two_phase_eager_commit-{'rm': 3}", "die_hard-{}",
    "die_hard-{'small': 4, 'big': 9}",
    "kafka-{'brokers': 2, 'min_isr': 1, 'replay_known_changes': True, 'lossy_shutdowns': 0, 'fences': 0, "
    "'min_isr_changes': 0}",
    "kafka-{'brokers': 2, 'min_isr': 1, 'controller_failovers': 1, 'lossy_shutdowns': 0, 'fences': 0, "
    "'min_isr_changes': 0}",
    "kafka-{'brokers': 2, 'min_isr': 1, 'new_leader_publish_window': True, 'lossy_shutdowns': 0, 'isr_shrinks': 0}",
    "constraint_specs:Counters-{}", "constraint_specs:Counters-{'limit': 3, 'cap': 3}",
    "constraint_specs:Counters-{'n': 3, 'limit': 1, 'cap': 1}", "constraint_specs:Counters-{'blocked': True}",
    "constraint_specs:Rising-{'forbidden': 2}", "constraint_specs:Rising-{'forbidden': 3}",
    "constraint_specs:RisingFromTwo-{'forbidden': 4}", "symmetry_specs:Voting-{'revote': True}"}]


@pytest.mark.parametrize("name,example", VIOLATING_CASES, ids=[f"{n}-{e}" for n, e in VIOLATING_CASES])
def test_first_violation_agrees_with_reference(explorer, name, example):
    """A run that stops at its first violation counts exactly what the reference explorer counts:
    everything up to the violating state, whatever the chunk size or tier."""
    expected = _reference(name, example, keep_going=False)
    got = explorer.explore(_model(name, example), Options())
    assert got.agreed() == expected.agreed()


def test_some_examples_violate():
    """Without violating examples ``test_complete_exploration_agrees_and_replays`` would replay
    nothing and ``test_first_violation_agrees_with_reference`` would stop nowhere: every spec that
    has a check an example violates must keep such an example, there must be several, and
    VIOLATING_CASES names each."""
    violating = [(name, example) for name, example in CASES if _reference(name, example, keep_going=True).violations]
    assert violating == VIOLATING_CASES, "VIOLATING_CASES must list exactly the cases with a violation"
    assert len(violating) >= 3, violating
    assert {name for name, _ in violating} >= {"two_phase_eager_commit", "die_hard"}, violating


def test_the_constraint_examples_cover_every_case():
    """The constraint examples exercise what they claim (tests/constraint_specs.py): a deadlock; an
    invariant violated only outside the state constraint, and on an initial state outside it; an
    action constraint that changes the counts; a state whose only successors lie outside, which
    is no deadlock."""
    def run(example, **kw):
        return _reference("constraint_specs:Counters", {**example, **kw}, keep_going=True)

    assert [(v.check, v.kind) for v in run({}).violations] == [("deadlock", "deadlock")]
    outside = run({"limit": 3, "cap": 3})
    assert [v.check for v in outside.violations] == ["sum_at_most_cap"]
    assert all(sum(s.state[:2]) <= 3 for v in outside.violations for s in v.steps[:-1])  # the counters
    assert sum(outside.violations[0].steps[-1].state[:2]) == 4  # found on a state the search leaves out
    initial = run({"n": 3, "limit": 1, "cap": 1})
    assert initial.initial_states == 8 and initial.violations[0].depth == 1
    assert run({"blocked": True}).states_generated != run({}).states_generated
    no_deadlock = run({"n": 3, "top": 1, "limit": 2, "blocked": True})
    assert no_deadlock.status == "holds" and no_deadlock.model.check_deadlock


@pytest.mark.parametrize("name,example", SYMMETRIC_CASES, ids=[f"{n}-{e}" for n, e in SYMMETRIC_CASES])
def test_symmetric_exploration_agrees_with_reference(explorer, name, example):
    """Under --symmetry every explorer keeps one state per orbit and counts exactly what the
    reference explorer counts with its own canonicalisation (Spark refuses the option)."""
    options = Options(keep_going=True, symmetry=True)
    if explorer.name == "spark":
        with pytest.raises(UsageError, match="--symmetry"):
            explorer.explore(_model(name, example), options)
        return
    key = (name, tuple(sorted(example.items())), "symmetry")
    if key not in _reference_cache:
        # the counts to agree with: deciding the declaration, an expansion per permutation of each
        # state (twice the time over these cases), is left to the reference explorer's own case
        _reference_cache[key] = ReferenceExplorer(decide_symmetry=False).explore(_model(name, example), options)
    assert explorer.explore(_model(name, example), options).agreed() == _reference_cache[key].agreed()


# The compiled kernels compile in every check of a spec and evaluate the selected ones (a mask at
# run time), so that runs checking different selections share them: a selection must count and
# report exactly what the reference explorer does with the same selection.
# kafka-3.5 bumps no epoch on a shrink: the transition property is violated (142 states); without
# the broker-epoch check two invariants are (986 states)
KAFKA_35 = {"brokers": 2, "min_isr": 2, "protocol": "kafka-3.5", "fences": 0, "isr_shrinks": 1, "min_isr_changes": 0,
            "lossy_shutdowns": 0}
KAFKA_NO_EPOCH_CHECK = {"brokers": 2, "min_isr": 2, "no_broker_epoch_check": True, "fences": 0, "isr_shrinks": 0,
                        "min_isr_changes": 0, "lossy_shutdowns": 1}
SELECTIONS = [
    ("kafka", KAFKA_35, ["acked_writes_survive", "hwm_advances_only_with_min_isr"]),
    ("kafka", KAFKA_35, ["acked_writes_survive"]),
    ("kafka", KAFKA_NO_EPOCH_CHECK, ["isr_members_hold_committed_log"]),
    ("kafka", KAFKA_NO_EPOCH_CHECK, ["committed_logs_match", "isr_members_hold_committed_log",
                                     "isr_members_have_current_broker_epoch", "hwm_advances_only_with_min_isr"]),
]


@pytest.mark.parametrize("name,example,check", SELECTIONS, ids=[f"{n}-{'+'.join(c)}" for n, _, c in SELECTIONS])
def test_a_selection_of_checks_agrees_with_reference(name, example, check):
    from kraftcheck.checker.explore.engine import Engine
    cls = spec_class(name)

    def model():
        return Model(cls(cls.Params(**example)), check=check)

    expected = ReferenceExplorer().explore(model(), Options(keep_going=True))
    got = Engine(compile="now").explore(model(), Options(keep_going=True))
    assert got.agreed() == expected.agreed()


def test_the_selections_violate_what_they_should():
    """The selections above exercise the mask: a selected property and a later invariant alone."""
    def violated(example, check):
        cls = spec_class("kafka")
        result = ReferenceExplorer().explore(Model(cls(cls.Params(**example)), check=check), Options(keep_going=True))
        return sorted(v.check for v in result.violations)

    assert violated(KAFKA_35, SELECTIONS[0][2]) == ["hwm_advances_only_with_min_isr"]
    assert violated(KAFKA_NO_EPOCH_CHECK, SELECTIONS[2][2]) == ["isr_members_hold_committed_log"]


class _Levels(RunObserver):
    """Notes each finished level and, at the end, the level starts and the length of each path."""

    def __init__(self):
        self.events = []

    def level_finished(self, depth, distinct, generated):
        self.events.append((depth, distinct, generated))

    def run_finished(self, result, run):
        self.events.append((run.level_starts, [len(run.trace(i)) for i in range(result.distinct_states)]))


@pytest.mark.parametrize("explore", ["engine", "engine-interpreted", "reference"])
def test_an_observer_is_told_the_levels_and_paths_the_reference_finds(explore):
    """Every explorer that takes an observer tells it each finished level (depth, states so far,
    states generated) and, at the end, where each level starts and a path to every state: the
    reference explorer's, level by level."""
    from kraftcheck.checker.explore.engine import Engine
    explorers = {"engine": Engine, "engine-interpreted": lambda: Engine(compile="never"),
                 "reference": ReferenceExplorer}
    seen, expected = _Levels(), _Levels()
    explorers[explore]().explore(_model("two_phase", {"rm": 3}), Options(keep_going=True), observer=seen)
    ReferenceExplorer().explore(_model("two_phase", {"rm": 3}), Options(keep_going=True), observer=expected)
    assert seen.events == expected.events and len(seen.events) == 12  # 11 levels, then the end
