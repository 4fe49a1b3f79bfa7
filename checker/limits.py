"""What a run's limits accept, and why not: one wording for every entry point.

The command line (click callbacks in kraftcheck/cli/validate.py), the Python API, ``kraftcheck
ci``, ``sweep`` and the explorers' own ``Options`` all check a limit with these functions, so a
bad value is refused before any work and said the same way wherever it came from. ``nan`` passes
every comparison a range check makes (a ``time_limit=nan`` would be no limit at all, a
``max_states=-1`` an immediate "incomplete"), so each is refused by name.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from kraftcheck.checker.errors import UsageError

MAX_SIMULATION_DEPTH = 1_000_000  # each running behaviour holds its whole path (its trace) in memory


def number_problem(value: Any, what: str) -> Optional[str]:
    """Why ``value`` is not a finite number of ``what`` ("seconds", "GiB") greater than 0; None if it is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value!r} is not a number of {what}; give a number greater than 0"
    if math.isnan(value):
        return f"nan is not a number of {what}; give a number greater than 0"
    if math.isinf(value):
        return f"{value} is not a number of {what}: give a finite number (leave the option out for no limit)"
    if value <= 0:
        return f"must be greater than 0, got {value}"
    return None


def count_problem(value: Any) -> Optional[str]:
    """Why ``value`` is not a whole number greater than 0; None if it is."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be a whole number greater than 0, got {value!r}"
    if value <= 0:
        return f"must be greater than 0, got {value}"
    return None


def depth_problem(value: Any) -> Optional[str]:
    """Why ``value`` is not a simulation's states per behaviour; None if it is."""
    problem = count_problem(value)
    if problem is None and value > MAX_SIMULATION_DEPTH:
        problem = (f"{value:,} states per behaviour is more than the {MAX_SIMULATION_DEPTH:,} a simulation keeps "
                   "(each running behaviour holds its whole path for its trace)")
    return problem


def check_number(name: str, value: Any, what: str) -> None:
    """Refuse (UsageError) a ``name`` that is given (not None) but no finite number of ``what`` above 0."""
    problem = None if value is None else number_problem(value, what)
    if problem:
        raise UsageError(f"{name}: {problem}")


def check_count(name: str, value: Any) -> None:
    """Refuse (UsageError) a ``name`` that is given (not None) but no whole number above 0."""
    problem = None if value is None else count_problem(value)
    if problem:
        raise UsageError(f"{name}: {problem}")


def check_depth(name: str, value: Any) -> None:
    """Refuse (UsageError) a simulation depth that is given but not 1..MAX_SIMULATION_DEPTH."""
    problem = None if value is None else depth_problem(value)
    if problem:
        raise UsageError(f"{name}: {problem}")
