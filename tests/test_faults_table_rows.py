"""Rows of the fault tables (the faults a hostile user tried) that the other fault tests show only
in part: each here at the command line, or at the seam where the answer is decided, asserting the
exit code, the message, and that no count or verdict is printed where none was earned.

* a checkpoint with a flipped bit, resumed from the command line;
* a run cut short by --max-memory says so with its limit and depth;
* ``--engine reference --liveness`` on a spec with a state constraint;
* an invariant that raises on the compiled tier;
* a run's detached compile goes through the register (one per cache, one per kernel key);
* a ``spark://`` URL answered by an HTTP server, from the command line; a master that never
  answers the registration (Spark stops the context) is said as such, not as missing workers;
* a Spark level file on a full disk is a full disk naming the file, with no half file left.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from kraftcheck.checker import detached
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.cli.main import cli
from kraftcheck.specs import spec_class


def _model(name, **params):
    cls = spec_class(name)
    return Model(cls(cls.Params(**params)))


def _check(*args):
    result = CliRunner().invoke(cli, ["check", "--no-color", *args])
    return result, " ".join(result.output.split())


# -- a checkpoint with one bit flipped, resumed from the command line ------------------------------------

def test_a_flipped_bit_in_a_checkpoint_level_is_exit_2_at_the_command_line_with_no_count(tmp_path):
    """Was: exit 0, "all invariants hold" and a wrong count. Now exit 2 naming the file, before any
    state is read: no count, no verdict, no JSON report, the checkpoint as it was."""
    ck = tmp_path / "ck"
    stopped = Engine().explore(_model("two_phase", rm=4), Options(max_depth=7, checkpoint_dir=str(ck)))
    assert stopped.status == "incomplete"
    level = ck / "level-0005.words"
    data = bytearray(level.read_bytes())
    data[len(data) // 2] ^= 0x10
    level.write_bytes(bytes(data))
    before = {p.name: p.read_bytes() for p in ck.iterdir()}
    result, out = _check("--spec", "two_phase", "--param", "rm=4", "--resume", str(ck),
                         "--json", str(tmp_path / "r.json"), "--trace-dir", str(tmp_path / "traces"))
    assert result.exit_code == 2, out
    assert f"checkpoint file {level} was changed after its run wrote it" in out
    assert "start the run again with --checkpoint" in out
    assert "Traceback" not in out and "distinct states" not in out and "hold" not in out
    assert not (tmp_path / "r.json").exists()
    assert {p.name: p.read_bytes() for p in ck.iterdir()} == before


# -- a run cut short by a limit says which and at what depth -----------------------------------------------

def test_a_run_cut_short_by_max_memory_says_the_limit_as_given_and_its_depth(tmp_path):
    """Every process uses more than 0.05 GiB: the run stops at its first check, says so with the
    limit as it was given (it said "--max-memory 0.0 GiB") and the depth, exit 3."""
    result, out = _check("--spec", "two_phase", "--param", "rm=3", "--continue", "--max-memory", "0.05",
                         "--json", str(tmp_path / "r.json"), "--trace-dir", str(tmp_path / "traces"))
    assert result.exit_code == 3, out
    said = re.search(r"exploration incomplete: stopped at --max-memory 0\.05 GiB \(the process used more\), "
                     r"at depth (\d+)", out)
    assert said, out
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["result"], report["exhaustive"], report["depth"]) == ("incomplete", False, int(said[1]))
    assert "all invariants hold" not in out


# -- liveness under a constraint, from the command line, on every explorer ---------------------------------

COUNTER = """
import sys
sys.path.insert(0, {tests!r})
from test_faults_liveness_symmetry import BoundedCounter
"""


@pytest.mark.parametrize("engine", ["reference", "engine"])
def test_liveness_under_a_constraint_at_the_command_line_is_tlcs_answer(tmp_path, engine):
    """``--engine reference --liveness`` expanded a state outside the constraint and crashed on its
    successor ("field x = 4 is outside its domain"), exit 2. TLC: no error, over x = 0, 1, 2."""
    spec = tmp_path / "counter.py"
    spec.write_text(COUNTER.format(tests=str(Path(__file__).parent)))
    result, out = _check("--spec", f"{spec}:BoundedCounter", "--engine", engine, "--liveness",
                         "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 0, out
    assert "outside its domain" not in out and "Traceback" not in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["result"], report["distinct_states"]) == ("holds", 3)
    (prop,) = report["liveness"]["properties"]
    assert (prop["property"], prop["verdict"]) == ("reaches_three", "holds")


# -- an invariant that raises, on the compiled tier ---------------------------------------------------------

def test_an_invariant_that_raises_stops_the_compiled_tier_too():
    """The compiled kernels' invariant check raises ZeroDivisionError with no line of the spec's:
    the run stops with the spec's error, its line and the path to the state, never a verdict."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_faults_spec_errors import INVARIANT, _assert_stops
    from test_faults_spec_errors import _model as faulty
    _assert_stops(lambda: Engine(compile="now").explore(faulty(INVARIANT), Options()), "invariant bounded")


