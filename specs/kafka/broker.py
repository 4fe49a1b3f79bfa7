"""Broker actions: metadata propagation, produce, fetch/replication, HWM, AlterPartition proposals.

A broker acts on its own metadata view (``v_*``), a snapshot of the controller's state taken when
it last applied metadata. Fields only a leader reads (``v_isr``, ``v_min_isr``, ``v_pe_ok``,
``v_recovering``, ``v_gen_age``, ``v_inactive``, ``f_leo``, ``f_gen_age``, ``eso``) are kept at 0 while a broker
is not the leader in its own view, so states that differ only in unused data are one state.
"""

from __future__ import annotations

from numba import njit

from kraftcheck.invariants.kafka_state import acting_leader, hwm_may_advance, maximal_isr
from kraftcheck.specs.kafka.state import (AP_ACCEPTED, AP_AWAITING_METADATA, AP_NONE, AP_REJECTED, AP_REQUEST,
                               AP_UNSETTLED, RUNNING, common_prefix, normalize_epochs, popcount, records_below)


@njit(cache=True)
def clear_leader_state(t, b):
    """Forget everything only a leader keeps (views of followers, ISR, epochs)."""
    t.v_isr[b] = 0
    t.v_min_isr[b] = 0
    t.v_pe_ok[b] = 0
    t.v_recovering[b] = 0
    t.v_cfg_next[b] = 0
    t.eso[b] = 0
    t.v_ahead[b] = 0
    t.v_inactive[b] = 0
    for f in range(len(t.log)):
        t.v_gen_age[b][f] = 0
        t.f_leo[b][f] = 0
        t.f_gen_age[b][f] = 0
        t.f_caught[b][f] = 0


@njit(cache=True)
def drop_pending(s, t, b):
    """``b`` no longer waits for its AlterPartition (its partition state was replaced, or it
    stopped): a response still to come will be ignored; a pending ISR kept after a rejection
    (``awaiting_metadata``) is gone, and with it the exchange."""
    if s.ap_from != b or s.ap_state == AP_NONE:
        return
    if s.ap_state == AP_AWAITING_METADATA:
        clear_alter_partition(t)
    else:
        t.ap_live = 0


@njit(cache=True)
def clear_alter_partition(t):
    t.ap_state = AP_NONE
    t.ap_from = 0
    t.ap_isr = 0
    t.ap_epoch = 0
    t.ap_pe_ok = 0
    t.ap_stale = 0
    t.ap_recovered = 0
    t.ap_live = 0
    if t.k_fix_min_isr_in_partition:
        t.ap_min_isr = 0


@njit(cache=True)
def recovering_in_view(s):
    """The leader recovery state a leader installs from metadata: Kafka's ``makeLeader`` marks a
    RECOVERING partition RECOVERED locally (k_leader_marks_recovered), the kip-966 model keeps
    RECOVERING until ``propose_recovered`` is accepted."""
    if s.k_leader_marks_recovered:
        return 0
    return s.c_recovering


@njit(cache=True)
def min_isr_in_metadata(s):
    """The min ISR a leader takes from metadata: the topic config's, or, with
    --fix-min-isr-in-partition-state, the one written with the last partition record."""
    if s.k_fix_min_isr_in_partition:
        return s.c_part_min_isr
    return s.c_min_isr


@njit(cache=True)
def has_publish_window(s):
    """See ``state.publish_window``: the config delta is applied after the topic delta."""
    return s.k_max_min_isr_changes > 0 and not s.k_fix_config_first and not s.k_fix_min_isr_in_partition


