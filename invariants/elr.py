"""ELR invariants of KIP-966 ("ELR invariants" in the Proposed Changes section).

Claimed under the presets with ELR (kafka-4.x, kip-966); under kafka-3.5 there is no ELR and they
hold trivially. ``elr_members_hold_committed_log`` is about data and is claimed only while the
lossy unclean shutdowns so far are fewer than the smallest min.insync.replicas in force so far.
"""

from __future__ import annotations

from numba import njit

from kraftcheck.invariants.kafka_state import RUNNING, popcount


@njit(cache=True)
def running_members_hold(s, members, records):
    """Every running broker of the set ``members`` holds every record of the set ``records``."""
    for b in range(len(s.log)):
        if members >> b & 1 and s.b_state[b] == RUNNING and records & ~s.log[b]:
            return False
    return True


@njit(cache=True)
def durability_claimed(s):
    """The KIP's promise: at most minISR - 1 lossy unclean shutdowns, against history."""
    return s.lossy_shutdowns_used < s.fewest_min_isr


@njit(cache=True)
def elr_disjoint_from_isr(s):
    """KIP-966: "The member of ELR should not be in ISR." Claimed always."""
    return s.c_isr & s.c_elr == 0


@njit(cache=True)
def elr_members_hold_committed_log(s):
    """KIP-966: "The member of ELR should have the data at least to HWM." Every running ELR member
    holds every committed record (one that was below an acting leader's HWM). Claimed while the
    lossy shutdowns so far are fewer than the smallest min ISR so far. Offline members are not
    checked: a member that lost data stays in the ELR until its registration reveals the unclean
    shutdown, as the KIP intends."""
    if not durability_claimed(s):
        return True
    return running_members_hold(s, s.c_elr, s.committed)


@njit(cache=True)
def elr_only_below_min_isr(s):
    """KIP-966: "If ELR is not empty, the ISR is under min ISR." Against the min ISR the controller
    has now. Claimed always."""
    return s.c_elr == 0 or popcount(s.c_isr) < s.c_min_isr


@njit(cache=True)
def electable_replicas_cover_min_isr(s):
    """KIP-966: "ELR + ISR size will not be dropped below the min ISR unless the controller
    discovers an ELR member has an unclean shutdown." |ISR ∪ ELR| is at least the smallest min ISR
    in force so far. Claimed (ELR presets) until a registration has revealed the unclean shutdown
    of an ISR or ELR member."""
    if not s.k_elr or s.unclean_removed:
        return True
    # only replicas are electable (a broker a reassignment removed is not, even if the ELR names it)
    return popcount((s.c_isr | s.c_elr) & s.c_replicas) >= s.fewest_min_isr


@njit(cache=True)
def partition_state_within_replicas(s):
    """KIP-966 on reassignment: "upon completion, the ELR only contains replicas in the final
    replica set". The leader, the ISR, the ELR, the LastKnownELR and the last known leader name
    only replicas of the partition (during a reassignment: the target set and the replicas being
    removed). Claimed always; with every broker a replica it holds trivially."""
    n = len(s.log)
    if (s.c_isr | s.c_elr | s.c_lkelr) & ~s.c_replicas:
        return False
    if s.c_leader < n and not s.c_replicas >> s.c_leader & 1:
        return False
    return s.c_last_leader >= n or (s.c_replicas >> s.c_last_leader & 1) == 1
