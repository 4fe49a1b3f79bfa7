"""``kraftcheck ci`` as a team's CI job drives it: manifests that pass and fail, the baseline,
--update-counts, budgets, malformed input, and the JUnit, GitHub Actions and NDJSON outputs."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraftcheck import api
from kraftcheck.ci import runner
from kraftcheck.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
KRAFTCHECK = str(Path(sys.executable).with_name("kraftcheck"))


def ci(*args, env=None):
    return CliRunner().invoke(cli, ["ci", "--no-color", *args], catch_exceptions=False, env=env)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project directory, the current directory while the test runs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return tmp_path


def write_manifest(project: Path, text: str, name: str = "kraftcheck.toml") -> Path:
    path = project / name
    path.write_text(text)
    return path


HOLDS_AND_EXPECTED = """
[defaults]
time_budget = 120

[checks.commit]
spec = "two_phase"
params = { rm = 3 }
expect = "holds"

[checks.eager]
spec = "two_phase_eager_commit"
violates = ["tc_consistent"]
"""

JUG_HOLDS = """
[checks.jug]
spec = "die_hard"
expect = "holds"
"""


# attributes the JUnit schema Jenkins validates against (junit-10.xsd) allows, of those we write
SCHEMA_ATTRIBUTES = {"testsuites": {"name", "time", "tests", "failures", "errors"},
                     "testsuite": {"name", "tests", "failures", "errors", "skipped", "time"},
                     "testcase": {"name", "classname", "time"}, "failure": {"message", "type"},
                     "error": {"message", "type"}, "skipped": {"message"}, "properties": set(),
                     "property": {"name", "value"}}


def junit(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    for element in root.iter():
        assert set(element.attrib) <= SCHEMA_ATTRIBUTES[element.tag], element.tag
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        for tag, attribute in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            assert int(suite.get(attribute)) == sum(1 for c in cases if c.find(tag) is not None)
    return root


def test_a_manifest_whose_expectations_hold_exits_0_with_junit(project):
    write_manifest(project, HOLDS_AND_EXPECTED)
    result = ci("--junit", "report.xml", "--jobs", "2")
    assert result.exit_code == 0, result.output
    assert "2 of 2 checks pass; exit 0" in result.stdout
    assert "eager: violated (" in result.stdout and "commit: holds (" in result.stdout  # a line as each ends
    root = junit(project / "report.xml")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"commit", "eager"}
    assert root.get("failures") == "0" and root.get("errors") == "0"
    assert int(root.get("tests")) == sum(len(s.findall("testcase")) for s in suites.values())
    for name, suite in suites.items():
        cases = {c.get("name"): c for c in suite.findall("testcase")}
        assert {"exploration", "tc_consistent"} <= set(cases)
        assert all(c.get("classname") == f"kraftcheck.{name}" and float(c.get("time")) >= 0 for c in cases.values())
        assert not list(suite.iter("failure"))
    assert not (project / "kraftcheck-ci").exists()  # passing checks leave nothing behind


def test_a_new_violation_exits_1_with_its_trace_and_a_command_that_reproduces_it(project):
    write_manifest(project, JUG_HOLDS)
    result = ci("--junit", "report.xml")
    assert result.exit_code == 1
    assert "jug: fail: big_jug_never_holds_4 violated (7 states), a new finding" in result.stdout
    run_dir = project / "kraftcheck-ci" / "jug"
    record = json.loads((run_dir / "ci-check.json").read_text())
    (trace,) = record["trace_files"]
    assert Path(trace).is_file() and Path(trace).parent == run_dir
    assert f"reproduce: {record['reproduce']}" in result.stdout
    words = shlex.split(record["reproduce"])
    rerun = subprocess.run([KRAFTCHECK, *words[1:], "--quiet"], cwd=project, capture_output=True, text=True)
    assert rerun.returncode == 1
    (failure,) = junit(project / "report.xml").iter("failure")
    steps = failure.text.splitlines()
    assert steps[1] == "1. initial state" and steps[2] == "2. FillBig" and len(steps) >= 8


def test_a_missing_expected_violation_exits_1(project):
    write_manifest(project, '[checks.commit]\nspec = "two_phase"\nparams = { rm = 2 }\nviolates = ["tc_consistent"]\n')
    result = ci("--junit", "report.xml")
    assert result.exit_code == 1
    assert "commit: fail: expected a violation of tc_consistent, none was reported" in result.stdout
    (failure,) = junit(project / "report.xml").iter("failure")
    assert "tc_consistent" in failure.get("message")


def test_a_count_mismatch_exits_1_and_update_counts_rewrites_the_counts(project):
    truth = api.check("two_phase", rm=3)
    manifest = write_manifest(project, f"""
