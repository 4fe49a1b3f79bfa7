"""Levels on disk, checkpoints and resume: a run killed at any moment (SIGKILL included) resumes
from its last finished level and ends with exactly the report of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.cli.main import cli
from kraftcheck.specs import spec_class

SAME = ("result", "exhaustive", "initial_states", "states_generated", "distinct_states", "depth", "coverage",
        "never_fired")


def _model(name, **params):
    cls = spec_class(name)
    return Model(cls(cls.Params(**params)))


def _summary(r):
    return (r.status, r.distinct_states, r.states_generated, r.depth, r.coverage(),
            [(v.check, v.depth, [s.label for s in v.steps]) for v in r.violations])


# tests/test_spill.py: levels on disk (a checkpoint, or spilled) give the in-memory results


def test_a_run_stopped_by_a_limit_resumes_to_the_same_end(tmp_path):
    full = Engine().explore(_model("two_phase", rm=6), Options(keep_going=True))
    stopped = Engine().explore(_model("two_phase", rm=6), Options(keep_going=True, max_depth=9,
                                                                   checkpoint_dir=str(tmp_path)))
    assert stopped.status == "incomplete"
    resumed = Engine().explore(_model("two_phase", rm=6), Options(keep_going=True, checkpoint_dir=str(tmp_path),
                                                                   resume=True))
    assert resumed.resumed_from_level == 9
    assert _summary(resumed) == _summary(full)


def test_a_run_stopped_by_a_limit_says_how_to_resume_as_a_hint_not_an_error(tmp_path):
    """Stopping at a limit is what was asked for: the resume command is said even under --quiet,
    and not as an error."""
    said = CliRunner().invoke(cli, ["check", "--spec", "two_phase", "--param", "rm=3", "--max-depth", "3",
                                    "--checkpoint", str(tmp_path / "run"), "--quiet", "--no-color"])
    assert said.exit_code == 3, said.output
    assert (f"kraftcheck: the last finished level is saved in {tmp_path / 'run'}: continue with the same "
            f"command, a larger --max-depth and --resume {tmp_path / 'run'} instead of --checkpoint") \
        in " ".join(said.stderr.split())
    assert "error" not in said.stderr


def test_a_disk_that_fills_up_stops_the_run_with_one_line_and_the_checkpoint_resumes(tmp_path, monkeypatch):
    """ENOSPC while a level is written: one line saying where and what to do, exit 3, no
    traceback; the checkpoint keeps the last finished level, and --resume (space freed) ends with
    the whole run's counts."""
    import errno
    from kraftcheck.checker.explore import levels
    run_dir = tmp_path / "run"
    add, calls = levels.DiskLevels.add, []

    def fills_up(self, *args):
        calls.append(1)
        if len(calls) == 6:  # the sixth level of Two-Phase rm=5
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path(self.depth, "words")))
        return add(self, *args)

    monkeypatch.setattr(levels.DiskLevels, "add", fills_up)
    args = ["check", "--spec", "two_phase", "--param", "rm=5", "--no-color", "--compile", "now"]
    said = CliRunner().invoke(cli, args + ["--checkpoint", str(run_dir)])
    assert said.exit_code == 3, said.output
    message = " ".join(said.stderr.split())
    assert "Traceback" not in said.stderr
    assert (f"kraftcheck: error: the disk is full writing {run_dir}" in message
            and f"continue with --resume {run_dir}" in message), message
    monkeypatch.setattr(levels.DiskLevels, "add", add)
    resumed = CliRunner().invoke(cli, args + ["--resume", str(run_dir), "--json", str(tmp_path / "r.json")])
    assert resumed.exit_code == 0, resumed.output
    report = json.loads((tmp_path / "r.json").read_text())
    whole = Engine().explore(_model("two_phase", rm=5), Options())
    assert (report["distinct_states"], report["states_generated"]) == (whole.distinct_states, whole.states_generated)
    assert report["resumed"] and report["resumed_from_level"] > 0


