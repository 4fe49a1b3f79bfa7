"""Limits and interruption: hitting one is never reported as success."""

from __future__ import annotations

import pytest

from kraftcheck.checker.explore.result import HOLDS, INCOMPLETE, Options
from kraftcheck.checker.model import Model
from kraftcheck.specs.two_phase import TwoPhase, TwoPhaseParams


def _model(rm=4):
    return Model(TwoPhase(TwoPhaseParams(rm)))


def test_max_states_is_incomplete(explorer):
    result = explorer.explore(_model(), Options(max_states=100))
    assert result.status == INCOMPLETE
    assert "--max-states 100" in result.incomplete_reason
    assert 100 < result.distinct_states < 2000


def test_max_states_above_the_state_count_completes(explorer):
    result = explorer.explore(_model(3), Options(max_states=288))
    assert result.status == HOLDS and result.distinct_states == 288


def test_max_depth_is_incomplete(explorer):
    result = explorer.explore(_model(3), Options(max_depth=4))
    assert result.status == INCOMPLETE
    assert result.depth == 4
    assert "--max-depth 4" in result.incomplete_reason


def test_max_depth_at_the_full_depth_is_still_incomplete(explorer):
    # the 11th level is never expanded, so nothing proves it has no new successors
    result = explorer.explore(_model(3), Options(max_depth=11))
    assert result.status == INCOMPLETE and result.depth == 11


def test_max_depth_beyond_the_full_depth_completes(explorer):
    result = explorer.explore(_model(3), Options(max_depth=12))
    assert result.status == HOLDS and result.depth == 11 and result.distinct_states == 288


def test_time_limit_is_incomplete(explorer):
    result = explorer.explore(_model(5), Options(time_limit=1e-9))
    assert result.status == INCOMPLETE
    assert "--time-limit" in result.incomplete_reason


def test_memory_limit_is_incomplete(explorer):
    # any running interpreter uses more than one byte: the run stops at its first check
    result = explorer.explore(_model(5), Options(max_memory=1))
    assert result.status == INCOMPLETE
    assert "--max-memory" in result.incomplete_reason
    assert result.distinct_states < 8832


def test_memory_limit_above_use_completes(explorer):
    result = explorer.explore(_model(3), Options(max_memory=2**50))
    assert result.status == HOLDS and result.distinct_states == 288


def test_interrupt_keeps_statistics(explorer):
    calls = []

    def interrupt(progress):
        if progress.compiling is not None and progress.distinct == 0:
            return  # compiling the kernels first (a cold cache): not yet exploring
        calls.append(progress)
        if len(calls) == 2:
            raise KeyboardInterrupt

    result = explorer.explore(_model(4), Options(), interrupt)
    assert result.interrupted and result.status == INCOMPLETE
    assert result.distinct_states >= calls[-1].distinct > 0


def test_the_engine_stops_before_it_numbers_a_parent_past_32_bits(monkeypatch):
    """Parent links are uint32: a run whose states would outgrow them stops, incomplete, with
    the reason, instead of writing wrapped parent indices (the limit lowered to see it)."""
    from kraftcheck.checker.explore import engine
    monkeypatch.setattr(engine, "MAX_NUMBERED_STATES", 500)
    result = engine.Engine(chunk_candidates=64).explore(_model(), Options(keep_going=True))
    assert result.status == INCOMPLETE
    assert "32 bits" in result.incomplete_reason
    assert 500 < result.distinct_states < 1568


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the swallowed one
def test_a_stop_request_swallowed_by_a_finalizer_still_stops_the_run(explorer):
    """A Ctrl-C whose KeyboardInterrupt is raised inside a finalizer is printed and swallowed by
    Python (numba's compiler frees LLVM objects in ``__del__``, so this happened to real runs,
    which then went on to their end); the stop request the handler also leaves stops the
    explorer at its next chunk or level, reported as interrupted."""
    import signal
    from kraftcheck.checker import stop

    class Finalizer:
        def __del__(self):
            stop._on_signal(signal.SIGINT, None)

    calls = []

    def progress(p):
        if not calls:
            Finalizer()  # collected at once: its KeyboardInterrupt is "ignored"
        calls.append(p)

    try:
        result = explorer.explore(_model(5), Options(), progress)
    finally:
        requested = stop.stop_requested()
        stop.stop_honoured()
    assert calls and result.interrupted and result.status == INCOMPLETE
    assert result.distinct_states < 8832
    assert not requested  # the explorer cleared the request it honoured
