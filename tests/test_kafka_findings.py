"""docs/findings.md F1, replayed step by step: after a min ISR increase, a leader that applied an
AlterPartition response but not the config record advances the HWM past an ELR member, and the
acknowledged write is lost when that member is elected — with no lossy shutdown."""

from __future__ import annotations

import pytest

from kraftcheck.checker.model import Model
from kraftcheck.specs.kafka import KafkaParams, KafkaReplication

STEPS = [
    ("ChangeMinIsr", (2,), [], []),
    ("Produce", (0, 1), [], []),
    ("Fetch", (1,), [], []),
    ("Fetch", (1,), [], []),
    ("ProposeIsrShrink", (0, 2), [], []),
    ("HandleAlterPartition", (), [], []),
    ("ReceiveAlterPartitionResponse", (), ["leader_maximal_isr_covers_electable"], []),
    ("AdvanceHighWatermark", (0,), ["elr_members_hold_committed_log", "leader_maximal_isr_covers_electable"],
     ["hwm_advances_only_with_min_isr"]),
    ("Fence", (1,), ["elr_members_hold_committed_log", "leader_maximal_isr_covers_electable"], []),
    ("Fence", (0,), ["isr_members_hold_committed_log", "leader_holds_committed_log", "acked_writes_survive"], []),
]


@pytest.mark.parametrize("protocol, policy", [("kip-966", None), ("kafka-4.x", None), ("kip-966", "kafka")])
def test_min_isr_increase_loses_an_acknowledged_write(protocol, policy):
    m = Model(KafkaReplication(KafkaParams(protocol=protocol, min_isr_policy=policy, fences=2,
                                           lossy_shutdowns=0)))
    state = m.initial[0]
    for name, values, invariants, properties in STEPS:
        nxt = m.step(state, m.label_for(name, values))
        assert nxt is not None, f"{name}{values} is not enabled"
        assert m.violated_invariants(nxt) == invariants, name
        assert m.violated_properties(state, nxt) == properties, name
        state = nxt
    v = m.layout.show(state)
    assert v["lossy_shutdowns_used"] == 0
    assert v["c_leader"] == "b3" and v["log"][2] == [] and v["acked"] == ["r1"]


def test_without_the_min_isr_change_the_shrink_creates_no_elr():
    """The control: the same steps with min ISR left at 2 keep every invariant."""
    m = Model(KafkaReplication(KafkaParams(fences=2, lossy_shutdowns=0)))
    state = m.initial[0]
    for name, values, _, _ in STEPS[1:]:
        nxt = m.step(state, m.label_for(name, values))
        assert nxt is not None, f"{name}{values} is not enabled"
        assert m.violated_invariants(nxt) == [] and m.violated_properties(state, nxt) == [], name
        state = nxt
    v = m.layout.show(state)
    assert v["c_leader"] == "none" and v["c_elr"] == ["b1", "b2"]  # no leader until an ELR member (with r1) returns