@njit(cache=True)
def load_view(s, t, b):
    """``b`` applies every metadata record up to the controller's latest (one publish).

    Returns True if its view changed. A new leadership (leader epoch) resets the follower states
    and sets the epoch start offset; a partition change drops the pending AlterPartition, as
    ``Partition.makeLeader`` replaces the partition state (and, with --hwm-under-partition-lock
    or --replay-known-changes, advances the HWM in the same step, as ``makeLeader`` does; a
    publish that changes only the config or broker epochs does not reach ``makeLeader``). A
    leader that stays leader applies the topic delta first and the config delta after it
    (``BrokerMetadataPublisher``): when both change, the new min ISR waits in ``v_cfg_next`` for
    ``apply_config_delta``.

    With --replay-known-changes a leader whose ISR came from an AlterPartition response
    (``v_ahead``) replays that change when its metadata reaches the record: ``makeLeader``
    proceeds at an equal partition epoch and ``updateAssignmentAndIsr`` replaces a pending ISR
    sent meanwhile, whose response is then ignored (not with --fix-ignore-replayed-change, under
    which ``makeLeader`` leaves the pending state alone at the partition epoch it already has). A
    new leader epoch marks the ISR followers as caught up just now and the others as not
    (``Replica.resetReplicaState``).
    """
    n = len(s.log)
    lead = s.c_leader == b
    was_leading = s.v_leader[b] == b
    same_epoch = s.v_epoch[b] == s.c_epoch
    min_isr = min_isr_in_metadata(s)
    if not s.c_replicas >> b & 1:
        # not a replica (any more): a broker the metadata removed from the replica set stops its
        # replica and deletes its log (ReplicaManager.applyDelta: the partition is among the
        # local deletes; stopPartitions with deletion); one that never was a replica has nothing
        if s.v_leader[b] == n and s.v_epoch[b] == 0 and s.log[b] == 0 and s.hwm[b] == 0:
            return False
        t.v_leader[b] = n
        t.v_epoch[b] = 0
        t.log[b] = 0
        t.hwm[b] = 0
        clear_leader_state(t, b)
        drop_pending(s, t, b)
        return True
    if not lead:
        if s.v_leader[b] == s.c_leader and same_epoch and not was_leading and (
                not s.k_new_leader_window or s.f_cfg_min_isr[b] == min_isr):
            return False
        t.v_leader[b] = s.c_leader
        t.v_epoch[b] = s.c_epoch
        clear_leader_state(t, b)
        drop_pending(s, t, b)
        if s.k_new_leader_window:
            t.f_cfg_min_isr[b] = min_isr  # a follower's window changes nothing it does: the publish is one step
        return True
    window = False
    old_min_isr = 0
    makes_leader = True  # Partition.makeLeader runs: a new leadership, or a topic delta for it
    inactive = inactive_in_metadata(s, b)
    if was_leading and same_epoch:
        topic_changed = (s.v_isr[b] != s.c_isr or not s.v_pe_ok[b] or s.v_recovering[b] != recovering_in_view(s)
                         or s.v_ahead[b] != 0)
        # a fencing, an unfencing or a controlled shutdown of another broker changes the cluster
        # image only: the leader's metadata cache, not its partition state
        changed = topic_changed or s.v_min_isr[b] != min_isr or s.v_inactive[b] != inactive
        for f in range(n):
            if s.v_gen_age[b][f] != 0:
                changed = True
        if not changed:
            return False
        replays = s.v_ahead[b] != 0 and s.k_fix_ignore_replay == 0
        if not s.v_pe_ok[b] or replays:
            drop_pending(s, t, b)
        window = topic_changed and s.v_min_isr[b] != min_isr and has_publish_window(s)
        old_min_isr = s.v_min_isr[b]
        makes_leader = topic_changed  # a config or broker-epoch change alone does not reach makeLeader
    else:
        if s.k_new_leader_window and has_publish_window(s):
            # makeLeader runs in the topic delta, with the min ISR of the log config from before this
            # publish: a follower's config, or the leader's own from its older leader epoch
            old_min_isr = s.v_min_isr[b] if was_leading else s.f_cfg_min_isr[b]
            window = old_min_isr != min_isr and old_min_isr != 0
            t.f_cfg_min_isr[b] = 0
        clear_leader_state(t, b)
        if was_leading and s.k_keep_follower_state:
            # b stays leader across a leader-epoch bump: Replica.resetReplicaState with
            # isNewLeader false keeps each follower's log end offset and broker epoch. Only the
            # ISR members' are ever read before their next Fetch (the HWM, the epochs of a
            # shrink's AlterPartition); Kafka expands the ISR only from a Fetch
            # (updateFollowerFetchState -> maybeExpandIsr), with the offset that Fetch brings
            for f in range(n):
                if s.c_isr >> f & 1:
                    t.f_leo[b][f] = s.f_leo[b][f]
                    t.f_gen_age[b][f] = s.f_gen_age[b][f]
        t.eso[b] = popcount(s.log[b])
        drop_pending(s, t, b)
        if s.k_replay_known:
            for f in range(n):
                if f != b and s.c_isr >> f & 1:
                    t.f_caught[b][f] = 1
    t.v_leader[b] = b
    t.v_epoch[b] = s.c_epoch
    t.v_isr[b] = s.c_isr
    if window:
        t.v_min_isr[b] = old_min_isr
        t.v_cfg_next[b] = min_isr
    else:
        t.v_min_isr[b] = min_isr
    t.v_pe_ok[b] = 1
    t.v_recovering[b] = recovering_in_view(s)
    t.v_ahead[b] = 0
    t.v_inactive[b] = inactive
    for f in range(n):
        t.v_gen_age[b][f] = 0
    if s.k_hwm_under_lock and makes_leader:
        advance_hwm(t, t, b)  # makeLeader ends with maybeIncrementLeaderHW, under the partition's lock
    return True


