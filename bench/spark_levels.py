"""Benchmark: where a Spark run's wall time goes, level by level (issue 32 item 3).

Runs one Kafka check (``--continue``) on Spark in this process and prints, for each level, the
wall time from the end of the level before (the progress callback's clock) beside Spark's
executor time for it (its JSON figures: run time summed over the level's tasks), then how much of
the run the driver spent inside Spark jobs and how much between them (the checkpoint manifest,
the status-store queries). The first row's time includes starting Spark. Another version's code
can be measured with ``PYTHONPATH`` set to its installed copy; run it from a directory that is
not a checkout (``python`` puts the script's directory first on ``sys.path``, not the current
one, so this matters only for ``-m``).

    .venv/bin/python bench/spark_levels.py                         # local[2], the default space
    .venv/bin/python bench/spark_levels.py 'local[2]' min_isr_changes=0
"""

from __future__ import annotations

import collections
import sys
import time

from kraftcheck.api import make_spec
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.spark import explorer
from kraftcheck.spark.figures import LevelMeter

SPENT: dict[str, float] = collections.defaultdict(float)


def _timed(name: str, method):
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            SPENT[name] += time.perf_counter() - start
    return timed


def main() -> None:
    master = sys.argv[1] if len(sys.argv) > 1 else "local[2]"
    params = {"brokers": 3, "min_isr": 2}
    params.update({k: int(v) for k, v in (a.split("=") for a in sys.argv[2:])})
    # the driver's time inside Spark jobs, and its own work between them
    explorer._SparkRun._run_job = _timed("inside Spark jobs", explorer._SparkRun._run_job)
    explorer._SparkRun._commit = _timed("checkpoint manifest and stale runs", explorer._SparkRun._commit)
    LevelMeter.read_level = _timed("status-store queries", LevelMeter.read_level)
    stamps: list[tuple[float, int, int]] = []
    start = time.perf_counter()
    result = explorer.SparkExplorer(master=master).explore(
        Model(make_spec("kafka", params)), Options(keep_going=True),
        lambda p: stamps.append((time.perf_counter(), p.depth, p.distinct)))
    wall = time.perf_counter() - start
    print(f"{master} {params}: {result.distinct_states:,} distinct, {result.states_generated:,} generated, "
          f"depth {result.depth}, {wall:.1f} s")
    print("| level expanded | distinct states after it | wall s | executor s |")
    print("| --- | --- | --- | --- |")
    levels = result.spark["levels"] if result.spark else []
    before = start
    for i, (at, _, distinct) in enumerate(stamps):  # the first: Spark started and level 0 written
        level, executor = ("start", "-") if i == 0 else (str(i - 1), "-")
        if 0 < i <= len(levels):
            executor = f"{levels[i - 1]['seconds']:.2f}"
        print(f"| {level} | {distinct:,} | {at - before:.2f} | {executor} |")
        before = at
    for name, seconds in SPENT.items():
        print(f"{name}: {seconds:.2f} s")


if __name__ == "__main__":
    main()
