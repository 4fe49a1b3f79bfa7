"""Faults and restarts: unclean shutdowns (lossy or not), controlled shutdown, restart + registration.

Each fault is bounded by its option (``*_used`` counters); restarting is healing and is not.
"""

from __future__ import annotations

from numba import njit

from kraftcheck.specs.kafka.broker import (clear_fetch_response, clear_leader_state, drop_pending, load_view,
                                          replayed_controlled_shutdowns)
from kraftcheck.specs.kafka.controller import (active_brokers, finish_partition_change, may_elect_after_removal,
                                              remove_from_isr)
from kraftcheck.specs.kafka.state import AP_REQUEST, OFFLINE_CLEAN, OFFLINE_UNCLEAN, RUNNING, normalize_epochs, popcount, records_below


@njit(cache=True)
def stop_broker(s, t, b, keep, state):
    """``b`` stops, keeping the first ``keep`` records of its log; all its memory is gone, the
    responses its fetchers wait for with it."""
    n = len(s.log)
    t.b_state[b] = state
    t.log[b] = records_below(s, s.log[b], keep)
    if s.fr_epoch != 0 and s.fr_follower == b:
        clear_fetch_response(t)
    t.hwm[b] = min(s.hwm[b], keep)
    t.v_leader[b] = n
    t.v_epoch[b] = 0
    clear_leader_state(t, b)
    drop_pending(s, t, b)
    if s.k_new_leader_window:
        t.f_cfg_min_isr[b] = 0  # a restart loads the config anew


@njit(cache=True)
def lossy_shutdown(s, t, b, keep):
    """Unclean shutdown of ``b`` losing its unflushed suffix: it keeps only ``keep`` records
    (fewer than it has). The controller notices only later (session timeout or registration).
    Bounded by --lossy-shutdowns."""
    if s.lossy_shutdowns_used >= s.k_max_lossy_shutdowns or s.b_state[b] != RUNNING:
        return False
    if keep >= popcount(s.log[b]):
        return False
    t.lossy_shutdowns_used = s.lossy_shutdowns_used + 1
    stop_broker(s, t, b, keep, OFFLINE_UNCLEAN)
    normalize_epochs(t)
    return True


@njit(cache=True)
def lossless_shutdown(s, t, b):
    """Unclean shutdown of ``b`` that happens to lose nothing (no clean-shutdown file is written).
    Bounded by --lossless-shutdowns."""
    if s.lossless_shutdowns_used >= s.k_max_lossless_shutdowns or s.b_state[b] != RUNNING:
        return False
    t.lossless_shutdowns_used = s.lossless_shutdowns_used + 1
    stop_broker(s, t, b, popcount(s.log[b]), OFFLINE_UNCLEAN)
    normalize_epochs(t)
    return True


@njit(cache=True)
def clean_shutdown(s, t, b):
    """Controlled shutdown of ``b``: the controller removes it from the ISR (a clean replica may
    join the ELR) and moves leadership; ``b`` flushes its log, writes its broker epoch to the
    clean-shutdown file and stops; it is fenced. Under the kafka-* presets (k_stop_fenced_cleanly)
    a fenced ``b`` shuts down so too: it is let go at once (``calculateNextBrokerState``: FENCED
    with wantShutDown is SHUTDOWN_NOW; ``handleBrokerFenced`` changes nothing more), or, if the
    controller does not answer, ``BrokerServer.shutdown`` goes on after its timeout; either way
    ``LogManager.shutdown`` writes the clean-shutdown file with the epoch on record. Bounded by
    --clean-shutdowns."""
    return clean_shutdown_electing(s, t, b, -1)


@njit(cache=True)
def clean_shutdown_electing(s, t, b, leader):
    """``clean_shutdown``, electing ``leader`` (--election any)."""
    if s.clean_shutdowns_used >= s.k_max_clean_shutdowns or s.b_state[b] != RUNNING:
        return False
    if s.c_fenced >> b & 1 and (not s.k_stop_fenced_cleanly or s.c_shutting_down >> b & 1):
        # the kip-966 model lets only an unfenced broker shut down cleanly; one fenced while in
        # controlled shutdown finishes with complete_controlled_shutdown
        return False
    if s.k_cs_two_steps and (s.c_leader == b or s.c_shutting_down >> b & 1):
        # Kafka lets an unfenced broker go at once only when it leads nothing
        # (BrokerHeartbeatManager.calculateNextBrokerState: SHUTDOWN_NOW); a leader takes the two
        # steps below, and one in controlled shutdown finishes with complete_controlled_shutdown
        return False
    if not may_elect_after_removal(s, b, 0, s.c_fenced | (1 << b), leader):
        return False
    t.clean_shutdowns_used = s.clean_shutdowns_used + 1
    t.c_fenced = s.c_fenced | (1 << b)
    remove_from_isr(t, b, 0, leader)
    finish_partition_change(s, t)
    stop_broker(s, t, b, popcount(s.log[b]), OFFLINE_CLEAN)
    normalize_epochs(t)
    return True


@njit(cache=True)
def begin_controlled_shutdown(s, t, b):
    """(--controlled-shutdown-in-two-steps) Leader ``b`` heartbeats with wantShutDown; since it
    leads a partition the controller moves it to CONTROLLED_SHUTDOWN
    (``BrokerHeartbeatManager.calculateNextBrokerState``) and ``ReplicationControlManager.
    handleBrokerInControlledShutdown`` writes the registration change (in controlled shutdown) and
    a partition change without ``b`` in the ISR (a clean replica may join the ELR) with a new
    leader that is not ``b`` (``generateLeaderAndIsrUpdates``). ``b`` keeps running; it is not
    active (``ClusterControlManager.isActive``): not electable, and an AlterPartition naming it is
    INELIGIBLE_REPLICA. Bounded by --clean-shutdowns (which counts controlled shutdowns begun)."""
    return begin_controlled_shutdown_electing(s, t, b, -1)


