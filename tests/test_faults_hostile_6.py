"""Edges of the commands that run many checks (``sweep``, ``ci``) and of trace pictures: what the
help says, a gate or sweep stopped by a signal or refused by the disk, and pictures too wide to
draw. Each case failed before its fix."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from test_faults_hostile_5 import STALLING_JUGS, _signalled_once_started

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


def test_a_stopped_gate_says_in_its_progress_stream_how_each_started_check_ended(tmp_path):
    """The --progress-json stream of a gate stopped (SIGTERM) had a 'started' line for the check
    it stopped and no 'finished' line: a program reading it never learned that the check ended,
    nor how."""
    (tmp_path / "stalling_jugs.py").write_text(STALLING_JUGS)
    (tmp_path / "kraftcheck.toml").write_text("".join(
        f'[checks.{name}]\nspec = "stalling_jugs.py:StallingJugs"\nparams = {{ big = {big} }}\n'
        f'violates = ["big_jug_never_holds_4"]\n\n' for name, big in (("first", 5), ("stalls", 7), ("last", 9))))
    returncode, stdout, stderr = _signalled_once_started(
        [KRAFTCHECK, "ci", "--no-color", "-j", "1", "--progress-json", "progress.ndjson"], tmp_path,
        tmp_path / "kraftcheck-ci" / "stalls" / "output.log", signal.SIGTERM)
    assert returncode == 130, stdout + stderr
    events = [json.loads(line) for line in (tmp_path / "progress.ndjson").read_text().splitlines()]
    ended = {e["check"]: e for e in events if e["event"] == "finished"}
    assert [e["check"] for e in events if e["event"] == "started"] == ["first", "stalls"]
    assert sorted(ended) == ["first", "stalls"], events
    assert ended["first"]["stopped"] is False and ended["first"]["result"] == "violated"
    assert ended["stalls"]["stopped"] is True and ended["stalls"]["result"] is None
    assert ended["stalls"]["exit_code"] != 0 and ended["stalls"]["wall_s"] > 0
    assert "[2/3] stalls: stopped" in stdout


def _cli(*args):
    from click.testing import CliRunner

    from kraftcheck.cli.main import cli
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_a_trace_too_wide_to_draw_is_refused_before_drawing(tmp_path):
    """trace render capped a picture's height (about 1,000 steps) but drew any number of lanes:
    a trace of 404 lanes was a picture 1,011 inches wide, each lane a header, a line and its
    notes at every step. Past 500 inches it is refused, exit 2, saying what shows every lane."""
    assert _cli("check", "--spec", "two_phase_eager_commit", "--trace-dir", tmp_path / "t", "-q").exit_code == 1
    (trace,) = (tmp_path / "t").glob("*.json")
    written = json.loads(trace.read_text())
    written["graph"]["lanes"].update({f"x{i}": [] for i in range(400)})  # lanes that own nothing still are drawn
    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps(written))
    for picture in ("p.svg", "p.png"):
        result = _cli("trace", "render", wide, "-o", tmp_path / picture)
        assert result.exit_code == 2, result.output
        assert "a picture of this trace's 404 lanes would be 1,011 inches wide, more than the 500" in result.output
        assert "trace show --broker B" in result.output and not (tmp_path / picture).exists()


def test_a_check_whose_run_directory_the_disk_refused_leaves_none(tmp_path, monkeypatch):
    """A gate check whose run directory the disk refused halfway (its marker written, its log
    not) left the directory holding the marker alone, which the next gate took for a run of its
    own; nothing said it was there, and the summary sent the reader to --out for it."""
    import errno

    import kraftcheck.ci.runner as runner
    (tmp_path / "kraftcheck.toml").write_text('[checks.jugs]\nspec = "die_hard"\nviolates = ["big_jug_never_holds_4"]\n')

    def full_disk(path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(runner, "open", full_disk, raising=False)
    monkeypatch.chdir(tmp_path)
    result = _cli("ci", "--no-color", "--out", "runs")
    assert result.exit_code == 3, result.output
    assert not (tmp_path / "runs" / "jugs").exists()
    assert "the disk is full" in result.output and "(what was made of it is removed)" in result.output, result.output
    assert "failing runs are in" not in result.output  # there are none: --out is gone too

