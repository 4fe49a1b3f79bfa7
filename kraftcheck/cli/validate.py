"""Numbers on the command line, checked before any work: what a number option accepts, and why not.

click parses ``nan`` and ``inf`` as floats, and ``nan`` passes every comparison a range check
makes, so a ``--time-limit nan`` would be accepted and a ``--max-memory nan`` would fail as a
traceback deep in the run. Each option here says what it wants instead, in the words of
checker/limits.py, which every other entry point's options use too.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import click

from kraftcheck.checker.limits import count_problem, depth_problem, number_problem

Callback = Callable[[click.Context, click.Parameter, Any], Any]


def refusing(problem_of: Callable[[Any], Optional[str]]) -> Callback:
    """A click callback that passes None and any value ``problem_of`` finds no problem with, and
    refuses the others in its words."""
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        problem = None if value is None else problem_of(value)
        if problem:
            raise click.BadParameter(problem)
        return value
    return callback


def positive_number(what: str) -> Callback:
    """A finite number greater than 0 (``what``: "seconds", "GiB"), or None."""
    return refusing(lambda value: number_problem(value, what))


# integers greater than 0, or None
positive = refusing(count_problem)

# ``--depth``: each running behaviour keeps its whole path (its trace) in memory, a batch of at
# least 16 of them at once, so a depth beyond a million is refused here rather than as numpy's
# allocation error
simulation_depth = refusing(depth_problem)
