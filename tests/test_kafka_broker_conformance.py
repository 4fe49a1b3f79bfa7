"""Kafka's own broker tests for the broker's lifecycle and ISR eligibility, expressed in the model
(docs/model.md section 2g).

Each test names the Kafka test it expresses (apache/kafka 1eb7644349cb: ``PartitionTest``,
``BrokerHeartbeatManagerTest``, ``LogManagerTest``), walks the same situation with the model's own
actions under a kafka-* preset, asserts what Kafka's test asserts, and shows where kip-966 (the
KIP's design, without these code paths) differs. Translation: Kafka's mocked metadata cache is the
leader's metadata view, brought up to the controller's state by ``SyncMetadata``; "fenced" and
"shutting down" are the controller's ``c_fenced`` and ``c_shutting_down``; Kafka's broker 0 is b1.
"""

from __future__ import annotations

import pytest
from test_kafka_code_paths import QUIET, enabled, model, run, shown  # noqa: F401 (the same walk helpers)

OUT_B2 = 0b010 - 1  # the shrink parameter naming {b2}


CONTROLLER = ("c_isr", "c_elr", "c_leader", "c_epoch", "c_fenced", "c_last_leader")


# -- a fenced broker shuts down cleanly ---------------------------------------------------------

@pytest.mark.parametrize("protocol", ["kafka-4.x", "kafka-4.1", "kafka-3.5"])
def test_a_fenced_broker_that_shuts_down_is_let_go_at_once_and_stops_cleanly(protocol):
    """BrokerHeartbeatManagerTest.testCalculateNextBrokerState: FENCED with wantShutDown is
    SHUTDOWN_NOW (whatever its leaderships); ``handleBrokerFenced`` finds nothing more to change,
    and the broker stops with the clean-shutdown file. b2 fenced by the controller, still running,
    shuts down: no partition change, b2 offline_clean."""
    m = model(protocol=protocol, min_isr=3, **{**QUIET, "fences": 1, "clean_shutdowns": 1})
    fenced = run(m, [("Fence", (1,))])
    stopped = run(m, [("CleanShutdown", (1,))], fenced)
    before, after = shown(m, fenced), shown(m, stopped)
    assert {k: after[k] for k in CONTROLLER} == {k: before[k] for k in CONTROLLER}
    assert after["b_state"][1] == "offline_clean" and after["clean_shutdowns_used"] == 1

    kip = model(min_isr=3, **{**QUIET, "fences": 1, "clean_shutdowns": 1})
    assert not enabled(kip, run(kip, [("Fence", (1,))]), "CleanShutdown", (1,))


def test_a_fenced_elr_member_restarts_cleanly_and_stays_in_the_elr():
    """LogManagerTest.testCleanShutdownFileWithBrokerEpoch: the clean shutdown writes the broker
    epoch, and the registration that reads it back is clean (``ClusterControlManager.registerBroker``
    compares it with the epoch on record). Min ISR 3: fencing b2 puts it in the ELR; its clean stop
    and restart keep it there, where an unclean stop of the same log (LosslessShutdown) takes it
    out (``unclean_removed``)."""
    m = model(protocol="kafka-4.x", min_isr=3, **{**QUIET, "fences": 1, "clean_shutdowns": 1,
                                                  "lossless_shutdowns": 1})
    fenced = run(m, [("Fence", (1,))])
    assert shown(m, fenced)["c_elr"] == ["b2"]
    clean = shown(m, run(m, [("CleanShutdown", (1,)), ("Restart", (1,))], fenced))
    assert clean["c_elr"] == ["b2"] and not clean["unclean_removed"] and clean["b_state"][1] == "running"
    unclean = shown(m, run(m, [("LosslessShutdown", (1,)), ("Restart", (1,))], fenced))
    assert unclean["c_elr"] == [] and unclean["unclean_removed"]


def test_a_fenced_elr_member_of_a_leaderless_partition_stops_cleanly_without_being_elected():
    """Where the clean stop of a fenced broker is new to the model: every broker fenced, ISR empty,
    b2 in the ELR. Before, b2 could stop cleanly only once unfenced, and unfencing elects it (an
    unfenced ELR member of an empty ISR); now it stops fenced, leaderless, restarts cleanly and is
    still in the ELR, electable once unfenced."""
    m = model(protocol="kafka-4.x", **{**QUIET, "fences": 3, "clean_shutdowns": 1})
    state = run(m, [("Fence", (2,)), ("Fence", (1,)), ("Fence", (0,))])
    v = shown(m, state)
    assert v["c_isr"] == [] and "b2" in v["c_elr"] and v["c_leader"] == "none"
    assert shown(m, run(m, [("Unfence", (1,))], state))["c_leader"] == "b2"
    state = run(m, [("CleanShutdown", (1,)), ("Restart", (1,))], state)
    v = shown(m, state)
    assert v["c_leader"] == "none" and "b2" in v["c_elr"] and not v["unclean_removed"]
    assert shown(m, run(m, [("Unfence", (1,))], state))["c_leader"] == "b2"


