"""Simulation (``kraftcheck check --simulate``): its kernels against their readable references,
reproducibility by seed, soundness and reach against the exhaustive search, and the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from dataclasses import dataclass

import numpy as np
import pytest
from counterexample_support import assert_counterexample_replays
from hypothesis import given, settings
from numba import njit
from hypothesis import strategies as st
from simulation_reference import behaviour_starts as behaviour_starts_reference
from simulation_reference import choose_successors as choose_successors_reference
from simulation_reference import take_steps as take_steps_reference
from test_conformance import CASES, _model, _reference

from kraftcheck import Action, ActionConstraint, Constraint, Int, Spec, param
from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.explore import simulate as simulate_module
from kraftcheck.checker.explore.simulate import SimulationOptions, simulate, without_cycles
from kraftcheck.checker.model import Model
from kraftcheck.checker.kernels.simulation import behaviour_starts, choose_successors, take_steps


@settings(max_examples=200, deadline=None)
@given(data=st.data(), nwalkers=st.integers(1, 5), stride=st.integers(1, 6), nwords=st.integers(1, 2),
       nactions=st.integers(1, 3), with_props=st.booleans(), seed=st.integers(0, 2**63 - 1), by_action=st.booleans())
def test_choose_successors_matches_its_reference(data, nwalkers, stride, nwords, nactions, with_props, seed,
                                                 by_action):
    rows = nwalkers * stride
    labels = np.array(data.draw(st.lists(st.sampled_from([NO_LABEL] + list(range(stride))), min_size=rows,
                                         max_size=rows)), np.uint16)
    # few distinct words, so that self-loops are common
    words = np.array(data.draw(st.lists(st.lists(st.integers(0, 2), min_size=nwords, max_size=nwords),
                                        min_size=rows, max_size=rows)), np.uint64)
    sources = np.array(data.draw(st.lists(st.lists(st.integers(0, 2), min_size=nwords, max_size=nwords),
                                          min_size=nwalkers, max_size=nwalkers)), np.uint64)
    props = np.array(data.draw(st.lists(st.integers(0, 3), min_size=rows, max_size=rows)) if with_props else [0],
                     np.uint64)
    blocked = data.draw(st.integers(0, 3))
    label_action = np.array(data.draw(st.lists(st.integers(0, nactions - 1), min_size=stride, max_size=stride)),
                            np.int64)
    action_on = np.array(data.draw(st.lists(st.lists(st.integers(0, 1), min_size=nactions, max_size=nactions),
                                            min_size=nwalkers, max_size=nwalkers)), np.uint8)
    behaviours = np.array(data.draw(st.lists(st.integers(0, 10**9), min_size=nwalkers, max_size=nwalkers)), np.int64)
    steps = np.array(data.draw(st.lists(st.integers(0, 100), min_size=nwalkers, max_size=nwalkers)), np.int64)
    chosen, moved = np.zeros(nwalkers, np.int64), np.zeros(nwalkers, np.uint8)
    choose_successors(labels, words, sources, props, np.uint64(blocked), label_action, action_on, stride, 0,
                      nwalkers, NO_LABEL, np.uint64(seed), behaviours, steps, by_action, chosen, moved)
    # the walkers split in two calls (as the threads take them) choose the same
    split_at = data.draw(st.integers(0, nwalkers))
    halves = np.full(nwalkers, -2, np.int64), np.full(nwalkers, 7, np.uint8)
    for first, end in ((0, split_at), (split_at, nwalkers)):
        choose_successors(labels, words, sources, props, np.uint64(blocked), label_action, action_on, stride, first,
                          end, NO_LABEL, np.uint64(seed), behaviours, steps, by_action, *halves)
    assert (halves[0].tolist(), halves[1].tolist()) == (chosen.tolist(), moved.tolist())
    assert (chosen.tolist(), moved.tolist()) == choose_successors_reference(
        labels, words, sources, props, blocked, label_action, action_on.tolist(), stride, nwalkers, NO_LABEL, seed,
        behaviours, steps, by_action)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), n=st.integers(1, 6), stride=st.integers(1, 4), nwords=st.integers(1, 2),
       depth=st.integers(2, 5), nactions=st.integers(1, 3))
def test_take_steps_matches_its_reference(data, n, stride, nwords, depth, nactions):
    nrows = n * stride
    words = np.array(data.draw(st.lists(st.lists(st.integers(0, 9), min_size=nwords, max_size=nwords),
                                        min_size=nrows, max_size=nrows)), np.uint64)
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, nrows - 1), max_size=nrows))), np.int64)
    masks = np.array(data.draw(st.lists(st.integers(0, 3), min_size=rows.size, max_size=rows.size)), np.uint64)
    chosen = np.array([data.draw(st.sampled_from([-1] + rows.tolist())) for _ in range(n)], np.int64)
    moved = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), np.uint8)
    behaviours = np.array(data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)), np.int64)
    stop_at = data.draw(st.integers(-1, 9))
    steps = np.array(data.draw(st.lists(st.integers(0, depth - 2), min_size=n, max_size=n)), np.int64)
    label_action = np.array(data.draw(st.lists(st.integers(0, nactions - 1), min_size=stride, max_size=stride)),
                            np.int64)
    path_labels = np.full((n, depth), -1, np.int64)
    paths = np.zeros((n, depth, nwords), np.uint64)
    cur = np.zeros((n, nwords), np.uint64)
    taken = np.zeros(nactions, np.int64)
    constraint_bits = data.draw(st.integers(0, 3))
    want = take_steps_reference(n, chosen, moved, behaviours, stop_at, words, rows, masks, constraint_bits, stride,
                                label_action.tolist(), depth, steps, path_labels, paths, cur, taken)
    why = np.full(n, -1, np.int8)
    take_steps(n, chosen, moved, behaviours, stop_at, words, rows, rows.size, masks if masks.size else
               np.zeros(1, np.uint64), np.uint64(constraint_bits), stride, label_action, depth, steps, path_labels,
               paths, cur, taken, why)
    assert (why.tolist(), steps.tolist(), path_labels.tolist(), paths.tolist(), cur.tolist(), taken.tolist()) == want


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**63 - 1), behaviours=st.lists(st.integers(0, 10**12), min_size=1, max_size=8),
       ninitial=st.integers(1, 9), nactions=st.integers(1, 5), swarm=st.booleans())
def test_behaviour_starts_matches_its_reference(seed, behaviours, ninitial, nactions, swarm):
    ids = np.array(behaviours, np.int64)
    initial, on = np.zeros(len(ids), np.int64), np.zeros((len(ids), nactions), np.uint8)
    behaviour_starts(np.uint64(seed), ids, ninitial, swarm, on, initial)
    assert list(zip(initial.tolist(), on.tolist())) == behaviour_starts_reference(seed, behaviours, ninitial, swarm,
                                                                                 nactions)


def test_loops_are_cut_out_of_a_path():
    s = [np.array([x], np.uint64) for x in (0, 1, 2, 1, 3, 0, 4)]
    states, labels = without_cycles(s, [10, 11, 12, 13, 14, 15])
    assert [int(x[0]) for x in states] == [0, 4] and labels == [15]
    states, labels = without_cycles(s[:5], [10, 11, 12, 13])
    assert [int(x[0]) for x in states] == [0, 1, 3] and labels == [10, 13]


# -- against the exhaustive search, on every conformance example
BEHAVIOURS = 1500  # per strategy, uniform and by-action


def _figures(result):
    """What a seed determines: the figures but the times, and the violations step by step."""
    figures = {k: v for k, v in result.simulation.items() if k != "found_after_s"}
    return figures, [(v.check, v.kind, [(s.label, s.state) for s in v.steps]) for v in result.violations]


@pytest.mark.parametrize("name,example", CASES, ids=[f"{n}-{e}" for n, e in CASES])
def test_simulation_finds_what_the_exhaustive_search_finds(name, example):
    """Every violation a simulation reports is a behaviour of the model that ends in it (replayed
    step by step), of a check the exhaustive search finds violated, no shorter than the shortest
    counterexample; and on these small models, every check the exhaustive search finds violated
    is found within BEHAVIOURS behaviours; under the uniform strategy and under by-action."""
    model = _model(name, example)
    expected = {v.check: v.depth for v in _reference(name, example, keep_going=True).violations}
    for strategy in ("uniform", "by-action"):
        got = simulate(model, SimulationOptions(seed=11, max_behaviours=BEHAVIOURS, keep_going=True,
                                                strategy=strategy))
        assert got.status == ("violated" if expected else "incomplete") and not got.exhaustive
        assert sorted(v.check for v in got.violations) == sorted(expected), strategy
        for v in got.violations:
            assert_counterexample_replays(model, v)
            assert v.depth >= expected[v.check]
        assert got.simulation["behaviours"] == BEHAVIOURS and got.simulation["strategy"] == strategy
        assert got.simulation["states"] >= BEHAVIOURS and got.states_generated >= got.simulation["states"]


@pytest.mark.parametrize("strategy", ["uniform", "by-action"])
def test_the_same_seed_gives_the_same_behaviours_whatever_the_threads_batch_and_tier(monkeypatch, strategy):
    """A behaviour depends only on the seed and its number: one thread or two, batches of 16 or
    the default, interpreted or compiled, the figures (lengths, ends, actions taken) and the
    violations (every step) are identical; another seed gives other behaviours."""
    model = _model("two_phase_eager_commit", {"rm": 3})
    options = SimulationOptions(seed=5, max_behaviours=120, keep_going=True, strategy=strategy)
    runs = []
    for threads, batch, tier in ((2, None, "now"), (1, 16, "now"), (2, 16, "never")):
        monkeypatch.setenv("KRAFTCHECK_THREADS", str(threads))
        monkeypatch.setattr(simulate_module, "BATCH", batch or simulate_module.BATCH)
        runs.append(_figures(simulate(model, options, compile=tier)))
    assert runs[0][1] and runs[0] == runs[1] == runs[2]
    other = _figures(simulate(model, SimulationOptions(seed=6, max_behaviours=120, keep_going=True,
                                                       strategy=strategy)))
    assert other[0]["actions_taken"] != runs[0][0]["actions_taken"]


def test_the_first_violation_does_not_depend_on_the_batch(monkeypatch):
    """Without --continue the violation reported is that of the lowest-numbered violating
    behaviour, whatever the batch the behaviours ran in."""
    model = _model("kafka", {})  # the default model: F1 within a few behaviours
    found = []
    for batch in (1024, 7, 64):
        monkeypatch.setattr(simulate_module, "BATCH", batch)
        result = simulate(model, SimulationOptions(seed=3, max_behaviours=20_000))
        assert result.status == "violated"
        found.append(_figures(result)[1])
    assert found[0] == found[1] == found[2]


def test_the_default_depth_is_twice_the_levels_of_a_model_the_probe_exhausts():
    model = _model("two_phase", {"rm": 2})
    levels = _reference("two_phase", {"rm": 2}, keep_going=True).depth
    result = simulate(model, SimulationOptions(seed=1, max_behaviours=10))
    assert result.simulation["depth"] == max(10, 2 * levels)
    assert f"{levels} levels of the whole state space" in result.simulation["depth_source"]


@njit(cache=True)
def _chain_step(s, t):
    if s.x >= 8:
        return False
    t.x = s.x + 1
    return True


@njit(cache=True)
def _not_one_to_two(s, t):
    return not (s.x == 1 and t.x == 2)


@njit(cache=True)
def _neither_two_nor_five(s):
    return s.x != 2 and s.x != 5


@dataclass(frozen=True)
class _ChainParams:
    blocked: bool = param(True, "the action constraint: no step from 1 to 2 (else the state constraint: x is "
                                "neither 2 nor 5, and x = 5 an initial state too)")


class _Chain(Spec):
    """x counts 0 to 8, the step from 1 to 2 refused by an action constraint: the search keeps x = 0
    and 1, two levels; as it does under the state constraint that leaves out 2 and 5 with initial
    states 0 and 5 (5 is not kept, so neither are 6, 7 and 8)."""

    name = "probe_chain"
    Params = _ChainParams
    check_deadlock = False

    def fields(self):
        return [Int("x", 8)]

    def initial_states(self):
        for x in ((0,) if self.params.blocked else (0, 5)):
            yield {"x": x}

    def actions(self):
        return [Action("Step", _chain_step)]

    def constraints(self):
        return [] if self.params.blocked else [Constraint("neither_two_nor_five", _neither_two_nor_five)]

    def action_constraints(self):
        return [ActionConstraint("not_one_to_two", _not_one_to_two)] if self.params.blocked else []


@pytest.mark.parametrize("blocked", [True, False], ids=["action constraint", "initial states outside"])
def test_the_probe_counts_the_levels_of_the_constrained_state_space(blocked):
    """The default depth's probe expanded steps outside the action constraints and initial states
    outside the state constraints, which the search never expands: 'the 9 levels' (and 4) 'of the
    whole state space' of a model whose search has 2."""
    from kraftcheck.checker.explore.interpreted import InterpretedKernels
    from kraftcheck.checker.explore.reference import ReferenceExplorer
    from kraftcheck.checker.explore.result import Options
    from kraftcheck.checker.explore.simulate import estimate_depth

    model = Model(_Chain(_Chain.Params(blocked=blocked)))
    assert ReferenceExplorer().explore(model, Options(keep_going=True)).depth == 2
    _, source = estimate_depth(model, InterpretedKernels(model))
    assert source == "2 x the 2 levels of the whole state space"


