"""Every output location is checked before any work starts: one clear line, exit 2, nothing
written, for every command that writes files."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from kraftcheck.cli.main import cli


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def one_error_line(result):
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "some-existing-file"
    path.write_text("not a directory\n")
    return path


def test_the_check_leaves_nothing_behind(tmp_path):
    before = set(os.listdir(tmp_path))
    result = run("check", "--spec", "two_phase", "--param", "rm=2", "--trace-dir", str(tmp_path / "new" / "traces"),
                 "--json", str(tmp_path / "new2" / "r.json"))
    assert result.exit_code == 0
    # the run held: no trace written, so no trace directory created; the report's directory was
    created = set(os.listdir(tmp_path)) - before
    assert created == {"new2"}
    assert not any(name.startswith(".kraftcheck-probe") for name in os.listdir(tmp_path / "new2"))
    assert json.loads((tmp_path / "new2" / "r.json").read_text())["result"] == "holds"


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    directory = tmp_path_factory.mktemp("traces")
    result = run("check", "--spec", "two_phase_eager_commit", "--trace-dir", str(directory), "--json",
                 str(directory / "r.json"))
    assert result.exit_code == 1
    return json.loads((directory / "r.json").read_text())["violations"][0]["trace_file"]


@pytest.mark.parametrize("command", [["export", "--format", "json"], ["render"]])
@pytest.mark.parametrize("output,message", [
    ("/proc/nope.out", "does not accept new files"),
    ("{a_file}/x.png", "is not a directory"),
])
def test_trace_commands_refuse_a_bad_output(trace_file, a_file, command, output, message):
    output = output.format(a_file=a_file)
    result = run("trace", *command, trace_file, "-o", output)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "--output" in line and message in line


def test_an_output_naming_the_spec_file_a_check_reads_is_refused(tmp_path):
    """'check --spec mine.py:Class --json mine.py' wrote the report over the spec's source (exit 1
    or 0, the spec gone): refused before any work, the file untouched."""
    import shutil
    from pathlib import Path

    spec = tmp_path / "my_jugs.py"
    shutil.copy(Path(__file__).parent / "even_jugs.py", spec)
    before = spec.read_text()
    for option in ("--json", "--dump-graph"):
        result = run("check", "--spec", f"{spec}:EvenJugs", "--param", "big=6", option, str(spec))
        assert result.exit_code == 2, result.output
        assert f"{option} {spec} is the spec file this command reads" in one_error_line(result)
        assert spec.read_text() == before


# every option that writes a file: (command, option)
WRITING_OPTIONS = [(["check"], "--json"), (["check"], "--trace-dir"), (["check"], "--dump-graph"),
                   (["ci"], "--junit"), (["ci"], "--progress-json"), (["sweep"], "--output"),
                   (["trace", "export"], "--output"), (["trace", "render"], "--output"),
                   (["trace", "report"], "--output")]


@pytest.mark.parametrize("command, option", WRITING_OPTIONS)
def test_every_writing_options_help_says_a_missing_directory_is_created(command, option):
    """An output into a missing directory creates it, and no --help said so (a user could not tell
    -o out/r.md from a typo in out/); now each option's help does."""
    import click

    group = cli
    for name in command:
        group = group.get_command(click.Context(group), name)
    (opt,) = [o for o in group.params if isinstance(o, click.Option) and option in o.opts]
    assert "created" in " ".join(opt.help.split()), opt.help


def test_progress_json_into_a_missing_directory_creates_it(tmp_path):
    """--progress-json opened its file without the directory the check before it accepted, unlike
    every other output: the gate refused to start. It is now made, as for the others."""
    from kraftcheck.ci.progress import ProgressStream

    path = tmp_path / "no" / "such" / "p.ndjson"
    stream = ProgressStream(str(path))
    stream({"event": "started"})
    stream.close()
    assert json.loads(path.read_text())["event"] == "started"