@njit(cache=True)
def begin_controlled_shutdown_electing(s, t, b, leader):
    """``begin_controlled_shutdown``, electing ``leader`` (--election any)."""
    bit = 1 << b
    if not s.k_cs_two_steps or s.clean_shutdowns_used >= s.k_max_clean_shutdowns or s.b_state[b] != RUNNING:
        return False
    if s.c_leader != b or (s.c_fenced | s.c_shutting_down) & bit:
        return False
    if not may_elect_after_removal(s, b, 0, s.c_fenced | bit, leader):
        return False
    t.clean_shutdowns_used = s.clean_shutdowns_used + 1
    t.c_shutting_down = s.c_shutting_down | bit
    remove_from_isr(t, b, 0, leader)
    finish_partition_change(s, t)
    # the record just written is b's controlledShutdownOffset: every broker active now (unfenced,
    # not shutting down) must replay it before b is let go; a broker that hosts no replica has no
    # view in the model to catch up, and is not waited for (an earlier let-go: a superset)
    t.c_cs_waiting[b] = active_brokers(t) & t.c_replicas
    normalize_epochs(t)
    return True


@njit(cache=True)
def complete_controlled_shutdown(s, t, b):
    """(--controlled-shutdown-in-two-steps) ``b``, in controlled shutdown and leading nothing, is
    let go (SHUTDOWN_NOW): the controller fences it (``handleBrokerFenced``, unless a session
    timeout fenced it already, after which a heartbeat asking to shut down gets SHUTDOWN_NOW at
    once), and ``b`` flushes its log, writes the clean-shutdown file and stops. An unfenced ``b``
    waits until every broker still active of those active when it began has replayed the
    controlled-shutdown record (``BrokerHeartbeatManager.calculateNextBrokerState``:
    ``controlledShutdownOffset <= lowestActiveOffset``; docs/model.md section 2d); a fenced one
    does not (its ``controlledShutdownOffset`` is reset)."""
    return complete_controlled_shutdown_electing(s, t, b, -1)


@njit(cache=True)
def complete_controlled_shutdown_electing(s, t, b, leader):
    """``complete_controlled_shutdown``, electing ``leader`` (--election any)."""
    bit = 1 << b
    if s.b_state[b] != RUNNING or not s.c_shutting_down & bit:
        return False
    if not s.c_fenced & bit and s.c_cs_waiting[b] & active_brokers(s):
        return False  # an active broker has not replayed the controlled-shutdown record yet
    if not may_elect_after_removal(s, b, 0, s.c_fenced | bit, leader):
        return False
    t.c_shutting_down = s.c_shutting_down & ~bit
    t.c_cs_waiting[b] = 0
    t.c_fenced = s.c_fenced | bit
    remove_from_isr(t, b, 0, leader)
    finish_partition_change(s, t)
    stop_broker(s, t, b, popcount(s.log[b]), OFFLINE_CLEAN)
    normalize_epochs(t)
    return True


@njit(cache=True)
def restart(s, t, b):
    """Offline ``b`` starts, registers and catches up with metadata (PROTOCOL rule 4).

    It gets a new broker epoch: every copy of its old one (leader views, Fetch states, the
    AlterPartition in flight) becomes one registration older. The controller compares the
    clean-shutdown file's epoch with its record; on a mismatch (unclean shutdown) it removes ``b``
    from ISR and ELR before persisting the registration (kafka-4.x, kip-966). The new incarnation
    is fenced until it heartbeats (``unfence``); its recovery reply, if any, is dropped.
    """
    return restart_electing(s, t, b, -1)


@njit(cache=True)
def restart_electing(s, t, b, leader):
    """``restart``, electing ``leader`` (--election any)."""
    if s.b_state[b] == RUNNING:
        return False
    n = len(s.log)
    bit = 1 << b
    clean = s.b_state[b] == OFFLINE_CLEAN
    unclean = (not clean) and s.k_unclean_detect != 0 and ((s.c_isr | s.c_elr) & bit) != 0
    if not may_elect_after_removal(s, b, 1 if unclean else 0, s.c_fenced | bit, leader):
        return False
    for x in range(n):
        if s.v_leader[x] == x and s.b_state[x] == RUNNING:
            t.v_gen_age[x][b] = s.v_gen_age[x][b] + 1
            if s.f_leo[x][b] > 0:
                t.f_gen_age[x][b] = s.f_gen_age[x][b] + 1
    if s.ap_state == AP_REQUEST and s.ap_isr & bit:
        t.ap_stale = s.ap_stale | bit
    t.c_fenced = s.c_fenced | bit
    t.c_shutting_down = s.c_shutting_down & ~bit  # a new registration is not in controlled shutdown
    t.c_cs_waiting[b] = 0
    t.rec_replied = s.rec_replied & ~bit
    t.rep_epoch[b] = 0
    t.rep_leo[b] = 0
    if unclean:
        if s.c_isr & bit or not s.k_keep_unclean_in_elr:
            t.unclean_removed = 1
        remove_from_isr(t, b, 1, leader)
    else:
        remove_from_isr(t, b, 0, leader)
    if t.c_isr & bit and not clean:
        # kafka-3.5 keeps the last ISR member across an unclean restart (KIP-903's "notable
        # exception"): an ISR member whose epoch changed without any check of its log
        t.isr_stale = t.isr_stale | bit
    finish_partition_change(s, t)
    t.b_state[b] = RUNNING
    load_view(t, t, b)
    replayed_controlled_shutdowns(t, t, b)
    normalize_epochs(t)
    return True
