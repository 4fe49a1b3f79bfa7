"""``kraftcheck check --simulate``'s own options on the command line: random behaviours instead of
the exhaustive search (TLC's ``-simulate``). The request carries them (``request.Simulation``), the
pipeline runs them on the compiled kernels (``checker/explore/simulate.py``)."""

from __future__ import annotations

from typing import Optional

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.simulate import DEFAULT_STRATEGY


def refuse_without_simulate(seed: Optional[int], depth: Optional[int], max_behaviours: Optional[int],
                            swarm: bool, strategy: Optional[str]) -> None:
    given = [flag for flag, value in (("--seed", seed), ("--depth", depth), ("--max-behaviours", max_behaviours),
                                      ("--swarm", swarm or None), ("--strategy", strategy)) if value is not None]
    if given:
        raise UsageError(f"{given[0]} is an option of --simulate; add --simulate, or for the exhaustive search "
                         f"use --max-depth and --max-states")


def simulation_strategy(swarm: bool, strategy: Optional[str]) -> str:
    """The strategy --strategy and --swarm (its short form) ask for, refused if they disagree."""
    if swarm and strategy not in (None, "swarm"):
        raise UsageError(f"--swarm is short for --strategy swarm; it cannot go with --strategy {strategy}")
    return "swarm" if swarm else strategy or DEFAULT_STRATEGY
