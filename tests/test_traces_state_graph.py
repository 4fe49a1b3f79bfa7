"""The whole reachable state graph (``--dump-graph``) and the availability analysis."""

from __future__ import annotations

import networkx as nx
import pytest

import traces
from checker.errors import UsageError
from checker.model import Model
from specs import spec_class
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
    report = traces.availability_report(Model(ToyPartition(ToyParams(strategy="none"))))
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
        traces.availability_report(Model(spec_class("two_phase")()))
