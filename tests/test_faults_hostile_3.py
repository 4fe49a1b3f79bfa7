"""Edges where kraftcheck could mislead its user: whose error an exception is, what a report's
command reproduces, what a command may overwrite or delete, what a trace display vouches for.
Each case failed before its fix."""

from __future__ import annotations

import errno
import importlib
import json
import os
import sys

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


def _entry(monkeypatch, capsys, *args):
    """(exit code, standard error) of the command line's own entry point, its handlers included."""
    from kraftcheck.cli import main as entry
    monkeypatch.setattr(sys, "argv", ["kraftcheck", *map(str, args)])
    with pytest.raises(SystemExit) as stop:
        entry.main()
    return stop.value.code, capsys.readouterr().err


# ----------------------------------------------------------------------------------------------
# whose error: the spec's only when one of its functions raised


def _a_bug(*args, **kwargs):  # stands for a bug in kraftcheck's own replay code
    return {}["missing"]


def test_a_bug_of_replay_is_kraftchecks_internal_error_not_the_specs(trace_file, monkeypatch, capsys):
    """Any exception after the spec was rebuilt was said as the spec's error ('a function of spec
    two_phase_eager_commit raised KeyError ... fix that line'), sending the user to kraftcheck's code."""
    replay_module = importlib.import_module("kraftcheck.traces.replay")  # the package exports a function so named
    monkeypatch.setattr(replay_module, "fingerprint", _a_bug)
    with pytest.raises(KeyError):
        traces.replay(traces.load(trace_file))
    code, err = _entry(monkeypatch, capsys, "trace", "replay", trace_file)
    assert code == 2 and "kraftcheck: internal error" in err and "bug of kraftcheck's" in err, err
    assert "fix that line" not in err and "please report it" in err


def test_a_bug_of_a_scenario_run_is_kraftchecks_internal_error_not_the_specs(monkeypatch):
    from kraftcheck.traces import scenario as scenario_module
    story = scenario_module.parse_scenario({"spec": "two_phase", "steps": ["TMCommit"]})
    monkeypatch.setattr(scenario_module, "build_trace", _a_bug)
    with pytest.raises(KeyError):
        scenario_module.run_scenario(story)


def test_a_spec_hook_raising_in_a_scenario_is_the_specs_error(monkeypatch):
    """The narrower rule still names the spec's own code: lanes(), which traces call."""
    from kraftcheck.specs import spec_class
    from kraftcheck.traces.scenario import parse_scenario, run_scenario

    def lanes(self):
        raise ValueError("no lanes today")
    monkeypatch.setattr(spec_class("two_phase"), "lanes", lanes)
    with pytest.raises(SpecRaised, match=r"^lanes\(\) of spec two_phase raised ValueError: no lanes today at \S+"):
        run_scenario(parse_scenario({"spec": "two_phase", "steps": ["TMCommit"]}))


# ----------------------------------------------------------------------------------------------
# a report's Reproduce command of a run that applied no constraint


def test_reproduce_command_of_a_run_without_constraints_applies_none(tmp_path):
    """kraftcheck.check(..., constraints=[]) violates; its report's command, with no way to say
    'none', applied every constraint the spec declares and held (exit 0)."""
    import shutil
    from pathlib import Path

    import kraftcheck
    from kraftcheck.request import CheckRequest
    shutil.copy(Path(__file__).parent / "constraint_specs.py", tmp_path / "counters_spec.py")
    ref = f"{tmp_path / 'counters_spec.py'}:Counters"
    params = {"n": 2, "top": 2, "limit": 1, "cap": 2}
    found = kraftcheck.check(ref, constraints=[], engine="reference", trace_dir=str(tmp_path / "t"), **params)
    assert found.status == "violated"
    (trace,) = (tmp_path / "t").iterdir()
    result = _cli("trace", "report", trace, "--spec", ref)
    assert result.exit_code == 0, result.output
    command = next(line for line in result.output.splitlines() if line.startswith("kraftcheck check"))
    assert "--no-constraints" in command and "--constraint " not in command
    again = _cli(*command.split()[1:], "--engine", "reference", "--trace-dir", tmp_path / "again", "--quiet")
    assert again.exit_code == 1, again.output
    # ci and sweep run a request as such a command too
    assert "--no-constraints" in CheckRequest(ref, params, constraints=()).command_arguments()
    refused = _cli("check", "--spec", ref, "--no-constraints", "--constraint", "sum_at_most_limit")
    assert refused.exit_code == 2 and "cannot go with --constraint sum_at_most_limit" in refused.output


