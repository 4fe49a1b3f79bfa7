"""The KRaft controller: ISR/ELR updates, leader election, AlterPartition handling, fencing, min ISR.

Every controller action builds the successor in ``t`` in the order the controller's
``PartitionChangeBuilder`` does: the new ISR (with the ELR rule), then the leader, then the
partition-epoch bump if the partition record changed. The helpers below read and write ``t`` so
they compose inside one action (one controller event = one metadata record = one step).
"""

from __future__ import annotations

from numba import njit

from kraftcheck.specs.kafka.state import (AP_ACCEPTED, AP_REJECTED, AP_REQUEST, FALLBACK_LAST_LEADER, FALLBACK_UNCLEAN,
                               MIN_ISR_KAFKA, MIN_ISR_KIP, RUNNING, normalize_epochs, popcount)


@njit(cache=True)
def update_isr(t, target, unclean):
    """Install ISR ``target`` with the ELR rule of KIP-966 (rule 2 of PROTOCOL.md).

    ``unclean`` are replicas just found to have shut down uncleanly: they leave the ELR (and, in
    kip-966, go to LastKnownELR). Without ELR (kafka-3.5) the last ISR member is never removed.
    """
    old_isr = t.c_isr
    if not t.k_elr:
        if target != 0:
            t.c_isr = target
        return
    if popcount(target) >= t.c_min_isr:
        t.c_elr = 0
        t.c_lkelr = 0
    else:
        removed = 0 if t.k_keep_unclean_in_elr else unclean
        old_elr = t.c_elr
        new_elr = (old_elr | old_isr) & ~target & ~removed
        t.c_elr = new_elr
        if t.k_lkelr:
            t.c_lkelr = (t.c_lkelr | (old_elr & removed)) & ~target & ~new_elr
    t.c_isr = target


@njit(cache=True)
def unfenced(t, b):
    return not (t.c_fenced >> b & 1)


@njit(cache=True)
def clear_recovery(t):
    t.rec_replied = 0
    for b in range(len(t.log)):
        t.rep_epoch[b] = 0
        t.rep_leo[b] = 0


@njit(cache=True)
def set_leader(t, new):
    """Change the leader (bumping the leader epoch) and keep the last known leader."""
    n = len(t.log)
    old = t.c_leader
    if new == old:
        return
    t.c_leader = new
    t.c_epoch = t.c_epoch + 1
    if t.k_fallback == FALLBACK_LAST_LEADER:
        if new == n:
            t.c_last_leader = old
        else:
            t.c_last_leader = n
    if new != n:
        clear_recovery(t)


@njit(cache=True)
def elect(t):
    """Keep the leader if still acceptable, else elect one in replica order (PROTOCOL rule 7).

    ISR member; else unfenced ELR member (it becomes the sole ISR member); else the preset's
    fallback: the last known leader once unfenced (kafka-4.x, only when the ELR is empty), or an
    unclean election of any unfenced replica (``unclean.leader.election.enable``). KIP-966's
    unclean recovery is not a fallback here: it runs as its own actions (recovery.py).
    """
    n = len(t.log)
    cur = t.c_leader
    if cur < n and (t.c_isr >> cur & 1) and unfenced(t, cur):
        return
    for x in range(n):
        if (t.c_isr >> x & 1) and unfenced(t, x):
            set_leader(t, x)
            return
    if t.k_elr:
        for x in range(n):
            if (t.c_elr >> x & 1) and unfenced(t, x):
                update_isr(t, 1 << x, 0)
                set_leader(t, x)
                return
    if t.k_fallback == FALLBACK_LAST_LEADER:
        last = t.c_last_leader
        if t.c_elr == 0 and last < n and unfenced(t, last):
            update_isr(t, 1 << last, 0)
            set_leader(t, last)
            return
    if t.k_fallback == FALLBACK_UNCLEAN:
        for x in range(n):
            if unfenced(t, x):
                t.c_isr = 1 << x
                t.c_elr = 0
                t.c_lkelr = 0
                t.c_recovering = 1
                set_leader(t, x)
                return
    set_leader(t, n)


@njit(cache=True)
def finish_partition_change(s, t):
    """Bump the partition epoch if the partition record changed: every partition epoch held
    elsewhere (leader views, the AlterPartition in flight) stops being current."""
    if (s.c_isr != t.c_isr or s.c_elr != t.c_elr or s.c_lkelr != t.c_lkelr or s.c_leader != t.c_leader
            or s.c_epoch != t.c_epoch or s.c_recovering != t.c_recovering):
        write_partition_record(t)


@njit(cache=True)
def write_partition_record(t):
    """A PartitionChangeRecord bumps the partition epoch (with --fix-min-isr-in-partition-state it
    also carries the min ISR in force)."""
    for b in range(len(t.log)):
        t.v_pe_ok[b] = 0
    t.ap_pe_ok = 0
    if t.k_fix_min_isr_in_partition:
        t.c_part_min_isr = t.c_min_isr


@njit(cache=True)
def remove_from_isr(t, b, unclean):
    """Take ``b`` out of the ISR (and, when ``unclean``, out of the ELR) and re-elect."""
    bit = 1 << b
    if unclean:
        if (t.c_isr | t.c_elr) & bit:
            update_isr(t, t.c_isr & ~bit, bit)
    elif t.c_isr & bit:
        update_isr(t, t.c_isr & ~bit, 0)
    elect(t)


# ----------------------------------------------------------------------------------------------
# actions


