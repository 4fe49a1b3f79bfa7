"""A spec's function raised on a state: which state, with its path (``placed``), and what the
compiled kernels raise made the same error (``run_guarded``).

numba's compiled code raises some of what Python raises (integer division by zero, under its
default error model; ``assert``; a ``raise`` of the spec's), as a bare exception with no line of
the spec's; a kernel called through a C callback (the table form's ``fire`` kernels:
``kernels.table_expand``) cannot raise at all: numba prints "Exception ignored" and the callback
returns 0, an action that silently never fired. ``run_guarded`` runs a batch of the compiled
kernels, catches both (the second through ``sys.unraisablehook``) and redoes the batch's states in
Python one by one to find the state, the function and the line; the run then stops, as it does on
the Python tier.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable, Optional

import numpy as np

from kraftcheck.checker.errors import PYTHON_ONLY_ERRORS, KraftcheckError, SpecRaised
from kraftcheck.checker.explore.result import Step

_lock = threading.Lock()
_active: list["_CallbackErrors"] = []  # every batch now running the compiled kernels, in any thread
_previous_hook = None  # the hook before the first of them, put back when the last ends


def _hook(unraisable) -> None:
    """An error numba's C callbacks could only print goes to every batch running (it names no
    batch: of two runs in two threads, the innocent one finds no state that raises and stops with
    the error all the same, never with a verdict). An interrupt a finalizer swallowed is not a
    spec's error: it goes on, as everything else does, to the hook there was before."""
    if isinstance(unraisable.exc_value, Exception) and "numba" in repr(unraisable.object):
        with _lock:
            active = list(_active)
        for collector in active:
            collector.caught.append(unraisable.exc_value)
        if active:
            return
    (_previous_hook or sys.__unraisablehook__)(unraisable)


class _CallbackErrors:
    """While entered: exceptions numba's C callbacks could only print are kept, not printed.
    The hook is installed by the first batch entered and taken away by the last one out, in
    whatever order they end (batches in several threads overlap)."""

    def __init__(self) -> None:
        self.caught: list[BaseException] = []

    def __enter__(self) -> "_CallbackErrors":
        global _previous_hook
        with _lock:
            if not _active:
                _previous_hook = sys.unraisablehook
                sys.unraisablehook = _hook
            _active.append(self)
        return self

    def __exit__(self, *exc) -> None:
        with _lock:
            _active.remove(self)
            if not _active and sys.unraisablehook is _hook:  # one installed since stays
                sys.unraisablehook = _previous_hook


def run_guarded(model, words: np.ndarray, lo: int, hi: int, checks: bool, call: Callable[[], object]) -> object:
    """``call()``, the compiled kernels' successors (``checks`` False) or checks (True) of
    ``words[lo:hi]``; what the spec's code raised in it becomes ``located``'s ``SpecRaised``."""
    with _CallbackErrors() as callbacks:
        try:
            out = call()
        except (KraftcheckError, MemoryError):  # a memory error is the machine's, not the spec's
            raise
        except Exception as e:  # noqa: BLE001 - numba's code raised: the spec's, or ours (located says)
            raise located(model, words, lo, hi, checks, e) from None
    if callbacks.caught:
        raise located(model, words, lo, hi, checks, callbacks.caught[0])
    return out


def located(model, words: np.ndarray, lo: int, hi: int, checks: bool, error: BaseException) -> SpecRaised:
    """The first state of ``words[lo:hi]`` on which the spec's functions, run as Python, raise
    (not what only Python raises: ``errors.PYTHON_ONLY_ERRORS``, unless numba's code raised that
    too), as ``SpecRaised`` with ``at`` its row; if none does, a ``SpecRaised`` that says what the
    compiled code raised, on no state."""
    from kraftcheck.checker.explore.interpreted import InterpretedKernels
    python = InterpretedKernels(model)
    python_only: SpecRaised | None = None
    for row in range(lo, hi):
        try:
            if checks:
                python.violations(words, row, row + 1)
            else:
                python.successors(words, row, row + 1)
        except SpecRaised as e:
            if not e.python_only:
                return e
            python_only = python_only or e
    if python_only is not None and isinstance(error, PYTHON_ONLY_ERRORS):  # the spec's own raise TypeError(...)
        python_only.python_only = False  # numba's code raised it too: not the first tier's limit
        return python_only
    return SpecRaised(f"a function of spec {model.spec.name}, compiled,",
                      f"{type(error).__name__}: {error} on one of {hi - lo} states, on which none raised run as "
                      "Python (--engine reference and --compile never run the spec as Python)")


def placed(model, e: SpecRaised, steps) -> SpecRaised:
    """``e`` with the state it raised on and the path to it: ``steps`` (a list of ``Step``, the
    last one that state), shown as the traces show fields; None leaves ``e`` as it is. ``e.at``
    is cleared: callers further up do not place it again."""
    e.at = None
    if steps is None:
        return e
    show, labels = model.layout.show, model.labels
    return e.place(show(steps[-1].state), [(None if s.label is None else str(labels[s.label]), show(s.state))
                                           for s in steps])


def placed_at(model, e: SpecRaised, index: Optional[int], label: int,
              trace: Optional[Callable[[int], list]], step: Callable) -> SpecRaised:
    """``e`` placed on explored state ``index`` (``-1 - i``: initial state i, outside the
    constraints), then on the step by ``label`` if it is not negative: the path is ``trace(index)``,
    the last step ``step(state, label)``. The path helps the reader; where it cannot be rebuilt
    (``trace`` None: --symmetry's states are canonical) or rebuilding it fails, the error keeps
    the state alone. An ``e`` already placed, or on no state, is left as it is."""
    if e.path is not None or e.at is None or index is None or trace is None:
        e.at = None  # placed: the callers further up leave it as it is
        return e
    try:
        steps = [Step(None, model.initial[-1 - index])] if index < 0 else trace(index)
        if label >= 0:
            steps.append(Step(label, step(steps[-1].state, label)))
    except Exception:  # noqa: BLE001 - the path is a help; the error is what the run reports
        steps = None
    return placed(model, e, steps)
