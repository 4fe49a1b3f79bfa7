"""The KRaft controller: ISR/ELR updates, leader election, AlterPartition handling, fencing, min ISR.

Every controller action builds the successor in ``t`` in the order the controller's
``PartitionChangeBuilder`` does: the new ISR (with the ELR rule), then the leader, then the
partition-epoch bump if the partition record changed. The helpers below read and write ``t`` so
they compose inside one action (one controller event = one metadata record = one step).
"""

from __future__ import annotations

from numba import njit

from kraftcheck.specs.kafka.state import (AP_ACCEPTED, AP_REJECTED, AP_REQUEST, AP_UNSETTLED,
                               FALLBACK_UNCLEAN, MIN_ISR_KAFKA, MIN_ISR_KIP, RUNNING, normalize_epochs, popcount)


@njit(cache=True)
def completion(p, target):
    """(ISR, completes): whether installing ISR ``target`` in partition state ``p`` completes the
    reassignment in progress, and the ISR it installs then. Kafka's
    ``PartitionChangeBuilder.completeReassignmentIfNeeded`` (``PartitionReassignmentReplicas.
    maybeCompleteReassignment``, apache/kafka 1eb7644 and branch 4.2), run first in every partition
    change: the target ISR without the removing replicas must be non-empty and hold every replica
    of the final set; it becomes the ISR, and the removing replicas leave the replica set. With
    KAFKA-19975 (k_complete_on_adding, branch 4.3) it need hold only the adding replicas, and every
    final replica only when fewer replicas are added than removed; no min ISR check either way.
    kip-966 also needs that ISR to be at least min ISR (k_reassign_min_isr)."""
    if p.c_adding == 0 and p.c_removing == 0:
        return target, False
    final = p.c_replicas & ~p.c_removing
    isr = target & ~p.c_removing
    if isr == 0:
        return target, False
    if p.k_complete_on_adding:
        if p.c_adding & ~isr:
            return target, False
        if popcount(p.c_adding) < popcount(p.c_removing) and final & ~isr:
            return target, False
    elif final & ~isr:
        return target, False
    if p.k_reassign_min_isr and popcount(isr) < p.c_min_isr:
        return target, False
    return isr, True


@njit(cache=True)
def target_elr(p, isr, unclean, final):
    """The ELR a partition change writes when it installs ISR ``isr`` in partition state ``p``, with
    replica set ``final`` after the change (``p.c_replicas`` when the replica set stays): the one
    place the model computes the ELR rule (rule 2 of PROTOCOL.md). Kafka's
    ``PartitionChangeBuilder.maybePopulateTargetElr``: an ISR at min ISR or above empties the ELR;
    below it, the ELR becomes (ELR ∪ the ISR before the change) − the new ISR − the replicas just
    found to have shut down uncleanly (``unclean``; none under --keep-unclean-in-elr). Kafka
    filters nothing by the replica set, so a replica a reassignment drops may stay in the ELR (F6,
    F7); kip-966 and --fix-reassignment-prune-elr keep only replicas of ``final``
    (``k_reassign_prune``; KIP-966: "upon completion, the ELR only contains replicas in the final
    replica set"). Without ELR the ELR stays empty."""
    if not p.k_elr:
        return p.c_elr
    if popcount(isr) >= p.c_min_isr:
        return 0
    removed = 0 if p.k_keep_unclean_in_elr else unclean
    elr = (p.c_elr | p.c_isr) & ~isr & ~removed
    if p.k_reassign_prune and final != p.c_replicas:
        elr &= final
    return elr


@njit(cache=True)
def isr_elr_installing(p, isr, unclean, final):
    """(ISR, ELR) that a partition change installing ISR ``isr`` with replica set ``final`` after it
    gives in partition state ``p`` (``target_elr``). Without ELR (kafka-3.5, kafka-4.0) the last ISR
    member stays: an empty ``isr`` keeps the ISR."""
    if not p.k_elr and isr == 0:
        return p.c_isr, p.c_elr
    return isr, target_elr(p, isr, unclean, final)


@njit(cache=True)
def isr_elr_after(p, target, unclean):
    """(ISR, ELR) that installing ISR ``target`` in partition state ``p`` gives (see ``update_isr``),
    a reassignment completing first when ``target`` allows it; reads ``p`` only, so an action can
    learn the outcome before it writes its successor."""
    isr, done = completion(p, target)
    final = p.c_replicas & ~p.c_removing if done else p.c_replicas
    return isr_elr_installing(p, isr, unclean, final)


