"""The state of the Kafka replication model: field layout, value codes and small bit helpers.

One partition replicated on every broker ``0..N-1``. Records are numbered ``0..R-1`` in produce
order. Each record is appended once, by one leader, at one offset, and every copy of it sits at
that offset, so a log (the offsets ``0..k-1``, one record each) is held as the bitmask of the
records it holds (bit ``r`` = record ``r`` present), ordered by ``rec_offset``. The epoch a record
was written with is global too (``rec_epoch``), so a log entry ``(record, leader epoch)`` needs no
per-broker epoch bits. Logs obey log matching (two logs holding a record hold the same records
before it) unless followers accept stale fetch responses (``--accept-stale-fetch-responses``);
``common_prefix`` is exact either way.

Epochs that are only ever compared with the controller's current value are held as "is it still
current" bits or ages rather than counters (partition epoch: ``v_pe_ok``, ``ap_pe_ok``; broker
epochs: ages ``v_gen_age``, ``f_gen_age``, ``ap_stale``): this is exact, because the protocol only
tests them for equality with the current value (or, for broker epochs, with each other, which
equal ages decide), and it keeps states that differ only in how many epochs went by apart from
each other out of the state space.

Every helper here is a numba function usable interpreted on plain Python objects. The codes and
helpers the invariants read as well are defined in ``invariants/kafka_state.py``, which the
properties and the spec may both import (the invariants sit below the spec that lists them).
"""

from __future__ import annotations

from numba import njit

from kraftcheck.checker.spec import Bool, Const, Enum, Int, Set
# the broker-state and HWM-rule codes and the bit helpers the properties read too (they sit below the spec)
from kraftcheck.invariants.kafka_state import (BROKER_STATES, HWM_ANY, HWM_MAXIMAL, HWM_RULES,  # noqa: F401
                                               HWM_STRICT, OFFLINE_CLEAN, OFFLINE_UNCLEAN, RUNNING, popcount,
                                               records_below)

# the one AlterPartition exchange in flight. "rejected": a response the sender reverts on (Kafka:
# INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED); "unsettled": a rejection the sender does not revert
# on (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INVALID_REQUEST) or an accepted response it
# ignores (a newer leader epoch); "awaiting_metadata": the sender keeps that pending ISR until its
# next metadata update (``Partition.handleAlterPartitionError``; only with k_pending_until_metadata)
AP_NONE, AP_REQUEST, AP_ACCEPTED, AP_REJECTED, AP_UNSETTLED, AP_AWAITING_METADATA = 0, 1, 2, 3, 4, 5
AP_STATES = ("none", "request", "accepted", "rejected", "unsettled", "awaiting_metadata")

# presets and switch values held in Const fields
MIN_ISR_KIP, MIN_ISR_KAFKA, MIN_ISR_KEEP_ELR = 0, 1, 2
MIN_ISR_POLICIES = ("kip", "kafka", "keep-elr")
FALLBACK_NONE, FALLBACK_LAST_LEADER, FALLBACK_UNCLEAN = 0, 1, 2
FALLBACKS = ("none", "last-leader", "unclean")
RECOVERY_OFF, RECOVERY_BALANCED, RECOVERY_AGGRESSIVE = 0, 1, 2
RECOVERIES = ("none", "balanced", "aggressive")


@njit(cache=True)
def last_record(s, log):
    """The record at the last offset of ``log``, or -1 for an empty log."""
    end = popcount(log) - 1
    for r in range(len(s.rec_offset)):
        if log >> r & 1 and s.rec_offset[r] == end:
            return r
    return -1


@njit(cache=True)
def last_epoch(s, log):
    """The leader epoch of the last entry of ``log`` (0 for an empty log)."""
    r = last_record(s, log)
    if r < 0:
        return 0
    return s.rec_epoch[r]


