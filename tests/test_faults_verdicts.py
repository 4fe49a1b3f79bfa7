"""Faults against the verdict (issue 46, "found is kept" and liveness verdicts): a disk that fills up
while exploring, under the traces or under the JSON report never loses a violation found; a run
cut short says so with its depth, even with --continue; a violated liveness property is the run's
verdict; a run that ended in an error leaves no "holds" report; declared liveness properties a run
does not check are named, and their fairness names are checked on every run.

The full disk is injected: the writer raises OSError(ENOSPC), as a full disk makes it."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.cli.main import cli
from kraftcheck.specs import spec_class

EAGER = ["--spec", "two_phase_eager_commit", "--param", "rm=3"]  # tc_consistent violated at 6 states, depth 11


def _check(tmp_path, *args):
    result = CliRunner().invoke(cli, ["check", "--no-color", "--trace-dir", str(tmp_path / "traces"),
                                      "--json", str(tmp_path / "r.json"), *args])
    return result, " ".join(result.output.split())


def _report(tmp_path):
    return json.loads((tmp_path / "r.json").read_text())


def _full(*args):
    raise OSError(errno.ENOSPC, "No space left on device")


class _Unflushable:
    """A level file whose buffered bytes a full disk refuses again when it is closed."""

    def __init__(self, f):
        self.f = f

    def close(self):
        self.f.close()
        _full()


def _levels_fill_up_at(monkeypatch, depth):
    """Level files refuse every write once the run is at ``depth`` (a level after the violation),
    closing them too."""
    from kraftcheck.checker.explore import levels
    add = levels.DiskLevels.add

    def fills_up(self, *args):
        if self.depth >= depth:
            self._files = tuple(_Unflushable(f) for f in self._open())
            _full()
        return add(self, *args)

    monkeypatch.setattr(levels.DiskLevels, "add", fills_up)


def test_a_disk_full_under_the_checkpoint_keeps_the_violation_the_trace_and_the_json(tmp_path, monkeypatch):
    _levels_fill_up_at(monkeypatch, 8)
    run = tmp_path / "cp"
    result, out = _check(tmp_path, *EAGER, "--continue", "--checkpoint", str(run))
    assert result.exit_code == 1, out  # the verdict's code, not 3: something was violated
    assert "Traceback" not in out
    assert (f"invariant violated; exploration cut short: the disk is full writing in {run}, at depth 8" in out), out
    assert "violated invariant tc_consistent: shortest counterexample has 6 states, written to" in out
    assert f"kraftcheck: error: the disk is full writing in {run}: the run stopped before its end" in out
    assert f"continue with --resume {run}" in out
    report = _report(tmp_path)
    assert (report["result"], report["exhaustive"], report["depth"]) == ("violated", False, 8)
    assert report["incomplete_reason"] == f"the disk is full writing in {run}"
    (v,) = report["violations"]
    assert v["invariant"] == "tc_consistent" and (tmp_path / "traces").joinpath(v["trace_file"]).exists()


def test_levels_spilled_to_a_full_disk_end_the_run_incomplete_with_what_it_found(monkeypatch):
    _levels_fill_up_at(monkeypatch, 8)
    cls = spec_class("two_phase_eager_commit")
    result = Engine(compile="bytecode", spill_levels_at=0).explore(Model(cls(cls.Params(rm=3))),
                                                                    Options(keep_going=True))
    assert result.status == "violated" and not result.exhaustive and result.depth == 8
    assert result.incomplete_reason.startswith("the disk is full writing in ")
    assert result.levels_spilled["directory"] in result.incomplete_reason
    (v,) = result.violations
    assert (v.check, v.depth) == ("tc_consistent", 6)


class _Refusing:
    """A level file on a full disk: its writes stay in a buffer that every flush fails to write."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        return len(data)

    def flush(self):
        _full()

    def close(self):
        self.f.close()
        _full()


def test_a_violation_found_as_the_disk_fills_keeps_its_path(monkeypatch):
    """The level being built, where the violating state is, can no longer be flushed: the
    violation is kept with its whole path (rebuilding it once read that level back)."""
    cls = spec_class("two_phase_eager_commit")
    model = Model(cls(cls.Params(rm=3)))
    (expected,) = Engine(compile="bytecode").explore(model, Options()).violations
    from kraftcheck.checker.explore import levels
    add = levels.DiskLevels.add

    def fills_up(self, *args):
        if self.depth >= 5 and not isinstance(self._open()[0], _Refusing):  # level 5 holds the 6th state
            self._files = tuple(_Refusing(f) for f in self._open())
        return add(self, *args)

    monkeypatch.setattr(levels.DiskLevels, "add", fills_up)
    result = Engine(compile="bytecode", spill_levels_at=0).explore(model, Options())
    assert result.status == "violated" and result.incomplete_reason.startswith("the disk is full writing in ")
    (v,) = result.violations
    assert (v.check, v.steps) == ("tc_consistent", expected.steps) and v.depth == 6