[checks.commit]
spec = "two_phase"
params = {{ rm = 3 }}  # three resource managers
expect = "holds"
distinct = {truth.distinct_states + 1}
""")
    result = ci()
    assert result.exit_code == 1
    assert (f"counts differ from the manifest: distinct {truth.distinct_states:,} "
            f"(expected {truth.distinct_states + 1:,})") in result.stdout
    updated = ci("--update-counts")
    assert updated.exit_code == 0
    assert f"commit: distinct = {truth.distinct_states} (was {truth.distinct_states + 1})" in updated.stdout
    assert f"commit: depth = {truth.depth} (added)" in updated.stdout
    text = manifest.read_text()
    assert f"generated = {truth.states_generated}\n" in text and "# three resource managers" in text
    assert ci().exit_code == 0


def test_counts_are_not_compared_when_the_run_is_not_exhaustive(project):
    write_manifest(project, '[checks.eager]\nspec = "two_phase_eager_commit"\nviolates = ["tc_consistent"]\n'
                            'distinct = 1\n')
    result = ci()
    assert result.exit_code == 0
    assert "expected counts not compared: the run was not exhaustive" in result.stdout


def test_a_time_budget_that_runs_out_exits_3(project):
    write_manifest(project, '[checks.big]\nspec = "two_phase"\nparams = { rm = 7 }\nexpect = "holds"\n'
                            'time_budget = 0.02\n')
    result = ci("--junit", "report.xml")
    assert result.exit_code == 3
    assert "big: budget: budget ran out: stopped at --time-limit 0.02" in result.stdout
    (error,) = junit(project / "report.xml").iter("error")
    assert "budget ran out" in error.get("message")


def test_a_check_still_running_after_its_budget_and_grace_is_killed(project, monkeypatch):
    monkeypatch.setattr(runner, "KILL_GRACE_S", 0.0)
    write_manifest(project, '[checks.big]\nspec = "two_phase"\nparams = { rm = 7 }\nexpect = "holds"\n'
                            'time_budget = 0.5\n')
    result = ci()
    assert result.exit_code == 3
    assert "after it started (budget 0.5 s); killed" in result.stdout


def test_an_interrupted_run_leaves_no_check_and_no_compile_of_one_running(project, monkeypatch):
    """SIGTERM to kraftcheck ci alone (``timeout``, ``kill PID``) killed its checks outright: each
    check's background compile, in a session of its own, went on compiling unregistered (cache
    status did not see it) for up to 20 minutes. Now each check is asked to stop as Ctrl-C asks it,
    and stops its compile (here, KRAFTCHECK_KEEP_COMPILING=0) or leaves it registered."""
    cache = project / "cache"
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(cache))  # cold: the check compiles in the background
    write_manifest(project, '[checks.big]\nspec = "two_phase"\nparams = { rm = 8 }\nexpect = "holds"\n')
    run = subprocess.Popen([KRAFTCHECK, "ci", "--no-color"], cwd=project, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not [p for p in _processes_of(cache) if "kraftcheck.checker.compile" in " ".join(p.cmdline())]:
            assert run.poll() is None and time.monotonic() < deadline, "the check never started its compile"
            time.sleep(0.1)
        run.terminate()
        assert run.wait(timeout=60) == 130
        deadline = time.monotonic() + 5  # a killed helper is reaped by init, not at once
        while _processes_of(cache) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_of(cache) == [], "a check, or a compile of one, runs on"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for process in _processes_of(cache):
            process.kill()


def _processes_of(cache: Path) -> list:
    """The live processes whose kernel cache is ``cache`` (a check's background compile and its helpers)."""
    import psutil
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() != psutil.STATUS_ZOMBIE and process.environ().get("KRAFTCHECK_CACHE_DIR") == str(cache):
                found.append(process)
        except psutil.Error:
            pass
    return found


@pytest.mark.parametrize("text,message", [
    ('[checks.a]\nspec = "two_phase"\nexpect = "holds"\nexpect = "holds"\n', "kraftcheck.toml: not valid TOML"),
    ('[checks.a]\nspec = "two_phase"\nexpect = "holds"\ncontinu = true\n',
     "kraftcheck.toml:4: checks.a.continu: unknown key"),
    ('[checks.a]\nspec = "two_phase"\n', "kraftcheck.toml:1: checks.a: no expectation: add expect = \"holds\""),
    ('[checks.a]\nspec = "two_phase"\nexpect = "holds"\nviolates = ["x"]\n',
     "kraftcheck.toml:4: checks.a.violates: a check expects either"),
    ('[checks.a]\nspec = "two_phase"\nexpect = "passes"\n', 'kraftcheck.toml:3: checks.a.expect: must be "holds"'),
    ('[checks.a]\nspec = "no_such_spec"\nexpect = "holds"\n',
     "kraftcheck.toml:2: checks.a.spec: unknown spec 'no_such_spec'"),
    ('[checks.a]\nspec = "two_phase"\nparams = { nodes = 3 }\nexpect = "holds"\n',
     "kraftcheck.toml:3: checks.a.params: spec two_phase has no parameter 'nodes'"),
    ('[defaults]\ntime_budget = -1\n[checks.a]\nspec = "two_phase"\nexpect = "holds"\n',
     "kraftcheck.toml:2: defaults.time_budget: must be greater than 0, got -1"),
    ('[checks.a]\nspec = "two_phase"\nexpect = "holds"\nmax_memory = nan\n',
     "kraftcheck.toml:4: checks.a.max_memory: nan is not a number of GiB; give a number greater than 0"),
    ('[checks.a]\nspec = "two_phase"\nexpect = "holds"\nmax_states = 2.5\n',
     "kraftcheck.toml:4: checks.a.max_states: must be a whole number greater than 0, got 2.5"),
    ('[checks.a]\nspec = "two_phase"\nexpect = "holds"\ndistinct = "many"\n',
     "kraftcheck.toml:4: checks.a.distinct: must be a non-negative integer"),
    ("[defaults]\ntime_budget = 5\n", "kraftcheck.toml: checks: no checks"),
    ('[checks.a]\nspec = "two_phase"\nparams = [3]\nexpect = "holds"\n',
     "kraftcheck.toml:3: checks.a.params: must be a table: params = { key = value }, got [3]"),
    ('[defaults]\nparams = "rm=3"\n[checks.a]\nspec = "two_phase"\nexpect = "holds"\n',
     "kraftcheck.toml:2: defaults.params: must be a table: params = { key = value }, got 'rm=3'"),
    ('[checks.a]\nspec = "mutex"\nviolates = ["p1_trying_leads_to_p1_critical"]\n',
     "kraftcheck.toml:3: checks.a.violates: p1_trying_leads_to_p1_critical is a liveness property of spec mutex, "
     "which only a check with liveness = true analyses"),
    ('[checks.a]\nspec = "die_hard"\nliveness = true\nexpect = "holds"\n',
     "kraftcheck.toml:3: checks.a.liveness: spec die_hard declares no liveness property to check"),
    ('[checks.a]\nspec = "mutex"\nliveness = "yes"\nexpect = "holds"\n',
     "kraftcheck.toml:3: checks.a.liveness: must be true or false"),
    ('[checks.a]\nspec = "mutex"\nliveness = true\nsymmetry = true\nexpect = "holds"\n',
     "checks.a.liveness: liveness needs every state and symmetry keeps one per orbit"),
    ('[checks.a]\nspec = "mutex"\nliveness = true\ninvariants = ["p1_trying_leads_to_p1_critical"]\n'
     'expect = "holds"\n',
     "kraftcheck.toml:4: checks.a.invariants: p1_trying_leads_to_p1_critical is a liveness property of spec mutex: "
     "invariants selects invariants and transition properties"),
])
def test_malformed_manifests_exit_2_with_one_line_naming_line_and_key(project, text, message):
    write_manifest(project, text)
    result = ci()
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], lines
    assert not (project / "kraftcheck-ci").exists()  # nothing ran


