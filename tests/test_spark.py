"""The Spark explorer (kraftcheck.spark): the local engine's exact numbering, its files, the
command line, and a real standalone cluster on 127.0.0.1.

The conformance suite (test_conformance.py) runs the Spark explorer on every spec too; these tests
look inside: the level files must be the local engine's, state for state, and the visited set
must be partitioned by hash as designed. Every Spark process a test starts is stopped in a finally.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.model import Model
from kraftcheck.cli.main import cli
from kraftcheck.spark import SparkExplorer, leftovers, workdir
from kraftcheck.specs import spec_class

pytestmark = pytest.mark.spark
KRAFTCHECK = Path(sys.executable).parent / "kraftcheck"


def _model(name, **params):
    cls = spec_class(name)
    return Model(cls(cls.Params(**params)))


def _summary(result):
    return (result.status, result.initial_states, result.distinct_states, result.states_generated, result.depth,
            result.coverage(), [(v.check, v.kind, [(s.label, s.state) for s in v.steps]) for v in result.violations])


def _spark_level(root: Path, level: int, kind: str, dtype, nwords: int = 0) -> np.ndarray:
    parts = sorted(workdir.level_dir(str(root), level).glob(f"part-*.{kind}"))
    assert parts, f"no part files of level {level}"
    return np.concatenate([workdir.load(p, dtype, nwords) for p in parts])


@pytest.fixture(scope="module")
def measured_run(spark_context, tmp_path_factory):
    """Two-Phase Commit rm=3 with --continue on 3 partitions, its work dir kept: the run that the
    tests of the level files, the visited set and the figures read."""
    work = tmp_path_factory.mktemp("measured") / "work"
    result = SparkExplorer(spark_context, partitions=3, work_dir=str(work)).explore(
        _model("two_phase", rm=3), Options(keep_going=True))
    return result, work


def test_levels_are_the_local_engines_state_for_state(measured_run, tmp_path):
    """Every level's words, parents and labels, concatenated over the parts, equal the local
    engine's level files (its --checkpoint format): the same states in the same order."""
    spark, work = measured_run
    model = _model("two_phase", rm=3)
    local = Engine(compile="now").explore(model, Options(keep_going=True, checkpoint_dir=str(tmp_path / "local")))
    assert _summary(spark) == _summary(local)
    nwords = model.layout.nwords
    for level in range(local.depth):
        words = np.fromfile(tmp_path / "local" / f"level-{level:04d}.words", np.uint64).reshape(-1, nwords)
        parents = np.fromfile(tmp_path / "local" / f"level-{level:04d}.parents", np.uint32).astype(np.int64)
        labels = np.fromfile(tmp_path / "local" / f"level-{level:04d}.labels", np.uint16)
        spark_parents = _spark_level(work, level, "parents", np.uint64)
        spark_parents = np.where(spark_parents == workdir.INITIAL_PARENT, 0xFFFFFFFF, spark_parents).astype(np.int64)
        assert np.array_equal(_spark_level(work, level, "words", np.uint64, nwords), words)
        assert np.array_equal(spark_parents, parents)
        assert np.array_equal(_spark_level(work, level, "labels", np.uint16), labels)


