"""Ctrl-C and SIGTERM during a Spark run: taken where the driver waits, never inside a py4j call.

Python raises ``KeyboardInterrupt`` wherever the main thread is when the signal comes. In the
middle of a py4j call that breaks the connection's protocol (the answer comes later, to the next
call) and py4j prints "KeyboardInterrupt while sending command" with a traceback. So while a Spark
run explores, the signal only sets a flag; the run raises ``KeyboardInterrupt`` at the points
where it waits without talking to the JVM (a job's end, between levels), then cancels its jobs on
a clean connection. Outside the main thread (an API user's own thread) nothing is installed.
"""

from __future__ import annotations

import signal
import threading
from typing import Any


class DeferredInterrupts:
    """A context manager: SIGINT (unless ignored) and SIGTERM set ``requested`` while it is in force."""

    def __init__(self) -> None:
        self.requested = False
        self._saved: dict[int, Any] = {}

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.requested = True

    def raise_if_requested(self) -> None:
        if self.requested:
            raise KeyboardInterrupt

    def __enter__(self) -> "DeferredInterrupts":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) is not signal.SIG_IGN:
                    self._saved[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()
