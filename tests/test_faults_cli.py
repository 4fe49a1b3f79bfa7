"""Bad inputs and hostile outputs at the command line: each refused with one clear line and exit 2
before any check runs, and an output never harms what it writes to (a device, a FIFO, a symlink,
standard output). Ctrl-C and SIGTERM end a run with 130 from the moment kraftcheck's code runs.

Refusals are asserted to come before any work by what work would leave: the check's header line
("checking ..."), a ci run directory, a written file."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraftcheck.checker.files import descriptor_of, output_kind, write_output
from kraftcheck.cli.main import cli
from kraftcheck.pipeline import worker_threads

DIE_HARD = ["check", "--spec", "die_hard", "--no-color"]  # 16 states: violated (exit 1) in a blink


def run(*args, env=None):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env)


def refused(result, *words):
    """Exit 2 with one error line naming ``words``, no traceback, and no check begun."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, result.stderr
    for word in words:
        assert word in errors[0], errors[0]
    assert "checking " not in result.output, "the check began before the refusal"
    return errors[0]


# -- outputs: special files, symlinks, standard output -------------------------------------------------

def test_a_report_into_a_fifo_is_written_into_it_and_the_fifo_stays(tmp_path):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    # held open for reading and writing: the report's writer finds a reader, its few KiB wait in the
    # pipe's buffer, and a run that replaced the FIFO instead leaves it empty (no thread, no hang)
    held = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        result = run(*DIE_HARD, "--json", str(fifo), "--trace-dir", str(tmp_path / "traces"))
        received = b""
        while True:
            try:
                chunk = os.read(held, 1 << 16)
            except BlockingIOError:
                break
            received += chunk
    finally:
        os.close(held)
    assert result.exit_code == 1, result.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(received)["result"] == "violated"


def test_a_report_through_a_symlink_writes_its_file_and_keeps_the_link(tmp_path):
    target = tmp_path / "reports" / "latest.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to(target)
    result = run(*DIE_HARD, "-q", "--json", str(link), "--trace-dir", str(tmp_path / "traces"))
    assert result.exit_code == 1, result.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["result"] == "violated"
    assert [p.name for p in target.parent.iterdir()] == ["latest.json"]  # no temporary file left


# a symlink of the test's own stands for /dev/stdout (-> /proc/self/fd/1): a regression would
# replace it, not the system's
@pytest.mark.parametrize("path", ["-", "{tmp}/fd1.json"])
def test_a_report_to_standard_output_goes_there_and_the_summary_to_stderr(tmp_path, path):
    link = tmp_path / "fd1.json"
    link.symlink_to("/proc/self/fd/1")
    result = run(*DIE_HARD, "--json", path.format(tmp=tmp_path), "--trace-dir", str(tmp_path / "traces"))
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["result"] == "violated"  # stdout holds the report and nothing else
    assert "violated" in result.stderr
    assert link.is_symlink()


def device(tmp_path: Path, name: str, major: int, minor: int) -> Path:
    """A device node: as root one of the test's own (a regression replacing it then harms no
    system file), else the system's, which a user cannot replace anyway."""
    if os.geteuid() != 0:
        return Path("/dev") / name
    path = tmp_path / name
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(major, minor))
    return path


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no full device (/dev/full) on this system")
def test_a_report_to_a_full_device_leaves_the_device_a_device(tmp_path):
    full = device(tmp_path, "full", 1, 7)
    before = os.stat(full)
    result = run(*DIE_HARD, "-q", "--json", str(full), "--trace-dir", str(tmp_path / "traces"))
    after = os.stat(full)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    # the verdict's code (die_hard is violated), the report named as not written
    assert result.exit_code == 1 and f"the JSON report was not written to {full}" in result.stderr