def test_a_run_stopped_before_its_first_level_resumes_from_the_start(tmp_path):
    """The manifest is written before the first level, so a run stopped at any moment has one;
    resumed, it starts again from the initial states and says so."""
    class StopBeforeTheFirstLevel(RunObserver):
        def run_started(self):
            (tmp_path / "level-0.words").write_bytes(b"\0" * 24)  # a level half written when it stopped
            raise KeyboardInterrupt

    full = Engine().explore(_model("two_phase", rm=4), Options(keep_going=True))
    stopped = Engine().explore(_model("two_phase", rm=4), Options(keep_going=True, checkpoint_dir=str(tmp_path)),
                               observer=StopBeforeTheFirstLevel())
    assert stopped.interrupted and json.loads((tmp_path / "checkpoint.json").read_text())["levels"] == 0
    resumed = Engine().explore(_model("two_phase", rm=4), Options(keep_going=True, checkpoint_dir=str(tmp_path),
                                                                   resume=True))
    assert resumed.resumed and resumed.resumed_from_level == 0
    assert _summary(resumed) == _summary(full)
    said = CliRunner().invoke(cli, ["check", "--spec", "two_phase", "--param", "rm=4", "--resume", str(tmp_path),
                                    "--no-color"])
    assert "that run already finished" in said.output


@pytest.mark.parametrize("checkpoint", [False, True], ids=["in-memory", "checkpoint"])
def test_a_stop_within_a_level_reports_the_counts_of_the_finished_levels(tmp_path, monkeypatch, checkpoint):
    """An interrupt (or a full disk) between two chunks of a level: the distinct states and the
    depth are those of the finished levels, which the checkpoint holds, and so are the
    transitions and each action's tally, as a run cut at that depth gives them; the partial
    level's successors counted too made the counts disagree with each other."""
    from kraftcheck.checker.explore import engine as engine_module

    chunks = {"started": 0}

    def stop_at_the_fortieth_chunk():
        chunks["started"] += 1
        if chunks["started"] == 40:
            raise KeyboardInterrupt

    monkeypatch.setattr(engine_module, "raise_if_stop_requested", stop_at_the_fortieth_chunk)
    model = _model("two_phase", rm=5)
    options = Options(keep_going=True, checkpoint_dir=str(tmp_path) if checkpoint else None)
    stopped = Engine(compile="now", chunk_candidates=256).explore(model, options)
    assert stopped.interrupted and stopped.depth > 1
    monkeypatch.undo()
    cut = Engine(compile="now").explore(model, Options(keep_going=True, max_depth=stopped.depth))
    assert _summary(stopped)[1:] == _summary(cut)[1:]
    if checkpoint:
        resumed = Engine(compile="now").explore(model, Options(keep_going=True, checkpoint_dir=str(tmp_path),
                                                               resume=True))
        assert _summary(resumed) == _summary(Engine(compile="now").explore(model, Options(keep_going=True)))


@pytest.mark.parametrize("spec,options", [("two_phase", dict(keep_going=True, max_states=3000)),
                                          ("two_phase_eager_commit", dict())], ids=["max-states", "violation"])
def test_an_interrupt_after_a_run_cut_within_a_level_keeps_its_counts(monkeypatch, spec, options):
    """A run a limit or its first violation cut within a level, then interrupted before its answer
    (while numba types the spec's functions, say): the counts are the cut run's, the partial
    level's included; its distinct states took them in while its transitions did not."""
    from kraftcheck.checker.explore.tiers import Tiers

    model = _model(spec, rm=5)
    cut = Engine(compile="now").explore(model, Options(**options))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Tiers, "confirm_spec_compiles", interrupted)
    stopped = Engine(compile="now").explore(model, Options(**options))
    assert stopped.interrupted
    assert _summary(stopped)[1:] == _summary(cut)[1:]


def test_violations_found_before_the_checkpoint_survive_the_resume(tmp_path):
    full = Engine().explore(_model("two_phase_eager_commit", rm=4), Options(keep_going=True))
    Engine().explore(_model("two_phase_eager_commit", rm=4), Options(keep_going=True, max_depth=8,
                                                                      checkpoint_dir=str(tmp_path)))
    resumed = Engine().explore(_model("two_phase_eager_commit", rm=4),
                               Options(keep_going=True, checkpoint_dir=str(tmp_path), resume=True))
    assert resumed.resumed_from_level == 8 and _summary(resumed) == _summary(full)


def test_an_interrupt_while_a_resume_rebuilds_its_visited_set_reports_the_checkpoints_counts(tmp_path, monkeypatch):
    """Ctrl-C while a resumed run rebuilds its visited set from the checkpoint's levels (minutes
    for a large run): the statistics are those of the levels finished so far, the checkpoint's,
    its violations included, and the checkpoint still resumes; the levels' distinct states with no
    transitions and no violation would say 'incomplete' of a run that had found one."""
    from kraftcheck.checker.kernels.visited import VisitedSet

    model = lambda: _model("two_phase_eager_commit", rm=4)  # noqa: E731
    stopped = Engine().explore(model(), Options(keep_going=True, max_depth=8, checkpoint_dir=str(tmp_path)))
    assert stopped.violations

    def interrupted(self, words):
        raise KeyboardInterrupt

    monkeypatch.setattr(VisitedSet, "restore", interrupted)
    cut = Engine().explore(model(), Options(keep_going=True, checkpoint_dir=str(tmp_path), resume=True))
    assert cut.interrupted and cut.resumed_from_level == 8
    assert _summary(cut) == _summary(stopped)
    monkeypatch.undo()
    resumed = Engine().explore(model(), Options(keep_going=True, checkpoint_dir=str(tmp_path), resume=True))
    assert _summary(resumed) == _summary(Engine().explore(model(), Options(keep_going=True)))


