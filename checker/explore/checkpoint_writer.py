"""Writing an engine run's checkpoint as it goes, and taking a resumed run up from it.

A run with ``--checkpoint DIR`` keeps its levels in DIR (``levels.DiskLevels``) and writes the
manifest (``checkpoint.write_manifest``) before its first level and after each finished one: the
levels finished (each level's size and checksums appended to its records first,
``level_records``), the states the first tier expanded, and every explorer's counts
(``checkpoint.counts_for_manifest``). A finished run's manifest says so, and is never resumed.
Resuming maps the finished levels, rebuilds the visited set from their words and restores the
counts and the violations found (``checkpoint.restore_counts``). What the manifest holds and how
it is checked is ``checkpoint.py``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Protocol

import numpy as np

from kraftcheck.checker.disk_full import write_kept
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.files import sync_directory
from kraftcheck.checker.explore.checkpoint import (MANIFEST, HeldCheckpoint, counts_for_manifest, restore_counts,
                                                  write_manifest)
from kraftcheck.checker.explore.level_records import CHAIN, LevelRecords
from kraftcheck.checker.explore.levels import MemoryLevels
from kraftcheck.checker.explore.result import Options, Result
from kraftcheck.checker.explore.run_limits import Clock, limit_reached
from kraftcheck.checker.explore.violations import Violations
from kraftcheck.checker.kernels.visited import RESTORE_CHUNK_STATES


class CheckpointedRun(Protocol):
    """What the checkpoint reads of a run (and a resume sets)."""

    levels: MemoryLevels
    visited: Any
    result: Result
    violations: Violations
    generated: int
    fired: np.ndarray
    new_per_action: np.ndarray
    interpreted_states: int  # states expanded by the first tier
    elapsed_before: float  # exploration time of the run this one resumes
    depth: int
    distinct: int
    elapsed: float  # exploration time, this run's and the runs' it resumes
    options: Options  # its limits
    clock: Clock  # its time limit


class CheckpointWriter:
    """A run's checkpoint in ``directory`` (None: the run keeps none, and nothing is written);
    ``held``: the run's identity and the manifest it resumes (``checkpoint.hold_checkpoint``)."""

    def __init__(self, directory: Optional[Path], held: HeldCheckpoint) -> None:
        self.directory = directory
        self.identity, self.resumed_manifest = held
        # the levels' records (a resumed run's as its manifest names them: checked when it was read;
        # a format 3 manifest listed its levels itself, and the first commit records them all)
        entry = (self.resumed_manifest or {}).get("level_records")
        self.records = None if directory is None else (
            LevelRecords(directory, entry["count"], entry["bytes"], entry[CHAIN]) if entry else LevelRecords(directory))

    def commit(self, run: CheckpointedRun) -> None:
        """After a finished level (or before the first): its files are durable; say so in the
        manifest, atomically."""
        if self.directory is not None:
            self._write(run, finished=False)

    def finish(self, run: CheckpointedRun) -> None:
        """The run is over with a final verdict: the manifest says it finished, so that it is not
        resumed (a disk that refuses the write leaves it resumable, said in ``unwritten``)."""
        r = run.result
        r.checkpoint_dir = str(self.directory)
        if not r.incomplete_reason:  # the verdict is final: nothing left to resume (a full disk keeps it)
            write_kept("the checkpoint's record that its run finished", self.directory / MANIFEST,
                       lambda: self._write(run, finished=True),
                       r.unwritten)

    def resume(self, run: CheckpointedRun) -> Optional[np.ndarray]:
        """Continue the run kept in the checkpoint: map its levels, rebuild the visited set from
        their words, restore the counters; returns the frontier, its last finished level (None:
        it stopped before its first level was durable, and starts again from the initial states;
        empty: a limit, its memory say, stopped it while the set was rebuilt)."""
        manifest = self.resumed_manifest  # checked resumable under the directory's hold
        run.result.resumed_from_level = 0
        if manifest["levels"] == 0:  # stopped before its first level was durable: from the start
            run.levels.reopen(0, [])
            return None
        level = run.levels.reopen(manifest["levels"], manifest["sizes"], manifest["checksums"])
        # the counts and violations before the visited set is rebuilt (minutes for a large run):
        # a stop meanwhile reports the levels finished so far, the checkpoint's, as any stop does
        run.generated, run.elapsed_before = restore_counts(manifest, run.result, run.fired, run.new_per_action,
                                                           run.violations.note)
        run.interpreted_states = manifest["interpreted_states"]
        run.note_finished_level()
        run.result.resumed_from_level = run.depth
        for finished in range(run.depth):
            words = run.levels.level_words(finished)
            for lo in range(0, words.shape[0], RESTORE_CHUNK_STATES):
                run.visited.restore(words[lo: lo + RESTORE_CHUNK_STATES])
                # a set that outgrows --max-memory here (a resume on a smaller machine) stops the
                # run incomplete, with the checkpoint's counts, rather than having it killed
                reason = limit_reached(run.options, run.distinct, run.clock, more_work=True)
                if reason is not None:
                    run.result.incomplete_reason = reason
                    return level[:0]
            run.levels.release(words, words.shape[0])
        if len(run.visited) != run.distinct:
            raise SpecError(f"checkpoint {self.directory}: its levels hold {run.distinct} states but "
                            f"{len(run.visited)} distinct ones; the files are damaged")
        return level

    def _write(self, run: CheckpointedRun, finished: bool) -> None:
        """The finished levels' records, then the manifest naming them. The files the manifest
        names were fsynced as written; their names (a level's files and the records', created
        since the last manifest) are made durable before it, so that no crash leaves a manifest
        naming a file that is not there."""
        self.records.append(run.levels.sizes, run.levels.checksums)
        sync_directory(self.directory)
        write_manifest(self.directory, self.identity, self._counters(run, finished))

    def _counters(self, run: CheckpointedRun, finished: bool) -> dict[str, Any]:
        return {"levels": run.depth, "level_records": self.records.manifest_entry(),
                "interpreted_states": run.interpreted_states,
                **counts_for_manifest(run.result, run.generated, run.fired, run.new_per_action, run.elapsed,
                                      run.violations.found_at, finished)}