@njit(cache=True)
def inactive_in_metadata(s, b):
    """The other brokers that ``b``'s metadata, brought up to the controller's state, shows fenced
    or in controlled shutdown (``KRaftMetadataCache.isBrokerFenced``, ``isBrokerShuttingDown``),
    under the presets whose leader reads them (k_expand_checks_fencing); else none."""
    if not s.k_expand_checks_fencing:
        return 0
    return (s.c_fenced | s.c_shutting_down) & ~(1 << b)


@njit(cache=True)
def replayed_controlled_shutdowns(s, t, b):
    """``b`` has replayed the metadata log to its end, every controlled-shutdown record included:
    no broker in controlled shutdown waits for it any more (``lowestActiveOffset``)."""
    if s.k_cs_two_steps:
        for x in range(len(s.log)):
            t.c_cs_waiting[x] = s.c_cs_waiting[x] & ~(1 << b)


@njit(cache=True)
def sync_metadata(s, t, b):
    """Running broker ``b`` catches up with the metadata log (it may lag by any number of records),
    once it has finished its previous publish."""
    if s.b_state[b] != RUNNING or s.v_cfg_next[b] != 0 or not load_view(s, t, b):
        return False
    replayed_controlled_shutdowns(s, t, b)
    normalize_epochs(t)
    return True


@njit(cache=True)
def apply_config_delta(s, t, b):
    """Leader ``b`` finishes its metadata publish with the config delta (``DynamicConfigPublisher``
    updates the log's ``LogConfig``): the min ISR it compares the ISR with becomes the new value.
    Until then it holds the new ISR with the old min ISR, and may advance the HWM with them
    (``Partition.makeLeader`` calls ``maybeIncrementLeaderHW``, as do fetches meanwhile)."""
    if s.v_cfg_next[b] == 0 or s.b_state[b] != RUNNING:
        return False
    t.v_min_isr[b] = s.v_cfg_next[b]
    t.v_cfg_next[b] = 0
    return True


@njit(cache=True)
def next_record(s):
    for r in range(len(s.rec_epoch)):
        if s.rec_epoch[r] == 0:
            return r
    return -1


