"""The one interface of an explorer: the engine, the reference explorer and Spark's implement it.

An explorer takes a model and the run's ``Options``, sends ``Progress`` snapshots to ``progress``
and the run's events to ``observer`` (``observer.py``; None: no one watches), and returns a
``Result`` with TLC's counts, the violations found and the verdict. What every run does besides
its search is written once, beside it: the limits (``run_limits.py``), the checkpoint's counts
(``checkpoint.counts_for_manifest``, ``restore_counts``), a counterexample's path
(``result.replay_path``) and the final counts and verdict (``Result.settle``).
"""

from __future__ import annotations

from typing import Optional, Protocol

from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.explore.result import Options, ProgressFn, Result, no_progress
from kraftcheck.checker.model import Model


class Explorer(Protocol):
    """Explores every reachable state of a model, breadth first, and says what it found."""

    name: str  # as the report and ``--engine`` name it

    def explore(self, model: Model, options: Options = Options(), progress: ProgressFn = no_progress,
                observer: Optional[RunObserver] = None) -> Result:
        """Explore ``model`` within ``options``' limits."""
