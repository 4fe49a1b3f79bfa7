"""Standard error as the command line's diagnostics: a failure to write them is not the run's end.

Standard error carries progress, notes, warnings and errors. If it fails (its reader gone,
``2>&1 | head -1``; a full device, ``2>/dev/full``), Python raises wherever the next line is said,
a note from deep in the engine say, and the run would end there with its verdict and its summary on
standard output lost. ``forgive_standard_error`` makes ``sys.stderr`` a stream that drops what it
cannot write, from the first failure on. A summary sent to standard error (``--json -``) is
written to ``raw_standard_error()`` instead, where a failure is an output not written.
"""

from __future__ import annotations

import sys
from typing import Any, Optional, TextIO


class DiagnosticsStream:
    """``stream``, except that a write or flush it refuses drops it, and all later output, silently.
    Everything else (``fileno``, ``isatty``, ``encoding``) is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self.raw = stream
        self.lost = False

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                return self.raw.write(text)
            except (OSError, ValueError):
                self.lost = True
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self.raw.flush()
            except (OSError, ValueError):
                self.lost = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def forgive_standard_error() -> None:
    if sys.stderr is not None and not isinstance(sys.stderr, DiagnosticsStream):
        sys.stderr = DiagnosticsStream(sys.stderr)  # type: ignore[assignment]


def raw_standard_error() -> Optional[TextIO]:
    """Standard error as it was, for output whose loss must be known."""
    return sys.stderr.raw if isinstance(sys.stderr, DiagnosticsStream) else sys.stderr
