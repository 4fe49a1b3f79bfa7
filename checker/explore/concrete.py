"""Concrete counterexamples: de-canonicalising a path found under ``--symmetry``, and replaying a
counterexample on a stricter variant of its spec (``Spec.stricter_variant``).

Under symmetry an explorer stores canonical states: the label recorded for a step led from the
canonical state before it to *some* member of the next state's orbit, not from the concrete state
a replay is in. ``concrete_trace`` rebuilds a trace of the concrete model: from the concrete state
s = p(c) (c canonical) it takes the label whose successor canonicalises to the next canonical state
on the path, trying the recorded label first and then every label. One exists: the transition
c -> u maps under p to a transition p(c) -> p(u), and p(u) canonicalises as u does.
"""

from __future__ import annotations

from typing import Callable, Optional

from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.explore.result import Step, Violation
from kraftcheck.checker.model import Model

Flat = tuple[int, ...]


def concrete_trace(model: Model, canonical_steps: list[Step], initial: Flat, step: Callable[[Flat, int], Optional[Flat]],
                   canonical: Callable[[Flat], Flat],
                   last_step_ok: Optional[Callable[[Flat, Flat], bool]] = None) -> list[Step]:
    """The concrete trace from ``initial`` (whose canonical form is ``canonical_steps[0].state``)
    through states whose canonical forms are those of ``canonical_steps``. ``last_step_ok(before,
    after)`` must also hold for the last step (a transition property's violation)."""
    if canonical(initial) != canonical_steps[0].state:
        raise SpecError("internal: the initial state is not in the orbit the path starts from")
    state = initial
    steps = [Step(None, state)]
    nlabels = len(model.labels)
    for k, target in enumerate(canonical_steps[1:], start=1):
        last = k == len(canonical_steps) - 1
        recorded = target.label if target.label is not None else 0
        for label in [recorded] + [lab for lab in range(nlabels) if lab != recorded]:
            succ = step(state, label)
            if succ is None or canonical(succ) != target.state:
                continue
            if last and last_step_ok is not None and not last_step_ok(state, succ):
                continue
            break
        else:
            raise SpecError(f"step {k} of a canonical path has no concrete counterpart: the spec's declared "
                            f"symmetry does not map its transitions to transitions")
        steps.append(Step(label, succ))
        state = succ
    return steps


def replays_on(variant: Model, states: list[Flat]) -> Optional[int]:
    """None if ``states`` is a behaviour of ``variant`` (an initial state, then every step a
    transition of some action instance); else the first step that is not."""
    if states[0] not in variant.initial:
        return 0
    for k in range(1, len(states)):
        if not any(variant.step(states[k - 1], lab) == states[k] for lab in range(len(variant.labels))):
            return k
    return None


def check_in_stricter_variant(model: Model, violations: list[Violation]) -> None:
    """Replay each violation's states on the spec's stricter variant, if it has one, and record
    the answer in ``violation.stricter_variant``: {variant, replays, step (the first step it does
    not have, or None), note}."""
    found = model.spec.stricter_variant()
    if found is None or not violations:
        return
    what, spec = found
    variant = Model(spec, check=model.check_names)
    for v in violations:
        v.stricter_variant = stricter_variant_finding(what, replays_on(variant, [s.state for s in v.steps]))


def stricter_variant_finding(what: str, bad: Optional[int]) -> dict:
    """What a counterexample records of its replay on the stricter variant ``what`` (``bad``: the
    first step the variant does not have, or None); trace replay recomputes it to check a file's."""
    if bad is None:
        note = f"this counterexample is also a behaviour of {what}"
    else:
        note = f"this counterexample is not a behaviour of {what}: it has no step {bad} of it"
    return {"variant": what, "replays": bad is None, "step": bad, "note": note}
