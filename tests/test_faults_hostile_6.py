"""Edges of the commands that run many checks (``sweep``, ``ci``) and of trace pictures: what the
help says, a gate or sweep stopped by a signal or refused by the disk, and pictures too wide to
draw. Each case failed before its fix."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_faults_hostile_5 import _cli, _gate_signalled_while_a_check_stalls, _signals_at_their_default

KRAFTCHECK = str(Path(sys.executable).with_name("kraftcheck"))
JUGS_MANIFEST = '[checks.jugs]\nspec = "die_hard"\nviolates = ["big_jug_never_holds_4"]\n'  # passes: a quick check


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
    returncode, stdout, stderr = _gate_signalled_while_a_check_stalls(tmp_path, signal.SIGTERM)
    assert returncode == 130, stdout + stderr
    events = [json.loads(line) for line in (tmp_path / "progress.ndjson").read_text().splitlines()]
    ended = {e["check"]: e for e in events if e["event"] == "finished"}
    assert [e["check"] for e in events if e["event"] == "started"] == ["first", "stalls"]
    assert sorted(ended) == ["first", "stalls"], events
    assert ended["first"]["stopped"] is False and ended["first"]["result"] == "violated"
    assert ended["stalls"]["stopped"] is True and ended["stalls"]["result"] is None
    assert ended["stalls"]["exit_code"] != 0 and ended["stalls"]["wall_s"] > 0
    assert "[2/3] stalls: stopped" in stdout


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
    (tmp_path / "kraftcheck.toml").write_text(JUGS_MANIFEST)

    def full_disk(path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(runner, "open", full_disk, raising=False)
    monkeypatch.chdir(tmp_path)
    result = _cli("ci", "--no-color", "--out", "runs")
    assert result.exit_code == 3, result.output
    assert not (tmp_path / "runs" / "jugs").exists()
    assert "the disk is full" in result.output and "(what was made of it is removed)" in result.output, result.output
    assert "failing runs are in" not in result.output  # there are none: --out is gone too


# die_hard whose big=7 check stalls in a Spark executor, as it builds its parameters (the sweep's
# driver, which builds them too, does not stall)
STALLING_ON_SPARK = '''
import sys, time
from dataclasses import dataclass
from kraftcheck.specs.die_hard import DieHard, DieHardParams

@dataclass(frozen=True)
class StallingParams(DieHardParams):
    def __post_init__(self):
        if self.big == 7 and "pyspark.worker" in sys.modules:
            time.sleep(120)

class StallingJugs(DieHard):
    name = "stalling_jugs"
    Params = StallingParams
'''


def _running_in_session(sid: int) -> list[int]:
    """The processes of session ``sid`` still running (a launcher script ended a moment ago and not
    yet reaped by init is not running)."""
    import psutil
    running = []
    for p in psutil.process_iter(["status"]):
        try:
            if os.getsid(p.pid) == sid and p.info["status"] != psutil.STATUS_ZOMBIE:
                running.append(p.pid)
        except OSError:  # ended meanwhile
            pass
    return running


@pytest.mark.spark
def test_a_stopped_sweep_on_spark_leaves_complete_run_directories_or_none_and_names_what_did_not_run(tmp_path):
    """A sweep on Spark stopped by SIGTERM said only 'interrupted' and left the run directory of
    the configuration it stopped as the task left it; nor did it refuse a run directory that was
    not kraftcheck's, which its tasks wrote into."""
    spec = tmp_path / "stalling_jugs.py"
    spec.write_text(STALLING_ON_SPARK)
    out = tmp_path / "sw"
    earlier = out / "03-big=9"
    earlier.mkdir(parents=True)
    (earlier / "ci-check.json").write_text("{}\n")
    process = subprocess.Popen([KRAFTCHECK, "sweep", "--spec", f"{spec}:StallingJugs", "--vary", "big=5,7,9",
                                "--master", "local[1]", "--out", str(out)], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True,
                               preexec_fn=_signals_at_their_default)
    try:
        deadline = time.monotonic() + 120
        while not (out / "02-big=7" / "ci-check.json").exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.1)
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        left = _running_in_session(process.pid)
        for pid in left:  # Spark's JVM and Python workers, were any left: never past the test
            os.kill(pid, signal.SIGKILL)
    assert not left, f"the sweep left processes running: {left}"
    assert process.returncode == 130, stderr
    assert sorted(p.name for p in out.iterdir()) == ["01-big=5", "03-big=9"], stderr
    assert json.loads((out / "01-big=5" / "report.json").read_text())["result"] == "violated"
    said = stderr.strip().splitlines()[-1]
    assert said == ("kraftcheck: error: interrupted; ran to its end: 01-big=5; stopped before it wrote a report (its "
                    f"run directory removed): 02-big=7; did not run: 03-big=9 ({earlier} is an earlier run's)"), stderr
    assert stdout == ""
    # a run directory that is not kraftcheck's is refused before Spark starts
    (out / "01-big=5" / "ci-check.json").unlink()
    result = subprocess.run([KRAFTCHECK, "sweep", "--spec", f"{spec}:StallingJugs", "--vary", "big=5",
                             "--master", "local[1]", "--out", str(out)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "01-big=5 exists and was not made by kraftcheck" in result.stderr
    assert "Spark" not in result.stderr


def test_a_spark_task_never_empties_a_run_directory_that_is_not_kraftchecks(tmp_path):
    """A Spark sweep's task emptied its configuration's run directory whatever it held: the driver
    refuses one that is not kraftcheck's before the job, but an executor may see another file
    system than the driver's, or the directory come meanwhile, and the user's files were gone."""
    from kraftcheck.sweep import matrix
    from kraftcheck.sweep.spark import _run_one
    (config,) = matrix.build("die_hard", {}, [], {})
    mine = tmp_path / "01-defaults"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    index, report, _, message = _run_one((0, config, str(tmp_path), "this-sweep"))
    assert index == 0 and report is None, report
    assert message == f"refused: {mine} exists and was not made by kraftcheck; choose another --out"
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_a_passing_gate_keeps_an_out_directory_it_did_not_make(tmp_path, monkeypatch):
    """A passing gate removed its --out once empty: a directory the user made for it (empty) was
    gone, and --out as a symbolic link to a directory ended in kraftcheck's internal error
    (rmdir of a link) after every check passed. One that held only an earlier gate's runs still
    goes with them, as one the gate made does."""
    (tmp_path / "kraftcheck.toml").write_text(JUGS_MANIFEST)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "made").mkdir()
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    (tmp_path / "earlier" / "jugs").mkdir(parents=True)
    (tmp_path / "earlier" / "jugs" / "ci-check.json").write_text("{}\n")
    for out in ("made", "link", "earlier"):
        result = _cli("ci", "--no-color", "--out", out)
        assert result.exit_code == 0, result.output
    assert (tmp_path / "made").is_dir() and not any((tmp_path / "made").iterdir())
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real").is_dir() and not any((tmp_path / "real").iterdir())
    assert not (tmp_path / "earlier").exists()


def test_a_sweep_refuses_a_run_directory_not_its_own_before_it_says_it_starts(tmp_path):
    """The local sweep printed its start line ('1 configurations, 1 at a time') and then refused a
    run directory it did not make, as kraftcheck ci's ('was not made by kraftcheck ci')."""
    (tmp_path / "sw" / "01-defaults").mkdir(parents=True)
    result = subprocess.run([KRAFTCHECK, "sweep", "--spec", "die_hard", "--out", str(tmp_path / "sw")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f"kraftcheck: error: {tmp_path / 'sw' / '01-defaults'} exists and was not made by "
                             "kraftcheck; choose another --out\n"), result.stderr


# the program's functions, each made to send the program SIGTERM first
SIGNALLED = """
import os, signal
def signalled(call):
    def signalled_call(*args):
        os.kill(os.getpid(), signal.SIGTERM)
        return call(*args)
    return signalled_call
import kraftcheck.ci.runner as runner
runner._finish = signalled(runner._finish)  # a check has ended: the signal comes before the runner notes it
"""


def test_a_signal_after_every_check_ran_waits_for_the_gates_report(tmp_path):
    """A signal while the gate judged its checks (all run) ended it with 'interrupted' alone: no
    summary, no JUnit report, and the run directories of the passing checks removed or not as far
    as it had got; so did one that came as the last check ended, before the runner saw it end. The
    gate now gives its report first, and says the signal came."""
    (tmp_path / "kraftcheck.toml").write_text(JUGS_MANIFEST)
    program = SIGNALLED + """
import sys
import kraftcheck.cli.ci_cmd as ci_cmd
ci_cmd.judge = signalled(ci_cmd.judge)
from kraftcheck.cli.main import main
sys.argv = ["kraftcheck", "ci", "--no-color", "--junit", "junit.xml"]
main()
"""
    said = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          preexec_fn=_signals_at_their_default)
    assert said.returncode == 0, said.stdout + said.stderr
    assert "1 of 1 checks pass; exit 0" in said.stdout and (tmp_path / "junit.xml").exists()
    assert not (tmp_path / "kraftcheck-ci").exists()
    assert said.stderr.strip().splitlines()[-1] == ("kraftcheck: note: stopped after every check had run: the gate "
                                                    "gave its report first")


def test_a_signal_after_every_configuration_ran_waits_for_the_sweeps_table(tmp_path):
    """A signal while the sweep made its table (every configuration run) ended it with
    'interrupted' alone and no table, as did one that came as the last configuration's run ended,
    before the runner saw it end. The sweep now gives its table first, and says the signal came."""
    program = SIGNALLED + """
import sys
import kraftcheck.cli.sweep_cmd as sweep_cmd
sweep_cmd.exit_code = signalled(sweep_cmd.exit_code)
from kraftcheck.cli.main import main
sys.argv = ["kraftcheck", "sweep", "--spec", "die_hard", "--format", "csv"]
main()
"""
    said = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          preexec_fn=_signals_at_their_default)
    assert said.returncode == 1, said.stdout + said.stderr  # die_hard is violated
    assert said.stdout.startswith("configuration,") and len(said.stdout.splitlines()) == 2, said.stdout
    assert said.stderr.strip().splitlines()[-1] == ("kraftcheck: note: stopped after every configuration had run: "
                                                    "the sweep gave its table first")