def test_a_disk_full_without_violations_is_incomplete(monkeypatch, tmp_path):
    _levels_fill_up_at(monkeypatch, 3)
    result, out = _check(tmp_path, "--spec", "two_phase", "--param", "rm=3", "--checkpoint", str(tmp_path / "cp"))
    assert result.exit_code == 3, out
    assert "exploration incomplete: the disk is full writing in" in out and "at depth 3" in out
    assert _report(tmp_path)["result"] == "incomplete"


def test_a_full_trace_dir_names_the_trace_and_keeps_the_verdict_and_the_json(tmp_path, monkeypatch):
    monkeypatch.setattr("kraftcheck.pipeline.atomic_write", _full)
    result, out = _check(tmp_path, "--spec", "die_hard")
    assert result.exit_code == 1, out
    assert "the run stopped before its end" not in out
    assert "die_hard (default options): invariant violated" in out
    assert "shortest counterexample has 7 states, not written to" in out
    assert "kraftcheck: error: the trace of invariant big_jug_never_holds_4 was not written to" in out
    assert "the disk is full (No space left on device)" in out
    report = _report(tmp_path)
    assert report["result"] == "violated" and report["violations"][0]["trace_file"] is None
    (unwritten,) = report["unwritten_files"]
    assert unwritten["what"] == "the trace of invariant big_jug_never_holds_4"
    assert unwritten["path"] in out


@pytest.mark.parametrize("spec,code", [(["--spec", "die_hard"], 1), (["--spec", "two_phase", "--param", "rm=2"], 3)])
def test_a_full_disk_under_the_json_report_keeps_the_summary_and_the_verdicts_code(tmp_path, monkeypatch, spec, code):
    """Violated stays 1; a run that holds but could not write its report is 3, never 0."""
    monkeypatch.setattr("kraftcheck.checker.report.write_report", _full)
    result, out = _check(tmp_path, *spec)
    assert result.exit_code == code, out
    assert ("invariant violated" if code == 1 else "all invariants hold over the complete state space") in out
    assert f"kraftcheck: error: the JSON report was not written to {tmp_path / 'r.json'}: the disk is full" in out
    assert not (tmp_path / "r.json").exists()



@pytest.mark.parametrize("spec,code", [(["--spec", "die_hard"], 1), (["--spec", "two_phase", "--param", "rm=2"], 3)])
def test_standard_output_on_a_full_disk_keeps_the_json_and_the_verdicts_code(tmp_path, monkeypatch, spec, code):
    """`kraftcheck check > file` on a full disk: the summary's write fails (rich writes and flushes
    each print); the JSON report is still written and the exit code is the verdict's, not 3 with
    'the run stopped before its end' for a run that ended."""
    monkeypatch.setattr("kraftcheck.cli.terminal.Terminal.summary", lambda *args, **kwargs: _full())
    result, out = _check(tmp_path, *spec)
    assert result.exit_code == code, out
    assert "the run stopped before its end" not in out
    assert "kraftcheck: error: the summary was not written to standard output: the disk is full" in out
    assert _report(tmp_path)["result"] == ("violated" if code == 1 else "holds")

def test_a_run_cut_short_with_continue_says_so_with_its_depth(tmp_path):
    result, out = _check(tmp_path, *EAGER, "--continue", "--max-depth", "8")
    assert result.exit_code == 1, out
    assert "invariant violated; exploration cut short: stopped at --max-depth 8, at depth 8" in out
    report = _report(tmp_path)
    assert (report["result"], report["incomplete_reason"], report["depth"], report["exhaustive"]) == \
        ("violated", "stopped at --max-depth 8", 8, False)


def test_an_incomplete_run_says_its_depth(tmp_path):
    result, out = _check(tmp_path, "--spec", "two_phase", "--param", "rm=2", "--max-depth", "3")
    assert result.exit_code == 3, out
    assert "exploration incomplete: stopped at --max-depth 3, at depth 3" in out


