"""The limits that stop a run short, checked alike by every explorer, and the reason each gives.

``Options`` sets them (``--max-states``, ``--time-limit``, ``--max-memory``; ``--max-depth`` is a
level's, checked before it is expanded: ``stop_at_max_depth``); ``limit_reached`` says whether one
is reached and why, in the words the report prints for an incomplete run.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # result.py names these functions for its importers
    from kraftcheck.checker.explore.result import Options, Result


class Clock:
    """Elapsed time and the time limit, shared by the explorers."""

    def __init__(self, limit: Optional[float]) -> None:
        self.start = time.perf_counter()
        self.limit = limit

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def expired(self) -> bool:
        return self.limit is not None and self.elapsed >= self.limit


def describe_limit(options: Options, what: str) -> str:
    if what == "max_memory":
        return f"stopped at --max-memory {options.max_memory / 2**30:.3g} GiB (the process used more)"
    value = {"max_states": options.max_states, "max_depth": options.max_depth,
             "time_limit": options.time_limit}[what]
    flag = {"max_states": "--max-states", "max_depth": "--max-depth", "time_limit": "--time-limit"}[what]
    return f"stopped at {flag} {value}"


def memory_in_use() -> int:
    """Resident memory of this process, in bytes: its own pages and the pages of the files it
    maps (levels on disk) that are resident, not the file cache beyond them."""
    import psutil
    return psutil.Process().memory_info().rss


def memory_total() -> int:
    """This machine's memory, in bytes."""
    import psutil
    return psutil.virtual_memory().total


def memory_exceeded(options: Options) -> bool:
    return options.max_memory is not None and memory_in_use() > options.max_memory


def limit_reached(options: Options, distinct: int, clock: Clock, more_work: bool, most_states: Optional[int] = None,
                  memory: bool = True) -> Optional[str]:
    """Why the run stops here, with ``distinct`` states found and ``more_work`` (states left to
    expand, or new states to expand next) or not; None: it goes on. ``--max-states`` stops it
    whatever is left; the time and memory limits only a run with work left. ``most_states``: the
    most states the explorer can number (past it, with work left, it stops). ``memory``: whether
    to ask the system for the memory in use this time (an explorer checking per state asks now
    and then)."""
    if options.max_states is not None and distinct > options.max_states:
        return describe_limit(options, "max_states")
    if most_states is not None and distinct > most_states and more_work:
        return f"stopped at {most_states:,} states: the engine numbers states with 32 bits (parent links)"
    if more_work and clock.expired():
        return describe_limit(options, "time_limit")
    if more_work and memory and memory_exceeded(options):
        return describe_limit(options, "max_memory")
    return None


def depth_reached(options: Options, depth: int) -> bool:
    """Whether a level at ``depth`` (the initial level's is 1) is at ``--max-depth``: its states
    are counted and checked, not expanded."""
    return options.max_depth is not None and depth >= options.max_depth


def stop_at_max_depth(options: Options, depth: int, result: Result) -> bool:
    """Whether the run stops before expanding its level at ``depth``; if so, ``result`` says why."""
    if not depth_reached(options, depth):
        return False
    result.incomplete_reason = describe_limit(options, "max_depth")
    return True
