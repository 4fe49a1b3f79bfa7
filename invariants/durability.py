"""Durability and consistency: committed and acknowledged data survive, reads are repeatable.

All but ``isr_members_have_current_broker_epoch`` are claimed only while the lossy unclean
shutdowns so far are fewer than the smallest min.insync.replicas in force so far (KIP-966:
"providing MinISR-1 tolerance to data loss unclean shutdown events"); they speak of running
brokers, as a broker that lost data is only known to have done so once it registers again.
"""

from __future__ import annotations

from numba import njit

from kraftcheck.invariants.elr import durability_claimed, running_members_hold
from kraftcheck.invariants.kafka_state import RUNNING, acting_leader, records_below


@njit(cache=True)
def running_leader_holds(s, records):
    """The controller's leader, if there is one and it is running, holds every record of ``records``."""
    lead = s.c_leader
    if lead >= len(s.log) or s.b_state[lead] != RUNNING:
        return True
    return records & ~s.log[lead] == 0


@njit(cache=True)
def isr_members_hold_committed_log(s):
    """KIP-966: the ISR "acts as a quorum for replication. The High Watermark is utilized to
    indicate the lower bound of the log offset that all ISR replicas have replicated." Every
    running member of the controller's ISR holds every committed record."""
    if not durability_claimed(s):
        return True
    return running_members_hold(s, s.c_isr, s.committed)


@njit(cache=True)
def leader_holds_committed_log(s):
    """KIP-966: "Our ultimate goal is to elect a leader without data loss or HWM moving backward
    when we only have min ISR - 1 unclean shutdowns." The controller's leader, when running, holds
    every committed record."""
    if not durability_claimed(s):
        return True
    return running_leader_holds(s, s.committed)


@njit(cache=True)
def committed_logs_match(s):
    """Every running broker's log below its HWM holds only committed records, and any two running
    brokers agree below the smaller of their HWMs (what any replica exposes as committed is the
    same history)."""
    if not durability_claimed(s):
        return True
    n = len(s.log)
    for a in range(n):
        if s.b_state[a] != RUNNING:
            continue
        mine = records_below(s, s.log[a], s.hwm[a])
        if mine & ~s.committed:
            return False
        for b in range(a + 1, n):
            if s.b_state[b] != RUNNING:
                continue
            k = min(s.hwm[a], s.hwm[b])
            if records_below(s, s.log[a], k) != records_below(s, s.log[b], k):
                return False
    return True


@njit(cache=True)
def acked_writes_survive(s):
    """KIP-966: "with at most minISR - 1 lossy unclean shutdowns, no acknowledged (acks=all) write
    is lost" (PROTOCOL rule 9). The controller's leader, when running, holds every acknowledged
    acks=all record (a leader without it makes every replica truncate it)."""
    if not durability_claimed(s):
        return True
    return acked_writes_held(s)


@njit(cache=True)
def acked_writes_held(s):
    """The body of ``acked_writes_survive`` without its claim condition: the running controller's
    leader holds every acknowledged acks=all record, whatever the faults so far. Not a check of the
    model (it is not in ``kafka_invariants``); tests use it to show that the KIP's bound is tight
    (with minISR lossy shutdowns an acknowledged write can be lost)."""
    return running_leader_holds(s, s.acked)


@njit(cache=True)
def reads_are_repeatable(s):
    """KIP-966 motivation: "This can cause HWM to move backward and impacts the consumers." What a
    consumer read is never undone: no two different records were ever committed at the same
    offset, and the leader acting in the controller's current leader epoch still holds every
    committed record (its HWM has not moved back below what consumers read)."""
    if not durability_claimed(s):
        return True
    seen = 0
    for r in range(len(s.rec_epoch)):
        if s.committed >> r & 1:
            bit = 1 << s.rec_offset[r]
            if seen & bit:
                return False
            seen |= bit
    lead = s.c_leader
    if lead < len(s.log) and acting_leader(s, lead) and s.v_epoch[lead] == s.c_epoch:
        if s.committed & ~s.log[lead]:
            return False
    return True


@njit(cache=True)
def isr_members_have_current_broker_epoch(s):
    """KIP-903: "A replica with a stale broker epoch is not eligible to join the ISR." No ISR member
    was admitted (or kept) with a broker epoch older than its current registration. Claimed always."""
    return s.isr_stale & s.c_isr == 0
