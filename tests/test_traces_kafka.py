"""Traces of the Kafka model's known flaws: written as ``check`` writes them, then replayed.

Each flaw is checked on the smallest configuration that shows it (two brokers, one record, one
fault), with the reference explorer and ``--continue``, so every check it violates gets its
shortest counterexample; each is written to a file, loaded back, replayed against the spec, shown
and drawn.
"""

from __future__ import annotations

import json

import pytest

from kraftcheck import traces
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class, spec_names
from kraftcheck.traces.table import trace_text
from kraftcheck.traces.view import TraceView



def test_the_kafka_spec_is_registered():
    """Every test here runs the Kafka model: without it they must fail, not be skipped."""
    assert "kafka" in spec_names()


SMALL = dict(brokers=2, min_isr=2, records=1, fences=0, isr_shrinks=0, min_isr_changes=0, lossy_shutdowns=1)

# flaw -> (switches, a check it must violate)
FLAWS = {
    "kafka-3.5": (dict(protocol="kafka-3.5"), "hwm_advances_only_with_min_isr"),
    "no strict min ISR": (dict(protocol="kip-966", no_strict_min_isr=True, lossy_shutdowns=0, fences=1),
                          "elr_members_hold_committed_log"),
    "unclean shutdown keeps ELR": (dict(protocol="kip-966", keep_unclean_in_elr=True), "elr_members_hold_committed_log"),
    "HWM from maximal ISR": (dict(protocol="kip-966", hwm_from_maximal_isr=True, lossy_shutdowns=0, fences=1),
                             "hwm_advances_only_with_min_isr"),
    "min ISR change keeps ELR": (dict(protocol="kip-966", min_isr_policy="keep-elr", min_isr_changes=1,
                                      lossy_shutdowns=0, fences=1), "elr_only_below_min_isr"),
}


@pytest.fixture(scope="module")
def flaw_traces(tmp_path_factory):
    """flaw -> [(violation, trace path)] for every check each flaw violates."""
    cls = spec_class("kafka")
    out = {}
    for flaw, (switches, _) in FLAWS.items():
        params = cls.Params(**{**SMALL, **switches})
        model = Model(cls(params))
        result = ReferenceExplorer().explore(model, Options(keep_going=True))
        directory = tmp_path_factory.mktemp("kafka")
        run_options = {"engine": "reference", "continue": True}
        out[flaw] = [(v, traces.write_counterexample(model, v, run_options, directory)) for v in result.violations]
    return out


@pytest.mark.slow
def test_every_shortest_counterexample_of_the_known_flaws_replays(flaw_traces):
    for flaw, written in flaw_traces.items():
        expected = FLAWS[flaw][1]
        assert expected in [v.check for v, _ in written], flaw
        for violation, path in written:
            graph = traces.load(path)
            assert graph.number_of_nodes() == violation.depth
            assert graph.graph["violation"]["check"] == violation.check
            report = traces.replay(graph)
            assert report.ok, f"{flaw}: {report.error}"
            assert violation.check in report.steps[-1].failing


@pytest.mark.slow
def test_a_tampered_kafka_trace_is_rejected_at_the_edited_step(flaw_traces):
    violation, path = next(x for x in flaw_traces["unclean shutdown keeps ELR"]
                           if x[0].check == "elr_members_hold_committed_log")
    data = json.loads(path.read_text())
    last = len(data["nodes"]) - 1
    node = next(n for n in data["nodes"] if n["id"] == last - 1)
    node["state"]["c_elr"] = ["b1", "b2"] if node["state"]["c_elr"] != ["b1", "b2"] else ["b1"]
    bad = path.with_name("tampered.json")
    bad.write_text(json.dumps(data))
    report = traces.replay(traces.load(bad))
    assert not report.ok and (report.error.step, report.error.field) == (last - 1, "c_elr")


@pytest.mark.slow
def test_kafka_trace_reads_in_lanes(flaw_traces, tmp_path):
    _, path = flaw_traces["kafka-3.5"][0]
    graph = traces.load(path)
    assert list(graph.graph["lanes"]) == ["controller", "b1", "b2", "history"]
    assert "c_isr" in graph.graph["lanes"]["controller"] and "log[b2]" in graph.graph["lanes"]["b2"]
    text = trace_text(TraceView(graph), width=100, lane="b2")
    assert "log[b1]" not in text and all(len(line) <= 100 for line in text.splitlines())
    assert "VIOLATED" in text and "hwm_advances_only_with_min_isr" in text
    from kraftcheck.traces.render import render
    out = render(graph, tmp_path / "k.png")
    assert out.stat().st_size > 20_000