def test_write_output_writes_into_a_device_and_through_descriptors(tmp_path, capfd):
    null = device(tmp_path, "null", 1, 3)
    write_output(null, "nothing")
    assert stat.S_ISCHR(os.stat(null).st_mode)
    assert descriptor_of("-") == 1 and descriptor_of("/dev/stdout") == 1 and descriptor_of("/dev/fd/2") == 2
    assert descriptor_of(tmp_path / "x.json") is None
    write_output("/proc/self/fd/1", "through fd 1\n")
    assert capfd.readouterr().out == "through fd 1\n"
    with pytest.raises(IsADirectoryError):
        output_kind(tmp_path)


def test_a_write_into_a_fifo_cut_short_goes_on_until_every_byte_is_written(tmp_path, monkeypatch):
    import io
    from kraftcheck.checker import files

    class Short(io.FileIO):  # what a pipe or a signal may do: take a few bytes of a write
        def write(self, data):
            return super().write(bytes(data[:5]))

    monkeypatch.setattr(files, "open", lambda path, mode, buffering: Short(path, mode.replace("b", "")),
                        raising=False)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a reader, so the writer's open does not wait
    try:
        write_output(fifo, "a report of more than five bytes")
        assert os.read(held, 1 << 16) == b"a report of more than five bytes"
    finally:
        os.close(held)


def test_an_empty_output_name_is_refused():
    refused(run(*DIE_HARD, "--json", ""), "--json is empty")
    refused(run(*DIE_HARD, "--trace-dir", ""), "--trace-dir is empty")


