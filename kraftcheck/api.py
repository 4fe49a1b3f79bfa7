"""Run a check from Python: ``kraftcheck.check(spec, **params)``, the command line's ``check``
without the terminal: the same request (kraftcheck/request.py), the same pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence, Union

from kraftcheck.checker.errors import KraftcheckError, UsageError
from kraftcheck.checker.explore.simulate import DEFAULT_STRATEGY
from kraftcheck.checker.explore.result import ProgressFn, Result, no_progress
from kraftcheck.checker.spec import Spec
from kraftcheck.pipeline import explorer_for, make_spec  # noqa: F401 (API: an explorer by its command-line name)
from kraftcheck.request import ENGINES, CheckRequest, Simulation  # noqa: F401 (API)


def check(spec: Union[str, type, Spec], *, invariants: Optional[Sequence[str]] = None, keep_going: bool = False,
          max_states: Optional[int] = None, max_depth: Optional[int] = None, time_limit: Optional[float] = None,
          max_memory_gib: Optional[float] = None, engine: str = "engine", compile: Optional[str] = None,
          trace_dir: Optional[Union[str, Path]] = None, progress: ProgressFn = no_progress,
          fingerprints: bool = False, compact: bool = False, symmetry: bool = False,
          constraints: Optional[Sequence[str]] = None, deadlock: Optional[bool] = None, threads: Optional[int] = None,
          **params: Any) -> Result:
    """Explore ``spec`` with parameters ``params`` and return the Result.

    ``result.status`` is ``holds``, ``violated`` or ``incomplete``; counts are TLC's. With
    ``trace_dir``, each violation's shortest counterexample is written there as a trace file
    (``violation.trace_file``), as ``kraftcheck check`` does; one the disk refuses is named in
    ``result.unwritten`` instead. ``constraints``: the names of the state and action constraints
    to apply (default all the spec declares); ``deadlock``: check for deadlocks (default: the
    spec's ``check_deadlock``, on unless it declares otherwise). ``compact``: keep the visited
    states tree-compressed (``--compact``: exact, in fewer bytes). ``threads``: worker threads
    (default ``KRAFTCHECK_THREADS``, else every usable CPU). ``compile``: "background" (None, the
    default) or "now", as ``--compile``: for ``engine="engine"`` only.
    """
    return run(CheckRequest(spec, params, invariants=_names(invariants, "invariants"), keep_going=keep_going,
                            constraints=_names(constraints, "constraints"), deadlock=deadlock,
                            max_states=max_states, max_depth=max_depth, time_limit=time_limit,
                            max_memory_gib=max_memory_gib, engine=engine, compile=compile,
                            fingerprints=fingerprints, compact=compact, symmetry=symmetry, threads=threads,
                            trace_dir=None if trace_dir is None else str(trace_dir)), progress)


def simulate(spec: Union[str, type, Spec], *, seed: int = 0, depth: Optional[int] = None,
             max_behaviours: Optional[int] = None, time_limit: Optional[float] = None, keep_going: bool = False,
             strategy: Optional[str] = None, swarm: bool = False, invariants: Optional[Sequence[str]] = None,
             constraints: Optional[Sequence[str]] = None, deadlock: Optional[bool] = None,
             trace_dir: Optional[Union[str, Path]] = None, progress: ProgressFn = no_progress,
             threads: Optional[int] = None, **params: Any) -> Result:
    """Random behaviours of ``spec`` (``kraftcheck check --simulate``): the Result, whose
    ``simulation`` holds the figures and whose ``status`` is ``violated`` or ``incomplete`` (a
    simulation is never exhaustive). Without ``max_behaviours`` or ``time_limit`` it runs until
    the first violation (with ``keep_going``: until interrupted). ``strategy``: "by-action"
    (None: the default), "uniform" or "swarm" (``swarm=True`` is short for the last), as ``--strategy``."""
    if swarm and strategy not in (None, "swarm"):
        raise UsageError(f"swarm=True is short for strategy='swarm'; it cannot go with strategy={strategy!r}")
    return run(CheckRequest(spec, params, invariants=_names(invariants, "invariants"), keep_going=keep_going,
                            constraints=_names(constraints, "constraints"), deadlock=deadlock,
                            time_limit=time_limit, compile="now", threads=threads,
                            simulation=Simulation(seed, depth, max_behaviours,
                                                  "swarm" if swarm else strategy or DEFAULT_STRATEGY),
                            trace_dir=None if trace_dir is None else str(trace_dir)), progress)


def _names(given: Optional[Sequence[str]], what: str) -> Optional[tuple[str, ...]]:
    """A list of names as the request's tuple (``invariants`` None: all, as ``()``); one name
    given as a string is refused, not taken as a list of its letters."""
    if isinstance(given, (str, bytes)):
        raise UsageError(f"{what}: give a list of names, such as {what}=[{given!r}], not a string")
    if given is None:
        return () if what == "invariants" else None
    try:
        return tuple(given)
    except TypeError:
        raise UsageError(f"{what}: give a list of names, got {given!r}") from None


def run(request: CheckRequest, progress: Optional[ProgressFn] = no_progress) -> Result:
    """Run ``request`` (kraftcheck/request.py) through the pipeline the command line runs; its
    Result, with the trace files the disk refused in ``result.unwritten``."""
    from kraftcheck import pipeline
    if progress is None:  # as not given: no reports
        progress = no_progress
    if not callable(progress):  # else a TypeError from the explorer's first report, mid-run
        raise UsageError(f"progress: give a function called with each progress report, got {progress!r}")
    checked = pipeline.run(request, pipeline.Silent(progress))
    if checked.cut_short is not None:  # Ctrl-C after the exploration: the caller asked to stop
        raise KeyboardInterrupt
    if checked.analyses is not None and checked.analyses.error is not None:
        # an analysis that failed leaves no verdict, as the command line's exit 2 and 'error' say
        raise (UsageError if checked.analyses.refused else KraftcheckError)(checked.analyses.error)
    checked.result.unwritten = checked.unwritten
    return checked.result
