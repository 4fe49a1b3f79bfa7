"""Controller failover as a fault in the Kafka model (issue 30 item 3; docs/model.md section 2c).

``--controller-failovers K``: the controller commits an AlterPartition and fails over before the
response reaches the leader, which retries the same request, with the epochs it was built with,
against the new controller. Pinned counts of small configurations (any change to the step moves
them), the counts without the fault (it must add nothing when off), the shortest trace under
kip-966, and hand-built states run through the model's own actions.
"""

from __future__ import annotations

import pytest

import kraftcheck
from kraftcheck.checker.model import Model
from kraftcheck.specs.kafka.params import KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication
from kraftcheck.specs.kafka.state import AP_AWAITING_METADATA, AP_NONE, AP_REJECTED, AP_REQUEST, AP_UNSETTLED

ONE_SHRINK = dict(lossy_shutdowns=0, fences=0, isr_shrinks=1, min_isr_changes=0)


def run(**params):
    result = kraftcheck.check("kafka", **params)
    return result.status, result.distinct_states, result.states_generated, result.depth


# -- pinned counts ------------------------------------------------------------------------------

def test_the_fault_off_is_the_model_before_it():
    """--controller-failovers 0 (the default) leaves the space as it was: the counts are the ones
    pinned before the fault existed (test_kafka_model: one ISR shrink, 990 states)."""
    assert run(**ONE_SHRINK) == ("holds", 990, 2735, 14)
    assert run(**ONE_SHRINK, controller_failovers=0) == ("holds", 990, 2735, 14)


@pytest.mark.parametrize("protocol, failovers, counts", [
    ("kafka-4.x", 1, ("holds", 2822, 8206, 16)),
    ("kafka-4.x", 2, ("holds", 3788, 10951, 21)),
    # the same space: without a fence or a shutdown ELR never matters here
    ("kafka-4.0", 1, ("holds", 2822, 8206, 16)),
])
def test_failovers_under_kafka_presets_hold(protocol, failovers, counts):
    """3 brokers, min ISR 2, one shrink: the retry of the committed change is answered
    INVALID_UPDATE_VERSION, which Kafka's leader does not revert on
    (Partition.handleAlterPartitionError): it keeps the pending ISR until its metadata brings the
    committed change."""
    assert run(protocol=protocol, controller_failovers=failovers, **ONE_SHRINK) == counts


def test_kafka_3_5_fails_as_it_does_without_the_fault():
    """kafka-3.5's HWM rule (any) breaks the same property in the same 6 states with or without a
    failover: the fault adds no violation of its own there."""
    for failovers in (0, 1):
        result = kraftcheck.check("kafka", protocol="kafka-3.5", controller_failovers=failovers, **ONE_SHRINK)
        assert [(v.check, v.depth) for v in result.violations] == [("hwm_advances_only_with_min_isr", 6)]


def test_one_failover_under_kip_966_reverts_a_committed_expansion():
    """The kip-966 model reverts its pending ISR on every rejection (docs/model.md 2a row 7, off
    under kip-966): the retry's INVALID_UPDATE_VERSION makes the leader drop an expansion the
    controller committed, and its maximal ISR no longer covers the controller's ISR."""
    result = kraftcheck.check("kafka", controller_failovers=1, **ONE_SHRINK)
    assert result.status == "violated"
    assert [(v.check, v.depth) for v in result.violations] == [("leader_maximal_isr_covers_electable", 9)]
    labels = result.model.labels
    assert [str(labels[step.label]) for step in result.violations[0].steps[1:]] == [
        "ProposeIsrShrink(b=b1, out=b2)", "Fetch(f=b2)", "HandleAlterPartition", "ReceiveAlterPartitionResponse",
        "ProposeIsrExpand(b=b1, f=b2)", "HandleAlterPartitionThenFailOver", "HandleAlterPartition",
        "ReceiveAlterPartitionResponse"]


# -- hand-built states --------------------------------------------------------------------------