def test_a_violated_liveness_property_is_the_runs_verdict(tmp_path):
    result, out = _check(tmp_path, "--spec", "mutex", "--param", "fair=false", "--liveness")
    assert result.exit_code == 1, out
    verdict = next(line for line in result.output.splitlines() if line.startswith("mutex (fair=False):"))
    assert verdict == "mutex (fair=False): liveness property violated", result.output
    assert "all invariants hold" not in out
    assert "violated liveness p1_trying_leads_to_p1_critical: lasso of 2 states (1 action), then stuttering forever in the last, written to" in out
    report = _report(tmp_path)
    assert report["result"] == "violated"
    (v,) = report["violations"]
    assert (v["invariant"], v["kind"], v["actions"], v["cycle_start"]) == \
        ("p1_trying_leads_to_p1_critical", "liveness", ["Try(p=p1)"], 1)
    assert v["trace_file"] == report["liveness"]["properties"][0]["trace_file"]


RAISING_PREDICATE = '''
import numpy as np
from kraftcheck.checker.spec import Liveness, Predicate
from kraftcheck.specs.die_hard import DieHard


def four(v):
    if (np.asarray(v["big"]) == 5).any():
        raise ValueError("no five")
    return v["big"] == 4


class Raising(DieHard):
    name = "raising"

    def liveness(self):
        return [Liveness("four", Predicate("big holds 4", four), fair=("FillBig",))]
'''


def test_an_analysis_that_fails_leaves_a_report_that_says_error_not_holds(tmp_path):
    """A liveness predicate that raises on a state past the initial ones (where it was tried before
    exploring): the spec's error, with its line, after the summary, which gives no verdict."""
    spec_file = tmp_path / "raising.py"
    spec_file.write_text(RAISING_PREDICATE)
    result, out = _check(tmp_path, "--spec", f"{spec_file}:Raising", "--liveness", "--engine", "reference")
    assert result.exit_code == 2, out
    assert "Traceback" not in out
    assert "then the run stopped with an error (below): no verdict" in out
    message = f"the predicate 'big holds 4' raised ValueError: no five at {spec_file}:9"
    assert out.index(message) > out.index("no verdict")
    report = _report(tmp_path)
    assert (report["result"], report["exhaustive"]) == ("error", False)
    assert report["error"].startswith(message)


def test_declared_liveness_properties_not_checked_are_named(tmp_path):
    result, out = _check(tmp_path, "--spec", "mutex")
    assert result.exit_code == 0, out
    assert ("not checked: liveness properties p1_trying_leads_to_p1_critical (declared by the spec; add --liveness "
            "to check them)") in out
    assert _report(tmp_path)["liveness_not_checked"] == ["p1_trying_leads_to_p1_critical"]
    result, out = _check(tmp_path, "--spec", "mutex", "--liveness")
    assert result.exit_code == 0 and "not checked" not in out
    assert _report(tmp_path)["liveness_not_checked"] == []


MISSPELT_FAIRNESS = '''
from kraftcheck.checker.spec import Liveness, Predicate
from kraftcheck.specs.die_hard import DieHard


class Bad(DieHard):
    name = "bad"

    def liveness(self):
        return [Liveness("four", Predicate("big holds 4", lambda v: v["big"] == 4), fair=("FillHuge",))]
'''


def test_a_misspelt_fairness_name_is_refused_before_exploring_without_liveness_too(tmp_path, monkeypatch):
    spec_file = tmp_path / "bad.py"
    spec_file.write_text(MISSPELT_FAIRNESS)
    monkeypatch.setattr(Engine, "explore", lambda *a, **k: pytest.fail("explored before refusing"))
    result, out = _check(tmp_path, "--spec", f"{spec_file}:Bad")
    assert result.exit_code == 2, out
    assert "liveness property four: fairness names 'FillHuge', which is neither an action" in out
    assert not (tmp_path / "r.json").exists()


def test_a_lasso_the_disk_refuses_is_named_and_the_liveness_verdict_kept(tmp_path, monkeypatch):
    monkeypatch.setattr("kraftcheck.traces.analysis_traces.atomic_write", _full)
    result, out = _check(tmp_path, "--spec", "mutex", "--param", "fair=false", "--liveness")
    assert result.exit_code == 1, out
    assert "liveness property violated" in out and "lasso of 2 states (1 action), then stuttering forever in the last, not written to" in out
    assert "kraftcheck: error: the lasso of liveness property p1_trying_leads_to_p1_critical was not written" in out
    report = _report(tmp_path)
    assert report["result"] == "violated" and report["violations"][0]["trace_file"] is None
    assert "trace_file" not in report["liveness"]["properties"][0]


