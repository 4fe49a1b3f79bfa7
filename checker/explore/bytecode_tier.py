"""The first tier in bytecode: the interface of ``InterpretedKernels``, run by the interpreter
compiled once per installation (``kernels.bytecode``) on the spec's functions translated
(``checker.bytecode``).

It computes what ``InterpretedKernels`` computes (rows, words, fingerprints, labels, masks), tens
of times faster, with no compile of the spec's own, on every core (the interpreter's kernel
releases the GIL; a batch is split among threads as ``Kernels`` splits it). A state the bytecode
cannot finish (Python's integers would differ, an index is out of range, an action wrote and
declined, a successor left its domain) is redone in Python by ``InterpretedKernels`` itself, on
its part's thread, which gives Python's answer or the Python tier's error (the earliest state's,
as one thread would); so the two tiers agree on everything, errors included. The spec's
functions then run as Python on several threads at once: they are pure functions of their
arguments, as numba compiles them.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
from typing import Callable, Optional

import numpy as np

from kraftcheck.checker.bytecode import Programs, translate
from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.kernels import bytecode as vm
from kraftcheck.checker.kernels.layout_table import table
from kraftcheck.checker.kernels.threads import run_parts, split, thread_count
from kraftcheck.checker.model import Model


NO_PROGRAMS = np.zeros(0, np.int64)  # no program to run: no label, no property, no check


class BytecodeKernels(InterpretedKernels):
    """``successors`` and ``violations`` in bytecode; everything else as ``InterpretedKernels``.
    ``translate`` raises ``Untranslatable`` before anything runs if the spec's functions use
    what the bytecode does not have."""

    chunk_states = 1024  # a tenth of the time of chunks of 64 went to the engine's work per chunk

    def __init__(self, model: Model, programs: Optional[Programs] = None, load: bool = True) -> None:
        super().__init__(model)
        self.programs = programs if programs is not None else translate(model)
        self.table = table(model.layout)
        self.redone_in_python = 0  # states the bytecode left to Python (for the tests)
        self.threads = thread_count()
        self._no_row = self.buffers(1)  # the out arrays evaluate() does not write, of the types it takes
        if load:
            self.load_interpreter()

    def load_interpreter(self) -> None:
        """Load the interpreter's kernel from numba's cache (compile it, about 2 s, the first time
        on an installation) now, on no states, so that a run's first-tier time is spent exploring.
        Made with ``load=False``, the kernels need this before they run."""
        words = np.zeros((1, self.nwords), np.uint64)
        self._successors(words, 0, 0, self.buffers(1), 0)
        self._checks(words, 0, 0, np.zeros(1, np.uint64)[0:])

    def _successors(self, words: np.ndarray, lo: int, hi: int, out, first_row: int) -> tuple[int, int]:
        """``vm.evaluate`` for the successors of ``words[lo:hi]``, from row ``first_row`` of ``out``."""
        p = self.programs
        return vm.evaluate(words, lo, hi, self.table, p.code, p.tables, p.nregs, p.label_start, p.label_args,
                           p.arg_regs, p.property_start, NO_PROGRAMS, out.words[first_row:], out.hashes[first_row:],
                           out.labels[first_row:], out.props[first_row:] if p.property_start.shape[0] else out.props,
                           self._no_row.hashes, NO_LABEL)

    def _checks(self, words: np.ndarray, lo: int, hi: int, out: np.ndarray) -> tuple[int, int]:
        """``vm.evaluate`` for the checks' masks of ``words[lo:hi]``, into ``out``."""
        p, none = self.programs, self._no_row
        return vm.evaluate(words, lo, hi, self.table, p.code, p.tables, p.nregs, NO_PROGRAMS, p.label_args, p.arg_regs,
                           NO_PROGRAMS, p.check_start, none.words, none.hashes, none.labels, none.props, out, NO_LABEL)

    def parts(self, n: int) -> list[tuple[int, int]]:
        """How ``successors`` splits ``n`` states among the threads (the interpreter's kernel
        releases the GIL), as ``Kernels.parts``."""
        return split(0, n, self.threads if n >= 256 else 1)

    def successors(self, words: np.ndarray, lo: int = 0, hi: Optional[int] = None, out=None,
                   after_part: Optional[Callable[[int, int, int], None]] = None):
        hi, out = self._successor_batch(words, lo, hi, out)
        words = np.ascontiguousarray(words)

        def expand(j: int, a: int, b: int) -> int:
            redone = self._expand(words, lo + a, lo + b, out, a * self.nlabels)
            if after_part is not None:
                after_part(j, a, b)
            return redone

        self._on_threads(hi - lo, expand)
        return out

    def _on_threads(self, n: int, work: Callable[[int, int, int], int]) -> None:
        """``work(j, a, b)`` on each part (``parts(n)``) on its thread, each saying how many states
        it redid in Python. An error of the earliest part is raised: its state comes first."""
        parts = self.parts(n)
        redone = [0] * len(parts)

        def one(j: int) -> None:
            redone[j] = work(j, *parts[j])

        run_parts(one, len(parts))
        self.redone_in_python += sum(redone)

    def _expand(self, words: np.ndarray, lo: int, hi: int, out, first_row: int) -> int:
        """The rows of ``words[lo:hi]`` from row ``first_row`` of ``out``; a state the bytecode
        stops on is redone in Python. Returns how many were."""
        p, nlabels = self.programs, self.nlabels
        redone = 0
        at = lo
        while at < hi:
            base = first_row + (at - lo) * nlabels
            status, i = self._successors(words, at, hi, out, base)
            if status == vm.OK:
                break
            # state at + i in Python: its rows, or the Python tier's error
            one = super().successors(words, at + i, at + i + 1)
            row = base + i * nlabels
            out.words[row:row + nlabels] = one.words[:nlabels]
            out.hashes[row:row + nlabels] = one.hashes[:nlabels]
            out.labels[row:row + nlabels] = one.labels[:nlabels]
            if p.property_start.shape[0]:
                out.props[row:row + nlabels] = one.props[:nlabels]
            redone += 1
            at += i + 1
        return redone

    def violations(self, words: np.ndarray, lo: int = 0, hi: Optional[int] = None) -> np.ndarray:
        self._check_batch(words)
        hi = words.shape[0] if hi is None else hi
        out = np.zeros(hi - lo, np.uint64)
        if not self.programs.check_start.shape[0]:
            return out
        words = np.ascontiguousarray(words)
        self._on_threads(hi - lo, lambda j, a, b: self._check(words, lo + a, lo + b, out[a:b]))
        return out

    def _check(self, words: np.ndarray, lo: int, hi: int, out: np.ndarray) -> int:
        """``out[i]``: the checks' mask of ``words[lo + i]``; a state the bytecode stops on is
        redone in Python. Returns how many were."""
        p = self.programs
        redone = 0
        at = lo
        while at < hi:
            status, i = self._checks(words, at, hi, out[at - lo:])
            if status == vm.OK:
                break
            out[at - lo + i] = super().violations(words, at + i, at + i + 1)[0]
            redone += 1
            at += i + 1
        return redone


