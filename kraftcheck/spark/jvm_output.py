"""The standard error of a driver JVM kraftcheck starts, relayed to its own without Spark's chatter.

A JVM started by PySpark writes to the standard error it inherits, from its first instant: the
JVM's note on the incubator module Spark adds, log4j's banner ("Using Spark's default log4j
profile", "Setting default log level to WARN"), and Spark's WARN lines (a hostname resolving to
a loopback address, no native Hadoop library), all before kraftcheck can set Spark's log level
to ERROR, and so printed even under ``--quiet``. Its standard error is a pipe instead, read by a
thread that passes every line on except that chatter: log4j lines below ERROR and the three
banner lines. An ERROR line, a Java exception, a Python worker's traceback or a JVM that could not
start still reaches the user, in full.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Optional

# what a driver's standard error says that is neither an error nor the user's to act on
CHATTER = re.compile(rb"^(?:\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?:WARN|INFO|DEBUG|TRACE) "  # log4j2-defaults' pattern
                     rb"|WARNING: Using incubator modules: "
                     rb"|Using Spark's default log4j profile: "
                     rb"|Setting default log level to "
                     rb"|To adjust logging level use sc\.setLogLevel\()")
MAX_LINE_BYTES = 1 << 16


def is_chatter(line: bytes) -> bool:
    return CHATTER.match(line) is not None


class JvmOutput:
    """A pipe for a JVM's standard error (``write_end``, for Popen's ``stderr``) and the thread
    that relays it to this process's descriptor 2 without the chatter, until every writer (the JVM,
    the Python workers it starts) has closed it."""

    def __init__(self) -> None:
        read_end, self.write_end = os.pipe()
        self._thread = threading.Thread(target=self._relay, args=(read_end,), name="kraftcheck-jvm-stderr",
                                        daemon=True)
        self._thread.start()

    def started(self) -> None:
        """The JVM holds the pipe now (or never will): this process's own end is closed, so the
        relay ends when the JVM and its workers are gone."""
        if self.write_end >= 0:
            os.close(self.write_end)
            self.write_end = -1

    def finish(self, timeout: Optional[float] = 2.0) -> None:
        """Wait (at most ``timeout`` s) until the relay has passed on what the ended JVM wrote."""
        self.started()
        self._thread.join(timeout)

    @staticmethod
    def _relay(read_end: int) -> None:
        with open(read_end, "rb", buffering=0) as pipe:
            pending = b""
            while True:
                chunk = pipe.read(1 << 16)
                if not chunk:
                    break
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                _pass_on(b"".join(line + b"\n" for line in lines if not is_chatter(line)))
                if len(pending) > MAX_LINE_BYTES:  # no chatter line is so long: passed on as it comes
                    _pass_on(pending)
                    pending = b""
            if pending and not is_chatter(pending):
                _pass_on(pending)


def _pass_on(data: bytes) -> None:
    """Write ``data`` to descriptor 2; a standard error that fails loses it, and the relay goes on
    draining the pipe, so the JVM never waits on a full one."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(2, view):]
        except OSError:
            return
