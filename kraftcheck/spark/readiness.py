"""Before the first job: a master that speaks Spark, and an executor, each within a bounded wait.

Spark waits in silence: a ``spark://`` URL answered by something else costs 64 s and then a py4j
error; a master without workers leaves the first job waiting for ever ("Initial job has not
accepted any resources", a warning below the log level kraftcheck sets). So the driver asks a
``spark://`` master's port one question of Spark's own RPC protocol (a stream request, which a
Spark master answers at once with a failure frame), starts the SparkContext (which registers the
application with the master) with a deadline, and then waits for an executor to register, saying
on the progress line what it waits for. Past the deadline the run stops with exit 2 saying what
is missing. Local mode has nothing to wait for: the driver is the executor. Once the run
explores, a level's job that goes as long (or ``spark.kraftcheck.noExecutorWait``) without any
executor (the workers gone) ends the run incomplete (``NoExecutorLeft``; the explorer watches
while it waits for a job).
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional
from urllib.parse import urlparse

from kraftcheck.checker.errors import KraftcheckError, UsageError
from kraftcheck.checker.explore.result import Progress
from kraftcheck.checker.stop import raise_if_stop_requested
from kraftcheck.spark.waiting import POLL_S, wait_for

DEFAULT_WAIT_S = 60.0  # --spark-wait: for the master to take the application, then for an executor
# how long a level's job may go without any executor before the run stops incomplete: by default
# --spark-wait, since a worker that starts again (or a new one) must register as at the start
NO_EXECUTOR_WAIT = "spark.kraftcheck.noExecutorWait"
# starting a SparkContext is also the driver JVM's own work (seconds, more on a busy machine): the
# wait for the master to take the application allows that much more
STARTUP_ALLOWANCE_S = 30.0
PROBE_TIMEOUT_S = 5.0  # a Spark master answers the probe in milliseconds

# Spark's transport frame: 8-byte length (itself included), 1-byte message type, the message.
# Type 6 is a StreamRequest (its stream id a 4-byte length and UTF-8); a master answers an unknown
# stream with a StreamFailure (type 8). Any of Spark's message types back says it is Spark.
_STREAM_REQUEST, _LAST_MESSAGE_TYPE = 6, 12
_PROBE_STREAM = b"/kraftcheck/probe"


class SparkWaitError(UsageError):
    """Spark did not become ready within the bounded wait, or a master URL is not a Spark master.
    Before the first level: refused as bad input is (exit 2, no ``--json`` report), not a run that
    ended in an error."""


@dataclass(frozen=True)
class Waiting(Progress):
    """The progress of a Spark run that has not started its first level: what it waits for."""

    waiting: str = ""


def _probe_frame() -> bytes:
    body = struct.pack(">bi", _STREAM_REQUEST, len(_PROBE_STREAM)) + _PROBE_STREAM
    return struct.pack(">q", 8 + len(body)) + body


def _spark_answer(data: bytes) -> bool:
    length, kind = struct.unpack(">qb", data[:9])
    return 9 <= length <= 1 << 24 and 0 <= kind <= _LAST_MESSAGE_TYPE


def _ask(host: str, port: int) -> bytes:
    """What the server at host:port answers to the probe (up to a frame's header); if it keeps
    silent a while, what it answers to an empty line too (an HTTP server waits for one)."""
    data = b""
    with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S) as s:
        s.sendall(_probe_frame())
        for then, wait in ((b"\r\n\r\n", 2.0), (None, PROBE_TIMEOUT_S)):
            s.settimeout(wait)
            try:
                while len(data) < 9:
                    chunk = s.recv(4096)
                    if not chunk:
                        return data
                    data += chunk
                return data
            except socket.timeout:
                if data or then is None:
                    return data
                s.sendall(then)
    return data


def check_master(master: str) -> None:
    """A ``spark://`` master (each address of a list): reachable at once, and, if it answers the
    probe, answering as Spark does. Refuses a URL none of whose addresses accepts a connection, or
    one answered by something else (a web UI, the REST port, another server). A peer that says
    nothing within the probe's time is left to the bounded wait (an authenticating master may)."""
    if not master.startswith("spark://"):
        return
    unreachable: list[str] = []
    for address in master[len("spark://"):].split(","):
        url = urlparse(f"spark://{address}")
        host, port = url.hostname, url.port or 7077
        try:
            data = _ask(host, port)
        except OSError as e:
            unreachable.append(f"{host}:{port} ({e.strerror or e})")
            continue
        if len(data) >= 9 and _spark_answer(data):
            return
        if data:
            shown = data[:40].decode("latin-1").splitlines()[0] if data[:40].strip() else repr(data[:16])
            raise SparkWaitError(f"--master {master}: {host}:{port} is not a Spark master (it answered "
                                 f"{shown.strip()!r}); give the master's own port, the one in its log line "
                                 "\"Starting Spark master at spark://HOST:PORT\" (7077 by default), not its web "
                                 "UI's or REST server's")
        return  # closed without a word: left to the bounded wait
    raise SparkWaitError(f"cannot reach the Spark master {master} ({'; '.join(unreachable)}); start it or give "
                         "another --master")


def bounded(start: Callable[[], Any], wait_s: float, waiting: str, progress: Callable[[Progress], None],
            on_timeout: Callable[[], None], timeout_message: str) -> Any:
    """``start()`` on a thread of its own, waited for at most ``wait_s`` seconds with ``waiting``
    on the progress line; past that (or on a stop request) ``on_timeout()`` ends it, and the run
    stops with ``timeout_message`` (or the interrupt)."""
    def check(elapsed: float) -> None:
        raise_if_stop_requested()
        if elapsed > wait_s:
            raise SparkWaitError(timeout_message)
        progress(Waiting(0, 0, 0, 0, elapsed, engine="spark", waiting=waiting))

    return wait_for(start, check, lambda thread: on_timeout(), "kraftcheck-spark-start")


def executors(sc: Any) -> int:
    """Executors registered with the driver (the driver itself not counted)."""
    return max(0, len(sc._jsc.sc().statusTracker().getExecutorInfos()) - 1)


def context_stopped(sc: Any) -> bool:
    """Whether Spark has stopped ``sc`` itself: a standalone master that never answers the
    application's registration (a peer that accepts connections and says nothing) makes Spark
    give up after its retries (about a minute) and stop the context, which then never gets an
    executor."""
    try:
        return bool(sc._jsc.sc().isStopped())
    except Exception:  # noqa: BLE001: a context that cannot say is left to the wait
        return False


def executors_come_and_go(sc: Any) -> bool:
    """Whether ``sc``'s executors are the cluster's to give and take: not in local mode (the driver
    runs the tasks) nor with dynamic allocation (executors come only once a job asks for them)."""
    return not str(sc.master).startswith("local") and \
        sc.getConf().get("spark.dynamicAllocation.enabled", "false") != "true"


def no_executor_wait(conf: Any, default: float) -> float:
    """The seconds of ``NO_EXECUTOR_WAIT`` in ``conf`` (a dict, or a SparkConf: ``get(key)``),
    given as Spark gives times (``20``, ``20s``, ``500ms``, ``2min``), else ``default``. Refuses
    (exit 2) anything else, or a wait that is not positive."""
    given = conf.get(NO_EXECUTOR_WAIT)
    if given is None:
        return default
    text = str(given).strip().lower()
    for unit, scale in (("ms", 0.001), ("min", 60.0), ("s", 1.0), ("", 1.0)):
        if text.endswith(unit):
            try:
                seconds = float(text[: len(text) - len(unit)]) * scale
            except ValueError:
                break
            if seconds > 0 and seconds != float("inf"):
                return seconds
            break
    raise UsageError(f"--spark-conf {NO_EXECUTOR_WAIT}={given}: give a positive time, in seconds (20, 20s) or "
                     "with a unit of Spark's (500ms, 2min)")


class NoExecutorLeft(KraftcheckError):
    """A job waited ``wait_s`` seconds without any executor: the cluster's workers are gone."""

    def __init__(self, master: str, wait_s: float) -> None:
        super().__init__(f"no executor of {master} for {wait_s:g} s while a level was being explored: its workers "
                         "are gone or busy; start workers, then continue the run")


def wait_for_executor(sc: Any, wait_s: float, progress: Callable[[Progress], None]) -> None:
    """Return once an executor has registered; after ``wait_s`` seconds without one, stop with
    what is missing. Local mode and dynamic allocation do not wait (``executors_come_and_go``)."""
    if not executors_come_and_go(sc):
        return
    master = str(sc.master)
    t0 = time.monotonic()
    while executors(sc) == 0:
        raise_if_stop_requested()
        if context_stopped(sc):
            raise SparkWaitError(f"the master at {master} did not take this application: Spark gave up "
                                 "registering it (\"All masters are unresponsive\"): is it a Spark master, and the "
                                 "right port?")
        elapsed = time.monotonic() - t0
        if elapsed > wait_s:
            hint = (f"start a worker (spark-class org.apache.spark.deploy.worker.Worker {master}), "
                    if master.startswith("spark://") else "add executors, ")
            raise SparkWaitError(f"the master at {master} has given this application no executor after "
                                 f"{wait_s:g} s: its workers are missing, busy, or smaller than asked for "
                                 f"(spark.executor.memory, spark.executor.cores); {hint}or wait longer with "
                                 "--spark-wait SECONDS")
        progress(Waiting(0, 0, 0, 0, elapsed, engine="spark",
                         waiting=f"waiting for an executor from {master} (up to {wait_s:g} s)"))
        time.sleep(POLL_S)