@njit(cache=True)
def fence_broker(s, t, b):
    """The controller fences ``b`` and removes it from the ISR, as one partition change. Shared by
    a fencing fault and a session timeout."""
    t.c_fenced = s.c_fenced | (1 << b)
    remove_from_isr(t, b, 0)
    finish_partition_change(s, t)
    normalize_epochs(t)


@njit(cache=True)
def fence(s, t, b):
    """The controller fences running broker ``b`` (missed heartbeats: a network partition).

    Fault, bounded by --fences. ``b`` keeps running: it can still fetch and, as a zombie leader,
    append and advance its HWM until its metadata view moves on.
    """
    if s.fences_used >= s.k_max_fences or s.b_state[b] != RUNNING or not unfenced(s, b):
        return False
    t.fences_used = s.fences_used + 1
    fence_broker(s, t, b)
    return True


@njit(cache=True)
def session_timeout(s, t, b):
    """The controller fences a broker that crashed (its heartbeats stopped). Not a fault."""
    if s.b_state[b] == RUNNING or not unfenced(s, b):
        return False
    fence_broker(s, t, b)
    return True


@njit(cache=True)
def unfence(s, t, b):
    """A registered, running broker heartbeats again and is unfenced; a leaderless partition may
    elect it (KIP-966: an unfenced ELR member of an empty ISR becomes leader)."""
    if s.b_state[b] != RUNNING or unfenced(s, b):
        return False
    t.c_fenced = s.c_fenced & ~(1 << b)
    elect(t)
    finish_partition_change(s, t)
    normalize_epochs(t)
    return True


@njit(cache=True)
def handle_alter_partition(s, t):
    """The controller handles the AlterPartition request in flight (PROTOCOL rule 5).

    Rejected when its leader epoch is stale or the sender is not the leader, when its partition
    epoch is stale (unless --no-partition-epoch-check), when a proposed member is fenced, or has
    a stale broker epoch (KIP-903, unless --no-broker-epoch-check), or when it expands the ISR of
    a partition still RECOVERING. Accepted: the ISR is installed with the ELR rule.
    """
    if s.ap_state != AP_REQUEST:
        return False
    ok = s.ap_epoch == s.c_epoch and s.ap_from == s.c_leader
    if s.k_pe_check and not s.ap_pe_ok:
        ok = False
    if s.ap_isr & s.c_fenced:
        ok = False
    if s.k_epoch_check and s.ap_isr & s.ap_stale:
        ok = False
    if s.c_recovering and not s.ap_recovered and popcount(s.ap_isr) > 1:
        ok = False
    if not ok:
        t.ap_state = AP_REJECTED
        t.ap_epoch = 0  # a response carries no epoch the sender checks (ap_live decides)
        normalize_epochs(t)
        return True
    update_isr(t, s.ap_isr, 0)
    if s.ap_recovered:
        t.c_recovering = 0
    t.isr_stale = (s.isr_stale | (s.ap_isr & s.ap_stale)) & t.c_isr
    elect(t)
    finish_partition_change(s, t)
    t.ap_state = AP_ACCEPTED
    t.ap_epoch = 0
    t.ap_pe_ok = 1  # the response carries the partition epoch just written
    if s.k_fix_min_isr_in_partition:
        t.ap_min_isr = s.c_min_isr
    normalize_epochs(t)
    return True


@njit(cache=True)
def change_min_isr(s, t, value_index):
    """An operator sets min.insync.replicas to ``value_index + 1`` (PROTOCOL rule 8).

    ELR policy: kip clears ELR and LastKnownELR when the new value is at or below the ISR size;
    kafka (4.x as shipped) clears them on any update, even to the same value; keep-elr never
    clears them. Brokers learn the new value later, through metadata. Bounded by --min-isr-changes.
    With --fix-epoch-bump-on-min-isr-change the controller writes a partition record even when the
    partition did not change, so AlterPartitions built before the change carry a stale partition
    epoch and are rejected.
    """
    value = value_index + 1
    if s.min_isr_changes_used >= s.k_max_min_isr_changes:
        return False
    if value == s.c_min_isr and s.k_min_isr_policy != MIN_ISR_KAFKA:
        return False
    t.min_isr_changes_used = s.min_isr_changes_used + 1
    t.c_min_isr = value
    if value < s.fewest_min_isr:
        t.fewest_min_isr = value
    if s.k_elr:
        clear = False
        if s.k_min_isr_policy == MIN_ISR_KAFKA:
            clear = True
        elif s.k_min_isr_policy == MIN_ISR_KIP and value <= popcount(s.c_isr):
            clear = True
        if clear:
            t.c_elr = 0
            t.c_lkelr = 0
    if s.k_fix_epoch_bump:
        write_partition_record(t)
    else:
        finish_partition_change(s, t)
    return True


@njit(cache=True)
def preferred_election(s, t):
    """auto.leader.rebalance.enable: the controller moves leadership back to the preferred replica
    (the first in assignment order, b1) when it is an unfenced ISR member and not the leader
    (``PartitionChangeBuilder.electPreferredLeader``). No failure is involved. Bounded by
    --preferred-elections."""
    if s.preferred_elections_used >= s.k_max_preferred_elections:
        return False
    if s.c_leader == 0 or not (s.c_isr & 1) or not unfenced(s, 0):
        return False
    t.preferred_elections_used = s.preferred_elections_used + 1
    set_leader(t, 0)
    finish_partition_change(s, t)
    normalize_epochs(t)
    return True