@pytest.mark.parametrize("depth", [1, 2])
def test_behaviours_are_as_long_as_depth_allows_even_one_state(depth):
    """--depth 1: each behaviour is its initial state, no step taken (it indexed past its path)."""
    model = _model("two_phase", {"rm": 2})
    sim = simulate(model, SimulationOptions(seed=3, depth=depth, max_behaviours=40, keep_going=True)).simulation
    assert sim["behaviours"] == 40 and sim["ends"]["depth"] == 40
    assert sim["behaviour_length"] == {"min": depth, "mean": float(depth), "max": depth}
    assert sim["states"] == 40 * depth and sum(sim["actions_taken"].values()) == 40 * (depth - 1)


def test_swarm_behaviours_take_fewer_kinds_of_action():
    model = _model("two_phase", {"rm": 3})
    uniform = simulate(model, SimulationOptions(seed=2, max_behaviours=500, keep_going=True, strategy="uniform"))
    swarm = simulate(model, SimulationOptions(seed=2, max_behaviours=500, keep_going=True, strategy="swarm"))
    assert swarm.simulation["swarm"] and swarm.simulation["strategy"] == "swarm"
    assert swarm.simulation["actions_taken"] != uniform.simulation["actions_taken"]
    # a behaviour whose actions cannot go on ends with "no successor" (only under swarm, in this model)
    assert swarm.simulation["ends"]["no successor"] > 0 == uniform.simulation["ends"]["no successor"]