# -- a run's detached compile goes through the register ----------------------------------------------------

def _left_compile(cache: Path, key: str):
    """A BackgroundCompile as a run ends it with its worker still running (a sleeper stands for
    the worker, in a session of its own as the worker is)."""
    from kraftcheck.checker.compile import BackgroundCompile
    compile_ = object.__new__(BackgroundCompile)
    compile_.shapes = SimpleNamespace(module_name=key)
    compile_.forms = []  # no kernel module: none has a claims folder to remove
    compile_.cache = cache
    compile_.process = subprocess.Popen(["sleep", "300"], start_new_session=True)
    compile_._stderr = tempfile.TemporaryFile()
    compile_._reader = threading.Thread(target=lambda: None)
    compile_._reader.start()
    compile_.scratch = tempfile.mkdtemp(prefix=detached.SCRATCH_PREFIX)
    compile_.left_running = False
    compile_._grouped = False
    return compile_


def test_runs_leaving_their_compiles_keep_one_per_cache_and_one_per_kernel_key(tmp_path):
    """BackgroundCompile.stop, as a run that ends before its compile calls it: the newest left
    compile of a cache stops the one before; a second compile of the same kernels is stopped and the
    first goes on; ``kraftcheck cache status`` shows the one running, ``cache clear`` stops it. A
    stopped compile's scratch folder is removed with it (a killed worker cannot remove its own)."""
    cache = tmp_path / "kernels"
    cache.mkdir()
    made = []
    try:
        first = _left_compile(cache, "kc_a_model_0123456789abcdef0123")
        made.append(first)
        first.stop(keep=True)
        assert first.left_running and first.process.poll() is None
        other = _left_compile(cache, "kc_b_model_0123456789abcdef0123")
        made.append(other)
        other.stop(keep=True)
        assert first.process.wait(timeout=30) == -signal.SIGKILL, "the newest request wins"
        assert not Path(first.scratch).exists(), "a stopped compile's scratch goes with it"
        same = _left_compile(cache, "kc_b_model_0123456789abcdef0123")
        made.append(same)
        same.stop(keep=True)
        assert same.process.returncode == -signal.SIGKILL and same.left_running  # its kernels go on in `other`
        assert not Path(same.scratch).exists() and Path(other.scratch).is_dir()
        assert [e.pid for e in detached.running(cache)] == [other.process.pid]
        env = {"KRAFTCHECK_CACHE_DIR": str(tmp_path)}
        status = CliRunner().invoke(cli, ["cache", "status"], env=env)
        assert status.exit_code == 0 and "background compiles left running: 1" in status.output, status.output
        assert f"pid {other.process.pid}: the kernels of spec b" in status.output
        cleared = CliRunner().invoke(cli, ["cache", "clear"], env=env)
        assert cleared.exit_code == 0 and "stopped 1 background compile" in cleared.output, cleared.output
        assert other.process.wait(timeout=30) == -signal.SIGKILL and detached.running(cache) == []
        assert not Path(other.scratch).exists()
    finally:
        for c in made:
            if c.process.poll() is None:
                c.process.kill()
                c.process.wait()
            shutil.rmtree(c.scratch, ignore_errors=True)


# -- Spark: a master URL that is not Spark, from the command line ---------------------------------------------

@pytest.mark.spark
def test_a_master_url_answered_by_an_http_server_is_exit_2_before_spark_starts(tmp_path):
    """Was: 64 s of silence, then "All masters are unresponsive" and a py4j error, exit 1. Now
    exit 2 naming what answered, before any JVM or work dir is made."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        master = f"spark://127.0.0.1:{server.server_address[1]}"
        work = tmp_path / "work"
        result = CliRunner().invoke(cli, ["check", "--spec", "die_hard", "--engine", "spark", "--master", master,
                                          "--work-dir", str(work), "--no-color"], catch_exceptions=False)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("kraftcheck: error")]
    assert len(errors) == 1 and "is not a Spark master (it answered '" in errors[0], result.stderr
    assert "Traceback" not in result.output and "distinct states" not in result.output
    assert not work.exists()


class _StoppedContext:
    """What the readiness wait sees of a SparkContext that Spark stopped itself: a standalone master
    that never answered the application's registration (Spark gives up after about a minute)."""

    master = "spark://127.0.0.1:7077"

    class _Conf:
        def get(self, key, default=None):
            return default

    def getConf(self):
        return self._Conf()

    class _jsc:
        @staticmethod
        def sc():
            class Tracker:
                def getExecutorInfos(self):
                    return ["the driver"]
            return type("JavaContext", (), {"statusTracker": lambda self: Tracker(),
                                            "isStopped": lambda self: True})()


