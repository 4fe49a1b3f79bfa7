"""The compiled kernels checked against the spec's own Python, on a sample of the states they expand.

A run's verdict rests on code numba compiled, most often loaded from the kernel cache and numba's
cache. Their files are checked (``codegen``: each generated module named by a digest of its text
and of the sources it compiles in; ``numba_cache``: each compiled file bound to its name, its
index entry and its sources), but a check of files does not see code that computes otherwise than
the spec says: an entry compiled against other sources that kept a valid stamp, a miscompile, a
kernel of kraftcheck's with a bug, a spec function whose arithmetic numba runs differently from
Python (an integer that overflows int64). Any of them gives counts and verdicts that look right.

``KernelAudit`` computes again, with the interpreted tier (``InterpretedKernels``: the spec's
functions run as Python, the states packed by the reference packer), the successors of a few of
the states the compiled kernels expand (each action instance enabled or not, the successor's
packed words and fingerprint, its transition-property mask) and their invariant and constraint
masks, and compares. It audits the first states of the first chunk any compiled kernels (or the
bytecode tier, which runs the spec in a compiled interpreter) expand, then one state picked at
random per chunk while the audit has taken less than ``SHARE`` of the run's time (a Kafka state
costs about a millisecond in Python). A difference stops the run with no verdict
(``KernelsDisagree``, exit 2), naming the state, the action and the fields; a state on which the
spec's Python raises (``SpecRaised``, not a tier's limit: a check writing its state through a view,
which compiled code does in silence) stops it with that error, as the first tier would. Under ``--symmetry``
the states of each chunk are also tried against the declared symmetry, in a random order
(``symmetry_check.SymmetryAudit``), whatever the tier, while those trials have taken less than
``SHARE`` of the run's time or less than ``FLOOR_S`` of CPU: every state of a short run.
``confirm_counterexamples`` replays, the same way, each counterexample a run is about to report.
"""

from __future__ import annotations

import time
import weakref
from contextlib import contextmanager
from typing import Any, Optional

import numpy as np

from kraftcheck.checker.codegen import NO_LABEL, cache_dir
from kraftcheck.checker.errors import KernelsDisagree, SpecError, SpecRaised
from kraftcheck.checker.model import Model

# the most of a run's time the audit takes past the first chunk of each compiled kernels
SHARE = 0.005
# seconds a run may spend trying its declared symmetry, whatever its share: each chunk of a short
# run is tried (a symmetry broken deep in the space is not seen on the first states)
FLOOR_S = 0.1
# states of a chunk tried against the declared symmetry in one call, at most (fewer when the
# budget left pays for fewer: symmetry_check.SymmetryAudit.affordable). Below the 256 states at
# which the kernels split a call over the worker threads (compiled.Kernels._parts): the trials'
# budget counts the calling thread's CPU only
SYMMETRY_BATCH = 64
# states of the first chunk audited, each time compiled kernels start expanding
FIRST_STATES = 4
SEED = 20261207  # the sample is the same on every run of the same model


@contextmanager
def _raised_on_row(row: int):
    """A spec's error met on the audited state ``level[row]`` says that row (``SpecRaised.at``), as
    a tier's error says its row in the states it was handed: the caller places it, the path to
    the state included, as it places its kernels' errors."""
    try:
        yield
    except SpecRaised as e:
        e.at = row
        raise


