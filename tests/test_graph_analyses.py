"""Conformance of the compiled graph analyses (``checker.analyses``, over the graph the compiled
kernels record) with the readable networkx references (``graph_reference.py``): the same graph,
the same stuck states and sink components, the same liveness verdicts and counts, on Two-Phase
Commit, Die Hard, the mutual-exclusion textbook spec, the toy partition and a small Kafka model.
The textbook answer (Peterson starvation-free under weak fairness, test-and-set not, neither
without fairness) is checked on its own."""

from __future__ import annotations

import numpy as np
import pytest

from graph_reference import availability_reference, liveness_found, liveness_reference
from kraftcheck.checker.analyses.availability import analyse_availability
from kraftcheck.checker.analyses.liveness import check_liveness
from kraftcheck.checker.analyses.predicates import evaluate
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Liveness, Predicate
from kraftcheck.checker.analyses.state_graph import build_graph, model_kernels
from kraftcheck.specs import spec_class
from kraftcheck.traces.state_graph import explore_graph
from traces_support import ToyParams, ToyPartition


def _model(name, **params):
    cls = spec_class(name)
    return Model(cls(cls.Params(**params)))


def _small_kafka(**overrides):
    kw = dict(brokers=2, min_isr=1, fences=0, isr_shrinks=1, min_isr_changes=0, lossy_shutdowns=1)
    kw.update(overrides)
    return _model("kafka", **kw)


def _compiled(model):
    kernels = model_kernels(model)
    return build_graph(model, kernels), kernels


_GRAPHS: dict = {}


def _analysed(model):
    """The graph and kernels the analyses below run on, built once per spec and parameters (the
    availability and liveness cases share models): the compiled kernels', except for the Kafka
    models, whose graph the bytecode tier records (held to the Python tier row by row by
    test_bytecode; the compiled kernels record the same graph of a small Kafka model in
    test_the_engine_records_the_same_graph_while_it_explores), since a compile of each Kafka
    configuration costs seconds to a few tens of seconds and the analyses read only the graph."""
    key = (type(model.spec), model.spec.params)
    if key not in _GRAPHS:
        if model.spec.name == "kafka":
            from kraftcheck.checker.explore.bytecode_tier import BytecodeKernels
            kernels = BytecodeKernels(model)
            _GRAPHS[key] = build_graph(model, kernels), kernels
        else:
            _GRAPHS[key] = _compiled(model)
    return _GRAPHS[key]


@pytest.mark.parametrize("name,params", [("two_phase", {"rm": 3}), ("die_hard", {}), ("mutex", {}),
                                         ("mutex", {"algorithm": "test_and_set"})])
def test_recorded_graph_is_the_networkx_graph_state_for_state(name, params):
    model = _model(name, **params)
    graph, _ = _compiled(model)
    sg = explore_graph(model)
    assert graph.size == len(sg.states) and graph.transitions == sg.graph.number_of_edges()
    unpacked = [tuple(model.layout.unpack(tuple(int(w) for w in row))) for row in graph.states]
    assert unpacked == [tuple(s) for s in sg.states]  # same breadth-first numbering
    edges = sorted((int(graph.source_of(e)), int(graph.targets[e]), int(graph.labels[e]))
                   for e in range(graph.transitions))
    assert edges == sorted((u, v, d["label"]) for u, v, d in sg.graph.edges(data=True))
    for i in range(graph.size):
        assert len(graph.labels_to(i)) == len(sg.path_to(i)) - 1


AVAILABILITY_CASES = [
    ("toy strategy=none", lambda: Model(ToyPartition(ToyParams(strategy="none"))), None),
    ("toy strategy=unclean", lambda: Model(ToyPartition(ToyParams(strategy="unclean"))), None),
    ("die hard: 4 gallons", lambda: _model("die_hard"), Predicate("big holds 4", lambda v: v["big"] == 4)),
    ("two phase: TM undecided", lambda: _model("two_phase", rm=3),
     Predicate("the TM has not decided", lambda v: v["tm_state"] == 0)),
    ("kafka recovery=none", lambda: _small_kafka(recovery="none"), None),
    ("kafka recovery=balanced", lambda: _small_kafka(recovery="balanced"), None),
]


@pytest.mark.parametrize("case", AVAILABILITY_CASES, ids=[c[0] for c in AVAILABILITY_CASES])
def test_availability_agrees_with_networkx(case):
    _, make, predicate = case
    model = make()
    predicate = predicate or model.spec.availability()
    graph, kernels = _analysed(model)
    found = analyse_availability(graph, evaluate(graph, kernels, predicate))
    expected = availability_reference(model, predicate)
    got = {"states": found.states, "transitions": found.transitions, "available_states": found.available_states,
           "stuck_states": found.stuck_states, "stuck_sink_components": found.stuck_sink_components,
           "sink_components": found.sink_components, "components": found.components,
           "first_stuck_depth": len(found.path_labels) if found.first_stuck is not None else None}
    assert got == expected


