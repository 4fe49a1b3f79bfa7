"""Controlled shutdown in Kafka's two steps (issue 30 item 3; docs/model.md section 2d).

``--controlled-shutdown-in-two-steps``: a leader that asks to shut down is first put in controlled
shutdown (out of the ISR, leadership moved, still running, not active), then let go (fenced and
stopped cleanly); a broker that leads nothing is let go at once, as before. Pinned counts of small
configurations, the switch off leaving the space as it was, hand-built states through the model's
own actions, and the input error.
"""

from __future__ import annotations

import pytest

import kraftcheck
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.model import Model
from kraftcheck.specs.kafka.params import KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication
from kraftcheck.specs.kafka.state import AP_REJECTED, AP_REQUEST, OFFLINE_CLEAN, RUNNING

ONE_CLEAN = dict(lossy_shutdowns=0, fences=0, isr_shrinks=0, min_isr_changes=0, clean_shutdowns=1)


def run(**params):
    result = kraftcheck.check("kafka", **params)
    return result.status, result.distinct_states, result.states_generated, result.depth


# -- pinned counts ------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol, one_step, two_steps", [
    ("kip-966", ("holds", 4964, 15393, 19), ("holds", 7296, 23456, 22)),
    ("kafka-4.x", ("holds", 3233, 8674, 19), ("holds", 3804, 10319, 21)),
    ("kafka-3.5", ("holds", 4717, 12493, 19), ("holds", 5288, 14138, 21)),
])
def test_one_controlled_shutdown(protocol, one_step, two_steps):
    """3 brokers, min ISR 2, one controlled shutdown and no other fault: the one-step model (the
    switch off: the space as before the switch existed) and Kafka's two steps. The second step
    waits for the active brokers' metadata (lowestActiveOffset): 8,433 / 8,375 states before that
    wait was modelled, 7,296 / 7,238 with it (the interleavings where the leader was let go before
    a follower replayed the controlled-shutdown record are gone). The kafka-* leader does not
    propose a follower its metadata shows fenced or in controlled shutdown (docs/model.md section
    2f): kip-966 keeps 4,964 / 7,296, while kafka-4.x has 3,233 / 3,804 and kafka-3.5 4,717 /
    5,288 (before that rule: 4,964 / 7,296 and 4,906 / 7,238): the restarted broker, fenced until
    it is unfenced, and the one in controlled shutdown are no longer proposed and rejected."""
    assert run(protocol=protocol, **ONE_CLEAN) == one_step
    assert run(protocol=protocol, controlled_shutdown_in_two_steps=True, **ONE_CLEAN) == two_steps


# -- hand-built states --------------------------------------------------------------------------

class Cluster:
    """3 brokers, min ISR 2, every broker in the ISR, b1 leads."""

    def __init__(self, protocol="kafka-4.x", **params):
        bounds = dict(ONE_CLEAN, fences=1, controlled_shutdown_in_two_steps=True)
        bounds.update(params)
        self.model = Model(KafkaReplication(KafkaParams(protocol=protocol, **bounds)))
        self.initial = self.model.initial[0]

    def step(self, flat, action, *values):
        after = self.model.step(flat, self.model.label_for(action, values))
        return None if after is None else self.model.layout.values(after)

    def flat(self, values):
        return self.model.layout.flat_from_values(values)


def test_a_leader_takes_two_steps_and_a_follower_one():
    c = Cluster()
    assert c.step(c.initial, "CleanShutdown", 0) is None  # b1 leads: not SHUTDOWN_NOW
    assert c.step(c.initial, "CompleteControlledShutdown", 0) is None  # not in controlled shutdown
    assert c.step(c.initial, "BeginControlledShutdown", 1) is None  # b2 leads nothing
    follower = c.step(c.initial, "CleanShutdown", 1)
    assert follower["b_state"][1] == OFFLINE_CLEAN and follower["c_fenced"] == 0b010


def test_in_controlled_shutdown_the_leader_runs_out_of_the_isr_and_is_not_active():
    """handleBrokerInControlledShutdown: ISR b2+b3, leader b2, b1 running and unfenced but in
    controlled shutdown; it cannot be unfenced into service, re-elected, or added to the ISR
    (INELIGIBLE_REPLICA "shutting down")."""
    c = Cluster()
    begun = c.step(c.initial, "BeginControlledShutdown", 0)
    assert begun["c_isr"] == 0b110 and begun["c_leader"] == 1 and begun["c_shutting_down"] == 0b001
    assert begun["c_fenced"] == 0 and begun["b_state"][0] == RUNNING
    assert begun["clean_shutdowns_used"] == 1
    # b2 (leader) proposes adding b1 back: rejected, and the leader reverts
    begun.update(ap_state=AP_REQUEST, ap_from=1, ap_isr=0b111, ap_epoch=begun["c_epoch"], ap_pe_ok=1, ap_live=1,
                 v_leader=[1, 1, 1], v_epoch=[begun["c_epoch"]] * 3)
    answered = c.step(c.flat(begun), "HandleAlterPartition")
    assert answered["ap_state"] == AP_REJECTED and answered["c_isr"] == 0b110