class InterpreterCompile:
    """The interpreter's kernel compiled into numba's cache by a helper process, on an
    installation's first run: meanwhile the run compiles the engine's own kernels (the visited
    set, the row passes: about 1.3 s against the interpreter's 2.5 s), so the two take the two
    cores rather than one after the other. The run then loads the interpreter from the cache
    (``BytecodeKernels.load_interpreter``); if the helper failed, it compiles it itself there."""

    def __init__(self) -> None:
        # the run's own sys.path, and not the working directory first (-c would put it there,
        # where a folder named kraftcheck would stand in for the package)
        code = "import sys; del sys.path[0]; import json; sys.path[:] = json.loads(sys.argv[1]); " \
            "from kraftcheck.checker.kernels.bytecode import warm_up; warm_up()"
        # LLVM at -O1: a shorter compile on the run's path, and the interpreter explores as fast
        # as at -O3 (bench/RESULTS.md, "The cold first run before TLC's"); what it compiles is
        # cached for every later run
        env = dict(os.environ, NUMBA_OPT="1")
        self.process = subprocess.Popen([sys.executable, "-c", code, json.dumps(sys.path)], env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)

    def wait(self) -> None:
        self.process.wait()

    def stop(self) -> None:
        """The run is over (or failed): end the helper if it still compiles."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


_started_early: Optional[InterpreterCompile] = None


def start_interpreter_compile() -> None:
    """On an installation's first run, start compiling the interpreter now, before the model is
    built (a model with 100,000 initial states takes a second): the command line calls this
    first thing, and the run's engine takes the helper over (``interpreter_compile``). One that
    no run takes over is stopped when this process exits."""
    global _started_early
    if _started_early is None and not vm.cached():
        _started_early = InterpreterCompile()
        atexit.register(_started_early.stop)


def interpreter_compile() -> Optional[InterpreterCompile]:
    """The helper compiling the interpreter for a run: the one started early, else a new one if
    the interpreter is not cached, else None."""
    global _started_early
    helper, _started_early = _started_early, None
    if helper is None and not vm.cached():
        helper = InterpreterCompile()
    return helper
