"""The first tier in bytecode: the interface of ``InterpretedKernels``, run by the interpreter
compiled once per installation (``kernels.bytecode``) on the spec's functions translated
(``checker.bytecode``).

It computes what ``InterpretedKernels`` computes (rows, words, fingerprints, labels, masks), tens
of times faster, with no compile of the spec's own. A state the bytecode cannot finish (Python's
integers would differ, an index is out of range, an action wrote and declined, a successor left
its domain) is redone in Python by ``InterpretedKernels`` itself, which gives Python's answer or
the Python tier's error; so the two tiers agree on everything, errors included.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from kraftcheck.checker.bytecode import Programs, translate
from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.kernels import bytecode as vm
from kraftcheck.checker.kernels.layout_table import table
from kraftcheck.checker.model import Model


class BytecodeKernels(InterpretedKernels):
    """``successors`` and ``violations`` in bytecode; everything else as ``InterpretedKernels``.
    ``translate`` raises ``Untranslatable`` before anything runs if the spec's functions use
    what the bytecode does not have."""

    chunk_states = 1024  # a tenth of the time of chunks of 64 went to the engine's work per chunk

    def __init__(self, model: Model, programs: Optional[Programs] = None) -> None:
        super().__init__(model)
        self.programs = programs if programs is not None else translate(model)
        self.table = table(model.layout)
        self.redone_in_python = 0  # states the bytecode left to Python (for the tests)
        self._load_interpreter()

    def _load_interpreter(self) -> None:
        """Load the interpreter's kernels from numba's cache (compile them, about 2 s, the first
        time on an installation) now, on no states, so that a run's first-tier time is spent
        exploring."""
        p = self.programs
        words = np.zeros((1, self.nwords), np.uint64)
        out = self.buffers(1)
        vm.successors(words, 0, 0, self.table, p.code, p.tables, p.nregs, p.label_start, p.label_args, p.arg_regs,
                      p.property_start, out.words[0:], out.hashes[0:], out.labels[0:], out.props[0:], NO_LABEL)
        vm.violations(words, 0, 0, self.table, p.code, p.tables, p.nregs, p.check_start, np.zeros(1, np.uint64)[0:])

    def successors(self, words: np.ndarray, lo: int = 0, hi: Optional[int] = None, out=None,
                   after_part: Optional[Callable[[int, int, int], None]] = None):
        hi, out = self._successor_batch(words, lo, hi, out)
        p, nlabels = self.programs, self.nlabels
        words = np.ascontiguousarray(words)
        at = lo
        while at < hi:
            base = (at - lo) * nlabels
            status, i = vm.successors(words, at, hi, self.table, p.code, p.tables, p.nregs, p.label_start, p.label_args,
                                      p.arg_regs, p.property_start, out.words[base:], out.hashes[base:],
                                      out.labels[base:], out.props[base:] if p.property_start.shape[0] else out.props,
                                      NO_LABEL)
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
            self.redone_in_python += 1
            at += i + 1
        if after_part is not None and hi > lo:
            after_part(0, 0, hi - lo)
        return out

    def violations(self, words: np.ndarray, lo: int = 0, hi: Optional[int] = None) -> np.ndarray:
        self._check_batch(words)
        hi = words.shape[0] if hi is None else hi
        out = np.zeros(hi - lo, np.uint64)
        p = self.programs
        if not p.check_start.shape[0]:
            return out
        words = np.ascontiguousarray(words)
        at = lo
        while at < hi:
            status, i = vm.violations(words, at, hi, self.table, p.code, p.tables, p.nregs, p.check_start, out[at - lo:])
            if status == vm.OK:
                break
            out[at - lo + i] = super().violations(words, at + i, at + i + 1)[0]
            self.redone_in_python += 1
            at += i + 1
        return out