@njit(cache=True)
def common_prefix(s, mine, theirs):
    """The longest prefix of ``mine`` that ``theirs`` holds entry for entry (same record at each
    offset). Under log matching this is ``mine & theirs``; a stale fetch response can break log
    matching, and then only the records below the first entry ``theirs`` lacks are common."""
    first_missing = popcount(mine)
    for r in range(len(s.rec_offset)):
        if mine >> r & 1 and not theirs >> r & 1 and s.rec_offset[r] < first_missing:
            first_missing = s.rec_offset[r]
    return records_below(s, mine, first_missing)


@njit(cache=True)
def running(s, b):
    return s.b_state[b] == RUNNING


def subset_labels(names: tuple[str, ...]) -> tuple[str, ...]:
    """Labels of the non-empty subsets of ``names``, subset ``i + 1`` (a bitmask) at index ``i``:
    ``b3``, ``b2+b3``..."""
    return tuple("+".join(name for k, name in enumerate(names) if mask >> k & 1)
                 for mask in range(1, 1 << len(names)))


def max_leader_epoch(fences: int, shutdowns: int, preferred_elections: int = 0, isr_shrinks: int = 0,
                     reassignments: int = 0) -> int:
    """Largest leader epoch reachable: epoch 1 initially, and every leader change bumps it.

    A leader is lost at most once per fault (fence or shutdown) and every leaderless period ends
    with at most one election, so there are at most 2 * (fences + shutdowns) leader changes, plus
    one per preferred-leader election. ``isr_shrinks`` adds one per proposed shrink, where a shrink
    bumps the leader epoch (metadata versions below 3.6, kafka-3.5); the ISR shrink of a fence or
    shutdown that keeps the leader is then counted by that fault's second bump. A reassignment
    ends once, completed or cancelled, with one bump (a new leader or the same one's epoch); a
    cancellation can leave the partition leaderless, which one more election ends: two each.
    """
    return 1 + 2 * (fences + shutdowns) + preferred_elections + isr_shrinks + 2 * reassignments


