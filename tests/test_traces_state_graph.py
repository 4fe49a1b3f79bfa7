"""The whole reachable state graph (``--dump-graph``) and the availability analysis."""

from __future__ import annotations

import networkx as nx
import pytest

from kraftcheck import analyses, traces
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class
from traces_support import ToyParams, ToyPartition


def test_dump_two_phase_matches_tlc_state_count(tmp_path):
    out = tmp_path / "tp.graphml"
    summary = traces.dump_state_graph(Model(spec_class("two_phase")()), out, 1000)
    assert summary["states"] == 288  # TLC's distinct states for TwoPhase with 3 RMs
    g = nx.read_graphml(out)
    assert isinstance(g, nx.MultiDiGraph) and g.number_of_nodes() == 288
    assert g.number_of_edges() == summary["transitions"]
    initial = [n for n, d in g.nodes(data=True) if d["initial"]]
    assert len(initial) == 1 and g.nodes[initial[0]]["tm_state"] == "init"
    committed = [n for n, d in g.nodes(data=True) if d["tm_state"] == "committed"]
    assert committed and all(g.nodes[n]["rm_state[rm1]"] in ("prepared", "committed") for n in committed)
    actions = {d["action"] for _, _, d in g.edges(data=True)}
    assert actions == {"TMRcvPrepared", "TMCommit", "TMAbort", "RMPrepare", "RMChooseToAbort",
                       "RMRcvCommitMsg", "RMRcvAbortMsg"}
    # TwoPhase never violates tc_consistent; the broken variant's graph marks the bad states
    assert all(d["violated"] == "" for _, d in g.nodes(data=True))
    out2 = tmp_path / "eager.graphml"
    traces.dump_state_graph(Model(spec_class("two_phase_eager_commit")()), out2, 1000)
    assert any(d["violated"] == "tc_consistent" for _, d in nx.read_graphml(out2).nodes(data=True))


def test_dump_keeps_to_the_constraints_as_the_run_does(tmp_path):
    """A state outside a state constraint, or reached only by a step that breaks an action
    constraint, is no state of the run's graph: the dump expanded it all the same, and wrote
    InnerFIFO's graph with 11,640 states where the check (and TLC) counts 3,864, and a counter
    that only its constraint bounds had its dump stop on the spec's error past the field's domain."""
    from pathlib import Path

    from kraftcheck.checker.explore.reference import ReferenceExplorer
    from kraftcheck.checker.explore.result import Options
    from constraint_specs import Counters, CountersParams

    fifo = spec_class(f"{Path(__file__).resolve().parents[1]}/bench/specs/inner_fifo.py:InnerFifo")
    summary = traces.dump_state_graph(Model(fifo(fifo.Params(messages=3, q_len=3))), tmp_path / "fifo.graphml", 20_000)
    assert summary["states"] == 3864
    for params in (CountersParams(limit=3, cap=3), CountersParams(blocked=True),
                   CountersParams(n=3, top=1, limit=2, blocked=True)):
        model = Model(Counters(params))
        result = ReferenceExplorer().explore(model, Options(keep_going=True))
        summary = traces.dump_state_graph(model, tmp_path / "counters.graphml", 1000)
        assert summary["states"] == result.distinct_states, params
        unconstrained = traces.dump_state_graph(Model(Counters(params), constraints=[]), tmp_path / "u.graphml", 1000)
        assert unconstrained["states"] > summary["states"], params


def test_dump_refuses_above_the_limit_and_writes_nothing(tmp_path):
    out = tmp_path / "tp.graphml"
    with pytest.raises(UsageError, match="more than 100 states"):
        traces.dump_state_graph(Model(spec_class("two_phase")()), out, 100)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(UsageError, match="graphml"):
        traces.dump_state_graph(Model(spec_class("two_phase")()), tmp_path / "tp.json", 1000)


def test_availability_reports_the_strategy_that_can_get_stuck():
    report = analyses.availability_report(Model(ToyPartition(ToyParams(strategy="none"))))
    by_variant = {v["variant"]: v for v in report["variants"]}
    assert report["available_means"] == "the partition has a leader"
    none, unclean = by_variant["strategy=none"], by_variant["strategy=unclean"]
    assert none["verdict"] == "can get stuck" and none["stuck_states"] > 0
    assert none["stuck_sink_components"] >= 1
    # the example: b2 leaves the ISR, then the last ISR member b1 dies
    assert none["example"]["steps"] == ["Shrink(b=b2)", "Crash(b=b1)"]
    assert none["example"]["stuck_state"]["leader"] == "none"
    assert unclean["verdict"] == "can always recover" and unclean["stuck_states"] == 0
    assert "example" not in unclean
    assert report["can_get_stuck"] == ["strategy=none"]


def test_availability_needs_the_spec_to_say_what_available_means():
    with pytest.raises(UsageError, match="does not say what 'available' means"):
        analyses.availability_report(Model(spec_class("two_phase")()))


# ----------------------------------------------------------------------------------------------
# the Kafka model: two brokers, min ISR 1, one ISR shrink and one lossy shutdown