def test_names_too_long_for_a_directory_are_refused_or_cut_short(tmp_path, monkeypatch):
    """A ci check or sweep configuration named past a file system's 255 bytes ended in
    kraftcheck's internal error (ENAMETOOLONG looking for its run directory). A check's name is
    refused past 200 characters, naming the limit; a configuration's directory takes the first 200."""
    monkeypatch.chdir(tmp_path)
    long = "x" * 300
    (tmp_path / "kraftcheck.toml").write_text(f'[checks.{long}]\nspec = "die_hard"\nexpect = "holds"\n')
    result = _cli("ci", "--no-color")
    assert result.exit_code == 2 and "give one of at most 200 characters, not 300" in result.output, result.output
    (tmp_path / "m.toml").write_text(f'spec = "die_hard"\n[[configurations]]\nname = "{long}"\n')
    result = _cli("sweep", "m.toml", "--out", "sw", "--format", "csv")
    assert result.exit_code == 1, result.output  # die_hard is violated
    assert [p.name for p in (tmp_path / "sw").iterdir()] == ["01-" + "x" * 200]
    assert result.stdout.splitlines()[1].startswith(long + ",(defaults),violated")


def test_a_gate_or_sweep_refuses_an_out_directory_another_one_is_using(tmp_path, monkeypatch):
    """Two gates (or sweeps) given the same --out at once emptied each other's run directories as
    their checks wrote them, and a gate could read, as its check's report, the report another
    gate's check of the same name wrote there. The second is now refused before it runs anything,
    exit 2, naming the one that holds it."""
    from kraftcheck.checker.dirlock import lock_directory
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kraftcheck.toml").write_text(JUGS_MANIFEST)
    with lock_directory(tmp_path / "runs", "kraftcheck ci (its --out)"):
        for command in (["ci", "--no-color", "--progress-json", "p.ndjson"], ["sweep", "--spec", "die_hard"]):
            result = _cli(*command, "--out", "runs")
            assert result.exit_code == 2, result.output
            assert f"runs is in use by kraftcheck ci (its --out): pid {os.getpid()}" in result.output, result.output
            assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [".kraftcheck.lock"]
        assert not (tmp_path / "p.ndjson").exists()
    result = _cli("ci", "--no-color", "--out", "runs")  # once it is free: the gate runs, and leaves it as it was
    assert result.exit_code == 0 and (tmp_path / "runs").is_dir() and not any((tmp_path / "runs").iterdir())


