"""Lanes: which participant (controller, each broker) owns which state element, and where each
step of a trace happens. The spec says it through ``Spec.lanes()`` / ``Spec.action_lanes()``
(see ``checker/spec.py``); this module turns that into per-element and per-step facts."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from kraftcheck.checker.spec import LaneTouch
from kraftcheck.traces.states import lane_selector


def element_lanes(lanes: Mapping[str, Sequence[str]], elements: Sequence[str]) -> dict[str, str]:
    """Element name -> its lane. An element a spec forgot goes to the first (main) lane, so that
    nothing a step changes is ever hidden from a picture."""
    by_selector: dict[str, str] = {}
    for lane, selectors in lanes.items():
        for sel in selectors:
            by_selector.setdefault(sel, lane)
    main = next(iter(lanes), "global")
    out = {}
    for e in elements:
        specific, whole = lane_selector(e)
        out[e] = by_selector.get(specific) or by_selector.get(whole) or main
    return out


def derive_touch(lane_order: Sequence[str], changed_lanes: Sequence[str], params: Mapping[str, Any]) -> LaneTouch:
    """Where a step happened, guessed from what changed (the default ``Spec.action_lanes``).

    The action runs on the lane of a parameter whose state changed, else on the first lane whose
    state changed; it sends to the other changed lanes and receives from parameter lanes that did
    not change (``TMRcvPrepared(rm=rm1)`` changes only the TM: a message from rm1 to the TM).
    """
    changed = [lane for lane in lane_order if lane in set(changed_lanes)]
    param_lanes = [v for v in params.values() if isinstance(v, str) and v in lane_order]
    param_lanes = list(dict.fromkeys(param_lanes))
    actor = next((p for p in param_lanes if p in changed), None)
    actor = actor or (changed[0] if changed else None) or (param_lanes[0] if param_lanes else None)
    actor = actor or (lane_order[0] if lane_order else "global")
    sends = tuple(lane for lane in changed if lane != actor)
    receives = tuple(p for p in param_lanes if p != actor and p not in changed)
    return LaneTouch(actor, receives, sends)


def touch_to_dict(touch: LaneTouch) -> dict[str, Any]:
    return {"lane": touch.lane, "receives_from": list(touch.receives_from), "sends_to": list(touch.sends_to)}