LIVENESS = """
[defaults]
spec = "mutex"

[checks.peterson-starvation-free]
liveness = true
expect = "holds"

[checks.unfair-starves]
params = { fair = false }
liveness = true
violates = ["p1_trying_leads_to_p1_critical"]

[checks.unfair-without-liveness]
params = { fair = false }
expect = "holds"
"""


def test_liveness_is_checked_where_the_manifest_asks_and_said_unchecked_elsewhere(project):
    """``liveness = true`` runs the check with --liveness: its properties are checks the manifest
    may expect to hold or to be violated, and a violation not expected fails the check. Before,
    a manifest could not ask for them, and a check of a spec with liveness properties passed
    ``expect = "holds"`` with nothing said of them; now it notes them as not checked."""
    write_manifest(project, LIVENESS)
    result = ci()
    assert result.exit_code == 0, result.output
    assert "unfair-without-liveness: note: liveness not checked: p1_trying_leads_to_p1_critical (set liveness = " \
           "true)" in " ".join(result.output.split())
    assert "peterson-starvation-free: note" not in result.output
    write_manifest(project, LIVENESS.replace('violates = ["p1_trying_leads_to_p1_critical"]', 'expect = "holds"'))
    result = ci()
    assert result.exit_code == 1
    assert "unfair-starves: fail: p1_trying_leads_to_p1_critical violated" in result.output


def test_a_liveness_check_cut_short_says_its_liveness_was_not_checked(project):
    """``liveness = true`` on a run that does not explore every state (here bounded by
    ``max_depth``): --liveness needs every state, so no property is analysed. The check passed
    with only "bounded run" said, nothing of its liveness properties, the silence a check without
    ``liveness`` no longer keeps."""
    write_manifest(project, '[checks.a]\nspec = "mutex"\nliveness = true\nmax_depth = 3\nexpect = "holds"\n')
    result = ci()
    assert result.exit_code == 0, result.output
    assert "a: note: liveness not checked: the run did not explore every state (stopped at --max-depth 3), " \
           "which liveness = true needs" in " ".join(result.output.split())


def test_an_expected_lasso_of_a_run_cut_short_is_said_unchecked_for_why(project):
    """``liveness = true`` and a liveness property in ``violates``, the run not exploring every
    state: it said "which this run does not check", as of a name the run never checks. The check
    fails saying why."""
    bounded = ('[checks.a]\nspec = "mutex"\nparams = { fair = false }\nliveness = true\nmax_depth = 3\n'
               'violates = ["p1_trying_leads_to_p1_critical"]\n')
    write_manifest(project, bounded)
    result = ci()
    assert result.exit_code == 1, result.output
    assert ("expected a violation of p1_trying_leads_to_p1_critical, which this run did not check: liveness needs "
            "every state, and the run stopped at --max-depth 3") in " ".join(result.output.split())
    write_manifest(project, bounded.replace("max_depth = 3", "max_states = 5"))
    result = ci()
    assert result.exit_code == 1 and "did not check: liveness needs every state, and the run stopped at " \
        "--max-states 5" in " ".join(result.output.split()), result.output


def test_a_syntax_error_names_its_line(project):
    write_manifest(project, '[checks.a]\nspec = "two_phase"\nexpect = holds\n')
    result = ci()
    assert result.exit_code == 2 and "(at line 3, column 10)" in result.stderr


def test_a_check_the_engine_refuses_exits_2_with_its_message(project):
    (project / "no_actions.py").write_text(
        "from kraftcheck.specs.die_hard import DieHard\n\n"
        "class NoActions(DieHard):\n"
        "    name = 'no_actions'\n\n"
        "    def actions(self):\n"
        "        raise ValueError('not written yet')\n")
    write_manifest(project, '[checks.a]\nspec = "no_actions.py:NoActions"\nexpect = "holds"\n')
    result = ci()
    assert result.exit_code == 2
    assert "a: bad input: actions() of spec no_actions raised ValueError: not written yet" in result.stdout


