"""Run a sweep on this machine: each configuration a ``kraftcheck check`` process, several at once.

The processes are ``kraftcheck ci``'s (``kraftcheck.ci.runner``): the same isolation, time
budget, progress and run directories (``OUT/<configuration>/``: report, traces, log).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from kraftcheck.ci.manifest import DEFAULT_TIME_BUDGET_S, NAME_MAX, Check, resolve_spec
from kraftcheck.ci.runner import MARKER, run_checks
from kraftcheck.sweep.matrix import Configuration
from kraftcheck.sweep.table import Row, row_from_report


def directory_name(config: Configuration, index: int) -> str:
    """A file-system-safe run directory name, unique by its index (a long name cut short to a check
    name's most, ``NAME_MAX``)."""
    return f"{index + 1:02d}-" + (re.sub(r"[^A-Za-z0-9_.=-]+", "_", config.name).strip("_")[:NAME_MAX].rstrip("_")
                                  or "defaults")


def refuse_before_running(configs: list[Configuration], out: Path) -> None:
    """A run directory that is there and not kraftcheck's is refused before anything runs, or
    is said (the runs would empty it), on this machine or on Spark."""
    for i, c in enumerate(configs):
        run_dir = out / directory_name(c, i)
        if run_dir.exists() and not (run_dir / MARKER).exists():
            raise FileExistsError(f"{run_dir} exists and was not made by kraftcheck; choose another --out")


def run_local(configs: list[Configuration], out: Path, jobs: int, on_event: Callable[[dict], None]) -> list[Row]:
    root = Path.cwd()  # a spec file is found from here, as the command line finds it
    checks = [Check(directory_name(c, i), c.request().replace(spec=resolve_spec(c.spec, root),
                                                              time_limit=c.time_limit or DEFAULT_TIME_BUDGET_S))
              for i, c in enumerate(configs)]
    outcomes = run_checks(checks, root, out, jobs, on_event)
    rows = []
    for config, outcome in zip(configs, outcomes):
        if outcome.killed:  # past its time limit and the runner's grace: incomplete, as a limit makes it
            rows.append(Row(config.name, config.parameter_text(), "incomplete", wall_s=round(outcome.wall_s, 1),
                            message=f"killed: still running {outcome.wall_s:.0f} s after it started (time limit "
                                    f"{outcome.check.time_budget:g} s)"))
            continue
        said = outcome.stopped_unreported  # nothing wrong with the configuration, and no verdict: as ci says it
        if said is not None:
            rows.append(Row(config.name, config.parameter_text(), "incomplete", wall_s=round(outcome.wall_s, 1),
                            message=said))
            continue
        message = ""
        if outcome.report is None:
            message = ("refused: " if outcome.exit_code == 2 else "") + outcome.error_line
        rows.append(row_from_report(config, outcome.report, outcome.wall_s, message))
    return rows
