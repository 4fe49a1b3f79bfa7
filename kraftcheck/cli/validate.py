"""Numbers on the command line, checked before any work: what a number option accepts, and why not.

click parses ``nan`` and ``inf`` as floats, and ``nan`` passes every comparison a range check
makes, so a ``--time-limit nan`` would be accepted and a ``--max-memory nan`` would fail as a
traceback deep in the run. Each option here says what it wants instead, in the words of
checker/limits.py, which every other entry point's options use too. ``--threads`` beyond the
CPUs this process may run on is lowered to them, with a note: each worker thread takes its own
tables (tens of MiB), and threads the CPUs cannot run only wait their turn.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import click

from kraftcheck.checker.kernels.threads import requested_threads, usable_cpus
from kraftcheck.checker.limits import count_problem, depth_problem, number_problem


def positive_number(what: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback: a finite number greater than 0 (``what``: "seconds", "GiB"), or None."""
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        problem = None if value is None else number_problem(value, what)
        if problem:
            raise click.BadParameter(problem)
        return value
    return callback


def positive(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A click callback for integers: greater than 0, or None."""
    problem = None if value is None else count_problem(value)
    if problem:
        raise click.BadParameter(problem)
    return value


def simulation_depth(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A click callback for ``--depth``: each running behaviour keeps its whole path (its trace)
    in memory, a batch of at least 16 of them at once, so a depth beyond a million is refused
    here rather than as numpy's allocation error."""
    problem = None if value is None else depth_problem(value)
    if problem:
        raise click.BadParameter(problem)
    return value


def worker_threads(requested: Optional[int], note: Callable[[str], None]) -> Optional[int]:
    """The worker threads to run: ``--threads`` (else ``KRAFTCHECK_THREADS``, checked by
    ``threads.requested_threads``), at most the usable CPUs (``note`` says so when it lowers
    them); None: the engine's default (every usable CPU)."""
    source = "--threads"
    if requested is None:
        requested = requested_threads()
        if requested is None:
            return None
        source = "KRAFTCHECK_THREADS"
    cpus = usable_cpus()
    if requested > cpus:
        note(f"{source} {requested} is more than the {cpus} CPUs this process may use; running {cpus} threads")
        return cpus
    return requested
