"""Options of the Kafka model (each becomes a ``kraftcheck check`` option) and the presets.

``switches()`` turns a preset plus its overriding switches into the Const fields the actions read,
so a protocol variant is a few lines here and, at most, one branch in an action.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.spec import param
from kraftcheck.specs.kafka.state import (FALLBACK_LAST_LEADER, FALLBACK_NONE, FALLBACK_UNCLEAN, HWM_ANY, HWM_MAXIMAL,
                               HWM_STRICT, MIN_ISR_POLICIES, RECOVERIES, RECOVERY_OFF)

ELECTIONS = ("ordered", "any")
PROTOCOLS = ("kafka-3.5", "kafka-4.0", "kafka-4.1", "kafka-4.2", "kafka-4.3", "kafka-4.x", "kip-966")
# presets without Eligible Leader Replicas: 3.5, and 4.0 (the ELR feature ships off)
WITHOUT_ELR = ("kafka-3.5", "kafka-4.0")
# presets with ELR and Kafka's last-known-leader fallback, one per release branch read (docs/model.md
# section 2f): 4.1 (ELR on for new clusters), 4.2 (one model with 4.1), 4.3 (4.2 plus KAFKA-19975's
# reassignment completion) and kafka-4.x, the newest trunk read (one model with 4.3)
KAFKA_WITH_ELR = ("kafka-4.1", "kafka-4.2", "kafka-4.3", "kafka-4.x")
# presets whose reassignment completes once the adding replicas are in the ISR (KAFKA-19975,
# 3d267d4536: on the 4.3 and 4.4 branches and trunk, not on 4.2)
COMPLETE_ON_ADDING = ("kafka-4.3", "kafka-4.x")
# presets that follow Kafka's code (every preset but the KIP's design)
KAFKA_CODE = ("kafka-3.5", "kafka-4.0") + KAFKA_WITH_ELR


@dataclass(frozen=True)
class KafkaParams:
    brokers: int = param(3, "number of brokers, all replicas of the partition", minimum=2, maximum=5)
    min_isr: int = param(2, "min.insync.replicas at start (in force: at most --brokers)", minimum=1, maximum=5)
    protocol: str = param("kip-966", "protocol preset", choices=PROTOCOLS)
    recovery: Optional[str] = param(None, "kip-966 unclean recovery strategy (default balanced)",
                                    choices=RECOVERIES)
    unclean_election: bool = param(False, "unclean.leader.election.enable (kafka presets)")
    no_strict_min_isr: bool = param(False, "the HWM advances even with the ISR below min ISR")
    hwm_from_maximal_isr: bool = param(False, "min ISR check counts the leader's maximal ISR, not the committed one")
    keep_unclean_in_elr: bool = param(False, "the controller keeps an uncleanly restarted broker in the ELR")
    no_broker_epoch_check: bool = param(False, "KIP-903 off: no broker epochs in AlterPartition (leader and controller)")
    no_partition_epoch_check: bool = param(False, "the controller accepts AlterPartition with a stale partition epoch")
    min_isr_policy: Optional[str] = param(None, "ELR on a min.insync.replicas change (default: kafka for "
                                          "kafka-4.1/4.2/4.3/4.x, else kip)",
                                          choices=MIN_ISR_POLICIES)
    balanced_replies: Optional[int] = param(None, "Balanced recovery elects after K replies instead of every LastKnownELR member")
    no_expansion_hwm_guard: bool = param(False, "ISR expansion without the follower reaching the HWM")
    no_expansion_epoch_start_guard: bool = param(False, "ISR expansion without the follower reaching the leader-epoch start offset")
    accept_stale_fetch_responses: bool = param(False, "followers apply fetch responses from an older leader epoch")
    fix_epoch_bump_on_min_isr_change: bool = param(
        False, "F1 fix: a min ISR change bumps the partition epoch (in-flight AlterPartitions are rejected)")
    fix_await_metadata: bool = param(
        False, "F1 fix: the leader applies an accepted AlterPartition only once its metadata holds the change")
    fix_config_before_topic: bool = param(
        False, "F1 fix: a broker's metadata publish applies the config delta before the topic delta")
    fix_min_isr_in_partition_state: bool = param(
        False, "F1 fix: the min ISR travels with the partition state (record and AlterPartition response)")
    replay_known_changes: bool = param(
        False, "a leader replays from metadata an ISR change it learned from the AlterPartition response "
        "(dropping an AlterPartition sent meanwhile), and its HWM waits for caught-up followers outside the ISR")
    fix_ignore_replayed_change: bool = param(
        False, "F5 fix (with --replay-known-changes): replaying a change the leader already learned leaves "
        "its pending AlterPartition in place")
    hwm_under_partition_lock: bool = param(
        False, "the leader advances its HWM in the step that installs a new ISR (AlterPartition response, "
        "metadata publish), as Kafka does under the partition's lock (always so with --replay-known-changes)")
    records: int = param(1, "records produced (bound)", minimum=1, maximum=3)
    lossy_shutdowns: int = param(1, "unclean shutdowns that lose an unflushed suffix (bound)", minimum=0, maximum=4)
    lossless_shutdowns: int = param(0, "unclean shutdowns that lose nothing (bound)", minimum=0, maximum=4)
    clean_shutdowns: int = param(0, "controlled shutdowns (bound)", minimum=0, maximum=4)
    fences: int = param(1, "fencings of a running broker (bound)", minimum=0, maximum=4)
    isr_shrinks: int = param(1, "ISR shrinks proposed by a leader (bound)", minimum=0, maximum=4)
    min_isr_changes: int = param(1, "min.insync.replicas changes (bound)", minimum=0, maximum=4)
    preferred_elections: int = param(0, "preferred-leader elections, auto.leader.rebalance.enable (bound)",
                                     minimum=0, maximum=4)
    fix_reassignment_min_isr: bool = param(
        False, "F6/F7 fix (kafka presets): KIP-966's rule, a reassignment completes or is cancelled only when the "
        "ISR it leaves is at least min ISR (else the completion waits and the cancellation is refused)")
    fix_reassignment_prune_elr: bool = param(
        False, "F6/F7 fix (kafka presets with ELR): a completion or cancellation keeps only replicas of the final "
        "set in the ELR (KIP-966: \"upon completion, the ELR only contains replicas in the final replica set\")")
    new_leader_publish_window: bool = param(
        False, "a broker made leader by a metadata publish that also changes min ISR runs makeLeader (and advances "
        "the HWM) with the min ISR its log config had before, until the publish's config delta (every broker "
        "keeps its config's min ISR; needs --min-isr-changes)")
    controlled_shutdown_in_two_steps: bool = param(
        False, "a controlled shutdown of the leader takes Kafka's two steps: in controlled shutdown (out of the ISR, "
        "leadership moved, not electable, still running), then fenced and stopped (needs --clean-shutdowns)")
    controller_failovers: int = param(
        0, "controller failovers that lose the response of an AlterPartition the controller committed; "
        "the leader retries it against the new controller with the epochs it sent (bound)", minimum=0, maximum=2)
    replication_factor: Optional[int] = param(
        None, "replicas of the partition, brokers b1..bR at start (default: every broker)", minimum=1, maximum=5)
    reassignments: int = param(0, "partition reassignments an operator starts, each to any other replica set of "
                               "--replication-factor brokers, cancellable (bound; needs --replication-factor "
                               "below --brokers)", minimum=0, maximum=2)
    replication_factor_changes: bool = param(
        False, "a reassignment may change the replication factor (Kafka's default, KIP-860): its target is any "
        "non-empty set of brokers, and the min ISR in force follows the replica count, min(--min-isr, replicas), "
        "as both sides compute it (needs --reassignments, --min-isr-changes 0, --election ordered)")
    no_reassignment_min_isr: bool = param(
        False, "kip-966 only: a reassignment completes or is cancelled even when the ISR it leaves is below "
        "min ISR, as in Kafka's code (the ELR and LastKnownELR are still pruned to the final replica set)")
    election: str = param("ordered", "leader election: Kafka's first acceptable replica in assignment order, "
                          "or any acceptable one (every order at once; needed for --symmetry)",
                          choices=ELECTIONS)


BOUNDS = ("lossy_shutdowns", "lossless_shutdowns", "clean_shutdowns", "fences", "isr_shrinks", "min_isr_changes",
          "preferred_elections")


def check(p: KafkaParams) -> None:
    """Reject contradictory combinations with one clear sentence."""
    kip = p.protocol == "kip-966"
    elr = p.protocol not in WITHOUT_ELR
    if p.recovery is not None and not kip:
        raise UsageError(f"--recovery applies to the kip-966 preset only, not {p.protocol}")
    if p.unclean_election and kip:
        raise UsageError("--unclean-election applies to the kafka presets; with kip-966 use --recovery aggressive")
    if p.balanced_replies is not None:
        if not kip or (p.recovery or "balanced") != "balanced":
            raise UsageError("--balanced-replies applies to kip-966 with --recovery balanced only")
        if not 1 <= p.balanced_replies <= p.brokers:
            raise UsageError(f"--balanced-replies must be between 1 and --brokers {p.brokers}")
    if not elr:
        for name in ("keep_unclean_in_elr", "hwm_from_maximal_isr"):
            if getattr(p, name):
                raise UsageError(f"--{name.replace('_', '-')} needs ELR, which {p.protocol} does not have")
        if p.min_isr_policy is not None:
            raise UsageError(f"--min-isr-policy needs ELR, which {p.protocol} does not have")
    if p.election == "any" and p.preferred_elections:
        raise UsageError("--preferred-elections moves leadership to the first replica in assignment order; "
                         "it has no meaning under --election any")
    if p.fix_ignore_replayed_change and not p.replay_known_changes:
        raise UsageError("--fix-ignore-replayed-change changes the replay that --replay-known-changes models; "
                         "add --replay-known-changes")
    rf = replication_factor(p)
    if rf > p.brokers:
        raise UsageError(f"--replication-factor {rf} is more than --brokers {p.brokers}: a partition has at most one "
                         f"replica on each broker; lower --replication-factor or raise --brokers")
    if p.reassignments and rf == p.brokers:
        raise UsageError(f"--reassignments {p.reassignments} needs a broker outside the replica set to move a replica "
                         f"to, and with --replication-factor {rf} every one of the {p.brokers} brokers is a replica; "
                         f"add --replication-factor {p.brokers - 1} (or more --brokers)")
    if p.replication_factor_changes:
        if not p.reassignments:
            raise UsageError("--replication-factor-changes changes what a reassignment may do; add --reassignments 1")
        if p.min_isr_changes:
            raise UsageError("--replication-factor-changes makes the min ISR in force follow the replica count, "
                             "which the model keeps apart from min.insync.replicas changes; add --min-isr-changes 0")
        if p.election != "ordered":
            raise UsageError("--replication-factor-changes needs --election ordered: a reassignment that only "
                             "removes replicas may complete and elect in its own step, which --election any does "
                             "not enumerate")
        if p.fix_min_isr_in_partition_state:
            raise UsageError("--fix-min-isr-in-partition-state is an F1 fix for min.insync.replicas changes; "
                             "drop it with --replication-factor-changes")
    if p.no_reassignment_min_isr and not kip:
        raise UsageError(f"--no-reassignment-min-isr switches off kip-966's min ISR rule for completing and "
                         f"cancelling a reassignment; {p.protocol} follows Kafka's code, which does not have it "
                         f"(drop the switch, or use --protocol kip-966)")
    if p.no_reassignment_min_isr and not p.reassignments:
        raise UsageError("--no-reassignment-min-isr changes how a reassignment completes; add --reassignments 1")
    for name in ("fix_reassignment_min_isr", "fix_reassignment_prune_elr"):
        if not getattr(p, name):
            continue
        option = f"--{name.replace('_', '-')}"
        if kip:
            raise UsageError(f"{option} gives a kafka preset kip-966's own reassignment rule, which kip-966 has "
                             f"already; drop the switch, or pick a kafka preset")
        if not p.reassignments:
            raise UsageError(f"{option} changes how a reassignment completes; add --reassignments 1")
    if p.fix_reassignment_prune_elr and not elr:
        raise UsageError(f"--fix-reassignment-prune-elr prunes the ELR, which {p.protocol} does not have")
    if p.new_leader_publish_window:
        if not p.min_isr_changes:
            raise UsageError("--new-leader-publish-window needs min ISR to change; add --min-isr-changes 1")
        if p.fix_config_before_topic or p.fix_min_isr_in_partition_state:
            raise UsageError("--new-leader-publish-window is the window between a publish's topic and config "
                             "deltas, which --fix-config-before-topic and --fix-min-isr-in-partition-state remove; "
                             "drop one of them")
    if p.controlled_shutdown_in_two_steps and not p.clean_shutdowns:
        raise UsageError("--controlled-shutdown-in-two-steps changes how a controlled shutdown runs; "
                         "add --clean-shutdowns 1")
    if p.no_strict_min_isr and p.hwm_from_maximal_isr:
        raise UsageError("--no-strict-min-isr and --hwm-from-maximal-isr are two different HWM rules; pick one")


def replication_factor(p: KafkaParams) -> int:
    """--replication-factor, or every broker when it is not given."""
    return p.brokers if p.replication_factor is None else p.replication_factor


def effective_min_isr(p: KafkaParams) -> int:
    """The min ISR both sides use: min(configured, replication factor), as the controller's
    ``getTopicEffectiveMinIsr`` and the leader's ``Partition.effectiveMinIsr`` compute it
    (the replication factor is --replication-factor, by default --brokers)."""
    return min(p.min_isr, replication_factor(p))


def switches(p: KafkaParams) -> dict[str, int]:
    """The Const fields (protocol switches and bounds) for these options."""
    preset = p.protocol
    elr = preset not in WITHOUT_ELR
    if p.no_strict_min_isr or preset == "kafka-3.5":
        hwm_rule = HWM_ANY
    elif p.hwm_from_maximal_isr:
        hwm_rule = HWM_MAXIMAL
    else:
        hwm_rule = HWM_STRICT
    if preset == "kip-966":
        fallback = FALLBACK_NONE
        recovery = RECOVERIES.index(p.recovery or "balanced")
    else:
        fallback = FALLBACK_UNCLEAN if p.unclean_election else (
            FALLBACK_LAST_LEADER if preset in KAFKA_WITH_ELR else FALLBACK_NONE)
        recovery = RECOVERY_OFF
    policy = p.min_isr_policy or ("kafka" if preset in KAFKA_WITH_ELR else "kip")
    code = preset in KAFKA_CODE
    out = {
        "k_elr": int(elr),
        "k_lkelr": int(preset == "kip-966"),
        "k_hwm_rule": hwm_rule,
        "k_unclean_detect": int(elr),
        "k_keep_unclean_in_elr": int(p.keep_unclean_in_elr),
        "k_epoch_check": int(not p.no_broker_epoch_check),
        "k_pe_check": int(not p.no_partition_epoch_check),
        "k_min_isr_policy": MIN_ISR_POLICIES.index(policy),
        "k_fallback": fallback,
        "k_recovery": recovery,
        "k_balanced_replies": p.balanced_replies or 0,
        "k_hwm_guard": int(not p.no_expansion_hwm_guard),
        "k_eso_guard": int(not p.no_expansion_epoch_start_guard),
        "k_stale_fetch": int(p.accept_stale_fetch_responses),
        # ELR presets of Kafka keep the last known leader (in LastKnownElr) and try it before an
        # unclean election (PartitionChangeBuilder.electAnyLeader, canElectLastKnownLeader)
        "k_last_leader": int(preset in KAFKA_WITH_ELR),
        # Kafka's broker code (Partition.scala) where the KIP says nothing; kip-966 keeps the
        # model's earlier design there (docs/model.md, section 2)
        "k_leader_marks_recovered": int(code),
        "k_pending_until_metadata": int(code),
        "k_keep_follower_state": int(code),
        # metadata versions below 3.6: every ISR shrink bumps the leader epoch
        "k_epoch_bump_on_shrink": int(preset == "kafka-3.5"),
        # Kafka's broker lifecycle and ISR eligibility (docs/model.md section 2g): a fenced broker
        # that shuts down stops cleanly (BrokerHeartbeatManager: FENCED + wantShutDown is
        # SHUTDOWN_NOW); the leader does not propose a follower its metadata shows fenced or in
        # controlled shutdown (Partition.isReplicaIsrEligible, KAFKA-13916, 3.3), nor wait for one
        # in the HWM (maybeIncrementLeaderHW's caught-up rule, KAFKA-15021, 3.6)
        "k_stop_fenced_cleanly": int(code),
        "k_expand_checks_fencing": int(code),
        "k_hwm_wait_checks_fencing": int(code and preset != "kafka-3.5"),
    }
    out.update({
        "k_fix_epoch_bump": int(p.fix_epoch_bump_on_min_isr_change),
        "k_fix_await_metadata": int(p.fix_await_metadata),
        "k_fix_config_first": int(p.fix_config_before_topic),
        "k_fix_min_isr_in_partition": int(p.fix_min_isr_in_partition_state),
        "k_replay_known": int(p.replay_known_changes),
        "k_fix_ignore_replay": int(p.fix_ignore_replayed_change),
        "k_hwm_under_lock": int(p.hwm_under_partition_lock or p.replay_known_changes),
    })
    for name in BOUNDS:
        out[f"k_max_{name}"] = getattr(p, name)
    # replica sets and reassignment (docs/model.md section 2b). kip-966: "the reassignment can only
    # be completed if the ISR size is larger or equal to min ISR" (also when cancelled), and "upon
    # completion, the ELR only contains replicas in the final replica set"; Kafka's code has
    # neither (PartitionReassignmentReplicas.maybeCompleteReassignment, PartitionReassignmentRevert)
    # a lost AlterPartition response (docs/model.md section 2c); a state counter only when > 0
    out["k_max_controller_failovers"] = p.controller_failovers
    # the publish window of a broker made leader (docs/model.md section 2e)
    out["k_new_leader_window"] = int(p.new_leader_publish_window)
    # controlled shutdown in two steps (docs/model.md section 2d)
    out["k_cs_two_steps"] = int(p.controlled_shutdown_in_two_steps)
    out["k_rf"] = replication_factor(p)
    out["k_max_reassignments"] = p.reassignments
    # the candidate fixes of F6 and F7 give a kafka preset those two rules of the KIP
    out["k_reassign_min_isr"] = int(preset == "kip-966" and not p.no_reassignment_min_isr
                                    or p.fix_reassignment_min_isr)
    out["k_reassign_prune"] = int(preset == "kip-966" or p.fix_reassignment_prune_elr)
    # KAFKA-19975 (3d267d4536, branches 4.3 and 4.4): completion waits for the adding replicas
    # only, and for every final replica only when the replication factor shrinks
    out["k_complete_on_adding"] = int(preset in COMPLETE_ON_ADDING)
    # a reassignment may change the replication factor; the min ISR in force is then
    # min(configured, replicas): ReplicationControlManager.getTopicEffectiveMinIsr (the replica list,
    # removing replicas included) and Partition.effectiveMinIsr (remoteReplicasMap.size + 1)
    out["k_rf_change"] = int(p.replication_factor_changes)
    out["k_min_isr_config"] = p.min_isr
    return out


def has_replica_sets(p: KafkaParams) -> bool:
    """Some broker is not a replica: the replica-set fields and the reassignment actions exist."""
    return replication_factor(p) < p.brokers