def test_by_action_takes_an_action_with_few_instances_more_often():
    """two_phase at rm=3 has one TMCommit and one TMAbort against three instances of each RM
    action: by-action, which picks the action first, takes the TM's decisions more often than
    uniform, which picks among instances."""
    model = _model("two_phase", {"rm": 3})
    taken = {}
    for strategy in ("uniform", "by-action"):
        sim = simulate(model, SimulationOptions(seed=2, max_behaviours=300, keep_going=True,
                                                strategy=strategy)).simulation
        assert sim["strategy"] == strategy and not sim["swarm"]
        taken[strategy] = (sim["actions_taken"]["TMAbort"] + sim["actions_taken"]["TMCommit"]) / sim["states"]
    assert taken["by-action"] > taken["uniform"]


@pytest.mark.parametrize("seed", [1, 2])
def test_by_action_opens_a_lock_that_uniform_does_not(seed):
    """tests/simulation_deep_bug.py: 8 turns in a row open the lock, any of 12 scrambles starts
    again. Uniform turns once in 13 steps and does not open it in 200 behaviours; by-action
    turns every other step and opens it within a few dozen (the seed fixes which)."""
    from simulation_deep_bug import Lock
    model = Model(Lock(Lock.Params()))
    uniform = simulate(model, SimulationOptions(seed=seed, max_behaviours=200, strategy="uniform"), compile="never")
    assert uniform.status == "incomplete" and uniform.simulation["behaviours"] == 200
    by_action = simulate(model, SimulationOptions(seed=seed, max_behaviours=200, strategy="by-action"),
                         compile="never")
    assert by_action.status == "violated" and by_action.simulation["found_in_behaviour"]["lock_stays_shut"] < 50
    assert [v.check for v in by_action.violations] == ["lock_stays_shut"]
    assert len(by_action.violations[0].steps) >= 9  # the initial state and 8 turns at least


