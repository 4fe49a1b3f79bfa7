"""Faults around a Spark run: no executor, a master URL that is not Spark, a busy, removed or
damaged work dir, a killed Python worker, a full disk, a failing task, leftovers of a killed driver.

Each ends in the local engine's exact answer or a clear error with its documented exit code.
Spark is expensive to start, so these share the session's SparkContext (local[2], which
kraftcheck starts with task retries) wherever the fault allows, and the waits and refusals that
need no Spark are tested on their own parts.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraftcheck.checker.dirlock import lock_directory
from kraftcheck.checker.errors import SpecRaised, UsageError
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.cli.main import cli
from kraftcheck.spark import SparkExplorer, failures, leftovers, readiness, workdir
from kraftcheck.spark.session import with_task_retries
from kraftcheck.specs import spec_class

pytestmark = pytest.mark.spark


def _model(name: str, **params) -> Model:
    cls = spec_class(name)
    return Model(cls(cls.Params(**params)))


def _die_hard() -> Model:
    return _model("die_hard")


def _counts(result) -> tuple:
    return (result.initial_states, result.distinct_states, result.states_generated, result.depth, result.coverage(),
            [(v.check, [s.state for s in v.steps]) for v in result.violations])


# -- no silent wait -------------------------------------------------------------------------------

def _server(answer: bytes | None):
    """A server on 127.0.0.1 that answers every connection with ``answer`` once it has read
    something (None: accepts and says nothing); returns its port and a stop function."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(10)
                try:
                    conn.recv(4096)
                    if answer is not None:
                        conn.sendall(answer)
                    stop.wait(3)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def close() -> None:
        stop.set()
        thread.join()
        listener.close()

    return listener.getsockname()[1], close


