"""Shared test helper: a counterexample is a real behaviour of the model that ends in its violation."""

from __future__ import annotations


def assert_counterexample_replays(model, violation) -> None:
    """``violation.steps`` starts in an initial state, every step is the model's own successor,
    and the last state (or, for a transition property, the last step) violates ``violation.check``;
    for a deadlock, the last state has no successor but itself. Every state but the last (which
    an invariant may find outside them, as TLC checks it there) and every step to them keep to
    the model's state and action constraints."""
    steps = violation.steps
    assert steps[0].state in model.initial and steps[0].label is None
    for before, after in zip(steps, steps[1:]):
        assert model.step(before.state, after.label) == after.state
    for k, step in enumerate(steps[:-1]):
        assert model.in_model(steps[k - 1].state if k else None, step.state)
    if violation.kind == "invariant":
        assert violation.check in model.violated_invariants(steps[-1].state)
    elif violation.kind == "deadlock":
        assert violation.check == "deadlock" and model.check_deadlock
        assert model.in_model(steps[-2].state if len(steps) > 1 else None, steps[-1].state)
        last = steps[-1].state
        assert all(model.step(last, lab) in (None, last) for lab in range(len(model.labels)))
    else:
        assert violation.check in model.violated_properties(steps[-2].state, steps[-1].state)
