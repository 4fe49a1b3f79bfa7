"""Cancelling a reassignment below min ISR: what Kafka's controller writes, and what KIP-966's rule
(``--fix-reassignment-min-isr``: refuse; ``--fix-reassignment-prune-elr``: keep only original
replicas in the ELR) changes, step by step on the model's controller (finding F6).

Kafka has no test of a cancellation that leaves the ISR below min ISR; these cases are read from
the code each preset stands for (specs/kafka/code_paths.py, ``CancelReassignment``):
``ReplicationControlManager.cancelPartitionReassignment`` builds ``PartitionReassignmentRevert``
(the ISR without the adding replicas, no min ISR check; an empty one is refused without unclean
leader election), then ``PartitionChangeBuilder.build``: ``maybePopulateTargetElr`` puts the ISR
before the change minus the new one in the ELR when the new one is below min ISR, whatever the
replica set, and ``tryElection`` elects among the original replicas; the leader epoch is bumped
(a replica left the set).

Partition: brokers 1..4, replicas [1,2,3] moving to [1,2,4] (replicas [1,2,3,4], adding [4],
removing [3]), min ISR 2, leader 1.
"""

from __future__ import annotations

import pytest

from kraftcheck.checker.model import Model
from kraftcheck.specs.kafka.code_paths import code_paths
from kraftcheck.specs.kafka.params import PROTOCOLS, WITHOUT_ELR, KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication

KAFKA_WITH_ELR = [p for p in PROTOCOLS if p.startswith("kafka") and p not in WITHOUT_ELR]
FIXES = {"none": {}, "min ISR": {"fix_reassignment_min_isr": True}, "pruning": {"fix_reassignment_prune_elr": True},
         "both": {"fix_reassignment_min_isr": True, "fix_reassignment_prune_elr": True}}


def model(protocol: str, **switches) -> Model:
    return Model(KafkaReplication(KafkaParams(protocol=protocol, brokers=4, replication_factor=3, min_isr=2,
                                              reassignments=1, lossy_shutdowns=0, fences=0, isr_shrinks=0,
                                              min_isr_changes=0, **switches)))


def bits(*brokers: int) -> int:
    return sum(1 << (b - 1) for b in brokers)


def reassigning(m: Model, isr, elr=(), leader=1):
    """The partition mid-reassignment [1,2,3] -> [1,2,4] with ISR ``isr`` and ELR ``elr``."""
    values = m.layout.values(m.initial[0])
    values.update(c_replicas=bits(1, 2, 3, 4), c_adding=bits(4), c_removing=bits(3), reassignments_used=1,
                  c_isr=bits(*isr), c_elr=bits(*elr), c_leader=leader - 1)
    return m.layout.flat_from_values(values)


def cancel(m: Model, state):
    """The state after CancelReassignment, or None when the controller refuses it."""
    return m.step(state, m.label_for("CancelReassignment", ()))


def shown(m: Model, state) -> dict:
    v = m.layout.show(state)
    return {"isr": v["c_isr"], "elr": v["c_elr"], "replicas": v["c_replicas"], "leader": v["c_leader"]}


def test_every_case_cites_the_cancellation_code():
    for protocol in PROTOCOLS:
        methods = {method for _, method, _ in code_paths("CancelReassignment", protocol)}
        if protocol != "kip-966":
            assert {"ReplicationControlManager.cancelPartitionReassignment", "PartitionChangeBuilder.build"} <= methods
        if protocol in KAFKA_WITH_ELR:
            assert "PartitionChangeBuilder.maybePopulateTargetElr" in methods


@pytest.mark.parametrize("protocol", KAFKA_WITH_ELR)
@pytest.mark.parametrize("fix", FIXES)
def test_cancelling_the_replica_that_held_min_isr(protocol, fix):
    """ISR [1,4]: the adding replica 4 keeps the ISR at min ISR. Kafka cancels to ISR [1] and puts
    4, no longer a replica, in the ELR (F6); the min ISR rule refuses the cancellation; pruning
    alone cancels with an empty ELR, one replica left electable."""
    m = model(protocol, **FIXES[fix])
    after = cancel(m, reassigning(m, isr=(1, 4)))
    if FIXES[fix].get("fix_reassignment_min_isr"):
        assert after is None
        return
    pruned = FIXES[fix].get("fix_reassignment_prune_elr", False)
    assert shown(m, after) == {"isr": ["b1"], "elr": [] if pruned else ["b4"], "replicas": ["b1", "b2", "b3"],
                               "leader": "b1"}
    assert m.layout.show(after)["c_epoch"] == 2  # a replica left the set: the leader epoch is bumped


