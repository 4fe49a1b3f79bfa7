"""``kraftcheck sweep``: the matrix, the table, local runs and Spark tasks give the same rows."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraftcheck.checker.errors import UsageError
from kraftcheck.cli.main import cli
from kraftcheck.sweep import matrix

TWO_PHASE = ["--spec", "two_phase", "--vary", "rm=2,3"]

EVEN_JUGS = Path(__file__).with_name("even_jugs.py")  # a spec whose parameters raise ValueError
FAULTY = Path(__file__).with_name("test_faults_spec_errors.py")  # Faulty: one of its functions raises on x = 2


def test_the_matrix_is_every_row_times_every_combination():
    configs = matrix.build("kafka", {"brokers": 3}, [("a", {}), ("b", {"protocol": "kafka-4.x"})],
                           {"min_isr_changes": [1, 0], "fences": [0, 1]})
    assert len(configs) == 8
    assert configs[0].name == "a min_isr_changes=1 fences=0"
    assert configs[-1].name == "b min_isr_changes=0 fences=1"
    assert configs[-1].params == {"brokers": 3, "protocol": "kafka-4.x", "min_isr_changes": 0, "fences": 1}
    assert matrix.build("two_phase", {}, [], {})[0].name == "(defaults)"


@pytest.mark.parametrize("kwargs, words", [
    (dict(params={"nope": 1}), "has no parameter 'nope'"),
    (dict(vary={"rm": []}), "non-empty list"),
    (dict(vary={"rm": [4, 4]}), "a value is listed twice"),
    (dict(rows=[("x", {}), ("x", {})]), "same name"),
])
def test_bad_matrices_are_refused_before_anything_runs(kwargs, words):
    args = dict(params={}, rows=[], vary={}) | kwargs
    with pytest.raises(UsageError, match=words):
        matrix.build("two_phase", args["params"], args["rows"], args["vary"])


def test_a_varied_choice_named_none_is_that_choice_not_the_default():
    from kraftcheck.cli.sweep_cmd import _configurations
    configs = _configurations(None, "kafka", ("brokers=2",), ("recovery=none,balanced",), None, None, None)
    assert [c.params["recovery"] for c in configs] == ["none", "balanced"]
    assert configs[0].name == "recovery=none"


def test_a_matrix_file_and_its_errors(tmp_path):
    good = tmp_path / "m.toml"
    good.write_text('spec = "two_phase"\ncontinue = true\n[vary]\nrm = [2, 3]\n'
                    '[[configurations]]\nname = "x"\nparams = {}\n')
    configs = matrix.from_file(good)
    assert [c.name for c in configs] == ["x rm=2", "x rm=3"] and all(c.keep_going for c in configs)
    bad = tmp_path / "bad.toml"
    bad.write_text("spec = \n")
    with pytest.raises(UsageError, match="bad.toml: not valid TOML"):
        matrix.from_file(bad)
    bad.write_text("colour = 1\n")
    with pytest.raises(UsageError, match="unknown key 'colour'"):
        matrix.from_file(bad)


def _sweep(tmp_path, *args):
    return CliRunner().invoke(cli, ["sweep", *args, "--out", str(tmp_path / "runs")])


def test_a_local_sweep_prints_one_row_per_configuration(tmp_path):
    result = _sweep(tmp_path, "--spec", "two_phase", "--vary", "rm=3,4")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("| configuration |") and len(lines) == 2 + 2
    assert lines[2].startswith("| rm=3 | `rm=3` | holds (288 states) | 288 |")
    assert "holds (1,568 states)" in lines[3] and "[2/2]" in result.stderr


def test_formats_and_exit_code_with_a_violation(tmp_path):
    out = tmp_path / "t.csv"
    result = _sweep(tmp_path, "--spec", "die_hard", "--vary", "big=5,7", "--format", "csv", "--output", str(out))
    assert result.exit_code == 1  # die_hard's invariant is violated: the puzzle has an answer
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [r["configuration"] for r in rows] == ["big=5", "big=7"]
    assert all(r["result"] == "violated" and r["violations"].startswith("big_jug_never_holds_4:") for r in rows)
    as_json = _sweep(tmp_path, "--spec", "die_hard", "--vary", "big=5", "--format", "json")
    report = json.loads(as_json.stdout)
    assert report["exit_code"] == 1 and report["configurations"][0]["violations"][0]["trace_file"]


def test_a_configuration_the_spec_refuses_stops_the_sweep_before_any_run(tmp_path):
    result = _sweep(tmp_path, "--param", "isr_shrinks=0", "--param", "lossy_shutdowns=0", "--param", "fences=0",
                    "--vary", "protocol=kip-966,kafka-3.5", "--param", "keep_unclean_in_elr=true")
    assert result.exit_code == 2 and not (tmp_path / "runs").exists()
    assert ("configuration protocol=kafka-3.5: --keep-unclean-in-elr needs ELR, which kafka-3.5 does not have"
            in result.stderr)
    result = _sweep(tmp_path, "--spec", "two_phase", "--vary", "rm=2,3,31")
    assert result.exit_code == 2 and not (tmp_path / "runs").exists()
    assert "configuration rm=31: parameter rm=31 is out of range: allowed 1..30" in result.stderr
    result = _sweep(tmp_path, "--spec", "die_hard", "--vary", "big=5,7", "--symmetry")
    assert result.exit_code == 2 and not (tmp_path / "runs").exists()
    assert "configuration big=5: spec die_hard declares no symmetry" in result.stderr


def test_every_configuration_is_checked_before_the_first_runs(tmp_path):
    shutil.copy(EVEN_JUGS, tmp_path / "even_jugs.py")
    configs = matrix.build(f"{tmp_path / 'even_jugs.py'}:EvenJugs", {}, [], {"big": [4, 5]})
    with pytest.raises(UsageError, match=re.escape("configuration big=5: spec even_jugs refuses the parameters "
                                                   "big=5: ValueError: the big jug must hold an even number")):
        matrix.check_configurations(configs)
    path = tmp_path / "m.toml"
    path.write_text('spec = "two_phase"\ntime_limit = nan\n[vary]\nrm = [2, 3]\n')
    with pytest.raises(UsageError, match="configuration rm=2: time_limit: nan is not a number of seconds"):
        matrix.check_configurations(matrix.from_file(path))
    path.write_text('spec = "two_phase"\nmax_states = 0\n')
    with pytest.raises(UsageError, match=r"configuration \(defaults\): max_states: must be greater than 0, got 0"):
        matrix.check_configurations(matrix.from_file(path))


def test_bad_input_is_one_line_and_exit_2_before_any_run(tmp_path):
    (tmp_path / "a-file").write_text("")
    for args, words in [(["--vary", "rm"], "--vary expects KEY=V1,V2"),
                        ([*TWO_PHASE, "--vary", "rm=4"], "--vary rm is given twice"),
                        (["--spec", "two_phase", "--vary", "colour=1"], "has no parameter 'colour'"),
                        # a trailing comma made a last value "not given": the default, run a second time
                        (["--spec", "kafka", "--vary", "recovery=balanced,"], "--vary recovery: an empty value"),
                        ([*TWO_PHASE, "--output", str(tmp_path / "a-file" / "t.md")], "--output")]:
        result = _sweep(tmp_path, *args)
        assert result.exit_code == 2 and words in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists()


def test_symmetry_and_fingerprints_reach_every_run_and_the_rows_say_so(tmp_path):
    from kraftcheck import api
    result = _sweep(tmp_path, "--spec", "two_phase", "--vary", "rm=3,4", "--symmetry", "--fingerprints",
                    "--format", "json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)["configurations"]
    for row, rm in zip(rows, (3, 4)):
        assert row["distinct_states"] == api.check("two_phase", rm=rm, symmetry=True).distinct_states
        assert row["message"] == "one state per orbit (--symmetry); up to fingerprint collisions"
    path = tmp_path / "m.toml"
    path.write_text('spec = "two_phase"\nsymmetry = true\n[vary]\nrm = [3]\n')
    assert [c.symmetry and not c.fingerprints for c in matrix.from_file(path)] == [True]
    path.write_text('spec = "two_phase"\nsymmetry = 1\n')
    with pytest.raises(UsageError, match="symmetry must be true or false, got 1"):
        matrix.from_file(path)


@pytest.mark.spark
def test_spark_tasks_give_the_local_rows(spark_context, tmp_path):
    from kraftcheck.sweep.spark import run_on_spark
    from kraftcheck.sweep.local import run_local
    configs = matrix.build("two_phase", {"rm": 3}, [], {}) + matrix.build("die_hard", {}, [], {}) + \
        matrix.build("two_phase", {"rm": 3}, [], {}, symmetry=True, fingerprints=True)
    on_spark = run_on_spark(spark_context, configs, tmp_path / "spark")
    local = run_local(configs, tmp_path / "local", 2, lambda e: None)
    keys = ("configuration", "result", "distinct_states", "states_generated", "depth")
    assert [[getattr(r, k) for k in keys] for r in on_spark] == [[getattr(r, k) for k in keys] for r in local]
    assert [v["depth"] for v in on_spark[1].violations] == [v["depth"] for v in local[1].violations]
    assert on_spark[2].message == local[2].message != ""  # the reduced run says so on both
    assert (tmp_path / "spark").is_dir() and list((tmp_path / "spark").rglob("die_hard.*.json"))


@pytest.mark.spark
def test_the_command_line_runs_a_sweep_on_spark(spark_context, tmp_path, monkeypatch):
    """``--master`` and ``--spark-conf`` reach the context the sweep starts, which it stops at the
    end; the rows are the runs' answers. The context is the session's (a second SparkContext
    cannot start beside it in one process; the command lines of check start their own)."""
    from kraftcheck.spark import session
    started, stopped = [], []
    monkeypatch.setattr(session, "start_context", lambda master, conf=None: started.append((master, conf)) or
                        spark_context)
    monkeypatch.setattr(session, "stop_context", stopped.append)
    done = CliRunner().invoke(cli, ["sweep", *TWO_PHASE, "--master", "local[1]", "--spark-conf",
                                    "spark.task.maxFailures=2", "--format", "json", "--out", str(tmp_path / "runs")])
    assert done.exit_code == 0, done.stderr
    rows = json.loads(done.stdout)["configurations"]
    assert [(r["configuration"], r["result"]) for r in rows] == [("rm=2", "holds"), ("rm=3", "holds")]
    assert started == [("local[1]", {"spark.task.maxFailures": "2"})] and stopped == [spark_context]


def test_the_table_never_replaces_the_matrix_file_it_reads(tmp_path):
    """--output naming the matrix file wrote the table over it (exit 0)."""
    path = tmp_path / "m.toml"
    text = 'spec = "two_phase"\n[vary]\nrm = [2]\n'
    path.write_text(text)
    result = _sweep(tmp_path, str(path), "--output", str(path))
    assert result.exit_code == 2 and "is the matrix file this command reads" in result.stderr, result.stderr
    assert path.read_text() == text and not (tmp_path / "runs").exists()


def test_a_configuration_that_never_started_is_said_so_as_it_ends(tmp_path, monkeypatch):
    """Its line said 'exit None': a run directory the disk refused has no exit code. Its row is
    incomplete and the sweep exits 3, as check and ci say a full disk (it was 'failed', exit 2,
    bad input, for a configuration nothing was wrong with)."""
    import errno

    import kraftcheck.ci.runner as runner

    def full_disk(run_dir):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(runner, "prepare_dir", full_disk)
    result = _sweep(tmp_path, "--spec", "two_phase", "--vary", "rm=2", "--format", "json")
    assert result.exit_code == 3, result.output
    assert "01-rm=2: not started" in result.stderr and "exit None" not in result.stderr, result.stderr
    (row,) = json.loads(result.stdout)["configurations"]
    assert row["result"] == "incomplete" and "No space left on device" in row["message"], row


def test_a_configuration_killed_past_its_time_limit_is_incomplete_not_bad_input(tmp_path, monkeypatch):
    """A run still going past its time limit and the runner's grace is killed, as ``kraftcheck
    ci`` kills it. Its row said 'failed' with the run's last line, and the sweep exited 2, bad
    input, for a configuration nothing was wrong with; now the row is incomplete, saying it was
    killed, and the sweep exits 3, as for a run its time limit stopped."""
    import kraftcheck.ci.runner as runner

    monkeypatch.setattr(runner, "KILL_GRACE_S", 0.0)
    result = _sweep(tmp_path, "--spec", "two_phase", "--vary", "rm=7", "--time-limit", "0.5", "--format", "json")
    assert result.exit_code == 3, result.output
    (row,) = json.loads(result.stdout)["configurations"]
    assert row["result"] == "incomplete" and row["message"].startswith("killed: still running"), row


def test_a_violated_row_of_a_run_cut_short_says_so(tmp_path):
    """With --continue a run goes on past its violations for the shortest of each check; stopped by
    its time limit, the markdown row gave the violations found as if it had explored every state
    (the reason was only in the CSV and JSON message); now the verdict says what stopped it."""
    result = _sweep(tmp_path, "--spec", "two_phase_eager_commit", "--vary", "rm=10", "--continue",
                    "--time-limit", "0.5")
    assert result.exit_code == 1, result.output
    row = result.stdout.splitlines()[2]
    assert "`tc_consistent` (6 states); stopped at --time-limit 0.5 |" in row, row


def test_an_incomplete_row_without_counts_reads_as_its_reason():
    """A run killed past its time limit, or never started, has no counts: its markdown verdict
    read 'incomplete (, killed: ...)', an empty count before the reason."""
    from kraftcheck.sweep.table import Row, markdown
    killed = Row("rm=7", "rm=7", "incomplete", wall_s=900.0, message="killed: still running 900 s after it started")
    counted = Row("rm=8", "rm=8", "incomplete", distinct_states=1200, message="stopped at --time-limit 1")
    assert killed.verdict == "incomplete (killed: still running 900 s after it started)"
    assert counted.verdict == "incomplete (1,200 states, stopped at --time-limit 1)"
    assert "(, " not in markdown([killed, counted])


def test_a_configuration_whose_spec_raised_partway_is_an_error_not_refused(tmp_path):
    """Its row said 'refused', as a configuration whose check refused its input before running:
    the sweep read only the check's exit code, 2 either way. The check's report now says ``error``
    (its run began, then the spec raised on a state), and the row says so from it."""
    result = _sweep(tmp_path, "--spec", f"{FAULTY}:Faulty", "--vary", "fault=1", "--format", "json")
    assert result.exit_code == 2, result.output
    (row,) = json.loads(result.stdout)["configurations"]
    assert row["result"] == "error" and row["message"].startswith("action Step raised ZeroDivisionError"), row
    assert row["distinct_states"] is None  # the error left the counts unknown: none is shown
    report = json.loads(next((tmp_path / "runs").glob("01-*/report.json")).read_text())
    # the row gives the error's first line; the path to the state that raised is in the report
    assert report["result"] == "error" and report["error"].splitlines()[0] == row["message"], report
    assert "3. Step: x=2" in report["error"]
    assert "01-fault=1: error" in result.stderr, result.stderr
    markdown = _sweep(tmp_path, "--spec", f"{FAULTY}:Faulty", "--vary", "fault=1")
    assert "| fault=1 | `fault=1` | error: action Step raised ZeroDivisionError" in markdown.stdout, markdown.stdout


def test_a_refused_row_and_an_error_row_are_told_apart_by_the_checks_report():
    """No report: the check refused its input before it ran (exit 2). A report saying error: it ran
    and ended in an error with no verdict. Both are no verdict: the sweep exits 2."""
    from kraftcheck.sweep.table import exit_code, row_from_report
    config = matrix.build("two_phase", {}, [], {"rm": [2]})[0]
    refused = row_from_report(config, None, 1.0, "refused: bad input")
    error = row_from_report(config, {"result": "error", "error": "invariant x raised"}, 1.0)
    assert (refused.result, refused.verdict) == ("refused", "refused: bad input")
    assert (error.result, error.verdict) == ("error", "error: invariant x raised")
    assert exit_code([error]) == exit_code([refused]) == 2
