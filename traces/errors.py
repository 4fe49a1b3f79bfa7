"""Errors about trace and scenario files, each naming the step and the field that is wrong."""

from __future__ import annotations

from typing import Optional

from kraftcheck.checker.errors import KraftcheckError


class TraceError(KraftcheckError):
    """A trace that cannot be trusted. ``step`` (None: the file as a whole) and ``field`` say where."""

    def __init__(self, reason: str, step: Optional[int] = None, field: Optional[str] = None,
                 source: Optional[str] = None) -> None:
        self.reason, self.step, self.field, self.source = reason, step, field, source
        where = []
        if source:
            where.append(source)
        if step is not None:
            where.append(f"step {step}")
        if field:
            where.append(field)
        super().__init__(": ".join([", ".join(where), reason]) if where else reason)


class TraceFormatError(TraceError):
    """The file is not a well-formed trace (bad JSON, missing or mistyped attribute)."""


class ReplayError(TraceError):
    """The trace is well formed but is not a behaviour of its spec (or misses its violation)."""


class ScenarioError(TraceError):
    """An authored scenario file is malformed (unknown action, bad parameter, bad expectation)."""