@njit(cache=True)
def install_isr(t, isr, unclean, final):
    """Write the ISR ``isr``, the ELR (``target_elr``) and, kip-966, LastKnownELR of a partition
    change whose replica set after it is ``final``; the replica set itself is the caller's."""
    old_elr = t.c_elr
    new_isr, elr = isr_elr_installing(t, isr, unclean, final)
    if t.k_elr:
        if popcount(isr) >= t.c_min_isr:
            t.c_lkelr = 0
        elif t.k_lkelr:
            removed = 0 if t.k_keep_unclean_in_elr else unclean
            t.c_lkelr = (t.c_lkelr | (old_elr & removed)) & ~isr & ~elr
        if t.k_reassign_prune and final != t.c_replicas:
            t.c_lkelr = t.c_lkelr & final
    t.c_elr = elr
    t.c_isr = new_isr


@njit(cache=True)
def update_isr(t, target, unclean):
    """Install ISR ``target`` with the ELR rule of KIP-966 (rule 2 of PROTOCOL.md; ``target_elr``).

    ``unclean`` are replicas just found to have shut down uncleanly: they leave the ELR (and, in
    kip-966, go to LastKnownELR). Without ELR (kafka-3.5) the last ISR member is never removed.
    A reassignment in progress completes first when ``target`` allows it (``completion``): the
    removing replicas leave ISR and replica set (kip-966: ELR and LastKnownELR too).
    """
    isr, done = completion(t, target)
    final = t.c_replicas & ~t.c_removing if done else t.c_replicas
    install_isr(t, isr, unclean, final)
    if done:
        t.c_replicas = final
        t.c_adding = 0
        t.c_removing = 0
        follow_replica_count(t)


@njit(cache=True)
def isr_elr_after_removal(p, b, unclean):
    """(ISR, ELR) after ``remove_from_isr(p, b, unclean)``, read from ``p`` only."""
    bit = 1 << b
    if unclean:
        if (p.c_isr | p.c_elr) & bit:
            return isr_elr_after(p, p.c_isr & ~bit, bit)
    elif p.c_isr & bit:
        return isr_elr_after(p, p.c_isr & ~bit, 0)
    return p.c_isr, p.c_elr


@njit(cache=True)
def unfenced(t, b):
    return not (t.c_fenced >> b & 1)


@njit(cache=True)
def active(t, b):
    """Neither fenced nor in controlled shutdown (``ClusterControlManager.isActive``)."""
    return not ((t.c_fenced | t.c_shutting_down) >> b & 1)


@njit(cache=True)
def active_brokers(t):
    """The set of brokers ``active`` holds for (``ClusterControlManager.isActive``)."""
    return ~(t.c_fenced | t.c_shutting_down) & ((1 << len(t.log)) - 1)


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
    if t.k_last_leader:
        if new == n:
            t.c_last_leader = old
        else:
            t.c_last_leader = n
    if new != n:
        clear_recovery(t)


# How an election ends (``election``): the first class with an acceptable replica decides.
KEEP, FROM_ISR, FROM_ELR, LAST_LEADER, UNCLEAN, LEADERLESS = 0, 1, 2, 3, 4, 5


@njit(cache=True)
def election(p, isr, elr, fenced):
    """``election_among`` the replicas of ``p``."""
    return election_among(p, isr, elr, fenced, p.c_replicas)


