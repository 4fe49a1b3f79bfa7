"""Lasso traces (``traces.lasso``): liveness counterexamples written, read, replayed, shown,
drawn and exported; and the ways a tampered lasso is caught."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kraftcheck import traces
from kraftcheck.checker.analyses.liveness import check_liveness
from kraftcheck.checker.analyses.state_graph import build_graph, model_kernels
from kraftcheck.checker.model import Model
from kraftcheck.cli.trace_cmd import trace
from kraftcheck.specs.mutex import Mutex, MutexParams
from kraftcheck.traces.errors import TraceFormatError
from kraftcheck.traces.files import from_text, to_json
from kraftcheck.traces.lasso import lasso_trace, trace_of_lasso
from kraftcheck.traces.table import trace_text
from kraftcheck.traces.view import TraceView


def _lasso(algorithm: str, fair: bool):
    model = Model(Mutex(MutexParams(algorithm=algorithm, fair=fair)))
    kernels = model_kernels(model)
    graph = build_graph(model, kernels)
    prop = model.spec.liveness()[0]
    return trace_of_lasso(graph, check_liveness(graph, kernels, prop), prop, {"engine": "engine"})


@pytest.fixture(scope="module")
def starving():
    return _lasso("test_and_set", True)   # p1 waits while p2 goes round: a cycle of three steps


@pytest.fixture(scope="module")
def stopping():
    return _lasso("peterson", False)      # no fairness: p1 tries, then nothing happens


def _data(graph):
    return json.loads(to_json(graph))


def _replay(data):
    return traces.replay(from_text(json.dumps(data)))


def test_a_cycle_lasso_has_its_closing_edge_and_replays(starving, tmp_path):
    assert sorted(starving.edges) == [(0, 1), (1, 2), (2, 3), (3, 1)]
    assert starving.edges[3, 1]["action"] == "Leave" and starving.edges[3, 1]["params"] == {"p": "p2"}
    assert starving.graph["violation"]["kind"] == "liveness" and starving.graph["violation"]["step"] == 1
    path = traces.save(starving, tmp_path / "lasso.json")
    loaded = traces.load(path)
    assert sorted(loaded.edges) == sorted(starving.edges) and loaded.graph["lasso"] == starving.graph["lasso"]
    assert traces.replay(loaded).ok
    assert traces.replay(loaded, compiled=True).ok


def test_a_stuttering_lasso_ends_in_a_self_loop_and_replays(stopping):
    assert sorted(stopping.edges) == [(0, 1), (1, 1)]
    assert stopping.edges[1, 1]["action"] == "(stuttering)"
    assert stopping.graph["lasso"]["stutter"] and stopping.graph["lasso"]["fair"] == []
    assert traces.replay(stopping).ok


def test_a_closing_edge_to_the_wrong_step_is_refused(starving):
    data = _data(starving)
    for e in data["edges"]:
        if (e["source"], e["target"]) == (3, 1):
            e["target"] = 0
    with pytest.raises(TraceFormatError, match="the only other edge allowed closes the cycle: 3 -> 1"):
        from_text(json.dumps(data))


def test_a_cycle_that_does_not_close_is_caught_by_replay(starving):
    data = _data(starving)
    data["graph"]["lasso"]["cycle_start"] = 2
    for e in data["edges"]:
        if (e["source"], e["target"]) == (3, 1):
            e["target"] = 2
    report = _replay(data)
    assert not report.ok and "does not lead back to step 2" in str(report.error)


def test_a_lasso_without_its_lasso_attribute_or_with_other_fairness_is_refused(starving):
    data = _data(starving)
    del data["graph"]["lasso"]
    with pytest.raises(TraceFormatError, match="comes with its lasso"):
        from_text(json.dumps(data))
    data = _data(starving)
    data["graph"]["lasso"]["fair"] = ["Enter(p=p1)"]
    report = _replay(data)
    assert not report.ok and "assumes fairness of" in str(report.error)


def test_an_edited_state_in_the_cycle_is_caught(starving):
    data = _data(starving)
    node = next(n for n in data["nodes"] if n["id"] == 2)
    node["state"]["pc"]["p2"] = "critical"
    report = _replay(data)
    assert not report.ok and report.error.step == 2


def test_an_unfair_cycle_is_refused():
    # Peterson with fairness: p1 trying, then stop. Enter/GiveWay stay enabled: weak fairness forbids it
    model = Model(Mutex(MutexParams(algorithm="peterson", fair=True)))
    try_p1 = model.label_for("Try", (0,))
    give_way = model.label_for("GiveWay", (0,))
    s0 = model.initial[0]
    s1 = model.step(s0, try_p1)
    s2 = model.step(s1, give_way)
    prop = model.spec.liveness()[0]
    from kraftcheck.checker.analyses.liveness import fairness_requirements
    fair = [req.name for req in fairness_requirements(model, prop.fair)]
    g = lasso_trace(model, [(None, s0), (try_p1, s1), (give_way, s2)], cycle_start=2, stutter=True, trigger=1,
                    check=prop.name, formula=prop.formula(), fair=fair)
    report = traces.replay(g)
    assert not report.ok and "not fair to Enter(p=p1)" in str(report.error)


def test_the_goal_holding_inside_the_cycle_is_caught():
    # p1 tries, enters, leaves and tries again, forever: the goal (p1 critical) holds on the cycle
    model = Model(Mutex(MutexParams(algorithm="test_and_set", fair=False)))
    steps = [(None, model.initial[0])]
    for action in ("Try", "Enter", "Leave", "Try"):
        lab = model.label_for(action, (0,))
        steps.append((lab, model.step(steps[-1][1], lab)))
    assert steps[-1][1] == steps[1][1]
    prop = model.spec.liveness()[0]
    g = lasso_trace(model, steps, cycle_start=1, stutter=False, trigger=1, check=prop.name,
                    formula=prop.formula(), fair=[])
    report = traces.replay(g)
    assert not report.ok and report.error.step == 2 and "holds here, after the trigger" in str(report.error)


def test_show_marks_the_trigger_and_the_cycle(starving, stopping):
    text = trace_text(TraceView(starving), width=100)
    assert "<- trigger" in text and "@ cycle starts here" in text
    assert "then Leave(p=p2) leads back to step 1: steps 1 to 3 repeat forever" in text
    assert "under weak fairness of: Enter(p=p1), Enter(p=p2), Leave(p=p1), Leave(p=p2)" in text
    text = trace_text(TraceView(stopping), width=100)
    assert "stays forever (stuttering" in text and "with no fairness" in text


def test_the_trace_commands_work_on_lassos(starving, tmp_path):
    path = traces.save(starving, tmp_path / "lasso.json")
    run = CliRunner()
    result = run.invoke(trace, ["replay", str(path), "--no-color"], catch_exceptions=False)
    assert result.exit_code == 0 and "the closing step too (back to step 1)" in " ".join(result.output.split())
    png = tmp_path / "lasso.png"
    result = run.invoke(trace, ["render", str(path), "-o", str(png)], catch_exceptions=False)
    assert result.exit_code == 0 and png.stat().st_size > 1000
    result = run.invoke(trace, ["export", str(path), "--format", "dot"], catch_exceptions=False)
    assert "s3 -> s1" in result.output and "magenta" in result.output
    result = run.invoke(trace, ["export", str(path), "--format", "mermaid"], catch_exceptions=False)
    assert "then Leave(p=p2) back to step 1, forever" in result.output
    bad = _data(starving)
    bad["graph"]["lasso"]["fair"] = []
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    result = run.invoke(trace, ["replay", str(tmp_path / "bad.json"), "--no-color"], catch_exceptions=False)
    assert result.exit_code != 0 and "NOT A VALID TRACE" in result.output


def _edit_fairness(starving, edit):
    data = _data(starving)
    edit(data["graph"]["lasso"])
    return data


@pytest.mark.parametrize("fairness", [5, ["x"], [{"how": "taken"}],
                                      [{"requirement": "Enter(p=p1)", "strength": "weak", "how": "taken",
                                        "step": "2"}]])
def test_a_malformed_fairness_explanation_is_refused_when_read(starving, fairness):
    # show prints each entry ("Enter(p=p1) taken from step 2"): a malformed one was an internal
    # error with a traceback
    data = _edit_fairness(starving, lambda lasso: lasso.update(fairness=fairness))
    with pytest.raises(TraceFormatError, match="graph.lasso.fairness"):
        from_text(json.dumps(data))


def test_an_edited_fairness_explanation_is_caught_by_replay(starving):
    # show prints how the cycle meets each requirement as the file says it: replay must check the
    # claim, or an edited one is shown under a trace said to be a behaviour of its spec
    fairness = starving.graph["lasso"]["fairness"]
    assert [f["how"] for f in fairness] == ["disabled", "taken", "disabled", "taken"]
    assert _replay(_data(starving)).ok

    def taken_by_p2s_step(lasso):  # Enter(p=p1) said taken where Enter(p=p2) is
        lasso["fairness"][0] = {**lasso["fairness"][0], "how": "taken", "step": 2}

    def disabled_where_enabled(lasso):  # Leave(p=p2) is enabled at step 3 (p2 critical)
        lasso["fairness"][3] = {**lasso["fairness"][3], "how": "disabled", "step": 3}

    def outside_the_cycle(lasso):
        lasso["fairness"][2] = {**lasso["fairness"][2], "step": 0}

    def strength(lasso):
        lasso["fairness"][1] = {**lasso["fairness"][1], "strength": "strong"}

    def dropped(lasso):
        del lasso["fairness"][1]

    def other_requirement(lasso):
        lasso["fairness"][0] = {**lasso["fairness"][0], "requirement": "Try(p=p1)"}

    for edit in (taken_by_p2s_step, disabled_where_enabled, outside_the_cycle, strength, dropped,
                 other_requirement):
        report = _replay(_edit_fairness(starving, edit))
        assert not report.ok and report.error.field == "lasso.fairness", (edit.__name__, report.error)


def test_the_report_of_a_lasso_reproduces_and_re_runs_fixes_with_liveness(tmp_path):
    # test-and-set without fairness starves p1 by stuttering; with fairness it still starves p1:
    # the switch `fair` is no fix. The report's command and its fix run must check liveness: without
    # --liveness they only checked the invariants, which hold, and the fix was reported "holds"
    from kraftcheck.cli.main import cli
    run = CliRunner()
    found = run.invoke(cli, ["check", "--spec", "mutex", "--param", "algorithm=test_and_set", "--param", "fair=false",
                             "--liveness", "--trace-dir", str(tmp_path), "-q"])
    assert found.exit_code == 1, found.output
    (path,) = tmp_path.glob("mutex*.json")
    out = run.invoke(cli, ["trace", "report", str(path), "--with-fix", "fair", "-o", str(tmp_path / "r.md")])
    assert out.exit_code == 0, out.output
    text = (tmp_path / "r.md").read_text()
    command = next(line for line in text.splitlines() if line.startswith("kraftcheck check"))
    assert "--liveness" in command
    fix = next(line for line in text.splitlines() if line.startswith("| fair |") and "kraftcheck check" in line)
    assert "| violated |" in fix and "p1_trying_leads_to_p1_critical" in fix and "--liveness" in fix, fix


LOOP_SPEC = """'''A counter that loops between 0 and 1 unless fix_loop lets it go on to 2; its liveness
predicate raises on x = 2, a state only the fixed configuration reaches.'''
from dataclasses import dataclass

