"""High-watermark rules of KIP-966 ("Additional High Watermark advancement requirement")."""

from __future__ import annotations

from numba import njit

from kraftcheck.invariants.kafka_state import acting_leader, hwm_may_advance, maximal_isr, popcount


@njit(cache=True)
def hwm_advances_only_with_min_isr(s, t):
    """KIP-966: "We propose to enforce that High Watermark can only advance if the ISR size is
    larger or equal to min.insync.replicas" and "The ISR membership refers to the latest ISR
    membership persisted by the controller, not the maximal ISR". On every step where an acting
    leader's HWM grows, the ISR it knows to be committed has at least as many members as the
    min.insync.replicas in force at the controller. Claimed always (a transition property).
    The ISR is the one after the step: under --replay-known-changes or --hwm-under-partition-lock
    a step that installs an ISR (an AlterPartition response, a metadata publish) also advances
    the HWM with it, as Kafka's ``maybeIncrementLeaderHW`` at the end of those calls does; every
    other step that advances a leader's HWM leaves its ISR as it was."""
    for b in range(len(s.log)):
        if acting_leader(s, b) and acting_leader(t, b) and t.hwm[b] > s.hwm[b]:
            if popcount(t.v_isr[b]) < t.c_min_isr:
                return False
    return True


@njit(cache=True)
def leader_maximal_isr_covers_electable(s):
    """KIP-966's example: "in the new protocol we wait until the controller updates ISR=[0,2] to
    avoid advancing HWM beyond what ELR=[1] has." Whenever the controller's leader, acting in the
    current leader epoch, may advance its HWM, its maximal ISR (over which the HWM is the minimum
    log end offset) contains every ISR and ELR member. Claimed always."""
    lead = s.c_leader
    if lead >= len(s.log) or not acting_leader(s, lead) or s.v_epoch[lead] != s.c_epoch:
        return True
    if not hwm_may_advance(s, lead):
        return True
    # only replicas are electable (a broker a reassignment removed is not, even if the ELR names it)
    return (s.c_isr | s.c_elr) & s.c_replicas & ~maximal_isr(s, lead) == 0