# ----------------------------------------------------------------------------------------------
# an output over the spec's own file, the spec named as module:Class


@pytest.mark.parametrize("option", ["--json", "--dump-graph"])
def test_an_output_over_a_module_specs_file_is_refused(tmp_path, monkeypatch, option):
    """Refused for --spec file.py:Class only: with --spec my_jugs:MyJugs the report was written over
    my_jugs.py (exit 1)."""
    module = f"my_jugs_{option[2:].replace('-', '_')}"  # a module name of its own: imported once a process
    source = tmp_path / f"{module}.py"
    text = "from kraftcheck.specs.die_hard import DieHard\n\n\nclass MyJugs(DieHard):\n    name = 'my_jugs'\n"
    source.write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    output = source
    if option == "--dump-graph":  # a GraphML file by its name; a symlink counts as the file it names
        output = tmp_path / "g.graphml"
        output.symlink_to(source)
    result = _cli("check", "--spec", f"{module}:MyJugs", option, output, "--quiet", "--trace-dir", tmp_path / "t")
    assert result.exit_code == 2 and f"{option} {output} is the spec file this command reads" in result.output
    assert source.read_text() == text


def test_the_source_file_of_each_kind_of_spec_reference():
    from kraftcheck import specs
    from kraftcheck.specs.die_hard import DieHard
    assert specs.source_file("die_hard") == specs.source_file("kraftcheck.specs.die_hard:DieHard") == \
        specs.source_file(DieHard) == sys.modules[DieHard.__module__].__file__
    assert specs.source_file("mine.py:Mine") == "mine.py"
    assert specs.source_file("no_such_module_here:Spec") is None and specs.source_file("no_such_spec") is None


# ----------------------------------------------------------------------------------------------
# cache clear removes only what kraftcheck wrote


@pytest.mark.parametrize("name", ["kernels", "kernels-debug", "numba-debug"])
def test_cache_clear_refuses_a_folder_kraftcheck_did_not_write(tmp_path, monkeypatch, name):
    """KRAFTCHECK_CACHE_DIR=$HOME: 'cache clear' removed $HOME/kernels (and kernels-debug,
    numba-debug) whatever they held."""
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KRAFTCHECK_DEBUG_KERNELS", raising=False)
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "kc_x_model_0123456789abcdef0123.py").write_text("")  # a cache of kraftcheck's...
    (tmp_path / "kernels" / ".kraftcheck-numba.lock").write_text("")
    (tmp_path / name).mkdir(exist_ok=True)
    (tmp_path / name / "thesis.tex").write_text("years of work")  # ...or a folder of the user's, so named
    result = _cli("cache", "clear")
    assert result.exit_code == 2 and f"{tmp_path / name} holds 'thesis.tex', which kraftcheck does not write" \
        in result.output, result.output
    assert (tmp_path / name / "thesis.tex").read_text() == "years of work" and (tmp_path / "kernels").is_dir()
    (tmp_path / name / "thesis.tex").unlink()
    assert _cli("cache", "clear").exit_code == 0 and not (tmp_path / "kernels").exists()


# ----------------------------------------------------------------------------------------------
# show, render and export say when the trace they display is not what its spec does