@njit(cache=True)
def election_among(p, isr, elr, fenced, replicas):
    """(how, choices) of an election over ISR ``isr``, ELR ``elr`` and fenced set ``fenced``, with
    the leader and the switches of ``p``. ``choices`` is the bitmask of the replicas it may pick
    (bit n: no leader). Kafka picks the first of them in assignment order; ``--election any`` any.

    The current leader stays while it is an unfenced ISR member; else an unfenced ISR member;
    else, only when the ISR is empty, an unfenced ELR member (it becomes the sole ISR member;
    ``PartitionChangeBuilder.isValidNewLeader``); else the preset's fallback: the last known
    leader once unfenced (kafka-4.1/4.x, only when ISR and ELR are empty), or an unclean election
    of any unfenced replica (``unclean.leader.election.enable``); else no leader.
    KIP-966's unclean recovery is not a fallback here: it runs as its own actions (recovery.py).
    """
    n = len(p.log)
    # an acceptable leader is active: neither fenced nor in controlled shutdown
    # (ClusterControlManager.isActive)
    up = ~(fenced | p.c_shutting_down) & ((1 << n) - 1)
    # the ISR holds replicas only; the ELR may not (Kafka's cancellation), and Kafka looks for a
    # leader among the replicas ``replicas`` (targetReplicas.stream().filter(isValidNewLeader))
    cur = p.c_leader
    if cur < n and (isr >> cur & 1) and (up >> cur & 1):
        return KEEP, 1 << cur
    if isr & up:
        return FROM_ISR, isr & up
    if p.k_elr and isr == 0 and elr & up & replicas:
        return FROM_ELR, elr & up & replicas
    if p.k_last_leader:
        last = p.c_last_leader
        if isr == 0 and elr == 0 and last < n and (up >> last & 1):
            return LAST_LEADER, 1 << last
    if p.k_fallback == FALLBACK_UNCLEAN and up & replicas:
        return UNCLEAN, up & replicas
    return LEADERLESS, 1 << n


@njit(cache=True)
def chosen(choices, want):
    """The replica picked from bitmask ``choices``: ``want`` (``--election any``: the action's
    parameter, checked by ``may_choose`` before) or, when ``want`` < 0, the first in assignment
    order."""
    if want >= 0:
        return want
    x = 0
    while not choices >> x & 1:
        x += 1
    return x


@njit(cache=True)
def may_choose(choices, want):
    """An action instance with election choice ``want`` is enabled: ordered (``want`` < 0) always,
    else when ``want`` is one of ``choices``."""
    return want < 0 or (choices >> want & 1) == 1


@njit(cache=True)
def may_elect(p, isr, elr, fenced, want):
    """``may_choose`` for the election that ISR ``isr``, ELR ``elr`` and fenced set ``fenced`` give."""
    if want < 0:
        return True
    how, choices = election(p, isr, elr, fenced)
    return may_choose(choices, want)


@njit(cache=True)
def elect(t, want):
    """Keep the leader if still acceptable, else elect one (PROTOCOL rule 7; see ``election``):
    the first acceptable replica in assignment order when ``want`` < 0, else replica ``want``
    (``--election any``), which the action checked with ``may_elect`` before touching ``t``."""
    n = len(t.log)
    how, choices = election(t, t.c_isr, t.c_elr, t.c_fenced)
    if how == KEEP:
        return
    x = chosen(choices, want)
    if how == FROM_ISR:
        set_leader(t, x)
    elif how == FROM_ELR:
        update_isr(t, 1 << x, 0)
        set_leader(t, x)
    elif how == UNCLEAN or how == LAST_LEADER:
        # Kafka's electLeader marks both unclean: the ISR is forced to the new leader, the ELR
        # and LastKnownELR are cleared (maybeUpdateRecordElr) and the partition is RECOVERING
        t.c_isr = 1 << x
        t.c_elr = 0
        t.c_lkelr = 0
        t.c_recovering = 1
        set_leader(t, x)
    else:
        set_leader(t, n)


@njit(cache=True)
def finish_partition_change(s, t):
    """Bump the partition epoch if the partition record changed: every partition epoch held
    elsewhere (leader views, the AlterPartition in flight) stops being current."""
    if s.k_epoch_bump_on_shrink and s.c_isr & ~t.c_isr and s.c_epoch == t.c_epoch:
        # metadata versions below 3.6 bump the leader epoch of any ISR shrink that keeps the
        # leader (PartitionChangeBuilder.triggerLeaderEpochBumpForIsrShrinkIfNeeded)
        t.c_epoch = t.c_epoch + 1
    if s.c_replicas & ~t.c_replicas and s.c_epoch == t.c_epoch:
        # a replica leaves the replica set (a reassignment completes or is cancelled): the leader
        # epoch is bumped even when the leader stays
        # (PartitionChangeBuilder.triggerLeaderEpochBumpForReplicaReassignmentIfNeeded)
        t.c_epoch = t.c_epoch + 1
    if (s.c_isr != t.c_isr or s.c_elr != t.c_elr or s.c_lkelr != t.c_lkelr or s.c_leader != t.c_leader
            or s.c_epoch != t.c_epoch or s.c_recovering != t.c_recovering or s.c_last_leader != t.c_last_leader
            or s.c_replicas != t.c_replicas or s.c_adding != t.c_adding or s.c_removing != t.c_removing):
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
def remove_from_isr(t, b, unclean, want):
    """Take ``b`` out of the ISR (and, when ``unclean``, out of the ELR) and re-elect (``want``:
    see ``elect``)."""
    bit = 1 << b
    if unclean:
        if (t.c_isr | t.c_elr) & bit:
            update_isr(t, t.c_isr & ~bit, bit)
    elif t.c_isr & bit:
        update_isr(t, t.c_isr & ~bit, 0)
    elect(t, want)


