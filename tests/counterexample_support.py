"""Shared test helper: a counterexample is a real behaviour of the model that ends in its violation."""

from __future__ import annotations


def assert_counterexample_replays(model, violation) -> None:
    """``violation.steps`` starts in an initial state, every step is the model's own successor,
    and the last state (or, for a transition property, the last step) violates ``violation.check``."""
    steps = violation.steps
    assert steps[0].state in model.initial and steps[0].label is None
    for before, after in zip(steps, steps[1:]):
        assert model.step(before.state, after.label) == after.state
    if violation.kind == "invariant":
        assert violation.check in model.violated_invariants(steps[-1].state)
    else:
        assert violation.check in model.violated_properties(steps[-2].state, steps[-1].state)
