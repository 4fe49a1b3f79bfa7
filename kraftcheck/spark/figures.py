"""Spark's own figures for each level: tasks, shuffle bytes, executor time.

They come from the live status store every SparkContext keeps (it feeds the web UI and
``statusTracker``, and is filled with the UI disabled too), read through py4j on the driver: each
level's jobs carry a job tag, and once the level is done one query per stage of those jobs reads
its task count, shuffle bytes and executor run time. Nothing is collected from the executors.

The store is Spark's internal API (``SparkContext.statusStore``, ``AppStatusStore.lastStageAttempt``,
checked against Spark 4.x). Another Spark may lack it: then the first failing query makes the
figures *unavailable* for the whole run, with the reason, and the exploration goes on unchanged.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from kraftcheck.spark.failures import driver_jvm_lost

SETTLE_TIMEOUT_S = 10.0  # how long to wait for the store to record the end of a level's jobs


@dataclass(frozen=True)
class LevelFigures:
    """What Spark spent on expanding one level: ``level`` is the level expanded (0 = the initial
    states), ``new_states`` how many states it found (the next level's size)."""

    level: int
    new_states: int
    stages: int
    tasks: int
    shuffle_write_bytes: int
    shuffle_read_bytes: int
    seconds: float  # executor run time, summed over the level's tasks


@dataclass
class SparkFigures:
    """A run's figures: the partition count and one ``LevelFigures`` per level expanded on Spark
    (a resumed run's earlier levels come from its checkpoint), or why there are none."""

    partitions: int
    levels: list[LevelFigures] = field(default_factory=list)
    unavailable: Optional[str] = None  # set once a query failed: the figures are not known

    def report(self) -> dict[str, Any]:
        """The ``spark`` object of the JSON report: totals (null when unavailable) and the levels."""
        levels = [] if self.unavailable else [asdict(f) for f in self.levels]
        totals: dict[str, Any] = {key: None for key in ("stages", "tasks", "shuffle_write_bytes",
                                                         "shuffle_read_bytes", "seconds")}
        if not self.unavailable:
            for key in totals:
                totals[key] = sum(level[key] for level in levels)
            totals["seconds"] = round(totals["seconds"], 3)
        return {"partitions": self.partitions, "available": self.unavailable is None,
                "unavailable_reason": self.unavailable, **totals, "levels": levels}


class FiguresUnavailable(Exception):
    """The status store did not give a level's figures."""


class LevelMeter:
    """Tags the jobs of each level and reads their stages' figures from the status store."""

    def __init__(self, sc: Any, run_tag: str, partitions: int) -> None:
        self.sc = sc
        self.run_tag = run_tag
        self.figures = SparkFigures(partitions)

    def tag(self, level: int) -> str:
        return f"{self.run_tag}-level-{level}"

    def start(self, level: int) -> None:
        """Tag the jobs started from now on (on this thread) as ``level``'s."""
        self._guard(lambda: self.sc.addJobTag(self.tag(level)))

    def stop(self, level: int) -> None:
        """Stop tagging jobs as ``level``'s (also when the level failed)."""
        self._guard(lambda: self.sc.removeJobTag(self.tag(level)))

    def read_level(self, level: int, new_states: int) -> Optional[LevelFigures]:
        """Read and keep the figures of ``level``'s jobs; None if they are unavailable."""
        figures = self._guard(lambda: self._read(self.tag(level), level, new_states))
        if figures is not None:
            self.figures.levels.append(figures)
        return figures

    def _guard(self, query):
        """Run a query; any failure (py4j, a method this Spark lacks, a timeout) makes the
        figures unavailable for the rest of the run instead of failing the exploration."""
        if self.figures.unavailable is not None:
            return None
        try:
            return query()
        except Exception as e:  # noqa: BLE001: whatever the JVM says, the run goes on
            if driver_jvm_lost(e, self.sc):
                # not the figures' fault: the run ends at its next job, said as a lost JVM, and
                # the levels finished before keep their figures
                return None
            # py4j's first line names the call, its second the Java error: keep both
            lines = [line.strip() for line in str(e).splitlines() if line.strip()][:2]
            self.figures.unavailable = " ".join([f"{type(e).__name__}:", *lines])[:300]
            return None

    def _read(self, tag: str, level: int, new_states: int) -> LevelFigures:
        jsc = self.sc._jsc.sc()
        tracker, store = jsc.statusTracker(), jsc.statusStore()
        jobs = self._settled_jobs(tracker, tag)
        stage_ids = sorted({int(s) for job in jobs for s in job.stageIds()})
        stages = tasks = written = read = run_ms = 0
        for stage_id in stage_ids:
            stage = store.lastStageAttempt(stage_id)
            stages += 1
            tasks += stage.numTasks()
            written += stage.shuffleWriteBytes()
            read += stage.shuffleReadBytes()
            run_ms += stage.executorRunTime()
        return LevelFigures(level=level, new_states=new_states, stages=stages, tasks=tasks,
                            shuffle_write_bytes=written, shuffle_read_bytes=read, seconds=run_ms / 1000.0)

    @staticmethod
    def _settled_jobs(tracker: Any, tag: str) -> list[Any]:
        """The tag's jobs, once the store has recorded their end: the store is filled by a
        listener that runs behind the scheduler, so right after ``collect`` returns the last
        stage may not be recorded yet (its end comes before the job's in the listener's queue)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while True:
            jobs = [tracker.getJobInfo(int(j)).get() for j in tracker.getJobIdsForTag(tag)]
            if jobs and all(job.status().toString() != "RUNNING" for job in jobs):
                return jobs
            if time.monotonic() > deadline:
                raise FiguresUnavailable(f"the status store did not record the end of the jobs tagged {tag}")
            time.sleep(0.01)
