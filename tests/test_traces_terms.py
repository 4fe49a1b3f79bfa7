"""Traces in their spec's terms (traces/spec_terms.py, specs/kafka/trace_terms.py) and the bug
report (traces/report.py, ``kraftcheck trace report``).

One Kafka trace serves every test: KIP-966's "last replica standing" story under kafka-3.5
(traces/scenarios/kip966_last_replica_standing.yaml, 15 steps), made a counterexample of
``acked_writes_survive`` at its last step, which replay confirms. Its leader epochs are renumbered
in the model (b3 is elected at stored epoch 3) but are 5 in Kafka's count: three elections and a
leaderless period after epoch 1.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraftcheck import traces
from kraftcheck.cli.main import cli
from kraftcheck.traces.files import save
from kraftcheck.traces.scenario import load_scenario, run_scenario
from kraftcheck.traces.spec_terms import in_spec_terms

ROOT = Path(__file__).resolve().parent.parent
STORY = ROOT / "traces" / "scenarios" / "kip966_last_replica_standing.yaml"


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory) -> Path:
    graph = run_scenario(load_scenario(STORY), "flawed").graph
    last = graph.number_of_nodes() - 1
    graph.graph.update(kind="counterexample", violation={
        "check": "acked_writes_survive", "kind": "invariant", "step": last,
        "doc": graph.graph["check_docs"]["acked_writes_survive"]})
    assert traces.replay(graph).ok  # a real behaviour reaching that violation
    return save(graph, tmp_path_factory.mktemp("terms") / "kip966.json")


@pytest.fixture(scope="module")
def kafka_view(trace_file):
    return in_spec_terms(traces.load(trace_file))


def test_a_kafka_trace_reads_in_kafka_terms_with_real_epochs(trace_file, kafka_view):
    model = traces.load(trace_file)
    last = model.number_of_nodes() - 1
    assert model.nodes[last]["state"]["c_epoch"] == 3  # renumbered by the model
    states = [kafka_view.nodes[i]["state"] for i in range(last + 1)]
    assert kafka_view.graph["terms"] == "kafka" and kafka_view.graph["real_epochs"] is True
    assert [s["leaderEpoch"] for s in states[6:]] == [1, 2, 3, 3, 3, 4, 4, 4, 4, 5]
    assert [s["partitionEpoch"] for s in states[6:]] == [0, 1, 2, 2, 2, 3, 3, 3, 3, 4]
    end = states[last]
    assert (end["leader"], end["isr"], end["elr"], end["replicas"]) == (3, [3], [], [1, 2, 3])
    assert end["log"] == {"1": ["r1@e1"], "2": ["r1@e1"], "3": []} and end["acknowledged"] == ["r1"]
    assert states[9]["metadata.leaderEpoch"]["3"] == 3 and states[9]["metadata.partitionEpoch"]["3"] == 2
    edge = kafka_view.edges[7, 8]
    assert (edge["action"], edge["params"]) == ("Fence", {"b": 2})
    assert edge["writes"] == ["BrokerRegistrationChangeRecord(brokerId=2, fenced=true)",
                              "PartitionChangeRecord(leader=3, isr=[3]) -> leaderEpoch 3, partitionEpoch 2"]
    assert edge["touch"]["lane"] == "controller"
    assert list(kafka_view.graph["lanes"]) == ["controller", "broker 1", "broker 2", "broker 3", "history"]


def test_show_speaks_kafka_and_model_names_keeps_the_model(trace_file):
    runner = CliRunner()
    kafka = runner.invoke(cli, ["trace", "show", str(trace_file), "--no-color", "--width", "160"])
    assert kafka.exit_code == 0, kafka.output
    assert "leaderEpoch: 4 → 5" in kafka.output and "PartitionChangeRecord(leader=3)" in kafka.output
    assert "log[broker=3]: [r1@e1] → []" in kafka.output and "c_epoch" not in kafka.output
    model = runner.invoke(cli, ["trace", "show", str(trace_file), "--no-color", "--width", "160", "--model-names"])
    assert model.exit_code == 0, model.output
    assert "c_epoch: 2 → 3" in model.output and "leaderEpoch" not in model.output
    assert "PartitionChangeRecord" not in model.output
    one = runner.invoke(cli, ["trace", "show", str(trace_file), "--no-color", "--width", "160", "--broker", "b2"])
    assert "lanes shown: controller, broker 2" in one.output and "log[broker=3]" not in one.output


def test_the_json_export_holds_the_kafka_view_and_says_so(trace_file):
    out = CliRunner().invoke(cli, ["trace", "export", str(trace_file), "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["graph"]["terms"] == "kafka" and data["graph"]["real_epochs"] is True
    names = [f["name"] for f in data["graph"]["fields"]]
    assert names[:7] == ["replicas", "isr", "elr", "lastKnownElr", "leader", "leaderEpoch", "partitionEpoch"]
    assert {"log", "highWatermark", "metadata.leader", "acknowledged"} <= set(names)
    assert all("writes" in e for e in data["edges"])
    # the view cannot be replayed, and replay says what to do
    view = trace_file.with_name("view.json")
    view.write_text(out.output)
    refused = CliRunner().invoke(cli, ["trace", "replay", str(view)])
    assert refused.exit_code == 2 and "--model-names" in refused.output
    model = CliRunner().invoke(cli, ["trace", "export", str(trace_file), "--format", "json", "--model-names"])
    assert json.loads(model.output)["graph"].get("terms") is None


def test_docs_describe_every_key_of_the_kafka_view(kafka_view):
    doc = (ROOT / "docs" / "traces.md").read_text()
    for key in ("terms", "real_epochs", "terms_notes", "model_settings", "writes", "code"):
        assert f"`{key}`" in doc, key
    for field in kafka_view.graph["fields"]:
        assert f"`{field['name']}`" in doc, field["name"]


def test_a_spec_without_the_hook_is_shown_as_written():
    graph = run_scenario(load_scenario(ROOT / "traces" / "scenarios" / "f3_publish_window.yaml"), None).graph
    graph.graph["spec"] = "two_phase"  # a spec whose states these are not: not translated, not an error
    assert in_spec_terms(graph) is graph


def test_the_report_in_markdown_and_jira(trace_file):
    runner = CliRunner()
    md = runner.invoke(cli, ["trace", "report", str(trace_file)])
    assert md.exit_code == 0, md.output
    text = md.output
    for heading in ("# kafka: acked_writes_survive under kafka-3.5", "## Summary", "## Configuration", "## Steps",
                    "## Reproduce"):
        assert heading + "\n" in text
    assert "**acked_writes_survive** (invariant) fails at step 15 of the 16-state counterexample" in text
    assert "| 15 | Unfence(b=3) | BrokerHeartbeatRequest from broker 3" in text
    assert "leaderEpoch: 4 → 5" in text
    # the code paths column: the Kafka methods of specs/kafka/code_paths.py under the trace's preset
    from kraftcheck.specs.kafka.code_paths import code_paths
    row = next(line for line in text.splitlines() if line.startswith("| 15 |"))
    assert "| code path |" in text
    assert [f"{m} (" in row for _, m, _ in code_paths("Unfence", "kafka-3.5")] == [True] * 3
    command = re.search(r"^kraftcheck check .*$", text, re.M).group(0)
    assert command == "kraftcheck check --brokers 3 --min-isr 2 --protocol kafka-3.5 --records 1 --lossy-shutdowns 1 " \
                      "--lossless-shutdowns 0 --clean-shutdowns 0 --fences 2 --isr-shrinks 0 --min-isr-changes 0 " \
                      "--preferred-elections 0 --controller-failovers 0 --reassignments 0 " \
                      "--invariant acked_writes_survive"
    assert "10. LossyShutdown(b=3, keep=0): broker 3 stops uncleanly" in text  # in the summary's path

    jira = runner.invoke(cli, ["trace", "report", str(trace_file), "--format", "jira"]).output
    assert "h1. kafka: acked\\_writes\\_survive under kafka-3.5" in jira and "h2. Steps" in jira
    assert "||#||step||what it writes or sends||changes||checks failing||" in jira
    assert "{noformat}\nkraftcheck check" in jira and "*acked\\_writes\\_survive*" in jira
    row = next(line for line in jira.splitlines() if line.startswith("|15|"))
    assert "isr=\\[3\\]" not in row and "PartitionChangeRecord(leader=3)" in row  # JIRA's [ and { escaped
    assert "[" not in row.replace("\\[", "") and "{" not in row.replace("\\{", "")


def test_a_fix_that_is_not_a_switch_is_refused_before_any_run(trace_file):
    out = CliRunner().invoke(cli, ["trace", "report", str(trace_file), "--with-fix", "fix-everything"])
    assert out.exit_code == 2 and "has no switch 'fix_everything'" in out.output
    assert "fix_reassignment_min_isr" in out.output and "running" not in out.output


def test_a_pending_shrink_keeps_the_committed_isr_as_its_maximal_isr():
    """Kafka's ``PendingShrinkIsr.maximalIsr`` is the last committed ISR (the HWM cannot pass a
    follower being removed until the controller commits it); ``PendingExpandIsr``'s adds the new
    member. The label says what the model's ``maximal_isr`` computes."""
    from types import SimpleNamespace

    from kraftcheck.invariants.kafka_state import maximal_isr
    from kraftcheck.specs.kafka.trace_terms import KafkaTerms

    terms = SimpleNamespace(n=3)
    committed = SimpleNamespace(v_isr=[0b111, 0, 0], ap_state=0, ap_from=0, ap_live=0, ap_isr=0)
    shrink = SimpleNamespace(v_isr=[0b111, 0, 0], ap_state=1, ap_from=0, ap_live=1, ap_isr=0b011)
    expand = SimpleNamespace(v_isr=[0b011, 0, 0], ap_state=1, ap_from=0, ap_live=1, ap_isr=0b111)
    label = KafkaTerms._partition_state
    assert label(terms, committed, 0) == "CommittedPartitionState(isr=[1, 2, 3])"
    assert label(terms, shrink, 0) == "PendingShrinkIsr(isr=[1, 2, 3], maximalIsr=[1, 2, 3])"
    assert label(terms, expand, 0) == "PendingExpandIsr(isr=[1, 2], maximalIsr=[1, 2, 3])"
    for s in (shrink, expand):  # the label's maximal ISR is the model's
        assert label(terms, s, 0).endswith(f"maximalIsr={[b + 1 for b in range(3) if maximal_isr.py_func(s, 0) >> b & 1]})")


def test_a_reports_summary_singles_out_no_participant_of_several_alike(tmp_path):
    """The summary's path named the steps that change the main lane or the last one, taken for
    the history: the Kafka model's last lane is its ghost variables', but two-phase's is the third
    resource manager's, so the report of its eager-commit flaw said "the steps that change the
    global or the rm3", singling out one resource manager of three (and would have listed its
    steps alone). The history is the lane named so, where a spec has one."""
    runner = CliRunner()
    found = runner.invoke(cli, ["check", "--spec", "two_phase_eager_commit", "--trace-dir", str(tmp_path), "-q"])
    assert found.exit_code == 1, found.output
    (trace,) = tmp_path.glob("*.json")
    text = runner.invoke(cli, ["trace", "report", str(trace)]).output
    summary = text.split("## Summary", 1)[1].split("## Configuration", 1)[0]
    assert "Before it (the steps that change the global, or where a check starts failing" in summary, summary