class KernelAudit:
    """Audits the compiled kernels of one run (``chunk`` before each chunk they expand)."""

    def __init__(self, model: Model, share: float = SHARE, first_states: int = FIRST_STATES,
                 symmetry: bool = False) -> None:
        self.model = model
        # --symmetry: the declared symmetry tried again while exploring (symmetry_check)
        self._symmetry: Any = None
        if symmetry:
            from kraftcheck.checker.symmetry_check import SymmetryAudit
            self._symmetry = SymmetryAudit(model)
            self._symmetry_rng = np.random.default_rng(SEED + 1)
        self.share = share
        self.first_states = first_states
        self.audited = 0          # states compared so far
        self.spent = 0.0          # seconds the comparisons took
        self._started = time.perf_counter()
        self._python: Any = None  # the interpreted tier, made at the first audit
        # the kernels whose first chunk was audited (weakly: an id would be reused once its kernels are freed)
        self._seen: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._rng = np.random.default_rng(SEED)
        self._where: Optional[str] = None

    def chunk(self, kernels: Any, level: np.ndarray, lo: int, hi: int, first_index: Optional[int]) -> None:
        """Before ``kernels`` expand ``level[lo:hi]`` (``first_index``: the run's number of state
        ``level[lo]``, None if the caller has none): audit some of those states if the kernels are
        compiled and the budget allows."""
        if hi <= lo:
            return
        if self._symmetry is not None and self._symmetry.within(self.share, FLOOR_S):
            # the declared symmetry, on the chunk's states in a random order and in batches (a
            # trial's cost is mostly per call) while its own budget allows: every state of a short
            # run, whose break a state or two a level would miss, and at least one state of each
            # chunk within it, deep ones too. A batch is what the budget left affords, so that the
            # last one does not overrun it by up to SYMMETRY_BATCH states' trials. Only as many
            # states are drawn as the budget left affords (the whole chunk before any was tried):
            # the order of a whole chunk of 12,000 took about 170 us a chunk, past the budget
            most = self._symmetry.affordable(self.share, FLOOR_S, hi - lo) if self._symmetry.tried else hi - lo
            order = lo + self._symmetry_rng.choice(hi - lo, size=most, replace=False)
            start = 0
            while start < order.size:
                take = self._symmetry.affordable(self.share, FLOOR_S, SYMMETRY_BATCH)
                if not take:
                    break
                self._symmetry.state(kernels, level[np.sort(order[start:start + take])])
                start += take
        if _plain_python(kernels):  # nothing compiled to audit: the spec's Python against itself, once
            if kernels not in self._seen:
                self._seen.add(kernels)
                t0 = time.perf_counter()
                try:
                    for i in range(lo, min(hi, lo + self.first_states)):
                        with _raised_on_row(i):
                            self._python_twice(level[i:i + 1], None if first_index is None else first_index + i - lo)
                finally:
                    self.spent += time.perf_counter() - t0
            return
        if kernels not in self._seen:
            self._seen.add(kernels)
            rows = range(lo, min(hi, lo + self.first_states))
        elif self.spent <= self._budget():
            rows = [int(self._rng.integers(lo, hi))]
        else:
            return
        t0 = time.perf_counter()
        try:
            for i in rows:
                with _raised_on_row(i):
                    self.state(kernels, level[i:i + 1], None if first_index is None else first_index + i - lo)
        finally:
            self.spent += time.perf_counter() - t0

    def _budget(self) -> float:
        """The seconds a kind of check may have taken so far: ``share`` of the run's."""
        return self.share * (time.perf_counter() - self._started)

    def state(self, kernels: Any, words: np.ndarray, index: Optional[int]) -> None:
        """Compare the compiled ``kernels`` with the spec's Python on the one packed state ``words``
        (the run's state number ``index``); raise ``KernelsDisagree`` at the first difference."""
        model = self.model
        words = np.ascontiguousarray(words, dtype=np.uint64)
        answer = self._python_twice(words, index)
        if answer is None:
            return  # Python cannot run the spec here (a tier's limit, a field's domain): nothing to compare
        want, want_masks = answer
        # the generated module the compiled kernels were imported from, for the error (none: the bytecode tier)
        self._where = getattr(getattr(kernels, "module", None), "__file__", None)
        state = model.layout.unpack(words[0].tolist())
        try:
            got = kernels.successors(words, 0, 1, kernels.buffers(1))
            got_masks = kernels.violations(words, 0, 1)
        except SpecError as e:  # where the spec's Python ran through
            raise self._disagree(index, state, f"the compiled kernels raised where Python did not ({e})") from None
        self.audited += 1
        with_props = bool(model.kernel_property_count)
        for k, label in enumerate(model.labels):
            compiled_fires, python_fires = got.labels[k] != NO_LABEL, want.labels[k] != NO_LABEL
            if compiled_fires != python_fires:
                raise self._disagree(index, state, f"action {label} is {'enabled' if python_fires else 'disabled'} "
                                                   f"in Python, {'enabled' if compiled_fires else 'disabled'} compiled")
            if not python_fires:
                continue
            if not np.array_equal(got.words[k], want.words[k]):
                fields = self._differing(got.words[k], want.words[k])
                raise self._disagree(index, state, f"the successor under {label} differs in {fields}")
            if got.hashes[k] != want.hashes[k]:
                raise self._disagree(index, state, f"the fingerprint of the successor under {label} differs")
            if with_props and got.props[k] != want.props[k]:
                raise self._disagree(index, state, f"the transition properties violated by {label} differ "
                                                   f"(mask {int(got.props[k]):#x} compiled, {int(want.props[k]):#x} "
                                                   f"in Python)")
        if got_masks[0] != want_masks[0]:
            raise self._disagree(index, state, f"the invariants and constraints violated differ (mask "
                                               f"{int(got_masks[0]):#x} compiled, {int(want_masks[0]):#x} in Python)")

    def _python_twice(self, words: np.ndarray, index: Optional[int]) -> Optional[tuple[Any, np.ndarray]]:
        """The interpreted tier's successors and invariant masks of the one packed state ``words``,
        computed twice: a spec whose functions answer otherwise the second time (random numbers,
        an uninitialised ``np.empty``, a module-level value it changes) has no one state space to
        count, so that is the spec's error (exit 2). None if Python cannot run the spec here."""
        if self._python is None:
            from kraftcheck.checker.explore.interpreted import InterpretedKernels
            self._python = InterpretedKernels(self.model)
        python = self._python
        words = np.ascontiguousarray(words, dtype=np.uint64)
        answers = []
        for _ in range(2):
            try:
                out = python.successors(words, 0, 1)
                answers.append((_Answer(out.labels.copy(), out.words.copy(), out.hashes.copy(), out.props.copy()),
                                python.violations(words, 0, 1).copy()))
            except SpecRaised as e:
                if e.python_only:  # what only Python raises (a tier's limit): the compiled answer stands
                    return None
                # the spec raises on a state the compiled kernels expand (a check that writes its
                # state through a view, which compiled code does in silence): the first tier and
                # the reference explorer stop there, with no verdict, and so does this run
                raise e.place(self.model.layout.show(tuple(self.model.layout.unpack(words[0].tolist()))))
            except SpecError:
                return None
        (first, masks), (again, masks_again) = answers
        with_props = bool(self.model.kernel_property_count)
        for k, label in enumerate(self.model.labels):
            fires, fires_again = first.labels[k] != NO_LABEL, again.labels[k] != NO_LABEL
            if fires != fires_again or (fires and (not np.array_equal(first.words[k], again.words[k])
                                                   or (with_props and first.props[k] != again.props[k]))):
                raise self._not_deterministic(index, words, f"action {label} answered otherwise the second time")
        if masks[0] != masks_again[0]:
            raise self._not_deterministic(index, words, "its invariants or constraints answered otherwise the "
                                                        "second time")
        return first, masks

    def _not_deterministic(self, index: Optional[int], words: np.ndarray, what: str) -> SpecError:
        on = "a state" if index is None else f"state {index}"
        state = self.model.layout.show(self.model.layout.unpack(words[0].tolist()))
        return SpecError(f"spec {self.model.spec.name} is not deterministic: on {on}, called twice with the same "
                         f"state, {what}; no verdict. A spec's functions must give the same answer every time "
                         f"(random numbers, the clock, an np.empty read before it is written or a module-level "
                         f"value a function changes each make a run count no one state space): make a choice an "
                         f"action parameter, which the checker explores value by value. The state: {state}")

    def _differing(self, got: np.ndarray, want: np.ndarray) -> str:
        layout = self.model.layout
        a, b = layout.unpack(got.tolist()), layout.unpack(want.tolist())
        names = [f"{layout.element_name(e)} ({a[e.flat]} compiled, {b[e.flat]} in Python)"
                 for e in layout.elements if a[e.flat] != b[e.flat]]
        return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "") or "its packed words"

    def _disagree(self, index: Optional[int], state: tuple[int, ...], what: str) -> KernelsDisagree:
        return KernelsDisagree(self.model.spec.name, index, what, self.model.layout.show(state), str(cache_dir()),
                               self._where)