def build_fields(n: int, records: int, max_epoch: int, max_age: int, consts: dict[str, int],
                 bounds: dict[str, int]) -> list:
    """Every field of the model for ``n`` brokers and ``records`` records.

    ``consts`` are the protocol switches (free in the packed state); ``bounds`` the fault budgets,
    whose counters (``*_used``) are state fields with domain ``0..bound``.
    """
    bs = tuple(f"b{i + 1}" for i in range(n))
    rs = tuple(f"r{i + 1}" for i in range(records))
    broker_or_none = bs + ("none",)  # value n stands for "no broker"
    fields = [Const(name, value, doc=f"switch {name}") for name, value in consts.items()]
    fields += [
        # -- controller
        Set("c_isr", bs, doc="ISR committed by the controller"),
        Set("c_elr", bs, doc="Eligible Leader Replicas"),
        Set("c_lkelr", bs, doc="LastKnownELR (kip-966 only)"),
        Enum("c_leader", broker_or_none, doc="partition leader"),
        Enum("c_last_leader", broker_or_none, doc="last known leader (kafka-4.x fallback)"),
        Int("c_epoch", max_epoch, doc="leader epoch"),
        Int("c_min_isr", n, doc="configured min.insync.replicas"),
        Set("c_fenced", bs, doc="fenced brokers"),
        Bool("c_recovering", doc="leader recovery state RECOVERING (after an unclean election)"),
        Set("rec_replied", bs, doc="unclean recovery: replicas whose GetReplicaLogInfo reply was accepted"),
        Int("rep_epoch", max_epoch, (n,), index_labels=bs, doc="reply: last written leader epoch"),
        Int("rep_leo", records, (n,), index_labels=bs, doc="reply: log end offset"),
        # -- the AlterPartition exchange in flight (request, then response)
        Enum("ap_state", AP_STATES),
        Int("ap_from", n - 1, doc="sender of the AlterPartition (index; 0 when none in flight)"),
        Set("ap_isr", bs, doc="proposed ISR (the sender's maximal ISR)"),
        Int("ap_epoch", max_epoch, doc="leader epoch of the request"),
        Bool("ap_pe_ok", doc="the request's (response's) partition epoch is the controller's current one"),
        Set("ap_stale", bs, doc="proposed members whose broker epoch in the request is not current"),
        Bool("ap_recovered", doc="the request marks leader recovery done"),
        Bool("ap_live", doc="the sender still waits for this exchange (its pending ISR)"),
        # -- brokers
        Enum("b_state", BROKER_STATES, (n,), index_labels=bs, doc="running / offline with or without clean-shutdown file"),
        Set("log", rs, (n,), index_labels=bs, doc="log as a set of records (an increasing sequence)"),
        Int("hwm", records, (n,), index_labels=bs, doc="high watermark"),
        Enum("v_leader", broker_or_none, (n,), index_labels=bs, doc="metadata view: leader"),
        Int("v_epoch", max_epoch, (n,), index_labels=bs, doc="metadata view: leader epoch"),
        Set("v_isr", bs, (n,), index_labels=bs, doc="leader only: ISR it knows committed"),
        Int("v_min_isr", n, (n,), index_labels=bs, doc="leader only: min.insync.replicas it knows"),
        Bool("v_pe_ok", (n,), index_labels=bs, doc="leader only: its partition epoch is current"),
        Bool("v_recovering", (n,), index_labels=bs, doc="leader only: partition is RECOVERING in its view"),
        Int("v_gen_age", max_age, (n, n), index_labels=bs,
            doc="leader only: registrations of each broker its metadata view misses"),
        Int("f_leo", records + 1, (n, n), index_labels=bs,
            doc="leader only: follower fetch offset + 1 learned from Fetch (0 = no fetch this epoch)"),
        Int("f_gen_age", max_age, (n, n), index_labels=bs,
            doc="leader only: how many registrations ago the broker epoch of that Fetch was"),
        Int("eso", records, (n,), index_labels=bs, doc="leader only: leader epoch start offset"),
        # -- records and history (ghost) variables
        Int("rec_epoch", max_epoch, (records,), index_labels=rs, doc="leader epoch a record was written in (0 = not yet produced)"),
        Int("rec_offset", records - 1, (records,), index_labels=rs, doc="offset a record was written at"),
        Set("rec_acks_all", rs, doc="records produced with acks=all (others: acks=1, acknowledged on append)"),
        Set("acked", rs, doc="acks=all records acknowledged to the producer"),
        Set("committed", rs, doc="records that were below an acting leader's HWM (consumers may have read them)"),
        Int("fewest_min_isr", n, doc="smallest min.insync.replicas in force so far"),
        Bool("unclean_removed", doc="a registration revealed an unclean shutdown of an ISR or ELR member"),
        Set("isr_stale", bs, doc="ISR members admitted with a broker epoch that was not current"),
    ]
    # The one delayed fetch response in flight, only under --accept-stale-fetch-responses.
    # Without the switch a fetch is one atomic round trip (docs/model.md section 6) and these are
    # constants 0: no bits, and traces do not show them.
    if consts.get("k_stale_fetch"):
        fields += [
            Int("fr_epoch", max_epoch, doc="delayed fetch response: leader epoch of the request (0 = none in flight)"),
            Int("fr_follower", n - 1, doc="delayed fetch response: the follower it goes to"),
            Int("fr_leader", n - 1, doc="delayed fetch response: the leader that served it"),
            Int("fr_offset", records, doc="delayed fetch response: the fetch offset it answers"),
            Set("fr_records", rs, doc="delayed fetch response: the leader's records from that offset on"),
            Int("fr_hwm", records, doc="delayed fetch response: the leader's HWM"),
        ]
    else:
        fields += [Const(name, 0, doc="no delayed fetch response without --accept-stale-fetch-responses")
                   for name in ("fr_epoch", "fr_follower", "fr_leader", "fr_offset", "fr_records", "fr_hwm")]
    # The config delta a leader still has to apply in its current metadata publish (the topic
    # delta comes first, BrokerMetadataPublisher.onMetadataUpdate): only when min ISR can change
    # and the leader takes min ISR from the config after the topic delta.
    if publish_window(consts, bounds):
        fields.append(Int("v_cfg_next", n, (n,), index_labels=bs,
                          doc="leader only: min ISR of the config delta its publish has yet to apply (0 = none)"))
    else:
        # one value, no bits (a Const cannot have a shape)
        fields.append(Int("v_cfg_next", 0, (n,), index_labels=bs,
                          doc="no config delta is ever pending: min ISR never changes, or no window"))
    # --new-leader-publish-window: the min ISR of every non-leader's log config (a leader's is v_min_isr)
    if consts.get("k_new_leader_window"):
        fields.append(Int("f_cfg_min_isr", n, (n,), index_labels=bs,
                          doc="non-leader: min ISR of its log config, from the last config delta it applied (0 offline)"))
    else:
        # one value, no bits (a Const cannot have a shape)
        fields.append(Int("f_cfg_min_isr", 0, (n,), index_labels=bs,
                          doc="followers' config not kept without --new-leader-publish-window"))
    # --fix-min-isr-in-partition-state: the min ISR carried by the partition record and by the
    # AlterPartition response
    if consts.get("k_fix_min_isr_in_partition"):
        fields += [Int("c_part_min_isr", n, doc="min ISR written with the last partition record"),
                   Int("ap_min_isr", n, doc="min ISR carried by the AlterPartition response (0 = none)")]
    else:
        fields += [Const(name, 0, doc="no min ISR in the partition state without --fix-min-isr-in-partition-state")
                   for name in ("c_part_min_isr", "ap_min_isr")]
    # --replay-known-changes: a change learned by RPC and not yet replayed from metadata, and
    # Kafka's lastCaughtUpTimeMs as "caught up less than replica.lag.time.max.ms ago"
    if consts.get("k_replay_known"):
        fields += [Bool("v_ahead", (n,), index_labels=bs,
                        doc="leader only: its ISR came from an AlterPartition response its metadata has not reached"),
                   Bool("f_caught", (n, n), index_labels=bs,
                        doc="leader only: follower caught up with it less than replica.lag.time.max.ms ago")]
    else:
        # one value, no bits (a Const cannot have a shape)
        fields += [Int("v_ahead", 0, (n,), index_labels=bs, doc="no replay without --replay-known-changes"),
                   Int("f_caught", 0, (n, n), index_labels=bs, doc="no caught-up rule without --replay-known-changes")]
    # The kafka-* presets' leader reads which brokers its metadata shows fenced or in controlled
    # shutdown (Partition.isReplicaIsrEligible); kip-966 does not, and has no field
    if consts.get("k_expand_checks_fencing"):
        fields.append(Set("v_inactive", bs, (n,), index_labels=bs,
                          doc="leader only: other brokers its metadata shows fenced or in controlled shutdown"))
    else:
        # one value, no bits (a Const cannot have a shape)
        fields.append(Int("v_inactive", 0, (n,), index_labels=bs,
                          doc="the kip-966 leader does not read fencing from its metadata"))
    # Replica sets (--replication-factor below --brokers) and reassignments (--reassignments):
    # the partition's replicas (Kafka's ``replicas``: during a reassignment the target set plus the
    # replicas being removed), the adding and removing replicas. With every broker a replica they
    # are constants (no bits), so the default model's state space is the one without them.
    everyone = (1 << n) - 1
    if consts.get("k_rf", n) < n:
        fields += [
            Set("c_replicas", bs, doc="replica set (during a reassignment: target plus removing replicas)"),
            Set("c_adding", bs, doc="replicas a reassignment is adding"),
            Set("c_removing", bs, doc="replicas a reassignment is removing"),
        ]
        if consts.get("k_max_reassignments"):
            fields.append(Int("reassignments_used", consts["k_max_reassignments"],
                              doc="reassignments started so far (bounded by --reassignments)"))
        else:
            fields.append(Const("reassignments_used", 0, doc="no reassignment without --reassignments"))
    else:
        fields += [Const("c_replicas", everyone, doc="every broker is a replica"),
                   Const("c_adding", 0, doc="no reassignment: every broker is a replica"),
                   Const("c_removing", 0, doc="no reassignment: every broker is a replica"),
                   Const("reassignments_used", 0, doc="no reassignment: every broker is a replica")]
    # --controlled-shutdown-in-two-steps: the brokers the controller has in controlled shutdown
    if consts.get("k_cs_two_steps"):
        fields.append(Set("c_shutting_down", bs, doc="brokers in controlled shutdown (registered, unfenced or "
                                                      "fenced, not electable, not eligible for the ISR)"))
        fields.append(Set("c_cs_waiting", bs, (n,), index_labels=bs,
                          doc="per broker in controlled shutdown: the brokers active when it began whose "
                              "metadata has not reached its controlled-shutdown record (lowestActiveOffset)"))
    else:
        fields.append(Const("c_shutting_down", 0, doc="controlled shutdown is one step without "
                                                      "--controlled-shutdown-in-two-steps"))
        # one value, no bits (a Const cannot have a shape)
        fields.append(Int("c_cs_waiting", 0, (n,), index_labels=bs,
                          doc="controlled shutdown is one step without --controlled-shutdown-in-two-steps"))
    # --controller-failovers: a state counter only when the fault exists, so the spaces without it
    # are the ones before it existed
    if consts.get("k_max_controller_failovers"):
        fields.append(Int("controller_failovers_used", consts["k_max_controller_failovers"],
                          doc="controller failovers that lost an AlterPartition response (bounded by "
                              "--controller-failovers)"))
    else:
        fields.append(Const("controller_failovers_used", 0, doc="no controller failover without --controller-failovers"))
    for name, bound in bounds.items():
        fields.append(Int(f"{name}_used", bound, doc=f"{name} so far (bounded by --{name.replace('_', '-')})"))
    return fields