@pytest.mark.parametrize("protocol", ["kafka-3.5", "kafka-4.0"])
def test_without_elr_the_cancellation_leaves_one_replica_in_the_isr(protocol):
    """No ELR (kafka-3.5, kafka-4.0): the same cancellation leaves ISR [1] and nothing else
    electable; the min ISR rule refuses it there too."""
    m = model(protocol)
    assert shown(m, cancel(m, reassigning(m, isr=(1, 4)))) == {"isr": ["b1"], "elr": [], "replicas": ["b1", "b2", "b3"],
                                                               "leader": "b1"}
    ruled = model(protocol, fix_reassignment_min_isr=True)
    assert cancel(ruled, reassigning(ruled, isr=(1, 4))) is None


@pytest.mark.parametrize("protocol, fix", [(p, fix) for p in PROTOCOLS if p != "kip-966" for fix in FIXES
                                           if p not in WITHOUT_ELR or "pruning" not in fix and fix != "both"])
def test_cancelling_at_min_isr_is_never_refused(protocol, fix):
    """ISR [1,2,4]: without 4 the ISR [1,2] is at min ISR, so every rule cancels and the ELR is
    empty (the ISR is at min ISR). Without ELR there is nothing to prune (test_pruning_needs_elr)."""
    m = model(protocol, **FIXES[fix])
    assert shown(m, cancel(m, reassigning(m, isr=(1, 2, 4)))) == {"isr": ["b1", "b2"], "elr": [],
                                                                  "replicas": ["b1", "b2", "b3"], "leader": "b1"}


@pytest.mark.parametrize("protocol", KAFKA_WITH_ELR)
@pytest.mark.parametrize("fix", FIXES)
def test_cancelling_when_the_isr_was_below_min_isr_already(protocol, fix):
    """ISR [1], ELR [2], the adding replica not in the ISR: the cancellation shrinks nothing.
    Kafka cancels and keeps the ELR [2] (an original replica: pruning keeps it); the KIP's rule
    as the model reads it ("can only be cancelled if the ISR size is larger or equal to min
    ISR") refuses it until the ISR is back at min ISR."""
    m = model(protocol, **FIXES[fix])
    after = cancel(m, reassigning(m, isr=(1,), elr=(2,)))
    if FIXES[fix].get("fix_reassignment_min_isr"):
        assert after is None
    else:
        assert shown(m, after) == {"isr": ["b1"], "elr": ["b2"], "replicas": ["b1", "b2", "b3"], "leader": "b1"}


@pytest.mark.parametrize("protocol", KAFKA_WITH_ELR)
def test_an_empty_revert_needs_unclean_election(protocol):
    """ISR [4] (only the adding replica, leading): the revert's ISR is empty; Kafka refuses it
    without unclean leader election and otherwise puts the first original replica alone in the
    ISR, uncleanly; the min ISR rule refuses it either way."""
    m = model(protocol)
    assert cancel(m, reassigning(m, isr=(4,), leader=4)) is None
    unclean = model(protocol, unclean_election=True)
    after = cancel(unclean, reassigning(unclean, isr=(4,), leader=4))
    assert shown(unclean, after)["isr"] == ["b1"] and shown(unclean, after)["replicas"] == ["b1", "b2", "b3"]
    ruled = model(protocol, unclean_election=True, fix_reassignment_min_isr=True)
    assert cancel(ruled, reassigning(ruled, isr=(4,), leader=4)) is None


def test_kip_966_has_both_halves_and_the_switch_drops_one():
    """kip-966 refuses the cancellation of ISR [1,4]; with --no-reassignment-min-isr it cancels
    and prunes: ISR [1], ELR empty."""
    m = model("kip-966")
    assert cancel(m, reassigning(m, isr=(1, 4))) is None
    loose = model("kip-966", no_reassignment_min_isr=True)
    assert shown(loose, cancel(loose, reassigning(loose, isr=(1, 4)))) == {
        "isr": ["b1"], "elr": [], "replicas": ["b1", "b2", "b3"], "leader": "b1"}


def test_pruning_needs_elr():
    from kraftcheck.checker.errors import UsageError
    for protocol in WITHOUT_ELR:
        with pytest.raises(UsageError, match="prunes the ELR"):
            model(protocol, fix_reassignment_prune_elr=True)
