"""Starting (and failing to start) a SparkContext, with errors a user can act on."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from typing import Optional
from urllib.parse import urlparse

from kraftcheck.checker.errors import KraftcheckError


class SparkSetupError(KraftcheckError):
    """Spark could not be started or reached: no Java, an unreachable master, PySpark missing."""


class SparkRunError(KraftcheckError):
    """A Spark job of the exploration failed."""


def _check_master_reachable(master: str) -> None:
    """A ``spark://host:port`` master that does not accept connections fails here, at once; Spark
    itself would retry for a minute and then leave the jobs waiting."""
    if not master.startswith("spark://"):
        return
    for address in master[len("spark://"):].split(","):
        url = urlparse(f"spark://{address}")
        try:
            with socket.create_connection((url.hostname, url.port or 7077), timeout=5):
                return
        except OSError as e:
            last = e
    raise SparkSetupError(f"cannot reach the Spark master {master} ({last}); start it or give another --master")


def under_spark_submit() -> bool:
    """True in a driver that spark-submit started (it passes its JVM's gateway to Python)."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def start_context(master: Optional[str] = None, conf: Optional[dict[str, str]] = None):
    """A new SparkContext on ``master`` with ``conf``; executors run this Python (the one that has
    kraftcheck and numba installed) unless ``spark.pyspark.python`` is given. Without ``master``:
    spark-submit's master when it started this process, else ``local[*]``."""
    try:
        from pyspark import SparkConf, SparkContext
    except ImportError:
        raise SparkSetupError("PySpark is not installed: pip install 'kraftcheck[spark]'") from None
    if not under_spark_submit():
        if shutil.which("java") is None and not _java_home():
            raise SparkSetupError("Spark needs Java 17 or 21: no `java` is on PATH and JAVA_HOME is not set")
        master = master or "local[*]"
    if master:
        _check_master_reachable(master)
    conf = dict(conf or {})
    # PySpark starts its workers with PYSPARK_PYTHON (default: whatever python3 is on PATH)
    os.environ.setdefault("PYSPARK_PYTHON", conf.get("spark.pyspark.python", sys.executable))
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
    try:
        sc = SparkContext(conf=spark_conf)
    except Exception as e:  # Java gateway, bad master URL, a context already running
        raise SparkSetupError(f"could not start Spark on {master or 'the submitted master'}: {first_line(e)}") \
            from None
    sc.setLogLevel("ERROR")
    return sc


def stop_context(sc) -> None:
    """Stop ``sc`` and the Java process PySpark started for it (``sc.stop()`` alone leaves that
    JVM running until this Python process exits)."""
    from pyspark import SparkContext
    gateway = SparkContext._gateway
    sc.stop()
    if gateway is None or under_spark_submit():  # spark-submit's JVM is spark-submit's to stop
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except Exception:
            proc.kill()
            proc.wait()


def _java_home() -> Optional[str]:
    return os.environ.get("JAVA_HOME")


def first_line(error: BaseException) -> str:
    """The line of a (possibly Java-wrapped) error that says what went wrong."""
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):  # a Python error inside a task: its last line names it
        if line.startswith(("kraftcheck.", "ValueError", "RuntimeError", "TypeError", "IndexError",
                            "MemoryError", "OSError", "FileNotFoundError")):
            return line
    return lines[0] if lines else type(error).__name__