@njit(cache=True)
def produce(s, t, b, acks_all):
    """Leader ``b`` appends the next record. acks=1 is acknowledged on append; acks=all is refused
    while the committed ISR (as the leader knows it) is below min ISR, and is acknowledged when the
    HWM passes it. Bounded by --records."""
    if not acting_leader(s, b):
        return False
    r = next_record(s)
    if r < 0:
        return False
    if acks_all and popcount(s.v_isr[b]) < s.v_min_isr[b]:
        return False
    t.rec_epoch[r] = s.v_epoch[b]
    t.rec_offset[r] = popcount(s.log[b])
    t.log[b] = s.log[b] | (1 << r)
    if acks_all:
        t.rec_acks_all = s.rec_acks_all | (1 << r)
    return True


@njit(cache=True)
def fetch_leader(s, f):
    """The leader ``f`` fetches from, if it would serve the Fetch: a running follower's view names
    another broker that acts as leader in the same leader epoch; else -1."""
    if s.b_state[f] != RUNNING or not s.c_replicas >> f & 1:
        # the leader serves a Fetch only from a replica (the model asks the controller's replica
        # set, not the leader's metadata: docs/model.md section 2b)
        return -1
    lead = s.v_leader[f]
    if lead >= len(s.log) or lead == f:
        return -1
    if not acting_leader(s, lead) or s.v_epoch[lead] != s.v_epoch[f]:
        return -1
    return lead


@njit(cache=True)
def fetch(s, t, f):
    """Follower ``f`` fetches from the leader of its view, in one round trip.

    The leader serves it only in the same leader epoch. If ``f``'s log has diverged (entries the
    leader lacks), the response carries the diverging epoch and ``f`` truncates to the common
    prefix (its HWM with it). Otherwise the leader records ``f``'s fetch offset and broker epoch
    (KIP-903) and ``f`` appends the leader's records and takes the leader's HWM. Not while the
    fetcher thread for that leader still waits for a delayed response (``delay_fetch_response``).
    """
    lead = fetch_leader(s, f)
    if lead < 0 or waits_for_response(s, f, lead):
        return False
    mine = s.log[f]
    theirs = s.log[lead]
    kept = common_prefix(s, mine, theirs)
    if kept != mine:
        t.log[f] = kept
        t.hwm[f] = min(s.hwm[f], popcount(kept))
        return True
    offset_plus_one = popcount(mine) + 1
    if (s.f_leo[lead][f] == offset_plus_one and s.f_gen_age[lead][f] == 0 and mine == theirs
            and s.hwm[f] == s.hwm[lead]):
        return False  # nothing would change
    leader_records_fetch(s, t, lead, f, offset_plus_one - 1)
    t.log[f] = theirs
    t.hwm[f] = s.hwm[lead]
    return True


@njit(cache=True)
def leader_records_fetch(s, t, lead, f, offset):
    """The leader's side of serving a matching Fetch: ``f``'s fetch offset, and its broker epoch
    as current (KIP-903). With --replay-known-changes also Kafka's ``lastCaughtUpTimeMs``
    (``Replica.updateFetchStateOrThrow``): a fetch at the leader's log end offset is caught up
    now, and one at the leader's log end offset of the previous fetch was caught up then. A
    fetch copies the leader's whole suffix, so every fetch after the first of this leader epoch
    starts at the previous one's leader log end (a truncation in between only makes the model
    wait longer, which ``lag_timeout`` undoes)."""
    if s.k_replay_known and (offset >= popcount(s.log[lead]) or s.f_leo[lead][f] > 0):
        t.f_caught[lead][f] = 1
    t.f_leo[lead][f] = offset + 1
    t.f_gen_age[lead][f] = 0


@njit(cache=True)
def waits_for_response(s, f, lead):
    return s.fr_epoch != 0 and s.fr_follower == f and s.fr_leader == lead


