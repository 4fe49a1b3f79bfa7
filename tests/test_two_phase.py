"""The engine reproduces TLC's figures for Two-Phase Commit exactly (the rm=9 row is in bench/)."""

from __future__ import annotations

import pytest

from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import HOLDS, VIOLATED, Options
from kraftcheck.checker.model import Model
from kraftcheck.specs.two_phase import TwoPhase, TwoPhaseParams
from kraftcheck.specs.two_phase_eager_commit import TwoPhaseEagerCommit

TLC = {3: (288, 1146, 11), 5: (8832, 58146, 17), 7: (296448, 2744706, 23)}


@pytest.mark.parametrize("rm", sorted(TLC))
def test_engine_matches_tlc(rm):
    result = Engine().explore(Model(TwoPhase(TwoPhaseParams(rm))))
    assert result.status == HOLDS
    assert (result.distinct_states, result.states_generated, result.depth) == TLC[rm]
    assert result.initial_states == 1
    assert not result.never_fired()


@pytest.mark.parametrize("successors_per_chunk", [1, 97, 1 << 30], ids=["one-state-chunks", "small", "buffer-sized"])
def test_chunk_sizing_does_not_change_the_counts(monkeypatch, successors_per_chunk):
    """The engine sizes each chunk from the successors per state seen so far (about
    SUCCESSORS_PER_CHUNK successors, or DISTINCT_SUCCESSORS_PER_CHUNK, within the buffers); TLC's
    figures come out whatever the sizes."""
    from kraftcheck.checker.explore import engine
    monkeypatch.setattr(engine, "SUCCESSORS_PER_CHUNK", successors_per_chunk)
    monkeypatch.setattr(engine, "DISTINCT_SUCCESSORS_PER_CHUNK", successors_per_chunk)
    result = Engine().explore(Model(TwoPhase(TwoPhaseParams(5))))
    assert (result.distinct_states, result.states_generated, result.depth) == TLC[5]


def test_reference_matches_tlc_rm3():
    result = ReferenceExplorer().explore(Model(TwoPhase(TwoPhaseParams(3))))
    assert (result.distinct_states, result.states_generated, result.depth) == TLC[3]


def _action_names(model, violation):
    return [model.labels[s.label].name if s.label is not None else None for s in violation.steps]


@pytest.mark.parametrize("rm", [2, 3, 4])
def test_eager_commit_shortest_counterexample_agrees_with_reference(rm):
    model = Model(TwoPhaseEagerCommit(TwoPhaseParams(rm)))
    engine = Engine().explore(model)
    reference = ReferenceExplorer().explore(model)
    assert engine.status == reference.status == VIOLATED
    (ev,), (rv,) = engine.violations, reference.violations
    assert ev.check == rv.check == "tc_consistent"
    assert ev.depth == rv.depth == 6
    assert ev.steps[-1].state == rv.steps[-1].state  # same BFS order, so the same first violation
    assert _action_names(model, ev) == [None, "RMPrepare", "TMRcvPrepared", "TMCommit", "RMChooseToAbort",
                                        "RMRcvCommitMsg"]


def test_eager_commit_trace_is_a_real_behaviour():
    model = Model(TwoPhaseEagerCommit(TwoPhaseParams(3)))
    (v,) = Engine().explore(model).violations
    assert v.steps[0].state in model.initial
    for before, after in zip(v.steps, v.steps[1:]):
        assert model.step(before.state, after.label) == after.state
    assert model.violated_invariants(v.steps[-1].state) == ["tc_consistent"]
    assert all(model.violated_invariants(s.state) == [] for s in v.steps[:-1])


def test_two_phase_with_one_rm_is_tiny_and_complete():
    result = Engine().explore(Model(TwoPhase(TwoPhaseParams(1))), Options())
    reference = ReferenceExplorer().explore(Model(TwoPhase(TwoPhaseParams(1))))
    assert (result.distinct_states, result.states_generated, result.depth) == \
        (reference.distinct_states, reference.states_generated, reference.depth)