from numba import njit

from kraftcheck import Action, Const, Int, Invariant, Liveness, Predicate, Spec, param


@njit(cache=True)
def up(s, t):
    if s.x != 0:
        return False
    t.x = 1
    return True


@njit(cache=True)
def back(s, t):
    if s.x != 1 or s.fix_loop == 1:
        return False
    t.x = 0
    return True


@njit(cache=True)
def go(s, t):
    if s.x != 1 or s.fix_loop == 0:
        return False
    t.x = 2
    return True


@njit(cache=True)
def in_range(s):
    '''x stays in 0..2.'''
    return s.x <= 2


def reaches_two(v):
    if (v["x"] == 2).any():
        raise ValueError("the predicate fails on x = 2")
    return v["x"] == 2


@dataclass(frozen=True)
class LoopParams:
    fix_loop: bool = param(False, "let the counter go on to 2")


class Loop(Spec):
    name = "loop_fix"
    summary = "a loop a fix switch breaks"
    Params = LoopParams
    check_deadlock = False

    def fields(self):
        return [Int("x", 2), Const("fix_loop", int(self.params.fix_loop))]

    def initial_states(self):
        yield {"x": 0}

    def actions(self):
        return [Action("Up", up), Action("Back", back), Action("Go", go)]

    def invariants(self):
        return [Invariant("in_range", in_range, in_range.__doc__)]

    def liveness(self):
        return [Liveness("reaches_two", Predicate("x is 2", reaches_two), fair=("Up", "Back", "Go"), once=True,
                         doc="the counter eventually reaches 2")]
