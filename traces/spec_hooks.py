"""The presentation and availability hooks of a spec, with stand-ins for specs that lack them.

``checker.spec.Spec`` declares four optional hooks: ``lanes``, ``action_lanes``, ``availability``
and ``availability_variants``. A spec's own override always wins. For a registered spec that does
not override a hook, a stand-in from ``STAND_INS`` is used when there is one, else the base
default. The Kafka stand-ins live here only until ``specs/kafka`` defines the hooks itself (its
authors may copy them over verbatim); they name fields, so a renamed field simply falls back to
the main lane, never to an error.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from checker.spec import Availability, LaneTouch, Spec


def _overrides(spec: Spec, hook: str) -> bool:
    return getattr(type(spec), hook) is not getattr(Spec, hook)


def _stand_in(spec: Spec, hook: str) -> Optional[Callable[..., Any]]:
    return STAND_INS.get(spec.name, {}).get(hook) if not _overrides(spec, hook) else None


def lanes(spec: Spec) -> dict[str, tuple[str, ...]]:
    fn = _stand_in(spec, "lanes")
    return fn(spec) if fn else spec.lanes()


def action_lanes(spec: Spec, action: str, params: dict[str, Any]) -> Optional[LaneTouch]:
    fn = _stand_in(spec, "action_lanes")
    return fn(spec, action, params) if fn else spec.action_lanes(action, params)


def availability(spec: Spec) -> Optional[Availability]:
    fn = _stand_in(spec, "availability")
    return fn(spec) if fn else spec.availability()


def availability_variants(spec: Spec) -> dict[str, Any]:
    fn = _stand_in(spec, "availability_variants")
    return fn(spec) if fn else spec.availability_variants()


# ----------------------------------------------------------------------------------------------
# Kafka (specs/kafka): controller, one lane per broker, and a "history" lane for the ghost
# variables (records' epochs and offsets, committed / acknowledged sets, fault counters), which
# belong to no participant but are what a reader of a data-loss trace wants to see.

_KAFKA_CONTROLLER_PREFIXES = ("c_", "ap_", "rep_", "rec_replied")


def _kafka_lanes(spec: Spec) -> dict[str, tuple[str, ...]]:
    fields = [f for f in spec.fields() if f.const is None]
    brokers = tuple(f"b{i + 1}" for i in range(spec.params.brokers))
    controller, history = [], []
    per_broker: dict[str, list[str]] = {b: [] for b in brokers}
    for f in fields:
        if f.name.startswith(_KAFKA_CONTROLLER_PREFIXES):
            controller.append(f.name)
        elif f.index_labels == brokers:
            for b in brokers:
                per_broker[b].append(f"{f.name}[{b}]")
        else:
            history.append(f.name)
    out = {"controller": tuple(controller)}
    out.update({b: tuple(sel) for b, sel in per_broker.items()})
    out["history"] = tuple(history)
    return out


def _kafka_action_lanes(spec: Spec, action: str, params: dict[str, Any]) -> Optional[LaneTouch]:
    b = params.get("b")
    controller = "controller"
    if action == "SyncMetadata":
        return LaneTouch(b, receives_from=(controller,))          # metadata records flow down
    if action in ("Produce", "AdvanceHighWatermark", "LossyShutdown", "LosslessShutdown"):
        return LaneTouch(b)
    if action in ("ProposeIsrExpand", "ProposeIsrShrink", "ProposeRecovered", "Restart", "CleanShutdown",
                  "RecoveryReply"):
        return LaneTouch(b, sends_to=(controller,))                # AlterPartition, registration, ...
    if action == "Unfence":
        return LaneTouch(controller, receives_from=(b,))           # b's heartbeat
    if action in ("Fence", "SessionTimeout", "HandleAlterPartition", "ChangeMinIsr", "RecoveryElect"):
        return LaneTouch(controller)
    return None  # Fetch, ReceiveAlterPartitionResponse: the peer is in the state; derive it per step


def _kafka_availability(spec: Spec) -> Availability:
    n = spec.params.brokers
    return Availability("the partition has a leader", lambda v: v["c_leader"] < n)


def _kafka_availability_variants(spec: Spec) -> dict[str, Any]:
    p = spec.params
    if p.protocol == "kip-966":
        return {f"recovery={r}": dataclasses.replace(p, recovery=r) for r in ("none", "balanced", "aggressive")}
    return {f"unclean_election={str(u).lower()}": dataclasses.replace(p, unclean_election=u) for u in (False, True)}


STAND_INS: dict[str, dict[str, Callable[..., Any]]] = {
    "kafka": {"lanes": _kafka_lanes, "action_lanes": _kafka_action_lanes,
              "availability": _kafka_availability, "availability_variants": _kafka_availability_variants},
}
