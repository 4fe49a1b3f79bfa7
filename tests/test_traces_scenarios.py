"""Authored scenarios: replayed step by step, judged against their expected outcome."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraftcheck import traces
from kraftcheck.cli.trace_cmd import trace
from kraftcheck.specs import spec_names
from kraftcheck.traces.errors import ScenarioError
from kraftcheck.traces.scenario import is_scenario_file, load_scenario, run_scenario

SHIPPED = Path(traces.__file__).parent / "scenarios"

EAGER_STORY = """\
# the TM commits after the first Prepared; a second RM may still abort
name: eager-commit
spec: two_phase_eager_commit
params: {rm: 2}
variants:
  flawed: {expect: {violates: [tc_consistent]}}
steps:
  - {action: RMPrepare, params: {rm: rm1}, note: "rm1 votes yes"}
  - TMRcvPrepared(rm=rm1)
  - TMCommit
  - RMChooseToAbort(rm=rm2)
  - RMRcvCommitMsg(rm=rm1)
"""


@pytest.fixture
def story(tmp_path):
    path = tmp_path / "eager.yaml"
    path.write_text(EAGER_STORY)
    return path


def test_flawed_story_reaches_the_violation(story):
    run = run_scenario(load_scenario(story))
    assert run.ok, run.problems
    assert run.blocked_at is None and run.first_failure == {"tc_consistent": 5}
    g = run.graph
    assert g.graph["kind"] == "scenario" and g.nodes[1]["note"] == "rm1 votes yes"
    assert traces.replay(g).ok  # a scenario's graph is a trace like any other


def test_correct_protocol_refuses_the_early_commit(tmp_path):
    text = EAGER_STORY.replace("spec: two_phase_eager_commit", "spec: two_phase").replace(
        "flawed: {expect: {violates: [tc_consistent]}}", "fixed: {expect: {blocked_at: 3}}")
    path = tmp_path / "fixed.yaml"
    path.write_text(text)
    run = run_scenario(load_scenario(path))
    assert run.ok, run.problems
    assert run.blocked_at == 3 and run.blocked_action == "TMCommit"
    assert "blocked at step 3: TMCommit is not enabled" in run.outcome()


def test_unmet_expectation_is_reported(tmp_path, story):
    path = tmp_path / "wrong.yaml"
    path.write_text(EAGER_STORY.replace("violates: [tc_consistent]", "holds: true"))
    run = run_scenario(load_scenario(path))
    assert not run.ok and "tc_consistent fails at step 5" in run.problems[0]
    result = CliRunner().invoke(trace, ["replay", str(path), "--quiet", "--no-color"])
    assert result.exit_code == 1 and "NOT as expected" in result.output
    result = CliRunner().invoke(trace, ["replay", str(story), "--quiet", "--no-color"])
    assert result.exit_code == 0 and "as expected" in result.output


@pytest.mark.parametrize("edit, step, field, message", [
    (("TMCommit", "TMKommit"), 3, "action", "no action 'TMKommit'"),
    (("TMRcvPrepared(rm=rm1)", "TMRcvPrepared(rm=rm5)"), 2, "params.rm", "'rm5' is not one of rm1, rm2"),
    (("TMRcvPrepared(rm=rm1)", "TMRcvPrepared(r=rm1)"), 2, "params.r", "has no parameter 'r'"),
])
def test_malformed_steps_are_named(tmp_path, edit, step, field, message):
    path = tmp_path / "bad.yaml"
    path.write_text(EAGER_STORY.replace(*edit))
    with pytest.raises(ScenarioError) as info:
        run_scenario(load_scenario(path))
    assert (info.value.step, info.value.field) == (step, field) and message in str(info.value)


def test_scenario_file_is_data_only(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("spec: !!python/object/apply:os.system ['echo owned']\nsteps: [TMCommit]\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(path)


def test_json_scenarios_are_recognised(tmp_path):
    import yaml
    path = tmp_path / "story.json"
    path.write_text(json.dumps(yaml.safe_load(EAGER_STORY)))
    assert is_scenario_file(path)
    assert run_scenario(load_scenario(path)).ok


def test_show_and_render_accept_a_scenario(story, tmp_path):
    shown = CliRunner().invoke(trace, ["show", str(story), "--no-color", "--ascii", "--width", "100"])
    assert shown.exit_code == 0
    assert "rm1 votes yes" in shown.output and "eager-commit [flawed]: all 5 steps ran" in shown.output
    out = tmp_path / "s.png"
    assert CliRunner().invoke(trace, ["render", str(story), "-o", str(out)]).exit_code == 0
    assert out.stat().st_size > 10_000
    bad = CliRunner().invoke(trace, ["show", str(story), "--variant", "nope"])
    assert bad.exit_code == 2 and "this scenario has: flawed" in bad.output


# ----------------------------------------------------------------------------------------------
# the two Kafka stories shipped in traces/scenarios/



def test_the_kafka_spec_is_registered():
    """The scenarios below run the Kafka model: without it they must fail, not be skipped."""
    assert "kafka" in spec_names()



@pytest.mark.parametrize("name, flawed_failures", [
    ("kip966_last_replica_standing.yaml", {"acked_writes_survive": 15, "leader_holds_committed_log": 15}),
    ("kip903_stale_alter_partition.yaml", {"isr_members_have_current_broker_epoch": 15,
                                           "isr_members_hold_committed_log": 15, "acked_writes_survive": 17}),
])
def test_shipped_kafka_story_loses_data_only_under_the_flawed_setting(name, flawed_failures):
    scenario = load_scenario(SHIPPED / name)
    assert set(scenario.variants) == {"flawed", "fixed", "shipped"}
    assert "seeds/" in (SHIPPED / name).read_text().split("\nname:")[0]  # the comment cites the seed
    runs = {v: run_scenario(scenario, v) for v in scenario.variants}
    for variant, run in runs.items():
        assert run.ok, (variant, run.problems)
    flawed = runs["flawed"]
    assert flawed.blocked_at is None
    for check, step in flawed_failures.items():
        assert flawed.first_failure[check] == step
    for variant in ("fixed", "shipped"):
        assert runs[variant].blocked_at is None and runs[variant].first_failure == {}
        assert traces.replay(runs[variant].graph).ok
    assert traces.replay(flawed.graph).ok


def test_shipped_stories_replay_from_the_command_line():
    for path in sorted(SHIPPED.glob("*.yaml")):
        result = CliRunner().invoke(trace, ["replay", str(path), "--quiet", "--no-color", "--width", "200"])
        assert result.exit_code == 0, result.output
        variants = len(load_scenario(path).variants)
        assert result.output.count("as expected") == variants and "NOT" not in result.output


def test_initial_state_must_exist(tmp_path):
    path = tmp_path / "init.yaml"
    path.write_text(EAGER_STORY + "initial: 3\n")
    with pytest.raises(ScenarioError, match="1 initial state"):
        run_scenario(load_scenario(path))


def shipped_runs_as_expected(name):
    """Every variant of a shipped finding's scenario, each meeting its own expectation and
    replaying as a trace: variant name -> run."""
    scenario = load_scenario(SHIPPED / name)
    runs = {v: run_scenario(scenario, v) for v in scenario.variants}
    for variant, run in runs.items():
        assert run.ok, (variant, run.problems)
        assert traces.replay(run.graph).ok
    return runs


def test_f3_publish_window_story_loses_the_write_unless_a_fix_closes_the_window():
    """traces/scenarios/f3_publish_window.yaml (docs/findings.md F3), every variant as expected."""
    runs = shipped_runs_as_expected("f3_publish_window.yaml")
    for variant in ("flawed", "shipped"):
        assert runs[variant].blocked_at is None
        assert runs[variant].first_failure["elr_members_hold_committed_log"] == 7
        assert runs[variant].first_failure["acked_writes_survive"] == 10
    for variant in ("config-first", "min-isr-in-partition-state"):
        assert runs[variant].blocked_at == 7 and runs[variant].first_failure == {}


def test_f5_replay_story_loses_the_write_only_where_the_replay_drops_the_expansion():
    """traces/scenarios/f5_replay_drops_expansion.yaml (docs/findings.md F5), every variant as expected."""
    runs = shipped_runs_as_expected("f5_replay_drops_expansion.yaml")
    for variant in ("flawed", "kafka-4.x", "kafka-4.0"):  # kip-966, and Kafka's code with and without ELR
        assert runs[variant].blocked_at is None
        assert runs[variant].first_failure == {
            "leader_maximal_isr_covers_electable": 10, "isr_members_hold_committed_log": 10,
            "leader_holds_committed_log": 11, "acked_writes_survive": 11}, variant
    assert {v: runs[v].blocked_at for v in ("atomic", "await-metadata", "ignore-replayed-change")} == {
        "atomic": 9, "await-metadata": 6, "ignore-replayed-change": None}
    assert all(runs[v].first_failure == {} for v in ("atomic", "await-metadata", "ignore-replayed-change"))
