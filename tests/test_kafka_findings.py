"""docs/findings.md F1, replayed step by step: after a min ISR increase, a leader that applied an
AlterPartition response but not the config record advances the HWM past an ELR member, and the
acknowledged write is lost when that member is elected — with no lossy shutdown."""

from __future__ import annotations

import pytest
from counterexample_support import assert_counterexample_replays

from kraftcheck.checker.model import Model
from kraftcheck.specs.kafka.params import KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication

OUT_B3 = 0b100 - 1  # ProposeIsrShrink's ``out`` parameter: the set {b3}, bitmask 0b100, index mask - 1

STEPS = [
    ("ChangeMinIsr", (2,), [], []),
    ("Produce", (0, 1), [], []),
    ("Fetch", (1,), [], []),
    ("Fetch", (1,), [], []),
    ("ProposeIsrShrink", (0, OUT_B3), [], []),
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


# docs/findings.md F3: the same loss without any AlterPartition, through the order in which a
# broker applies one metadata publish (the topic delta before the config delta).
PUBLISH_WINDOW_STEPS = [
    ("Produce", (0, 1), [], []),
    ("Fetch", (1,), [], []),
    ("Fetch", (1,), [], []),
    ("ChangeMinIsr", (2,), [], []),
    ("Fence", (2,), [], []),
    ("SyncMetadata", (0,), ["leader_maximal_isr_covers_electable"], []),
    ("AdvanceHighWatermark", (0,), ["elr_members_hold_committed_log", "leader_maximal_isr_covers_electable"],
     ["hwm_advances_only_with_min_isr"]),
    ("Unfence", (2,), ["elr_members_hold_committed_log", "leader_maximal_isr_covers_electable"], []),
    ("Fence", (0,), ["elr_members_hold_committed_log"], []),
    ("Fence", (1,), ["isr_members_hold_committed_log", "leader_holds_committed_log", "acked_writes_survive"], []),
]
F3_BOUNDS = dict(fences=3, lossy_shutdowns=0, isr_shrinks=0)


@pytest.mark.parametrize("protocol", ["kip-966", "kafka-4.x"])
def test_publish_window_loses_an_acknowledged_write_without_alter_partition(protocol):
    m = Model(KafkaReplication(KafkaParams(protocol=protocol, **F3_BOUNDS)))
    state = m.initial[0]
    for name, values, invariants, properties in PUBLISH_WINDOW_STEPS:
        nxt = m.step(state, m.label_for(name, values))
        assert nxt is not None, f"{name}{values} is not enabled"
        assert m.violated_invariants(nxt) == invariants, name
        assert m.violated_properties(state, nxt) == properties, name
        state = nxt
        if name == "SyncMetadata":  # the topic delta is in, the config delta is not
            v = m.layout.show(state)
            assert v["v_isr"][0] == ["b1", "b2"] and v["v_min_isr"][0] == 2 and v["v_cfg_next"][0] == 3
    v = m.layout.show(state)
    assert v["c_leader"] == "b3" and v["log"][2] == [] and v["acked"] == ["r1"]


@pytest.mark.parametrize("fix", ["fix_config_before_topic", "fix_min_isr_in_partition_state"])
def test_fixes_that_close_the_publish_window_refuse_the_hwm_advance(fix):
    """With the config applied with (or before) the topic delta, or the min ISR carried by the
    partition record, b1 learns ISR {b1, b2} together with min ISR 3 and cannot advance the HWM."""
    m = Model(KafkaReplication(KafkaParams(**F3_BOUNDS, **{fix: True})))
    assert "ApplyConfigDelta" not in [a.name for a in m.spec.actions()]
    state = m.initial[0]
    for name, values, _, _ in PUBLISH_WINDOW_STEPS[:6]:
        state = m.step(state, m.label_for(name, values))
        assert state is not None and m.violated_invariants(state) == [], name
    v = m.layout.show(state)
    assert v["v_isr"][0] == ["b1", "b2"] and v["v_min_isr"][0] == 3
    assert m.step(state, m.label_for("AdvanceHighWatermark", (0,))) is None


def test_the_window_closes_with_the_config_delta():
    """ApplyConfigDelta ends the publish: b1 then holds min ISR 3 and the HWM cannot advance."""
    m = Model(KafkaReplication(KafkaParams(**F3_BOUNDS)))
    state = m.initial[0]
    for name, values, _, _ in PUBLISH_WINDOW_STEPS[:6]:
        state = m.step(state, m.label_for(name, values))
    assert m.step(state, m.label_for("SyncMetadata", (0,))) is None  # one publish at a time
    state = m.step(state, m.label_for("ApplyConfigDelta", (0,)))
    v = m.layout.show(state)
    assert v["v_min_isr"][0] == 3 and v["v_cfg_next"][0] == 0
    assert m.violated_invariants(state) == []
    assert m.step(state, m.label_for("AdvanceHighWatermark", (0,))) is None


def _f1_trace_loses_the_write(model) -> bool:
    """Whether F1's trace (STEPS) runs in ``model`` and ends with ``acked_writes_survive``
    violated: a counterexample of len(STEPS) + 1 states, known without any search."""
    state = model.initial[0]
    for name, values, _, _ in STEPS:
        state = model.step(state, model.label_for(name, values))
        if state is None:
            return False
    return "acked_writes_survive" in model.violated_invariants(state)


@pytest.mark.slow
@pytest.mark.parametrize("fix, closes", [
    (None, False),
    ("fix_epoch_bump_on_min_isr_change", False),  # F3's window: the publish after the bump has it
    ("fix_await_metadata", False),                # the leader learns the shrink from that publish
    ("fix_config_before_topic", False),           # F1's AlterPartition response path remains
    ("fix_min_isr_in_partition_state", True),
])
def test_which_single_fix_keeps_acknowledged_writes_at_f1_bounds(fix, closes):
    """docs/findings.md, the fix table, at F1's bounds (two fences, no lossy shutdown): the one
    fix that closes the loss explores the whole space with the write surviving in every state;
    each other stops at a shortest counterexample, of 11 or 12 states, that loses it."""
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.result import Options
    params = KafkaParams(fences=2, lossy_shutdowns=0, **({fix: True} if fix else {}))
    model = Model(KafkaReplication(params), check=["acked_writes_survive"])
    r = Engine(compile="now").explore(model, Options())
    f1_witness = _f1_trace_loses_the_write(model)
    if closes:
        assert not f1_witness
        assert r.status == "holds" and r.exhaustive and r.violations == [] and r.incomplete_reason is None
        return
    assert r.status == "violated" and not r.exhaustive  # stopped at its first violation
    (violation,) = r.violations
    assert (violation.check, violation.kind) == ("acked_writes_survive", "invariant")
    assert violation.depth in (11, 12)
    if f1_witness:  # breadth-first: never longer than a counterexample known without searching
        assert violation.depth <= len(STEPS) + 1
    assert_counterexample_replays(model, violation)
