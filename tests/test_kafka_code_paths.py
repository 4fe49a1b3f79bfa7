"""The Kafka presets follow Kafka's broker and controller code where it differs from the KIP's
design (issue 30, item 1): each test walks one code path step by step under a Kafka preset and,
where the kip-966 model keeps its own design, shows the difference. The code paths are cited
in docs/model.md (apache/kafka 1eb7644349cb)."""

from __future__ import annotations

import pytest

from kraftcheck.checker.model import Model
from kraftcheck.specs.kafka.params import KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication

QUIET = dict(lossy_shutdowns=0, fences=0, isr_shrinks=0, min_isr_changes=0)
OUT_B3 = 0b100 - 1  # the shrink parameter naming {b3}


def model(**kw) -> Model:
    return Model(KafkaReplication(KafkaParams(**kw)))


def run(m: Model, steps, state=None):
    state = m.initial[0] if state is None else state
    for name, values in steps:
        nxt = m.step(state, m.label_for(name, values))
        assert nxt is not None, f"{name}{values} is not enabled"
        state = nxt
    return state


def shown(m, state):
    return m.layout.show(state)


def enabled(m, state, name, values=()):
    return m.step(state, m.label_for(name, values)) is not None


# b1 shrinks the ISR to {b1,b2}, b3 fetches, b1 proposes to add b3 back; then b2 is fenced, which
# writes a partition record: the expansion carries a stale partition epoch
STALE_EXPANSION = [("ProposeIsrShrink", (0, OUT_B3)), ("HandleAlterPartition", ()),
                   ("ReceiveAlterPartitionResponse", ()), ("Produce", (0, 0)), ("Fetch", (1,)), ("Fetch", (2,)),
                   ("ProposeIsrExpand", (0, 2)), ("Fence", (1,)), ("HandleAlterPartition", ())]


def test_a_rejected_expansion_stays_pending_until_metadata_in_kafka():
    """Partition.handleAlterPartitionError: INVALID_UPDATE_VERSION leaves the pending expansion
    in place (PartitionTest.testAlterIsrInvalidVersion: the maximal ISR keeps the new member), so
    the HWM keeps waiting on it until the leader's next metadata update replaces the state; the
    kip-966 model reverts at once."""
    m = model(protocol="kafka-4.1", **{**QUIET, "isr_shrinks": 1, "fences": 1})
    state = run(m, STALE_EXPANSION)
    assert shown(m, state)["ap_state"] == "unsettled"
    state = run(m, [("ReceiveAlterPartitionResponse", ())], state)
    v = shown(m, state)
    assert v["ap_state"] == "awaiting_metadata" and v["ap_isr"] == ["b1", "b2", "b3"] and v["ap_live"]
    assert not enabled(m, state, "ProposeIsrShrink", (0, OUT_B3))  # still pending: no new AlterPartition
    # the HWM waits for b3 (in the maximal ISR) as well as b2: b3 fetched before r1 existed
    assert v["f_leo"][0][2] == 1 and not enabled(m, state, "AdvanceHighWatermark", (0,))
    state = run(m, [("SyncMetadata", (0,))], state)
    v = shown(m, state)
    assert v["ap_state"] == "none" and v["v_isr"][0] == ["b1"]

    kip = model(**{**QUIET, "isr_shrinks": 1, "fences": 1})
    state = run(kip, STALE_EXPANSION + [("ReceiveAlterPartitionResponse", ())])
    assert shown(kip, state)["ap_state"] == "none"


def test_a_kafka_leader_marks_an_unclean_election_recovered_itself():
    """Partition.makeLeader installs RECOVERED whatever the record says, and the leader's next
    AlterPartition carries it; the controller then clears RECOVERING. There is no separate
    ProposeRecovered step, and the leader may change the ISR at once."""
    m = model(protocol="kafka-4.1", unclean_election=True, **{**QUIET, "fences": 3})
    assert "ProposeRecovered" not in [a.name for a in m.spec.actions()]
    state = run(m, [("Fence", (1,)), ("Fence", (2,)), ("Fence", (0,)), ("Unfence", (1,))])
    v = shown(m, state)
    assert v["c_leader"] == "b2" and v["c_isr"] == ["b2"] and v["c_recovering"] and v["c_last_leader"] == "none"
    state = run(m, [("SyncMetadata", (1,))], state)
    assert not shown(m, state)["v_recovering"][1]
    # b2 proposes b3 once its metadata shows b3 unfenced (Partition.isReplicaIsrEligible)
    state = run(m, [("Unfence", (2,)), ("SyncMetadata", (2,)), ("Fetch", (2,))], state)
    assert not enabled(m, state, "ProposeIsrExpand", (1, 2))
    state = run(m, [("SyncMetadata", (1,)), ("ProposeIsrExpand", (1, 2)), ("HandleAlterPartition", ())], state)
    v = shown(m, state)
    assert v["ap_state"] == "accepted" and v["c_isr"] == ["b2", "b3"] and not v["c_recovering"]


