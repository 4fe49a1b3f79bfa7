"""The command line as a user drives it: reports, exit codes, errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import odd_specs
import pytest
from click.testing import CliRunner

from kraftcheck.cli.main import cli

REPORT_KEYS = {"result", "spec", "params", "initial_states", "states_generated", "distinct_states", "depth",
               "elapsed_s", "compile_s", "states_per_s", "peak_rss_bytes", "coverage", "violations"}


def run(*args, **kw):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, **kw)


def test_json_report_on_stdout_exits_0():
    result = run("check", "--spec", "two_phase", "--param", "rm=7", "--json", "-")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert REPORT_KEYS <= set(report)
    assert report["result"] == "holds"
    assert (report["distinct_states"], report["states_generated"], report["depth"]) == (296448, 2744706, 23)
    assert report["params"] == {"rm": 7}
    assert report["coverage"]["TMCommit"] == {"fired": 1, "new": 1}
    assert report["violations"] == []
    assert report["peak_rss_bytes"] > 0


def test_broken_variant_exits_1_with_its_shortest_trace(tmp_path):
    result = run("check", "--spec", "two_phase_eager_commit", "--trace-dir", str(tmp_path),
                 "--json", str(tmp_path / "r.json"), "--no-color")
    assert result.exit_code == 1
    assert "tc_consistent" in result.stdout and "6 states" in result.stdout
    assert "RMChooseToAbort(rm=rm2)" in result.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    (v,) = report["violations"]
    assert v["invariant"] == "tc_consistent" and v["depth"] == 6
    assert os.path.exists(v["trace_file"])


@pytest.mark.parametrize("args,message", [
    (["--spec", "two_phase", "--param", "rm=abc"], "parameter rm must be an integer"),
    (["--spec", "two_phase", "--param", "rm=3_0"], "parameter rm must be an integer, got '3_0'"),  # int() says 30
    (["--spec", "two_phase", "--param", "rm=0"], "rm=0 is out of range: allowed 1..30"),
    (["--spec", "two_phase", "--param", "nodes=3"], "has no parameter 'nodes'"),
    (["--spec", "two_phase", "--param", "rm"], "--param expects KEY=VALUE"),
    (["--spec", "no_such_spec"], "unknown spec 'no_such_spec'"),
    (["--spec", "two_phase", "--invariant", "nope"], "unknown invariant 'nope'"),
])
def test_bad_input_exits_2_with_one_clear_line(args, message):
    result = run("check", *args)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0]
    assert "Traceback" not in result.output


def test_max_states_exits_3():
    result = run("check", "--spec", "two_phase", "--param", "rm=7", "--max-states", "1000", "--json", "-")
    assert result.exit_code == 3
    report = json.loads(result.stdout)
    assert report["result"] == "incomplete" and "--max-states 1000" in report["incomplete_reason"]


def test_max_memory_exits_3_and_says_so():
    result = run("check", "--spec", "two_phase", "--param", "rm=5", "--max-memory", "0.0001", "--json", "-")
    assert result.exit_code == 3
    report = json.loads(result.stdout)
    assert report["result"] == "incomplete" and "--max-memory" in report["incomplete_reason"]
    assert report["options"]["max_memory_bytes"] == int(0.0001 * 2**30)


def test_continue_reports_each_violation(tmp_path):
    result = run("check", "--spec", "two_phase_eager_commit", "--continue", "--trace-dir", str(tmp_path),
                 "--json", "-")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["distinct_states"] > 200  # explored past the first violation
    assert [v["invariant"] for v in report["violations"]] == ["tc_consistent"]


def test_interrupt_exits_130(monkeypatch):
    """An interrupt outside the exploration (here raised at once) still exits 130."""
    from kraftcheck.checker.explore import engine

    def interrupted(self, model, options, progress, observer=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine.Engine, "explore", interrupted)
    result = run("check", "--spec", "two_phase")
    assert result.exit_code == 130


# a signal that comes as the process exits, once the command has said its result (atexit runs
# the callbacks registered first last, after the command's own)
SIGNAL_AS_IT_EXITS = """
import atexit, os, signal, sys, time

def late():  # an exit that waits on something (a thread, a child process)
    os.kill(os.getpid(), signal.{name})
    time.sleep(60)

atexit.register(late)
from kraftcheck.cli.main import main
sys.argv = ["kraftcheck", "specs"]
main()
"""


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_signal_once_the_command_is_over_changes_nothing(signal_name):
    """Ctrl-C or SIGTERM once a command has said its result (a run that wrote "holds" and its
    report) came as the interpreter exited: the stop handler raised a KeyboardInterrupt traceback
    there, and once the exit had put the default actions back, the signal killed the process,
    exit 143 or 130 after a report that said holds. Now it ends the process at once with the
    command's exit code, and nothing more is printed: an exit that waits stays stoppable."""
    done = subprocess.run([sys.executable, "-c", SIGNAL_AS_IT_EXITS.format(name=signal_name)], capture_output=True,
                          text=True, timeout=40)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert "two_phase" in done.stdout


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_signal_once_a_command_that_calls_sys_exit_is_over_ends_it_with_its_code(signal_name):
    """check, ci, sweep and trace end with sys.exit(code): their code reached main as a SystemExit,
    not a return value, and a signal then was ignored, so an exit that waits stayed unstoppable
    but by SIGKILL. It ends the process at once with the command's code, as for specs."""
    script = SIGNAL_AS_IT_EXITS.format(name=signal_name).replace(
        '["kraftcheck", "specs"]', '["kraftcheck", "trace", "replay", "/nonexistent/x.json"]')
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=40)
    assert (done.returncode, done.stderr) == (2, "error: /nonexistent/x.json: no such file\n"), done.stderr