def test_a_fenced_broker_in_controlled_shutdown_finishes_it_rather():
    """A fenced broker still in controlled shutdown is let go by CompleteControlledShutdown (which
    also clears ``c_shutting_down``), not by a second CleanShutdown."""
    m = model(protocol="kafka-4.x", controlled_shutdown_in_two_steps=True,
              **{**QUIET, "fences": 1, "clean_shutdowns": 2})
    state = run(m, [("BeginControlledShutdown", (0,)), ("Fence", (0,))])
    assert not enabled(m, state, "CleanShutdown", (0,))
    assert shown(m, run(m, [("CompleteControlledShutdown", (0,))], state))["b_state"][0] == "offline_clean"


# -- maybeExpandIsr: isReplicaIsrEligible --------------------------------------------------------

@pytest.mark.parametrize("protocol", ["kafka-4.x", "kafka-4.0", "kafka-3.5"])
def test_isr_not_expanded_if_replica_is_fenced(protocol):
    """PartitionTest.testIsrNotExpandedIfReplicaIsFencedOrShutdown (kraft): the leader proposes the
    caught-up follower while its metadata shows it eligible; the controller rejects it
    (INELIGIBLE_REPLICA) and the leader reverts. Once its metadata shows the follower fenced, a
    Fetch no longer leads to a proposal; once it shows it unfenced again, it does, and the
    expansion is accepted."""
    m = model(protocol=protocol, **{**QUIET, "fences": 1, "isr_shrinks": 1})
    state = run(m, [("ProposeIsrShrink", (0, OUT_B2)), ("HandleAlterPartition", ()),
                    ("ReceiveAlterPartitionResponse", ())])
    if protocol == "kafka-3.5":  # the shrink bumped the leader epoch: b1 learns it from metadata
        state = run(m, [("SyncMetadata", (0,)), ("SyncMetadata", (1,))], state)
    state = run(m, [("Fetch", (1,)), ("Fence", (1,)),
                    # the leader's metadata does not show the fence yet: the expansion is sent and rejected
                    ("ProposeIsrExpand", (0, 1)), ("HandleAlterPartition", ())], state)
    assert shown(m, state)["ap_state"] == "rejected"
    state = run(m, [("ReceiveAlterPartitionResponse", ())], state)
    assert shown(m, state)["v_isr"][0] == ["b1", "b3"] and shown(m, state)["ap_state"] == "none"
    state = run(m, [("SyncMetadata", (0,))], state)  # the leader learns of the fence
    assert shown(m, state)["v_inactive"][0] == ["b2"]
    assert not enabled(m, state, "ProposeIsrExpand", (0, 1))
    state = run(m, [("Unfence", (1,))], state)
    assert not enabled(m, state, "ProposeIsrExpand", (0, 1))  # not before its metadata shows it
    state = run(m, [("SyncMetadata", (0,)), ("ProposeIsrExpand", (0, 1)), ("HandleAlterPartition", ()),
                    ("ReceiveAlterPartitionResponse", ())], state)
    v = shown(m, state)
    assert v["c_isr"] == ["b1", "b2", "b3"] and v["v_isr"][0] == ["b1", "b2", "b3"]


def test_the_kip_966_leader_proposes_a_follower_its_metadata_shows_fenced():
    """The model's earlier design, kept by kip-966: the leader reads no fencing from its metadata,
    proposes the fenced follower, and the controller rejects it."""
    m = model(**{**QUIET, "fences": 1, "isr_shrinks": 1})
    state = run(m, [("ProposeIsrShrink", (0, OUT_B2)), ("HandleAlterPartition", ()),
                    ("ReceiveAlterPartitionResponse", ()), ("Fetch", (1,)), ("Fence", (1,)),
                    ("ProposeIsrExpand", (0, 1)), ("HandleAlterPartition", ())])
    assert shown(m, state)["ap_state"] == "rejected"


