"""Run a check from Python: ``kraftcheck.check(spec, **params)``, the command line's ``check``
without the terminal."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence, Union

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.concrete import check_in_stricter_variant
from kraftcheck.checker.explore.result import Options, ProgressFn, Result, no_progress
from kraftcheck.checker.limits import check_number
from kraftcheck.checker.model import Model, spec_instance
from kraftcheck.checker.spec import Spec
from kraftcheck.specs import checked_spec_class, spec_class

ENGINES = ("engine", "reference", "spark")


def explorer_for(engine: str, compile: str = "background", spark: Optional[dict[str, Any]] = None) -> Any:
    """A fresh explorer by its command-line name. With ``compile="background"`` the engine explores
    with its first tier (bytecode, or Python) while its kernels compile in another process, when
    they are not cached yet; with ``"now"`` it compiles them first. ``spark``: the Spark explorer's settings
    (``master``, ``conf``, ``work_dir``); kraftcheck.spark is imported only for that engine."""
    if spark and engine != "spark":
        raise UsageError(f"{', '.join(sorted(spark))}: Spark settings need --engine spark")
    if engine == "spark":
        from kraftcheck.spark import SparkExplorer
        return SparkExplorer(**(spark or {}))
    if engine == "engine":
        from kraftcheck.checker.explore.engine import Engine
        return Engine(compile=compile)
    if engine == "reference":
        from kraftcheck.checker.explore.reference import ReferenceExplorer
        return ReferenceExplorer()
    raise UsageError(f"unknown engine {engine!r}; choose one of: {', '.join(ENGINES)}")


def make_spec(spec: Union[str, type, Spec], params: dict[str, Any]) -> Spec:
    """A spec instance from a name or reference (``file.py:Class``, ``module:Class``), a Spec
    subclass, or an instance (then ``params`` must be empty)."""
    if isinstance(spec, Spec):
        if params:
            raise UsageError("give parameters either in the spec instance or as keywords, not both")
        return spec
    cls = spec_class(spec) if isinstance(spec, str) else checked_spec_class(spec)
    known = set(cls.Params.__dataclass_fields__)
    unknown = sorted(set(params) - known)
    if unknown:
        raise UsageError(f"spec {cls.name} has no parameter {unknown[0]!r}; its parameters: {', '.join(sorted(known))}")
    return spec_instance(cls, params)


def check(spec: Union[str, type, Spec], *, invariants: Optional[Sequence[str]] = None, keep_going: bool = False,
          max_states: Optional[int] = None, max_depth: Optional[int] = None, time_limit: Optional[float] = None,
          max_memory_gib: Optional[float] = None, engine: str = "engine", compile: str = "background",
          trace_dir: Optional[Union[str, Path]] = None, progress: ProgressFn = no_progress,
          fingerprints: bool = False, symmetry: bool = False, constraints: Optional[Sequence[str]] = None,
          deadlock: Optional[bool] = None, **params: Any) -> Result:
    """Explore ``spec`` with parameters ``params`` and return the Result.

    ``result.status`` is ``holds``, ``violated`` or ``incomplete``; counts are TLC's. With
    ``trace_dir``, each violation's shortest counterexample is written there as a trace file
    (``violation.trace_file``), as ``kraftcheck check`` does. ``constraints``: the names of the
    state and action constraints to apply (default all the spec declares); ``deadlock``: check
    for deadlocks (default: the spec's ``check_deadlock``, on unless it declares otherwise).
    """
    check_number("max_memory_gib", max_memory_gib, "GiB")  # before it is turned into bytes
    options = Options(max_states=max_states, max_depth=max_depth, time_limit=time_limit, keep_going=keep_going,
                      max_memory=None if max_memory_gib is None else max(1, int(max_memory_gib * 2**30)),
                      fingerprints=fingerprints, symmetry=symmetry)
    model = Model(make_spec(spec, params), check=list(invariants) if invariants else None,
                  constraints=list(constraints) if constraints is not None else None, deadlock=deadlock)
    result = explorer_for(engine, compile).explore(model, options, progress)
    check_in_stricter_variant(model, result.violations)
    if trace_dir is not None and result.violations:
        from kraftcheck.traces import write_counterexample
        run_options = {"invariants": list(invariants or ()), "continue": keep_going, "max_states": max_states,
                       "max_depth": max_depth, "time_limit": time_limit, "engine": engine,
                       "constraints": [c.name for c in model.constraints + model.action_constraints],
                       "deadlock": model.check_deadlock}
        for v in result.violations:
            write_counterexample(model, v, run_options, trace_dir)
    return result


def simulate(spec: Union[str, type, Spec], *, seed: int = 0, depth: Optional[int] = None,
             max_behaviours: Optional[int] = None, time_limit: Optional[float] = None, keep_going: bool = False,
             strategy: str = "uniform", swarm: bool = False, invariants: Optional[Sequence[str]] = None,
             constraints: Optional[Sequence[str]] = None, deadlock: Optional[bool] = None,
             trace_dir: Optional[Union[str, Path]] = None, progress: ProgressFn = no_progress,
             **params: Any) -> Result:
    """Random behaviours of ``spec`` (``kraftcheck check --simulate``): the Result, whose
    ``simulation`` holds the figures and whose ``status`` is ``violated`` or ``incomplete`` (a
    simulation is never exhaustive). Without ``max_behaviours`` or ``time_limit`` it runs until
    the first violation (with ``keep_going``: until interrupted). ``strategy``: "uniform",
    "by-action" or "swarm" (``swarm=True`` is short for the last), as ``--strategy``."""
    from kraftcheck.checker.explore.simulate import SimulationOptions
    from kraftcheck.checker.explore.simulate import simulate as run_simulation

    if swarm and strategy not in ("uniform", "swarm"):
        raise UsageError(f"swarm=True is short for strategy='swarm'; it cannot go with strategy={strategy!r}")
    strategy = "swarm" if swarm else strategy

    options = SimulationOptions(seed=seed, depth=depth, max_behaviours=max_behaviours, time_limit=time_limit,
                                keep_going=keep_going, strategy=strategy)
    model = Model(make_spec(spec, params), check=list(invariants) if invariants else None,
                  constraints=list(constraints) if constraints is not None else None, deadlock=deadlock)
    result = run_simulation(model, options, progress)
    check_in_stricter_variant(model, result.violations)
    if trace_dir is not None and result.violations:
        from kraftcheck.traces import write_counterexample
        run_options = {"simulate": True, "seed": seed, "depth": depth, "max_behaviours": max_behaviours,
                       "strategy": strategy, "continue": keep_going, "time_limit": time_limit,
                       "invariants": list(invariants or ()), "engine": "engine",
                       "constraints": [c.name for c in model.constraints + model.action_constraints],
                       "deadlock": model.check_deadlock}
        for v in result.violations:
            write_counterexample(model, v, run_options, trace_dir)
    return result
