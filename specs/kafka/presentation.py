"""How Kafka traces read: lanes (controller, one per broker, history), where each action happens,
and what ``--availability`` checks (the partition has a leader).

The "history" lane holds the ghost variables (records' epochs and offsets, committed and
acknowledged sets, fault counters) and the delayed fetch response: they belong to no participant
but are what a reader of a data-loss trace wants to see.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from kraftcheck.checker.spec import Availability, LaneTouch

CONTROLLER = "controller"
CONTROLLER_PREFIXES = ("c_", "ap_", "rep_", "rec_replied")


def lanes(spec) -> dict[str, tuple[str, ...]]:
    brokers = spec.broker_names()
    controller, history = [], []
    per_broker: dict[str, list[str]] = {b: [] for b in brokers}
    for f in spec.fields():
        if f.const is not None:
            continue
        if f.name.startswith(CONTROLLER_PREFIXES):
            controller.append(f.name)
        elif f.index_labels == brokers:
            for b in brokers:
                per_broker[b].append(f"{f.name}[{b}]")
        else:
            history.append(f.name)
    out = {CONTROLLER: tuple(controller)}
    out.update({b: tuple(sel) for b, sel in per_broker.items()})
    out["history"] = tuple(history)
    return out


def action_lanes(action: str, params: dict[str, Any]) -> Optional[LaneTouch]:
    b = params.get("b")
    if action in ("SyncMetadata", "ApplyConfigDelta"):
        return LaneTouch(b, receives_from=(CONTROLLER,))          # metadata records flow down
    if action in ("Produce", "AdvanceHighWatermark", "LossyShutdown", "LosslessShutdown", "LagTimeout"):
        return LaneTouch(b)
    if action in ("ProposeIsrExpand", "ProposeIsrShrink", "ProposeRecovered", "Restart", "CleanShutdown",
                  "BeginControlledShutdown", "CompleteControlledShutdown",
                  "RecoveryReply"):
        return LaneTouch(b, sends_to=(CONTROLLER,))                # AlterPartition, registration, ...
    if action == "Unfence":
        return LaneTouch(CONTROLLER, receives_from=(b,))           # b's heartbeat
    if action in ("Fence", "SessionTimeout", "HandleAlterPartition", "HandleAlterPartitionThenFailOver", "ChangeMinIsr", "RecoveryElect",
                  "PreferredElection", "Reassign", "CancelReassignment"):
        return LaneTouch(CONTROLLER)
    # Fetch, DelayFetchResponse, ReceiveFetchResponse, ReceiveAlterPartitionResponse: the peer is
    # in the state, so traces derive it per step
    return None


def availability(spec) -> Availability:
    n = spec.params.brokers
    return Availability("the partition has a leader", lambda v: v["c_leader"] < n)


def availability_variants(spec) -> dict[str, Any]:
    """One variant per recovery strategy (kip-966) or per unclean.leader.election.enable."""
    p = spec.params
    if p.protocol == "kip-966":
        return {f"recovery={r}": dataclasses.replace(p, recovery=r) for r in ("none", "balanced", "aggressive")}
    return {f"unclean_election={str(u).lower()}": dataclasses.replace(p, unclean_election=u) for u in (False, True)}