def test_a_checkpoint_that_went_on_past_its_violations_resumes_with_continue_only(tmp_path):
    """A --continue run's checkpoint holds violations its run went past. Resumed without
    --continue, a run would stop after one chunk of the next level (counts of no run) and mark
    the checkpoint finished, so that it could never be continued: refused, saying what to give."""
    from kraftcheck.checker.errors import UsageError

    model = lambda: _model("two_phase_eager_commit", rm=4)  # noqa: E731
    Engine().explore(model(), Options(keep_going=True, max_depth=8, checkpoint_dir=str(tmp_path)))
    with pytest.raises(UsageError, match="resume it with --continue"):
        Engine().explore(model(), Options(checkpoint_dir=str(tmp_path), resume=True))
    resumed = Engine().explore(model(), Options(keep_going=True, checkpoint_dir=str(tmp_path), resume=True))
    assert _summary(resumed) == _summary(Engine().explore(model(), Options(keep_going=True)))


def test_a_resume_whose_visited_set_outgrows_the_memory_budget_stops_while_rebuilding_it(tmp_path):
    """The visited set a resume rebuilds from the checkpoint's levels may not fit (the checkpoint
    moved to a smaller machine): --max-memory stops the run while the set is rebuilt, before any
    state is expanded, with the checkpoint's counts and the checkpoint resumable, as it stops any
    run, rather than once the whole set is in memory (or the system has killed the run)."""
    model = lambda: _model("two_phase", rm=5)  # noqa: E731
    stopped = Engine().explore(model(), Options(max_depth=8, checkpoint_dir=str(tmp_path)))
    cut = Engine().explore(model(), Options(max_memory=1, checkpoint_dir=str(tmp_path), resume=True))
    assert cut.incomplete_reason.startswith("stopped at --max-memory")
    assert _summary(cut)[1:] == _summary(stopped)[1:]
    resumed = Engine().explore(model(), Options(checkpoint_dir=str(tmp_path), resume=True))
    assert _summary(resumed) == _summary(Engine().explore(model(), Options()))