def test_an_interrupted_simulation_says_so_in_its_reason(monkeypatch):
    """Ctrl-C or SIGTERM stops a simulation as it stops an exhaustive run: its reason (the JSON
    report's incomplete_reason) is 'interrupted', as every explorer's, not the one of a
    simulation that ran to its end, which a program reading the report would take it for."""
    calls = []

    def stop_at_the_third_step():
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(simulate_module, "raise_if_stop_requested", stop_at_the_third_step)
    result = simulate(_model("two_phase", {"rm": 3}), SimulationOptions(seed=1, keep_going=True,
                                                                        max_behaviours=100_000))
    assert result.interrupted and (result.status, result.incomplete_reason) == ("incomplete", "interrupted")

@pytest.mark.parametrize("extra, says", [
    ([], "interrupted; the statistics above cover what was simulated so far"),
    (["-q", "--json", "r.json"], "interrupted; the JSON report's statistics cover what was simulated so far"),
    (["-q"], "interrupted (--quiet: no statistics shown; --json FILE keeps them)")])
def test_an_interrupted_command_says_where_its_statistics_are(monkeypatch, tmp_path, extra, says):
    """Under --quiet no summary is printed: the interrupt's last line pointed at "the statistics
    above" all the same."""
    from click.testing import CliRunner

    from kraftcheck.cli.main import cli

    calls = []

    def stop_at_the_third_step():
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(simulate_module, "raise_if_stop_requested", stop_at_the_third_step)
    monkeypatch.chdir(tmp_path)
    run = CliRunner().invoke(cli, ["check", "--spec", "two_phase", "--param", "rm=3", "--simulate", "--continue",
                                   "--seed", "1", "--no-color", *extra], catch_exceptions=False)
    assert run.exit_code == 130
    assert says in " ".join(run.stderr.split())
    assert ("behaviours" in run.stdout) == ("-q" not in extra)