@njit(cache=True)
def delay_fetch_response(s, t, f):
    """(--accept-stale-fetch-responses) The leader serves ``f``'s Fetch (``f``'s log matches its
    own) as in ``fetch``: it records ``f``'s fetch offset and broker epoch, and answers with its
    records from that offset on and its HWM; but the response is delayed and arrives after any
    number of other events. One delayed response at a time (a bound, like the fault bounds)."""
    lead = fetch_leader(s, f)
    if not s.k_stale_fetch or lead < 0 or s.fr_epoch != 0:
        return False
    mine = s.log[f]
    theirs = s.log[lead]
    if common_prefix(s, mine, theirs) != mine:
        return False  # diverged: ``fetch`` truncates
    offset = popcount(mine)
    leader_records_fetch(s, t, lead, f, offset)
    t.fr_epoch = s.v_epoch[lead]
    t.fr_follower = f
    t.fr_leader = lead
    t.fr_offset = offset
    t.fr_records = theirs & ~records_below(s, theirs, offset)
    t.fr_hwm = s.hwm[lead]
    return True


@njit(cache=True)
def receive_fetch_response(s, t):
    """(--accept-stale-fetch-responses) The follower gets the delayed response. Kafka's fetcher
    still checks that the partition is fetched from the same leader (a new leader means another
    fetcher thread) and that its fetch offset is unchanged; the switch drops only the check that
    the leader epoch is unchanged. A response that passes appends the carried records and sets the
    HWM (capped at the log end); any other is dropped."""
    if s.fr_epoch == 0:
        return False
    f = s.fr_follower
    mine = s.log[f]
    if (s.b_state[f] == RUNNING and s.v_leader[f] == s.fr_leader
            and popcount(mine) == s.fr_offset):
        grown = mine | s.fr_records
        t.log[f] = grown
        t.hwm[f] = min(s.fr_hwm, popcount(grown))
    clear_fetch_response(t)
    normalize_epochs(t)
    return True


@njit(cache=True)
def clear_fetch_response(t):
    t.fr_epoch = 0
    t.fr_follower = 0
    t.fr_leader = 0
    t.fr_offset = 0
    t.fr_records = 0
    t.fr_hwm = 0


@njit(cache=True)
def advance_hwm(s, t, b):
    """Leader ``b`` advances its HWM to the smallest log end offset over its maximal ISR, if the
    min-ISR rule allows. Records below it become committed; acks=all records written in this
    leadership and now covered are acknowledged if the committed ISR is at least min ISR
    (``DelayedProduce``)."""
    if not acting_leader(s, b) or not hwm_may_advance(s, b):
        return False
    new = popcount(s.log[b])
    isr = maximal_isr(s, b)
    for f in range(len(s.log)):
        if f != b and (isr >> f & 1 or waits_for_caught_up(s, b, f)):
            known = s.f_leo[b][f]
            if known == 0:
                return False
            if known - 1 < new:
                new = known - 1
    if new <= s.hwm[b]:
        return False
    covered = records_below(s, s.log[b], new)
    newly = covered & ~records_below(s, s.log[b], s.hwm[b])
    t.hwm[b] = new
    t.committed = s.committed | covered
    if popcount(s.v_isr[b]) >= s.v_min_isr[b]:
        for r in range(len(s.rec_epoch)):
            if newly >> r & 1 and s.rec_acks_all >> r & 1 and s.rec_epoch[r] == s.v_epoch[b]:
                t.acked = t.acked | (1 << r)
    return True


@njit(cache=True)
def waits_for_caught_up(s, b, f):
    """(--replay-known-changes) ``maybeIncrementLeaderHW``'s ``shouldWaitForReplicaToJoinIsr``:
    a follower outside the maximal ISR that caught up less than replica.lag.time.max.ms ago and
    is ISR-eligible (``isReplicaIsrEligible``: it fetched this leadership, its Fetch's broker epoch
    is the one in the leader's metadata, KIP-903's ``isBrokerEpochIsrEligible``, and, under
    k_hwm_wait_checks_fencing, the leader's metadata does not show it fenced or in controlled
    shutdown) holds the HWM back at its log end."""
    if not s.k_replay_known or not s.f_caught[b][f] or s.f_leo[b][f] == 0:
        return False  # no Fetch this leadership: no broker epoch stored, so not eligible
    if s.k_hwm_wait_checks_fencing and s.v_inactive[b] >> f & 1:
        return False
    return not s.k_epoch_check or s.f_gen_age[b][f] == s.v_gen_age[b][f]


