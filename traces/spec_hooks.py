"""The presentation and availability hooks of a spec, with stand-ins for specs that lack them.

``checker.spec.Spec`` declares four optional hooks: ``lanes``, ``action_lanes``, ``availability``
and ``availability_variants``. A spec's own override always wins. For a registered spec that does
not override a hook, a stand-in from ``STAND_INS`` is used when there is one, else the base
default.
"""

from __future__ import annotations

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


# Stand-ins for registered specs that lack a hook (none at present: the Kafka spec defines its own
# in specs/kafka/presentation.py). Spec name -> hook name -> function of the spec (and arguments).
STAND_INS: dict[str, dict[str, Callable[..., Any]]] = {}
