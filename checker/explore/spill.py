"""Levels that outgrow their share of memory move ("spill") to a temporary directory.

Without ``--checkpoint`` an engine run keeps its levels in memory (``levels.MemoryLevels``) until
they hold more than LEVELS_MEMORY_SHARE of ``--max-memory`` (of the machine's memory without
one); between two chunks they then move to a new temporary directory (``DiskLevels.spill``) and
the run goes on with them there. The levels are cheap on disk (written in order, read once, in
order), and the visited set, which cannot leave memory, is what a large run needs memory for. The
directory goes however the run ends.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

import numpy as np

from kraftcheck.checker.explore.levels import DiskLevels, MemoryLevels
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.explore.run_limits import memory_total

LEVELS_MEMORY_SHARE = 1 / 16
SPILL_PREFIX = "kraftcheck-levels-"  # the temporary directory's name starts so, under $TMPDIR


def spill_threshold(options: Options, spill_levels_at: Optional[int] = None) -> Optional[int]:
    """Bytes of levels in memory past which they spill (``spill_levels_at`` if given, else
    LEVELS_MEMORY_SHARE of the memory budget); None when they start on disk (a checkpoint)."""
    if options.checkpoint_dir:
        return None
    if spill_levels_at is not None:
        return spill_levels_at
    return int(LEVELS_MEMORY_SHARE * (options.max_memory or memory_total()))


class LevelSpill:
    """When a run's levels spill (past ``at`` bytes; None: never), and where they went."""

    def __init__(self, at: Optional[int]) -> None:
        self.at = at
        self.directory: Optional[Path] = None  # the temporary directory they moved to

    def due(self, levels: MemoryLevels, frontier: np.ndarray) -> bool:
        """Whether the levels in memory, ``frontier`` (the level being expanded) included, pass
        the threshold now."""
        return self.at is not None and self.directory is None and levels.held_bytes(frontier) > self.at

    def move(self, levels: MemoryLevels, frontier: np.ndarray, depth: int,
             distinct: int) -> tuple[DiskLevels, np.ndarray, dict[str, Any]]:
        """Move ``levels`` to a new temporary directory: the levels there, the frontier mapped
        from there, and what the report says of the spill (``Result.levels_spilled``)."""
        self.directory = Path(tempfile.mkdtemp(prefix=SPILL_PREFIX))
        said = {"directory": str(self.directory), "at_level": depth, "at_distinct": distinct,
                "levels_bytes": levels.held_bytes(frontier), "threshold_bytes": self.at}
        moved = DiskLevels.spill(levels, self.directory, frontier)
        return moved, moved.frontier_words if depth else frontier, said

    def remove(self, levels: MemoryLevels) -> None:
        """The run is over: its spilled levels' directory goes (open mappings keep their pages
        until dropped, so the traces already built still work)."""
        if self.directory is not None:
            levels.close()
            shutil.rmtree(self.directory, ignore_errors=True)