class Partition:
    """3 brokers, min ISR 2: leader b1 with committed ISR b1+b3 proposes adding b2."""

    def __init__(self, protocol="kafka-4.x", **params):
        bounds = dict(ONE_SHRINK, controller_failovers=1)
        bounds.update(params)
        self.model = Model(KafkaReplication(KafkaParams(protocol=protocol, **bounds)))

    def expansion_in_flight(self, **extra):
        layout = self.model.layout
        values = layout.values(self.model.initial[0])
        values["c_isr"] = 0b101
        values["v_isr"][0] = 0b101
        values["f_leo"][0][1] = 1
        values.update(ap_state=AP_REQUEST, ap_from=0, ap_isr=0b111, ap_epoch=values["c_epoch"], ap_pe_ok=1, ap_live=1)
        values.update(extra)
        return layout.flat_from_values(values)

    def step(self, flat, action, *values):
        after = self.model.step(flat, self.model.label_for(action, values))
        return None if after is None else self.model.layout.values(after)

    def flat(self, values):
        return self.model.layout.flat_from_values(values)


def test_the_committed_change_is_retried_with_the_epochs_it_was_sent_with():
    """The controller installs ISR b1+b2+b3 (a record: every partition epoch held elsewhere is
    stale); the request stays in flight as the retry, with its leader epoch and its partition
    epoch, now stale."""
    p = Partition()
    before = p.model.layout.values(p.expansion_in_flight())
    after = p.step(p.expansion_in_flight(), "HandleAlterPartitionThenFailOver")
    assert after["c_isr"] == 0b111
    assert after["ap_state"] == AP_REQUEST and after["ap_isr"] == 0b111 and after["ap_live"] == 1
    assert after["ap_epoch"] == before["ap_epoch"] == after["c_epoch"]
    assert after["ap_pe_ok"] == 0
    assert after["v_pe_ok"] == [0, 0, 0]
    assert after["controller_failovers_used"] == 1


def test_a_rejected_request_is_no_failover():
    """A request the controller rejects writes nothing; losing its answer and retrying is the same
    request handled again, so the fault is not enabled for it (here b2 is fenced: INELIGIBLE_REPLICA)."""
    p = Partition()
    assert p.step(p.expansion_in_flight(c_fenced=0b010), "HandleAlterPartitionThenFailOver") is None


@pytest.mark.parametrize("protocol, answer", [("kafka-4.x", AP_UNSETTLED), ("kafka-3.5", AP_UNSETTLED),
                                              ("kip-966", AP_REJECTED)])
def test_the_retry_meets_a_partition_epoch_that_moved_past_it(protocol, answer):
    """ReplicationControlManager.validateAlterPartitionData: the retry's partition epoch is below
    the controller's, INVALID_UPDATE_VERSION; the ISR stays as committed. Kafka's leader keeps its
    pending ISR (unsettled, then awaiting metadata, the pending ISR in its maximal ISR) and learns
    the committed ISR from metadata; the kip-966 model reverts."""
    p = Partition(protocol=protocol)
    retry = p.step(p.expansion_in_flight(), "HandleAlterPartitionThenFailOver")
    answered = p.step(p.flat(retry), "HandleAlterPartition")
    assert answered["c_isr"] == 0b111
    assert answered["ap_state"] == answer
    received = p.step(p.flat(answered), "ReceiveAlterPartitionResponse")
    if answer == AP_REJECTED:
        assert received["ap_state"] == AP_NONE and received["v_isr"][0] == 0b101
        return
    assert received["ap_state"] == AP_AWAITING_METADATA and received["ap_isr"] == 0b111
    synced = p.step(p.flat(received), "SyncMetadata", 0)
    assert synced["v_isr"][0] == 0b111 and synced["v_pe_ok"][0] == 1 and synced["ap_state"] == AP_NONE


def test_the_option_is_on_the_command_line():
    from click.testing import CliRunner

    from kraftcheck.cli.main import cli
    out = CliRunner().invoke(cli, ["check", "--help"])
    assert "--controller-failovers" in out.output