@njit(cache=True)
def lag_timeout(s, t, b, f):
    """(--replay-known-changes) replica.lag.time.max.ms passes without follower ``f`` catching up
    with leader ``b``: it no longer holds ``b``'s HWM back. Only for a follower outside ``b``'s
    maximal ISR that is behind ``b``'s log end (at the log end it counts as caught up anyway);
    for ISR members the time-out is part of ``propose_shrink``."""
    if not s.k_replay_known or f == b or not acting_leader(s, b) or not s.f_caught[b][f]:
        return False
    if maximal_isr(s, b) >> f & 1:
        return False
    known = s.f_leo[b][f]
    if known != 0 and known - 1 >= popcount(s.log[b]):
        return False
    t.f_caught[b][f] = 0
    return True


@njit(cache=True)
def send_alter_partition(s, t, b, isr, recovered):
    """Leader ``b`` sends AlterPartition for ``isr`` with, per member, the broker epoch learned
    from its last Fetch (-1, never stale, for members that have not fetched this epoch)."""
    stale = 0
    for m in range(len(s.log)):
        if m != b and isr >> m & 1 and s.f_leo[b][m] > 0 and s.f_gen_age[b][m] > 0:
            stale |= 1 << m
    t.ap_state = AP_REQUEST
    t.ap_from = b
    t.ap_isr = isr
    t.ap_epoch = s.v_epoch[b]
    t.ap_pe_ok = s.v_pe_ok[b]
    t.ap_stale = stale
    t.ap_recovered = recovered
    t.ap_live = 1


@njit(cache=True)
def lagging(s, b, f):
    """Follower ``f`` is not caught up to leader ``b``'s log end offset (or has not fetched in this
    leader epoch): how long it has been so is timing, so it may or may not count as out of sync."""
    known = s.f_leo[b][f]
    return known == 0 or known - 1 < popcount(s.log[b])


@njit(cache=True)
def propose_shrink(s, t, b, out_index):
    """Leader ``b`` proposes removing its out-of-sync followers ``out`` (``out_index + 1`` as a
    set) from the ISR, all in one AlterPartition (``Partition.maybeShrinkIsr``). Out of sync is
    ``replica.lag.time.max.ms`` without catching up to the leader's log end offset: the model has
    no clocks, so any non-empty set of lagging ISR followers may be the one that timed out.
    Fault, bounded by --isr-shrinks (proposals, whatever their size); one AlterPartition in flight."""
    out = out_index + 1
    if s.isr_shrinks_used >= s.k_max_isr_shrinks or out >> b & 1 or not acting_leader(s, b):
        return False
    if s.ap_state != AP_NONE or s.v_recovering[b] or out & ~s.v_isr[b]:
        return False
    for f in range(len(s.log)):
        if out >> f & 1 and not lagging(s, b, f):
            return False
    t.isr_shrinks_used = s.isr_shrinks_used + 1
    if s.k_replay_known:
        for f in range(len(s.log)):
            if out >> f & 1:
                t.f_caught[b][f] = 0  # out of sync: its lag time has run out
    send_alter_partition(s, t, b, s.v_isr[b] & ~out, 0)
    return True