@njit(cache=True)
def may_elect_after_removal(s, b, unclean, fenced, want):
    """``remove_from_isr(t, b, unclean, want)`` on ``s`` with fenced set ``fenced`` may elect ``want``."""
    isr, elr = isr_elr_after_removal(s, b, unclean)
    return may_elect(s, isr, elr, fenced, want)


# ----------------------------------------------------------------------------------------------
# actions. Those that elect take the election's choice ``leader`` (the leader after the step,
# n for none) under --election any (the ``*_electing`` versions); Kafka's ordered ones pass -1.


@njit(cache=True)
def fence_broker(s, t, b, want):
    """The controller fences ``b`` and removes it from the ISR, as one partition change. Shared by
    a fencing fault and a session timeout."""
    t.c_fenced = s.c_fenced | (1 << b)
    remove_from_isr(t, b, 0, want)
    finish_partition_change(s, t)
    normalize_epochs(t)


@njit(cache=True)
def fence(s, t, b):
    """The controller fences running broker ``b`` (missed heartbeats: a network partition).

    Fault, bounded by --fences. ``b`` keeps running: it can still fetch and, as a zombie leader,
    append and advance its HWM until its metadata view moves on.
    """
    return fence_electing(s, t, b, -1)


@njit(cache=True)
def fence_electing(s, t, b, leader):
    """``fence``, electing ``leader`` (--election any)."""
    if s.fences_used >= s.k_max_fences or s.b_state[b] != RUNNING or not unfenced(s, b):
        return False
    if not may_elect_after_removal(s, b, 0, s.c_fenced | (1 << b), leader):
        return False
    t.fences_used = s.fences_used + 1
    fence_broker(s, t, b, leader)
    return True


@njit(cache=True)
def session_timeout(s, t, b):
    """The controller fences a broker that crashed (its heartbeats stopped). Not a fault."""
    return session_timeout_electing(s, t, b, -1)


@njit(cache=True)
def session_timeout_electing(s, t, b, leader):
    """``session_timeout``, electing ``leader`` (--election any)."""
    if s.b_state[b] == RUNNING or not unfenced(s, b):
        return False
    if not may_elect_after_removal(s, b, 0, s.c_fenced | (1 << b), leader):
        return False
    fence_broker(s, t, b, leader)
    return True


@njit(cache=True)
def unfence(s, t, b):
    """A registered, running broker heartbeats again and is unfenced; a leaderless partition may
    elect it (KIP-966: an unfenced ELR member of an empty ISR becomes leader)."""
    return unfence_electing(s, t, b, -1)


@njit(cache=True)
def unfence_electing(s, t, b, leader):
    """``unfence``, electing ``leader`` (--election any)."""
    if s.b_state[b] != RUNNING or unfenced(s, b):
        return False
    if s.c_shutting_down >> b & 1:
        return False  # a fenced broker that wants to shut down is let go, never unfenced (calculateNextBrokerState)
    fenced = s.c_fenced & ~(1 << b)
    if not may_elect(s, s.c_isr, s.c_elr, fenced, leader):
        return False
    t.c_fenced = fenced
    elect(t, leader)
    finish_partition_change(s, t)
    normalize_epochs(t)
    return True


@njit(cache=True)
def handle_alter_partition(s, t):
    """The controller handles the AlterPartition request in flight (PROTOCOL rule 5).

    Rejected when its leader epoch is stale or the sender is not the leader, when its partition
    epoch is stale (unless --no-partition-epoch-check), when the proposed ISR leaves out the
    leader, when it claims RECOVERING with more than one ISR member, when a proposed member is
    fenced, or has a stale broker epoch (KIP-903, unless --no-broker-epoch-check). Accepted: the
    ISR is installed with the ELR rule. See ``alter_partition_error`` for what the sender does
    with each rejection.
    """
    return handle_alter_partition_electing(s, t, -1)