def test_a_master_url_answered_by_something_else_is_refused_at_once():
    """An HTTP server (a web UI, the REST port) on the master's URL: exit 2 at once, naming what
    answered; Spark's own answer to the probe (a frame of its transport) is accepted."""
    port, close = _server(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    try:
        with pytest.raises(readiness.SparkWaitError, match="is not a Spark master.*HTTP/1.1 400"):
            readiness.check_master(f"spark://127.0.0.1:{port}")
    finally:
        close()
    # a StreamFailure frame, as a Spark master answers the probe: 8-byte length, type 8, ...
    port, close = _server(bytes.fromhex("000000000000001a08") + b"\x00" * 17)
    try:
        readiness.check_master(f"spark://127.0.0.1:{port}")
    finally:
        close()


class _ClusterWithoutExecutors:
    """What the readiness wait asks of a SparkContext, on a master that gives no executor."""

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
            return type("JavaContext", (), {"statusTracker": lambda self: Tracker()})()


def test_no_executor_stops_the_run_after_the_wait_saying_what_is_missing():
    """A master whose workers are missing: the progress line says what the run waits for, and
    after the wait the run stops with what to do (the CLI: exit 2, docs/spark.md)."""
    seen = []
    with pytest.raises(readiness.SparkWaitError) as refused:
        readiness.wait_for_executor(_ClusterWithoutExecutors(), 0.3, seen.append)
    message = str(refused.value)
    assert "spark://127.0.0.1:7077 has given this application no executor after 0.3 s" in message
    assert "start a worker" in message and "--spark-wait" in message
    assert seen and all(p.waiting.startswith("waiting for an executor from spark://127.0.0.1:7077") for p in seen)
    from kraftcheck.cli.terminal import progress_line
    assert progress_line(seen[-1]).startswith("waiting for an executor")


def test_a_start_that_does_not_end_is_stopped_at_its_bound():
    ended = threading.Event()
    with pytest.raises(readiness.SparkWaitError, match="did not take"):
        readiness.bounded(lambda: ended.wait(30), 0.3, "starting", lambda p: None, ended.set, "did not take")
    assert ended.is_set()  # the start was ended, not left running


def test_a_signal_while_spark_starts_ends_the_start_as_an_interrupt():
    """SIGTERM (or Ctrl-C) while the SparkContext starts: under the run's deferred stop, the
    signal only leaves the request, taken where the driver waits (never inside a py4j call); the
    start is ended and the run stops as interrupted (the command line: exit 130, one line)."""
    import signal
    from kraftcheck.checker import stop
    ended = threading.Event()

    def start_that_gets_a_signal() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        ended.wait(30)

    try:
        with stop.deferred(), pytest.raises(KeyboardInterrupt):
            readiness.bounded(start_that_gets_a_signal, 30, "starting", lambda p: None, ended.set, "did not take")
    finally:
        stop.stop_honoured()
    assert ended.is_set()  # the start was ended, not left running


def test_local_masters_get_task_retries():
    assert [with_task_retries(m) for m in ("local", "local[2]", "local[*]", "local[2,3]", "spark://h:7077")] == \
        ["local[1,4]", "local[2,4]", "local[*,4]", "local[2,3]", "spark://h:7077"]


def test_a_model_with_no_action_instances_is_refused_before_spark_starts():
    """Spark's tasks index candidate rows by the action instances: with none, the check is sent
    to the local engine, which explores the initial states alone (exit 2, Spark never started)."""
    import large_layout_specs

    model = Model(large_layout_specs.WideStill(large_layout_specs.WideStill.Params()))
    with pytest.raises(UsageError, match=r"no action instances.*--engine engine"):
        SparkExplorer().explore(model, Options(keep_going=True))


# -- a work dir belongs to one run ------------------------------------------------------------------

def test_a_busy_work_dir_is_refused_naming_its_holder(tmp_path):
    """A second run, or a --resume, on a work dir another run holds: exit 2 at once (before Spark
    starts) with the holder's pid and what to do."""
    work = tmp_path / "work"
    with lock_directory(work, "a Spark run (kraftcheck check --engine spark)"):
        result = CliRunner().invoke(cli, ["check", "--spec", "die_hard", "--engine", "spark", "--work-dir", str(work)])
        assert result.exit_code == 2, result.output
        assert "is in use by a Spark run" in result.output and f"pid {os.getpid()} " in result.output
        (work / "checkpoint.json").write_text("{}")
        resumed = CliRunner().invoke(cli, ["check", "--spec", "die_hard", "--engine", "spark", "--resume", str(work)])
        assert resumed.exit_code == 2 and f"pid {os.getpid()} " in resumed.output
    assert not list(Path(work).glob("levels"))


@pytest.fixture(scope="module")
def stopped_run_dir(spark_context, tmp_path_factory):
    """A run of die_hard stopped by --max-depth 3: a resumable work dir (copied by each test)."""
    work = tmp_path_factory.mktemp("stopped") / "work"
    result = SparkExplorer(spark_context, partitions=2, work_dir=str(work)).explore(_die_hard(), Options(max_depth=3))
    assert result.status == "incomplete" and result.checkpoint_dir == str(work)
    return work


@pytest.fixture
def stopped_run(stopped_run_dir, tmp_path):
    return Path(shutil.copytree(stopped_run_dir, tmp_path / "work"))


def _resume(spark_context, work: Path):
    return SparkExplorer(spark_context).explore(_die_hard(), Options(resume=True, checkpoint_dir=str(work)))


@pytest.mark.parametrize("damage", ["flipped byte", "flipped byte in a run", "truncated part", "missing run",
                                    "removed"])
def test_a_damaged_or_removed_work_dir_is_never_resumed(spark_context, stopped_run, damage):
    """Every level file and visited run is checked against the size and digest its writer put
    in the manifest before any is read: a file changed, cut short or gone is refused (exit 2)
    naming it, never resumed."""
    work = stopped_run
    if damage.startswith("flipped byte"):
        files = (workdir.level_dir(str(work), 1).glob("part-*.words") if damage == "flipped byte" else
                 (work / "visited").rglob("runs-*.fps"))
        changed = max(files, key=lambda p: p.stat().st_size)
        data = bytearray(changed.read_bytes())
        data[len(data) // 2] ^= 0x01
        changed.write_bytes(bytes(data))
        expected = f"does not hold the levels its manifest names .*{changed}.* was changed after its run wrote it"
    elif damage == "truncated part":
        part = max(workdir.level_dir(str(work), 1).glob("part-*.words"), key=lambda p: p.stat().st_size)
        part.write_bytes(part.read_bytes()[:-8])
        expected = "does not hold the levels its manifest names"
    elif damage == "missing run":
        run = next((work / "visited").rglob("runs-*.fps"))
        run.unlink()
        expected = "does not hold the levels its manifest names"
    else:
        shutil.rmtree(work)
        expected = "no Spark run to resume there"
    with pytest.raises(UsageError, match=expected):
        _resume(spark_context, work)


def test_a_work_dir_removed_mid_run_stops_it_and_stays_removed(spark_context, tmp_path):
    """rm -rf of the work dir while the run goes on: a clear error (exit 2), and neither the driver
    nor a task makes the directory again (a manifest there would claim levels that are gone)."""
    work = tmp_path / "work"

    def remove_at_level_2(p):
        if p.depth == 2 and work.exists():
            shutil.rmtree(work)

    with pytest.raises(UsageError, match="was removed .* while the run was going on"):
        SparkExplorer(spark_context, partitions=2, work_dir=str(work)).explore(_die_hard(), Options(keep_going=True),
                                                                              remove_at_level_2)
    assert not work.exists()


# -- every failure its cause and its exit code -----------------------------------------------------

def test_a_failed_task_says_its_error_and_where_and_a_full_disk_is_a_full_disk(spark_context):
    """Not py4j's "An error occurred while calling ...collectAndServe": the task's Python error,
    the line that raised it, and how often Spark tried (local mode retries now)."""
    def _raises_value_error(_):  # defined here: executors get it by value, not by this module's name
        raise ValueError("a task's own error")

    def _finds_the_disk_full(_):
        raise OSError(28, "No space left on device", "/work/levels/level-0003/part-00001.words")

    with pytest.raises(Exception) as failed:
        spark_context.parallelize([0], 1).map(_raises_value_error).collect()
    said = failures.task_error(failed.value)
    assert "ValueError: a task's own error (at " in said and "An error occurred while calling" not in said
    assert f"{__file__}:" in said and "in _raises_value_error" in said
    assert failures.disk_full(failed.value) is None
    with pytest.raises(Exception) as full:
        spark_context.parallelize([0], 1).map(_finds_the_disk_full).collect()
    found = failures.disk_full(full.value)
    assert found is not None and found.filename == "/work/levels/level-0003/part-00001.words"
    assert found.errno == errno.ENOSPC


@pytest.mark.parametrize("code", [errno.EDQUOT, errno.EFBIG])
def test_a_task_past_its_quota_or_file_size_limit_is_said_as_such(spark_context, code):
    """A task's EDQUOT was said as a full disk (free space, not the quota), and its EFBIG (ulimit
    -f) as a failed job, exit 2: each is now the errno's own reason, as on the local engine."""
    def _refused(_):
        raise OSError(code, os.strerror(code), "/work/levels/level-0003/part-00001.words")

    with pytest.raises(Exception) as refused:
        spark_context.parallelize([0], 1).map(_refused).collect()
    found = failures.disk_full(refused.value)
    assert found is not None and (found.errno, found.filename) == (code, "/work/levels/level-0003/part-00001.words")


def test_a_full_disk_ends_the_run_incomplete_with_its_statistics_and_resumable(spark_context, tmp_path, monkeypatch):
    """ENOSPC while a level is being made durable: exit 3 (incomplete, "the disk is full ..."),
    the statistics of the levels explored, and the work dir resumes to the local engine's answer."""
    from kraftcheck.cli.check_cmd import exit_code
    from kraftcheck.spark import explorer
    work = tmp_path / "work"
    written = []

    def full_after_two(directory, identity, progress):
        if len(written) == 2:
            raise OSError(28, "No space left on device", str(Path(directory) / "checkpoint.json"))
        written.append(json.loads(json.dumps(progress)))
        real(directory, identity, progress)

    real = explorer.write_manifest
    monkeypatch.setattr(explorer, "write_manifest", full_after_two)
    stopped = SparkExplorer(spark_context, partitions=2, work_dir=str(work)).explore(_die_hard(),
                                                                                   Options(keep_going=True))
    assert (stopped.status, exit_code(stopped)) == ("incomplete", 3)
    assert stopped.incomplete_reason == f"the disk is full writing {work / 'checkpoint.json'}"
    assert stopped.distinct_states > 0 and stopped.checkpoint_dir == str(work)
    monkeypatch.setattr(explorer, "write_manifest", real)
    assert json.loads((work / "checkpoint.json").read_text())["level_start"] == written[-1]["level_start"]
    resumed = SparkExplorer(spark_context).explore(_die_hard(), Options(keep_going=True, resume=True,
                                                                        checkpoint_dir=str(work)))
    assert _counts(resumed) == _counts(Engine().explore(_die_hard(), Options(keep_going=True)))


FAULTY_WORKERS = '''
import os, signal
from pyspark import TaskContext
from kraftcheck.specs.die_hard import DieHard

KILL, RAISE, DRIVER = {kill!r}, {raise_!r}, {driver}


class DieHardFaultyWorkers(DieHard):
    """die_hard, but where the driver's marker files say so, a Python worker building the model
    is killed (SIGKILL: the first one, once) or its fields() raise (every time, each attempt
    noted in the marker)."""

    name = "die_hard_faulty_workers"

    def fields(self):
        if os.getpid() != DRIVER:
            try:
                os.rename(KILL, KILL + ".taken")
            except FileNotFoundError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
            if os.path.exists(RAISE):
                task = TaskContext.get()
                with open(RAISE, "a") as f:
                    f.write(f"{{task.stageId()}} {{task.partitionId()}} {{task.attemptNumber()}}\\n")
                raise ZeroDivisionError("the spec's own, on an executor")
        return super().fields()
'''


@pytest.fixture(scope="module")
def faulty_workers(tmp_path_factory):
    """The spec class of FAULTY_WORKERS (one file, so its kernels are compiled once) and its two
    marker files' paths (kill, raise), neither present."""
    where = tmp_path_factory.mktemp("faulty")
    kill, raise_ = where / "kill-one-worker", where / "raise-in-fields"
    (where / "faulty_workers.py").write_text(FAULTY_WORKERS.format(kill=str(kill), raise_=str(raise_),
                                                                   driver=os.getpid()))
    return spec_class(f"{where / 'faulty_workers.py'}:DieHardFaultyWorkers"), kill, raise_


def test_a_killed_python_worker_is_retried_to_the_local_engines_answer(spark_context, faulty_workers):
    """Local mode with task retries (local[2] is started as local[2,4]): a Python worker killed
    mid-task is one failed attempt, not the end of the run."""
    cls, kill, _ = faulty_workers
    kill.write_text("")
    options = Options(keep_going=True)
    result = SparkExplorer(spark_context, partitions=2).explore(Model(cls(cls.Params())), options)
    assert not kill.exists() and Path(f"{kill}.taken").exists(), "no Python worker was killed"
    assert _counts(result) == _counts(Engine().explore(Model(cls(cls.Params())), options))


def test_a_specs_own_error_in_a_task_stops_the_run_at_its_first_attempt(spark_context, faulty_workers):
    """A spec's error is the same on every attempt: the task hands it back, the driver raises it
    (exit 2 from the command line, the spec's function, error and line), and Spark never tries
    the task again."""
    cls, _, raised = faulty_workers
    raised.write_text("")
    try:
        with pytest.raises(SpecRaised) as caught:
            # without the deadlock check: a model the Python workers have no kernels of yet, so they build it
            model = Model(cls(cls.Params()), deadlock=False)
            assert model.check_deadlock != Model(cls(cls.Params())).check_deadlock
            SparkExplorer(spark_context, partitions=2).explore(model, Options(keep_going=True))
        attempts = [line.split() for line in raised.read_text().splitlines()]
    finally:
        raised.unlink()
    said = str(caught.value)
    assert said.startswith("fields() of spec die_hard_faulty_workers raised ZeroDivisionError: the spec's own"), said
    raising = next(i for i, line in enumerate(FAULTY_WORKERS.splitlines(), 1) if "raise ZeroDivisionError" in line)
    assert f"faulty_workers.py:{raising}; " in said  # the spec's own file, not the copy the executors ran
    assert attempts and all(attempt == "0" for _, _, attempt in attempts), attempts


@pytest.fixture(scope="module")
def faulty_spec(spark_context):
    """test_faults_spec_errors.py, whose ``Faulty`` counts x from 0 to 3 and whose ``fault`` says
    which function raises on x = 2, importable on the executors as it is on the driver."""
    import test_faults_spec_errors
    spark_context.addPyFile(test_faults_spec_errors.__file__)
    return test_faults_spec_errors


@pytest.mark.parametrize("spec, fault, what, path", [
    ("Faulty", 2, "invariant bounded", ({"x": 0}, {"x": 1}, {"x": 2})),  # on a new level, in its ordering task
    ("Faulty", 1, "action Step", ({"x": 0}, {"x": 1}, {"x": 2})),  # expanding a new level, in its ordering task
    ("Faulty", 3, "constraint inside", ({"x": 0}, {"x": 1}, {"x": 2})),  # on a successor, in a task
    ("StartsAtTwo", 2, "invariant bounded", ({"x": 2},)),  # on an initial state, on the driver
])
def test_a_specs_error_on_a_state_says_the_state_and_the_path_as_the_local_engine(spark_context, faulty_spec, spec,
                                                                                   fault, what, path):
    """The state a spec's function raised on and the path to it, rebuilt from the work dir as a
    violation's trace is: the local engine's error, word for word (the command line: exit 2)."""
    cls = getattr(faulty_spec, spec)

    def model():  # the constraint only where it raises: the kernels' distinct-successor path otherwise
        return Model(cls(cls.Params(fault)), constraints=None if what.startswith("constraint") else [])

    with pytest.raises(SpecRaised) as local:
        Engine(compile="now").explore(model(), Options(keep_going=True))
    with pytest.raises(SpecRaised) as spark:
        SparkExplorer(spark_context, partitions=2).explore(model(), Options(keep_going=True))
    said = str(spark.value)
    assert said == str(local.value) and said.startswith(what) and f"{faulty_spec.__file__}:{faulty_spec.LINE}; " in said, said
    assert spark.value.state == path[-1] and [fields for _, fields in spark.value.path] == list(path), said


def test_kernels_that_compute_otherwise_than_the_spec_stop_a_spark_run_as_the_local_engine(spark_context):
    """The executors' compiled kernels are audited against the spec's Python as the local engine's
    are (checker/explore/kernel_audit.py): a spec whose arithmetic numba runs otherwise (x * 2**64
    wraps in int64) gets no verdict from Spark either, the task's error raised on the driver."""
    import odd_specs

    from kraftcheck.checker.errors import KernelsDisagree
    spark_context.addPyFile(odd_specs.__file__)
    model = Model(odd_specs.PastInt64(odd_specs.PastInt64.Params()))
    with pytest.raises(KernelsDisagree) as caught:
        SparkExplorer(spark_context, partitions=2).explore(model, Options(keep_going=True))
    said = str(caught.value)
    assert said.startswith("the compiled kernels of spec past_int64 disagree with its functions run as Python on "
                           "a state: the successor under StepPastInt64 differs in x (1 compiled, 2 in Python)"), said


# -- an interrupt ----------------------------------------------------------------------------------

def test_sigterm_mid_run_stops_it_interrupted_with_its_levels_resumable(spark_context, tmp_path, capfd):
    """SIGTERM while the run explores: taken where the driver waits (never inside a py4j call),
    the running job cancelled; the run ends interrupted with the statistics of its finished
    levels, nothing printed (no py4j or Spark traceback), and --resume gives the uninterrupted
    answer. (The command line's exit 130 and summary: the lost-driver-JVM test's path.)"""
    import signal
    work = tmp_path / "work"
    model = _die_hard()
    options = Options(keep_going=True)

    def terminate_at_level_3(p):
        if p.depth == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    stopped = SparkExplorer(spark_context, partitions=2, work_dir=str(work)).explore(model, options,
                                                                                   terminate_at_level_3)
    assert signal.getsignal(signal.SIGTERM) is before  # the run's handler is gone with it
    assert stopped.interrupted and stopped.incomplete_reason == "interrupted" and stopped.depth >= 3
    assert stopped.distinct_states > 0 and stopped.checkpoint_dir == str(work)
    said = capfd.readouterr()
    assert "Traceback" not in said.err + said.out and "py4j" not in said.err, said.err[-3000:]
    resumed = SparkExplorer(spark_context).explore(model, Options(keep_going=True, resume=True,
                                                                  checkpoint_dir=str(work)))
    assert resumed.resumed_from_level >= 3
    assert _counts(resumed) == _counts(Engine().explore(model, options))


# -- nothing left behind ----------------------------------------------------------------------------

def test_a_dead_drivers_directories_are_swept_and_a_live_ones_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    names = {f"{leftovers.SHIP_PREFIX}{dead_pid}-kraftcheck_spec_x": False,
             f"{leftovers.SCRATCH_PREFIX}{dead_pid}-abc": False,
             f"{leftovers.WORK_PREFIX}{dead_pid}-abc": False,
             f"{leftovers.SCRATCH_PREFIX}{os.getpid()}-abc": True,  # this live driver's
             f"{leftovers.SHIP_PREFIX}{os.getppid()}-kraftcheck_spec_y": True,  # a live process's
             "kraftcheck-spark-ab12cd": True}  # not named by a pid
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "blockmgr-1").mkdir()
    assert sorted(p.name for p in leftovers.sweep(str(tmp_path))) == sorted(n for n, kept in names.items()
                                                                            if not kept)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n for n, kept in names.items() if kept)


