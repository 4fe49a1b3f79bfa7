"""``kraftcheck check --simulate``: random behaviours instead of the exhaustive search (TLC's
``-simulate``), on the compiled kernels (``checker/explore/simulate.py``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.result import Result
from kraftcheck.checker.explore.simulate import SimulationOptions, simulate
from kraftcheck.checker.model import Model
from kraftcheck.cli.terminal import Terminal


@dataclass(frozen=True)
class SimulationRequest:
    """What ``--simulate`` and its options asked for (``seed`` None: a random one, reported)."""

    seed: Optional[int] = None
    depth: Optional[int] = None
    max_behaviours: Optional[int] = None
    strategy: str = "uniform"  # one of checker/explore/simulate.py's STRATEGIES


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
    return "swarm" if swarm else strategy or "uniform"


def refuse_with_simulate(engine: str, fingerprints: bool, symmetry: bool, checkpoint: Optional[str],
                         resume: Optional[str], max_states: Optional[int], max_depth: Optional[int],
                         graph_analyses: bool) -> None:
    """The exhaustive search's options that mean nothing for random behaviours, refused before any work."""
    if engine != "engine":
        raise UsageError(f"--simulate runs on the compiled engine, not --engine {engine}")
    for flag, given in (("--fingerprints", fingerprints), ("--symmetry", symmetry), ("--checkpoint", checkpoint),
                        ("--resume", resume)):
        if given:
            raise UsageError(f"{flag} is an option of the exhaustive search; --simulate keeps no visited states")
    if max_states is not None:
        raise UsageError("--max-states bounds the exhaustive search; with --simulate use --max-behaviours or "
                         "--time-limit")
    if max_depth is not None:
        raise UsageError("--max-depth bounds the exhaustive search; with --simulate use --depth (states per "
                         "behaviour)")
    if graph_analyses:
        raise UsageError("--availability, --liveness and --dump-graph need every state; --simulate explores "
                         "random behaviours")


def run_simulation(terminal: Terminal, model: Model, request: SimulationRequest, keep_going: bool,
                   time_limit: Optional[float], max_memory: int, compile: str) -> tuple[Result, dict[str, Any]]:
    """Simulate, with progress on the terminal; the result and the run's options (for the report
    and the trace files)."""
    seed = request.seed if request.seed is not None else int.from_bytes(os.urandom(4), "little")
    options = SimulationOptions(seed=seed, depth=request.depth, max_behaviours=request.max_behaviours,
                                time_limit=time_limit, max_memory=max_memory, keep_going=keep_going,
                                strategy=request.strategy)
    terminal.note(f"simulating {model.spec.title()}: random behaviours, seed {seed}, strategy {request.strategy}"
                  f" ({len(model.labels)} action instances)")
    terminal.start_progress()
    try:
        result = simulate(model, options, terminal.progress, compile="never" if compile == "never" else "now")
    finally:
        terminal.stop_progress()
    run_options = {"simulate": True, "seed": seed, "depth": request.depth, "max_behaviours": request.max_behaviours,
                   "strategy": request.strategy, "continue": keep_going, "time_limit": time_limit,
                   "max_memory_bytes": max_memory, "engine": "engine", "compile": compile,
                   "constraints": [c.name for c in model.constraints + model.action_constraints],
                   "deadlock": model.check_deadlock}
    return result, run_options
