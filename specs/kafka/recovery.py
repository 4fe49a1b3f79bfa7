"""KIP-966 unclean recovery (the "Unclean Recovery Manager"), for the kip-966 preset.

When the partition is leaderless and no ISR or ELR member can be elected, the controller queries
the replicas (GetReplicaLogInfo). A reply carries the replica's last written leader epoch, log end
offset, broker epoch and the leader epoch of its metadata cache; the controller rejects it if the
leader epoch is stale (the broker epoch is current by construction: a reply is accepted in the same
step it is sent, and a later registration of the replier drops it). The controller elects among
unfenced repliers the highest last epoch, then the longest log, when the strategy allows:
Aggressive after any reply (even with fenced ELR members); Balanced only with an empty ELR and once
every LastKnownELR member is unfenced and has replied (or after K replies with --balanced-replies).
"""

from __future__ import annotations

from numba import njit

from kraftcheck.specs.kafka.controller import chosen, clear_recovery, finish_partition_change, may_choose, set_leader
from kraftcheck.specs.kafka.state import RECOVERY_AGGRESSIVE, RECOVERY_OFF, RUNNING, last_epoch, normalize_epochs, popcount


@njit(cache=True)
def recovery_in_progress(s):
    if s.k_recovery == RECOVERY_OFF or s.c_leader != len(s.log):
        return False
    return s.k_recovery == RECOVERY_AGGRESSIVE or s.c_elr == 0


@njit(cache=True)
def recovery_reply(s, t, b):
    """Running broker ``b`` answers GetReplicaLogInfo; accepted if its metadata leader epoch is current."""
    if (not recovery_in_progress(s) or s.b_state[b] != RUNNING or s.rec_replied >> b & 1
            or not s.c_replicas >> b & 1):
        return False
    if s.v_epoch[b] != s.c_epoch:
        return False
    t.rec_replied = s.rec_replied | (1 << b)
    t.rep_epoch[b] = last_epoch(s, s.log[b])
    t.rep_leo[b] = popcount(s.log[b])
    return True


@njit(cache=True)
def best_repliers(s, candidates):
    """The repliers of bitmask ``candidates`` with the highest last epoch and, among those, the
    longest log (a bitmask: ties are possible)."""
    best = 0
    top = -1
    for b in range(len(s.log)):
        if candidates >> b & 1:
            if (top < 0 or s.rep_epoch[b] > s.rep_epoch[top]
                    or (s.rep_epoch[b] == s.rep_epoch[top] and s.rep_leo[b] > s.rep_leo[top])):
                top = b
                best = 0
            if s.rep_epoch[b] == s.rep_epoch[top] and s.rep_leo[b] == s.rep_leo[top]:
                best |= 1 << b
    return best


@njit(cache=True)
def recovery_elect(s, t):
    """The controller elects the best unfenced replier once the strategy's wait condition holds;
    the new leader is the sole ISR member, ELR and LastKnownELR are cleared, the partition is
    RECOVERING. Among equally good repliers the model takes the first in assignment order."""
    return recovery_elect_electing(s, t, -1)


@njit(cache=True)
def recovery_elect_electing(s, t, leader):
    """``recovery_elect``, electing ``leader`` among equally good repliers (--election any)."""
    if not recovery_in_progress(s):
        return False
    candidates = s.rec_replied & ~(s.c_fenced | s.c_shutting_down) & s.c_replicas
    if candidates == 0:
        return False
    if s.k_recovery != RECOVERY_AGGRESSIVE:
        if s.k_balanced_replies > 0:
            if popcount(candidates) < s.k_balanced_replies:
                return False
        elif s.c_lkelr & ~candidates:
            return False
    ties = best_repliers(s, candidates)
    if not may_choose(ties, leader):
        return False
    best = chosen(ties, leader)
    t.c_isr = 1 << best
    t.c_elr = 0
    t.c_lkelr = 0
    t.c_recovering = 1
    set_leader(t, best)
    clear_recovery(t)
    finish_partition_change(s, t)
    normalize_epochs(t)
    return True
