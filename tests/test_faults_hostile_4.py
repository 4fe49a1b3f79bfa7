"""Edges of the files kraftcheck reads and writes: inputs that are not regular files (a FIFO, a
device, a directory), each refused before any work with what it is and what to give (a FIFO waited
for a writer without end, a device was said not to exist); a full disk under the trace directory
(the run left the directory it made, empty). Each case failed before its fix."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner


def _cli(*args):
    from kraftcheck.cli.main import cli
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_ci_says_what_a_manifest_that_is_not_a_file_is(tmp_path, monkeypatch):
    """kraftcheck ci /dev/null (or a FIFO) said 'manifest /dev/null does not exist'."""
    fifo = tmp_path / "kraftcheck.toml"
    os.mkfifo(fifo)
    for given, kind in (("/dev/null", "a character device"), (tmp_path, "a directory"), (fifo, "a pipe (FIFO)")):
        result = _cli("ci", given)
        assert result.exit_code == 2 and f"manifest {given} is {kind}, not a file" in result.output, result.output
        assert "does not exist" not in result.output and "name the manifest's TOML file" in result.output
    monkeypatch.chdir(tmp_path)  # found, not named: neither passed over nor said to be missing
    result = _cli("ci")
    assert result.exit_code == 2 and "kraftcheck.toml in this directory is a pipe (FIFO)" in result.output
    assert "does not exist" in _cli("ci", tmp_path / "none.toml").output


# every command that reads a file the user names, in one process: a reader that waits on the
# FIFO makes the whole script time out
READERS = '''
import sys
from click.testing import CliRunner
from kraftcheck.cli.main import cli
fifo, manifest = sys.argv[1], sys.argv[2]
for args in (["trace", "show", fifo], ["trace", "show", fifo + ".json"], ["trace", "show", fifo + ".yaml"],
             ["trace", "export", fifo + ".json", "--format", "json"],
             ["trace", "render", fifo + ".json", "-o", fifo + ".svg"], ["trace", "report", fifo + ".json"],
             ["trace", "replay", fifo + ".json"], ["trace", "replay", fifo + ".yaml"], ["sweep", fifo],
             ["ci", manifest, "--baseline", fifo], ["check", "--spec", fifo + ".py:Spec"]):
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    print(result.exit_code, " ".join(args[:2]), "|", result.output.strip().replace(chr(10), " "))
'''


def test_every_reader_refuses_a_fifo_rather_than_wait_for_its_writer(tmp_path):
    """trace show (export, render, report, replay), sweep's matrix, ci's baseline, a scenario and a
    spec file given as a FIFO waited for a writer for ever."""
    fifo = tmp_path / "input"
    for suffix in ("", ".json", ".yaml", ".py"):
        os.mkfifo(f"{fifo}{suffix}")
    manifest = tmp_path / "kraftcheck.toml"
    manifest.write_text('[checks.jug]\nspec = "two_phase"\nexpect = "holds"\n')
    out = subprocess.run([sys.executable, "-c", READERS, str(fifo), str(manifest)], capture_output=True,
                         text=True, timeout=60)
    lines = out.stdout.splitlines()
    assert len(lines) == 11, out.stdout + out.stderr
    for line in lines:
        assert line.startswith("2 ") and "is a pipe (FIFO), not a" in line, line
    assert not (tmp_path / "input.svg").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input", "input.json", "input.py", "input.yaml",
                                                          "kraftcheck.toml"]


def test_a_regular_file_is_read_to_its_limit_whatever_size_it_says(tmp_path):
    """A regular file's stated size can be wrong (/proc's say 0, a file may grow as it is read):
    past the limit the reader refuses it rather than read on."""
    from kraftcheck.checker.files import read_at_most
    assert read_at_most("/proc/self/maps", 16) is None  # says 0, holds more
    small = tmp_path / "small"
    small.write_bytes(b"12345")
    assert read_at_most(small, 4) is None and read_at_most(small, 5) == b"12345"
    with pytest.raises(OSError, match=r"^it is a directory, not a regular file; name the file itself$"):
        read_at_most(tmp_path, 5)  # no word of a command's output, which only a pipe or a device may be


# ----------------------------------------------------------------------------------------------
# a full disk under the trace directory


def _fills_up(path, data):
    """atomic_write on a full disk: its folders and its temporary file are made, the bytes refused."""
    from kraftcheck.checker import files

    def refused(tmp):
        raise OSError(errno.ENOSPC, "No space left on device")
    return files.atomic_write_with(path, refused)


def test_a_trace_dir_a_full_disk_left_empty_is_removed_one_that_was_there_stays(tmp_path, monkeypatch):
    """A run whose every trace the disk refused left the --trace-dir it made, empty (exit 1, the
    violation said). Only what the run made goes: a folder that was there before stays."""
    monkeypatch.setattr("kraftcheck.pipeline.atomic_write", _fills_up)
    made = tmp_path / "new" / "traces"
    result = _cli("check", "--spec", "die_hard", "--no-color", "--trace-dir", made)
    assert result.exit_code == 1 and "was not written to" in result.output and "the disk is full" in result.output
    assert list(tmp_path.iterdir()) == [], "the run left what it made"
    there = tmp_path / "there"
    there.mkdir()
    assert _cli("check", "--spec", "die_hard", "--no-color", "--trace-dir", there).exit_code == 1
    assert there.is_dir() and list(there.iterdir()) == []


def test_a_write_refused_removes_only_the_folders_it_made_and_those_only_while_empty(tmp_path):
    from kraftcheck.checker.files import atomic_write, atomic_write_with
    atomic_write(tmp_path / "a" / "kept.json", "{}")
    with pytest.raises(OSError):
        _fills_up(tmp_path / "a" / "b" / "c" / "t.json", "{}")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "kept.json"]

    def another_writer_meanwhile(tmp):  # a file of another run's in a folder this write made
        (tmp_path / "d" / "other.json").write_text("{}")
        raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(OSError):
        atomic_write_with(tmp_path / "d" / "e" / "t.json", another_writer_meanwhile)
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["other.json"]


# ----------------------------------------------------------------------------------------------
# --availability and --liveness with --dump-graph past --graph-limit


@pytest.mark.parametrize("analyses", [("--liveness",), ("--availability", "--liveness")])
def test_analyses_stopped_by_the_dumps_graph_limit_say_so_once_with_what_to_do(tmp_path, analyses):
    """Past --graph-limit the run stopped (exit 2, no graph file) with two errors: '--availability
    and --liveness need every state; the exploration stopped early (stopped at --graph-limit 10 ...)',
    naming both whichever was given and not how to run them, then the dump's refusal. Now one error
    names the limit, the analyses given, and the two ways out (they have no limit of their own)."""
    graph, report = tmp_path / "g.graphml", tmp_path / "r.json"
    result = _cli("check", "--spec", "mutex", *analyses, "--dump-graph", graph, "--graph-limit", "10", "--json",
                  report, "--trace-dir", tmp_path / "t", "--no-color")
    errors = [line for line in result.output.splitlines() if line.startswith("kraftcheck: error:")]
    assert result.exit_code == 2 and len(errors) == 1, result.output
    asked = " and ".join(analyses)
    assert "has more than 10 states (--graph-limit 10)" in errors[0]
    assert f"; {asked}, which need{'' if len(analyses) > 1 else 's'} every state, did not run: raise --graph-limit, " \
           f"or leave out --dump-graph" in errors[0], errors[0]
    assert not graph.exists() and not (tmp_path / "t").exists()
    found = json.loads(report.read_text())
    assert found["result"] == "error" and found["error"] in errors[0] and "liveness" not in found


# ----------------------------------------------------------------------------------------------
# a sweep whose matrix makes more configurations than anyone runs


def test_a_matrix_of_too_many_configurations_is_refused_before_any_is_built():
    """A [vary] table of seven 5-value parameters (78,125 configurations) was built and checked one
    configuration at a time, for minutes and with no word, before any ran (then each a process)."""
    from kraftcheck.checker.errors import UsageError
    from kraftcheck.sweep import matrix
    counts = {k: [0, 1, 2, 3, 4] for k in ("lossy_shutdowns", "lossless_shutdowns", "clean_shutdowns", "fences",
                                           "isr_shrinks", "min_isr_changes", "preferred_elections")}
    with pytest.raises(UsageError, match=r"the matrix makes 78,125 configurations \(5 lossy_shutdowns x .*more than "
                                         r"the 10,000 a sweep runs.*vary fewer parameters or values"):
        matrix.build("kafka", {}, [], counts)
    assert len(matrix.build("two_phase", {}, [("a", {}), ("b", {})], {"rm": list(range(1, 31))})) == 60


# ----------------------------------------------------------------------------------------------
# a picture of a trace too long to draw


LONG_PATH_SPEC = '''
from dataclasses import dataclass
from numba import njit
from kraftcheck.checker.spec import Action, Const, Int, Invariant, Spec, param


@njit(cache=True)
def inc(s, t):
    if s.c < s.top:
        t.c = s.c + 1
        return True
    return False


@njit(cache=True)
def below(s):
    return s.c < s.top


@dataclass(frozen=True)
class LongPathParams:
    top: int = param(1500, "the count that violates", minimum=1, maximum=1500)


class LongPath(Spec):
    name = "long_path"
    summary = "one path of top + 1 states"
    Params = LongPathParams

    def fields(self):
        return [Int("c", self.params.top, doc="the count"), Const("top", self.params.top)]

    def initial_states(self):
        yield {"c": 0}

    def actions(self):
        return [Action("Inc", inc)]

    def invariants(self):
        return [Invariant("below", below, "below top")]
'''


def test_a_trace_too_long_to_draw_is_refused_before_drawing(tmp_path):
    """trace render drew any trace: 3,000 steps took 0.85 GB and 19 s, a simulated trace of 100,000
    the machine's memory. Past about 1,000 steps (or a PNG's pixels at its --dpi) it is refused, exit
    2, saying what shows a trace of any length; a short one at a high --dpi as a PNG too."""
    (tmp_path / "long_path.py").write_text(LONG_PATH_SPEC)
    spec = f"{tmp_path / 'long_path.py'}:LongPath"
    assert _cli("check", "--spec", spec, "--trace-dir", tmp_path / "t", "-q").exit_code == 1
    (trace,) = (tmp_path / "t").glob("*.json")
    for picture in ("p.svg", "p.png"):
        result = _cli("trace", "render", trace, "-o", tmp_path / picture, "--spec", spec)
        assert result.exit_code == 2, result.output
        assert "this trace's 1,501 steps would be" in result.output and "trace show and trace export" in result.output
        assert not (tmp_path / picture).exists()
    result = _cli("trace", "export", trace, "--format", "mermaid", "--spec", spec)
    assert result.exit_code == 0 and result.output.count("Inc") >= 1500
    # 301 steps, about 130 inches: drawn as an SVG or a 150 dpi PNG, but 600 dpi makes 3,000 x 78,000 pixels
    assert _cli("check", "--spec", spec, "--param", "top=300", "--trace-dir", tmp_path / "s", "-q").exit_code == 1
    (trace,) = (tmp_path / "s").glob("*.json")
    result = _cli("trace", "render", trace, "-o", tmp_path / "p.png", "--dpi", "600", "--spec", spec)
    assert result.exit_code == 2 and "a PNG of this trace's 301 steps at 600 dpi would be" in result.output
    assert "give a lower --dpi, or write an .svg" in result.output and not (tmp_path / "p.png").exists()


# ----------------------------------------------------------------------------------------------
# a scenario of nested YAML aliases ("billion laughs")


def _laughs(levels: int) -> str:
    anchors = ['&a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    anchors += [f"&a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return f"spec: two_phase\nsteps: [TMCommit]\ndescription: [{', '.join(anchors)}]\n"


def test_a_scenario_of_nested_yaml_aliases_is_refused_not_expanded(tmp_path):
    """Nine lines of nested aliases load at once as shared lists, then held 387 million values: trace
    show took 50 s and 6 GB to put the description into words, and exited 0; one level more, the
    machine's memory. A scenario of more than a million values, aliases counted where used, is refused;
    an alias used a few times is as before."""
    from kraftcheck.traces.errors import ScenarioError
    from kraftcheck.traces.scenario import load_scenario
    bomb = tmp_path / "laughs.yaml"
    bomb.write_text(_laughs(7))  # 4.8 million values: quick to expand, past the limit
    with pytest.raises(ScenarioError, match="holds more than 1,000,000 values, YAML aliases"):
        load_scenario(bomb)
    result = _cli("trace", "show", bomb)
    assert result.exit_code == 2 and "holds more than 1,000,000 values" in result.output
    shared = tmp_path / "shared.yaml"
    shared.write_text("spec: two_phase\nparams: &p {rm: 2}\nvariants:\n  a: {params: *p}\n  b: {params: *p}\n"
                      "steps: [TMCommit]\n")
    assert load_scenario(shared).variants["b"]["params"] == {"rm": 2}


def test_a_sweep_tables_cells_keep_their_columns_whatever_their_text():
    """A row named 'kip|fixed' in a matrix file, or a message saying 'one of peterson|test_and_set',
    split its markdown cell in two, shifting every column after it; a line break ended the row."""
    import re
    from kraftcheck.sweep import matrix
    from kraftcheck.sweep.table import Row, markdown, row_from_report
    (config,) = matrix.build("two_phase", {}, [("kip|fixed\nrow", {})], {})
    rows = [row_from_report(config, None, 1.0, "refused: algorithm must be one of peterson|test_and_set\n(see)"),
            Row("plain", "rm=3", "holds", distinct_states=288, depth=11)]
    lines = markdown(rows).splitlines()
    assert len(lines) == 4 and all(len(re.findall(r"(?<!\\)\|", line)) == 6 for line in lines), lines
    assert "kip\\|fixed row" in lines[2] and "peterson\\|test_and_set (see)" in lines[2]


# ----------------------------------------------------------------------------------------------
# a checkpoint whose manifest is not a file


MANIFEST_READ = '''
import resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))  # a regression: MemoryError, not the OOM killer
from kraftcheck.checker.errors import KraftcheckError
from kraftcheck.checker.explore.checkpoint import read_manifest
for directory in sys.argv[1:]:
    try:
        read_manifest(Path(directory))
    except KraftcheckError as e:
        print(e)
'''


def test_a_checkpoint_manifest_that_is_a_fifo_or_a_device_is_refused(tmp_path):
    """--resume DIR whose checkpoint.json was a FIFO waited for a writer for ever; one linked to
    /dev/zero was read to the end of memory (MemoryError, said as kraftcheck's bug). Both are a
    checkpoint that cannot be read, exit 2, as a damaged one is."""
    fifo, device = tmp_path / "fifo", tmp_path / "device"
    fifo.mkdir()
    device.mkdir()
    os.mkfifo(fifo / "checkpoint.json")
    (device / "checkpoint.json").symlink_to("/dev/zero")
    out = subprocess.run([sys.executable, "-c", MANIFEST_READ, str(fifo), str(device)], capture_output=True,
                         text=True, timeout=60)
    said = out.stdout.splitlines()
    assert len(said) == 2, out.stdout + out.stderr
    assert "is not a readable checkpoint (it is a pipe (FIFO), not a regular file" in said[0]
    assert "is not a readable checkpoint (it is a character device, not a regular file" in said[1]


def test_a_sweep_table_inside_a_run_directory_is_refused_before_any_run(tmp_path, monkeypatch):
    """sweep -o OUT/01-rm=1/report.json replaced that configuration's JSON report with the table,
    and a table left in a run directory went with the next sweep's emptying of it, in silence
    (ci refuses its outputs there)."""
    monkeypatch.chdir(tmp_path)
    table = tmp_path / "kraftcheck-sweep" / "01-rm=1" / "report.json"
    result = _cli("sweep", "--spec", "two_phase", "--vary", "rm=1,2", "-o", table)
    assert result.exit_code == 2 and f"--output {table} is inside configuration rm=1's run directory" in result.output
    assert not (tmp_path / "kraftcheck-sweep").exists()