@njit(cache=True)
def request_recovered(s):
    """The request in flight carries LeaderRecoveryState RECOVERED: Kafka's leader marks a
    RECOVERING partition recovered itself when it becomes leader (``Partition.makeLeader``), so
    every request it sends says RECOVERED; the kip-966 model sends it only with
    ``propose_recovered``."""
    return s.ap_recovered == 1 or s.k_leader_marks_recovered == 1


# What the sender does with a rejection (``Partition.handleAlterPartitionError``)
ACCEPTED, REVERTS, STAYS_PENDING = 0, 1, 2


@njit(cache=True)
def alter_partition_error(s):
    """How the request in flight fares, in the order ``ReplicationControlManager.
    validateAlterPartitionData`` checks: ACCEPTED; REVERTS (INELIGIBLE_REPLICA: a member fenced,
    in controlled shutdown or with a stale broker epoch; the sender reverts to its committed
    ISR); STAYS_PENDING (FENCED_LEADER_EPOCH, INVALID_REQUEST, INVALID_UPDATE_VERSION: the
    sender keeps its pending ISR until its next metadata update). The kip-966 model reverts on
    every rejection (k_pending_until_metadata off)."""
    stays = STAYS_PENDING if s.k_pending_until_metadata else REVERTS
    if s.ap_epoch != s.c_epoch:
        return stays  # FENCED_LEADER_EPOCH
    if s.ap_from != s.c_leader:
        return stays  # INVALID_REQUEST: not the leader
    if s.k_pe_check and not s.ap_pe_ok:
        return stays  # INVALID_UPDATE_VERSION
    if s.ap_isr & ~s.c_replicas:
        return stays  # INVALID_REQUEST: an ISR member that is not a replica (Replicas.validateIsr)
    if not (s.ap_isr >> s.ap_from & 1):
        return stays  # INVALID_REQUEST: the ISR must include the leader
    if s.c_recovering and not request_recovered(s) and popcount(s.ap_isr) > 1:
        return stays  # INVALID_REQUEST: RECOVERING with more than one ISR member
    if s.ap_isr & (s.c_fenced | s.c_shutting_down):
        return REVERTS  # INELIGIBLE_REPLICA: "fenced", "shutting down" (ineligibleReplicasForIsr)
    if s.k_epoch_check and s.ap_isr & s.ap_stale:
        return REVERTS  # INELIGIBLE_REPLICA (KIP-903)
    return ACCEPTED


@njit(cache=True)
def commit_alter_partition(s, t, leader):
    """The controller's partition change for the accepted request in flight: the proposed ISR
    with the ELR rule, RECOVERED if the request says so, the election (``leader``: see
    ``elect``), the partition record. False (``t`` untouched) if ``leader`` is not the election's
    choice."""
    isr, elr = isr_elr_after(s, s.ap_isr, 0)
    if not may_elect(s, isr, elr, s.c_fenced, leader):
        return False
    update_isr(t, s.ap_isr, 0)
    if request_recovered(s):
        t.c_recovering = 0
    t.isr_stale = (s.isr_stale | (s.ap_isr & s.ap_stale)) & t.c_isr
    elect(t, leader)
    finish_partition_change(s, t)
    return True


@njit(cache=True)
def handle_alter_partition_electing(s, t, leader):
    """``handle_alter_partition``, electing ``leader`` (--election any; a rejection keeps the
    leader, so only ``leader`` = the current one is enabled then)."""
    if s.ap_state != AP_REQUEST:
        return False
    error = alter_partition_error(s)
    if error != ACCEPTED:
        if leader >= 0 and leader != s.c_leader:
            return False
        t.ap_state = AP_REJECTED if error == REVERTS else AP_UNSETTLED
        t.ap_epoch = 0  # a response carries no epoch the sender checks (ap_live decides)
        normalize_epochs(t)
        return True
    if not commit_alter_partition(s, t, leader):
        return False
    t.ap_state = AP_ACCEPTED
    if s.k_pending_until_metadata and t.c_epoch != s.c_epoch:
        # the response carries a leader epoch newer than the sender's (an ISR shrink bumped it,
        # kafka-3.5): handleAlterPartitionUpdate ignores it and the pending ISR stays
        t.ap_state = AP_UNSETTLED
    if s.c_replicas != t.c_replicas:
        # the request completed a reassignment, which bumped the leader epoch: a new leader
        # (ReplicationControlManager.alterPartition answers NEW_LEADER_ELECTED) or the same one
        # with a newer epoch (handleAlterPartitionUpdate ignores it); either way the sender keeps
        # its pending ISR until its next metadata update (Partition.handleAlterPartitionError)
        t.ap_state = AP_UNSETTLED
    t.ap_epoch = 0
    t.ap_pe_ok = 1  # the response carries the partition epoch just written
    if s.k_fix_min_isr_in_partition:
        t.ap_min_isr = s.c_min_isr
    normalize_epochs(t)
    return True


