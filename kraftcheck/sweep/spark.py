"""Run a sweep on Spark: one task per configuration, each a whole check inside an executor.

This sits with the sweep, above the public API and the Spark engine (``kraftcheck.spark``), which
it only borrows session helpers from; pyspark itself is never imported here: the SparkContext is
given, and so is the class of the thread its job runs on.

A configuration's check is independent of the others, so each is one task of one job (as many
partitions as configurations); the executor's Python runs the configuration's request through the
pipeline (kraftcheck/pipeline.py) with the local engine and sends back only the JSON report (counts, verdicts, trace file paths). Traces are
written under ``out`` by the executor: on a cluster, give a directory every executor can write
and the driver can read (a shared file system).

Each task makes its configuration's run directory as the local sweep's runner does: emptied if
an earlier sweep made it (one that is not kraftcheck's refused, left as it is), marked
(``MARKER``, naming this sweep) before the check runs, its report (``report.json``) and the
marker's ``ended`` written once the check ended. An interrupted
sweep (Ctrl-C, SIGTERM) cancels the job, its running tasks interrupted, and reads the directories
to say what ran: a directory this sweep marked and that says ``ended`` ran to its end; one that
does not was stopped, and is removed (a task ended outright writes no report of its run so far);
a configuration with no directory of this sweep's did not run. The same promise as the local
sweep's (``kraftcheck.ci.runner.Interrupted``).
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Optional

from kraftcheck.checker.stop import deferred, raise_if_stop_requested, stop_honoured
from kraftcheck.ci.runner import MARKER, Interrupted
from kraftcheck.spark.session import SparkRunError, first_line, job_thread_class
from kraftcheck.spark.waiting import wait_for
from kraftcheck.sweep.local import directory_name, refuse_before_running
from kraftcheck.sweep.matrix import Configuration
from kraftcheck.sweep.table import Row, row_from_report

CANCEL_WAIT_S = 30.0  # for the cancelled tasks to end (their Python workers are ended within seconds)


def _run_one(item: tuple[int, Configuration, str, str]) -> tuple[int, dict | None, float, str]:
    """Executor side: the check of one configuration, through the pipeline every check runs, in
    its run directory (made, marked, then its report and the marker's end written).
    Imports stay inside: this runs in the executor's Python, not the driver's."""
    index, config, out, sweep_id = item
    from kraftcheck import pipeline
    from kraftcheck.checker.disk_full import unwritten_reason
    from kraftcheck.checker.errors import KraftcheckError
    from kraftcheck.checker.explore.result import no_progress
    from kraftcheck.checker.files import atomic_write
    from kraftcheck.checker.report import build_report, write_report
    started = time.monotonic()
    run_dir = Path(out) / directory_name(config, index)
    marker = {"check": config.name, "sweep": sweep_id}
    if run_dir.exists() and not (run_dir / MARKER).exists():
        # the driver refused one before the job, but an executor may see another file system than
        # the driver's, or the directory have come since: it is the user's, never emptied
        return index, None, time.monotonic() - started, \
            f"refused: {run_dir} exists and was not made by kraftcheck; choose another --out"
    try:
        if run_dir.exists():  # an earlier sweep's
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        atomic_write(run_dir / MARKER, json.dumps(marker, indent=2) + "\n")
    except OSError as e:
        shutil.rmtree(run_dir, ignore_errors=True)
        gone = "" if not run_dir.exists() else " (what was made of it could not be removed either: remove it)"
        return index, None, time.monotonic() - started, \
            f"not started: its run directory {run_dir} could not be written: {unwritten_reason(e)}{gone}"
    report, message, prepared = None, "", None
    reporter = pipeline.Silent(no_progress)
    try:  # as kraftcheck check's command: a refusal has no report, a run that ended in an error one saying so
        prepared = pipeline.prepare(config.request(str(run_dir)), reporter.note)
        checked = pipeline.finish(prepared, pipeline.explore(prepared, reporter), reporter)
    except KraftcheckError as e:
        report = None if prepared is None else pipeline.error_report(prepared, e)
        if report is None:
            message = f"refused: {e}"
        else:
            report["options"]["sweep"] = "spark"  # as its other reports say where they ran
    else:
        if checked.cut_short is not None:  # stopped after its exploration: its outputs are partial
            raise KeyboardInterrupt
        report = build_report(checked.result, {**checked.run_options, "sweep": "spark"}, checked.trace_files,
                              not_checked=checked.prepared.not_checked, unwritten=checked.unwritten)
    try:
        if report is not None:
            write_report(report, str(run_dir / "report.json"))
        atomic_write(run_dir / MARKER, json.dumps({**marker, "ended": True, "error": message or None}, indent=2)
                     + "\n")
    except OSError as e:  # the check ran; its directory cannot say so: it goes (its traces too), as the row says
        shutil.rmtree(run_dir, ignore_errors=True)
        ended = report["result"] if report is not None else message
        report, message = None, f"{ended}, but its run directory {run_dir} could not be completed " \
                                f"({unwritten_reason(e)}) and is removed"
    return index, report, time.monotonic() - started, message


def run_on_spark(sc, configs: list[Configuration], out: Path) -> list[Row]:
    """Every configuration as one task on ``sc``; rows in the configurations' order. Interrupted
    (a signal while the job runs): the job is cancelled and ``Interrupted`` says what ran."""
    out = out.resolve()
    refuse_before_running(configs, out)
    sweep_id = uuid.uuid4().hex
    items = [(i, c, str(out), sweep_id) for i, c in enumerate(configs)]
    # a signal only asks to stop: taken while the driver waits for the job, never inside a py4j call
    with deferred():
        try:
            done = _collect(sc, items)
        except KeyboardInterrupt:
            stop_honoured()
            raise interrupted(configs, out, sweep_id) from None
    by_index = {index: (report, wall, message) for index, report, wall, message in done}
    return [row_from_report(c, *by_index[i]) for i, c in enumerate(configs)]


def _collect(sc, items: list) -> list:
    """The job's results; it runs on a thread of its own while this one waits for it (``waiting``)."""
    def run() -> Any:
        # a cancelled job's tasks are interrupted (their Python workers ended), not left to run on
        # into directories the driver reads and removes
        sc.setLocalProperty("spark.job.interruptOnCancel", "true")
        return sc.parallelize(items, len(items)).map(_run_one).collect()

    try:
        return wait_for(run, lambda elapsed: raise_if_stop_requested(), _cancel_jobs(sc), "kraftcheck-sweep-job",
                        job_thread_class())
    except KeyboardInterrupt:
        raise
    except Exception as e:
        raise SparkRunError(f"the sweep's Spark job failed: {first_line(e)}") from None


def _cancel_jobs(sc):
    def cancel(thread: Any) -> None:
        """Cancel the job and wait (a while) until none of its tasks runs: the directories of the
        stopped ones are removed next, which a task still running would write into again."""
        try:
            sc.cancelAllJobs()
            thread.join(CANCEL_WAIT_S)
            deadline = time.monotonic() + CANCEL_WAIT_S
            tracker = sc._jsc.sc().statusTracker()
            while time.monotonic() < deadline and sum(e.numRunningTasks() for e in tracker.getExecutorInfos()):
                time.sleep(0.05)
        except Exception:  # noqa: BLE001: a JVM that is gone has no tasks left running
            pass
    return cancel


def interrupted(configs: list[Configuration], out: Path, sweep_id: Optional[str]) -> Interrupted:
    """What an interrupted Spark sweep left: a configuration whose directory this sweep marked ran
    to its end if the marker says it ended, else it was stopped and its directory is removed; any
    other did not run (``sweep_id`` None: the job never started)."""
    ran, removed, not_run, earlier = [], [], [], []
    for i, c in enumerate(configs):
        name = directory_name(c, i)
        run_dir = out / name
        marker = _marker(run_dir)
        if sweep_id is not None and marker.get("sweep") == sweep_id:
            if marker.get("ended"):
                ran.append(name)
            else:
                removed.append(name)
                shutil.rmtree(run_dir, ignore_errors=True)
            continue
        not_run.append(name)
        if (run_dir / MARKER).exists():
            earlier.append(run_dir)
    return Interrupted(ran, [], removed, not_run, earlier)


def _marker(run_dir: Path) -> dict:
    try:
        marker = json.loads((run_dir / MARKER).read_text())
    except (OSError, ValueError):  # none, or a task ended while it wrote it (written atomically: not ours)
        return {}
    return marker if isinstance(marker, dict) else {}