@njit(cache=True)
def propose_expand(s, t, b, f):
    """Leader ``b`` proposes adding follower ``f`` (PROTOCOL rule 6): ``f`` fetched in this leader
    epoch, reached the HWM and the epoch start offset (each guard can be switched off), and the
    broker epoch of its Fetch matches the leader's metadata (KIP-903, unless switched off); under
    the kafka-* presets also ``f`` is neither fenced nor in controlled shutdown in the leader's
    metadata (``Partition.canAddReplicaToIsr`` -> ``isReplicaIsrEligible``)."""
    if f == b or not acting_leader(s, b) or s.ap_state != AP_NONE or s.v_recovering[b]:
        return False
    if s.v_isr[b] >> f & 1:
        return False
    known = s.f_leo[b][f]
    if known == 0:
        return False
    if s.k_hwm_guard and known - 1 < s.hwm[b]:
        return False
    if s.k_eso_guard and known - 1 < s.eso[b]:
        return False
    if s.k_epoch_check and s.f_gen_age[b][f] != s.v_gen_age[b][f]:
        return False
    if s.k_expand_checks_fencing and s.v_inactive[b] >> f & 1:
        return False
    send_alter_partition(s, t, b, s.v_isr[b] | (1 << f), 0)
    return True


@njit(cache=True)
def propose_recovered(s, t, b):
    """A leader elected uncleanly reports recovery done (LeaderRecoveryState RECOVERED): the
    kip-966 model's step; Kafka's leader marks the partition recovered itself and says so in its
    next AlterPartition (``Partition.makeLeader``; k_leader_marks_recovered)."""
    if not acting_leader(s, b) or s.ap_state != AP_NONE or not s.v_recovering[b]:
        return False
    send_alter_partition(s, t, b, s.v_isr[b], 1)
    return True


@njit(cache=True)
def receive_alter_partition_response(s, t):
    """The sender gets the AlterPartition response. If it still waits for it (its view did not move
    on meanwhile), an accepted change becomes its committed ISR and partition epoch; a rejected one
    reverts its pending ISR (KIP-903: INELIGIBLE_REPLICA); one that Kafka's leader does not revert
    on (``unsettled``: FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INVALID_REQUEST, or an
    accepted change with a newer leader epoch) leaves the pending ISR in place until the sender's
    next metadata update (``awaiting_metadata``). With --fix-await-metadata an accepted
    response waits until the sender's metadata holds the change (which then supersedes it); with
    --fix-min-isr-in-partition-state it also installs the min ISR the controller used; with
    --replay-known-changes the leader's metadata will replay the change (``v_ahead``). With
    --hwm-under-partition-lock or --replay-known-changes the leader advances its HWM in the same
    step, as ``handleAlterPartitionUpdate`` does under the partition's write lock (a separate,
    later HWM step would let an expansion pass the HWM guard with a stale HWM, which the replay
    makes unsafe; docs/model.md section 6)."""
    if s.ap_state != AP_ACCEPTED and s.ap_state != AP_REJECTED and s.ap_state != AP_UNSETTLED:
        return False
    b = s.ap_from
    if s.ap_state == AP_UNSETTLED and s.ap_live:
        # Partition.handleAlterPartitionError (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
        # INVALID_REQUEST) or handleAlterPartitionUpdate (a newer leader epoch): the pending
        # ISR stays, counted in the maximal ISR, until b's next metadata update
        clear_alter_partition(t)
        t.ap_state = AP_AWAITING_METADATA
        t.ap_from = b
        t.ap_isr = s.ap_isr
        t.ap_live = 1
        normalize_epochs(t)
        return True
    installed = s.ap_live and s.ap_state == AP_ACCEPTED
    if installed:
        if s.k_fix_await_metadata and not s.v_pe_ok[b]:
            return False  # the response waits until b's metadata holds the change
        t.v_isr[b] = s.ap_isr
        t.v_pe_ok[b] = s.ap_pe_ok
        if s.k_fix_min_isr_in_partition:
            t.v_min_isr[b] = s.ap_min_isr
        if s.k_replay_known and not s.k_fix_await_metadata:
            t.v_ahead[b] = 1  # its metadata will replay this change (load_view)
        if s.ap_recovered:
            t.v_recovering[b] = 0
    clear_alter_partition(t)
    if installed and s.k_hwm_under_lock:
        advance_hwm(t, t, b)  # handleAlterPartitionUpdate ends with maybeIncrementLeaderHW, under the lock
    normalize_epochs(t)
    return True