def test_the_last_known_leader_is_elected_uncleanly():
    """PartitionChangeBuilder.electAnyLeader and tryElection: with ISR and ELR empty the last
    known leader is elected as an unclean election (RECOVERING, ISR := [it], LastKnownElr
    cleared), ahead of an unclean election of another replica."""
    m = model(protocol="kafka-4.1", unclean_election=True, **{**QUIET, "fences": 3, "lossless_shutdowns": 2})
    state = run(m, [("Fence", (1,)), ("Fence", (2,)), ("Fence", (0,))])
    v = shown(m, state)
    assert v["c_isr"] == [] and v["c_elr"] == ["b1", "b3"] and v["c_last_leader"] == "b1"
    # b3 and b1 return from unclean shutdowns: out of the ELR, b1 still the last known leader
    state = run(m, [("LosslessShutdown", (2,)), ("Restart", (2,)), ("LosslessShutdown", (0,)), ("Restart", (0,))],
                state)
    v = shown(m, state)
    assert v["c_elr"] == [] and v["c_last_leader"] == "b1" and v["c_leader"] == "none"
    state = run(m, [("Unfence", (0,))], state)
    v = shown(m, state)
    assert (v["c_leader"], v["c_isr"], v["c_recovering"], v["c_last_leader"]) == ("b1", ["b1"], True, "none")


def test_a_min_isr_update_clears_the_last_known_leader_in_kafka_4():
    """ReplicationControlManager.removeTopicElrs (the ClearElrRecord written with a
    min.insync.replicas update) empties LastKnownElr, where Kafka 4.x keeps the last known
    leader, and bumps the partition epoch; a last-leader election is then impossible."""
    m = model(protocol="kafka-4.1", **{**QUIET, "fences": 3, "min_isr_changes": 1})
    state = run(m, [("Fence", (1,)), ("Fence", (2,)), ("Fence", (0,))])
    assert shown(m, state)["c_last_leader"] == "b1"
    state = run(m, [("ChangeMinIsr", (1,))], state)
    v = shown(m, state)
    assert v["c_last_leader"] == "none" and v["c_elr"] == [] and v["c_leader"] == "none"
    state = run(m, [("Unfence", (0,))], state)
    assert shown(m, state)["c_leader"] == "none"


def test_kafka_3_5_bumps_the_leader_epoch_on_a_shrink_and_the_leader_keeps_its_followers():
    """Metadata versions below 3.6 bump the leader epoch of an ISR shrink
    (triggerLeaderEpochBumpForIsrShrinkIfNeeded). The leader ignores the accepted response, which
    carries the newer epoch (handleAlterPartitionUpdate), and keeps the shrink pending; its
    metadata then makes it leader again in the new epoch, and Replica.resetReplicaState with
    isNewLeader false keeps what it knew of its followers."""
    m = model(protocol="kafka-3.5", **{**QUIET, "isr_shrinks": 1})
    state = run(m, [("Fetch", (1,)), ("ProposeIsrShrink", (0, OUT_B3)), ("HandleAlterPartition", ())])
    v = shown(m, state)
    assert v["c_isr"] == ["b1", "b2"] and v["c_epoch"] == 2 and v["ap_state"] == "unsettled"
    state = run(m, [("ReceiveAlterPartitionResponse", ())], state)
    assert shown(m, state)["ap_state"] == "awaiting_metadata"
    state = run(m, [("SyncMetadata", (0,))], state)
    v = shown(m, state)
    assert v["ap_state"] == "none" and v["v_epoch"][0] == 2 and v["v_isr"][0] == ["b1", "b2"]
    assert v["f_leo"][0][1] == 1  # b2's fetch of the previous leader epoch is kept
    # kafka-4.0 (metadata version 3.6 and later): no bump, the response is installed
    m40 = model(protocol="kafka-4.0", **{**QUIET, "isr_shrinks": 1})
    state = run(m40, [("Fetch", (1,)), ("ProposeIsrShrink", (0, OUT_B3)), ("HandleAlterPartition", ()),
                      ("ReceiveAlterPartitionResponse", ())])
    v = shown(m40, state)
    assert v["c_epoch"] == 1 and v["v_isr"][0] == ["b1", "b2"] and v["ap_state"] == "none"


