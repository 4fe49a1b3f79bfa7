"""Replica sets and partition reassignment in the Kafka model (issue 30 item 2; docs/model.md
section 2b, docs/findings.md F6).

Pinned counts of small configurations (each can fail: any change to the reassignment steps moves
them), hand-built controller states run through the model's own actions (a completion moves the
leader off a removed replica and prunes the ELR; the KIP's min ISR rule blocks a cancellation),
and the input errors, which come before any exploring.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import kraftcheck
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.model import Model
from kraftcheck.specs.kafka.params import KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication

NO_FAULTS = dict(lossy_shutdowns=0, fences=0, isr_shrinks=0, min_isr_changes=0)


def run(**params):
    result = kraftcheck.check("kafka", **params)
    return result.status, result.distinct_states, result.states_generated, result.depth


# -- pinned counts ------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol, counts", [
    ("kip-966", ("holds", 2837, 8824, 18)),
    ("kafka-4.2", ("holds", 3027, 9415, 18)),
])
def test_one_reassignment_of_two_replicas_on_three_brokers(protocol, counts):
    """3 brokers, replication factor 2, min ISR 1, one reassignment (to either other pair), no
    faults: add, catch up, expand, complete or cancel."""
    assert run(brokers=3, replication_factor=2, min_isr=1, reassignments=1, protocol=protocol,
               **NO_FAULTS) == counts


def test_replication_factor_alone_only_shrinks_the_space():
    """A broker that is not a replica and never becomes one only adds its own fault choices: with
    no faults the space is that of the 2-broker partition plus nothing."""
    with_spare = run(brokers=3, replication_factor=2, min_isr=1, **NO_FAULTS)
    alone = run(brokers=2, min_isr=1, **NO_FAULTS)
    assert with_spare[0] == alone[0] == "holds"
    assert with_spare[1] == alone[1]
    assert with_spare[3] == alone[3]


@pytest.mark.parametrize("protocol, switches, expected", [
    ("kip-966", {}, ("holds", 12852, 40952, 24, [])),
    ("kip-966", {"no_reassignment_min_isr": True}, ("violated", None, None, None,
                                                    [("electable_replicas_cover_min_isr", 11)])),
    ("kafka-4.2", {}, ("violated", None, None, None, [("electable_replicas_cover_min_isr", 11),
                                                      ("partition_state_within_replicas", 11)])),
])
def test_cancellation_below_min_isr(protocol, switches, expected):
    """3 brokers, replication factor 2, min ISR 2, one shrink, one reassignment: a cancellation
    that leaves one replica in the ISR is possible without the KIP's rule (finding F6)."""
    result = kraftcheck.check("kafka", brokers=3, replication_factor=2, min_isr=2, reassignments=1, protocol=protocol,
                              lossy_shutdowns=0, fences=0, isr_shrinks=1, min_isr_changes=0, **switches)
    status, distinct, generated, depth, violations = expected
    assert result.status == status
    assert sorted((v.check, v.depth) for v in result.violations) == violations
    if status == "holds":
        assert (result.distinct_states, result.states_generated, result.depth) == (distinct, generated, depth)


def test_kafka_4_3_is_kafka_4_2_with_kafka_19975():
    """kafka-4.3 differs from kafka-4.2 by KAFKA-19975's completion rule alone; kafka-4.2 is
    kafka-4.1's model and kafka-4.x (the newest trunk read) kafka-4.3's (docs/model.md section 2f)."""
    from kraftcheck.specs.kafka.params import switches
    p41, p42, p43, p4x = (switches(KafkaParams(protocol=name))
                          for name in ("kafka-4.1", "kafka-4.2", "kafka-4.3", "kafka-4.x"))
    assert {k for k in p43 if p43[k] != p42[k]} == {"k_complete_on_adding"}
    assert p43["k_complete_on_adding"] == 1 and p43["k_reassign_min_isr"] == 0
    assert p41 == p42 and p43 == p4x