def _cli(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_refusals(tmp_path):
    done = tmp_path / "done"
    assert _cli("check", "--spec", "two_phase", "--param", "rm=3", "--checkpoint", str(done)).exit_code == 0
    again = _cli("check", "--spec", "two_phase", "--param", "rm=3", "--checkpoint", str(done))
    assert again.exit_code == 2 and "already holds a checkpoint" in again.stderr
    finished = _cli("check", "--spec", "two_phase", "--param", "rm=3", "--resume", str(done))
    assert finished.exit_code == 2 and "already finished" in finished.stderr
    stopped = tmp_path / "stopped"
    assert _cli("check", "--spec", "two_phase", "--param", "rm=3", "--max-depth", "4",
                "--checkpoint", str(stopped)).exit_code == 3
    other = _cli("check", "--spec", "two_phase", "--param", "rm=4", "--resume", str(stopped))
    assert other.exit_code == 2 and "belongs to another run" in other.stderr and "params" in other.stderr
    nothing = _cli("check", "--spec", "two_phase", "--resume", str(tmp_path / "nowhere"))
    assert nothing.exit_code == 2 and "no such checkpoint directory" in nothing.stderr
    assert not (tmp_path / "nowhere").exists()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    busy = _cli("check", "--spec", "two_phase", "--checkpoint", str(tmp_path / "busy"))
    assert busy.exit_code == 2 and "not empty" in busy.stderr
    both = _cli("check", "--spec", "two_phase", "--checkpoint", str(tmp_path / "a"), "--resume", str(done))
    assert both.exit_code == 2 and "not both" in both.stderr


def test_a_report_over_a_file_of_the_checkpoint_is_refused_before_any_work(tmp_path):
    """--json DIR/checkpoint.json would replace the manifest once the run ends, which then says to
    resume it: refused at once, creating nothing; a report beside the checkpoint is written."""
    refused = "names a file of the run's own checkpoint"
    run_dir = tmp_path / "ck"
    args = ["check", "--spec", "two_phase", "--param", "rm=3", "--no-color"]
    for target in (run_dir / "checkpoint.json", run_dir / "level-0002.words"):
        said = _cli(*args, "--max-depth", "3", "--checkpoint", str(run_dir), "--json", str(target))
        assert said.exit_code == 2 and refused in " ".join(said.stderr.split()), said.output
        assert not run_dir.exists()
    assert _cli(*args, "--max-depth", "3", "--checkpoint", str(run_dir)).exit_code == 3
    manifest = (run_dir / "checkpoint.json").read_bytes()
    said = _cli(*args, "--resume", str(run_dir), "--json", str(run_dir / "checkpoint.json"))
    assert said.exit_code == 2 and refused in " ".join(said.stderr.split()), said.output
    assert (run_dir / "checkpoint.json").read_bytes() == manifest
    assert _cli(*args, "--resume", str(run_dir), "--json", str(run_dir / "report.json")).exit_code == 0
    assert json.loads((run_dir / "report.json").read_text())["resumed_from_level"] == 3


def test_a_resume_leaves_files_of_other_names_in_the_checkpoint(tmp_path):
    """A resume removes what its stopped run wrote past the last finished level, and only that: a
    file of the user's whose name starts as a level's (notes, a copy of a level) stays, and is no
    error."""
    run_dir = tmp_path / "ck"
    args = ["check", "--spec", "two_phase", "--param", "rm=3", "--no-color"]
    assert _cli(*args, "--max-depth", "3", "--checkpoint", str(run_dir)).exit_code == 3
    notes, copy = run_dir / "level-notes.txt", run_dir / "level-0003.words.copy"
    notes.write_text("resumed with rm=3\n")
    copy.write_bytes(b"")
    assert _cli(*args, "--resume", str(run_dir)).exit_code == 0
    assert notes.exists() and copy.exists()


def _run(args, **kw):
    return subprocess.Popen([sys.executable, "-m", "kraftcheck", "check", *args, "--quiet"], **kw)


def test_kill_9_mid_run_then_resume_gives_the_uninterrupted_report(tmp_path):
    args = ["--spec", "two_phase", "--param", "rm=8", "--compile", "now"]
    # warm the kernels first, so the killed run is exploring (not compiling) when it dies
    assert _run(args + ["--max-depth", "2", "--json", str(tmp_path / "warm.json")]).wait(timeout=600) == 3
    whole = _run(args + ["--json", str(tmp_path / "whole.json")])
    assert whole.wait(timeout=600) == 0

    checkpoint = tmp_path / "ck"
    # the victim holds still once its level 12 is durable, until it is killed: no race with the clock
    victim = subprocess.Popen([sys.executable, "-c", HOLD_AT_LEVEL, str(checkpoint), "12", str(tmp_path / "held")])
    _wait_for_file(tmp_path / "held", victim)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    killed_at = json.loads((checkpoint / "checkpoint.json").read_text())["levels"]
    assert killed_at == 12

    resumed = _run(args + ["--resume", str(checkpoint), "--json", str(tmp_path / "resumed.json")])
    assert resumed.wait(timeout=600) == 0
    a = json.loads((tmp_path / "whole.json").read_text())
    b = json.loads((tmp_path / "resumed.json").read_text())
    assert (a["resumed"], a["resumed_from_level"]) == (False, None)  # a fresh run resumed nothing
    assert {k: a[k] for k in SAME} == {k: b[k] for k in SAME}
    assert (b["distinct_states"], b["states_generated"], b["depth"]) == (1745408, 18507778, 26)
    assert b["resumed_from_level"] == killed_at


# a two_phase rm=8 run with a checkpoint that, once its level argv[2] is durable, says so in the
# file argv[3] and waits to be killed
HOLD_AT_LEVEL = """
import sys, threading
from pathlib import Path
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class

class HoldAtLevel(RunObserver):
    def level_finished(self, depth, distinct, generated):
        if depth == int(sys.argv[2]):
            Path(sys.argv[3]).write_text(str(depth))
            threading.Event().wait()

cls = spec_class("two_phase")
Engine().explore(Model(cls(cls.Params(rm=8))), Options(checkpoint_dir=sys.argv[1]), observer=HoldAtLevel())
"""


def _wait_for_file(path, process):
    """Until ``process`` writes ``path`` (it then holds still); fails if it ends first."""
    deadline = time.monotonic() + 600  # a safety net for a hung process, not a race
    while not path.exists():
        assert process.poll() is None, "the run ended before it held at its level"
        assert time.monotonic() < deadline, "the run never held at its level"
        time.sleep(0.02)


# `kraftcheck check --spec two_phase --param rm=8 --compile now --checkpoint argv[1] --quiet` as
# the command line runs it (its stop handlers, the pipeline, its rendering and exit code), watched:
# once its level argv[2] is durable it says "held" on standard output and waits there for a signal
INTERRUPT_AT_LEVEL = """
import sys, threading
from kraftcheck import pipeline
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.stop import install_stop_handlers
from kraftcheck.cli.outcome import Outcome
from kraftcheck.cli.terminal import Terminal
from kraftcheck.request import CheckRequest

class HoldAtLevel(RunObserver):
    def level_finished(self, depth, distinct, generated):
        if depth == int(sys.argv[2]):
            print("held", flush=True)
            threading.Event().wait()  # until the signal's KeyboardInterrupt

install_stop_handlers()
terminal = Terminal(quiet=True)
request = CheckRequest(spec="two_phase", params={"rm": 8}, compile="now", checkpoint=sys.argv[1])
sys.exit(Outcome(terminal, pipeline.run(request, terminal, HoldAtLevel())).report(None))
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_exits_130_with_a_resumable_checkpoint(tmp_path, sig):
    """The signal reaches a run held mid-exploration (its level 10 durable): no race with its end."""
    args = ["--spec", "two_phase", "--param", "rm=8", "--compile", "now"]
    checkpoint = tmp_path / "ck"
    # a suite started as a background job of a non-interactive shell inherits SIGINT ignored, and
    # Python then keeps it ignored: give the run the terminal's default, as a user's shell does
    run = subprocess.Popen([sys.executable, "-c", INTERRUPT_AT_LEVEL, str(checkpoint), "10"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert run.stdout.readline() == "held\n", "the run ended before its level 10"
    os.kill(run.pid, sig)
    _, err = run.communicate(timeout=300)
    assert run.returncode == 130, err
    assert f"--resume {checkpoint}" in " ".join(err.split())
    assert json.loads((checkpoint / "checkpoint.json").read_text())["levels"] == 10
    resumed = _run(args + ["--resume", str(checkpoint), "--json", str(tmp_path / "r.json")])
    assert resumed.wait(timeout=600) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["distinct_states"], report["states_generated"], report["depth"]) == (1745408, 18507778, 26)


def test_the_memory_budget_stops_a_checkpointed_run_resumably(tmp_path):
    stopped = _cli("check", "--spec", "two_phase", "--param", "rm=5", "--max-memory", "0.0001",
                   "--checkpoint", str(tmp_path / "ck"))
    assert stopped.exit_code == 3 and "--resume" in stopped.stderr
    resumed = _cli("check", "--spec", "two_phase", "--param", "rm=5", "--resume", str(tmp_path / "ck"),
                   "--json", "-")
    assert resumed.exit_code == 0
    report = json.loads(resumed.stdout)
    assert (report["distinct_states"], report["depth"]) == (8832, 17)


def test_a_fingerprint_run_stopped_while_its_set_is_rebuilt_gives_no_collision_estimate(tmp_path, monkeypatch):
    """With --fingerprints, a resume stopped partway through rebuilding its set from the
    checkpoint's levels holds only some of the checkpoint's fingerprints: TLC's estimates from
    them (fewer states, wider gaps) would understate the collision probability of the states the
    report counts, so the run gives none."""
    from kraftcheck.checker.kernels import visited
    from kraftcheck.checker.explore import checkpoint_writer

    model = lambda: _model("two_phase_eager_commit", rm=4)  # noqa: E731
    options = dict(keep_going=True, fingerprints=True, checkpoint_dir=str(tmp_path))
    stopped = Engine().explore(model(), Options(max_depth=8, **options))
    assert stopped.collision_probability is not None and stopped.distinct_states > 40
    monkeypatch.setattr(checkpoint_writer, "RESTORE_CHUNK_STATES", 16)
    restore = visited.FingerprintSet.restore
    calls = []

    def restore_then_stop(self, words):
        if calls:
            raise KeyboardInterrupt
        calls.append(words.shape[0])
        restore(self, words)

    monkeypatch.setattr(visited.FingerprintSet, "restore", restore_then_stop)
    cut = Engine().explore(model(), Options(resume=True, **options))
    assert cut.interrupted and len(calls) == 1 and cut.distinct_states == stopped.distinct_states
    assert cut.collision_probability is None