def test_the_driver_jvms_temporary_files_go_to_its_own_directory(spark_context):
    """Spark's JVM keeps temporary files in java.io.tmpdir (what spark-submit stages, the lz4
    library it unpacks), /tmp by default whatever TMPDIR says: a JVM killed outright left them
    there, dozens a day. They go to the driver's own directory under TMPDIR, which the driver (or,
    if it was killed, the next run) removes."""
    import tempfile
    scratch = spark_context._kraftcheck_scratch
    assert scratch is not None and scratch.parent == Path(tempfile.gettempdir())
    assert scratch.name.startswith(f"{leftovers.SCRATCH_PREFIX}{os.getpid()}-")
    assert spark_context._jvm.System.getProperty("java.io.tmpdir") == str(scratch)


# -- a lost driver JVM ------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_killed_driver_jvm_ends_the_run_interrupted_with_its_statistics(tmp_path):
    """kill -9 of the driver's own Java process mid-run: exit 130 with the statistics of the
    levels finished, the cause in one line and the resume hint; no traceback, and nothing left in
    the temporary directory: the JVM's own files (spark-*, liblz4-java-*.so) went to /tmp, and the
    JVM killed outright never removed them."""
    import signal

    import psutil
    from test_spark import _wait_for
    work = tmp_path / "work"
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    # one core: one Python worker to start, and the kill does not depend on the cores
    driver = subprocess.Popen([str(Path(sys.executable).parent / "kraftcheck"), "check", "--spec", "two_phase",
                               "--param", "rm=3", "--continue", "--engine", "spark", "--master", "local[1]",
                               "--work-dir", str(work), "--no-color"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                              env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "TMPDIR": str(temporary)})
    try:
        _wait_for("two finished levels", lambda: driver.poll() is not None or _finished_levels(work) >= 2, 300, [])
        assert driver.poll() is None, "the run ended before its JVM could be killed"
        jvms = [p for p in psutil.Process(driver.pid).children(recursive=True) if p.name() == "java"]
        assert len(jvms) == 1, jvms
        (scratch,) = temporary.glob(f"{leftovers.SCRATCH_PREFIX}{driver.pid}-*")
        assert f"-Djava.io.tmpdir={scratch}" in jvms[0].cmdline()
        jvms[0].kill()
        out, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    assert driver.returncode == 130, err[-3000:]
    assert "Traceback" not in err + out and "py4j" not in err, err[-3000:]
    said = " ".join((out + err).split())  # the summary's lines are wrapped
    assert "distinct states" in out and "the Spark driver's Java process ended" in said, out + err
    assert "figures unavailable" not in said  # the levels finished before have theirs
    assert f"--resume {work}" in err
    assert not list(temporary.iterdir())