def test_kafka_4_3_completion_puts_a_removed_replica_in_the_elr():
    """Finding F7 with a shrink alone (3 brokers, replication factor 2, min ISR 2): b1 shrinks b2
    out (ISR {b1}, ELR {b2}), [b1,b2] moves to [b2,b3], b3 joins: KAFKA-19975 completes with ISR
    {b3} and the builder puts the removed leader b1 in the ELR (10 states); b1 then deletes its log
    (16). The cancellation of F6 (electable_replicas_cover_min_isr under kafka-4.2, above) is gone:
    the adding replica's expansion now completes at once, so no cancellation finds it in the ISR."""
    result = kraftcheck.check("kafka", brokers=3, replication_factor=2, min_isr=2, reassignments=1,
                              protocol="kafka-4.3", lossy_shutdowns=0, fences=0, isr_shrinks=1, min_isr_changes=0,
                              keep_going=True)
    assert (result.status, result.distinct_states, result.states_generated, result.depth) == (
        "violated", 15924, 52437, 24)
    assert sorted((v.check, v.depth) for v in result.violations) == [("elr_members_hold_committed_log", 16),
                                                                     ("partition_state_within_replicas", 10)]


@pytest.mark.parametrize("protocol, fix, expected", [
    ("kafka-4.2", {}, dict(c_replicas=0b001, c_isr=0b001, c_elr=0b010, c_min_isr=1, c_removing=0)),
    ("kafka-4.3", {}, dict(c_replicas=0b001, c_isr=0b001, c_elr=0b010, c_min_isr=1, c_removing=0)),
    ("kafka-4.3", {"fix_reassignment_prune_elr": True},
     dict(c_replicas=0b001, c_isr=0b001, c_elr=0, c_min_isr=1, c_removing=0)),
    ("kafka-4.3", {"fix_reassignment_min_isr": True},
     dict(c_replicas=0b011, c_isr=0b011, c_elr=0, c_min_isr=2, c_removing=0b010)),
])
def test_a_replication_factor_shrink_below_min_isr_puts_the_removed_replica_in_the_elr(protocol, fix, expected):
    """--replication-factor-changes, replicas [b1,b2], ISR {b1,b2}, min ISR 2: the reassignment to
    [b1] completes in its own record (changePartitionReassignment runs the builder: every final
    replica is in the ISR, KAFKA-19975's shrink case and the 4.2 rule alike). The builder applies
    the ELR rule with the min ISR of the replicas before the change (2): ISR {b1} is below it, so
    b2, removed, enters the ELR; the min ISR in force then follows the one replica left (1), with
    the ELR non-empty. Pruning the ELR to the final replicas leaves it empty; the KIP's min ISR rule
    keeps the reassignment in progress (the ISR it would leave is below min ISR)."""
    m = Model(KafkaReplication(KafkaParams(brokers=3, replication_factor=2, min_isr=2, reassignments=1,
                                           replication_factor_changes=True, protocol=protocol, **NO_FAULTS, **fix)))
    after = m.step(m.initial[0], m.label_for("Reassign", (0b001 - 1,)))
    values = m.layout.values(after)
    assert {k: values[k] for k in expected} == expected
    violated = set(m.violated_invariants(after))
    if fix:
        assert not violated
    else:
        assert {"elr_only_below_min_isr", "partition_state_within_replicas"} <= violated


F7_FENCE = dict(brokers=3, replication_factor=2, min_isr=2, reassignments=1, protocol="kafka-4.3", lossy_shutdowns=0,
                fences=1, isr_shrinks=0, min_isr_changes=0)


