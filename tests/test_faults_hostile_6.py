"""Edges of the commands that run many checks (``sweep``, ``ci``) and of trace pictures: what the
help says, a gate or sweep stopped by a signal or refused by the disk, and pictures too wide to
draw. Each case failed before its fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

KRAFTCHECK = str(Path(sys.executable).with_name("kraftcheck"))


def test_the_jobs_help_of_ci_and_sweep_follows_the_limit_the_runner_applies():
    """Both commands' --jobs help said 'at most 4 per CPU' as a literal beside the runner's
    constant: a changed limit would have left the help saying the old one."""
    program = """
import kraftcheck.ci.jobs as jobs
jobs.JOBS_PER_CPU = 3
from click.testing import CliRunner
from kraftcheck.cli.main import cli
for command in ("ci", "sweep"):
    print(" ".join(CliRunner().invoke(cli, [command, "--help"]).output.split()))
"""
    said = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert said.returncode == 0, said.stderr
    helps = said.stdout.splitlines()
    assert len(helps) == 2 and all("at most 3 per CPU" in h for h in helps), said.stdout
