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

from kraftcheck import traces
from kraftcheck.checker.model import Model
from kraftcheck.specs.kafka.params import KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication

F4A_PATH = ["Produce(b=b1, acks=1)", "ProposeIsrShrink(b=b1, out=b2+b3)", "HandleAlterPartition",
            "LossyShutdown(b=b1, keep=0)", "ChangeMinIsr(value=1)", "SessionTimeout(b=b1)"]


def _model(**kw):
    return Model(KafkaReplication(KafkaParams(brokers=3, min_isr=2, fences=0, **kw)))


def test_f4a_lowering_min_isr_strands_the_partition_under_strategy_none(tmp_path):
    report = traces.availability_report(_model(recovery="none"), trace_dir=tmp_path)
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
    report = traces.availability_report(_model(recovery="none", min_isr_changes=0))
    assert report["can_get_stuck"] == []


def test_f4b_a_same_value_min_isr_update_under_kafka_4x_loses_the_acknowledged_write(tmp_path):
    report = traces.liveness_report(_model(protocol="kafka-4.x"), ["acked_write_becomes_readable"],
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
    report = traces.liveness_report(_model(protocol="kafka-4.x", min_isr_policy="kip"),
                                    ["acked_write_becomes_readable"])
    assert report["violated"] == []
