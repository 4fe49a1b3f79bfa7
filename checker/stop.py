"""A request to stop a run (Ctrl-C, SIGTERM, SIGHUP) that cannot be lost.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be when the signal
arrives. If that is a finalizer (numba's compiler frees LLVM objects in ``__del__``, which the
garbage collector runs at any allocation), the exception is printed as "Exception ignored" and
swallowed, and the run would go on to its end. The handler installed here also sets a flag, which
the explorers read between chunks and levels; an explorer that honours the request clears it.
The command line installs it first thing (``kraftcheck.cli.main``), so that an interrupt while
its modules are still importing is exit 130 too; this module imports nothing else for that reason.

``deferred()`` is for code that must not be interrupted at an arbitrary line: while it is in
force a signal only leaves the request, raised where that code chooses (``raise_if_stop_requested``).
A Spark driver uses it: a ``KeyboardInterrupt`` in the middle of a py4j call breaks the
connection's protocol (the answer comes later, to the next call) and py4j prints a traceback.
The kernels' thread pool uses it too (``kernels.threads.run_parts``): a ``KeyboardInterrupt``
while it starts a worker leaves that thread out of the pool's list, never told to leave, and the
interpreter's exit then joins it forever.
"""

from __future__ import annotations

import _signal
import signal

# SIGHUP: a closed terminal or a dropped ssh session; its default action ended the process with
# no summary, no report and a spilled levels directory left behind. Not on every platform.
_HANGUP = (signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()
# the signals that stop a run; SIGINT and SIGHUP are left ignored where they are (a background job
# of a non-interactive shell, nohup), as Python leaves them
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM) + _HANGUP
LEFT_IGNORED = (signal.SIGINT,) + _HANGUP

_requested = False
_deferring = 0  # how many deferred() blocks are in force
_signals = 0  # how many signals the handler has had (deferred.signalled: one came during a block)


def _on_signal(signum, frame) -> None:
    global _requested, _signals
    _requested = True
    _signals += 1
    if not _deferring:
        raise KeyboardInterrupt


def install_stop_handlers() -> None:
    """Ctrl-C, and SIGTERM and SIGHUP too, stop a run: statistics so far, a resumable checkpoint,
    exit 130. SIGTERM because batch schedulers and ``timeout`` stop jobs with it, and a job that a
    non-interactive shell started in the background has SIGINT ignored; SIGHUP because a terminal
    or ssh session closing sends it. SIGINT and SIGHUP are left ignored where they are (nohup)."""
    for sig in STOP_SIGNALS:
        if sig not in LEFT_IGNORED or signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _on_signal)


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


class deferred:
    """A ``with`` block in which Ctrl-C, SIGTERM and SIGHUP only leave the stop request (no
    ``KeyboardInterrupt`` where the main thread happens to be); the block raises it itself with
    ``raise_if_stop_requested`` where it can stop cleanly, or after it with ``raise_if_signalled``.
    In the main thread it installs the stop handlers for the block if they are not (an API
    caller's process; with ``install_handlers=False`` it then changes nothing), and puts back
    what was there; SIGINT or SIGHUP left ignored stays ignored. In any other thread it changes nothing:
    the signals are the main thread's, which must not lose them to another thread's block."""

    def __init__(self, install_handlers: bool = True) -> None:
        self._install = install_handlers
        self._saved: dict = {}
        self._in_force = False
        self._signals_before = 0
        self.signalled = False  # a signal came while this block, the outermost in force, held it

    def __enter__(self) -> "deferred":
        global _deferring
        import threading  # here, not on top: the command line imports this module before anything
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in STOP_SIGNALS:
            # _signal's: signal.getsignal converts to an enum through an exception when the handler
            # is a function, microseconds at each of run_parts' blocks (several per batch)
            before = _signal.getsignal(sig)
            if before != signal.SIG_IGN and before is not _on_signal:
                if not self._install:
                    return self  # nothing installed yet: nothing to put back
                signal.signal(sig, _on_signal)
                self._saved[sig] = before
        self._in_force = True
        self._signals_before = _signals
        _deferring += 1
        return self

    def __exit__(self, *exc: object) -> None:
        global _deferring
        if self._in_force:
            self._in_force = False
            _deferring -= 1
            self.signalled = _signals != self._signals_before and not _deferring
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()

    def raise_if_signalled(self) -> None:
        """The ``KeyboardInterrupt`` the block held back, if a signal came during it (not if an
        outer block still holds it: that one raises it where it chooses)."""
        if self.signalled:
            raise KeyboardInterrupt