def _edited(trace_file, tmp_path):
    """The counterexample with one value of its last state changed (fingerprint and all left)."""
    data = json.loads(trace_file.read_text())
    last = max(data["nodes"], key=lambda n: n["id"])
    last["state"]["tm_state"] = "aborted" if last["state"]["tm_state"] != "aborted" else "init"
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


def test_show_render_and_export_say_a_tampered_trace_is_not_a_behaviour(trace_file, tmp_path):
    """Each displayed an edited trace as if the spec had run it, with no word of doubt."""
    edited = _edited(trace_file, tmp_path)
    for args in (("show", edited), ("export", edited, "--format", "json"),
                 ("render", edited, "-o", tmp_path / "t.svg")):
        result = _cli("trace", *args)
        assert result.exit_code == 0, result.output
        assert "note: this trace is NOT a behaviour of its spec (step 5, tm_state: the action produces" \
            in result.stderr and f"kraftcheck trace replay {edited}" in result.stderr, result.stderr
        assert "NOT a behaviour" not in result.stdout
    assert json.loads(_cli("trace", "export", edited, "--format", "json").stdout)["graph"]["spec"]
    for args in (("show", trace_file), ("export", trace_file, "--format", "dot")):  # a true trace: nothing said
        assert _cli("trace", *args).stderr == ""


def test_show_says_a_trace_of_an_unregistered_spec_was_not_verified(tmp_path):
    from test_faults_hostile_2 import RAISING_SPEC
    from kraftcheck.checker.model import Model
    from kraftcheck.specs import spec_class
    from kraftcheck.traces.graph import build_trace
    (tmp_path / "raising_spec.py").write_text(RAISING_SPEC)
    model = Model(spec_class(f"{tmp_path / 'raising_spec.py'}:Raising")())
    path = tmp_path / "t.json"
    traces.save(build_trace(model, [(None, (0,)), (model.label_for("Inc", ()), (1,))]), path)
    result = _cli("trace", "show", path)
    assert result.exit_code == 0 and "note: not verified: its spec 'raising_on_four' is not registered here; " \
        "--spec file.py:Class (or module:Class) checks it" in result.stderr, result.output
    # named with --spec (show, export and render had none: every such trace was "not verified"), it is checked
    spec_ref = f"{tmp_path / 'raising_spec.py'}:Raising"
    for args in (("show", path), ("export", path, "--format", "dot"), ("render", path, "-o", tmp_path / "t.svg")):
        checked = _cli("trace", *args, "--spec", spec_ref)
        assert checked.exit_code == 0 and "note:" not in checked.stderr, checked.output
    data = json.loads(path.read_text())
    data["nodes"][1]["state"]["x"] = 0  # Inc wrote 1
    path.write_text(json.dumps(data))
    edited = _cli("trace", "show", path, "--spec", spec_ref)
    assert "note: this trace is NOT a behaviour of its spec" in edited.stderr, edited.output
    assert f"kraftcheck trace replay {path} --spec {spec_ref}" in edited.stderr, edited.output


TERMS_SPEC = '''
from dataclasses import dataclass
from numba import njit
from kraftcheck.checker.spec import Action, Int, Invariant, Spec


@njit(cache=True)
def inc(s, t):
    if s.x < 3:
        t.x = s.x + 1
        return True
    return False


@njit(cache=True)
def below_two(s):
    return s.x < 2


class Termed(Spec):
    name = "termed_counter"
    check_deadlock = False

    @dataclass(frozen=True)
    class Params:
        pass

    def fields(self):
        return [Int("x", 4)]

    def initial_states(self):
        return [{"x": 0}]

    def actions(self):
        return [Action("Inc", inc)]

    def invariants(self):
        return [Invariant("below_two", below_two, "x stays below 2")]

    def trace_terms(self, model, steps):
        return HOOK
'''


@pytest.mark.parametrize("hook, said", [
    ("{}['no such term']", "trace_terms() of spec termed_counter raised KeyError: 'no such term' at {file}:41"),
    ("{'terms': 'counting'}", "trace_terms() of spec termed_counter returned what no trace can be built from "
                              "(KeyError: 'fields')")])