@njit(cache=True)
def handle_alter_partition_then_fail_over(s, t):
    """The controller commits the AlterPartition in flight and fails over before its response
    reaches the leader (or the connection drops): the leader's channel retries the same request,
    with the leader, partition and broker epochs it was built with, against the new controller
    (``NodeToControllerRequestThread.handleResponse``: a disconnect puts the item back first in
    the queue; ``AlterPartitionManager`` sends with ``retryTimeoutMs = Long.MaxValue``). The new
    controller has replayed the committed change (a KRaft leader's listener fires only once it has
    read up to the epoch start offset), so the retry meets a partition epoch that moved past it
    and ``validateAlterPartitionData`` answers INVALID_UPDATE_VERSION (or FENCED_LEADER_EPOCH if
    the leader epoch moved too): ``handle_alter_partition`` handles the retry. Only a request the
    controller accepts; a rejected one retried is the same request handled again. Fault, bounded
    by --controller-failovers."""
    return handle_alter_partition_then_fail_over_electing(s, t, -1)


@njit(cache=True)
def handle_alter_partition_then_fail_over_electing(s, t, leader):
    """``handle_alter_partition_then_fail_over``, electing ``leader`` (--election any)."""
    if s.controller_failovers_used >= s.k_max_controller_failovers or s.ap_state != AP_REQUEST:
        return False
    if alter_partition_error(s) != ACCEPTED or not commit_alter_partition(s, t, leader):
        return False
    t.controller_failovers_used = s.controller_failovers_used + 1
    # the retry is the request as sent (ap_* unchanged): its leader epoch, its ISR with the broker
    # epochs of its members, and its partition epoch, which the committed change made stale if it
    # wrote a record (write_partition_record cleared ap_pe_ok)
    normalize_epochs(t)
    return True


@njit(cache=True)
def change_min_isr(s, t, value_index):
    """An operator sets min.insync.replicas to ``value_index + 1`` (PROTOCOL rule 8).

    ELR policy: kip clears ELR and LastKnownELR when the new value is at or below the ISR size;
    kafka (4.x as shipped: the ClearElrRecord written with the config record) clears them on any
    update, even to the same value, and with LastKnownElr the last known leader; keep-elr never
    clears them. Brokers learn the new value later, through metadata. Bounded by --min-isr-changes.
    With --fix-epoch-bump-on-min-isr-change the controller writes a partition record even when the
    partition did not change, so AlterPartitions built before the change carry a stale partition
    epoch and are rejected.
    """
    value = value_index + 1
    if s.min_isr_changes_used >= s.k_max_min_isr_changes or value > s.k_rf:
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
            if s.k_min_isr_policy == MIN_ISR_KAFKA:
                # ReplicationControlManager.removeTopicElrs (ClearElrRecord) empties LastKnownElr,
                # which holds the last known leader
                t.c_last_leader = len(s.log)
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
    first = s.c_replicas & ~s.c_removing
    pref = 0
    while not first >> pref & 1:
        pref += 1
    if s.c_leader == pref or not (s.c_isr >> pref & 1) or not active(s, pref):
        return False
    t.preferred_elections_used = s.preferred_elections_used + 1
    set_leader(t, pref)
    finish_partition_change(s, t)
    normalize_epochs(t)
    return True


# ----------------------------------------------------------------------------------------------
# partition reassignment (--reassignments; docs/model.md section 2b)


@njit(cache=True)
def reassign(s, t, target_index):
    """An operator reassigns the partition to replica set ``target`` (``target_index + 1`` as a
    set, --replication-factor brokers, not the current set), when no reassignment is in progress
    (``ReplicationControlManager.changePartitionReassignment``): the replica set becomes target plus
    removing replicas, the adding and removing replicas are recorded, the ISR and the ELR stay
    (KIP-966: "AlterPartitionReassignments will not change the ELR"). The new replicas start
    empty and fetch once their metadata names them. Bounded by --reassignments."""
    return reassign_electing(s, t, target_index, -1)