class _Answer:
    """The interpreted tier's successors of one state, as ``state`` compares them."""

    def __init__(self, labels: np.ndarray, words: np.ndarray, hashes: np.ndarray, props: np.ndarray) -> None:
        self.labels, self.words, self.hashes, self.props = labels, words, hashes, props


def _plain_python(kernels: Any) -> bool:
    """Whether ``kernels`` are the interpreted tier itself (the bytecode tier, which runs the spec
    in a compiled interpreter, is audited as the compiled kernels are)."""
    from kraftcheck.checker.explore.bytecode_tier import BytecodeKernels
    from kraftcheck.checker.explore.interpreted import InterpretedKernels
    return isinstance(kernels, InterpretedKernels) and not isinstance(kernels, BytecodeKernels)


def confirm_counterexamples(model: Model, violations: list) -> None:
    """Replay each counterexample (``Violation``: an invariant's, a transition property's, a
    deadlock's) with the spec's functions run as Python before it is reported: every step from an
    initial state to the state the trace gives, and the violation itself on its last state or
    step. A trace built from compiled kernels that Python does not reproduce is ``KernelsDisagree``
    (no verdict), not a counterexample. One on whose states the spec raises, run as Python, is
    that error (``SpecRaised``, exit 2, no verdict: the first tier and the reference explorer stop
    there), unless only Python raises it (``python_only``, a tier's limit), or it is a field's
    domain Python finds broken: those are left as found. The interpreted tier does the work (its
    ``step``, ``successors`` and ``violations``)."""
    from kraftcheck.checker.explore.interpreted import InterpretedKernels
    python = InterpretedKernels(model)
    initial = {tuple(s) for s in model.initial}

    def differs(v) -> Optional[str]:
        steps = [tuple(step.state) for step in v.steps]
        if steps[0] not in initial:
            return "its first state is no initial state"
        for k in range(1, len(steps)):
            if python.step(steps[k - 1], v.steps[k].label) != steps[k]:
                return f"step {k} ({model.labels[v.steps[k].label]}) does not lead to its state in Python"
        last = python.pack([steps[-1]])
        if v.kind == "invariant":
            bit = next((i for i, x in enumerate(model.invariants) if x.name == v.check), None)
            if bit is not None and not int(python.violations(last)[0]) >> bit & 1:
                return f"invariant {v.check} holds on its last state in Python"
        elif v.kind == "property" and len(steps) > 1:
            bit = next((i for i, x in enumerate(model.properties) if x.name == v.check), None)
            if bit is not None and not int(python.successors(python.pack([steps[-2]])).props[v.steps[-1].label]) >> bit & 1:
                return f"transition property {v.check} holds on its last step in Python"
        elif v.kind == "deadlock":
            out = python.successors(last)
            moves = [k for k in range(len(model.labels)) if out.labels[k] != NO_LABEL
                     and not np.array_equal(out.words[k], last[0])]
            if moves:
                return f"its last state is no deadlock in Python ({model.labels[moves[0]]} leaves it)"
        return None

    for v in violations:
        if v.kind not in ("invariant", "property", "deadlock") or not v.steps:
            continue
        try:
            why = differs(v)
        except SpecRaised as e:
            if e.python_only:  # what only Python raises (a tier's limit): the compiled answer stands
                continue
            # the spec raises, run as Python, on a state of the trace: the first tier and the
            # reference explorer stop there, with no verdict, and so does this run
            shown = e.state
            path = []
            for step in v.steps:
                path.append((None if not path else str(model.labels[step.label]), model.layout.show(tuple(step.state))))
                if path[-1][1] == shown:
                    break
            raise e.place(shown, path if path and path[-1][1] == shown else None) from None
        except SpecError:
            continue
        if why is not None:
            raise KernelsDisagree(model.spec.name, None, f"the counterexample of {v.check} is none: {why}",
                                  model.layout.show(tuple(v.steps[-1].state)), str(cache_dir()))
