"""The safety properties of the Kafka replication model: ELR, high-watermark and durability.

``elr``         KIP-966's ELR invariants;
``hwm``         the strict min ISR rule (a transition property) and the maximal-ISR rule;
``durability``  committed and acknowledged data survive, reads are repeatable, KIP-903 epochs;
``logs``        leader epochs along a log (not in the model's list: tests use it);
``kafka_state`` the state codes and helpers the properties read, which the spec builds on too.

The invariants sit below the spec that lists them: ``specs/kafka/spec.py`` imports this package,
and nothing here imports ``kraftcheck.specs``. A property speaks of the state, not of the actions
that reach it, so it needs the state's codes and a few readings of it (``kafka_state``), never the
spec; the spec in turn names its properties. The other direction would leave the spec unable to
list its own invariants. tests/test_packaging.py holds every package to its layer.
"""

from __future__ import annotations

from kraftcheck.invariants import durability, elr, hwm


def kafka_invariants():
    """Every state invariant, in the order reports list them."""
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
    return [hwm.hwm_advances_only_with_min_isr]