# -- the command
def _kraftcheck(*args, cwd):
    env = {**os.environ, "COLUMNS": "200"}  # the summary's lines unwrapped
    return subprocess.run([sys.executable, "-m", "kraftcheck", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env)


def test_simulate_command_reports_a_violation_that_replays(tmp_path):
    run = _kraftcheck("check", "--spec", "two_phase_eager_commit", "--param", "rm=3", "--simulate", "--seed", "4",
                      "--strategy", "by-action", "--json", "report.json", "--no-color", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["result"] == "violated" and report["exhaustive"] is False
    assert report["simulation"]["seed"] == 4 and report["options"]["simulate"] is True
    assert report["simulation"]["strategy"] == report["options"]["strategy"] == "by-action"
    trace = report["violations"][0]["trace_file"]
    assert "counterexample (a random behaviour, loops cut out)" in run.stdout
    replay = _kraftcheck("trace", "replay", trace, cwd=tmp_path)
    assert replay.returncode == 0, replay.stdout + replay.stderr


def test_simulate_command_without_violation_exits_3(tmp_path):
    run = _kraftcheck("check", "--spec", "two_phase", "--param", "rm=2", "--simulate", "--max-behaviours", "200",
                      "--json", "-", "-q", cwd=tmp_path)
    assert run.returncode == 3, run.stderr
    report = json.loads(run.stdout)
    assert report["result"] == "incomplete" and report["simulation"]["behaviours"] == 200
    assert "not an exhaustive search" in report["incomplete_reason"]


@pytest.mark.parametrize("args,message", [
    (["--seed", "1"], "--seed is an option of --simulate"),
    (["--simulate", "--swarm", "--strategy", "by-action"], "--swarm is short for --strategy swarm"),
    (["--simulate", "--symmetry"], "--symmetry is an option of the exhaustive search"),
    (["--simulate", "--max-depth", "3"], "with --simulate use --depth"),
    (["--simulate", "--engine", "reference"], "--simulate runs on the compiled engine"),
    (["--simulate", "--liveness"], "need every state"),
])
def test_simulate_command_refuses_what_does_not_apply(tmp_path, args, message):
    run = _kraftcheck("check", "--spec", "two_phase", *args, cwd=tmp_path)
    assert run.returncode == 2 and message in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_simulate_from_python_writes_replayable_traces(tmp_path):
    import kraftcheck
    result = kraftcheck.simulate("two_phase_eager_commit", rm=2, seed=9, max_behaviours=500, trace_dir=tmp_path)
    assert result.status == "violated" and result.simulation["seed"] == 9
    for v in result.violations:
        report = kraftcheck.replay_trace(kraftcheck.load_trace(v.trace_file))
        assert report.ok, report


def test_a_simulation_counts_the_initial_states_as_the_exhaustive_runs_do():
    """Rising with ``repeated`` gives x = 0, 1, 0, 3, 1, 3: six initial states, as the exhaustive
    runs and TLC count them (tests/test_constraints.py); a simulation said three, the distinct ones."""
    from kraftcheck.specs import spec_class

    cls = spec_class("constraint_specs:Rising")
    result = simulate(Model(cls(cls.Params(repeated=True))), SimulationOptions(seed=1, max_behaviours=20))
    assert result.initial_states == 6
