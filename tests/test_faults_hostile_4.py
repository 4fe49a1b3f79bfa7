"""Inputs that are not regular files (a FIFO, a device, a directory), each refused before any work
with what it is and what to give: a FIFO waited for a writer without end, a device was said not to
exist. Each case failed before its fix."""

from __future__ import annotations

import os
import subprocess
import sys

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
