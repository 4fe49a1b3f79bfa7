"""How many checks ``kraftcheck ci`` and ``kraftcheck sweep`` run at once on this machine.

A module of its own, importing nothing heavy: both commands' ``--jobs`` help is built from
``JOBS_PER_CPU`` when the command's module imports, which the runner (the manifest, the request,
the specs) would slow.
"""

from __future__ import annotations

import os

from kraftcheck.checker.errors import UsageError

# checks at once, per CPU: each check is a process of its own (about 0.2 GiB before it explores)
# and CPU-bound, so past the CPUs they only share them, each time budget covering less search
JOBS_PER_CPU = 4


def max_jobs() -> int:
    """The most checks run at once on this machine: JOBS_PER_CPU a CPU."""
    return JOBS_PER_CPU * (os.cpu_count() or 1)


def check_jobs(jobs: int, checks: int) -> None:
    """Refuse (UsageError) ``--jobs`` that would run more than ``max_jobs()`` of ``checks`` checks at once."""
    at_once, most, cpus = min(jobs, checks), max_jobs(), os.cpu_count() or 1
    if at_once > most:
        raise UsageError(f"--jobs {jobs}: {at_once:,} checks at once is more than the {most} this machine runs "
                         f"({JOBS_PER_CPU} per CPU, {cpus} CPU{'s' if cpus > 1 else ''}): each is a process of its "
                         "own (about 0.2 GiB before it explores), and past the CPUs they only share them, each time "
                         f"budget covering less of its search; give --jobs {most} or fewer")
