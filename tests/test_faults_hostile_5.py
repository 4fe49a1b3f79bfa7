"""Edges of the commands that run many checks (``sweep``, ``ci``): a sweep or gate stopped by a
signal, and the advice a run too large for its limits gives. Each case failed before its fix."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

KRAFTCHECK = str(Path(sys.executable).with_name("kraftcheck"))

# die_hard whose big=7 check process stalls while it builds its parameters (the sweep itself, which
# builds them too, does not): a check interrupted before it wrote anything
STALLING_JUGS = '''
import sys, time
from dataclasses import dataclass
from kraftcheck.specs.die_hard import DieHard, DieHardParams

@dataclass(frozen=True)
class StallingParams(DieHardParams):
    def __post_init__(self):
        if self.big == 7 and sys.argv[1:2] == ["check"]:
            time.sleep(120)

class StallingJugs(DieHard):
    name = "stalling_jugs"
    Params = StallingParams
'''


def _signals_at_their_default() -> None:
    """A child's start with SIGINT and SIGTERM at their default action, as from a user's shell (a
    suite run in the background of a script has SIGINT ignored, which kraftcheck rightly keeps)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def _wait_for(path: Path, process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None and time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _signalled_once_started(argv: list[str], cwd: Path, started: Path, signum: int) -> tuple[int, str, str]:
    """Run ``argv`` in ``cwd`` as from a user's shell, send ``signum`` half a second after the file
    ``started`` appears (the stalled check is then in its spec's parameters); its exit code, stdout
    and stderr. The process is killed if it outlives the test."""
    process = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_signals_at_their_default)
    try:
        _wait_for(started, process)
        time.sleep(0.5)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, stdout, stderr


def test_a_stopped_sweep_leaves_complete_run_directories_or_none_and_names_what_did_not_run(tmp_path):
    """A sweep stopped while a check was starting left that configuration's run directory holding
    only its marker and a log saying 'interrupted', no report; the sweep said only 'interrupted',
    not which configurations ran and which did not (one's directory from an earlier sweep stays)."""
    spec = tmp_path / "stalling_jugs.py"
    spec.write_text(STALLING_JUGS)
    out = tmp_path / "sw"
    earlier = out / "03-big=9"
    earlier.mkdir(parents=True)
    (earlier / "ci-check.json").write_text("{}\n")
    (earlier / "report.json").write_text("{}\n")
    returncode, stdout, stderr = _signalled_once_started(
        [KRAFTCHECK, "sweep", "--spec", f"{spec}:StallingJugs", "--vary", "big=5,7,9", "-j", "1", "--out", str(out)],
        tmp_path, out / "02-big=7" / "output.log", signal.SIGTERM)
    assert returncode == 130, stderr
    assert sorted(p.name for p in out.iterdir()) == ["01-big=5", "03-big=9"], stderr
    assert json.loads((out / "01-big=5" / "report.json").read_text())["result"] == "violated"
    assert (earlier / "report.json").read_text() == "{}\n"  # not this sweep's: left as it was
    said = stderr.strip().splitlines()[-1]
    assert said.startswith("kraftcheck: error: interrupted"), stderr
    for words in ("ran to its end: 01-big=5", "stopped before it wrote a report (its run directory removed): 02-big=7",
                  "did not run: 03-big=9", f"{earlier} is an earlier run's"):
        assert words in said, said
    assert stdout == ""  # no table of a sweep that did not finish


def _gate_signalled_while_a_check_stalls(tmp_path: Path, signum: int) -> tuple[int, str, str]:
    """kraftcheck ci (-j 1, --progress-json progress.ndjson) on checks first, stalls and last,
    signalled once the second has started: (exit code, stdout, stderr)."""
    (tmp_path / "stalling_jugs.py").write_text(STALLING_JUGS)
    (tmp_path / "kraftcheck.toml").write_text("".join(
        f'[checks.{name}]\nspec = "stalling_jugs.py:StallingJugs"\nparams = {{ big = {big} }}\n'
        f'violates = ["big_jug_never_holds_4"]\n\n' for name, big in (("first", 5), ("stalls", 7), ("last", 9))))
    return _signalled_once_started(
        [KRAFTCHECK, "ci", "--no-color", "-j", "1", "--progress-json", "progress.ndjson"], tmp_path,
        tmp_path / "kraftcheck-ci" / "stalls" / "output.log", signum)


def test_a_stopped_gate_names_the_checks_that_ran_and_those_that_did_not(tmp_path):
    """kraftcheck ci stopped (SIGINT, Ctrl-C's; the sweep's test sends SIGTERM) said only
    'interrupted', and left the directory of a check stopped while it started: a marker and a log,
    no report."""
    returncode, stdout, stderr = _gate_signalled_while_a_check_stalls(tmp_path, signal.SIGINT)
    assert returncode == 130, stdout + stderr
    assert sorted(p.name for p in (tmp_path / "kraftcheck-ci").iterdir()) == ["first"]
    assert stderr.strip().splitlines()[-1] == (
        "kraftcheck: error: interrupted; ran to its end: first; stopped before it wrote a report (its run directory "
        "removed): stalls; did not run: last")


def _check(*args):
    from click.testing import CliRunner

    from kraftcheck.cli.main import cli
    return CliRunner().invoke(cli, ["check", *map(str, args)], catch_exceptions=False)


