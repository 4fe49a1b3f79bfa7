"""Single steps and checks for traces, interpreted or compiled.

Traces are a few dozen steps, so they run the spec's functions interpreted by default (the
reference explorer's way: no compile wait, obviously the spec's text). ``compiled=True`` runs
them through ``Model.step`` instead, the engine's own compiled code path, for a replay that also
vouches for the compiled actions.
"""

from __future__ import annotations

from typing import Optional

from kraftcheck.checker.action_returns import bool_checked
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.layout import state_copier
from kraftcheck.checker.model import Model, python_arithmetic, python_function


class Stepper:
    """Successors and checks of one model's states, one at a time."""

    def __init__(self, model: Model, compiled: bool = False) -> None:
        self.model = model
        self.compiled = compiled
        # each value they return checked to be a bool (checker/action_returns.py)
        self._actions = [(bool_checked(f"action {lab.name}", python_function(lab.action.fn)), lab.values)
                         for lab in model.labels]
        self._invariants = [(inv.name, bool_checked(f"invariant {inv.name}", python_function(inv.fn)))
                            for inv in model.invariants]
        self._properties = [(p.name, bool_checked(f"transition property {p.name}", python_function(p.fn)))
                            for p in model.properties]
        self._constraints = [(c.name, bool_checked(f"constraint {c.name}", python_function(c.fn)))
                             for c in model.constraints]
        self._action_constraints = [(c.name, bool_checked(f"action constraint {c.name}", python_function(c.fn)))
                                    for c in model.action_constraints]
        self._copy = state_copier(model.layout)

    @python_arithmetic
    def step(self, flat: tuple[int, ...], label: int) -> Optional[tuple[int, ...]]:
        """The successor of ``flat`` under ``label``, or None when the action is disabled."""
        if self.compiled:
            return self.model.step(flat, label)
        layout = self.model.layout
        fn, values = self._actions[label]
        before = layout.to_object(flat, read_only=True)
        after = self._copy(before)
        if not fn(before, after, *values):
            if layout.from_object(after) != tuple(flat):
                raise SpecError(f"action {self.model.labels[label]} changed the successor but returned False")
            return None
        succ = layout.from_object(after)
        layout.check_domains(succ, where=f"after {self.model.labels[label]}: ")
        return succ

    @python_arithmetic
    def successors(self, flat: tuple[int, ...]) -> list[tuple[int, tuple[int, ...]]]:
        """Every (label, successor) of ``flat``; one copy per enabled action, not per label."""
        if self.compiled:
            out = []
            for lab in range(len(self.model.labels)):
                succ = self.model.step(flat, lab)
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
                layout.check_domains(succ, where=f"after {self.model.labels[lab]}: ")
                out.append((lab, succ))
                after = self._copy(before)
            elif not layout.unchanged(after, before):
                raise SpecError(f"action {self.model.labels[lab]} changed the successor but returned False")
        return out

    @python_arithmetic
    def violated_invariants(self, flat: tuple[int, ...]) -> list[str]:
        if self.compiled:
            return self.model.violated_invariants(flat)
        obj = self.model.layout.to_object(flat, read_only=True)
        return [name for name, fn in self._invariants if not fn(obj)]

    @python_arithmetic
    def violated_properties(self, before: tuple[int, ...], after: tuple[int, ...]) -> list[str]:
        if self.compiled:
            return self.model.violated_properties(before, after)
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