def test_kafka_4_3_completion_after_a_fence():
    """Finding F7's own trace (docs/reports/F7-reassignment-completion-elr.md): fence b1 (ISR {b2},
    ELR {b1}), [b1,b2] -> [b1,b3], b3 joins: the completion installs ISR {b3} and ELR {b1,b2}, b2
    no longer a replica (8 states); b2 then deletes its log (14, with the record produced first)."""
    result = kraftcheck.check("kafka", keep_going=True, **F7_FENCE)
    assert (result.status, result.distinct_states, result.states_generated, result.depth) == (
        "violated", 94515, 355779, 25)
    assert sorted((v.check, v.depth) for v in result.violations) == [("elr_members_hold_committed_log", 14),
                                                                     ("partition_state_within_replicas", 8)]
    shortest = next(v for v in result.violations if v.check == "partition_state_within_replicas")
    assert [str(result.model.labels[step.label]) for step in shortest.steps[1:]] == [
        "Fence(b=b1)", "Reassign(target=b1+b3)", "SyncMetadata(b=b2)", "SyncMetadata(b=b3)", "Fetch(f=b3)",
        "ProposeIsrExpand(b=b2, f=b3)", "HandleAlterPartition"]


@pytest.mark.parametrize("fix, counts", [
    ("fix_reassignment_min_isr", (72189, 257365, 25)),
    ("fix_reassignment_prune_elr", (94009, 354788, 25)),
])
def test_each_kip_rule_closes_f7_at_its_bounds(fix, counts):
    """Either rule of KIP-966 on a kafka-4.3 completion, alone, keeps every invariant at F7's
    bounds: the completion waits for an ISR at min ISR (which clears the ELR), or the ELR loses
    the removed replica."""
    assert run(**F7_FENCE, **{fix: True}) == ("holds", *counts)


# -- hand-built states --------------------------------------------------------------------------

class Partition:
    """4 brokers b1..b4 with replication factor 3 and a reassignment of b1's replica to b4 in
    progress (replicas b1..b4, adding b4, removing b1); or ``brokers`` with the reassignment
    ``adding``/``removing`` given."""

    def __init__(self, protocol="kip-966", min_isr=2, brokers=4, adding=0b1000, removing=0b0001, **params):
        bounds = dict(fences=1, lossy_shutdowns=0, isr_shrinks=1, min_isr_changes=0)
        bounds.update(params)
        self.n, self.adding, self.removing = brokers, adding, removing
        self.model = Model(KafkaReplication(KafkaParams(protocol=protocol, brokers=brokers, replication_factor=3,
                                                        min_isr=min_isr, reassignments=1, **bounds)))

    def state(self, isr, leader, elr=0, request_isr=None, **extra):
        layout = self.model.layout
        values = layout.values(self.model.initial[0])
        n = self.n
        values.update(c_replicas=0b111 | self.adding, c_adding=self.adding, c_removing=self.removing,
                      reassignments_used=1, c_isr=isr, c_elr=elr, c_leader=leader, v_leader=[leader] * n,
                      v_pe_ok=[0] * n)
        values["v_pe_ok"][leader] = 1
        values["v_isr"] = [0] * n
        values["v_isr"][leader] = isr
        values["v_min_isr"] = [0] * n
        values["v_min_isr"][leader] = values["c_min_isr"]
        if request_isr is not None:
            values.update(ap_state=1, ap_from=leader, ap_isr=request_isr, ap_epoch=values["c_epoch"], ap_pe_ok=1,
                          ap_live=1)
        values.update(extra)
        return layout.flat_from_values(values)

    def step(self, flat, action, *values):
        after = self.model.step(flat, self.model.label_for(action, values))
        return None if after is None else self.model.layout.values(after)


def test_completion_moves_the_leader_off_a_removed_replica():
    """Leader b1 (being removed) adds b4 to the ISR: the change completes the reassignment
    (PartitionChangeBuilder.completeReassignmentIfNeeded): b1 leaves replica set and ISR, b2
    leads in a new leader epoch, and b1's AlterPartition is answered NEW_LEADER_ELECTED (it keeps
    its pending ISR until its metadata moves on: unsettled)."""
    p = Partition()
    before = p.state(isr=0b0111, leader=0, request_isr=0b1111)
    after = p.step(before, "HandleAlterPartition")
    assert after["c_replicas"] == 0b1110 and after["c_adding"] == 0 and after["c_removing"] == 0
    assert after["c_isr"] == 0b1110
    assert after["c_leader"] == 1
    assert after["c_epoch"] > p.model.layout.values(before)["c_epoch"]
    assert after["ap_state"] == 4  # unsettled