def _kafka(**overrides):
    from kraftcheck.specs import spec_class
    cls = spec_class("kafka")
    kw = dict(brokers=2, min_isr=1, fences=0, isr_shrinks=1, min_isr_changes=0, lossy_shutdowns=1)
    kw.update(overrides)
    return Model(cls(cls.Params(**kw)))


@pytest.mark.slow
def test_kafka_partition_is_stuck_only_with_recovery_none():
    # ISR shrinks to {b1} (ELR stays empty: 1 >= min ISR), b1 loses its log in an unclean shutdown
    # and, at registration, leaves the ELR: without unclean recovery nobody may lead again.
    report = analyses.availability_report(_kafka(protocol="kip-966"))
    by_variant = {v["variant"]: v for v in report["variants"]}
    assert set(by_variant) == {"recovery=none", "recovery=balanced", "recovery=aggressive"}
    stuck = by_variant["recovery=none"]
    assert stuck["verdict"] == "can get stuck" and stuck["stuck_states"] > 0 and stuck["stuck_sink_components"] > 0
    steps = stuck["example"]["steps"]
    assert any(s.startswith("ProposeIsrShrink") for s in steps) and any(s.startswith("LossyShutdown") for s in steps)
    assert stuck["example"]["stuck_state"]["c_isr"] == []
    for name in ("recovery=balanced", "recovery=aggressive"):
        assert by_variant[name]["verdict"] == "can always recover" and by_variant[name]["stuck_states"] == 0
    assert report["can_get_stuck"] == ["recovery=none"]


def test_kafka_state_graph_dump(tmp_path):
    out = tmp_path / "k.graphml"
    summary = traces.dump_state_graph(_kafka(protocol="kafka-4.x", isr_shrinks=0), out, 5000)
    g = nx.read_graphml(out)
    assert g.number_of_nodes() == summary["states"] > 100
    assert {"c_isr", "log[b1]", "hwm[b2]"} <= set(g.nodes["0"])
    assert g.nodes["0"]["c_isr"] == "{b1,b2}"


def test_a_stuck_path_trace_is_checked_to_end_in_a_stuck_state(tmp_path):
    """A stuck path's trace says graph.availability.stuck: true, its variant and what 'available'
    means; replay checked none of it, so a path into a state that can recover, or another variant's
    name, replayed as valid. Now replay searches the states reachable from the last one for an
    available one, and compares the variant and the predicate with the spec's."""
    import json

    from kraftcheck.checker.analyses.availability import availability_of_variants, variant_models
    from kraftcheck.traces.analysis_traces import write_stuck_trace
    from kraftcheck.traces.files import from_data, to_json
    from kraftcheck.traces.graph import build_trace

    model = Model(ToyPartition(ToyParams(strategy="none")))
    (found,) = [v for v in availability_of_variants(model, variant_models(model), model.spec.availability())
                if v.stuck_path]
    path = write_stuck_trace(found, "the partition has a leader", tmp_path)
    data = json.loads(open(path).read())
    assert data["graph"]["availability"] == {"variant": "strategy=none", "stuck": True,
                                             "available_means": "the partition has a leader"}
    assert traces.replay(from_data(data), spec=ToyPartition).ok

    def error(edit):
        edited = json.loads(json.dumps(data))
        edit(edited["graph"])
        return traces.replay(from_data(edited), spec=ToyPartition).error

    assert error(lambda g: g["availability"].update(variant="strategy=unclean")).field == "graph.availability.variant"
    assert error(lambda g: g["availability"].update(available_means="always")).field == \
        "graph.availability.available_means"
    assert error(lambda g: g["availability"].update(stuck=False)).field == "graph.availability"
    assert error(lambda g: g.update(availability="stuck")).field == "graph.availability"
    # the same claim on a path that stops one step short, whose last state still has its leader
    steps = [(s.label, tuple(s.state)) for s in found.stuck_path][:-1]
    short = json.loads(to_json(build_trace(model, steps, kind="counterexample", extra={"availability": {
        "variant": "strategy=none", "stuck": True, "available_means": "the partition has a leader"}})))
    err = traces.replay(from_data(short), spec=ToyPartition).error
    assert (err.field, err.step) == ("graph.availability.stuck", len(steps) - 1)
    assert "'the partition has a leader' holds in it" in str(err)
    # a state without a leader, from which one can still be elected
    model = Model(ToyPartition(ToyParams(strategy="unclean")))
    (unclean,) = [v for v in availability_of_variants(model, {"strategy=unclean": model}, model.spec.availability())]
    assert unclean.stuck_path is None
    steps = [(None, model.initial[0])]
    for label in range(len(model.labels)):  # Crash(b=b1): the leader dies, b2 is left to elect
        if str(model.labels[label]) == "Crash(b=b1)":
            steps.append((label, model.step(steps[0][1], label)))
    recovering = json.loads(to_json(build_trace(model, steps, kind="counterexample", extra={"availability": {
        "variant": "strategy=unclean", "stuck": True, "available_means": "the partition has a leader"}})))
    err = traces.replay(from_data(recovering), spec=ToyPartition).error
    assert err.field == "graph.availability.stuck" and "a state reachable from it" in str(err)