def test_a_trace_terms_that_fails_is_the_spec_s_error(tmp_path, hook, said):
    """show, export, render and report said a raising trace_terms in a note and displayed the
    trace in the model's fields (exit 0); named with --spec, a file spec's trace_terms was not
    even called. Now each stops with the spec's error (exit 2), its file and line, no traceback."""
    source = tmp_path / "termed_spec.py"
    source.write_text(TERMS_SPEC.replace("HOOK", hook))
    ref = f"{source}:Termed"
    checked = _cli("check", "--spec", ref, "--engine", "reference", "--trace-dir", tmp_path / "traces")
    assert checked.exit_code == 1 and "raised" not in checked.output, checked.output  # check never calls it
    (path,) = (tmp_path / "traces").glob("*.json")
    for args in (("show", path), ("export", path, "--format", "json"), ("render", path, "-o", tmp_path / "t.svg"),
                 ("report", path)):
        result = _cli("trace", *args, "--spec", ref)
        assert result.exit_code == 2, (args, result.output)
        assert said.format(file=source) in result.stderr and "Traceback" not in result.output, result.output
        assert "--model-names shows the trace" in result.stderr and result.stdout == ""
        assert not (tmp_path / "t.svg").exists()
    assert _cli("trace", "show", path, "--spec", ref, "--model-names").exit_code == 0


# ----------------------------------------------------------------------------------------------
# a file that reads without end


ENDLESS_READS = '''
import resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))  # a regression: MemoryError, not the OOM killer
from kraftcheck.checker.errors import KraftcheckError
from kraftcheck.ci import baseline, manifest
from kraftcheck.sweep import matrix
from kraftcheck.traces import files, scenario
for name, read in [("trace", files.load), ("scenario", scenario.load_scenario), ("matrix", matrix.from_file),
                   ("manifest", manifest.load), ("baseline", baseline.load)]:
    try:
        read(Path(sys.argv[1]))
    except KraftcheckError as e:
        print(name, e)
'''


def test_a_file_that_reads_without_end_is_refused_not_read_whole(tmp_path):
    """trace show /dev/zero (a device or a pipe says it holds 0 bytes) read until the OOM killer
    stopped it, 24 GB later; so did sweep, ci's manifest and baseline, and a scenario: each refuses
    a file that is not a regular file now, and reads at most its limit of one that is."""
    import subprocess
    out = subprocess.run([sys.executable, "-c", ENDLESS_READS, "/dev/zero"], capture_output=True, text=True,
                         timeout=120)
    said = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert sorted(said) == ["baseline", "manifest", "matrix", "scenario", "trace"], out.stdout + out.stderr
    assert all("it is a character device, not a regular file" in said[k] for k in said), said


# ----------------------------------------------------------------------------------------------
# an option the chosen engine would ignore


def test_threads_with_the_reference_engine_is_refused_not_ignored():
    """--engine reference --threads 4 ran on one thread and said nothing of the 4."""
    import kraftcheck
    from kraftcheck.checker.errors import UsageError
    result = _cli("check", "--spec", "two_phase", "--engine", "reference", "--threads", "4")
    assert result.exit_code == 2 and "--threads 4 sets the compiled engine's worker threads; --engine reference " \
        "explores on one thread" in result.output, result.output
    with pytest.raises(UsageError, match="--engine reference explores on one thread"):
        kraftcheck.check("two_phase", engine="reference", threads=2)


@pytest.mark.parametrize("engine, how", [
    ("reference", "explores in Python and compiles no kernels"),
    ("spark", "compiles its kernels on the driver and the executors before exploring")])