def publish_window(consts: dict[str, int], bounds: dict[str, int]) -> bool:
    """Whether a leader can be caught between the topic delta and the config delta of one
    metadata publish: min ISR can change, and the leader reads it from the config applied after
    the topic delta (not with --fix-config-before-topic or --fix-min-isr-in-partition-state)."""
    return bool(bounds.get("min_isr_changes") and not consts.get("k_fix_config_first")
                and not consts.get("k_fix_min_isr_in_partition"))


@njit(cache=True)
def normalize_epochs(t):
    """Renumber the leader epochs still held anywhere by their rank (1, 2, ...), keeping 0.

    The protocol only compares leader epochs with each other (equal, greater) and creates new ones
    as the controller's epoch + 1, which is the largest held; so renumbering them in order is a
    bisimulation, and states that differ only in how many elections happened before become one.
    """
    present = 1 << t.c_epoch
    n = len(t.log)
    for b in range(n):
        present |= 1 << t.v_epoch[b]
        present |= 1 << t.rep_epoch[b]
    for r in range(len(t.rec_epoch)):
        present |= 1 << t.rec_epoch[r]
    present |= 1 << t.ap_epoch
    present |= 1 << t.fr_epoch
    present &= ~1
    t.c_epoch = popcount(present & ((2 << t.c_epoch) - 1))
    t.ap_epoch = popcount(present & ((2 << t.ap_epoch) - 1)) if t.ap_epoch else 0
    for b in range(n):
        if t.v_epoch[b]:
            t.v_epoch[b] = popcount(present & ((2 << t.v_epoch[b]) - 1))
        if t.rep_epoch[b]:
            t.rep_epoch[b] = popcount(present & ((2 << t.rep_epoch[b]) - 1))
    for r in range(len(t.rec_epoch)):
        if t.rec_epoch[r]:
            t.rec_epoch[r] = popcount(present & ((2 << t.rec_epoch[r]) - 1))
    if t.fr_epoch:
        t.fr_epoch = popcount(present & ((2 << t.fr_epoch) - 1))