def test_parameters_a_spec_refuses_with_a_value_error_exit_2_before_any_run(project):
    shutil.copy(Path(__file__).with_name("even_jugs.py"), project / "even_jugs.py")
    write_manifest(project, '[checks.ok]\nspec = "even_jugs.py:EvenJugs"\nparams = { big = 4 }\nexpect = "holds"\n'
                            '[checks.odd]\nspec = "even_jugs.py:EvenJugs"\nparams = { big = 5 }\nexpect = "holds"\n')
    result = ci()
    assert result.exit_code == 2 and not (project / "kraftcheck-ci").exists()
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and ("kraftcheck.toml:7: checks.odd.params: spec even_jugs refuses the parameters big=5: "
                                "ValueError: the big jug must hold an even number of gallons") in lines[0], lines


def test_the_baseline_accepts_a_finding_and_reports_one_that_disappeared(project):
    write_manifest(project, JUG_HOLDS)
    updated = ci("--update-baseline")
    assert updated.exit_code == 0
    assert "baseline kraftcheck-baseline.json: accepted jug / big_jug_never_holds_4 (7 states, sha256:" in updated.stdout
    baseline = json.loads((project / "kraftcheck-baseline.json").read_text())
    (finding,) = baseline["findings"]
    assert finding["actions"][0] == "FillBig" and len(finding["actions"]) == 6
    assert ci().exit_code == 0

    # another shortest trace than the accepted one: a new finding, and the accepted one is gone
    finding["signature"] = "sha256:" + "0" * 64
    (project / "kraftcheck-baseline.json").write_text(json.dumps(baseline))
    result = ci()
    assert result.exit_code == 1
    assert "a new finding" in result.stdout
    assert "jug: note: baseline finding big_jug_never_holds_4 (sha256:000000000000) no longer reported" in result.stdout
    pruned = ci("--update-baseline")
    assert "removed jug / big_jug_never_holds_4 (sha256:000000000000)" in pruned.stdout and pruned.exit_code == 0

    # a check removed from the manifest: its accepted findings are reported, then pruned
    write_manifest(project, JUG_HOLDS.replace("checks.jug", "checks.jugs"))
    renamed = ci()
    assert renamed.exit_code == 1
    assert "accepts findings of check jug, which kraftcheck.toml no longer has" in renamed.stdout
    assert "removed jug / big_jug_never_holds_4" in ci("--update-baseline").stdout
    assert [f["check"] for f in json.loads((project / "kraftcheck-baseline.json").read_text())["findings"]] == ["jugs"]


def test_a_malformed_baseline_exits_2(project):
    write_manifest(project, JUG_HOLDS)
    (project / "kraftcheck-baseline.json").write_text("{}")
    result = ci()
    assert result.exit_code == 2 and "is not a kraftcheck baseline" in result.stderr


def _own_jugs() -> str:
    """A team's copy of the Die Hard spec, under its own name (a copy may not take the name of
    the registered spec, whose traces would then be confused with its own)."""
    source = (ROOT / "specs" / "die_hard.py").read_text()
    assert 'name = "die_hard"' in source
    return source.replace('name = "die_hard"', 'name = "my_jugs"')


def test_pyproject_tool_table_and_a_spec_file_beside_it(project):
    (project / "my_jugs.py").write_text(_own_jugs())
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.kraftcheck.checks.jug]\nspec = "my_jugs.py:DieHard"\n'
        'violates = ["big_jug_never_holds_4"]\nbogus = 1\n')
    bad = ci()
    assert bad.exit_code == 2 and "pyproject.toml:7: tool.kraftcheck.checks.jug.bogus: unknown key" in bad.stderr
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.kraftcheck.checks.jug]\nspec = "my_jugs.py:DieHard"\n'
        'violates = ["big_jug_never_holds_4"]\n')
    assert ci().exit_code == 0


@pytest.mark.parametrize("body", ["return 1 // 0", "yield 1 // 0"])  # a generator raises as it is run
def test_a_spec_whose_invariants_raise_exits_2_naming_its_line(project, body):
    (project / "broken_jugs.py").write_text("from kraftcheck.specs.die_hard import DieHard\n\n\n"
                                            "class Broken(DieHard):\n    name = 'broken_jugs'\n\n"
                                            f"    def invariants(self):\n        {body}\n")
    write_manifest(project, '[checks.jug]\nspec = "broken_jugs.py:Broken"\nexpect = "holds"\n')
    result = ci()
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert ("kraftcheck.toml:2: checks.jug.spec: invariants() of spec broken_jugs raised ZeroDivisionError: "
            f"integer division or modulo by zero at {project / 'broken_jugs.py'}:8") in result.stderr, result.stderr


STUCK_JUGS = ("from kraftcheck.specs.die_hard import DieHard\n\n\n"
              "class Stuck(DieHard):  # only filling: both jugs full, no successor but itself\n"
              "    name = 'stuck_jugs'\n\n    def actions(self):\n        return super().actions()[:2]\n")


def _judged(project, manifest_text, change=None):
    """Each check of the manifest judged on the report of an in-process run (as ``kraftcheck
    check --json`` writes it), ``change(report)`` applied first."""
    from kraftcheck.checker.report import build_report
    from kraftcheck.ci import manifest as manifests
    from kraftcheck.ci.judge import judge
    (project / "stuck_jugs.py").write_text(STUCK_JUGS)
    judgements = {}
    for check in manifests.load(write_manifest(project, manifest_text)).checks:
        result = api.check(manifests.resolve_spec(check.spec, project))
        report = build_report(result, {"deadlock": result.model.check_deadlock}, {})
        if change:
            change(report)
        judgements[check.name] = judge(runner.Outcome(check, [], "", project, 1, report), [])
    return judgements