# the command line with a progress line at every snapshot (not every 10 s), so a test can wait for one
CHECK_WITH_EVERY_PROGRESS_LINE = ("import sys; import kraftcheck.cli.terminal as t; t.PLAIN_PROGRESS_EVERY_S = 0; "
                                  "from kraftcheck.cli.main import main; sys.argv[0] = 'kraftcheck'; main()")
EXPLORED_LINE = re.compile(r"depth [\d,]+\s+distinct [1-9]")  # a level of states explored


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_an_interrupted_run_prints_the_statistics_so_far_then_exits_130(tmp_path, signal_name):
    """Ctrl-C (SIGINT) or SIGTERM in the middle of a real exploration (Two-Phase rm=12, far longer
    than the test), sent once the run's progress says it has explored states: the summary with the
    counts explored so far comes first, then the interrupt is said, and the exit code is 130; the
    JSON report is written with the same counts.
    The run starts with SIGINT's default action, as from a terminal: a suite started as a
    background job of a non-interactive shell has SIGINT ignored, which its children inherit, and
    Python then installs no Ctrl-C handler (the convention that keeps such jobs running). A run
    that does not end is sent SIGABRT first: its stacks (faulthandler) say where it hangs."""
    import signal
    import threading
    report_path = tmp_path / "report.json"
    proc = subprocess.Popen([sys.executable, "-X", "faulthandler", "-c", CHECK_WITH_EVERY_PROGRESS_LINE, "check",
                             "--spec", "two_phase", "--param", "rm=12", "--no-color", "--json", str(report_path),
                             "--trace-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    err_lines: list[str] = []
    explored = threading.Event()

    def read_standard_error() -> None:
        for line in proc.stderr:
            err_lines.append(line)
            if EXPLORED_LINE.search(line):
                explored.set()

    out_parts: list[str] = []
    readers = [threading.Thread(target=read_standard_error, daemon=True),
               threading.Thread(target=lambda: out_parts.append(proc.stdout.read()), daemon=True)]
    for reader in readers:  # both pipes drained all along: a full one would stop the run
        reader.start()
    try:
        assert explored.wait(timeout=600), "no progress line with states explored:\n" + "".join(err_lines)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(getattr(signal, signal_name))
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # faulthandler: every thread's stack, on standard error
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            readers[0].join(timeout=30)
            pytest.fail(f"{signal_name} did not end the run; it said, then its stacks at SIGABRT:\n" + "".join(err_lines))
        for reader in readers:
            reader.join(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out, err = "".join(out_parts), "".join(err_lines)
    assert proc.returncode == 130, err
    report = json.loads(report_path.read_text())
    assert report["result"] == "incomplete" and report["distinct_states"] > 0
    for label, value in (("distinct states", report["distinct_states"]),
                         ("states generated", report["states_generated"])):
        assert re.search(rf"{label}\s+{value:,}\b", out), (label, out)
    assert "interrupted; the statistics above cover the levels finished so far" in " ".join(err.split())


def test_specs_lists_every_spec_with_parameters():
    result = run("specs", "--no-color")
    assert result.exit_code == 0
    assert "two_phase" in result.stdout and "rm" in result.stdout and "number of resource managers" in result.stdout


def test_reference_engine_from_the_command_line():
    result = run("check", "--spec", "two_phase", "--engine", "reference", "--json", "-")
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["engine"] == "reference" and report["distinct_states"] == 288


@pytest.mark.parametrize("spec", [["--spec", "two_phase", "--param", "rm=2"],
                                  # a layout packed by its table (it crashed, AttributeError)
                                  ["--brokers", "2", "--param", "fences=0", "--param", "lossy_shutdowns=0"],
                                  # arithmetic past int32: the generated kernels run as Python said 'holds'
                                  ["--spec", f"{odd_specs.__file__}:SquarePastInt32"]],
                         ids=["small layout", "table layout", "past int32"])
def test_engine_runs_with_jit_disabled(tmp_path, spec):
    """NUMBA_DISABLE_JIT=1 runs the engine on the interpreted tier: every count and the verdict are
    the compiled run's."""
    def report(**env):
        out = subprocess.run([sys.executable, "-m", "kraftcheck", "check", *spec, "--trace-dir", str(tmp_path),
                              "--json", "-"], capture_output=True, text=True, env=dict(os.environ, **env), timeout=300)
        assert out.returncode in (0, 1), out.stderr
        return json.loads(out.stdout)

    interpreted = report(NUMBA_DISABLE_JIT="1", KRAFTCHECK_CACHE_DIR=str(tmp_path / "interpreted"))
    compiled = report()
    assert interpreted["engine"] == "engine" and interpreted["distinct_states"] > 0
    keys = ("result", "initial_states", "states_generated", "distinct_states", "depth", "coverage")
    assert {k: interpreted[k] for k in keys} == {k: compiled[k] for k in keys}
    assert [v["invariant"] for v in interpreted["violations"]] == [v["invariant"] for v in compiled["violations"]]


def test_unfired_actions_are_flagged_only_after_an_exhaustive_run(tmp_path):
    stopped = run("check", "--spec", "two_phase_eager_commit", "--trace-dir", str(tmp_path), "--json", "-")
    report = json.loads(stopped.stdout)
    assert report["exhaustive"] is False and report["never_fired"] is None
    complete = run("check", "--spec", "two_phase", "--json", "-")
    report = json.loads(complete.stdout)
    assert report["exhaustive"] is True and report["never_fired"] == []
