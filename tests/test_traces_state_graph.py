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
