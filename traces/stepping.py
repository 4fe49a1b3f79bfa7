"""Single steps and checks for traces, interpreted or compiled.

Traces are a few dozen steps, so they run the spec's functions interpreted by default (the
reference explorer's way: no compile wait, obviously the spec's text). ``compiled=True`` runs
them through ``Model.step`` instead, the engine's own compiled code path, for a replay that also
vouches for the compiled actions.

Here, and only here, an exception is told to be the spec's: one a spec's function raises (run as
Python, or compiled within ``Model.step`` / ``violated_*``) becomes ``SpecRaised``, naming the
function and its line, as a check names it. Anything else raised while a trace is stepped or
built is kraftcheck's own bug and is left to propagate as one.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from kraftcheck.checker.action_returns import bool_checked
from kraftcheck.checker.errors import KraftcheckError, SpecError, spec_raised
from kraftcheck.checker.layout import state_copier
from kraftcheck.checker.model import Model, python_arithmetic, python_function


class Stepper:
    """Successors and checks of one model's states, one at a time."""

    def __init__(self, model: Model, compiled: bool = False) -> None:
        self.model = model
        self.compiled = compiled
        self._actions = [(_spec_function(f"action {lab.action.name}", lab.action.fn), lab.values)
                         for lab in model.labels]
        self._invariants = [(inv.name, _spec_function(f"invariant {inv.name}", inv.fn)) for inv in model.invariants]
        self._properties = [(p.name, _spec_function(f"transition property {p.name}", p.fn)) for p in model.properties]
        self._constraints = [(c.name, _spec_function(f"constraint {c.name}", c.fn)) for c in model.constraints]
        self._action_constraints = [(c.name, _spec_function(f"action constraint {c.name}", c.fn))
                                    for c in model.action_constraints]
        self._copy = state_copier(model.layout)

    @python_arithmetic
    def step(self, flat: tuple[int, ...], label: int) -> Optional[tuple[int, ...]]:
        """The successor of ``flat`` under ``label``, or None when the action is disabled."""
        if self.compiled:
            return self._compiled(f"action {self.model.labels[label].action.name}", self.model.step,
                                  self._python_step, flat, label)
        return self._python_step(flat, label)

    def _python_step(self, flat: tuple[int, ...], label: int) -> Optional[tuple[int, ...]]:
        layout = self.model.layout
        fn, values = self._actions[label]
        before = layout.to_object(flat, read_only=True)
        after = self._copy(before)
        if not fn(before, after, *values):
            if layout.from_object(after) != tuple(flat):
                raise SpecError(f"action {self.model.labels[label]} changed the successor but returned False")
            return None
        succ = layout.from_object(after)
        layout.check_domains(succ, step=self.model.labels[label])
        return succ

    @python_arithmetic
    def successors(self, flat: tuple[int, ...]) -> list[tuple[int, tuple[int, ...]]]:
        """Every (label, successor) of ``flat``; one copy per enabled action, not per label."""
        if self.compiled:
            out = []
            for lab in range(len(self.model.labels)):
                succ = self.step(flat, lab)
                if succ is not None:
                    out.append((lab, succ))
            return out
        layout = self.model.layout
        before = layout.to_object(flat, read_only=True)
        after = self._copy(before)
        out = []
        for lab, (fn, values) in enumerate(self._actions):
            if fn(before, after, *values):
                succ = layout.from_object(after)
                layout.check_domains(succ, step=self.model.labels[lab])
                out.append((lab, succ))
                after = self._copy(before)
            elif not layout.unchanged(after, before):
                raise SpecError(f"action {self.model.labels[lab]} changed the successor but returned False")
        return out

    @python_arithmetic
    def violated_invariants(self, flat: tuple[int, ...]) -> list[str]:
        if self.compiled:
            return self._compiled(f"an invariant of spec {self.model.spec.name}", self.model.violated_invariants,
                                  self._python_invariants, flat)
        return self._python_invariants(flat)

    def _python_invariants(self, flat: tuple[int, ...]) -> list[str]:
        obj = self.model.layout.to_object(flat, read_only=True)
        return [name for name, fn in self._invariants if not fn(obj)]

    @python_arithmetic
    def violated_properties(self, before: tuple[int, ...], after: tuple[int, ...]) -> list[str]:
        if self.compiled:
            return self._compiled(f"a transition property of spec {self.model.spec.name}",
                                  self.model.violated_properties, self._python_properties, before, after)
        return self._python_properties(before, after)

    def _python_properties(self, before: tuple[int, ...], after: tuple[int, ...]) -> list[str]:
        layout = self.model.layout
        b, a = layout.to_object(before, read_only=True), layout.to_object(after, read_only=True)
        return [name for name, fn in self._properties if not fn(b, a)]

    @python_arithmetic
    def outside_constraints(self, flat: tuple[int, ...]) -> list[str]:
        """The state constraints the model applies that ``flat`` breaks (interpreted either way)."""
        obj = self.model.layout.to_object(flat, read_only=True)
        return [name for name, fn in self._constraints if not fn(obj)]

    @python_arithmetic
    def outside_action_constraints(self, before: tuple[int, ...], after: tuple[int, ...]) -> list[str]:
        """The action constraints the model applies that the step ``before`` -> ``after`` breaks."""
        layout = self.model.layout
        b, a = layout.to_object(before, read_only=True), layout.to_object(after, read_only=True)
        return [name for name, fn in self._action_constraints if not fn(b, a)]

    def _compiled(self, function: str, call: Callable, python: Callable, *args: Any) -> Any:
        """``call(*args)``, a ``Model`` method that runs the spec's compiled functions; what it
        raises is the spec's error, named by the same call run as Python (which raises the spec's
        own line) or, when Python raises nothing, as ``function``."""
        try:
            return call(*args)
        except KraftcheckError:
            raise
        except Exception as e:  # noqa: BLE001 - numba's exception names no line of the spec's
            error = e
        python(*args)
        raise spec_raised(function, error.with_traceback(None)) from None


def _spec_function(function: str, fn: Callable) -> Callable:
    """``fn``, ``function`` of a spec ("action Send", "invariant Safe"...), run as Python: each
    value it returns checked to be a bool (``bool_checked``), and what it raises the spec's error."""
    checked = bool_checked(function, python_function(fn))

    def call(*args: Any) -> Any:
        try:
            return checked(*args)
        except KraftcheckError:
            raise
        except Exception as e:  # noqa: BLE001 - the spec's own function raised: its error, as a check says it
            raise spec_raised(function, e) from None
    return call


def spec_hook(spec: Any, method: str, *args: Any) -> Any:
    """``spec.<method>(*args)``, a presentation hook a trace uses (``lanes``, ``action_lanes``,
    ``liveness``...): what it raises is the spec's error, named as ``model.spec_call`` names it."""
    try:
        return getattr(spec, method)(*args)
    except KraftcheckError:
        raise
    except Exception as e:  # noqa: BLE001 - the spec's own code failed
        raise spec_raised(f"{method}() of spec {spec.name}", e, compiled_too=False) from None