def test_completion_keeps_the_leader_and_bumps_its_epoch():
    """Leader b2 stays when b1 is removed; the leader epoch is bumped all the same
    (triggerLeaderEpochBumpForReplicaReassignmentIfNeeded)."""
    p = Partition()
    before = p.state(isr=0b0111, leader=1, request_isr=0b1111)
    after = p.step(before, "HandleAlterPartition")
    assert after["c_leader"] == 1 and after["c_isr"] == 0b1110 and after["c_replicas"] == 0b1110
    assert after["c_epoch"] > p.model.layout.values(before)["c_epoch"]


def test_completion_prunes_the_elr_to_the_final_replica_set():
    """ISR b2+b3 below min ISR 3 with b1 (being removed) in the ELR; b2 adds b4: the reassignment
    completes with ISR b2+b3+b4 and the ELR holds no replica of the old set (KIP-966: "upon
    completion, the ELR only contains replicas in the final replica set")."""
    p = Partition(min_isr=3)
    before = p.state(isr=0b0110, leader=1, elr=0b0001, request_isr=0b1110)
    after = p.step(before, "HandleAlterPartition")
    assert after["c_replicas"] == 0b1110
    assert after["c_isr"] == 0b1110
    assert after["c_elr"] == 0 and after["c_lkelr"] == 0


@pytest.mark.parametrize("fix, isr, elr, done", [
    ({}, 0b1000, 0b0111, True),  # Kafka 4.3: ISR {b4}, below min ISR; b1, removed, in the ELR (F7)
    ({"fix_reassignment_prune_elr": True}, 0b1000, 0b0110, True),
    ({"fix_reassignment_min_isr": True}, 0b1001, 0, False),  # waits: ISR {b1,b4}, at min ISR
])
def test_kafka_4_3_completion_below_min_isr_and_the_fixes(fix, isr, elr, done):
    """kafka-4.3, ISR {b1} (b1 being removed, leading) and ELR {b2,b3}, min ISR 2: b1 adds b4.
    KAFKA-19975 completes as soon as the adding b4 is in (PartitionReassignmentReplicas.
    maybeCompleteReassignment), and the builder's ELR takes the ISR before the change, b1 included."""
    p = Partition(protocol="kafka-4.3", **fix)
    before = p.state(isr=0b0001, leader=0, elr=0b0110, request_isr=0b1001)
    after = p.step(before, "HandleAlterPartition")
    assert (after["c_isr"], after["c_elr"]) == (isr, elr)
    assert after["c_replicas"] == (0b1110 if done else 0b1111)
    assert after["c_leader"] == (3 if done else 0)


@pytest.mark.parametrize("fix, isr, elr, done", [
    ({}, 0b11000, 0b00101, True),  # Kafka 4.3: electable b4, b5: two, below min ISR 3
    ({"fix_reassignment_prune_elr": True}, 0b11000, 0, True),  # the same two
    ({"fix_reassignment_min_isr": True}, 0b11101, 0, False),
])
def test_kafka_4_3_completion_leaves_fewer_electable_replicas_than_min_isr(fix, isr, elr, done):
    """Finding F7 at five brokers, min ISR 3: [b1,b2,b3] -> [b2,b4,b5] with b2 shrunk out and the
    ELR emptied when b4 joined (ISR {b1,b3,b4}); b1 adds b5. KAFKA-19975 completes (both adding
    replicas in, two added as two removed) with ISR {b4,b5} and the removed b1 and b3 in the ELR."""
    p = Partition(protocol="kafka-4.3", min_isr=3, brokers=5, adding=0b11000, removing=0b00101, **fix)
    before = p.state(isr=0b01101, leader=0, request_isr=0b11101)
    after = p.step(before, "HandleAlterPartition")
    assert (after["c_isr"], after["c_elr"]) == (isr, elr)
    assert after["c_replicas"] == (0b11010 if done else 0b11111)
    assert after["c_leader"] == (3 if done else 0)


