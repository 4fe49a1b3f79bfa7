"""``kraftcheck check --availability`` and ``--liveness`` as a user runs them: verdicts, exit
codes, trace files, the JSON report, and the limits that bound them."""

from __future__ import annotations

import json

from click.testing import CliRunner

from kraftcheck.cli.main import cli

SMALL_KAFKA = ["--brokers", "2", "--min-isr", "1", "--fences", "0", "--min-isr-changes", "0"]


def _check(tmp_path, *args):
    return CliRunner().invoke(cli, ["check", "--no-color", "--trace-dir", str(tmp_path / "traces"),
                                    "--json", str(tmp_path / "report.json"), *map(str, args)])


def _report(tmp_path):
    return json.loads((tmp_path / "report.json").read_text())


def test_a_starving_lock_fails_liveness_with_exit_1_and_a_lasso_file(tmp_path):
    result = _check(tmp_path, "--spec", "mutex", "--param", "algorithm=test_and_set", "--liveness")
    assert result.exit_code == 1, result.output
    assert "p1_trying_leads_to_p1_critical: violated" in result.output
    assert "then forever: Try(p=p2) -> Enter(p=p2) -> Leave(p=p2)" in result.output
    report = _report(tmp_path)
    assert report["result"] == "violated"  # the invariants hold; the liveness property does not
    (prop,) = report["liveness"]["properties"]
    assert report["liveness"]["violated"] == [prop["property"]]
    (violation,) = report["violations"]
    assert (violation["invariant"], violation["kind"], violation["trace_file"], violation["cycle_start"]) == \
        (prop["property"], "liveness", prop["trace_file"], 1)
    fairness = prop["lasso"].pop("fairness")  # how the cycle meets each requirement: tests/test_fairness.py
    assert [f["requirement"] for f in fairness] == ["Enter(p=p1)", "Enter(p=p2)", "Leave(p=p1)", "Leave(p=p2)"]
    assert prop["lasso"] == {"prefix": ["Try(p=p1)"], "cycle": ["Try(p=p2)", "Enter(p=p2)", "Leave(p=p2)"],
                             "stutter": False, "trigger_step": 1}
    files = list((tmp_path / "traces").iterdir())
    assert [str(f) for f in files] == [prop["trace_file"]]
    lasso = json.loads(files[0].read_text())["graph"]["lasso"]
    assert lasso["cycle_start"] == 1 and not lasso["stutter"]


def test_peterson_holds_with_exit_0_and_no_trace(tmp_path):
    result = _check(tmp_path, "--spec", "mutex", "--liveness")
    assert result.exit_code == 0, result.output
    assert "p1_trying_leads_to_p1_critical: holds" in result.output
    assert _report(tmp_path)["liveness"]["violated"] == []
    assert not (tmp_path / "traces").exists() or not list((tmp_path / "traces").iterdir())


def test_without_fairness_a_process_may_just_stop(tmp_path):
    result = _check(tmp_path, "--spec", "mutex", "--param", "fair=false", "--liveness")
    assert result.exit_code == 1
    assert "no fairness" in result.output and "stutters forever" in result.output


def test_a_spec_without_liveness_properties_is_a_usage_error(tmp_path):
    result = _check(tmp_path, "--spec", "two_phase", "--liveness")
    assert result.exit_code == 2 and "declares no liveness properties" in result.output


def test_kafka_availability_and_liveness_use_the_graph_the_check_recorded(tmp_path):
    result = _check(tmp_path, *SMALL_KAFKA, "--availability", "--liveness", "--graph-limit", "10")
    assert result.exit_code == 0, result.output  # --graph-limit bounds --dump-graph only
    report = _report(tmp_path)
    assert report["options"]["continue"] is True  # the analyses explore every state
    assert report["liveness"]["recorded_by"] == "the check's exploration"
    assert report["liveness"]["states"] == report["distinct_states"]
    variants = {v["variant"]: v for v in report["availability"]["variants"]}
    assert variants["recovery=balanced"]["recorded_by"] == "the check's exploration"
    assert variants["recovery=none"]["recorded_by"] == "a recording pass"
    stuck = variants["recovery=none"]
    assert stuck["verdict"] == "can get stuck" and stuck["stuck_states"] > 0
    assert stuck["example"]["steps"] and stuck["trace_file"]
    trace = json.loads(open(stuck["trace_file"]).read())
    assert trace["graph"]["availability"]["variant"] == "recovery=none"
    assert [e["action"] for e in sorted(trace["edges"], key=lambda e: e["source"])] == \
        [s.split("(")[0] for s in stuck["example"]["steps"]]
    assert variants["recovery=balanced"]["verdict"] == "can always recover"
    assert report["availability"]["can_get_stuck"] == ["recovery=none"]