def test_availability_cases_cover_both_answers():
    # the conformance above means little if every case had the same answer
    verdicts = set()
    for _, make, predicate in AVAILABILITY_CASES:
        model = make()
        graph, kernels = _analysed(model)
        verdicts.add(analyse_availability(graph, evaluate(graph, kernels, predicate or model.spec.availability()))
                     .verdict)
    assert verdicts == {"can get stuck", "can always recover"}


def _two_phase_decides(fair):
    decided = Predicate("every RM committed or aborted", lambda v: (v["rm_state"] >= 2).all(axis=1))
    return Liveness("rms_decide", decided, fair=fair)


LIVENESS_CASES = [
    ("mutex peterson fair", lambda: _model("mutex"), None),
    ("mutex peterson unfair", lambda: _model("mutex", fair=False), None),
    ("mutex test-and-set fair", lambda: _model("mutex", algorithm="test_and_set"), None),
    ("mutex test-and-set unfair", lambda: _model("mutex", algorithm="test_and_set", fair=False), None),
    ("two phase, no fairness", lambda: _model("two_phase", rm=2), _two_phase_decides(())),
    ("two phase, RMs and TM fair", lambda: _model("two_phase", rm=2),
     _two_phase_decides(("TMRcvPrepared(*)", "TMCommit", "TMAbort", "RMPrepare(*)", "RMRcvCommitMsg(*)",
                         "RMRcvAbortMsg(*)"))),
    ("two phase, TM abort not fair", lambda: _model("two_phase", rm=2),
     _two_phase_decides(("TMRcvPrepared", "TMCommit", "RMRcvCommitMsg(*)", "RMRcvAbortMsg(*)"))),
    ("die hard, always eventually 4", lambda: _model("die_hard"),
     Liveness("four_again", Predicate("big holds 4", lambda v: v["big"] == 4), fair=("FillBig", "SmallToBig"))),
    ("kafka regains leader, recovery=none", lambda: _small_kafka(recovery="none"), "partition_regains_leader"),
    ("kafka regains leader, recovery=balanced", lambda: _small_kafka(recovery="balanced"),
     "partition_regains_leader"),
    ("kafka acked write readable", lambda: _small_kafka(), "acked_write_becomes_readable"),
    # under --election any the electing actions have a leader parameter, so Unfence(*) and
    # Restart(*) are fair per (broker, leader chosen): one requirement per instance
    ("kafka regains leader, election=any", lambda: _small_kafka(recovery="none", election="any"),
     "partition_regains_leader"),
]


def _prop(model, which):
    if which is None:
        return model.spec.liveness()[0]
    if isinstance(which, str):
        return next(p for p in model.spec.liveness() if p.name == which)
    return which


@pytest.mark.parametrize("case", LIVENESS_CASES, ids=[c[0] for c in LIVENESS_CASES])
def test_liveness_agrees_with_networkx(case):
    _, make, which = case
    model = make()
    prop = _prop(model, which)
    graph, kernels = _analysed(model)
    found = check_liveness(graph, kernels, prop)
    assert liveness_found(found) == liveness_reference(model, prop)


def test_liveness_cases_cover_both_verdicts():
    verdicts = set()
    for _, make, which in LIVENESS_CASES:
        model = make()
        graph, kernels = _analysed(model)
        verdicts.add(check_liveness(graph, kernels, _prop(model, which)).verdict)
    assert verdicts == {"holds", "violated"}


def test_peterson_is_starvation_free_under_weak_fairness_and_test_and_set_is_not():
    def verdict(**params):
        model = _model("mutex", **params)
        graph, kernels = _compiled(model)
        return check_liveness(graph, kernels, model.spec.liveness()[0])

    assert verdict(algorithm="peterson").verdict == "holds"
    starved = verdict(algorithm="test_and_set")
    assert starved.verdict == "violated" and not starved.lasso.stutter
    model = _model("mutex", algorithm="test_and_set")
    cycle = [str(model.labels[lab]) for lab in starved.lasso.labels[starved.lasso.cycle_from:]]
    # p1 waits while p2 goes round: the lock is taken whenever p1 could have had it
    assert cycle == ["Try(p=p2)", "Enter(p=p2)", "Leave(p=p2)"]
    for params in ({"algorithm": "peterson", "fair": False}, {"algorithm": "test_and_set", "fair": False}):
        unfair = verdict(**params)
        assert unfair.verdict == "violated" and unfair.lasso.stutter  # p1 just stops after trying