def test_a_leader_elected_again_expands_the_isr_only_from_a_fetch_of_the_new_leadership():
    """b1 leads epoch 1 and knows b2 fetched r1; b1 is fenced, b3 leads without r1 and b2
    truncates r1 following it; b1 is unfenced and, b3 fenced, elected again from the ELR (ISR
    {b1}). b1's metadata jumps from epoch 1 to epoch 3, in which it leads again: Kafka's
    makeLeader runs with isNewLeader false and keeps b2's old log end offset, but expands the ISR
    only from a Fetch (updateFollowerFetchState -> maybeExpandIsr), with the offset that Fetch
    brings. So b1 may not add b2 on the stale offset (that would commit r1, which b2 no longer
    has: the first version of the kept state allowed it, found by test_kafka_flaws); after b2's
    Fetch it adds it once b2 is back at b1's epoch start offset."""
    m = model(protocol="kafka-4.1", **{**QUIET, "fences": 2, "isr_shrinks": 1})
    state = run(m, [("Produce", (0, 0)), ("Fetch", (1,)), ("ProposeIsrShrink", (0, 0b010 - 1)), ("Fetch", (1,)),
                    ("HandleAlterPartition", ()), ("ReceiveAlterPartitionResponse", ()), ("Fence", (0,)),
                    ("SyncMetadata", (1,)), ("SyncMetadata", (2,)), ("Fetch", (1,)), ("Unfence", (0,)),
                    ("Fence", (2,)), ("SyncMetadata", (0,))])
    v = shown(m, state)
    assert v["c_leader"] == "b1" and v["c_isr"] == ["b1"] and v["log"][1] == [] and v["eso"][0] == 1
    assert v["f_leo"][0][1] == 0  # b2 is outside the ISR: its old offset is never read again
    assert not enabled(m, state, "ProposeIsrExpand", (0, 1))
    state = run(m, [("SyncMetadata", (1,)), ("Fetch", (1,))], state)  # b2 fetches from offset 0: behind
    assert not enabled(m, state, "ProposeIsrExpand", (0, 1))
    state = run(m, [("Fetch", (1,)), ("ProposeIsrExpand", (0, 1))], state)
    assert shown(m, state)["ap_isr"] == ["b1", "b2"]


def test_a_min_isr_update_strands_a_leaderless_kafka_4_partition():
    """The shortest stuck path of kafka-4.x's availability analysis (docs/findings.md, F4c): b1
    leads with ISR {b1,b3} (b2 shrunk out), b3 is fenced (ELR {b3}), b1 crashes losing r1 and its
    session expires: ISR [], ELR {b1,b3}, no leader, b1 the last known leader. A min ISR update's
    ClearElrRecord empties ELR and LastKnownElr: nothing is electable any more, whoever returns
    (without unclean election). Under the KIP's rule (min ISR 1 > ISR size 0) the ELR stays and b3
    is elected once unfenced."""
    steps = [("Produce", (0, 0)), ("ProposeIsrShrink", (0, 0b010 - 1)), ("HandleAlterPartition", ()),
             ("Fence", (2,)), ("LossyShutdown", (0, 0)), ("SessionTimeout", (0,)), ("ChangeMinIsr", (0,))]
    m = model(protocol="kafka-4.1")
    state = run(m, steps)
    v = shown(m, state)
    assert (v["c_isr"], v["c_elr"], v["c_leader"], v["c_last_leader"]) == ([], [], "none", "none")
    # b3 heartbeats again and b1 restarts and heartbeats: neither is electable, b2 never was
    state = run(m, [("Unfence", (2,)), ("Restart", (0,)), ("Unfence", (0,))], state)
    assert shown(m, state)["c_leader"] == "none"
    kip_rule = model(protocol="kafka-4.1", min_isr_policy="kip")
    state = run(kip_rule, steps + [("Unfence", (2,))])
    assert shown(kip_rule, state)["c_leader"] == "b3"