@pytest.mark.parametrize("spec,params,advice", [
    ("two_phase", ["--param", "rm=5"], "to shrink the model, give smaller values of rm (--param rm=N) or add a state "
                                          "constraint that bounds the search (Spec.constraints); or raise"),
    ("mutex", [], "to shrink the model, add a state constraint that bounds the search (Spec.constraints); or"),
    ("kafka", ["--brokers", "2"], "to shrink the model, give fewer brokers or records (--brokers, --records) "
                                  "or lower fault bounds (--lossy-shutdowns, --lossless-shutdowns"),
])
def test_a_graph_too_large_to_dump_is_told_how_to_shrink_its_own_spec(tmp_path, spec, params, advice):
    """--dump-graph past --graph-limit told every spec to use 'fewer brokers, values, faults', the
    Kafka model's words (two_phase has resource managers, mutex no number to lower)."""
    result = _check("--spec", spec, *params, "--dump-graph", tmp_path / "g.graphml", "--graph-limit", 5)
    assert result.exit_code == 2 and advice in result.stderr, result.stderr
    assert spec == "kafka" or "brokers" not in result.stderr
    assert not (tmp_path / "g.graphml").exists()


def test_an_analysis_over_its_limits_is_told_how_to_shrink_its_own_spec():
    """The state graph's analyses said 'shrink the bounds', a word of the Kafka model's (its fault
    bounds); a spec of resource managers is told its own parameter."""
    from kraftcheck.checker.analyses.state_graph import build_graph
    from kraftcheck.checker.errors import UsageError
    from kraftcheck.checker.explore.result import memory_in_use
    from kraftcheck.checker.model import Model
    from kraftcheck.specs import spec_class
    cls = spec_class("two_phase")
    model = Model(cls(cls.Params(rm=2)))
    graph = build_graph(model)
    advice = r"to shrink the model, give smaller values of rm \(--param rm=N\)"
    with pytest.raises(UsageError, match=r"raise --max-memory, or " + advice):
        graph.check_budget(memory_in_use())
    with pytest.raises(UsageError, match=r"raise it, or " + advice):
        build_graph(model, max_states=5)


def _cli(*args):
    from click.testing import CliRunner

    from kraftcheck.cli.main import cli
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_more_checks_at_once_than_the_machine_runs_are_refused_before_any(tmp_path, monkeypatch):
    """sweep and ci -j N started N check processes whatever N (each about 0.2 GiB before it
    explores): -j 1000 on a matrix or manifest of 1000 would start 1000. Past 4 per CPU it is now
    refused, exit 2, before any run; a few configurations with a large -j start only as many."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("os.cpu_count", lambda: 1)  # a machine of one CPU: at most 4 checks at once
    result = _cli("sweep", "--spec", "two_phase", "--vary", "rm=1,2,3,4,5", "-j", 5)
    assert result.exit_code == 2, result.output
    assert ("--jobs 5: 5 checks at once is more than the 4 this machine runs (4 per CPU, 1 CPU)"
            in result.stderr and "give --jobs 4 or fewer" in result.stderr), result.stderr
    assert not (tmp_path / "kraftcheck-sweep").exists()
    (tmp_path / "kraftcheck.toml").write_text("".join(
        f'[checks.c{rm}]\nspec = "two_phase"\nparams = {{ rm = {rm} }}\nexpect = "holds"\n' for rm in range(1, 6)))
    result = _cli("ci", "--no-color", "-j", 1000, "--progress-json", "progress.ndjson")
    assert result.exit_code == 2 and "--jobs 1000: 5 checks at once is more than the 4" in result.stderr, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kraftcheck.toml"]  # no progress file, no --out
    result = _cli("sweep", "--spec", "die_hard", "-j", 1000)  # one configuration: one process
    assert result.exit_code == 1 and "1 configurations, 1 at a time" in result.stderr, result.output


def test_a_gate_whose_out_directory_is_refused_leaves_no_progress_file(tmp_path, monkeypatch):
    """kraftcheck ci refusing an --out directory it did not make had already made the
    --progress-json file, empty, and said it was starting the checks."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kraftcheck.toml").write_text('[checks.a]\nspec = "die_hard"\nviolates = ["big_jug_never_holds_4"]\n')
    (tmp_path / "kraftcheck-ci" / "a").mkdir(parents=True)
    result = _cli("ci", "--no-color", "--progress-json", "progress.ndjson")
    assert result.exit_code == 2 and "kraftcheck-ci/a exists and was not made by kraftcheck ci" in result.stderr
    assert not (tmp_path / "progress.ndjson").exists() and "1 checks from" not in result.output


def test_a_check_that_ended_as_the_runner_stopped_counts_as_run_not_stopped(tmp_path):
    """A check that ended on its own in the moment between the signal and the runner's stop was
    named 'stopped' (its report of a whole run said to be the run so far)."""
    from types import SimpleNamespace

    from kraftcheck.ci import runner
    from kraftcheck.ci.manifest import Check
    from kraftcheck.request import CheckRequest
    checks = [Check(name, CheckRequest("die_hard", {})) for name in ("ended", "stopped", "waiting")]
    jobs = []
    for check, code in zip(checks, (1, 130)):
        run_dir = tmp_path / check.name
        run_dir.mkdir()
        (run_dir / "report.json").write_text("{}")
        outcome = runner.Outcome(check, ["kraftcheck"], "", run_dir)
        jobs.append(SimpleNamespace(outcome=outcome, process=SimpleNamespace(returncode=code)))
    said = runner._interrupted(checks, {}, jobs, tmp_path)
    assert (said.ran, said.stopped_kept, said.not_run) == (["ended"], ["stopped"], ["waiting"])
