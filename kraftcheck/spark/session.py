"""Starting (and failing to start) a SparkContext, with errors a user can act on, and stopping it."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from typing import Optional

from kraftcheck.checker.errors import KraftcheckError, UsageError
from kraftcheck.checker.explore.result import ProgressFn, no_progress
from kraftcheck.spark import failures, leftovers, readiness
from kraftcheck.spark.jvm_output import JvmOutput

_LOCAL = re.compile(r"^local(?:\[(\*|\d+)\])?$")
LOCAL_TASK_ATTEMPTS = 4  # spark.task.maxFailures' default on a cluster


class SparkSetupError(UsageError):
    """Spark could not be started or reached: no Java, an unreachable master, PySpark missing.
    Refused as bad input is (exit 2, no ``--json`` report): no level was explored."""


class SparkRunError(KraftcheckError):
    """A Spark job of the exploration failed."""


def under_spark_submit() -> bool:
    """True in a driver that spark-submit started (it passes its JVM's gateway to Python)."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def with_task_retries(master: str) -> str:
    """``local``, ``local[N]`` and ``local[*]`` with Spark's cluster default of 4 attempts a task
    (local mode tries a task once: one Python worker killed, by the OOM killer say, would end the
    run); ``local[N,R]`` and every other master as given."""
    found = _LOCAL.match(master)
    if not found:
        return master
    return f"local[{found.group(1) or 1},{LOCAL_TASK_ATTEMPTS}]"


def start_context(master: Optional[str] = None, conf: Optional[dict[str, str]] = None,
                  wait_s: float = readiness.DEFAULT_WAIT_S, progress: ProgressFn = no_progress):
    """A new SparkContext on ``master`` with ``conf``, ready to run a job: an executor has
    registered (``readiness``; at most ``wait_s`` seconds for the master to take the application,
    then as long for an executor, saying so to ``progress``). Executors run this Python (the one
    that has kraftcheck and numba installed) unless ``spark.pyspark.python`` is given. Without
    ``master``: spark-submit's master when it started this process, else ``local[*]``; local
    masters with task retries (``with_task_retries``). A driver JVM this call starts keeps its
    files in a directory of this process's own, removed by ``stop_context`` and, if this process
    dies first, by the next run (``leftovers``): its temporary files (``java.io.tmpdir``: what
    spark-submit stages, the native libraries it unpacks) and, unless given, its scratch files
    (block managers, shuffle files: ``spark.local.dir``). Their default, /tmp, kept what a JVM
    killed outright never removed."""
    try:
        from pyspark import SparkConf, SparkContext
    except ImportError:
        raise SparkSetupError("PySpark is not installed: pip install 'kraftcheck[spark]'") from None
    leftovers.sweep()
    if not under_spark_submit():
        if shutil.which("java") is None and not _java_home():
            raise SparkSetupError("Spark needs Java 17 or 21: no `java` is on PATH and JAVA_HOME is not set")
        master = with_task_retries(master or "local[*]")
    if master:
        readiness.check_master(master)
    conf = dict(conf or {})
    # PySpark starts its workers with PYSPARK_PYTHON (default: whatever python3 is on PATH)
    os.environ.setdefault("PYSPARK_PYTHON", conf.get("spark.pyspark.python", sys.executable))
    _quiet_py4j()
    spark_conf = SparkConf().setAppName("kraftcheck")  # under spark-submit: its settings
    if master:
        spark_conf.setMaster(master)
    defaults = {"spark.pyspark.python": sys.executable, "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false"}
    for key, value in defaults.items():
        if not spark_conf.contains(key):
            spark_conf.set(key, value)
    for key, value in conf.items():
        spark_conf.set(key, value)
    where = master or "the submitted master"
    launched = SparkContext._gateway is None  # a JVM this call starts is this call's to end if it fails
    scratch = leftovers.scratch_dir() if launched and not under_spark_submit() else None
    jvm_env = {}
    if scratch is not None:
        # given by the environment: spark.local.dir makes Spark warn that a cluster may override it
        jvm_env["SPARK_SUBMIT_OPTS"] = " ".join(
            o for o in (os.environ.get("SPARK_SUBMIT_OPTS", ""), shlex.quote(f"-Djava.io.tmpdir={scratch}")) if o)
        if not (spark_conf.contains("spark.local.dir") or os.environ.get("SPARK_LOCAL_DIRS")):
            jvm_env["SPARK_LOCAL_DIRS"] = str(scratch)

    def end_jvm() -> None:
        if launched:
            end_driver_jvm()

    try:
        before = {key: os.environ.get(key) for key in jvm_env}
        try:
            os.environ.update(jvm_env)  # the driver's JVM (quick, or an error at once) starts with them
            SparkContext._ensure_initialized(gateway=_launch(spark_conf) if launched else None, conf=spark_conf)
        except Exception as e:  # Java gateway
            raise SparkSetupError(f"could not start Spark on {where}: {first_line(e)}") from None
        finally:
            for key, value in before.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        waiting = f"starting Spark on {where}" + (" (registering with the master)" if not
                                                  str(master).startswith("local") else "")
        try:
            bound = wait_s + readiness.STARTUP_ALLOWANCE_S
            sc = readiness.bounded(lambda: SparkContext(conf=spark_conf), bound, waiting, progress, end_jvm,
                                   f"the master at {where} did not take this application within {bound:g} s: "
                                   "is it a Spark master, and the right port? (or wait longer with "
                                   "--spark-wait SECONDS)")
        except (readiness.SparkWaitError, KeyboardInterrupt):
            raise
        except Exception as e:  # bad master URL, a context already running, the master gave up
            end_jvm()
            raise SparkSetupError(f"could not start Spark on {where}: {first_line(e)}") from None
        sc._kraftcheck_scratch = scratch
        sc.setLogLevel("ERROR")
        _quiet_accumulator_server(sc)
        try:
            readiness.wait_for_executor(sc, wait_s, progress)
        except BaseException:
            stop_context(sc)
            raise
    except BaseException:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    return sc


def _launch(spark_conf):
    """The gateway of a new driver JVM whose standard error reaches the user without Spark's startup
    chatter (``jvm_output``); under spark-submit, the JVM that started this process, as it is."""
    from pyspark.java_gateway import launch_gateway
    if under_spark_submit():
        return launch_gateway(spark_conf)
    output = JvmOutput()
    try:
        gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": output.write_end})
    except BaseException:
        output.finish()  # the JVM's own words on why it stopped come before kraftcheck's
        raise
    output.started()
    gateway._kraftcheck_output = output
    return gateway


def _quiet_py4j() -> None:
    """py4j logs its connection errors with tracebacks (a stopped or killed driver JVM, a call
    Ctrl-C cut): kraftcheck says what happened in one line instead."""
    import logging
    log = logging.getLogger("py4j")
    if log.propagate:
        log.addHandler(logging.NullHandler())
        log.propagate = False
        # some of its errors go to the root logger (logging.exception at module level)
        logging.getLogger().addFilter(lambda entry: f"{os.sep}py4j{os.sep}" not in entry.pathname)


def _quiet_accumulator_server(sc) -> None:
    """PySpark's accumulator server prints a traceback when the driver JVM's connection to it
    breaks (the JVM killed): the run says that in one line itself."""
    server = getattr(sc, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = lambda request, client_address: None


def end_driver_jvm() -> None:
    """End the Java process PySpark started for this driver and forget it, so that the next
    context starts afresh (``sc.stop()`` alone leaves it running until this Python process
    exits). Under spark-submit the JVM is spark-submit's to end: left alone."""
    from pyspark import SparkContext
    gateway = SparkContext._gateway
    if gateway is None or under_spark_submit():
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001: a JVM that does not answer is ended below all the same
        pass
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    output = getattr(gateway, "_kraftcheck_output", None)
    if output is not None:  # what the JVM said last comes before what the run says next
        output.finish()


def stop_context(sc) -> None:
    """Stop ``sc`` and the Java process PySpark started for it (``end_driver_jvm``), then remove
    the driver's scratch directory. A JVM that is already gone is not asked anything."""
    from pyspark import SparkContext
    proc = getattr(SparkContext._gateway, "proc", None)
    try:
        if proc is None or proc.poll() is None:
            sc.stop()
    except Exception:  # noqa: BLE001: a JVM that died meanwhile: nothing left to stop there
        SparkContext._active_spark_context = None
    end_driver_jvm()
    scratch = getattr(sc, "_kraftcheck_scratch", None)
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)


def _java_home() -> Optional[str]:
    return os.environ.get("JAVA_HOME")


def job_thread_class() -> type:
    """The thread class to run a job on from a thread of its own: PySpark's, which carries the
    caller's job properties and frees its JVM thread at its end."""
    from pyspark.util import InheritableThread
    return InheritableThread


def first_line(error: BaseException) -> str:
    """The line of a (possibly Java-wrapped) error that says what went wrong (``failures.task_error``)."""
    return failures.task_error(error)