def test_isr_not_expanded_if_replica_is_in_controlled_shutdown():
    """PartitionTest.testIsrNotExpandedIfReplicaIsInControlledShutdown: b1, the leader, begins a
    controlled shutdown; b2 leads, its metadata shows b1 shutting down, and b1's Fetch does not
    lead to a proposal (under kip-966 it does, and the controller rejects it). When b1 comes back
    (a new registration is not in controlled shutdown) and is unfenced, b2 proposes it once its
    metadata shows that."""
    params = dict(QUIET, clean_shutdowns=1, controlled_shutdown_in_two_steps=True)
    begun = [("BeginControlledShutdown", (0,)), ("SyncMetadata", (1,)), ("SyncMetadata", (0,)), ("Fetch", (0,))]
    m = model(protocol="kafka-4.x", **params)
    state = run(m, begun)
    v = shown(m, state)
    assert v["c_leader"] == "b2" and v["c_shutting_down"] == ["b1"] and v["v_inactive"][1] == ["b1"]
    assert v["f_leo"][1][0] == 1 and not enabled(m, state, "ProposeIsrExpand", (1, 0))
    state = run(m, [("SyncMetadata", (2,)), ("CompleteControlledShutdown", (0,)), ("Restart", (0,)),
                    ("Unfence", (0,)), ("Fetch", (0,))], state)
    assert not enabled(m, state, "ProposeIsrExpand", (1, 0))  # b2's metadata still shows b1 fenced
    state = run(m, [("SyncMetadata", (1,)), ("ProposeIsrExpand", (1, 0)), ("HandleAlterPartition", ())], state)
    assert shown(m, state)["c_isr"] == ["b1", "b2", "b3"]

    kip = model(**params)
    state = run(kip, begun + [("ProposeIsrExpand", (1, 0)), ("HandleAlterPartition", ())])
    assert shown(kip, state)["ap_state"] == "rejected"


# -- maybeIncrementLeaderHW: shouldWaitForReplicaToJoinIsr ---------------------------------------

def hwm_after_fence(protocol, unfenced):
    """2 brokers, min ISR 1, the caught-up rule (--replay-known-changes): b2 fetches r1 and is caught
    up, the HWM reaches 1; b2 is fenced (and, for ``unfenced``, unfenced again), which shrinks the
    ISR to {b1}; b1 appends r2 and applies the metadata (``makeLeader`` ends with
    ``maybeIncrementLeaderHW``). Returns b1's HWM."""
    m = model(protocol=protocol, brokers=2, min_isr=1, records=2, replay_known_changes=True,
              **{**QUIET, "fences": 1})
    state = run(m, [("Produce", (0, 0)), ("Fetch", (1,)), ("Fetch", (1,)), ("AdvanceHighWatermark", (0,))])
    v = shown(m, state)
    assert v["hwm"][0] == 1 and v["f_caught"][0][1]
    state = run(m, [("Fence", (1,))] + ([("Unfence", (1,))] if unfenced else []) +
                [("Produce", (0, 0)), ("SyncMetadata", (0,))], state)
    v = shown(m, state)
    # below metadata version 3.6 (kafka-3.5) the shrink bumped the leader epoch, which reset b2's
    # follower state (Replica.resetReplicaState): it is no longer counted as caught up
    assert v["v_isr"][0] == ["b1"] and v["f_caught"][0][1] == (protocol != "kafka-3.5")
    return v["hwm"][0]


@pytest.mark.parametrize("protocol, fenced, unfenced", [
    ("kafka-4.x", 2, 1), ("kafka-4.1", 2, 1), ("kafka-4.0", 2, 1),
    ("kafka-3.5", 2, 2),  # the shrink's leader-epoch bump reset b2's state: nothing to wait for
    ("kip-966", 1, 1),    # the leader reads no fencing from its metadata
])
def test_high_watermark_increases_with_fenced_follower(protocol, fenced, unfenced):
    """PartitionTest.testHighWatermarkIncreasesWithFencedOrShutdownFollower ("fenced", "unfenced"):
    after the controller shrinks the ISR, a caught-up follower that the leader's metadata shows
    fenced no longer holds the HWM back (it reaches the log end, 2); an unfenced one does (1)."""
    assert hwm_after_fence(protocol, unfenced=False) == fenced
    assert hwm_after_fence(protocol, unfenced=True) == unfenced


@pytest.mark.parametrize("protocol, hwm", [("kafka-4.x", 1), ("kafka-4.0", 1), ("kip-966", 0)])
def test_high_watermark_increases_with_shutdown_follower(protocol, hwm):
    """PartitionTest.testHighWatermarkIncreasesWithFencedOrShutdownFollower ("shutdown"): b1 leads,
    begins a controlled shutdown and follows b2, catching up with it; b2 appends r1. Its metadata
    shows b1 shutting down, so b1 does not hold the HWM back (1); without the check it does (0)."""
    m = model(protocol=protocol, brokers=2, min_isr=1, replay_known_changes=True, controlled_shutdown_in_two_steps=True,
              **{**QUIET, "clean_shutdowns": 1})
    state = run(m, [("BeginControlledShutdown", (0,)), ("SyncMetadata", (1,)), ("SyncMetadata", (0,)),
                    ("Fetch", (0,)), ("Produce", (1, 0))])
    v = shown(m, state)
    assert v["c_isr"] == ["b2"] and v["f_caught"][1][0] and v["f_leo"][1][0] == 1
    if hwm:
        state = run(m, [("AdvanceHighWatermark", (1,))], state)
    else:
        assert not enabled(m, state, "AdvanceHighWatermark", (1,))
    assert shown(m, state)["hwm"][1] == hwm
