"""``--progress-json FILE``: one JSON object per line as checks start, progress and finish.

Each line is written and flushed at once, so ``tail -f`` or a CI log follower sees a long run move.
A line the system refuses (a full disk) ends the stream, not the gate: the checks go on, and
``unwritten`` says what was lost, for the gate to name and to count in its exit code.
"""

from __future__ import annotations

import json
import os
import time
from typing import Optional, TextIO

from kraftcheck.checker.disk_full import UnwrittenFile, unwritten_reason
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.files import descriptor_of


class ProgressStream:
    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        self.unwritten: Optional[UnwrittenFile] = None
        # ``-`` or /dev/stdout: through the descriptor (reopening would truncate what the shell appends to)
        fd = descriptor_of(path) if path else None
        try:
            if fd is not None:
                self._file: Optional[TextIO] = os.fdopen(os.dup(fd), "w", encoding="utf-8")
            else:
                if path:  # a missing directory is made, as for every other output a command writes
                    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                self._file = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
        except OSError as e:
            raise UsageError(f"--progress-json {path}: cannot write it ({e.strerror})") from None

    def __call__(self, event: dict) -> None:
        if self._file is None:
            return
        try:
            self._file.write(json.dumps({"time": round(time.time(), 3), **event}) + "\n")
            self._file.flush()
        except OSError as e:
            self._lost(e)

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as e:
                self._lost(e)
            self._file = None

    def _lost(self, e: OSError) -> None:
        self.unwritten = UnwrittenFile("the progress stream", str(self.path), unwritten_reason(e))
        file, self._file = self._file, None
        try:
            file.close()
        except OSError:
            pass  # what it still buffered is lost with the rest