def test_an_out_that_is_a_link_to_a_directory_not_yet_made_is_made(tmp_path, monkeypatch):
    """--out a symbolic link whose directory is not there yet (made by the first run, as before
    --out was held) was refused once the gate and the sweep held their --out: 'cannot take ...:
    File exists'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kraftcheck.toml").write_text(JUGS_MANIFEST)
    (tmp_path / "gate").symlink_to("gate-runs")
    (tmp_path / "sweep").symlink_to("sweep-runs")
    assert _cli("ci", "--no-color", "--out", "gate").exit_code == 0
    result = _cli("sweep", "--spec", "die_hard", "--out", "sweep")
    assert result.exit_code == 1, result.output  # die_hard is violated
    assert (tmp_path / "gate").is_symlink() and (tmp_path / "gate-runs").is_dir()
    assert [p.name for p in (tmp_path / "sweep-runs").iterdir()] == ["01-defaults"]


def test_an_out_that_is_a_loop_of_links_is_refused_as_bad_input(tmp_path, monkeypatch):
    """--out a symbolic link to itself ended ci and sweep in kraftcheck's internal error (pathlib's
    'Symlink loop' as they took their hold of --out) instead of saying what was wrong."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kraftcheck.toml").write_text(JUGS_MANIFEST)
    (tmp_path / "loop").symlink_to("loop")
    for command in (["ci", "--no-color"], ["sweep", "--spec", "die_hard"]):
        result = _cli(*command, "--out", "loop")
        assert result.exit_code == 2, result.output
        assert "kraftcheck: error: --out loop is a loop of symbolic links; give a directory" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kraftcheck.toml", "loop"]


def test_a_gate_or_sweep_leaves_its_out_to_one_that_takes_it_as_it_ends(tmp_path, monkeypatch):
    """A gate (or sweep) removing the --out it made, once nothing was left in it, looked and then
    removed: another taking --out in between (its lock file there) ended the first, its report
    given, in kraftcheck's internal error (Directory not empty)."""
    import errno

    import kraftcheck.ci.runner as runner
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kraftcheck.toml").write_text(JUGS_MANIFEST)

    def full_disk(path, *args, **kwargs):  # no check starts: --out is left empty at once
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    rmdir = Path.rmdir

    def taken_meanwhile(directory):
        (directory / ".kraftcheck.lock").write_text("{}\n")  # another's hold, taken since the look
        rmdir(directory)

    monkeypatch.setattr(runner, "open", full_disk, raising=False)
    monkeypatch.setattr(Path, "rmdir", taken_meanwhile)
    for command, code in ((["ci", "--no-color"], 3), (["sweep", "--spec", "die_hard"], 3)):
        result = _cli(*command, "--out", command[0])
        assert result.exit_code == code, result.output
        assert [p.name for p in (tmp_path / command[0]).iterdir()] == [".kraftcheck.lock"]