@njit(cache=True)
def reassign_electing(s, t, target_index, leader):
    """``reassign``, electing ``leader`` (--election any: only an unclean election of a new replica
    of a leaderless partition can change the leader here)."""
    target = target_index + 1
    if s.reassignments_used >= s.k_max_reassignments or s.c_adding or s.c_removing:
        return False
    if (popcount(target) != s.k_rf and not s.k_rf_change) or target == s.c_replicas:
        return False
    replicas = s.c_replicas | target
    if leader >= 0:
        how, choices = election_among(s, s.c_isr, s.c_elr, s.c_fenced, replicas)
        if not may_choose(choices, leader):
            return False
    t.reassignments_used = s.reassignments_used + 1
    t.c_replicas = replicas
    t.c_adding = target & ~s.c_replicas
    t.c_removing = s.c_replicas & ~target
    # the builder runs as in every change: nothing completes while a replica is added (an adding
    # replica is in no ISR), the ELR stays (the ISR does not change), and an unclean election may
    # now pick a new replica. A target that only removes replicas (a smaller replication factor)
    # completes here when the ISR holds every final replica: build() runs
    # completeReassignmentIfNeeded with the ISR unchanged, and the ELR rule with the min ISR of the
    # replicas before the change (changePartitionReassignment's getTopicEffectiveMinIsr)
    if s.k_rf_change and t.c_adding == 0:
        update_isr(t, s.c_isr, 0)
    follow_replica_count(t)
    elect(t, leader)
    finish_partition_change(s, t)
    normalize_epochs(t)
    return True


@njit(cache=True)
def follow_replica_count(t):
    """With --replication-factor-changes the min ISR in force is min(configured, replicas) after a
    change of the replica set, as the controller (``ReplicationControlManager.getTopicEffectiveMinIsr``:
    the replica list, removing replicas included) and the leader (``Partition.effectiveMinIsr``:
    ``remoteReplicasMap.size + 1``) compute it; the partition change that changes the replica set
    still applies the ELR rule with the value from before it."""
    if not t.k_rf_change:
        return
    value = min(t.k_min_isr_config, popcount(t.c_replicas))
    t.c_min_isr = value
    if value < t.fewest_min_isr:
        t.fewest_min_isr = value


@njit(cache=True)
def revert_outcome(s):
    """(ISR, ELR, unclean) after cancelling (``PartitionReassignmentRevert``, then the builder's
    ELR rule, ``target_elr``): the ISR without the adding replicas; when that is empty, the first
    original replica, an unclean revert."""
    original = s.c_replicas & ~s.c_adding
    isr = s.c_isr & ~s.c_adding
    unclean = False
    if isr == 0:
        first = 0
        while not original >> first & 1:
            first += 1
        isr = 1 << first
        unclean = True
    isr, elr = isr_elr_installing(s, isr, 0, original)
    return isr, elr, unclean


@njit(cache=True)
def cancel_reassignment(s, t):
    """An operator cancels the reassignment in progress (``ReplicationControlManager.
    cancelPartitionReassignment``, ``PartitionReassignmentRevert``): the adding replicas leave the
    replica set and the ISR. An ISR left empty takes the first original replica, which Kafka
    allows only with unclean.leader.election.enable; kip-966 needs the ISR left to be at least min
    ISR (k_reassign_min_isr) and keeps only original replicas in ELR and LastKnownELR
    (k_reassign_prune). Then the leader is re-elected if it was an adding replica."""
    return cancel_reassignment_electing(s, t, -1)


@njit(cache=True)
def cancel_reassignment_electing(s, t, leader):
    """``cancel_reassignment``, electing ``leader`` (--election any)."""
    if s.c_adding == 0 and s.c_removing == 0:
        return False
    isr, elr, unclean = revert_outcome(s)
    if unclean and s.k_fallback != FALLBACK_UNCLEAN:
        return False  # InvalidReplicaAssignmentException: it would need an unclean election
    if s.k_reassign_min_isr and popcount(isr) < s.c_min_isr:
        return False
    original = s.c_replicas & ~s.c_adding
    if leader >= 0:
        how, choices = election_among(s, isr, elr, s.c_fenced, original)
        if not may_choose(choices, leader):
            return False
    install_isr(t, isr, 0, original)
    t.c_replicas = original
    t.c_adding = 0
    t.c_removing = 0
    follow_replica_count(t)
    elect(t, leader)
    finish_partition_change(s, t)
    normalize_epochs(t)
    return True
