"""The read and write sets of action instances (``checker/access.py``) and the stubborn-set
search built on them (``checker/explore/partial_order.py``).

The sets are checked against what actions do on reachable states: an element that changes was in
the write set, and changing an element outside the read set changes nothing else the action does.
The reduced search is checked on a spec whose reduced counts are worked out by hand, and for the
same verdicts as the full search on Two-Phase Commit and a small Kafka configuration.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from numba import njit

from kraftcheck.checker.access import action_accesses, dependent, visible_positions
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.partial_order import explore_reduced
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.layout import state_copier
from kraftcheck.checker.model import Model, python_function
from kraftcheck.checker.spec import Action, Bool, Invariant, Param, Spec, param
from kraftcheck.pipeline import make_spec


@dataclass(frozen=True)
class FlagsParams:
    k: int = param(3, "flags", minimum=1, maximum=6)


@njit
def raise_flag(s, t, i):
    if s.x[i]:
        return False
    t.x[i] = True
    return True


@njit
def first_flag_is_a_flag(s):
    return s.x[0] <= 1


@njit
def first_flag_stays_down(s):
    return not s.x[0]


class Flags(Spec):
    """k flags raised one at a time in any order; the checks read flag 0 only. The full space is
    2^k states. Raising flags i != 0 is invisible and every two raises commute."""

    name = "flags"
    Params = FlagsParams
    check_deadlock = False

    def fields(self):
        return [Bool("x", shape=(self.params.k,))]

    def initial_states(self):
        yield {"x": [False] * self.params.k}

    def actions(self):
        return [Action("Raise", raise_flag, (Param("i", self.params.k),))]

    def invariants(self):
        return [Invariant("first_flag_is_a_flag", first_flag_is_a_flag),
                Invariant("first_flag_stays_down", first_flag_stays_down)]


def test_accesses_of_one_element_per_instance():
    model = Model(Flags(FlagsParams(3)))
    accesses = action_accesses(model)
    assert [sorted(a.writes) for a in accesses] == [[0], [1], [2]]
    assert [sorted(a.reads) for a in accesses] == [[0], [1], [2]]
    assert not any(dependent(a, b) for a in accesses for b in accesses if a is not b)
    assert visible_positions(model) == (frozenset({0}), [])


def test_hand_counted_reductions():
    """k = 3. Full: 8 states. ``visible``: the seeds are the invisible raises, one at a time, and
    Raise(0) last: 000 -> 010 -> 011 -> 111, 4 states. ``reach``: only Raise(0) can change what
    the checks read; once it has fired nothing can, so nothing more is expanded: 2 states."""
    model = Model(Flags(FlagsParams(3)), check=["first_flag_is_a_flag"])
    full, visible, reach = (explore_reduced(model, mode) for mode in ("none", "visible", "reach"))
    assert (full.distinct, full.generated, full.depth) == (8, 13, 4)
    assert (visible.distinct, visible.generated, visible.depth) == (4, 4, 4)
    assert (visible.reduced_states, visible.full_single) == (2, 1)
    assert (reach.distinct, reach.generated, reach.depth) == (2, 2, 2)
    assert full.violated == visible.violated == reach.violated == {}
    # without the visibility condition Raise(0) may lead: 000 -> 100 -> 110 -> 111
    assert explore_reduced(model, "dependence").distinct == 4


def test_a_violation_is_found_reduced_but_not_always_at_its_shortest_depth():
    model = Model(Flags(FlagsParams(3)), check=["first_flag_stays_down"])
    full, visible, reach = (explore_reduced(model, mode) for mode in ("none", "visible", "reach"))
    assert full.violated == reach.violated == {"first_flag_stays_down": 2}
    assert visible.violated == {"first_flag_stays_down": 4}  # the raise it reads comes last


@pytest.mark.parametrize("spec, params, violated", [
    ("two_phase", {"rm": 3}, set()),
    # 2 brokers replaying known ISR changes (F5's switch), 384 states
    ("kafka", {"brokers": 2, "min_isr": 1, "replay_known_changes": True, "lossy_shutdowns": 0, "fences": 0,
               "min_isr_changes": 0}, {"leader_maximal_isr_covers_electable", "isr_members_hold_committed_log"})])
def test_same_verdicts_and_counts_as_the_reference_explorer(spec, params, violated):
    model = Model(make_spec(spec, params), deadlock=False)
    reference = ReferenceExplorer().explore(model, Options(keep_going=True))
    runs = {mode: explore_reduced(model, mode) for mode in ("none", "visible", "reach")}
    full = runs["none"]
    assert (full.distinct, full.generated, full.depth) == (reference.distinct_states, reference.states_generated,
                                                          reference.depth)
    expected = {v.check: len(v.steps) for v in reference.violations}  # the shortest trace's states
    assert set(expected) == violated
    assert full.violated == runs["reach"].violated == expected
    for mode, run in runs.items():
        assert set(run.violated) == set(expected), mode
        assert not run.undecided
        assert run.distinct <= full.distinct


def _walked(model, fire, rng, walks=40, length=30):
    """The states of seeded random walks from the initial states, and the actions they took."""
    states, taken = {}, set()
    for _ in range(walks):
        flat = rng.choice(model.initial)
        for _ in range(length):
            states[flat] = True
            succ = [(lab, s) for lab in range(len(model.labels)) if (s := fire(flat, lab)) is not None]
            if not succ:
                break
            lab, flat = rng.choice(succ)
            taken.add(model.labels[lab].name)
    return list(states), taken


@pytest.mark.parametrize("spec, params", [("two_phase", {"rm": 3}), ("kafka", {})])
def test_accesses_cover_what_actions_do(spec, params):
    """On states of random walks (every action taken at least once): every element an instance
    changes is in its write set; an element outside its read set, set to another value of its
    domain, changes neither whether it fires nor what it writes."""
    model = Model(make_spec(spec, params), deadlock=False)
    layout = model.layout
    accesses = action_accesses(model)
    actions = [(python_function(lab.action.fn), lab.values) for lab in model.labels]
    copy = state_copier(layout)

    def fire(flat, lab):
        fn, values = actions[lab]
        before = layout.to_object(flat)
        after = copy(before)
        return layout.from_object(after) if fn(before, after, *values) else None

    rng = random.Random(7)
    states, taken = _walked(model, fire, rng)
    assert taken == {a.name for a in model.actions}
    variable = [e for e in layout.elements if e.field.const is None and e.field.domain > 1]
    for flat in rng.sample(states, min(len(states), 50)):
        for lab, access in enumerate(accesses):
            succ = fire(flat, lab)
            if succ is not None:
                changed = {k for k, (a, b) in enumerate(zip(flat, succ)) if a != b}
                assert changed <= access.writes, (model.labels[lab], changed - access.writes)
            for e in rng.sample(variable, 3):
                if e.flat in access.reads:
                    continue
                other = rng.choice([v for v in range(e.field.lo, e.field.lo + e.field.domain) if v != flat[e.flat]])
                moved = flat[:e.flat] + (other,) + flat[e.flat + 1:]
                succ_moved = fire(moved, lab)
                assert (succ is None) == (succ_moved is None), (model.labels[lab], e.field.name)
                if succ is not None and e.flat not in access.writes:
                    assert succ_moved == succ[:e.flat] + (other,) + succ[e.flat + 1:], (model.labels[lab], e.field.name)


def test_refuses_what_it_does_not_take():
    with pytest.raises(UsageError, match="deadlock"):
        explore_reduced(Model(make_spec("die_hard", {})))
    with pytest.raises(UsageError, match="unknown reduction"):
        explore_reduced(Model(Flags(FlagsParams(2))), "sleep")