def _finished_levels(work: Path) -> int:
    try:
        return len(json.loads((work / "checkpoint.json").read_text())["level_start"])
    except (OSError, ValueError, KeyError):
        return 0


def test_the_driver_jvms_chatter_is_left_out_and_everything_else_passed_on(capfd):
    """kraftcheck check --engine spark -q printed the JVM's incubator note, log4j's banner and
    Spark's startup WARN lines, all before Spark's log level could be set: its standard error is
    relayed without them, errors and anything else whole, in order, a last line without its end too."""
    from kraftcheck.spark.jvm_output import JvmOutput
    lines = ["WARNING: Using incubator modules: jdk.incubator.vector",
             "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
             "26/12/06 19:53:40 WARN Utils: Your hostname, vm, resolves to a loopback address",
             'Setting default log level to "WARN".',
             "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).",
             "26/12/06 19:53:41 INFO SparkContext: Running Spark version 4.3.0",
             "26/12/06 19:53:42 ERROR Executor: Exception in task 0.0",
             "java.lang.OutOfMemoryError: Java heap space", "\tat org.apache.spark.Foo.bar(Foo.scala:1)",
             "Traceback (most recent call last):", "Error: the last words, without a line end"]
    output = JvmOutput()
    capfd.readouterr()
    subprocess.run(["printf", "%s", "\n".join(lines)], stdout=output.write_end, check=True)
    output.finish(timeout=30)
    assert capfd.readouterr().err == "\n".join(lines[6:])
