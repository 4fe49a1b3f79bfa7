"""The models kraftcheck can check, by name.

Register a spec by adding its ``module:Class`` here; modules are imported only when used, so
listing specs stays fast and a broken spec cannot stop the others from loading.
"""

from __future__ import annotations

import importlib

from checker.errors import UsageError

REGISTRY: dict[str, str] = {
    "two_phase": "specs.two_phase:TwoPhase",
    "two_phase_eager_commit": "specs.two_phase_eager_commit:TwoPhaseEagerCommit",
    "die_hard": "specs.die_hard:DieHard",
    "kafka": "specs.kafka:KafkaReplication",
}

DEFAULT_SPEC = "kafka"


def spec_names() -> list[str]:
    return list(REGISTRY)


def spec_class(name: str):
    """The Spec subclass registered under ``name``."""
    try:
        target = REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown spec {name!r}; choose one of: {', '.join(REGISTRY)}") from None
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)
