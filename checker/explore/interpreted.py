"""The compiled kernels' interface, evaluated in plain Python: the engine's first tier.

Compiling a large spec's kernels takes tens of seconds; a check that ends after a few thousand
states (the first violation of a small model) should not wait for that. ``InterpretedKernels``
computes exactly what ``Kernels`` computes (the same successor rows, packed words, fingerprints,
labels, transition-property and invariant masks) by running the spec's functions as Python on
Python states (ints, numpy arrays: ``Layout.to_object``) and packing them with the reference
packer, so the engine can explore with it while the compiled kernels are built in the
background, and switch between chunks without any difference in counts, state numbering or
counterexamples.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from kraftcheck.checker.action_returns import not_a_bool
from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.errors import KraftcheckError, SpecError, spec_raised, wrote_and_declined
from kraftcheck.checker.kernels.hashing import fingerprint_reference
from kraftcheck.checker.layout import state_copier
from kraftcheck.checker.model import Model, python_arithmetic, python_function


class InterpretedKernels:
    """``successors`` and ``violations`` over packed states, in Python; see ``Kernels``."""

    compiled = False
    why_python: Optional[str] = None  # set when the bytecode tier could not take the spec: what it lacks
    # states per chunk: few, so that the switch to compiled kernels, between chunks, comes soon
    chunk_states = 64

    def __init__(self, model: Model) -> None:
        self.model = model
        self.layout = model.layout
        self.nwords = model.layout.nwords
        self.nlabels = len(model.labels)
        self.actions = [(python_function(lab.action.fn), lab.values) for lab in model.labels]
        # the checks, then the constraints: the bits of Kernels' masks
        self.invariants = [python_function(inv.fn) for inv in model.invariants + model.constraints]
        self.properties = [python_function(p.fn) for p in model.properties + model.action_constraints]
        self.copy = state_copier(model.layout)
        self._invariant_names = [f"invariant {x.name}" for x in model.invariants] + \
            [f"constraint {x.name}" for x in model.constraints]
        self._property_names = [f"transition property {x.name}" for x in model.properties] + \
            [f"action constraint {x.name}" for x in model.action_constraints]

    def _check_batch(self, words: np.ndarray) -> None:
        if words.ndim != 2 or words.shape[1] != self.nwords or words.dtype != np.uint64:
            raise TypeError(f"packed states must be a 2-D uint64 array with {self.nwords} words per row")

    def pack(self, flats: list[tuple[int, ...]]) -> np.ndarray:
        return self.layout.pack_many(flats)

    def unpack(self, words: np.ndarray) -> list[tuple[int, ...]]:
        self._check_batch(words)
        return [self.layout.unpack(row.tolist()) for row in words]

    def buffers(self, states: int):
        from kraftcheck.checker.explore.compiled import ChunkBuffers
        return ChunkBuffers(states, self.nlabels, self.layout, bool(self.model.kernel_property_count))

    def parts(self, n: int) -> list[tuple[int, int]]:
        """One part: the interpreted tier runs on one thread."""
        return [(0, n)] if n else []

    def _successor_batch(self, words: np.ndarray, lo: int, hi: Optional[int], out) -> tuple[int, Any]:
        """``successors``' arguments checked: the end of the range, and the buffers (made if none)."""
        self._check_batch(words)
        hi = words.shape[0] if hi is None else hi
        if not 0 <= lo <= hi <= words.shape[0]:
            raise IndexError(f"successors(): bad range {lo}..{hi} of {words.shape[0]} states")
        out = self.buffers(hi - lo) if out is None else out
        if out.states < hi - lo:
            raise ValueError(f"successors(): buffers hold {out.states} states, asked for {hi - lo}")
        return hi, out

    @python_arithmetic
    def successors(self, words: np.ndarray, lo: int = 0, hi: Optional[int] = None, out=None,
                   after_part: Optional[Callable[[int, int, int], None]] = None):
        """Every successor of ``words[lo:hi]`` at row ``i * nlabels + label``, as ``Kernels.successors``
        (``after_part`` runs once, on the one part, when every row is computed)."""
        hi, out = self._successor_batch(words, lo, hi, out)
        layout, copy, nlabels = self.layout, self.copy, self.nlabels
        label = k = -1  # what runs: action ``label``, then transition property ``k`` on its step
        i = 0
        try:
            for i in range(hi - lo):
                source = layout.unpack(words[lo + i].tolist())
                before = layout.to_object(source, read_only=True)
                after = copy(before)  # reused while actions are disabled: they must not touch it
                for label, (fn, values) in enumerate(self.actions):
                    k = -1
                    row = i * nlabels + label
                    fires = fn(before, after, *values)
                    if fires is not True and fires is not False:  # the identity tests cost next to nothing
                        fires = not_a_bool(fires, f"action {self.model.labels[label].action.name}", fn)
                    if not fires:
                        if not layout.unchanged(after, before):
                            raise wrote_and_declined(str(self.model.labels[label]), self.model.labels[label].action.fn)
                        out.labels[row] = NO_LABEL
                        continue
                    succ = layout.from_object(after)
                    try:
                        packed = layout.pack(succ)
                    except SpecError:  # say it again naming the step, as the other tiers do
                        layout.check_domains(succ, step=self.model.labels[label])
                        raise
                    out.words[row] = packed
                    out.hashes[row] = fingerprint_reference(packed)
                    out.labels[row] = label
                    if self.properties:
                        # read-only, as the checks' states are: a property or action constraint that
                        # wrote the step's successor would change what the next one reads
                        step_after = layout.to_object(succ, read_only=True)
                        mask = 0
                        for k, prop in enumerate(self.properties):
                            holds = prop(before, step_after)
                            if holds is not True and holds is not False:
                                holds = not_a_bool(holds, self._property_names[k], prop)
                            if not holds:
                                mask |= 1 << k
                        out.props[row] = mask
                    after = copy(before)
        except KraftcheckError:
            raise
        except Exception as e:  # noqa: BLE001 - the spec's own code failed: say whose, in one line
            what = f"action {self.model.labels[label]}" if k < 0 else \
                f"{self._property_names[k]} on a step of {self.model.labels[label]}"
            raise spec_raised(what, e, at=lo + i).place(self.layout.show(source)) from None
        if after_part is not None and hi > lo:
            after_part(0, 0, hi - lo)
        return out

    @python_arithmetic
    def step(self, flat: tuple[int, ...], label: int) -> Optional[tuple[int, ...]]:
        """The successor of ``flat`` under ``label`` (None if disabled), interpreted. What the
        action raises is ``SpecRaised`` on ``flat``, as in ``successors``."""
        fn, values = self.actions[label]
        before = self.layout.to_object(flat, read_only=True)
        after = self.copy(before)
        try:
            fires = fn(before, after, *values)
        except KraftcheckError:
            raise
        except Exception as e:  # noqa: BLE001 - the spec's own code failed: say whose, in one line
            raise spec_raised(f"action {self.model.labels[label]}", e).place(self.layout.show(flat)) from None
        if fires is not True and fires is not False:
            fires = not_a_bool(fires, f"action {self.model.labels[label].action.name}", fn)
        if not fires:
            return None
        succ = self.layout.from_object(after)
        self.layout.check_domains(succ, step=self.model.labels[label])
        return succ

    @python_arithmetic
    def violations(self, words: np.ndarray, lo: int = 0, hi: Optional[int] = None) -> np.ndarray:
        """Bitmask of violated invariants (bit k = ``model.invariants[k]``) for ``words[lo:hi]``."""
        self._check_batch(words)
        hi = words.shape[0] if hi is None else hi
        out = np.zeros(hi - lo, np.uint64)
        if not self.invariants:
            return out
        k = j = 0
        try:
            for j in range(hi - lo):
                state = self.layout.to_object(self.layout.unpack(words[lo + j].tolist()), read_only=True)
                mask = 0
                for k, inv in enumerate(self.invariants):
                    holds = inv(state)
                    if holds is not True and holds is not False:
                        holds = not_a_bool(holds, self._invariant_names[k], inv)
                    if not holds:
                        mask |= 1 << k
                out[j] = mask
        except KraftcheckError:
            raise
        except Exception as e:  # noqa: BLE001 - the spec's own code failed: say whose, in one line
            shown = self.layout.show(self.layout.unpack(words[lo + j].tolist()))
            raise spec_raised(self._invariant_names[k], e, at=lo + j).place(shown) from None
        return out
