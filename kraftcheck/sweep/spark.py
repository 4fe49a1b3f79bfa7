"""Run a sweep on Spark: one task per configuration, each a whole check inside an executor.

This sits with the sweep, above the public API and the Spark engine (``kraftcheck.spark``), which
it only borrows session helpers from; pyspark itself is never imported here: the SparkContext is
given.

A configuration's check is independent of the others, so each is one task of one job (as many
partitions as configurations); the executor's Python runs the configuration's request through the
pipeline (kraftcheck/pipeline.py) with the local engine and sends back only the JSON report (counts, verdicts, trace file paths). Traces are
written under ``out`` by the executor: on a cluster, give a directory every executor can write
and the driver can read (a shared file system).
"""

from __future__ import annotations

import time
from pathlib import Path

from kraftcheck.spark.session import SparkRunError, first_line
from kraftcheck.sweep.local import directory_name
from kraftcheck.sweep.matrix import Configuration
from kraftcheck.sweep.table import Row, row_from_report


def _run_one(item: tuple[int, Configuration, str]) -> tuple[int, dict | None, float, str]:
    """Executor side: the check of one configuration, through the pipeline every check runs.
    Imports stay inside: this runs in the executor's Python, not the driver's."""
    index, config, out = item
    from kraftcheck import pipeline
    from kraftcheck.checker.errors import KraftcheckError
    from kraftcheck.checker.explore.result import no_progress
    from kraftcheck.checker.report import build_report
    started = time.monotonic()
    try:
        checked = pipeline.run(config.request(str(Path(out) / directory_name(config, index))),
                               pipeline.Silent(no_progress))
    except KraftcheckError as e:
        return index, None, time.monotonic() - started, f"refused: {e}"
    if checked.cut_short is not None:  # stopped after its exploration: its outputs are partial
        raise KeyboardInterrupt
    report = build_report(checked.result, {**checked.run_options, "sweep": "spark"}, checked.trace_files,
                          not_checked=checked.prepared.not_checked, unwritten=checked.unwritten)
    return index, report, time.monotonic() - started, ""


def run_on_spark(sc, configs: list[Configuration], out: Path) -> list[Row]:
    """Every configuration as one task on ``sc``; rows in the configurations' order."""
    items = [(i, c, str(out.resolve())) for i, c in enumerate(configs)]
    try:
        done = sc.parallelize(items, len(items)).map(_run_one).collect()
    except Exception as e:
        raise SparkRunError(f"the sweep's Spark job failed: {first_line(e)}") from None
    by_index = {index: (report, wall, message) for index, report, wall, message in done}
    return [row_from_report(c, *by_index[i]) for i, c in enumerate(configs)]