def test_a_removed_replica_deletes_its_log_when_its_metadata_says_so():
    """Once b1's metadata shows it is no longer a replica, it stops its replica and deletes the
    log (ReplicaManager.applyDelta's local deletes)."""
    p = Partition()
    before = p.state(isr=0b1110, leader=1, c_replicas=0b1110, c_adding=0, c_removing=0, rec_epoch=[1],
                     log=[1, 1, 1, 0], hwm=[1, 1, 1, 0])
    after = p.step(before, "SyncMetadata", 0)
    assert after["log"][0] == 0 and after["hwm"][0] == 0
    assert after["v_leader"][0] == 4 and after["v_epoch"][0] == 0


@pytest.mark.parametrize("protocol, switches, allowed", [
    ("kip-966", {}, False),
    ("kip-966", {"no_reassignment_min_isr": True}, True),
    ("kafka-4.2", {}, True),
])
def test_cancellation_below_min_isr_is_blocked_by_the_kip_rule(protocol, switches, allowed):
    """ISR b2+b4 (b4 being added), min ISR 2: cancelling leaves ISR b2 alone. The KIP refuses it
    ("This min ISR requirement is also enforced when the reassignment is canceled"); Kafka's
    cancelPartitionReassignment does it, and puts b4, no longer a replica, into the ELR."""
    p = Partition(protocol=protocol, **switches)
    before = p.state(isr=0b1010, leader=1)
    after = p.step(before, "CancelReassignment")
    if not allowed:
        assert after is None
        return
    assert after["c_replicas"] == 0b0111 and after["c_isr"] == 0b0010
    if protocol == "kip-966":
        assert after["c_elr"] == 0  # pruned to the original replicas
    else:
        assert after["c_elr"] == 0b1000  # b4, not a replica


def test_cancellation_at_min_isr_is_allowed_under_the_kip_rule():
    p = Partition()
    before = p.state(isr=0b1011, leader=1)
    after = p.step(before, "CancelReassignment")
    assert after["c_replicas"] == 0b0111 and after["c_isr"] == 0b0011 and after["c_elr"] == 0


# -- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("params, words", [
    (dict(brokers=3, replication_factor=4), ["--replication-factor 4", "--brokers 3", "lower --replication-factor"]),
    (dict(brokers=3, reassignments=1), ["--reassignments 1", "every one of the 3 brokers", "--replication-factor 2"]),
    (dict(brokers=4, replication_factor=3, reassignments=1, protocol="kafka-4.x", no_reassignment_min_isr=True),
     ["--no-reassignment-min-isr", "kafka-4.x"]),
    (dict(brokers=4, replication_factor=3, no_reassignment_min_isr=True), ["--reassignments 1"]),
    (dict(brokers=4, replication_factor=3, reassignments=1, fix_reassignment_min_isr=True),
     ["--fix-reassignment-min-isr", "kip-966 has already"]),
    (dict(brokers=4, replication_factor=3, protocol="kafka-4.3", fix_reassignment_prune_elr=True),
     ["--fix-reassignment-prune-elr", "--reassignments 1"]),
    (dict(brokers=4, replication_factor=3, reassignments=1, protocol="kafka-4.0", fix_reassignment_prune_elr=True),
     ["--fix-reassignment-prune-elr", "kafka-4.0"]),
    (dict(brokers=4, replication_factor=3, replication_factor_changes=True), ["--replication-factor-changes",
                                                                           "--reassignments 1"]),
    (dict(brokers=4, replication_factor=3, reassignments=1, replication_factor_changes=True),
     ["--replication-factor-changes", "--min-isr-changes 0"]),
    (dict(brokers=4, replication_factor=3, reassignments=1, min_isr_changes=0, replication_factor_changes=True,
          election="any"), ["--replication-factor-changes", "--election ordered"]),
])
def test_bad_input_says_what_is_wrong(params, words):
    with pytest.raises(UsageError) as err:
        KafkaReplication(KafkaParams(**params)).check_params()
    for w in words:
        assert w in str(err.value)


