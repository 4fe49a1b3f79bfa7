"""``--progress-json FILE``: one JSON object per line as checks start, progress and finish.

Each line is written and flushed at once, so ``tail -f`` or a CI log follower sees a long run move.
"""

from __future__ import annotations

import json
import os
import time
from typing import Optional, TextIO

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.files import descriptor_of


class ProgressStream:
    def __init__(self, path: Optional[str]) -> None:
        # ``-`` or /dev/stdout: through the descriptor (reopening would truncate what the shell appends to)
        fd = descriptor_of(path) if path else None
        try:
            if fd is not None:
                self._file: Optional[TextIO] = os.fdopen(os.dup(fd), "w", encoding="utf-8")
            else:
                self._file = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
        except OSError as e:
            raise UsageError(f"--progress-json {path}: cannot write it ({e.strerror})") from None

    def __call__(self, event: dict) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps({"time": round(time.time(), 3), **event}) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
