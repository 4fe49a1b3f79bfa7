"""docs/findings.md F4, pinned by the compiled analyses on the Kafka model without fencing bounds
(--fences 0: about 600,000 states per variant): a min.insync.replicas update clears the ELR, and
what the ELR held is gone.

* F4a (kip-966, strategy None): after the last ISR member lost its log, lowering min ISR to 1
  clears the ELR {b2, b3}; when b1's session times out no replica may lead, for good. Without the
  min ISR change no state is stuck, and Balanced and Aggressive always recover.
* F4b (kafka-4.x): a min ISR "update" to the same value clears the ELR under Kafka 4.x's rule; the
  last-known-leader fallback then elects the leader that lost the acknowledged write in its lossy
  shutdown. With the KIP's rule (clear only when the new min ISR <= |ISR|) the write survives.
"""

from __future__ import annotations

from kraftcheck import analyses, traces
from kraftcheck.checker.model import Model
from kraftcheck.specs.kafka.params import KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication
from test_kafka_model import run_steps_from

F4A_PATH = ["Produce(b=b1, acks=1)", "ProposeIsrShrink(b=b1, out=b2+b3)", "HandleAlterPartition",
            "LossyShutdown(b=b1, keep=0)", "ChangeMinIsr(value=1)", "SessionTimeout(b=b1)"]


def _model(**kw):
    return Model(KafkaReplication(KafkaParams(brokers=3, min_isr=2, fences=0, **kw)))


def test_f4a_lowering_min_isr_strands_the_partition_under_strategy_none(tmp_path):
    report = analyses.availability_report(_model(recovery="none"), trace_dir=tmp_path)
    variants = {v["variant"]: v for v in report["variants"]}
    stuck = variants["recovery=none"]
    assert stuck["verdict"] == "can get stuck" and stuck["example"]["steps"] == F4A_PATH
    state = stuck["example"]["stuck_state"]
    assert state["c_isr"] == [] and state["c_elr"] == ["b1"] and state["c_leader"] == "none"
    assert state["b_state"]["b1"] == "offline_unclean"  # b1 will leave the ELR when it registers
    assert traces.replay(traces.load(stuck["trace_file"])).ok
    assert variants["recovery=balanced"]["verdict"] == variants["recovery=aggressive"]["verdict"] == \
        "can always recover"


def test_f4a_needs_the_min_isr_change():
    report = analyses.availability_report(_model(recovery="none", min_isr_changes=0))
    assert report["can_get_stuck"] == []


def test_f4b_a_same_value_min_isr_update_under_kafka_4x_loses_the_acknowledged_write(tmp_path):
    report = analyses.liveness_report(_model(protocol="kafka-4.x"), ["acked_write_becomes_readable"],
                                    trace_dir=tmp_path)
    (prop,) = report["properties"]
    assert prop["verdict"] == "violated" and prop["lasso"]["stutter"]
    prefix = prop["lasso"]["prefix"]
    # the acknowledged write, b1's lossy shutdown, then the no-op update that clears the ELR {b2,b3}
    assert prefix.index("AdvanceHighWatermark(b=b1)") < prefix.index("LossyShutdown(b=b1, keep=0)") \
        < prefix.index("ChangeMinIsr(value=2)") < prefix.index("Unfence(b=b1)")
    graph = traces.load(prop["trace_file"])
    assert traces.replay(graph).ok
    last = graph.nodes[max(graph.nodes)]["state"]
    assert last["c_leader"] == "b1" and last["acked"] == ["r1"] and all(not log for log in last["log"].values())


def test_f4b_needs_kafka_4x_clearing_rule():
    report = analyses.liveness_report(_model(protocol="kafka-4.x", min_isr_policy="kip"),
                                    ["acked_write_becomes_readable"])
    assert report["violated"] == []


# F4b without the AlterPartition race (docs/reports/F4b): r1 is acknowledged with every replica
# holding it; the followers then lag on r2, the ISR shrinks to the leader b1 and the ELR {b2,b3}
# holds r1. A min ISR update (the value in force: Kafka's cluster-level update, which always
# writes a ClearElrRecord; or an increase to 3) clears the ELR; b1 crashes losing its unflushed
# log, its session expires, it registers again and is elected as the last known leader.
F4B_LAGGING = [("Produce", (0, 1)), ("Fetch", (1,)), ("Fetch", (2,)), ("Fetch", (1,)), ("Fetch", (2,)),
               ("AdvanceHighWatermark", (0,)), ("Produce", (0, 0)), ("ProposeIsrShrink", (0, 0b110 - 1)),
               ("HandleAlterPartition", ())]
F4B_AFTER = [("LossyShutdown", (0, 0)), ("SessionTimeout", (0,)), ("Restart", (0,)), ("Unfence", (0,))]


def test_f4b_needs_no_race_and_any_min_isr_update_clears_the_elr_under_kafka_4x():
    for value in (2, 3):
        m = _model(protocol="kafka-4.x", records=2)
        state = run_steps_from(m, m.initial[0], F4B_LAGGING)
        v = m.layout.show(state)
        assert (v["c_isr"], v["c_elr"], v["acked"]) == (["b1"], ["b2", "b3"], ["r1"])
        state = run_steps_from(m, state, [("ChangeMinIsr", (value - 1,))] + F4B_AFTER)
        v = m.layout.show(state)
        assert (v["c_leader"], v["c_recovering"], v["acked"]) == ("b1", True, ["r1"])
        assert v["log"][0] == [] and v["log"][1] == v["log"][2] == ["r1"]  # b2, b3 will truncate r1


def test_f4b_the_kip_rule_keeps_the_elr_on_an_increase():
    m = _model(protocol="kafka-4.x", records=2, min_isr_policy="kip")
    state = run_steps_from(m, m.initial[0], F4B_LAGGING)
    assert m.step(state, m.label_for("ChangeMinIsr", (1,))) is None  # the KIP's rule: a change only
    state = run_steps_from(m, state, [("ChangeMinIsr", (2,))] + F4B_AFTER[:2])
    v = m.layout.show(state)
    assert (v["c_leader"], v["c_isr"], v["log"][1]) == ("b2", ["b2"], ["r1"])