def test_a_deadlock_fails_a_check_that_expects_holds_and_can_be_expected(project):
    judged = _judged(project, '[checks.holds]\nspec = "stuck_jugs.py:Stuck"\nexpect = "holds"\n\n'
                              '[checks.stuck]\nspec = "stuck_jugs.py:Stuck"\nviolates = ["deadlock"]\n')
    holds = judged["holds"]
    assert holds.status == "fail" and holds.problems == ["deadlock reached (3 states), a new finding"]
    assert judged["stuck"].status == "pass", judged["stuck"].problems
    assert ("deadlock", "passed", "violated as expected (3 states)") in [(c.name, c.status, c.message)
                                                                         for c in judged["stuck"].cases]


def test_a_liveness_property_that_holds_vacuously_is_noted(project):
    """A property whose "holds" no behaviour earned (docs/analyses.md, "A property that holds
    vacuously") passed the gate with nothing said."""
    def vacuous(report):
        report["liveness"] = {"properties": [{"property": "p1_critical", "verdict": "holds",
                                              "vacuous": "no reachable state satisfies its left side, so no "
                                                         "behaviour can violate it"}]}
    judged = _judged(project, '[checks.a]\nspec = "stuck_jugs.py:Stuck"\nviolates = ["deadlock"]\n', vacuous)["a"]
    assert judged.status == "pass"
    assert ("liveness p1_critical holds vacuously: no reachable state satisfies its left side, so no behaviour can "
            "violate it") in judged.notes


def test_a_run_stopped_by_a_full_disk_is_not_a_budget_that_ran_out(project):
    def stopped(reason):
        def change(report):
            report.update(result="incomplete", exhaustive=False, violations=[], incomplete_reason=reason)
        return _judged(project, '[checks.stuck]\nspec = "stuck_jugs.py:Stuck"\nviolates = ["deadlock"]\n',
                       change)["stuck"]

    full = stopped("the disk is full writing in /tmp/x")
    assert (full.status, full.problems) == ("stopped", ["stopped before its end: the disk is full writing in /tmp/x"])
    budget = stopped("stopped at --time-limit 3.0")
    assert (budget.status, budget.problems) == ("budget", ["budget ran out: stopped at --time-limit 3.0"])


def test_a_run_whose_analysis_ended_in_an_error_is_no_pass(project):
    """A run whose analysis after the exploration failed (a predicate that raised) exits 2 with a report whose result is ``error``, no verdict. The gate
    judged its checks as a bounded run's, every one skipped, and passed it, exit 0 with its
    expected counts never compared; now it is bad input, as the same run's error without a report."""
    error = "spec stuck_jugs: its function is_available raised ZeroDivisionError on a state"

    def errored(report):
        report.update(result="error", error=error, exhaustive=False)

    judged = _judged(project, '[checks.a]\nspec = "stuck_jugs.py:Stuck"\nviolates = ["deadlock"]\n\n'
                              '[checks.b]\nspec = "die_hard"\nexpect = "holds"\ndistinct = 1\n', errored)
    for name in "ab":
        assert (judged[name].status, judged[name].problems) == ("bad input", [error])
        assert [(c.name, c.status) for c in judged[name].cases] == [("exploration", "error")]


def test_a_liveness_analysis_over_the_memory_budget_is_a_budget(project):
    """The exploration complete, --liveness stopped at --max-memory: the report says incomplete
    (not error, which was bad input, exit 2), and the gate says the budget ran out (exit 3); the
    expected lasso is skipped, not analysed, as an invariant's not found, not failed."""
    reason = "stopped at --max-memory: --liveness did not finish: analysing the state graph needs about 1.0 GiB more"

    def stopped(report):
        report.update(result="incomplete", incomplete_reason=reason)

    judged = _judged(project, '[checks.a]\nspec = "mutex"\nparams = { fair = false }\nliveness = true\n'
                              'violates = ["p1_trying_leads_to_p1_critical"]\n', stopped)["a"]
    assert (judged.status, judged.problems) == ("budget", [f"budget ran out: {reason}"])
    assert ("p1_trying_leads_to_p1_critical", "skipped") in [(c.name, c.status) for c in judged.cases]
    assert f"liveness not checked: the analysis did not finish ({reason}), which liveness = true needs" \
        in judged.notes


def test_a_continue_run_cut_short_after_its_violations_is_a_budget_not_a_pass(project):
    """continue = true goes on past the violations found, for the rest: cut short by its time budget
    after it found the expected one, the run had not looked at every state. The gate passed it
    (exit 0, only a note that the budget ran out, its expected counts not compared); now it is a
    budget that ran out (exit 3), as the same run that found nothing. A bound the manifest sets
    (max_states) is still a bounded run that passes."""
    def cut(reason, went_on=True):
        def change(report):
            report.update(incomplete_reason=reason, exhaustive=False)
            report["options"]["continue"] = went_on
        return change

    manifest = ('[checks.eager]\nspec = "two_phase_eager_commit"\ncontinue = true\nviolates = ["tc_consistent"]\n'
                'distinct = 1\n')
    judged = _judged(project, manifest, cut("stopped at --time-limit 1.0"))["eager"]
    assert (judged.status, judged.problems) == ("budget", ["budget ran out: stopped at --time-limit 1.0"])
    assert [(c.name, c.status) for c in judged.cases] == [("exploration", "error"), ("tc_consistent", "passed")]
    assert _judged(project, manifest, cut("stopped at --max-states 100"))["eager"].status == "pass"
    # without continue the run stops at its first violation: nothing more was to be looked for
    assert _judged(project, manifest.replace("continue = true\n", ""),
                   cut("stopped at --time-limit 1.0", went_on=False))["eager"].status == "pass"