def test_unknown_fairness_names_are_refused_with_the_actions_listed():
    from kraftcheck.checker.errors import SpecError
    model = _model("die_hard")
    graph, kernels = _compiled(model)
    prop = Liveness("x", Predicate("big holds 4", lambda v: v["big"] == 4), fair=("FillHuge",))
    with pytest.raises(SpecError, match="FillHuge.*FillSmall, FillBig"):
        check_liveness(graph, kernels, prop)


def test_a_predicate_that_does_not_return_one_value_per_state_is_refused():
    from kraftcheck.checker.errors import SpecError
    model = _model("die_hard")
    graph, kernels = _compiled(model)
    with pytest.raises(SpecError, match="one boolean per state"):
        evaluate(graph, kernels, Predicate("bad", lambda v: np.array([True])))


@pytest.mark.parametrize("compile_mode", ["now", "never"])
@pytest.mark.parametrize("name,params", [("two_phase", {"rm": 3}), ("die_hard", {}),
                                         ("kafka", dict(brokers=2, min_isr=1, fences=0, min_isr_changes=0))])
def test_the_engine_records_the_same_graph_while_it_explores(name, params, compile_mode):
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.result import Options
    model = _model(name, **params)
    result = Engine(compile=compile_mode).explore(model, Options(keep_going=True, keep_graph=True))
    recorded, built = result.graph, _compiled(model)[0]
    assert recorded.size == result.distinct_states == built.size
    assert recorded.transitions == result.states_generated - result.initial_states == built.transitions
    assert recorded.depth == result.depth == built.depth and recorded.initial == built.initial
    for attr in ("states", "parent", "parent_label", "offsets", "targets", "labels"):
        assert np.array_equal(getattr(recorded, attr), getattr(built, attr)), attr
    assert recorded.built_by == "the check's exploration"


def test_recording_needs_every_state_and_no_graph_comes_from_an_incomplete_run():
    from kraftcheck.checker.errors import UsageError
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.result import Options
    model = _model("two_phase", rm=3)
    with pytest.raises(UsageError, match="keep_going"):
        Engine(compile="now").explore(model, Options(keep_graph=True))
    with pytest.raises(UsageError, match="fingerprints"):
        Engine(compile="now").explore(model, Options(keep_going=True, fingerprints=True, keep_graph=True))
    cut = Engine(compile="now").explore(model, Options(keep_going=True, keep_graph=True, max_states=100))
    assert cut.status == "incomplete" and cut.graph is None


def test_an_analysis_over_the_memory_budget_is_refused_before_it_allocates():
    from kraftcheck.checker.errors import UsageError
    from kraftcheck.checker.explore.result import memory_in_use
    graph, _ = _compiled(_model("two_phase", rm=3))
    graph.check_budget(memory_in_use() + graph.analysis_bytes() + (64 << 20))  # room enough: no complaint
    with pytest.raises(UsageError, match="raise --max-memory, or to shrink the model, give smaller values of rm"):
        graph.check_budget(memory_in_use())


def test_an_analysis_a_limit_stops_leaves_the_run_incomplete_not_in_error(tmp_path, monkeypatch):
    """--liveness over --max-memory after a complete exploration: the help promises exit 3 for
    --max-memory, and the run gave exit 2 with a report whose result was ``error``. Now the run is
    incomplete (exit 3), its report says which limit stopped which analysis; a run that found a
    violation stays violated (exit 1), the summary saying the analysis stopped."""
    import json

    from click.testing import CliRunner

    from kraftcheck.checker.analyses.state_graph import CompiledGraph
    from kraftcheck.checker.errors import OverBudget
    from kraftcheck.checker.explore.result import VIOLATED, Result, Violation
    from kraftcheck.cli.main import cli
    from kraftcheck.cli.terminal import cut_short

    def over(self, max_memory, extra_per_state=0):
        raise OverBudget("--max-memory", "analysing the state graph needs about 1.0 GiB more")

    monkeypatch.setattr(CompiledGraph, "check_budget", over)
    report = tmp_path / "report.json"
    result = CliRunner().invoke(cli, ["check", "--spec", "mutex", "--liveness", "--max-memory", "64", "--no-color",
                                      "--json", str(report), "--trace-dir", str(tmp_path / "t")])
    assert result.exit_code == 3, result.output
    said = json.loads(report.read_text())
    assert (said["result"], said["error"], said["exhaustive"]) == ("incomplete", None, True)
    assert said["incomplete_reason"] == ("stopped at --max-memory: --liveness did not finish: analysing the state "
                                         "graph needs about 1.0 GiB more")
    assert "incomplete: every state explored, then stopped at --max-memory" in " ".join(result.output.split())

    violated = Result(_model("two_phase", rm=2))
    violated.violations, violated.status = [Violation("tc_consistent", "invariant", [])], VIOLATED
    violated.stop_analysis("stopped at --max-memory: --liveness did not finish: ...")
    assert violated.status == VIOLATED
    assert cut_short(violated) == "; then stopped at --max-memory: --liveness did not finish: ..."
