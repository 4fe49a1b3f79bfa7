"""The run observer: what an exploration tells, as it happens, to whoever asked to watch it.

An explorer calls an observer's methods at the run's events: it started (the checkpoint's
manifest written, nothing explored yet), a level finished (durable, with a checkpoint), the
compiled kernels are ready or the run waits for them, numba types the spec's functions, the run
changed tiers, the run finished.
Tests wait on these events instead of the clock, and tools can follow a run without patching it.
Pass one to an explorer's ``explore(..., observer=...)``, or to ``kraftcheck.pipeline.run`` for a
check run as the command line runs it; without one (the default) nothing is called.
Methods run on the exploring thread between two chunks: what they do, the run waits for (an
exception raised in one ends the run as it would end the run there, KeyboardInterrupt included).
"""

from __future__ import annotations

from typing import Callable, Protocol

from kraftcheck.checker.explore.result import Result, Step


class FinishedRun(Protocol):
    """What ``run_finished`` shows of the run beyond its result: its levels and paths."""

    level_starts: list[int]  # the number of each level's first state (breadth-first order)
    trace: Callable[[int], list[Step]]  # the path from an initial state to state i


class RunObserver:
    """Override the events you want; each does nothing here."""

    def run_started(self) -> None:
        """The run is about to explore its initial states (a checkpoint's manifest is written)."""

    def level_finished(self, depth: int, distinct: int, generated: int) -> None:
        """Level ``depth`` is finished (with a checkpoint: durable, its manifest written);
        ``distinct`` states so far, ``generated`` successors."""

    def waiting_for_compile(self) -> None:
        """The first tier's time is up (or its Python could not run the spec's code): the run
        waits for the background compile."""

    def typing_spec(self) -> None:
        """The run explored without its compiled kernels (or is about to, on an installation's
        first run): numba's type inference checks the spec's functions now, before the answer,
        as no earlier run's acceptance is known (``tiers.TypingVerdicts``)."""

    def tier_switched(self, form: str, distinct: int) -> None:
        """The run explores on with a compiled form (``form``: its kernel module's name) from
        here; ``distinct`` states were found before it."""

    def run_finished(self, result: Result, run: FinishedRun) -> None:
        """The run is over and ``result`` complete."""