def test_a_deadlock_expected_of_a_spec_that_does_not_check_for_them_is_refused(project):
    (project / "calm_jugs.py").write_text(STUCK_JUGS.replace("'stuck_jugs'", "'calm_jugs'\n    check_deadlock = False"))
    write_manifest(project, '[checks.calm]\nspec = "calm_jugs.py:Stuck"\nviolates = ["deadlock"]\n')
    result = ci()
    assert result.exit_code == 2 and ("kraftcheck.toml:3: checks.calm.violates: spec calm_jugs.py:Stuck does not "
                                      "check for deadlocks") in result.stderr, result.stderr


def test_github_actions_annotations_and_job_summary(project):
    write_manifest(project, JUG_HOLDS)
    summary = project / "summary.md"
    summary.write_text("earlier step\n")
    result = ci(env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert result.exit_code == 1
    errors = [line for line in result.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 1 and errors[0].startswith("::error title=kraftcheck jug::big_jug_never_holds_4 violated")
    assert "%0Areproduce: kraftcheck check --spec die_hard" in errors[0]
    text = summary.read_text()
    assert text.startswith("earlier step\n## kraftcheck ci")
    assert "| jug | holds | ❌ fail |" in text and "BigToSmall" in text


@pytest.mark.parametrize("option", ["--junit", "--progress-json"])
def test_github_annotations_leave_a_report_on_standard_output_whole(project, option):
    """--junit - (or --progress-json -) under GitHub Actions: standard output is the report alone,
    which a CI step parses; the annotations go to standard error with the table (the runner reads both)."""
    write_manifest(project, JUG_HOLDS)
    result = ci(option, "-", "--jobs", "1", env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": ""})
    assert result.exit_code == 1, result.output
    assert "::error " not in result.stdout, result.stdout
    if option == "--junit":
        junit_root = ET.fromstring(result.stdout)
        assert junit_root.tag == "testsuites"
    else:
        assert all(json.loads(line) for line in result.stdout.splitlines())
    assert any(line.startswith("::error title=kraftcheck jug::") for line in result.stderr.splitlines())


def test_progress_stream_is_one_json_object_per_line(project):
    write_manifest(project, HOLDS_AND_EXPECTED)
    assert ci("--progress-json", "progress.ndjson", "--jobs", "1").exit_code == 0
    events = [json.loads(line) for line in (project / "progress.ndjson").read_text().splitlines()]
    assert [(e["event"], e["check"]) for e in events] == [
        ("started", "commit"), ("finished", "commit"), ("started", "eager"), ("finished", "eager")]
    assert events[1]["result"] == "holds" and events[3]["result"] == "violated"


def test_progress_lines_of_a_check_are_forwarded(tmp_path):
    events = []
    log = tmp_path / "output.log"
    log.write_text("checking x\nprogress: compiling kernels in the background: 3/9: Fetch\n"
                   "progress: interpreting meanwhile: depth 2  distinct 12  generated 30  frontier 9  1/s\n"
                   "progress: depth 3  distinct 1,234  generated 5,678  frontier 9  1/s distinct\npartial")
    job = runner._Running(runner.Outcome(None, [], "", tmp_path), None, open(log, "a"), 0.0)
    job.outcome.check = type("C", (), {"name": "x"})()
    runner._forward_progress(job, events.append)
    assert [(e["depth"], e["distinct"], e["generated"]) for e in events] == [(2, 12, 30), (3, 1234, 5678)]
    runner._forward_progress(job, events.append)
    assert len(events) == 2  # each line once


@pytest.mark.slow
def test_this_projects_own_manifest_gates_green():
    """The gate as this project's CI runs it: with the first tier's default budget, not the 60 s
    the suite gives its own short runs (conftest), which made every check of a configuration not
    yet compiled explore the Kafka model in bytecode for a minute while its compile starved at
    nice 19 (on empty caches: 265 s and 500 s of CPU against 50 s and 77 s)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "KRAFTCHECK_INTERPRET_S")}
    out = subprocess.run([KRAFTCHECK, "ci", "--no-color", "--out", "/tmp/kraftcheck-ci-selftest"], cwd=ROOT,
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_module_beside_the_manifest_is_found_and_its_reproduce_command_works(project):
    (project / "my_jugs.py").write_text(_own_jugs())
    write_manifest(project, '[checks.jug]\nspec = "my_jugs:DieHard"\nexpect = "holds"\n')
    result = ci()
    assert result.exit_code == 1
    record = json.loads((project / "kraftcheck-ci" / "jug" / "ci-check.json").read_text())
    assert record["reproduce"].startswith("PYTHONPATH=. kraftcheck check --spec my_jugs:DieHard")
    assert "--trace-dir kraftcheck-ci/jug" in record["reproduce"]
    assert f"reproduce: {record['reproduce']}" in result.stdout
    rerun = subprocess.run(record["reproduce"].replace("kraftcheck check", shlex.quote(KRAFTCHECK) + " check", 1),
                           shell=True, cwd=project, capture_output=True, text=True)
    assert rerun.returncode == 1 and "big_jug_never_holds_4" in rerun.stdout


def test_update_counts_edits_a_pyproject_table_in_place_and_refuses_an_inline_check(project):
    from kraftcheck.ci.expected_counts import update_counts
    from kraftcheck.ci.manifest import ManifestError, load
    path = project / "pyproject.toml"
    path.write_text('[tool.kraftcheck.checks.a]\nspec = "two_phase"  # note\nexpect = "holds"\ndepth = 3\n\n'
                    '[tool.other]\nx = 1\n')
    changes = update_counts(load(path), {"a": {"distinct": 5, "generated": 9, "depth": 4}})
    assert changes == ["a: distinct = 5 (added)", "a: generated = 9 (added)", "a: depth = 4 (was 3)"]
    assert path.read_text() == ('[tool.kraftcheck.checks.a]\nspec = "two_phase"  # note\nexpect = "holds"\n'
                                'depth = 4\ndistinct = 5\ngenerated = 9\n\n[tool.other]\nx = 1\n')
    assert update_counts(load(path), {"a": {"distinct": 5, "generated": 9, "depth": 4}}) == []
    inline = write_manifest(project, 'checks.b = { spec = "two_phase", expect = "holds" }\n')
    with pytest.raises(ManifestError, match=r"write it as its own \[checks.b\] table"):
        update_counts(load(inline), {"b": {"distinct": 1, "generated": 1, "depth": 1}})


def test_update_counts_replaces_a_quoted_count_key_and_keeps_its_comment(project):
    from kraftcheck.ci.expected_counts import update_counts
    from kraftcheck.ci.manifest import load
    path = write_manifest(project, '[checks.a]\nspec = "two_phase"\nexpect = "holds"\n"distinct" = 3  # old\n'
                                   "'depth' = 2\n")
    changes = update_counts(load(path), {"a": {"distinct": 5, "generated": 9, "depth": 4}})
    assert changes == ["a: distinct = 5 (was 3)", "a: generated = 9 (added)", "a: depth = 4 (was 2)"]
    assert path.read_text() == ('[checks.a]\nspec = "two_phase"\nexpect = "holds"\n"distinct" = 5  # old\n'
                                "'depth' = 4\ngenerated = 9\n")
    assert load(path).checks[0].counts == {"distinct": 5, "generated": 9, "depth": 4}


def test_update_counts_never_leaves_a_manifest_that_does_not_read_back(project, monkeypatch):
    import re
    from kraftcheck.ci import expected_counts
    from kraftcheck.ci.manifest import ManifestError, load
    text = '[checks.a]\nspec = "two_phase"\nexpect = "holds"\ndistinct = 3\n'
    path = write_manifest(project, text)
    # a count line the line editing does not see: it would add a second one, which TOML refuses
    monkeypatch.setattr(expected_counts, "_count_line", lambda key: re.compile(r"^never$"))
    with pytest.raises(ManifestError, match=r"cannot update the counts of check a as written .*left as it was"):
        expected_counts.update_counts(load(path), {"a": {"distinct": 5, "generated": 9, "depth": 4}})
    assert path.read_text() == text


def test_update_counts_refuses_a_check_without_its_own_table_before_any_check_runs(project):
    write_manifest(project, '[checks]\ncommit.spec = "two_phase"\ncommit.expect = "holds"\n'
                            'commit.params = { rm = 3 }\n')
    result = ci("--update-counts")
    assert result.exit_code == 2
    assert "cannot update the counts of check commit: write it as its own [checks.commit] table" in result.stderr
    assert "kraftcheck ci: 1 checks" not in result.stdout and not (project / "kraftcheck-ci").exists()


def test_this_projects_manifest_covers_every_configuration_of_bench_verdicts():
    """kraftcheck.toml gates the configurations the README's verdict table lists
    (bench/verdicts.toml, the sweep bench/verdicts.py runs)."""
    import tomllib

    from kraftcheck.ci.manifest import load
    rows = tomllib.loads((ROOT / "bench" / "verdicts.toml").read_text())["configurations"]
    gated = {}
    for check in load(ROOT / "kraftcheck.toml").checks:
        assert check.spec == "kafka" and check.params["brokers"] == 3 and check.params["min_isr"] == 2
        configuration = {k: str(v) for k, v in check.params.items() if k not in ("brokers", "min_isr", "min_isr_changes")}
        gated[(check.params["min_isr_changes"], tuple(sorted(configuration.items())))] = check.name
    for row in rows:
        params = tuple(sorted((k, str(v)) for k, v in row["params"].items()))
        assert (0, params) in gated, row["name"]
    assert (1, ()) in gated  # the default bounds: F1 and F3
    assert len(gated) == len(rows) + 1


def test_with_continue_an_expected_violation_run_is_exhaustive_and_its_counts_are_gated(project):
    truth = api.check("two_phase_eager_commit", keep_going=True)
    assert truth.exhaustive and truth.violations
    manifest = write_manifest(project, '[checks.eager]\nspec = "two_phase_eager_commit"\ncontinue = true\n'
                                       'violates = ["tc_consistent"]\n')
    assert ci("--record").exit_code == 0  # --update-counts by its former name, which still works
    assert f"distinct = {truth.distinct_states}\n" in manifest.read_text()
    manifest.write_text(manifest.read_text().replace(f"depth = {truth.depth}", f"depth = {truth.depth + 1}"))
    result = ci()
    assert result.exit_code == 1 and f"depth {truth.depth} (expected {truth.depth + 1})" in result.stdout


def test_an_out_directory_kraftcheck_did_not_make_is_left_alone(project):
    write_manifest(project, JUG_HOLDS)
    (project / "out" / "jug").mkdir(parents=True)
    (project / "out" / "jug" / "precious.txt").write_text("keep me")
    result = ci("--out", "out")
    assert result.exit_code == 2 and "was not made by kraftcheck ci; choose another --out" in result.stderr
    assert (project / "out" / "jug" / "precious.txt").read_text() == "keep me"


def test_fingerprints_and_symmetry_reach_the_run_and_gate_its_reduced_counts(project):
    reduced = api.check("two_phase", rm=3, symmetry=True, fingerprints=True)
    assert reduced.distinct_states < api.check("two_phase", rm=3).distinct_states  # orbits, not states
    manifest = write_manifest(project, '[checks.commit]\nspec = "two_phase"\nparams = { rm = 3 }\nexpect = "holds"\n'
                                       'symmetry = true\nfingerprints = true\n')
    assert ci("--update-counts").exit_code == 0
    assert f"distinct = {reduced.distinct_states}\n" in manifest.read_text()
    result = ci("--progress-json", "events.ndjson")
    assert result.exit_code == 0
    assert "--symmetry: one state per orbit; counts are orbits" in result.stdout
    assert "--fingerprints: exhaustive up to hash collisions (probability " in result.stdout
    events = [json.loads(line) for line in (project / "events.ndjson").read_text().splitlines()]
    (started,) = [e for e in events if e["event"] == "started"]
    words = shlex.split(started["command"])
    assert "--symmetry" in words and "--fingerprints" in words


def test_symmetry_a_spec_does_not_declare_is_refused_with_its_message(project):
    write_manifest(project, '[checks.jug]\nspec = "die_hard"\nexpect = "holds"\nsymmetry = true\n')
    result = ci()
    assert result.exit_code == 2 and not (project / "kraftcheck-ci").exists()  # refused before any run
    assert "kraftcheck.toml:4: checks.jug.symmetry: spec die_hard declares no symmetry" in result.stderr
    write_manifest(project, '[checks.jug]\nspec = "die_hard"\nexpect = "holds"\nsymmetry = "yes"\n')
    result = ci()
    assert result.exit_code == 2 and "checks.jug.symmetry: must be true or false, got 'yes'" in result.stderr


def test_a_check_whose_process_cannot_start_says_so_not_that_its_directory_was_refused(project, monkeypatch):
    """A process the system would not start (no memory to fork, too many processes) was said as
    'its run directory ... could not be written', a full disk that never was; the log it had
    opened was left open."""
    import errno

    write_manifest(project, '[checks.jugs]\nspec = "die_hard"\nviolates = ["big_jug_never_holds_4"]\n')
    logs = []
    real_open = open

    def tracked_open(path, *args, **kwargs):
        f = real_open(path, *args, **kwargs)
        logs.append(f)
        return f

    def no_fork(*args, **kwargs):
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(runner.subprocess, "Popen", no_fork)
    monkeypatch.setattr(runner, "open", tracked_open, raising=False)
    result = ci()
    assert result.exit_code == 3, result.output
    said = " ".join(result.output.split())
    assert "its process could not be started: Resource temporarily unavailable" in said, said
    assert "run directory" not in said and all(f.closed for f in logs) and logs


def test_a_report_file_inside_a_checks_run_directory_is_refused_before_any_check(project):
    """A check's run directory is emptied before the check runs and removed once it passes: a
    --progress-json or --junit file inside one went with it (exit 0, the progress stream gone).
    Refused before any check runs; a file beside the run directories is fine."""
    from kraftcheck.ci.runner import MARKER

    write_manifest(project, HOLDS_AND_EXPECTED)
    (project / "kraftcheck-ci" / "commit").mkdir(parents=True)  # as an earlier run that failed left it
    (project / "kraftcheck-ci" / "commit" / MARKER).write_text("{}")
    for option in ("--progress-json", "--junit"):
        result = ci(option, "kraftcheck-ci/commit/report.out")
        assert result.exit_code == 2, result.output
        assert f"{option} kraftcheck-ci/commit/report.out is inside check commit's run directory" in result.output
        assert (project / "kraftcheck-ci" / "commit" / MARKER).exists()  # nothing ran
    result = ci("--progress-json", "kraftcheck-ci/progress.jsonl")
    assert result.exit_code == 0, result.output
    assert (project / "kraftcheck-ci" / "progress.jsonl").stat().st_size > 0


def test_a_new_lasso_is_listed_as_kraftcheck_check_lists_it(project):
    """A liveness finding's depth counts a lasso's distinct states, its closing step apart (as
    kraftcheck check says it): the gate said "counterexample (4 states)" and numbered five steps,
    the closing step's as a fifth state. It lists the closing step unnumbered, back to the loop's
    first state, on the console, in the JUnit details and in the job summary."""
    write_manifest(project, '[checks.a]\nspec = "mutex"\nparams = { algorithm = "test_and_set" }\nliveness = true\n'
                            'expect = "holds"\n')
    result = ci("--junit", "junit.xml", env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": "summary.md"})
    said = result.output
    assert result.exit_code == 1 and "counterexample (4 states):" in said, said
    listing = said[said.index("counterexample (4 states):"):].splitlines()[1:6]
    assert [line.strip() for line in listing] == ["1. initial state", "2. Try(p=p1)", "3. Try(p=p2)",
                                                  "4. Enter(p=p2)", "closing step: Leave(p=p2), back to 2"], said
    details = next(c for c in junit(project / "junit.xml").iter("failure")).text
    assert "4. Enter(p=p2)\nclosing step: Leave(p=p2), back to 2\n" in details, details
    assert "closing step: Leave(p=p2), back to 2" in (project / "summary.md").read_text()


def test_a_check_with_no_counts_shows_none_not_zero(project):
    """A check whose spec raised on a state has no counts (its report, saying error, gives none:
    a 0 would read as counted); the gate's table and job summary showed 0 distinct states."""
    faulty = Path(__file__).with_name("test_faults_spec_errors.py")
    write_manifest(project, f'[checks.f]\nspec = "{faulty}:Faulty"\nparams = {{ fault = 1 }}\nexpect = "holds"\n')
    result = ci(env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": "summary.md"})
    assert result.exit_code == 2, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("│ f "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[2] == "bad input" and cells[3] == "" and cells[4] == "", row
    summary_row = next(line for line in (project / "summary.md").read_text().splitlines() if line.startswith("| f |"))
    assert "| 0 |" not in summary_row, summary_row