def test_a_context_spark_stopped_is_no_master_not_missing_workers():
    """A peer that accepts and never answers: Spark stops the context after its registration
    retries; the run waited --spark-wait more for an executor and blamed the workers (152 s with
    the default wait). It stops at once, saying the master did not take the application."""
    from kraftcheck.spark import readiness
    with pytest.raises(readiness.SparkWaitError) as refused:
        readiness.wait_for_executor(_StoppedContext(), 0.5, lambda p: None)
    message = str(refused.value)
    assert "spark://127.0.0.1:7077 did not take this application" in message
    assert "is it a Spark master, and the right port?" in message and "workers" not in message


# -- Spark: a level file on a full disk ----------------------------------------------------------------------

def test_a_spark_level_file_on_a_full_disk_is_a_full_disk_naming_the_file(tmp_path, monkeypatch):
    """numpy's tofile said only "114132 requested and 11776 written" (no errno: a task's error,
    exit 2). A task's write that the disk refuses is ENOSPC naming the level file, which the
    driver takes as a full disk (exit 3, resumable); no half file is left."""
    from kraftcheck.spark import failures, workdir

    class Full(io.FileIO):
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")  # a buffered flush names no file

    monkeypatch.setattr(workdir, "open", lambda path, mode: Full(path, mode.replace("b", "")), raising=False)
    path = tmp_path / "levels" / "level-0003" / "part-00001.words"
    with pytest.raises(OSError) as full:
        workdir.save(path, np.arange(100, dtype=np.uint64))
    assert full.value.errno == errno.ENOSPC and full.value.filename == str(path)
    assert failures.disk_full(full.value) is full.value
    assert list(path.parent.iterdir()) == []


def test_the_resume_hint_names_the_option_the_command_gave(tmp_path):
    """A resumed run stopped again already has --resume DIR: the hint no longer tells it to put
    --resume "instead of --checkpoint", which the command does not have."""
    run = tmp_path / "run"
    first, out = _check("--spec", "two_phase", "--param", "rm=3", "--max-depth", "3", "--checkpoint", str(run), "-q")
    assert first.exit_code == 3 and f"--resume {run} instead of --checkpoint" in out, out
    again, out = _check("--spec", "two_phase", "--param", "rm=3", "--max-depth", "5", "--resume", str(run), "-q")
    assert again.exit_code == 3, out
    assert f"continue with the same command, a larger --max-depth and --resume {run}" in out, out
    assert "instead of" not in out, out


# -- a Spark work dir given to the local engine's --resume -----------------------------------------------------

def test_the_local_engine_refuses_a_spark_work_dir_instead_of_failing_inside(tmp_path):
    """A Spark run's identity has keys the local engine's lacks (engine, partitions): compared on
    the local run's keys only, the work dir passed as the local run's checkpoint, and its resume
    failed inside (KeyError, "internal error"). It is another run's: exit 2 saying what differs."""
    from kraftcheck.checker.explore.checkpoint import write_manifest
    from kraftcheck.spark.explorer import run_identity_on_spark
    work = tmp_path / "work"
    work.mkdir()
    write_manifest(work, run_identity_on_spark(_model("two_phase", rm=3), 4), {"level_start": [0, 1]})
    result, out = _check("--spec", "two_phase", "--param", "rm=3", "--resume", str(work))
    assert result.exit_code == 2, out
    assert "the checkpoint belongs to another run (engine: checkpoint \"spark\", this run null" in out, out
    assert "internal error" not in out and "Traceback" not in out


def test_a_spark_call_whose_thread_fails_before_it_runs_is_an_error_not_a_wait_forever():
    """PySpark's InheritableThread asks the JVM for the caller's job properties before the call
    runs: with the JVM killed just then, that raised on the thread, the call never ran, and the
    driver waited for it forever (the killed-JVM test timed out under load). The error is the
    waiting thread's now, and no thread traceback is printed."""
    import threading

    from kraftcheck.spark.waiting import wait_for

    class FailsFirst(threading.Thread):
        def __init__(self, target, **kwargs):
            def first_the_jvm():
                raise ConnectionResetError("the JVM went away")
            super().__init__(target=first_the_jvm, **kwargs)

    printed = []
    hook, threading.excepthook = threading.excepthook, printed.append
    try:
        with pytest.raises(ConnectionResetError, match="the JVM went away"):
            wait_for(lambda: 1, lambda elapsed: None if elapsed < 10 else pytest.fail("still waiting"),
                     lambda thread: None, "job", FailsFirst)
    finally:
        threading.excepthook = hook
    assert not printed