def test_the_leader_is_let_go_once_every_active_broker_replayed_the_record():
    """calculateNextBrokerState (CONTROLLED_SHUTDOWN, no leaderships): SHUTDOWN_NOW only when
    ``controlledShutdownOffset <= lowestActiveOffset``, the lowest metadata offset of the brokers
    still active (unfenced, not shutting down); then handleBrokerFenced and a clean stop."""
    c = Cluster()
    begun = c.step(c.initial, "BeginControlledShutdown", 0)
    assert begun["c_cs_waiting"][0] == 0b110  # b2 and b3 were active and have not replayed it
    assert c.step(c.flat(begun), "CompleteControlledShutdown", 0) is None
    b2_caught_up = c.step(c.flat(begun), "SyncMetadata", 1)
    assert b2_caught_up["c_cs_waiting"][0] == 0b100
    assert c.step(c.flat(b2_caught_up), "CompleteControlledShutdown", 0) is None
    both = c.step(c.flat(b2_caught_up), "SyncMetadata", 2)
    assert both["c_cs_waiting"][0] == 0
    done = c.step(c.flat(both), "CompleteControlledShutdown", 0)
    assert done["c_shutting_down"] == 0 and done["c_fenced"] == 0b001 and done["b_state"][0] == OFFLINE_CLEAN
    assert done["c_cs_waiting"][0] == 0
    # a broker no longer active is not waited for: fenced, b3 leaves the active set
    b3_fenced = c.step(c.flat(b2_caught_up), "Fence", 2)
    assert c.step(c.flat(b3_fenced), "CompleteControlledShutdown", 0)["b_state"][0] == OFFLINE_CLEAN


def test_a_broker_in_controlled_shutdown_is_never_elected():
    """With min ISR 3 b1's removal leaves ISR b2+b3 below it, b1 clean in the ELR. Fencing b2 and
    b3 leaves ISR empty and only b1 in the ELR, unfenced but in controlled shutdown: no leader
    (isAcceptableLeader is isActive)."""
    c = Cluster(min_isr=3, fences=2)
    begun = c.step(c.initial, "BeginControlledShutdown", 0)
    assert begun["c_elr"] == 0b001 and begun["c_isr"] == 0b110
    once = c.step(c.flat(begun), "Fence", 1)
    twice = c.step(c.flat(once), "Fence", 2)
    assert twice["c_isr"] == 0 and twice["c_elr"] == 0b111 and twice["c_leader"] == 3  # none


def test_a_fenced_broker_in_controlled_shutdown_is_let_go_not_unfenced():
    """calculateNextBrokerState: FENCED with wantShutDown is SHUTDOWN_NOW at once (no wait for the
    others' metadata: a fenced broker's controlledShutdownOffset is reset), never UNFENCED."""
    c = Cluster()
    begun = c.step(c.initial, "BeginControlledShutdown", 0)
    assert begun["c_cs_waiting"][0] == 0b110
    fenced = c.step(c.flat(begun), "Fence", 0)
    assert fenced["c_fenced"] == 0b001 and fenced["c_shutting_down"] == 0b001
    assert c.step(c.flat(fenced), "Unfence", 0) is None
    done = c.step(c.flat(fenced), "CompleteControlledShutdown", 0)
    assert done["b_state"][0] == OFFLINE_CLEAN and done["c_shutting_down"] == 0


def test_the_switch_needs_a_controlled_shutdown():
    with pytest.raises(UsageError) as err:
        KafkaReplication(KafkaParams(controlled_shutdown_in_two_steps=True)).check_params()
    assert "--clean-shutdowns 1" in str(err.value)


def test_symmetry_permutes_the_brokers_in_controlled_shutdown():
    """--symmetry (under --election any) permutes c_shutting_down with the brokers: the same
    verdict over fewer states than the unreduced space."""
    params = dict(ONE_CLEAN, controlled_shutdown_in_two_steps=True, election="any", protocol="kafka-4.x")
    full = kraftcheck.check("kafka", **params)
    reduced = kraftcheck.check("kafka", symmetry=True, **params)
    assert full.status == reduced.status == "holds"
    assert reduced.distinct_states < full.distinct_states
