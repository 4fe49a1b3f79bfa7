"""A hostile user's inputs: tampered trace files, signals other than Ctrl-C and SIGTERM, manifests
that could let the CI gate pass when it should not. Each case failed before its fix."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kraftcheck import traces
from kraftcheck.checker.errors import SpecRaised
from traces_support import RUN_OPTIONS, eager_commit_violation


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    model, violation = eager_commit_violation()
    return traces.write_counterexample(model, violation, RUN_OPTIONS, tmp_path_factory.mktemp("t"))


def _cli(*args):
    from kraftcheck.cli.main import cli
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _tampered(trace_file, tmp_path, edit, name="tampered.json"):
    data = json.loads(trace_file.read_text())
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _node(data, step):
    return next(n for n in data["nodes"] if n["id"] == step)


# ----------------------------------------------------------------------------------------------
# trace report: a bug report only of a trace that replays


def test_report_refuses_a_trace_with_an_edited_state(trace_file, tmp_path):
    path = _tampered(trace_file, tmp_path, lambda d: _node(d, 3)["state"].update(msg_abort=True))
    result = _cli("trace", "report", path)
    assert result.exit_code == 2, result.output
    assert "not a valid trace, no report written" in result.output and "step 3, msg_abort" in result.output
    assert "## Steps" not in result.output


def test_report_refuses_a_trace_of_other_parameters_and_writes_no_file(trace_file, tmp_path):
    out = tmp_path / "report.md"
    path = _tampered(trace_file, tmp_path, lambda d: d["graph"]["params"].update(rm=4))
    result = _cli("trace", "report", path, "-o", out)
    assert result.exit_code == 2 and "rm_state[rm4]" in result.output
    assert not out.exists()


def test_report_of_the_untouched_trace_is_written(trace_file):
    result = _cli("trace", "report", trace_file)
    assert result.exit_code == 0 and "## Steps" in result.output


def test_report_never_imports_the_code_a_trace_names(trace_file, tmp_path):
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    path = _tampered(trace_file, tmp_path, lambda d: d["graph"].update(spec=f"{evil}:Evil"))
    result = _cli("trace", "report", path)
    assert result.exit_code == 2 and "--spec file.py:Class" in result.output
    assert not marker.exists()


def test_report_takes_the_spec_with_spec_and_checks_its_name(trace_file, tmp_path):
    assert _cli("trace", "report", trace_file, "--spec", "two_phase_eager_commit").exit_code == 0
    result = _cli("trace", "report", trace_file, "--spec", "two_phase")
    assert result.exit_code == 2 and "the spec given is 'two_phase'" in result.output


# ----------------------------------------------------------------------------------------------
# trace replay: the violation's kind is the spec's


@pytest.mark.parametrize("kind, said", [("property", "is an invariant of spec two_phase_eager_commit"),
                                        ("deadlock", "a deadlock is recorded as check 'deadlock'")])
def test_replay_refuses_a_violation_of_another_kind(trace_file, tmp_path, kind, said):
    path = _tampered(trace_file, tmp_path, lambda d: d["graph"]["violation"].update(kind=kind))
    report = traces.replay(traces.load(path))
    assert not report.ok and said in str(report.error) and report.error.field == "graph.violation.kind"
    assert _cli("trace", "replay", path, "--quiet").exit_code == 1


# ----------------------------------------------------------------------------------------------
# SIGHUP (a terminal or ssh session that closed) stops a run as SIGTERM does

HANG_UP_AT_LEVEL = """
import sys, threading
from kraftcheck import pipeline
from kraftcheck.checker.explore import engine
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.stop import install_stop_handlers
from kraftcheck.cli.outcome import Outcome
from kraftcheck.cli.terminal import Terminal
from kraftcheck.request import CheckRequest

engine.spill_threshold = lambda options, spill_levels_at=None: 0  # levels spill from the first

class HoldAtLevel(RunObserver):
    def level_finished(self, depth, distinct, generated):
        if depth == 5:
            print("held", flush=True)
            threading.Event().wait()  # until the signal's KeyboardInterrupt

