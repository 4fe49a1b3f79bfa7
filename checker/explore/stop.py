"""A request to stop a run (Ctrl-C, SIGTERM) that cannot be lost.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be when the signal
arrives. If that is a finalizer (numba's compiler frees LLVM objects in ``__del__``, which the
garbage collector runs at any allocation), the exception is printed as "Exception ignored" and
swallowed, and the run would go on to its end. The handler installed here also sets a flag, which
the explorers read between chunks and levels; an explorer that honours the request clears it.
The command line installs it first thing (``kraftcheck.cli.main``), so that an interrupt while
its modules are still importing is exit 130 too; this module imports nothing else for that reason.
"""

from __future__ import annotations

import signal

_requested = False


def _on_signal(signum, frame) -> None:
    global _requested
    _requested = True
    raise KeyboardInterrupt


def install_stop_handlers() -> None:
    """Ctrl-C, and SIGTERM too, stop a run: statistics so far, a resumable checkpoint, exit 130.
    SIGTERM because batch schedulers and ``timeout`` stop jobs with it, and a job that a
    non-interactive shell started in the background has SIGINT ignored; SIGINT is left ignored
    then, as Python leaves it."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


def stop_requested() -> bool:
    return _requested


def raise_if_stop_requested() -> None:
    """Raise the KeyboardInterrupt of a stop request that something swallowed."""
    if _requested:
        raise KeyboardInterrupt


def stop_honoured() -> None:
    """The run has stopped for the request: a later run in the same process starts afresh."""
    global _requested
    _requested = False