def test_visited_set_is_partitioned_by_hash_in_disjoint_runs_sorted_by_fingerprint(measured_run):
    """Each bucket's runs hold its states once, sorted by (fingerprint, words), with their
    fingerprints beside them; merged as the levels come, so a bucket keeps only the few runs
    that cover its levels (the driver removes the runs a merge replaced)."""
    result, tmp_path = measured_run
    model = _model("two_phase", rm=3)
    partitions = 3
    nwords = model.layout.nwords
    every_level = np.concatenate([_spark_level(tmp_path, level, "words", np.uint64, nwords)
                                  for level in range(result.depth)])
    seen = []
    for bucket in range(partitions):
        runs = workdir.visited_runs(str(tmp_path), bucket, result.depth - 1)
        assert runs and runs[0][0] == 0, f"bucket {bucket} has no runs"
        assert workdir.runs_present(str(tmp_path), bucket) == runs, "a replaced run was left behind"
        assert len(runs) < result.depth, "the runs were not merged"
        for run in runs:
            fps = workdir.load(workdir.run_path(str(tmp_path), bucket, *run, "fps"), np.uint64)
            states = workdir.load(workdir.run_path(str(tmp_path), bucket, *run, "words"), np.uint64, nwords)
            assert np.array_equal(fps, fingerprints(states)), "a run's .fps file does not match its states"
            rows = [tuple(r) for r in states]
            assert len(set(rows)) == len(rows), "a run holds a state twice"
            keyed = [(int(f),) + r for f, r in zip(fps, rows)]
            assert keyed == sorted(keyed), "a run is not sorted by (fingerprint, words)"
            if states.shape[0]:
                buckets = (fps >> np.uint64(40)) % np.uint64(partitions)
                assert set(buckets.tolist()) == {bucket}
            seen += rows
    assert len(seen) == len(set(seen)) == result.distinct_states == every_level.shape[0]
    assert set(seen) == {tuple(r) for r in every_level}
    assert not (tmp_path / "candidates").exists(), "a level's candidate files were left behind"


@pytest.mark.parametrize("partitions", [1, 3, 5])
@pytest.mark.parametrize("name,params", [("two_phase_eager_commit", {"rm": 3}), ("die_hard", {})])
def test_first_violation_counts_do_not_depend_on_partitions(spark_context, monkeypatch, partitions, name,
                                                             params):
    """A run that stops at its first violation counts up to the violating transition, wherever it
    falls among the tasks of its level. Small levels run a task a core, each for a few buckets and
    parts; with 5 partitions, levels run as large ones do, a task a partition."""
    from kraftcheck.spark import explorer
    if partitions == 5:
        monkeypatch.setattr(explorer, "SMALL_LEVEL_TRANSITIONS", 0)
    model = _model(name, **params)
    local = Engine(compile="now").explore(model, Options())
    assert local.status == "violated"
    spark = SparkExplorer(spark_context, partitions=partitions).explore(model, Options())
    assert _summary(spark) == _summary(local)
    # two stages a level (the driver expands the initial states); the figures count the small job
    # that recounts up to the violation
    stages_and_tasks = [(f["stages"], f["tasks"]) for f in spark.spark["levels"]]
    per_stage = 5 if partitions == 5 else min(partitions, spark_context.defaultParallelism)
    assert stages_and_tasks == [(2, 2 * per_stage)] * (len(stages_and_tasks) - 1) + [(3, 2 * per_stage + 1)]


@pytest.mark.parametrize("name,params", [("two_phase", {"rm": 5}), ("die_hard", {}),
                                         ("kafka", {"lossy_shutdowns": 0, "fences": 0, "min_isr_changes": 1})])
def test_fingerprints_give_the_local_fingerprint_engines_counts_and_estimates(spark_context, name, params,
                                                                              tmp_path):
    """--fingerprints on Spark: visited runs of 64-bit fingerprints in range buckets; the same
    counts and both of TLC's estimates as the local engine's FingerprintSet."""
    options = Options(keep_going=True, fingerprints=True)
    local = Engine().explore(_model(name, **params), options)
    spark = SparkExplorer(spark_context, partitions=3, work_dir=str(tmp_path / "w")).explore(_model(name, **params),
                                                                                            options)
    assert (spark.distinct_states, spark.states_generated, spark.depth, spark.status) == \
        (local.distinct_states, local.states_generated, local.depth, local.status)
    assert [(v.check, v.depth) for v in spark.violations] == [(v.check, v.depth) for v in local.violations]
    assert spark.fingerprints and spark.collision_probability == local.collision_probability
    runs = list((tmp_path / "w" / "visited").rglob("runs-*"))
    assert runs and all(r.suffix == ".fps" for r in runs)  # no states stored, only their fingerprints
    assert sum(np.fromfile(r, np.uint64).size for r in runs) == local.distinct_states  # 8 bytes a state