def test_a_checkpoint_whose_final_record_the_disk_refuses_keeps_the_verdict(tmp_path, monkeypatch):
    from kraftcheck.checker.explore import checkpoint_writer
    write_manifest = checkpoint_writer.write_manifest

    def refuses_the_last(directory, identity, progress):
        if progress["finished"]:
            _full()
        write_manifest(directory, identity, progress)

    monkeypatch.setattr(checkpoint_writer, "write_manifest", refuses_the_last)
    run = tmp_path / "cp"
    result, out = _check(tmp_path, "--spec", "two_phase", "--param", "rm=2", "--checkpoint", str(run))
    assert result.exit_code == 3, out  # every state was checked, but an output asked for is missing
    assert "all invariants hold over the complete state space" in out
    assert (f"kraftcheck: error: the checkpoint's record that its run finished was not written to "
            f"{run / 'checkpoint.json'}: the disk is full") in out
    report = _report(tmp_path)
    assert (report["result"], report["exhaustive"]) == ("holds", True)
    assert report["unwritten_files"][0]["path"] == str(run / "checkpoint.json")
    monkeypatch.setattr(checkpoint_writer, "write_manifest", write_manifest)
    # the last record kept is of the last level before its expansion, which the resume does once more
    result, out = _check(tmp_path, "--spec", "two_phase", "--param", "rm=2", "--resume", str(run))
    assert result.exit_code == 0, out
    resumed = _report(tmp_path)
    assert resumed["resumed_from_level"] == report["depth"]
    assert [resumed[k] for k in ("distinct_states", "states_generated", "coverage")] == \
        [report[k] for k in ("distinct_states", "states_generated", "coverage")]


def test_a_trace_refused_for_another_reason_than_a_full_disk_is_named_with_its_reason(tmp_path, monkeypatch):
    """Any output the system refuses (a permission, an I/O error) is kept apart as a full disk's is:
    the verdict, the other outputs and the verdict's exit code still follow."""
    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr("kraftcheck.pipeline.atomic_write", refused)
    result, out = _check(tmp_path, "--spec", "die_hard")
    assert result.exit_code == 1, out
    assert "not written to" in out and "(Permission denied)" in out
    assert "kraftcheck: error: the trace of invariant big_jug_never_holds_4 was not written to" in out
    assert _report(tmp_path)["unwritten_files"][0]["reason"] == "Permission denied"


def test_a_reader_gone_from_the_pipe_keeps_the_json_and_the_verdicts_code(tmp_path):
    """`kraftcheck check ... | true`: the summary meets a closed pipe. rich would exit 1 (which says
    violated) and skip the JSON report; the report is written, and a run that holds but could not
    say so is 3, as for any output not written."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte
    try:
        done = subprocess.run([sys.executable, "-m", "kraftcheck", "check", "--no-color", "--spec", "two_phase",
                               "--param", "rm=2", "--json", str(tmp_path / "r.json")],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert "the summary was not written to standard output: its reader went away (broken pipe)" in done.stderr
    assert _report(tmp_path)["result"] == "holds"


def test_an_internal_error_is_no_verdict_exit_2_not_1(monkeypatch, capsys):
    """A bug of kraftcheck's (an exception nothing expected) must not exit 1, which says violated."""
    from kraftcheck.cli import main as entry

    def bug() -> int:
        raise RuntimeError("a bug")
    monkeypatch.setattr(entry, "_run", bug)
    with pytest.raises(SystemExit) as stop:
        entry.main()
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "RuntimeError: a bug" in err and "kraftcheck: internal error" in err


def test_more_fairness_requirements_than_liveness_supports_refuse_only_with_liveness():
    from kraftcheck.checker.analyses.liveness_properties import unchecked_liveness
    from kraftcheck.checker.errors import SpecError
    from kraftcheck.checker.model import Model
    from kraftcheck.pipeline import make_spec
    # 4 brokers with --election any: partition_regains_leader has 68 fairness requirements (one per election)
    model = Model(make_spec("kafka", {"brokers": 4, "min_isr": 3, "election": "any"}))
    assert unchecked_liveness(model, checking=False) == ["partition_regains_leader", "acked_write_becomes_readable"]
    with pytest.raises(SpecError, match="partition_regains_leader: 68 fairness requirements; at most 64 are supported"):
        unchecked_liveness(model, checking=True)