def test_a_symlink_loop_and_two_outputs_on_stdout_are_refused(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    refused(run(*DIE_HARD, "--json", str(tmp_path / "a")), "--json", "symbolic links")
    (tmp_path / "out.graphml").symlink_to("/proc/self/fd/1")
    refused(run(*DIE_HARD, "--json", "-", "--dump-graph", str(tmp_path / "out.graphml")), "--json and --dump-graph",
            "standard output")


def test_dump_graph_with_another_suffix_is_refused_before_exploring(tmp_path):
    refused(run(*DIE_HARD, "--dump-graph", str(tmp_path / "out.txt")), "--dump-graph", "*.graphml", "out.txt")
    assert not (tmp_path / "out.txt").exists()


def test_dump_graph_to_standard_output(tmp_path):
    result = run(*DIE_HARD, "--dump-graph", "-", "--trace-dir", str(tmp_path))
    assert result.exit_code == 1, result.output
    assert result.stdout.lstrip().startswith("<graphml") and result.stdout.rstrip().endswith("</graphml>")


# -- numbers and contradictions ---------------------------------------------------------------------------

@pytest.mark.parametrize("option,value,message", [
    ("--time-limit", "nan", "nan is not a number of seconds"),
    ("--time-limit", "inf", "finite"),
    ("--max-memory", "nan", "nan is not a number of GiB"),
    ("--max-memory", "-inf", "finite"),
    ("--threads", "0", "greater than 0"),
    ("--depth", "1000000000000", "more than the 1,000,000 a simulation keeps"),
])
def test_check_refuses_numbers_that_are_not(option, value, message):
    result = run(*DIE_HARD, option, value)
    assert result.exit_code == 2 and option in result.stderr and message in result.stderr, result.output


def test_threads_beyond_the_cpus_are_lowered_with_a_note(monkeypatch, tmp_path):
    monkeypatch.setenv("KRAFTCHECK_THREADS", "1")  # the default the command line's --threads overrides
    notes: list[str] = []
    cpus = len(os.sched_getaffinity(0))
    assert worker_threads(cpus + 3000, notes.append) == cpus and f"--threads {cpus + 3000}" in notes[0]
    assert worker_threads(1, notes.append) == 1 and len(notes) == 1
    result = run(*DIE_HARD, "--threads", "3000", "--trace-dir", str(tmp_path))
    assert result.exit_code == 1 and "--threads 3000 is more than" in result.stderr, result.output
    monkeypatch.setenv("KRAFTCHECK_THREADS", "many")
    refused(run(*DIE_HARD), "KRAFTCHECK_THREADS='many'")


@pytest.mark.parametrize("args,words", [
    (["--brokers", "3", "--param", "brokers=4"], ["--brokers 3", "--param brokers=4"]),
    (["--min-isr", "3", "--param", "min_isr=2"], ["--min-isr 3", "--param min_isr=2"]),
    (["--spec", "die_hard", "--param", "big=5", "--param", "big=6"], ["--param big", "twice"]),
])
def test_a_parameter_set_twice_is_refused_naming_both(args, words):
    refused(run("check", "--no-color", *args), *words)


# -- kraftcheck ci: every output and every name checked before any check runs -----------------------

CHECK = '[checks.jug]\nspec = "die_hard"\nviolates = ["{name}"]\n'


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    (tmp_path / "kraftcheck.toml").write_text(CHECK.format(name="big_jug_never_holds_4"))
    (tmp_path / "a-file").write_text("")
    return tmp_path


def ci_refused(project, args, *words):
    result = CliRunner().invoke(cli, ["ci", "--no-color", *args], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and all(w in result.stderr for w in words), result.stderr
    assert "jug" not in result.stdout and not (project / "kraftcheck-ci").exists(), "a check ran"


@pytest.mark.parametrize("args,words", [
    (["--junit", "a-file/junit.xml"], ["--junit", "is not a directory"]),
    (["--junit", "/proc/junit.xml"], ["--junit", "does not accept new files"]),
    (["--progress-json", "a-file/p.ndjson"], ["--progress-json", "is not a directory"]),
    (["--out", "a-file"], ["--out a-file", "not a directory"]),
    (["--junit", "-", "--progress-json", "-"], ["--junit and --progress-json", "standard output"]),
])
def test_ci_refuses_an_output_it_cannot_write_before_any_check(project, args, words):
    ci_refused(project, args, *words)


def test_ci_refuses_an_unknown_invariant_before_any_check(project):
    (project / "kraftcheck.toml").write_text(CHECK.format(name="no_such_invariant"))
    ci_refused(project, [], "kraftcheck.toml:3", "violates", "no_such_invariant", "big_jug_never_holds_4")
    (project / "kraftcheck.toml").write_text('[checks.jug]\nspec = "die_hard"\ninvariants = ["nope"]\nexpect = "holds"\n')
    ci_refused(project, [], "checks.jug.invariants", "'nope'")


@pytest.fixture
def read_only(project):
    """Make a file read-only even for root (chattr +i; permission bits do not bind root)."""
    made: list[Path] = []

    def make(path: Path) -> None:
        if os.geteuid() != 0:
            path.chmod(0o444)
        elif subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
            pytest.skip("running as root on a file system without chattr +i: no file is read-only here")
        made.append(path)
    yield make
    for path in made:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        path.chmod(0o644)


def test_ci_refuses_to_update_counts_in_a_read_only_manifest_before_any_check(project, read_only):
    read_only(project / "kraftcheck.toml")
    ci_refused(project, ["--update-counts"], "--update-counts", "kraftcheck.toml", "not writable")


def test_ci_refuses_a_read_only_baseline_before_any_check(project, read_only):
    baseline = project / "kraftcheck-baseline.json"
    baseline.write_text('{"version": 1, "findings": []}\n')
    read_only(baseline)
    ci_refused(project, ["--update-baseline"], "--update-baseline", "kraftcheck-baseline.json", "not writable")


# -- sweep and trace ------------------------------------------------------------------------------------

def test_sweep_refuses_bad_limits_and_outputs_before_any_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    sweep = ["sweep", "--spec", "die_hard", "--vary", "big=4,5"]
    for args, words in ((["--time-limit", "nan"], ["--time-limit", "nan is not a number"]),
                        (["--output", "a-file/t.md"], ["--output", "is not a directory"]),
                        (["--out", "a-file"], ["--out", "not a directory"]),
                        (["--param", "big=5"], ["parameter big is both varied and fixed", "--param"])):
        result = run(*sweep, *args)
        assert result.exit_code == 2 and all(w in result.stderr for w in words), result.output
        assert "configurations" not in result.stderr and not (tmp_path / "kraftcheck-sweep").exists()
    (tmp_path / "m.toml").write_text('spec = "die_hard"\ntime_limit = inf\n[vary]\nbig = [4, 5]\n')
    result = run("sweep", "m.toml")
    assert result.exit_code == 2 and "time_limit: inf is not a number of seconds" in result.stderr, result.output


# -- an output the disk refuses after the work: the results still shown, the output named, its exit code

FULL = "/dev/full"
needs_full = pytest.mark.skipif(not os.path.exists(FULL), reason="no full device (/dev/full) on this system")


def not_written(result, *whats):
    """No traceback, no internal error, and one error line per output ``whats`` naming it and why."""
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    for what in whats:
        assert f"{what} was not written to {FULL}: the disk is full" in result.stderr, result.stderr


@needs_full
def test_a_sweep_table_the_disk_refuses_is_shown_and_exits_3(monkeypatch):
    """Every run was done: the table is printed instead, and 3 says it is not in the file."""
    from kraftcheck.cli import sweep_cmd
    from kraftcheck.sweep.table import Row

    rows = [Row("big=6", "big=6", "holds", distinct_states=6, states_generated=9, depth=3, wall_s=0.1)]
    monkeypatch.setattr(sweep_cmd, "_run", lambda *args: rows)
    result = run("sweep", "--spec", "die_hard", "--vary", "big=6", "-o", FULL)
    assert result.exit_code == 3, result.output
    assert "| big=6 | `big=6` | holds (6 states) | 6 | 3 |" in result.stdout
    not_written(result, "the table")


@needs_full
def test_a_sweep_json_table_the_disk_refuses_says_the_exit_code_the_process_gives(monkeypatch):
    """The table printed instead of the file it could not be written to said "exit_code": 0 (its
    rows') while the sweep exited 3: a program reading it took a table not in its file for a pass."""
    from kraftcheck.cli import sweep_cmd
    from kraftcheck.sweep.table import Row

    rows = [Row("big=6", "big=6", "holds", distinct_states=6, states_generated=9, depth=3, wall_s=0.1)]
    monkeypatch.setattr(sweep_cmd, "_run", lambda *args: rows)
    result = run("sweep", "--spec", "die_hard", "--vary", "big=6", "--format", "json", "-o", FULL)
    assert result.exit_code == 3, result.output
    table = json.loads(result.stdout)
    assert table["exit_code"] == 3 and table["configurations"][0]["result"] == "holds", table
    not_written(result, "the table")


@needs_full
def test_a_trace_export_the_disk_refuses_exits_3(tmp_path):
    traces = tmp_path / "traces"
    assert run(*DIE_HARD, "-q", "--trace-dir", str(traces)).exit_code == 1
    result = run("trace", "export", str(next(traces.glob("*.json"))), "--format", "mermaid", "-o", FULL)
    assert result.exit_code == 3 and "wrote" not in result.stderr, result.output
    not_written(result, "the export")


@needs_full
def test_ci_reports_the_disk_refuses_fail_the_gate_with_3_after_its_table(project):
    """A gate whose every check passed, but whose JUnit report and progress stream are lost, cannot
    pass: 3, as a run stopped early, with the table still printed and each output named."""
    result = CliRunner().invoke(cli, ["ci", "--no-color", "-j", "1", "--junit", FULL, "--progress-json", FULL],
                                catch_exceptions=False)
    assert result.exit_code == 3, result.output
    assert "1 of 1 checks pass; exit 3" in result.stdout
    not_written(result, "the JUnit report", "the progress stream")


@needs_full
def test_a_trace_picture_the_disk_refuses_exits_3(tmp_path):
    """As export: one line naming the picture and why, exit 3; not a traceback and 'internal error'."""
    traces = tmp_path / "traces"
    assert run(*DIE_HARD, "-q", "--trace-dir", str(traces)).exit_code == 1
    picture = tmp_path / "full.svg"  # a picture's name ends in .svg or .png: a link to the full device
    picture.symlink_to(FULL)
    result = run("trace", "render", str(next(traces.glob("*.json"))), "-o", str(picture))
    assert result.exit_code == 3 and "wrote" not in result.stderr, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    assert f"the picture was not written to {picture}: the disk is full" in result.stderr, result.stderr
    assert picture.is_symlink()


def test_trace_render_refuses_a_name_that_is_no_picture_before_reading(tmp_path):
    result = run("trace", "render", str(tmp_path / "not-even-there.json"), "-o", "-")
    assert result.exit_code == 2 and "must be .svg or .png" in result.stderr, result.output


def test_trace_export_to_standard_output(tmp_path):
    traces = tmp_path / "traces"
    assert run(*DIE_HARD, "-q", "--trace-dir", str(traces)).exit_code == 1
    trace = next(traces.glob("*.json"))
    result = run("trace", "export", str(trace), "--format", "mermaid", "-o", "-")
    assert result.exit_code == 0 and result.stdout.startswith("sequenceDiagram"), result.output
    assert "wrote" not in result.stderr


# -- standard error failing ------------------------------------------------------------------------------

class FullStream(io.StringIO):
    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failing_standard_error_drops_the_diagnostics_not_the_results(monkeypatch, capsys):
    """Progress, notes and errors are dropped when standard error fails; the summary on standard
    output is not touched. A summary sent to standard error (--json -) fails as an output does."""
    from kraftcheck.cli.terminal import Terminal

    monkeypatch.setattr(sys, "stderr", FullStream())
    terminal = Terminal(color=False)
    terminal.error("lost")
    terminal.hint("lost too")
    terminal.out.print("the summary")
    terminal.error("and later errors")
    assert capsys.readouterr().out == "the summary\n"
    with pytest.raises(OSError):
        Terminal(color=False, results_to_stderr=True).out.print("the summary")


def test_a_reader_gone_from_standard_error_changes_neither_the_summary_nor_the_exit_code(tmp_path):
    """`kraftcheck check ... 2>&1 | head -1` and the like: standard error's reader is gone (here
    before the start). It said the "checking" line, so its failure was the run's end (exit 1 or 2,
    nothing on standard output); it is only the loss of what standard error carries."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "kraftcheck", "check", "--no-color", "--spec", "two_phase",
                               "--param", "rm=2", "--json", str(tmp_path / "r.json")],
                              stdout=subprocess.PIPE, stderr=write_end, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stdout
    assert "two_phase (rm=2): all invariants hold over the complete state space" in done.stdout
    assert json.loads((tmp_path / "r.json").read_text())["result"] == "holds"


def test_a_reader_gone_from_standard_output_is_no_verdict_not_violated():
    """An output cut off by its reader where no command catches it: click exits 1 there, which
    says "violated"; it is 2, no verdict."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "kraftcheck", "specs", "--no-color"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


# -- signals --------------------------------------------------------------------------------------------

# the command line, with a signal sent to itself the moment it starts importing the check command
SIGNAL_WHILE_IMPORTING = """
import os, signal, sys
signum, trace_dir = int(sys.argv[1]), sys.argv[2]
class SignalOnImport:
    def find_spec(self, name, path=None, target=None):
        if name == "kraftcheck.cli.check_cmd":
            os.kill(os.getpid(), signum)
        return None
sys.meta_path.insert(0, SignalOnImport())
sys.argv = ["kraftcheck", "check", "--spec", "die_hard", "--trace-dir", trace_dir]
from kraftcheck.cli.main import main
main()
"""


def _at_their_default(signum: int):
    """A child's start that gives SIGINT and ``signum`` their default action, as a user's shell
    does: a suite started as a background job inherits SIGINT ignored, one started under nohup
    SIGHUP, and a process that inherits a signal ignored rightly leaves it so."""
    def reset() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signum, signal.SIG_DFL)
    return reset


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_the_command_is_still_importing_exits_130(signum, tmp_path):
    """The command's modules take half a second to import, in which an interrupt was click's
    "Aborted!" and exit 1, and SIGTERM ended the process as 143: the CLI's handlers are installed
    before, so both are 130. (Only the interpreter's own start comes before them, where the signal's
    default action ends the process.) SIGINT starts at its default action, as from a terminal: a
    suite run as a background job may have it ignored, which the child would inherit."""
    process = subprocess.run([sys.executable, "-c", SIGNAL_WHILE_IMPORTING, str(int(signum)), str(tmp_path)],
                             capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                             preexec_fn=_at_their_default(signum))
    assert process.returncode == 130, process.stderr
    assert "kraftcheck: error: interrupted" in process.stderr and "Aborted" not in process.stderr
    assert "Traceback" not in process.stderr and "checking" not in process.stderr


# a signal sent the moment the entry point makes its first import of kraftcheck's own: the earliest an
# import hook can see after the interpreter's start and the two packages above it, which import nothing
SIGNAL_AT_THE_FIRST_IMPORT = """
import os, signal, sys
signum = int(sys.argv[1])
class SignalOnImport:
    entered = False
    def find_spec(self, name, path=None, target=None):
        if name == "kraftcheck.cli.main":
            SignalOnImport.entered = True
        elif SignalOnImport.entered and name.startswith("kraftcheck."):
            SignalOnImport.entered = False
            os.kill(os.getpid(), signum)
        return None
sys.meta_path.insert(0, SignalOnImport())
sys.argv = ["kraftcheck", "specs"]
from kraftcheck.cli.main import main
main()
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_at_the_entry_points_first_import_exits_130(signum):
    """The entry point's first lines install a handler that needs only ``signal``; before, it
    imported the engine's stop handlers (and with them kraftcheck.checker) first, and a signal
    then was a KeyboardInterrupt traceback and exit 1, or SIGTERM's 143."""
    process = subprocess.run([sys.executable, "-c", SIGNAL_AT_THE_FIRST_IMPORT, str(int(signum))],
                             capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                             preexec_fn=_at_their_default(signum))
    assert process.returncode == 130, process.stderr
    assert process.stderr == "kraftcheck: error: interrupted\n" and process.stdout == ""


def test_importing_kraftcheck_imports_nothing_else():
    """So that the entry point's handlers come a few lines after the interpreter's start."""
    imported = subprocess.run([sys.executable, "-c", "import sys; before = set(sys.modules); import kraftcheck.cli; "
                               "print(sorted(set(sys.modules) - before))"], capture_output=True, text=True,
                              timeout=60, check=True).stdout
    assert imported.strip() == "['kraftcheck', 'kraftcheck.cli']"


@pytest.mark.parametrize("where", ["traces", "stricter-variant"])
def test_an_interrupt_after_the_exploration_still_gives_the_summary_and_the_report(tmp_path, monkeypatch, where):
    """Ctrl-C (or SIGTERM) once the exploration is over, while the counterexamples are checked on
    the stricter variant or their trace files written: exit 130 as for any interrupt, but after
    the verdict, the counts and the JSON report of what was found (it was only 'interrupted')."""
    import kraftcheck.checker.explore.concrete as concrete
    import kraftcheck.traces as traces

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(traces if where == "traces" else concrete,
                        "counterexample_file" if where == "traces" else "check_in_stricter_variant", interrupted)
    report = tmp_path / "r.json"
    said = CliRunner().invoke(cli, ["check", "--spec", "two_phase_eager_commit", "--param", "rm=3", "--no-color",
                                    "--trace-dir", str(tmp_path / "traces"), "--json", str(report)])
    assert said.exit_code == 130, said.output
    assert "tc_consistent" in said.output and "interrupted after the exploration" in said.output
    found = json.loads(report.read_text())
    assert found["result"] == "violated" and found["violations"][0]["trace_file"] is None
    assert found["cut_short"] in ("writing the trace files", "checking the counterexamples on the spec's stricter variant")
    assert not list((tmp_path / "traces").glob("*.json"))


def test_an_interrupt_during_the_graph_analyses_gives_no_verdict(tmp_path, monkeypatch):
    """Ctrl-C while the state graph is analysed: exit 130 after the counts, the JSON report's
    result an error (the analyses' answer is not known), and nothing said of a verdict standing."""
    import kraftcheck.analyses as analyses

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(analyses, "analyse_after_check", interrupted)
    report = tmp_path / "r.json"
    said = CliRunner().invoke(cli, ["check", "--spec", "mutex", "--liveness", "--no-color", "--json", str(report)])
    assert said.exit_code == 130, said.output
    assert "while analysing the state graph" in said.output and "verdict above stand" not in said.output
    assert json.loads(report.read_text())["result"] == "error"


def test_a_run_with_no_verdict_leaves_no_earlier_report_at_its_path(tmp_path):
    """A spec's error during the exploration stops the run with no verdict (exit 2) and a report
    saying error; the report an earlier run had left at the path stood, its "holds" beside this run's
    exit 2 for a program that reads the file. The run removes it as it begins (a refusal before
    that changes nothing), and a link at the path is written through, never removed."""
    report = tmp_path / "r.json"
    held = run("check", "--spec", "two_phase", "--param", "rm=2", "--no-color", "--json", str(report))
    assert held.exit_code == 0 and json.loads(report.read_text())["result"] == "holds"
    refused = CliRunner().invoke(cli, ["check", "--spec", "nope", "--no-color", "--json", str(report)])
    assert refused.exit_code == 2 and report.exists(), "a refusal does nothing, also to the path"
    spec = f"{Path(__file__).parent / 'odd_specs.py'}:Overflowing"  # writes past its field's domain on a state
    raised = CliRunner().invoke(cli, ["check", "--spec", spec, "--no-color", "--json", str(report)])
    assert raised.exit_code == 2 and "outside" in raised.stderr, raised.output
    assert json.loads(report.read_text())["result"] == "error"
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("{}")
    link.symlink_to(target)
    raised = CliRunner().invoke(cli, ["check", "--spec", spec, "--no-color", "--json", str(link)])
    # its report written through the link, into its target
    assert raised.exit_code == 2 and link.is_symlink() and json.loads(target.read_text())["result"] == "error"


def test_a_spark_run_that_could_not_start_writes_no_report(tmp_path, monkeypatch):
    """An unreachable --master ("start it or give another --master") is refused as any bad option
    is: no report. It wrote one saying error, as for a run that began and ended in an error, so a
    program reading it took a mistyped master for a run that had explored and failed."""
    import socket
    from kraftcheck import pipeline
    from kraftcheck.spark.readiness import SparkWaitError
    from kraftcheck.spark.session import SparkSetupError
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    report = tmp_path / "r.json"
    monkeypatch.setattr("kraftcheck.spark.session._java_home", lambda: "/java")  # past Java's check, to the master's
    result = CliRunner().invoke(cli, ["check", "--spec", "die_hard", "--engine", "spark", "--master",
                                      f"spark://127.0.0.1:{port}", "--work-dir", str(tmp_path / "shared"),
                                      "--json", str(report)], catch_exceptions=False)
    assert result.exit_code == 2 and "cannot reach the Spark master" in result.stderr, result.output
    assert not report.exists()
    # no Java, a context that cannot start, no executor within --spark-wait: none began a level
    for error in (SparkSetupError("Spark needs Java 17 or 21"), SparkWaitError("no executor after 60 s")):
        assert pipeline.error_report(None, error) is None, error