install_stop_handlers()
terminal = Terminal(quiet=True)
request = CheckRequest(spec="two_phase", params={"rm": 5}, compile="now")
sys.exit(Outcome(terminal, pipeline.run(request, terminal, HoldAtLevel())).report(sys.argv[1]))
"""


def test_sighup_stops_a_run_with_its_report_and_removes_its_spilled_levels(tmp_path):
    """SIGHUP's default action ended the process (the shell's 129) with no summary and no JSON
    report, and left the levels' temporary directory behind."""
    import os
    import signal
    import subprocess
    import sys

    spill = tmp_path / "tmp"
    spill.mkdir()
    report = tmp_path / "r.json"
    run = subprocess.Popen([sys.executable, "-c", HANG_UP_AT_LEVEL, str(report)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(spill)},
                           preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    assert run.stdout.readline() == "held\n", run.stderr.read()
    assert list(spill.iterdir()), "the run did not spill its levels"
    os.kill(run.pid, signal.SIGHUP)
    _, err = run.communicate(timeout=300)
    assert run.returncode == 130, err
    assert not list(spill.iterdir())
    said = json.loads(report.read_text())
    assert said["result"] == "incomplete" and said["incomplete_reason"] == "interrupted"


def test_sighup_left_ignored_stays_ignored():
    """Under nohup a run goes on when its terminal closes."""
    import subprocess
    import sys

    code = ("import signal; signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
            "from kraftcheck.checker.stop import install_stop_handlers, deferred\n"
            "install_stop_handlers()\n"
            "with deferred():\n"
            "    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN\n"
            "print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout == "True\n", done.stderr


# ----------------------------------------------------------------------------------------------
# kraftcheck ci: two manifests in one directory


def test_ci_refuses_to_choose_between_two_manifests(tmp_path, monkeypatch):
    """kraftcheck.toml was run and pyproject.toml's [tool.kraftcheck] ignored: the gate passed (exit
    0) on one file's checks while the other's failing check never ran."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    (tmp_path / "kraftcheck.toml").write_text('[checks.ok]\nspec = "die_hard"\nviolates = ["big_jug_never_holds_4"]\n')
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.kraftcheck.checks.broken]\n'
                                             'spec = "die_hard"\nexpect = "holds"\n')
    result = _cli("ci", "--no-color")
    assert result.exit_code == 2 and "name the one to run" in result.output
    assert not (tmp_path / "kraftcheck-ci").exists()
    assert _cli("ci", "--no-color", "pyproject.toml").exit_code == 1
    # a pyproject.toml without the table is any project's
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert _cli("ci", "--no-color").exit_code == 0


# ----------------------------------------------------------------------------------------------
# kraftcheck sweep: a matrix file whose tables are not tables


@pytest.mark.parametrize("text, said", [('vary = [1, 2]\n', "vary must be a table"),
                                        ('params = 3\n', "params must be a table"),
                                        ('spec = 3\n', "spec must be a name"),
                                        ('configurations = 3\n', "configurations must be [[configurations]]")])
def test_a_matrix_whose_tables_are_not_tables_is_one_line(tmp_path, text, said):
    """Each was a TypeError said as kraftcheck's internal error, with its traceback."""
    matrix = tmp_path / "m.toml"
    matrix.write_text(text)
    result = _cli("sweep", matrix, "--out", tmp_path / "o")
    assert result.exit_code == 2 and said in result.output and "internal error" not in result.output
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------------------------
# kraftcheck ci and sweep: a run directory the disk refuses


def _full_disk(*args, **kwargs):
    import errno
    raise OSError(errno.ENOSPC, "No space left on device")


def test_ci_says_a_check_whose_run_directory_the_disk_refused_was_not_run(tmp_path, monkeypatch):
    """It was kraftcheck's internal error with a traceback, the checks already judged lost."""
    import kraftcheck.ci.runner as runner

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    (tmp_path / "kraftcheck.toml").write_text('[checks.jugs]\nspec = "die_hard"\n'
                                              'violates = ["big_jug_never_holds_4"]\n')
    monkeypatch.setattr(runner, "prepare_dir", _full_disk)
    result = _cli("ci", "--no-color", "--junit", tmp_path / "j.xml")
    assert result.exit_code == 3, result.output
    said = " ".join(result.output.split())
    assert "jugs: not started" in said and "the disk is full" in said and "internal error" not in said
    assert 'name="exploration"' in (tmp_path / "j.xml").read_text()


def test_sweep_says_a_configuration_whose_run_directory_the_disk_refused_was_not_run(tmp_path, monkeypatch):
    import kraftcheck.ci.runner as runner

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runner, "prepare_dir", _full_disk)
    result = _cli("sweep", "--spec", "die_hard", "--vary", "small=3,2")
    assert result.exit_code == 3, result.output  # incomplete, as check and ci say a full disk
    assert result.output.count("not started: its run directory") == 2 and "internal error" not in result.output


# ----------------------------------------------------------------------------------------------
# two outputs naming one file, an output naming the file read


def test_json_and_dump_graph_naming_one_file_are_refused(tmp_path):
    """The JSON report replaced the state graph written just before (exit 0, nothing said)."""
    out = tmp_path / "same.graphml"
    result = _cli("check", "--spec", "two_phase", "--param", "rm=2", "--json", out, "--dump-graph", out,
                  "--trace-dir", tmp_path / "t")
    assert result.exit_code == 2 and "both name" in result.output and "checking" not in result.output
    assert not out.exists()


@pytest.mark.parametrize("command", [("export", "--format", "dot"), ("report",)])
def test_a_trace_command_never_writes_over_the_trace_it_reads(trace_file, tmp_path, command):
    """`trace export T --format dot -o T` and `trace report T -o T` replaced the counterexample."""
    import shutil
    trace = tmp_path / "t.json"
    shutil.copy(trace_file, trace)
    link = tmp_path / "link.json"
    link.symlink_to(trace)
    before = trace.read_text()
    for output in (trace, link):
        result = _cli("trace", command[0], trace, *command[1:], "-o", output)
        assert result.exit_code == 2 and "would replace it" in result.output
    assert trace.read_text() == before


def test_ci_outputs_never_replace_the_manifest_or_each_other(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    manifest = tmp_path / "kraftcheck.toml"
    manifest.write_text('[checks.jugs]\nspec = "die_hard"\nviolates = ["big_jug_never_holds_4"]\n')
    before = manifest.read_text()
    result = _cli("ci", "--no-color", "--junit", "kraftcheck.toml")
    assert result.exit_code == 2 and "is the manifest this command reads" in result.output
    assert manifest.read_text() == before
    result = _cli("ci", "--no-color", "--junit", "j.xml", "--progress-json", "./j.xml")
    assert result.exit_code == 2 and "both name" in result.output
    assert not (tmp_path / "kraftcheck-ci").exists()


# ----------------------------------------------------------------------------------------------
# environment variables at their edges


def test_a_huge_compile_process_count_starts_no_more_processes_than_cores_or_four(monkeypatch):
    """KRAFTCHECK_COMPILE_PROCESSES=99999 started 99,998 helper interpreters on a cold compile."""
    from kraftcheck.checker.compile import MAX_COMPILE_PROCESSES, compile_processes
    from kraftcheck.checker.kernels.threads import usable_cpus
    monkeypatch.setenv("KRAFTCHECK_COMPILE_PROCESSES", "99999")
    assert compile_processes() == max(usable_cpus(), MAX_COMPILE_PROCESSES)
    monkeypatch.setenv("KRAFTCHECK_COMPILE_PROCESSES", "2")
    assert compile_processes() == 2


@pytest.mark.parametrize("value", ["nan", "-1", "0", "soon"])
def test_a_compile_time_limit_that_is_no_time_is_refused(monkeypatch, value):
    """nan, 0 and negative limits were taken: a background compile stopped before it started."""
    from kraftcheck.checker.compile import compile_time_limit
    from kraftcheck.checker.errors import SpecError
    monkeypatch.setenv("KRAFTCHECK_COMPILE_TIME_LIMIT", value)
    with pytest.raises(SpecError, match="KRAFTCHECK_COMPILE_TIME_LIMIT must be a number of seconds greater than 0"):
        compile_time_limit()


def test_an_interpret_budget_of_nan_is_refused(monkeypatch):
    """nan was taken, a budget no elapsed time reaches: the run never waited for its compile."""
    from kraftcheck.checker.errors import UsageError
    from kraftcheck.checker.explore.tiers import interpret_budget
    monkeypatch.setenv("KRAFTCHECK_INTERPRET_S", "nan")
    with pytest.raises(UsageError, match="KRAFTCHECK_INTERPRET_S must be a number of seconds of at least 0"):
        interpret_budget()


# ----------------------------------------------------------------------------------------------
# trace replay: a trace the run's constraints exclude


def _counterexamples(ref, params, tmp_path):
    from kraftcheck.checker.explore.reference import ReferenceExplorer
    from kraftcheck.checker.explore.result import Options
    from kraftcheck.checker.model import Model
    from kraftcheck.specs import spec_class
    from traces_support import RUN_OPTIONS

    cls = spec_class(ref)
    model = Model(cls(cls.Params(**params)))
    result = ReferenceExplorer().explore(model, Options(keep_going=True))
    options = dict(RUN_OPTIONS, constraints=[c.name for c in model.constraints + model.action_constraints])
    return cls, [traces.write_counterexample(model, v, options, tmp_path) for v in result.violations]


def _refingerprinted(data, cls):
    """The file as an editor who knows the fingerprints would leave it."""
    from kraftcheck.checker.model import Model
    from kraftcheck.traces.states import fingerprint, flat_from_readable
    layout = Model(cls(cls.Params(**data["graph"]["params"]))).layout
    for node in data["nodes"]:
        node["fingerprint"] = fingerprint(flat_from_readable(layout, node["state"]))
    data["graph"]["fingerprints"] = [n["fingerprint"] for n in sorted(data["nodes"], key=lambda n: n["id"])]


def test_replay_refuses_a_trace_through_a_state_outside_the_runs_constraint(tmp_path):
    """Counters at limit 2, cap 3 holds (a state of sum 3 is generated, not expanded), but its
    limit-3 counterexample, the limit edited to 2, replayed as valid, reaching sum 4 through sum 3."""
    cls, (path,) = _counterexamples("constraint_specs:Counters", {"limit": 3, "cap": 3}, tmp_path)
    assert traces.replay(traces.load(path), spec=cls).ok

    def edit(data):
        data["graph"]["params"]["limit"] = data["graph"]["settings"]["limit"] = 2
        _refingerprinted(data, cls)
    report = traces.replay(traces.load(_tampered(path, tmp_path, edit)), spec=cls)
    assert not report.ok and report.error.field == "constraint" and report.error.step == 1
    assert "outside constraint sum_at_most_limit" in str(report.error)


def test_replay_refuses_a_step_the_runs_action_constraint_forbids(tmp_path):
    """blocked: no counter rises to top beside a 0. A behaviour through such a step, (1,0) ->
    (2,0) -> (2,1) breaking cap 2, written unblocked and then marked blocked, replayed as valid."""
    from kraftcheck.checker.model import Model
    from kraftcheck.specs import spec_class
    from kraftcheck.traces.graph import build_trace
    from kraftcheck.traces.states import flat_from_readable
    from traces_support import RUN_OPTIONS

    cls = spec_class("constraint_specs:Counters")
    model = Model(cls(cls.Params(top=2, limit=4, cap=2)))
    flats = [flat_from_readable(model.layout, {"c": {"k1": a, "k2": b}}) for a, b in ((1, 0), (2, 0), (2, 1))]
    steps = [(None, flats[0]), (model.label_for("Inc", (0,)), flats[1]), (model.label_for("Inc", (1,)), flats[2])]
    options = dict(RUN_OPTIONS, constraints=["sum_at_most_limit", "no_top_beside_zero"])
    graph = build_trace(model, steps, violation={"check": "sum_at_most_cap", "kind": "invariant", "doc": "",
                                                 "step": 2}, run_options=options)
    path = tmp_path / "t.json"
    traces.save(graph, path)
    assert traces.replay(traces.load(path), spec=cls).ok

    def edit(data):
        data["graph"]["params"]["blocked"] = True
        data["graph"]["settings"]["blocked"] = 1
        _refingerprinted(data, cls)
    report = traces.replay(traces.load(_tampered(path, tmp_path, edit)), spec=cls)
    assert not report.ok and report.error.step == 1
    assert "action constraint no_top_beside_zero" in str(report.error)


@pytest.mark.parametrize("ref, params", [("constraint_specs:Counters", example)
                                         for example in ({}, {"limit": 3, "cap": 3}, {"n": 3, "limit": 1, "cap": 1},
                                                         {"blocked": True},
                                                         {"n": 3, "top": 1, "limit": 2, "blocked": True})]
                         + [("constraint_specs:Rising", {"forbidden": f}) for f in (0, 2, 3)])
def test_every_counterexample_under_constraints_still_replays(tmp_path, ref, params):
    """The check of what a run keeps accepts what the reference explorer finds: a deadlock inside
    the constraint, initial states outside, the first state outside."""
    cls, found = _counterexamples(ref, params, tmp_path)
    for path in found:
        report = traces.replay(traces.load(path), spec=cls)
        assert report.ok, (path.name, report.error)


def test_a_huge_max_memory_is_no_limit_not_an_internal_error(tmp_path):
    """--max-memory 1e300 (GiB) is infinite in bytes: int() of it raised OverflowError."""
    result = _cli("check", "--spec", "two_phase", "--param", "rm=2", "--max-memory", "1e300", "--trace-dir",
                  tmp_path / "t", "--json", tmp_path / "r.json")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r.json").read_text())["options"]["max_memory_bytes"] == 2**62


# ----------------------------------------------------------------------------------------------
# scenarios: an expectation of nothing


def test_a_scenario_without_an_expectation_must_run_every_step(tmp_path):
    """It was 'blocked at step 2 ... as expected', exit 0: a story that breaks passed replay."""
    story = tmp_path / "s.yaml"
    story.write_text("spec: two_phase\nparams: {rm: 2}\nsteps:\n  - RMPrepare(rm=rm1)\n  - TMCommit\n")
    result = _cli("trace", "replay", story, "--quiet", "--no-color")
    assert result.exit_code == 1 and "NOT as expected" in result.output and "blocked_at: 2" in result.output
    story.write_text("spec: two_phase\nparams: {rm: 2}\nsteps:\n  - RMPrepare(rm=rm1)\n  - TMRcvPrepared(rm=rm1)\n")
    assert _cli("trace", "replay", story, "--quiet").exit_code == 0


@pytest.mark.parametrize("expect, said", [("{violates: []}", "must be a non-empty list"),
                                          ("{holds: false}", "must be true")])
def test_a_scenario_expecting_nothing_is_refused(tmp_path, expect, said):
    story = tmp_path / "s.yaml"
    story.write_text(f"spec: two_phase\nvariants:\n  a: {{expect: {expect}}}\nsteps:\n  - TMCommit\n")
    result = _cli("trace", "replay", story, "--quiet")
    assert result.exit_code == 2 and said in result.output


# ----------------------------------------------------------------------------------------------
# a spec's function that raises while a trace is replayed


RAISING_SPEC = '''
from dataclasses import dataclass
from numba import njit
from kraftcheck.checker.spec import Action, Int, Invariant, Spec


@njit(cache=True)
def inc(s, t):
    if s.x < 5:
        t.x = s.x + 1
        return True
    return False


@njit(cache=True)
def small(s):
    if s.x == 4:
        raise ValueError("boom")
    return s.x != 3


class Raising(Spec):
    name = "raising_on_four"
    check_deadlock = False

    @dataclass(frozen=True)
    class Params:
        pass

    def fields(self):
        return [Int("x", 5)]

    def initial_states(self):
        return [{"x": 0}]

    def actions(self):
        return [Action("Inc", inc)]

    def invariants(self):
        return [Invariant("small", small, "x is not 3")]
'''


def test_a_spec_function_raising_in_replay_is_the_specs_error_not_kraftchecks(tmp_path):
    """A trace edited one step past its violation, to x=4 where the invariant raises: replay and
    report said 'internal error: a bug of kraftcheck's' with the spec's traceback."""
    from kraftcheck.checker.model import Model
    from kraftcheck.specs import spec_class
    from kraftcheck.traces.graph import build_trace

    source = tmp_path / "raising_spec.py"
    source.write_text(RAISING_SPEC)
    ref = f"{source}:Raising"
    model = Model(spec_class(ref)())
    flats = [(x,) for x in range(4)]
    label = model.label_for("Inc", ())
    graph = build_trace(model, [(None, flats[0])] + [(label, f) for f in flats[1:]],
                        violation={"check": "small", "kind": "invariant", "doc": "", "step": 3})
    path = tmp_path / "t.json"
    traces.save(graph, path)
    assert traces.replay(traces.load(path), spec=ref).ok

    def past_the_violation(data):
        last = dict(_node(data, 3), id=4, state={"x": 4}, violated=["small"])
        data["nodes"].append(last)
        data["edges"].append(dict(data["edges"][-1], source=3, target=4))
        data["graph"]["violation"]["step"] = 4
        _refingerprinted(data, spec_class(ref))
    edited = _tampered(path, tmp_path, past_the_violation, "edited.json")
    for command in ("replay", "report"):
        result = _cli("trace", command, edited, "--spec", ref)
        assert result.exit_code == 2, result.output
        assert "invariant small raised ValueError: boom" in result.output and "internal error" not in result.output
    # stepped through the compiled functions, the spec's line is still found (as Python runs it again)
    with pytest.raises(SpecRaised, match=r"^invariant small raised ValueError: boom at \S*raising_spec\.py:\d+;"):
        traces.replay(traces.load(edited), spec=ref, compiled=True)


def test_a_github_job_summary_the_system_refuses_is_one_line_not_an_internal_error(tmp_path, monkeypatch):
    """An unwritable GITHUB_STEP_SUMMARY was a traceback and 'internal error' (exit 2) after every
    check had run and passed; now the verdicts stand and the file is named (exit 3, as for --junit)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kraftcheck.toml").write_text('[checks.jugs]\nspec = "die_hard"\n'
                                              'violates = ["big_jug_never_holds_4"]\n')
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "no" / "such" / "dir" / "summary.md"))
    result = _cli("ci", "--no-color")
    assert result.exit_code == 3, result.output
    said = " ".join(result.output.split())
    assert "1 of 1 checks pass; exit 3" in said
    assert "the GitHub job summary (GITHUB_STEP_SUMMARY) was not written" in said


def test_report_of_a_view_in_the_specs_terms_says_what_to_give_instead(trace_file, tmp_path):
    path = _tampered(trace_file, tmp_path, lambda d: d["graph"].update(terms="kafka"))
    result = _cli("trace", "report", path)
    assert result.exit_code == 2 and "shown in kafka's terms" in result.output


def test_reports_reproduce_command_explores_what_the_run_did(tmp_path):
    """The command named the spec by a name only a registered spec has, and left out the run's
    --constraint and --no-deadlock: run as written it explored another state space."""
    import shutil
    from pathlib import Path
    shutil.copy(Path(__file__).parent / "constraint_specs.py", tmp_path / "counters_spec.py")
    ref = f"{tmp_path / 'counters_spec.py'}:Counters"
    found = _cli("check", "--spec", ref, "--param", "n=3", "--param", "top=1", "--param", "limit=3", "--param",
                 "cap=2", "--param", "blocked=true", "--constraint", "sum_at_most_limit", "--no-deadlock",
                 "--engine", "reference", "--trace-dir", tmp_path / "t")
    assert found.exit_code == 1, found.output
    (trace,) = (tmp_path / "t").iterdir()
    result = _cli("trace", "report", trace, "--spec", ref)
    assert result.exit_code == 0, result.output
    command = next(line for line in result.output.splitlines() if line.startswith("kraftcheck check"))
    assert f"--spec {ref} " in command
    assert "--constraint sum_at_most_limit --no-deadlock --invariant sum_at_most_cap" in command
    assert "no_top_beside_zero" not in command


def _reproduced(trace, tmp_path, *spec_ref):
    """What the report's command finds: the kind and check of its first violation (run with the
    reference explorer, whose search is the engine's, so that no kernel compiles)."""
    import shlex
    result = _cli("trace", "report", trace, *spec_ref)
    assert result.exit_code == 0, result.output
    command = next(line for line in result.output.splitlines() if line.startswith("kraftcheck check"))
    json_path = tmp_path / f"{trace.stem}.report.json"
    run = _cli(*shlex.split(command)[1:], "--engine", "reference", "--quiet", "--json", json_path,
               "--trace-dir", tmp_path / "again")
    assert run.exit_code == 1, (command, run.output)
    return command, [v["invariant"] for v in json.loads(json_path.read_text())["violations"]]


def test_reports_command_of_a_continued_run_stops_at_the_trace_check(tmp_path):
    """A run with --deadlock --continue found a deadlock (5 states) and tc_consistent (6 states);
    the report of tc_consistent's trace said '--deadlock --invariant tc_consistent', which stops
    at the deadlock and never reaches tc_consistent. Checking deadlocks changes nothing of the
    search an invariant's trace comes from, so the command leaves it out. A deadlock's trace of a
    run that went on past a shallower invariant violation (sum_at_most_cap, 3 states; the
    deadlock 4) said a command that stops at that invariant: it now goes on (--continue), as the
    run did."""
    import shutil
    from pathlib import Path
    found = _cli("check", "--spec", "two_phase_eager_commit", "--deadlock", "--continue", "--engine", "reference",
                 "--trace-dir", tmp_path / "t", "--quiet")
    assert found.exit_code == 1, found.output
    (invariant_trace,) = (tmp_path / "t").glob("*.tc_consistent.*.json")
    command, violated = _reproduced(invariant_trace, tmp_path)
    assert violated == ["tc_consistent"], command

    shutil.copy(Path(__file__).parent / "constraint_specs.py", tmp_path / "counters_spec.py")
    ref = f"{tmp_path / 'counters_spec.py'}:Counters"
    found = _cli("check", "--spec", ref, "--param", "cap=2", "--continue", "--engine", "reference",
                 "--trace-dir", tmp_path / "c", "--quiet", "--json", tmp_path / "c.json")
    assert found.exit_code == 1, found.output
    depths = {v["invariant"]: v["depth"] for v in json.loads((tmp_path / "c.json").read_text())["violations"]}
    assert depths["sum_at_most_cap"] < depths["deadlock"], depths
    (deadlock_trace,) = (tmp_path / "c").glob("*.deadlock.*.json")
    command, violated = _reproduced(deadlock_trace, tmp_path, "--spec", ref)
    assert "deadlock" in violated, command


# ----------------------------------------------------------------------------------------------
# input files nested deeper than their parser goes, or not text


def _deep(kind: str) -> str:
    depth = 100_000 if kind == "json" else 20_000
    return {"json": "[" * depth + "]" * depth, "yaml": "steps: " + "[" * depth + "]" * depth + "\n",
            "toml": "x = " + "[" * depth + "]" * depth + "\n"}[kind]


@pytest.mark.parametrize("name, text, command", [
    ("t.json", _deep("json"), ("trace", "replay")),
    ("s.yaml", _deep("yaml"), ("trace", "replay")),
    ("s.yaml", b"\xa3\xff\x00binary", ("trace", "replay")),
    ("kraftcheck.toml", _deep("toml"), ("ci",)),
    ("m.toml", _deep("toml"), ("sweep",)),
    ("m.toml", b"\xac\xff\x00binary", ("sweep",)),
])
def test_an_input_nested_too_deep_or_not_text_is_one_line(tmp_path, monkeypatch, name, text, command):
    """Each was a RecursionError or UnicodeDecodeError said as kraftcheck's internal error."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    result = _cli(*command, path)
    assert result.exit_code == 2 and "error" in result.output and "internal error" not in result.output


def test_a_baseline_nested_too_deep_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kraftcheck.toml").write_text('[checks.jugs]\nspec = "die_hard"\n'
                                              'violates = ["big_jug_never_holds_4"]\n')
    (tmp_path / "kraftcheck-baseline.json").write_text(_deep("json"))
    result = _cli("ci", "--no-color")
    assert result.exit_code == 2 and "is not a kraftcheck baseline" in result.output