"""


def test_a_fix_whose_liveness_analysis_fails_has_no_verdict(tmp_path):
    """The fix run of a lasso's report checks liveness; when that analysis stopped on the spec's
    error (its predicate raising on a state only the fix reaches), the report said 'every invariant
    and liveness property holds', though the fix's own command exits 2 with no verdict."""
    from kraftcheck.cli.main import cli
    (tmp_path / "loop.py").write_text(LOOP_SPEC)
    ref = f"{tmp_path / 'loop.py'}:Loop"
    run = CliRunner()
    found = run.invoke(cli, ["check", "--spec", ref, "--liveness", "--engine", "reference",
                             "--trace-dir", str(tmp_path / "t"), "-q"])
    assert found.exit_code == 1, found.output
    (path,) = (tmp_path / "t").glob("*.json")
    out = run.invoke(cli, ["trace", "report", str(path), "--spec", ref, "--with-fix", "fix-loop",
                           "-o", str(tmp_path / "r.md")])
    assert out.exit_code == 0, out.output
    fix = next(line for line in (tmp_path / "r.md").read_text().splitlines() if line.startswith("| fix_loop |"))
    assert "| error |" in fix and "the predicate 'x is 2' raised ValueError" in fix and "holds" not in fix, fix


@pytest.mark.parametrize("algorithm, fair, length, listed", [
    # p1 waits while p2 goes round: 4 states, then Leave(p=p2) back to the second, the loop's first
    ("test_and_set", "true", "4 states (3 actions), then the closing step back into a loop of the last 3", 4),
    # no fairness: p1 tries, then nothing happens
    ("peterson", "false", "2 states (1 action), then stuttering forever in the last", 2),
])
def test_check_and_replay_say_a_lassos_length_alike(tmp_path, algorithm, fair, length, listed):
    """check said 'lasso of 5 states' (the closing step's state, the loop's first again, counted
    twice) where replay and show of its trace said 4 states (3 actions) and a closing edge: one
    wording now, the distinct states, the actions between them, then the closing step or stuttering;
    and the JSON report's depth is that count of states too."""
    from kraftcheck.cli.main import cli
    run = CliRunner()
    checked = run.invoke(cli, ["check", "--no-color", "--spec", "mutex", "--param", f"algorithm={algorithm}",
                               "--param", f"fair={fair}", "--liveness", "--trace-dir", str(tmp_path / "traces"),
                               "--json", str(tmp_path / "r.json")],
                         catch_exceptions=False)
    said = " ".join(checked.output.split())
    assert checked.exit_code == 1 and f": lasso of {length}, written to" in said, checked.output
    numbered = [line for line in checked.output.splitlines() if line[:6].strip().rstrip(".").isdigit()]
    assert len(numbered) == listed, checked.output  # one numbered line per state counted
    (violation,) = json.loads((tmp_path / "r.json").read_text())["violations"]
    assert violation["depth"] == listed and len(violation["actions"]) == (3 + 1 if listed == 4 else 1), violation
    (path,) = (tmp_path / "traces").glob("*.json")
    replayed = run.invoke(trace, ["replay", str(path), "--no-color"], catch_exceptions=False)
    assert replayed.exit_code == 0 and f"valid: lasso of mutex(" in replayed.output, replayed.output
    assert f": {length};" in " ".join(replayed.output.split()), replayed.output
    shown = run.invoke(trace, ["show", str(path), "--no-color"], catch_exceptions=False)
    assert f"counterexample (lasso) of {length}" in " ".join(shown.output.split()), shown.output
