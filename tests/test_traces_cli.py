"""``kraftcheck trace show|export|render|replay`` on a real counterexample."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import networkx as nx
import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from kraftcheck import traces
from kraftcheck.cli.trace_cmd import trace
from kraftcheck.traces.table import trace_text
from kraftcheck.traces.view import TraceView
from traces_support import RUN_OPTIONS, eager_commit_violation


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    model, violation = eager_commit_violation()
    return traces.write_counterexample(model, violation, RUN_OPTIONS, tmp_path_factory.mktemp("t"))


def invoke(*args):
    return CliRunner().invoke(trace, [str(a) for a in args], catch_exceptions=False)


def test_show_ascii_fixed_width_lists_the_changes_step_by_step(trace_file):
    result = invoke("show", trace_file, "--no-color", "--ascii", "--width", "100")
    assert result.exit_code == 0
    out = result.output
    assert out.isascii() and "\x1b[" not in out
    assert all(len(line) <= 100 for line in out.splitlines())
    rows = [line for line in out.splitlines() if line.startswith("|") and line[1:3].strip().isdigit()]
    assert [r.split("|")[1].strip() for r in rows] == ["0", "1", "2", "3", "4", "5"]
    assert "RMPrepare(rm=rm1)" in rows[1] and "rm_state[rm1]: working -> prepared" in rows[1]
    assert "TMCommit" in rows[3] and "tm_state: init -> committed" in rows[3]
    assert "RMRcvCommitMsg(rm=rm1)" in rows[5] and "VIOLATED" in rows[5]
    # unchanged fields are not repeated after the initial state
    assert out.count("tm_state: init\n") <= 1 and "rm_state[rm3]" not in "".join(rows[1:])
    assert "step 5 violates invariant tc_consistent: No resource manager has committed" in out.replace("\n", " ")


def test_show_fits_a_narrow_terminal(trace_file):
    text = trace_text(TraceView(traces.load(trace_file)), width=44, ascii_only=True)
    assert all(len(line) <= 44 for line in text.splitlines())
    assert "-- step 3: TMCommit" in text and "tm_state: init -> committed" in text
    assert "  VIOLATED:\n  tc_consistent" in text


def test_show_full_and_broker_filter(trace_file):
    full = trace_text(TraceView(traces.load(trace_file)), width=120, full=True)
    assert full.count("rm_state[rm3]: working") == 6  # every field at every step
    one = trace_text(TraceView(traces.load(trace_file)), width=120, lane="rm2")
    assert "rm_state[rm2]: working -> aborted" in one and "rm_state[rm1]" not in one
    assert "tm_state: init -> committed" in one  # the main lane stays
    assert invoke("show", trace_file, "--broker", "2", "--width", "120").exit_code == 0
    bad = invoke("show", trace_file, "--broker", "b9")
    assert bad.exit_code == 2 and "its lanes are: global, rm1, rm2, rm3" in bad.output


def test_export_formats(trace_file, tmp_path):
    out = tmp_path / "t.graphml"
    assert invoke("export", trace_file, "--format", "graphml", "-o", out).exit_code == 0
    g = nx.read_graphml(out)
    assert g.number_of_nodes() == 6 and g.nodes["5"]["rm_state[rm1]"] == "committed"
    assert g.edges["2", "3"]["action"] == "TMCommit" and g.graph["spec"] == "two_phase_eager_commit"

    as_json = invoke("export", trace_file, "--format", "json").output
    assert json.loads(as_json) == json.loads(trace_file.read_text())

    dot = invoke("export", trace_file, "--format", "dot").output
    assert dot.startswith("digraph trace {") and dot.rstrip().endswith("}")
    assert 's4 -> s5 [label="RMRcvCommitMsg(rm=rm1)"]' in dot
    node_lines = {line.split()[0]: line for line in dot.splitlines() if line.startswith("  s") and "->" not in line}
    assert ", color=red" in node_lines["s5"] and "red" not in node_lines["s4"]

    mermaid = invoke("export", trace_file, "--format", "mermaid").output
    lines = mermaid.splitlines()
    assert lines[0] == "sequenceDiagram"
    assert "  participant L0 as global" in lines and "  participant L1 as rm1" in lines
    assert "  L1->>L0: 1. RMPrepare(rm=rm1)" in lines       # rm1 sends Prepared to the TM
    assert "  L1->>L0: 2. TMRcvPrepared(rm=rm1)" in lines   # the TM consumes it
    rect = lines.index("  rect rgb(255, 215, 215)")
    assert "RMRcvCommitMsg" in lines[rect + 1] and lines[-1] == "  end"


def _pixels(path):
    return np.asarray(Image.open(path).convert("RGB")).astype(int)


def test_render_png_is_a_real_picture_with_a_red_step(trace_file, tmp_path):
    out = tmp_path / "t.png"
    result = invoke("render", trace_file, "-o", out)
    assert result.exit_code == 0, result.output
    px = _pixels(out)
    assert px.shape[0] > 300 and px.shape[1] > 600
    ink = (px.sum(axis=2) < 600).mean()
    assert 0.005 < ink < 0.5  # drawn on, but not a solid block
    red = (px[:, :, 0] > 150) & (px[:, :, 1] < 90) & (px[:, :, 2] < 90)
    assert red.sum() > 200  # the violating step and the closing line
    rows_with_red = np.nonzero(red.any(axis=1))[0]
    assert rows_with_red.min() > px.shape[0] * 0.6  # red is at the bottom: the last step


def test_render_svg_and_bad_suffix(trace_file, tmp_path):
    out = tmp_path / "t.svg"
    assert invoke("render", trace_file, "-o", out).exit_code == 0
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg")
    bad = invoke("render", trace_file, "-o", tmp_path / "t.gif")
    assert bad.exit_code == 2 and ".svg or .png" in bad.output
    assert not (tmp_path / "t.gif").exists()


def test_replay_exit_codes(trace_file, tmp_path):
    ok = invoke("replay", trace_file, "--no-color")
    said = " ".join(ok.output.split())  # the console wraps lines at its width
    assert ok.exit_code == 0 and "valid: 6 states (5 actions)" in said and "tc_consistent violated at step 5" in said
    data = json.loads(trace_file.read_text())
    next(n for n in data["nodes"] if n["id"] == 3)["state"]["msg_commit"] = False
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(data))
    bad = invoke("replay", tampered, "--no-color", "--width", "200")
    assert bad.exit_code == 1 and "step 3, msg_commit" in bad.output
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    result = invoke("replay", broken)
    assert result.exit_code == 2 and "not valid JSON" in result.output
    assert invoke("replay", tmp_path / "missing.json").exit_code == 2


@pytest.mark.parametrize("option", [("--variant", "flawed"), ("--one-variant",)])
def test_replay_refuses_a_scenario_option_on_a_trace_file(trace_file, option):
    """A scenario's --variant given with a trace file is refused, as show, render, export and
    report refuse it: replay ignored it and said the file was valid (exit 0), a verdict on
    something else than the variant asked for."""
    result = invoke("replay", trace_file, "--quiet", *option)
    assert result.exit_code == 2 and f"{option[0]} applies to scenario files only" in result.output
    assert "valid" not in result.output


def test_trace_group_is_registered_in_the_cli(trace_file):
    from kraftcheck.cli.main import cli
    result = CliRunner().invoke(cli, ["trace", "replay", str(trace_file), "--quiet"])
    assert result.exit_code == 0 and "valid: 6 states (5 actions)" in result.output


# ----------------------------------------------------------------------------------------------
# kraftcheck check: trace files, --dump-graph, --availability


def _check(tmp_path, *args):
    from kraftcheck.cli.main import cli
    return CliRunner().invoke(cli, ["check", "--engine", "reference", "--no-color",
                                    "--trace-dir", str(tmp_path / "traces"), *map(str, args)])


def test_check_writes_a_trace_that_replays(tmp_path):
    result = _check(tmp_path, "--spec", "two_phase_eager_commit")
    assert result.exit_code == 1
    (path,) = (tmp_path / "traces").iterdir()
    assert path.name in result.output.replace("\n", "")
    assert traces.replay(traces.load(path)).ok
    assert traces.load(path).graph["run_options"]["engine"] == "reference"


def test_check_dump_graph_and_its_limit(tmp_path):
    out = tmp_path / "g.graphml"
    result = _check(tmp_path, "--spec", "two_phase", "--dump-graph", out)
    assert result.exit_code == 0 and "288 states" in result.output
    assert nx.read_graphml(out).number_of_nodes() == 288
    out.unlink()
    result = _check(tmp_path, "--spec", "two_phase", "--dump-graph", out, "--graph-limit", "10")
    assert result.exit_code == 2 and "more than 10 states" in result.output and not out.exists()


def test_check_availability_needs_the_spec_to_define_it(tmp_path):
    result = _check(tmp_path, "--spec", "two_phase", "--availability")
    assert result.exit_code == 2 and "does not say what 'available' means" in result.output


def test_check_json_includes_the_graph_analyses(tmp_path):
    out = tmp_path / "g.graphml"
    report_path = tmp_path / "report.json"
    result = _check(tmp_path, "--brokers", "2", "--min-isr", "1", "--lossy-shutdowns", "0", "--isr-shrinks", "0",
                    "--min-isr-changes", "0", "--availability", "--dump-graph", out, "--json", report_path)
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    assert report["result"] == "holds"
    assert report["state_graph"]["states"] == report["distinct_states"]
    variants = {v["variant"]: v for v in report["availability"]["variants"]}
    assert set(variants) == {"recovery=none", "recovery=balanced", "recovery=aggressive"}
    assert report["availability"]["available_means"] == "the partition has a leader"


def test_a_vouched_trace_is_explained_in_its_specs_words(trace_file, tmp_path):
    # show and report print the violated check's explanation; the file's is anyone's text, and
    # replay does not compare it (a spec may reword a doc between versions): once the replay vouches
    # for the trace, the explanation printed is the spec's
    data = json.loads(trace_file.read_text())
    data["graph"]["violation"]["doc"] = "EVERYTHING IS FINE"
    data["graph"]["check_docs"]["tc_consistent"] = "EVERYTHING IS FINE"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    assert invoke("replay", edited, "--quiet").exit_code == 0
    shown = invoke("show", edited, "--no-color", "--width", "200").output
    assert "EVERYTHING IS FINE" not in shown
    assert "tc_consistent: No resource manager has committed while another has aborted" in shown
    from kraftcheck.cli.main import cli
    report = CliRunner().invoke(cli, ["trace", "report", str(edited)]).output
    assert "EVERYTHING IS FINE" not in report
    assert "The property: No resource manager has committed while another has aborted" in report
    exported = json.loads(invoke("export", edited, "--format", "json").output)
    assert "EVERYTHING IS FINE" not in json.dumps(exported)


# ----------------------------------------------------------------------------------------------
# trace report: the commands it prints run as they read, pasted into a shell


def test_reports_commands_are_quoted_for_a_shell(tmp_path):
    """The reproduction command and the --with-fix commands joined their words with spaces: a
    --spec path with a space, or a text parameter with a space or a shell character, gave a command
    that did not run (a stray word) or ran something else (';touch pwned'). Each printed command is
    now run by bash as a user pastes it, and finds what the trace says."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from kraftcheck.cli.main import cli

    where = tmp_path / "my specs"
    where.mkdir()
    shutil.copy(Path(__file__).parent / "label_spec.py", where / "label spec.py")
    ref = f"{where / 'label spec.py'}:Labelled"
    label = "a b;touch pwned $(touch pwned2) 'q\""
    run = CliRunner()
    found = run.invoke(cli, ["check", "--spec", ref, "--param", f"label={label}", "--engine", "reference",
                             "--trace-dir", str(tmp_path / "t")], catch_exceptions=False)
    assert found.exit_code == 1, found.output
    (trace_path,) = (tmp_path / "t").iterdir()
    result = run.invoke(cli, ["trace", "report", str(trace_path), "--spec", ref, "--with-fix", "fix-stop-early",
                              "--fix-time-limit", "60"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    command = next(line for line in lines if line.startswith("kraftcheck check"))
    fix_command = next(line for line in lines if line.startswith("| fix_stop_early |"))
    fix_command = fix_command.split(" | ")[-1].rstrip(" |").replace("\\|", "|")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    ran = subprocess.run(["bash", "-c", command + " --engine reference --json report.json"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert [v["invariant"] for v in report["violations"]] == ["below_top"]
    assert report["params"]["label"] == label
    assert report["violations"][0]["actions"] == ["Up"] * len(label)
    fixed = subprocess.run(["bash", "-c", fix_command + " --engine reference"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "| fix_stop_early | holds |" in result.output
    assert not list(tmp_path.glob("pwned*"))
    show = next(line for line in lines if line.startswith("kraftcheck trace show"))
    assert subprocess.run(["bash", "-c", show], cwd=tmp_path, env=env, capture_output=True,
                          timeout=300).returncode == 0


def test_report_of_a_scenario_says_it_is_not_a_counterexample():
    """A scenario has no recorded violation, and report refused every one with 'the trace violates
    nothing', also a variant whose checks fail (kip903's flawed variant breaks three)."""
    from kraftcheck.cli.main import cli
    from pathlib import Path
    scenario = Path(__file__).resolve().parents[1] / "traces" / "scenarios" / "kip903_stale_alter_partition.yaml"
    result = CliRunner().invoke(cli, ["trace", "report", str(scenario), "--variant", "flawed"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "violates nothing" not in said, said
    assert "is a scenario, not a counterexample" in said and "kraftcheck check" in said, said
