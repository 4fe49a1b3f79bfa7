"""The Kafka model's liveness properties and the fairness they assume (``kraftcheck check --liveness``).

Fairness says which steps the system takes on its own, given time: a broker that is offline is
restarted, a fenced broker heartbeats its way back (Unfence), brokers apply metadata and config
records, followers fetch, leaders advance their high watermark and hear back from the controller,
and the controller handles AlterPartition requests and runs unclean recovery. Each is *weakly*
fair per broker (``Name(*)``): none stays possible forever without happening. Faults, produce
requests, ISR shrinks, min ISR changes and preferred elections are not fair: they may happen (within
their bounds) or never. A delayed fetch response may stay delayed forever (an unfair network), so
``DelayFetchResponse`` is not fair but ``ReceiveFetchResponse`` is. Time passes
(``LagTimeout``, with --replay-known-changes): a follower cannot stay "caught up a moment ago" for
ever without catching up again.

* ``partition_regains_leader``: a leaderless partition eventually has a leader again, with no
  operator. What ``--availability`` asks without fairness: there, a state is stuck when *no*
  behaviour gets a leader back; here, a violation is a fair behaviour that never does.
* ``acked_write_becomes_readable``: once a write is acknowledged (acks=all), eventually the
  partition's leader, running and aware of its leadership, holds every acknowledged record below
  its high watermark: a consumer can read it. Like the durability invariants, it is claimed only
  within the KIP's bound: once min ISR lossy shutdowns have happened (against the smallest min ISR
  so far), the write may be lost and the property is met. A lost acknowledged write within the
  bound (F1) fails it, as a lasso that never gets the record back.
"""

from __future__ import annotations

import numpy as np

from kraftcheck.checker.spec import Liveness, Predicate
from kraftcheck.specs.kafka.state import RUNNING

# per broker where the action has a broker parameter; the controller's steps have none
FAIR_STEPS = ("Unfence(*)", "Restart(*)", "SyncMetadata(*)", "ApplyConfigDelta(*)", "Fetch(*)",
              "ReceiveFetchResponse", "AdvanceHighWatermark(*)", "ProposeIsrExpand", "HandleAlterPartition",
              "ReceiveAlterPartitionResponse", "RecoveryReply(*)", "RecoveryElect", "ProposeRecovered(*)",
              "LagTimeout(*)")


def fair_steps(action_names: set[str]) -> tuple[str, ...]:
    """``FAIR_STEPS`` less the actions this preset's model does not have."""
    return tuple(f for f in FAIR_STEPS if f.removesuffix("(*)") in action_names)


def has_leader(brokers: int) -> Predicate:
    return Predicate("the partition has a leader", lambda v: v["c_leader"] < brokers)


def no_leader(brokers: int) -> Predicate:
    return Predicate("the partition has no leader", lambda v: v["c_leader"] >= brokers)


def acked_write(v) -> np.ndarray:
    return v["acked"] != 0


def beyond_the_kips_bound(v) -> np.ndarray:
    """``durability_claimed`` negated (invariants/elr.py): min ISR lossy shutdowns have happened."""
    return v["lossy_shutdowns_used"] >= v["fewest_min_isr"]


def acked_readable(brokers: int, records: int):
    """Columns -> bool: the controller's leader runs, its metadata says it leads, and every acked
    record is in its log below its high watermark."""
    def holds(v) -> np.ndarray:
        leader = v["c_leader"].astype(np.int64)
        rows = np.arange(leader.shape[0])
        at = np.minimum(leader, brokers - 1)
        log, hwm, acked = v["log"][rows, at], v["hwm"][rows, at], v["acked"]
        ok = (leader < brokers) & (v["b_state"][rows, at] == RUNNING) & (v["v_leader"][rows, at] == leader)
        ok &= (acked & ~log) == 0
        for r in range(records):
            wanted = (acked >> r) & 1 == 1
            ok &= ~wanted | (v["rec_offset"][:, r] < hwm)
        return ok
    return holds


def kafka_liveness(spec, action_names: set[str]) -> list[Liveness]:
    p = spec.params
    fair = fair_steps(action_names)
    served = acked_readable(p.brokers, p.records)
    readable = Predicate("every acknowledged write is readable from the leader, or the lossy shutdowns reached "
                         "the KIP's bound", lambda v: served(v) | beyond_the_kips_bound(v))
    return [
        Liveness("partition_regains_leader", has_leader(p.brokers), after=no_leader(p.brokers), fair=fair,
                 doc="A partition without a leader gets one again without an operator, under weak fairness of "
                     "the system's own steps."),
        Liveness("acked_write_becomes_readable", readable,
                 after=Predicate("a write was acknowledged (acks=all)", acked_write), fair=fair,
                 doc="Once a write is acknowledged, the leader eventually serves it to consumers (it holds "
                     "it below its high watermark), under weak fairness of the system's own steps."),
    ]