@pytest.mark.parametrize("name,params", [("two_phase_eager_commit", {"rm": 3})])
def test_fingerprint_estimates_of_a_run_stopped_in_a_level_count_only_what_it_counts(spark_context, name, params):
    """--fingerprints without --continue: the run stops at its first violation, inside a level; the
    estimates are over the states it counts (the reference explorer's set), not over the whole
    level it stopped in (which gave an optimistic estimate of 2.94e-15 instead of 2.72e-15)."""
    from kraftcheck.checker.explore.reference import ReferenceExplorer
    options = Options(fingerprints=True)
    reference = ReferenceExplorer().explore(_model(name, **params), options)
    spark = SparkExplorer(spark_context, partitions=3).explore(_model(name, **params), options)
    assert reference.status == spark.status == "violated"
    assert (spark.distinct_states, spark.states_generated) == (reference.distinct_states, reference.states_generated)
    assert spark.collision_probability == reference.collision_probability


def test_limits_make_the_run_incomplete(spark_context, tmp_path):
    """Exact at --max-depth; --max-states stops after the level that passes it, whose expansion
    (done before the driver knew) is left out of the counts and its candidates removed."""
    model = _model("two_phase", rm=3)
    deep = SparkExplorer(spark_context, partitions=2, work_dir=str(tmp_path / "deep")).explore(
        model, Options(max_depth=3))
    local = Engine(compile="now").explore(model, Options(max_depth=3))
    assert (deep.status, deep.depth, deep.distinct_states, deep.states_generated) == \
        ("incomplete", local.depth, local.distinct_states, local.states_generated)
    assert "--max-depth 3" in deep.incomplete_reason
    wide = SparkExplorer(spark_context, partitions=2, work_dir=str(tmp_path / "wide")).explore(
        model, Options(max_states=50))
    full = Engine(compile="now").explore(model, Options(keep_going=True, max_depth=wide.depth))
    assert wide.status == "incomplete" and "--max-states 50" in wide.incomplete_reason
    assert (wide.distinct_states, wide.states_generated) == (full.distinct_states, full.states_generated)
    assert wide.distinct_states > 50
    for run in ("deep", "wide"):
        assert not (tmp_path / run / "candidates").exists(), f"the {run} run left candidate files"


def test_work_dir_must_be_new_or_empty(spark_context, tmp_path):
    (tmp_path / "old.txt").write_text("x")
    with pytest.raises(Exception, match="not an empty directory"):
        SparkExplorer(spark_context, work_dir=str(tmp_path)).explore(_model("die_hard"), Options())


# -- the command line ---------------------------------------------------------------------------

def _one_error_line(result) -> str:
    errors = [line for line in result.stderr.splitlines() if line.startswith("kraftcheck: error")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args,message", [
    (["--engine", "spark", "--master", "spark://127.0.0.1:{port}", "--work-dir", "{tmp}/shared"],
     "cannot reach the Spark master"),
    # a cluster's executors do not see the driver's temporary directory: refused before Spark starts
    (["--engine", "spark", "--master", "spark://127.0.0.1:{port}"], "give one with --work-dir DIR"),
    (["--master", "local[2]"], "need --engine spark"),
    (["--engine", "spark", "--spark-conf", "spark.executor.memory"], "give KEY=VALUE"),
    (["--engine", "spark", "--resume", "{tmp}"], "no Spark run to resume there"),
    (["--engine", "spark", "--spark-conf", "spark.kraftcheck.noExecutorWait=soon"], "give a positive time"),
])
def test_bad_spark_input_exits_2_with_one_clear_line(tmp_path, monkeypatch, args, message):
    args = [a.format(port=_free_port(), tmp=tmp_path) for a in args]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    result = CliRunner().invoke(cli, ["check", "--spec", "die_hard", *args], catch_exceptions=False)
    assert result.exit_code == 2
    assert message in _one_error_line(result)
    assert not list(scratch.glob("kraftcheck-spark-*"))  # no work dir left behind by a run that never started