def test_compile_with_an_engine_without_tiers_is_refused_not_ignored(engine, how):
    """--engine reference --compile now explored in Python and said nothing of the option."""
    import kraftcheck
    from kraftcheck.checker.errors import UsageError
    for mode in ("now", "background"):
        result = _cli("check", "--spec", "two_phase", "--engine", engine, "--compile", mode)
        assert result.exit_code == 2 and f"--compile {mode} says when the compiled engine compiles its kernels; " \
            f"--engine {engine} {how}: leave --compile out" in result.output, result.output
    with pytest.raises(UsageError, match=f"--engine {engine} {how}"):
        kraftcheck.check("two_phase", engine=engine, compile="now")
    assert kraftcheck.check("two_phase", engine="reference").status == "holds"  # the default is not refused


def test_compile_background_with_simulate_is_refused_not_ignored():
    """--simulate compiles its kernels first: --compile background meant --compile now."""
    result = _cli("check", "--spec", "two_phase", "--simulate", "--compile", "background")
    assert result.exit_code == 2 and "--simulate compiles the kernels before its first behaviour: leave " \
        "--compile background out" in result.output, result.output


# ----------------------------------------------------------------------------------------------
# a file size limit or a quota is not a full disk


@pytest.mark.parametrize("code, said, advice", [
    (errno.EFBIG, "the file size limit is exceeded", "raise the file size limit (ulimit -f)"),
    (errno.EDQUOT, "the disk quota is exceeded", "free space within the quota, or have it raised")])
def test_a_file_size_limit_or_a_quota_is_said_as_what_it_is(tmp_path, monkeypatch, code, said, advice):
    """Under 'ulimit -f' (EFBIG: Python ignores SIGXFSZ) or a quota (EDQUOT) the run said 'the disk
    is full' and told the user to free space."""
    from kraftcheck.checker.explore import levels
    add = levels.DiskLevels.add

    def refused(self, *args):
        if self.depth >= 3:
            raise OSError(code, os.strerror(code))
        return add(self, *args)
    monkeypatch.setattr(levels.DiskLevels, "add", refused)
    run = tmp_path / "cp"
    result = _cli("check", "--spec", "two_phase", "--param", "rm=2", "--checkpoint", run, "--no-color",
                  "--json", tmp_path / "r.json", "--trace-dir", tmp_path / "t")
    out = " ".join(result.output.split())
    assert result.exit_code == 3, out
    assert f"kraftcheck: error: {said} writing in {run}: the run stopped before its end; {run} keeps the last " \
        f"finished level: {advice}" in out and "the disk is full" not in out
    assert json.loads((tmp_path / "r.json").read_text())["incomplete_reason"] == f"{said} writing in {run}"
    from kraftcheck.checker.disk_full import unwritten_reason
    assert unwritten_reason(OSError(code, os.strerror(code))) == f"{said} ({os.strerror(code)})"


# ----------------------------------------------------------------------------------------------
# --graph-limit found exceeded as the check goes, not after it


def test_a_graph_over_the_limit_stops_the_check_there(tmp_path):
    """--dump-graph with --graph-limit 100 of a 288-state model explored all 288 (any size: all of
    them, however long) before refusing the dump (exit 2)."""
    report = tmp_path / "r.json"
    result = _cli("check", "--spec", "two_phase", "--param", "rm=3", "--dump-graph", tmp_path / "g.graphml",
                  "--graph-limit", "100", "--json", report, "--trace-dir", tmp_path / "t")
    assert result.exit_code == 2 and "has more than 100 states (--graph-limit 100)" in result.output, result.output
    found = json.loads(report.read_text())
    assert found["distinct_states"] < 288 and not (tmp_path / "g.graphml").exists()
    assert found["incomplete_reason"].startswith("stopped at --graph-limit 100")
    # a --max-states below the graph's limit is the run's own bound, said as such
    result = _cli("check", "--spec", "two_phase", "--param", "rm=3", "--dump-graph", tmp_path / "g.graphml",
                  "--graph-limit", "100", "--max-states", "50", "--json", report, "--trace-dir", tmp_path / "t")
    assert json.loads(report.read_text())["incomplete_reason"] == "stopped at --max-states 50"