def test_an_exploration_that_stops_early_skips_the_analyses(tmp_path):
    result = _check(tmp_path, "--spec", "mutex", "--liveness", "--max-states", "5")
    assert result.exit_code == 3
    assert "--liveness needs every state" in result.output and "did not run" in result.output
    assert "liveness" not in _report(tmp_path)


def test_liveness_skipped_is_among_the_properties_not_checked(tmp_path):
    """--liveness asked for but not run (the exploration stopped early: a limit, an interrupt)
    left the report's liveness_not_checked empty, which says every property
    the spec declares was checked; a program reading it took the run's verdict for the whole
    answer. They are listed, as a run without --liveness lists them."""
    result = _check(tmp_path, "--spec", "two_phase_eager_commit", "--max-depth", "3")
    assert result.exit_code == 3
    assert _report(tmp_path)["liveness_not_checked"] == []  # the spec declares none: nothing to list
    result = _check(tmp_path, "--spec", "mutex", "--max-states", "5")
    declared = _report(tmp_path)["liveness_not_checked"]
    assert result.exit_code == 3 and declared
    result = _check(tmp_path, "--spec", "mutex", "--liveness", "--max-states", "5")
    assert result.exit_code == 3 and "did not run" in result.output
    assert _report(tmp_path)["liveness_not_checked"] == declared
    result = _check(tmp_path, "--spec", "mutex", "--liveness")
    assert result.exit_code == 0 and _report(tmp_path)["liveness_not_checked"] == []


def test_other_engines_get_a_recording_pass_of_their_own(tmp_path):
    result = _check(tmp_path, "--spec", "mutex", "--param", "algorithm=test_and_set", "--liveness",
                    "--engine", "reference")
    assert result.exit_code == 1
    assert _report(tmp_path)["liveness"]["recorded_by"] == "a recording pass"


def test_availability_of_a_spec_without_it_is_refused_before_exploring(tmp_path):
    # as --liveness is: one line, exit 2, no exploration, no summary, no JSON report
    result = _check(tmp_path, "--spec", "two_phase", "--availability")
    assert result.exit_code == 2, result.output
    assert "does not say what 'available' means" in result.output
    assert "states generated" not in result.output and not (tmp_path / "report.json").exists()


def test_an_availability_predicate_reading_no_field_is_refused_before_exploring(tmp_path):
    spec = tmp_path / "avail_typo.py"
    spec.write_text(
        "from dataclasses import dataclass\nfrom numba import njit\n"
        "from kraftcheck import Action, Int, Invariant, Predicate, Spec\n\n"
        "@njit(cache=True)\ndef inc(s, t):\n    if s.x == 2:\n        return False\n    t.x = s.x + 1\n    return True\n\n"
        "@njit(cache=True)\ndef small(s):\n    return s.x < 5\n\n"
        "@dataclass(frozen=True)\nclass P:\n    pass\n\n"
        "class AvailTypo(Spec):\n    name = 'avail_typo'\n    summary = 'a misspelt availability predicate'\n"
        "    Params = P\n    check_deadlock = False\n\n"
        "    def fields(self):\n        return [Int('x', 2)]\n\n"
        "    def initial_states(self):\n        yield {'x': 0}\n\n"
        "    def actions(self):\n        return [Action('Inc', inc)]\n\n"
        "    def invariants(self):\n        return [Invariant('small', small)]\n\n"
        "    def availability(self):\n        return Predicate('y is 0', lambda v: v['y'] == 0)\n")
    result = _check(tmp_path, "--spec", f"{spec}:AvailTypo", "--availability", "--engine", "reference")
    assert result.exit_code == 2, result.output
    assert "reads field 'y'" in result.output
    assert "states generated" not in result.output and not (tmp_path / "report.json").exists()
