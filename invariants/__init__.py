"""The safety properties of the Kafka replication model: ELR, high-watermark and durability.

``elr``         KIP-966's ELR invariants;
``hwm``         the strict min ISR rule (a transition property) and the maximal-ISR rule;
``durability``  committed and acknowledged data survive, reads are repeatable, KIP-903 epochs.
"""

from __future__ import annotations


def kafka_invariants():
    """Every state invariant, in the order reports list them."""
    from kraftcheck.invariants import durability, elr, hwm
    return [
        elr.elr_disjoint_from_isr,
        elr.elr_members_hold_committed_log,
        elr.elr_only_below_min_isr,
        elr.electable_replicas_cover_min_isr,
        durability.isr_members_hold_committed_log,
        hwm.leader_maximal_isr_covers_electable,
        durability.leader_holds_committed_log,
        durability.committed_logs_match,
        durability.acked_writes_survive,
        durability.reads_are_repeatable,
        durability.isr_members_have_current_broker_epoch,
        elr.partition_state_within_replicas,
    ]


def kafka_properties():
    """Every transition property."""
    from kraftcheck.invariants import hwm
    return [hwm.hwm_advances_only_with_min_isr]