def test_bad_input_is_refused_before_exploring():
    out = subprocess.run([sys.executable, "-m", "kraftcheck", "check", "--brokers", "3", "--reassignments", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--replication-factor 2" in out.stderr
    assert "distinct" not in out.stdout


# -- symmetry -----------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", ["kip-966", "kafka-4.2"])
def test_symmetry_keeps_the_verdicts_with_replica_sets(protocol):
    """The replica set is permuted with the brokers, so --symmetry stays sound: the reduced run
    gives the verdict and the shortest violations of the full one (--election any both)."""
    params = dict(brokers=3, replication_factor=2, min_isr=2, reassignments=1, protocol=protocol, lossy_shutdowns=0,
                  fences=0, isr_shrinks=1, min_isr_changes=0, election="any")
    full = kraftcheck.check("kafka", keep_going=True, **params)
    reduced = kraftcheck.check("kafka", keep_going=True, symmetry=True, **params)
    assert reduced.status == full.status
    assert sorted((v.check, v.depth) for v in reduced.violations) == sorted((v.check, v.depth) for v in full.violations)
    assert reduced.distinct_states < full.distinct_states
    assert reduced.depth == full.depth


# -- what the KIP's min ISR rule protects (docs/findings.md F6) -----------------------------------

ONE_LOSSY = dict(brokers=3, replication_factor=2, min_isr=2, reassignments=1, lossy_shutdowns=1, fences=0,
                 isr_shrinks=1, min_isr_changes=0)


def test_with_the_kip_rule_one_lossy_shutdown_loses_nothing():
    assert run(**ONE_LOSSY) == ("holds", 311146, 1078580, 34)


def test_without_the_kip_rule_one_lossy_shutdown_loses_an_acknowledged_write():
    """The cancellation leaves b1 alone with the acknowledged r1; b1 loses it uncleanly, and
    Balanced recovery, with nobody in LastKnownELR to wait for, elects b2 (20 states)."""
    result = kraftcheck.check("kafka", invariants=["acked_writes_survive"], no_reassignment_min_isr=True, **ONE_LOSSY)
    assert result.status == "violated"
    assert [(v.check, v.depth) for v in result.violations] == [("acked_writes_survive", 20)]
    cancel = result.model.label_for("CancelReassignment")
    assert cancel in [step.label for step in result.violations[0].steps]


F6_STUCK_PATH = ["Produce(b=b1, acks=1)", "ProposeIsrShrink(b=b1, out=b2)", "HandleAlterPartition",
                 "ReceiveAlterPartitionResponse", "Reassign(target=b2+b3)", "SyncMetadata(b=b1)", "SyncMetadata(b=b3)",
                 "Fetch(f=b3)", "ProposeIsrExpand(b=b1, f=b3)", "HandleAlterPartition", "LossyShutdown(b=b1, keep=0)",
                 "CancelReassignment", "SessionTimeout(b=b1)"]


def test_kafka_cancellation_strands_the_partition_with_no_min_isr_change(tmp_path):
    """kafka-4.2: the cancellation leaves b3, no longer a replica, in the ELR; once b1 (the only
    replica with the data) is gone, nobody may lead: b3 is not a replica and blocks the
    last-known-leader election. With unclean election the partition recovers (F6)."""
    from kraftcheck import analyses
    model = Model(KafkaReplication(KafkaParams(protocol="kafka-4.2", **ONE_LOSSY)))
    report = analyses.availability_report(model, trace_dir=tmp_path)
    variants = {v["variant"]: v for v in report["variants"]}
    stuck = variants["unclean_election=false"]
    assert stuck["verdict"] == "can get stuck" and stuck["example"]["steps"] == F6_STUCK_PATH
    state = stuck["example"]["stuck_state"]
    assert state["c_isr"] == [] and state["c_elr"] == ["b1", "b3"] and state["c_replicas"] == ["b1", "b2"]
    assert variants["unclean_election=true"]["verdict"] == "can always recover"