def test_a_relative_or_home_work_dir_reaches_the_executors_as_an_absolute_path(tmp_path, monkeypatch):
    """Executors run in working directories of their own: the driver passes the work dir on
    absolute, with ~ expanded."""
    from kraftcheck.spark import SparkExplorer
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root, temporary, hold, _ = SparkExplorer(master="local[1]", work_dir="run1")._take_work_dir(Options())
    hold.release()
    assert (root, temporary) == (tmp_path / "run1", False) and root.is_dir()
    root, _, hold, _ = SparkExplorer(master="local[1]", work_dir="~/run2")._take_work_dir(Options())
    hold.release()
    assert root == tmp_path / "home" / "run2" and root.is_dir()


def test_non_empty_work_dir_exits_2(tmp_path):
    (tmp_path / "old.txt").write_text("x")
    result = CliRunner().invoke(cli, ["check", "--spec", "die_hard", "--engine", "spark", "--work-dir",
                                      str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 2
    assert "is not empty" in _one_error_line(result)


def test_no_java_exits_2(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    result = CliRunner().invoke(cli, ["check", "--spec", "die_hard", "--engine", "spark"], catch_exceptions=False)
    assert result.exit_code == 2
    assert "Spark needs Java" in _one_error_line(result)


def _cli_start(tmp_path: Path, name: str, *args: str, env=None, cwd=None) -> tuple[subprocess.Popen, Path]:
    """``kraftcheck check`` started in a process of its own (a Spark driver needs one), with the
    path of its JSON report (``_cli_report`` waits for it)."""
    report = tmp_path / f"{name}.json"
    return subprocess.Popen([str(KRAFTCHECK), "check", "--json", str(report), "--trace-dir", str(tmp_path / name),
                             "--no-color", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True), report


def _cli_report(started: tuple[subprocess.Popen, Path]) -> tuple[int, dict]:
    """The exit code and the JSON report of a ``_cli_start``-ed check, once it has ended."""
    process, report = started
    _, err = process.communicate(timeout=600)
    assert report.exists(), err[-3000:]
    return process.returncode, json.loads(report.read_text())


COMPARED = ("result", "initial_states", "states_generated", "distinct_states", "depth", "coverage")


def _same_answer(a: dict, b: dict) -> None:
    assert {k: a[k] for k in COMPARED} == {k: b[k] for k in COMPARED}
    assert [(v["invariant"], v["depth"], v["actions"]) for v in a["violations"]] == \
        [(v["invariant"], v["depth"], v["actions"]) for v in b["violations"]]


# -- resume after the driver is killed ---------------------------------------------------------

def _manifest_levels(work: Path) -> int:
    try:
        return len(json.loads((work / "checkpoint.json").read_text())["level_start"])
    except (OSError, ValueError, KeyError):
        return 0


def test_killed_driver_resumes_to_identical_counts(spark_context, tmp_path):
    """SIGKILL the driver (and the Java process it started) after a few levels; --resume ends with
    the uninterrupted run's counts, coverage and counterexamples. What the two left in the
    temporary directory, its JVM's files included, is in one directory, which the next run removes.
    Under -q the driver printed none of Spark's banner and startup warnings, which it printed before."""
    work = tmp_path / "work"
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    check = ["--spec", "two_phase_eager_commit", "--param", "rm=3", "--continue"]
    # one core: one Python worker to start, and the kill does not depend on the cores
    with open(tmp_path / "out", "w+") as out:
        driver = subprocess.Popen([str(KRAFTCHECK), "check", *check, "--engine", "spark", "--master", "local[1]",
                                   "--work-dir", str(work), "-q"], start_new_session=True,
                                  stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "TMPDIR": str(temporary)})
        try:
            _wait_for("three finished levels", lambda: _manifest_levels(work) >= 3 or driver.poll() is not None,
                      300, [])
            assert driver.poll() is None, "the run finished before it could be killed"
            said = (tmp_path / "out").read_text()  # read before the kill: what it cuts off is not the run's to say
            for chatter in ("incubator modules", "log4j", "Setting default log level", " WARN "):
                assert chatter not in said, said  # kraftcheck's own notes on its kernel cache may be there
        finally:
            _stop(driver, first=signal.SIGKILL)
    scratch = list(temporary.glob(f"{leftovers.SCRATCH_PREFIX}{driver.pid}-*"))
    assert len(scratch) == 1 and list(scratch[0].glob("liblz4-java-*.so")), "the JVM's files are the driver's"
    assert not [p.name for p in temporary.iterdir() if p.name.startswith(("spark-", "liblz4-java-"))]
    assert leftovers.sweep(str(temporary)) == scratch and not scratch[0].exists()
    killed_at = _manifest_levels(work)
    model = _model("two_phase_eager_commit", rm=3)
    # the resumed run on this process's context (the killed driver's was its own)
    resumed = SparkExplorer(spark_context).explore(model, Options(keep_going=True, resume=True,
                                                                  checkpoint_dir=str(work)))
    assert _summary(resumed) == _summary(Engine().explore(model, Options(keep_going=True)))
    assert resumed.resumed and resumed.resumed_from_level == killed_at >= 3
    # the killed driver's figures were saved with its levels: the resumed report has every level;
    # two stages each, but the level the run resumed at, whose expansion is a job of its own
    levels = resumed.spark["levels"]
    assert [f["level"] for f in levels] == list(range(resumed.depth))
    assert [f["stages"] for f in levels] == [2] * (killed_at - 1) + [3] + [2] * (resumed.depth - killed_at)
    assert not (work / "candidates").exists()
    again = CliRunner().invoke(cli, ["check", *check, "--engine", "spark", "--resume", str(work)])
    assert again.exit_code == 2 and "already finished" in _one_error_line(again)


def test_resume_refuses_another_runs_work_dir(spark_context, tmp_path):
    work = tmp_path / "work"
    first = SparkExplorer(spark_context, work_dir=str(work)).explore(_model("die_hard"), Options(max_depth=2))
    assert first.status == "incomplete"
    result = CliRunner().invoke(cli, ["check", "--spec", "die_hard", "--param", "big=9", "--engine", "spark",
                                      "--resume", str(work)])
    assert result.exit_code == 2 and "belongs to another run" in _one_error_line(result)


# -- a standalone cluster ------------------------------------------------------------------------

def _spark_class() -> Path:
    import pyspark
    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait_for(what: str, predicate, timeout: float, logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    tails = "\n".join(f"--- {p}\n{p.read_text()[-2000:]}" for p in logs if p.exists())
    raise AssertionError(f"timed out waiting for {what}\n{tails}")


def _stop(process: subprocess.Popen, first: int = signal.SIGTERM) -> None:
    """Stop a process this test started, and what it started (its own process group: a worker's
    executors, a driver's Java process)."""
    for sig, wait in ((first, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


WORKER_WAIT_S = 20  # for an executor to start, on a busy machine
LOST_WAIT_S = 2  # for an executor once the workers are gone (spark.kraftcheck.noExecutorWait)


@pytest.mark.slow
def test_standalone_cluster_runs_a_spec_file_in_a_relative_work_dir(tmp_path):
    """A master and two workers on 127.0.0.1 (spark-class from the PySpark distribution), each
    worker with a work dir of its own, so its executors run in directories of their own. The
    driver, in a third directory, checks a spec given as a file (shipped to the executors, with a
    module beside it that it imports: the driver imports it under a name of its own, and
    executors build the model by importing that name) with a relative --work-dir: resolved on the
    driver, every executor writes the levels and the visited runs into that one directory, none
    into its own. The command line's answer equals the local engine's, with Spark's figures, and
    its trace replays. Before
    the workers start, a run on the master alone stops after --spark-wait with exit 2 saying what
    is missing; after, a run whose workers are killed mid-run (executors with them) stops after
    spark.kraftcheck.noExecutorWait without an executor: exit 3, the statistics, the resume hint.
    Every process is stopped, also on failure."""
    port = _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    # the cluster's JVMs (master, workers, their executors) keep their files here, not in /tmp:
    # the workers killed below, and their executors, never remove theirs
    cluster_tmp = tmp_path / "cluster-tmp"
    cluster_tmp.mkdir()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(_spark_class().parent.parent),
           "SPARK_NO_DAEMONIZE": "1", "SPARK_LOCAL_DIRS": str(cluster_tmp),
           "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={cluster_tmp}"}
    spec_file = tmp_path / "specs" / "eager_commit_file.py"
    spec_file.parent.mkdir()
    text = (Path(__file__).parents[1] / "specs" / "two_phase_eager_commit.py").read_text()
    # it imports a module beside it, as a script would: shipped with it
    (spec_file.parent / "commit_names.py").write_text('NAME = "eager_commit_file"\n')
    text = text.replace("from kraftcheck.checker.spec import",
                        "from commit_names import NAME\nfrom kraftcheck.checker.spec import")
    spec_file.write_text(text.replace('name = "two_phase_eager_commit"', 'name = NAME'))
    driver_dir = tmp_path / "driver"
    driver_dir.mkdir()
    processes: list[subprocess.Popen] = []
    logs: list[Path] = []

    def driver(wait: int, *args: str) -> subprocess.Popen:
        processes.append(subprocess.Popen([str(KRAFTCHECK), "check", "--engine", "spark", "--master", master_url,
                                           "--spark-wait", str(wait), "--no-color", *args], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, start_new_session=True,
                                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}))
        return processes[-1]

    def start(name: str, *args: str, **extra_env: str) -> subprocess.Popen:
        log = tmp_path / f"{name}.log"
        logs.append(log)
        with open(log, "wb") as f:
            processes.append(subprocess.Popen([str(_spark_class()), *args], stdout=f, stderr=subprocess.STDOUT,
                                              env={**env, **extra_env}, start_new_session=True))
        return processes[-1]

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(_free_port()))
        _wait_for("the master", lambda: "Starting Spark master" in logs[0].read_text() and
                  "I have been elected leader" in logs[0].read_text(), 120, logs)
        alone = driver(3, "--spec", "die_hard", "--work-dir", str(tmp_path / "alone"))
        out, err = alone.communicate(timeout=300)
        assert alone.returncode == 2, err[-3000:]
        assert f"the master at {master_url} has given this application no executor after 3 s" in err, err[-3000:]
        assert "start a worker" in err and "Traceback" not in err
        workers = []
        for i in range(2):
            workers.append(start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                  "--memory", "1g", "--webui-port", str(_free_port()), master_url,
                  SPARK_WORKER_DIR=str(tmp_path / f"worker{i}")))
        _wait_for("two workers", lambda: logs[0].read_text().count("Registering worker") >= 2, 120, logs)
        check = ["--spec", f"{spec_file}:TwoPhaseEagerCommit", "--param", "rm=2", "--continue"]
        cluster = _cli_start(tmp_path, "cluster", *check, "--engine", "spark", "--master", master_url,
                             "--spark-conf", "spark.default.parallelism=2", "--work-dir", "work",
                             env={"SPARK_LOCAL_IP": "127.0.0.1"}, cwd=driver_dir)
        processes.append(cluster[0])
        code, spark = _cli_report(cluster)
        # the local engine's answer, here (after: it loads the kernels the driver compiled)
        ran = CliRunner().invoke(cli, ["check", "--json", str(tmp_path / "local.json"), "--trace-dir",
                                       str(tmp_path / "local"), "--no-color", *check])
        local_code, local = ran.exit_code, json.loads((tmp_path / "local.json").read_text())
        assert (code, local_code) == (1, 1) and (spark["engine"], local["spark"]) == ("spark", None)
        _same_answer(spark, local)
        figures = spark["spark"]  # the driver's status store has the executors' figures too
        assert figures["available"] and figures["shuffle_read_bytes"] == figures["shuffle_write_bytes"] > 0
        # twice spark.default.parallelism partitions; one level of figures per level explored
        assert figures["partitions"] == 4 and [f["level"] for f in figures["levels"]] == list(range(spark["depth"]))
        replay = CliRunner().invoke(cli, ["trace", "replay", "--spec", check[1], spark["violations"][0]["trace_file"]])
        assert replay.exit_code == 0, replay.output
        workers_used = ["Asked to launch executor" in p.read_text() for p in logs[1:]]
        assert workers_used == [True, True], "the check did not run on both workers"
        # the executors ran in their workers' directories, and wrote every level's parts (one a
        # task) and the visited runs into the driver's work dir, nowhere else
        work = driver_dir / "work"
        partitions = figures["partitions"]
        assert (work / "levels" / "level-0000").is_dir()
        for level in range(1, spark["depth"]):
            assert len(list(workdir.level_dir(str(work), level).glob("part-*.words"))) == partitions, level
        assert sum(len(workdir.runs_present(str(work), b)) for b in range(partitions)) >= partitions
        for i in range(2):
            executor_dirs = [p for p in (tmp_path / f"worker{i}").glob("app-*/*") if p.is_dir()]
            assert executor_dirs, f"worker {i} ran no executor in its own directory"
            assert not list((tmp_path / f"worker{i}").rglob("levels")), "an executor wrote into its own directory"
            assert not list((tmp_path / f"worker{i}").rglob("visited"))
            # the spec file reached the executor, under the driver's module name, and the module beside it
            assert list((tmp_path / f"worker{i}").rglob("kraftcheck_spec_eager_commit_file_*.py"))
            assert list((tmp_path / f"worker{i}").rglob("commit_names.py"))
        # every worker lost mid-run: the run waits for an executor to start as long as a busy machine
        # may need, but once they are gone, only LOST_WAIT_S
        lost = tmp_path / "lost"
        run = driver(WORKER_WAIT_S, "--spark-conf", f"spark.kraftcheck.noExecutorWait={LOST_WAIT_S}s", "--spec",
                     "two_phase", "--param", "rm=3", "--continue", "--work-dir", str(lost))
        _wait_for("two finished levels", lambda: run.poll() is not None or _manifest_levels(lost) >= 2, 300, logs)
        if run.poll() is not None:
            raise AssertionError(f"the run ended before its workers could be killed: {run.communicate()[1][-3000:]}")
        for worker in workers:
            os.killpg(worker.pid, signal.SIGKILL)  # the worker and its executor
        out, err = run.communicate(timeout=300)
        assert run.returncode == 3, err[-3000:]
        said = " ".join((out + err).split())  # the summary's lines are wrapped
        assert f"no executor of {master_url} for {LOST_WAIT_S} s while a level was being explored" in said, said
        assert "distinct states" in out and f"--resume {lost}" in err and "Traceback" not in err
    finally:
        for process in reversed(processes):
            _stop(process)
    assert not list(Path(tempfile.gettempdir()).glob("kraftcheck-ship-*-kraftcheck_spec_eager_commit_file_*")), \
        "the copy of the spec file served to the executors was left behind"


# -- Spark's figures in the report -------------------------------------------------------------

FIGURE_KEYS = ("stages", "tasks", "shuffle_write_bytes", "shuffle_read_bytes", "seconds")


def test_json_report_has_spark_figures_for_every_level(measured_run, spark_context):
    """One entry per level expanded, its new states the next level's size on disk, two stages
    of a task a core each (3 partitions, small levels), shuffle bytes that are real (every byte
    written is read, in local mode), and totals that are the sums of the levels."""
    from kraftcheck.checker.report import build_report
    result, work = measured_run
    figures = json.loads(json.dumps(build_report(result, {}, {})))["spark"]
    assert figures["available"] and figures["unavailable_reason"] is None
    assert figures["partitions"] == 3
    levels = figures["levels"]
    assert [f["level"] for f in levels] == list(range(result.depth))
    sizes = [_spark_level(work, level, "labels", np.uint16).size for level in range(result.depth)]
    assert [f["new_states"] for f in levels] == sizes[1:] + [0]
    for f in levels:
        assert (f["stages"], f["tasks"]) == (2, 2 * min(3, spark_context.defaultParallelism)), f
        assert f["shuffle_write_bytes"] == f["shuffle_read_bytes"], f
        assert f["seconds"] > 0, f
        if f["new_states"]:
            assert f["shuffle_write_bytes"] > 0, f
    # more states through the shuffles, more bytes: the widest level shuffles more than the last
    widest = max(levels, key=lambda f: f["new_states"])
    assert widest["shuffle_write_bytes"] > levels[-1]["shuffle_write_bytes"]
    for key in FIGURE_KEYS:
        assert figures[key] == pytest.approx(sum(f[key] for f in levels), abs=1e-3), key
    assert list(spark_context.getJobTags()) == []  # the run's level tags are gone


def test_summary_has_a_spark_section_within_80_columns(measured_run):
    from kraftcheck.cli.terminal import Terminal, byte_size
    result, _ = measured_run
    terminal = Terminal(color=False, width=80)
    with terminal.out.capture() as captured:
        terminal.summary(result, {})
    lines = captured.get().splitlines()
    assert [line for line in lines if len(line.rstrip()) > 80] == []
    section = lines[lines.index(next(line for line in lines if line.strip() == "spark")):]
    assert section[1].split() == ["partitions", "3"]
    figures = result.spark
    assert f"{figures['stages']} stages, {figures['tasks']} tasks" in section[2]
    assert f"{byte_size(figures['shuffle_write_bytes'])} written" in section[3]
    top = max(figures["levels"], key=lambda f: f["shuffle_write_bytes"])
    assert section[4].split()[:4] == ["largest", "level", "level", f"{top['level']}:"]


def test_unavailable_figures_leave_the_run_and_its_answer_intact(spark_context, monkeypatch):
    """A Spark whose status store lacks the query (forced here: a method the JVM does not have)
    still explores; the report says the figures are unavailable, and why."""
    from kraftcheck.cli.terminal import Terminal
    from kraftcheck.spark import figures

    def missing_query(self, tag, level, new_states):
        return self.sc._jsc.sc().statusStore().noSuchStageQuery(level)

    monkeypatch.setattr(figures.LevelMeter, "_read", missing_query)
    model = _model("die_hard")
    progress = []
    result = SparkExplorer(spark_context, partitions=2).explore(model, Options(keep_going=True), progress.append)
    local = Engine(compile="now").explore(_model("die_hard"), Options(keep_going=True))
    assert _summary(result) == _summary(local)
    spark = result.spark
    assert (spark["available"], spark["levels"], spark["partitions"]) == (False, [], 2)
    assert all(spark[key] is None for key in FIGURE_KEYS)
    assert "noSuchStageQuery" in spark["unavailable_reason"] and "does not exist" in spark["unavailable_reason"]
    assert all(p.shuffle_bytes is None for p in progress)
    terminal = Terminal(color=False, width=80)
    with terminal.out.capture() as captured:
        terminal.summary(result, {})
    assert f"figures unavailable ({spark['unavailable_reason']})" in " ".join(captured.get().split())
    assert list(spark_context.getJobTags()) == []


def test_local_engine_reports_have_no_spark_figures():
    from kraftcheck.checker.report import build_report
    result = Engine(compile="now").explore(_model("die_hard"), Options())
    assert result.spark is None and build_report(result, {}, {})["spark"] is None
