"""Spark's blocking calls on a thread of their own, so that the driver's main thread waits between py4j calls.

Starting a SparkContext and collecting a job's results block inside py4j for as long as Spark
takes. Made on the main thread, such a call could be neither bounded nor stopped cleanly (a signal
raised inside a py4j call breaks the connection's protocol). So the call runs on a thread of its
own, and the main thread waits for it, checking every ``POLL_S`` what the caller asks (a deadline,
the stop request, executors still there); a check that raises ends the wait, after ``abandon``
has ended the call (stopped the JVM, cancelled the jobs).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

POLL_S = 0.25


def wait_for(call: Callable[[], Any], check: Callable[[float], None], abandon: Callable[[threading.Thread], None],
             name: str, thread_class: type = threading.Thread) -> Any:
    """``call()``'s value (or its error), ``call`` run on a ``thread_class`` thread named ``name``;
    meanwhile ``check(seconds waited)`` every ``POLL_S``; if it raises, ``abandon(thread)``, then
    the error goes on."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        box["value"] = call()

    class Handing(thread_class):  # type: ignore[misc, valid-type]
        """Hands ``call``'s error to the waiting thread, and so any error of the thread class's
        own work around it, which can come before ``call`` starts (PySpark's InheritableThread asks
        the JVM for the caller's job properties first: a JVM gone by then raised there, the
        waiting thread waited forever and the error was printed as a thread's traceback)."""

        def run(self) -> None:
            try:
                super().run()
            except BaseException as e:  # noqa: BLE001: handed to the waiting thread
                box["error"] = e
            finally:
                done.set()

    thread = Handing(target=run, name=name, daemon=True)
    t0 = time.monotonic()
    thread.start()
    try:
        while not done.wait(POLL_S):
            check(time.monotonic() - t0)
    except BaseException:
        abandon(thread)
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]
