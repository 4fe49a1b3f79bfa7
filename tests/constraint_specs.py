"""Small specs for the conformance suite's state constraints, action constraints and deadlocks.

``Counters``: ``n`` counters, each raised by ``Inc(i)`` up to ``top``; at ``top`` a counter can
only ``Stay(i)`` (a self-loop). The state constraint ``sum_at_most_limit`` bounds the search by
the counters' sum, and with ``blocked`` the action constraint ``no_top_beside_zero`` forbids a
step that raises a counter to ``top`` while another counter is 0. The invariant
``sum_at_most_cap`` fails only outside the constraint when ``cap == limit`` (an invariant is
checked on a state the constraint leaves out, as TLC does), and on an initial state outside it
when ``cap < limit`` is below an initial sum. The state with every counter at ``top`` has no
successor but itself: a deadlock when it lies inside the constraint, none when it lies outside
(it is never expanded), and a state whose only successors lie outside is not one (TLC counts
them). The examples cover each case; every explorer must count them as the reference does.
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck import (Action, ActionConstraint, Const, Constraint, Int, Invariant, Param, Permuted, Spec, Symmetry,
                        param)


@njit(cache=True)
def inc(s, t, i):
    if s.c[i] >= s.top:
        return False
    t.c[i] = s.c[i] + 1
    return True


@njit(cache=True)
def stay(s, t, i):
    return s.c[i] == s.top


@njit(cache=True)
def total(s):
    n = 0
    for k in range(len(s.c)):
        n += s.c[k]
    return n


@njit(cache=True)
def sum_at_most_cap(s):
    """The counters add up to at most cap."""
    return total(s) <= s.cap


@njit(cache=True)
def sum_at_most_limit(s):
    """The search keeps states whose counters add up to at most limit."""
    return total(s) <= s.limit


@njit(cache=True)
def no_top_beside_zero(s, t):
    """No step raises a counter to top while another counter is 0 (only with blocked)."""
    if not s.blocked:
        return True
    for i in range(len(s.c)):
        if t.c[i] == s.top and s.c[i] != s.top:
            for k in range(len(s.c)):
                if k != i and t.c[k] == 0:
                    return False
    return True


@dataclass(frozen=True)
class CountersParams:
    n: int = param(2, "counters", minimum=1, maximum=4)
    top: int = param(2, "the highest value of a counter", minimum=1, maximum=5)
    limit: int = param(4, "the state constraint: the largest sum the search keeps", minimum=0, maximum=20)
    cap: int = param(20, "the invariant: the largest sum allowed", minimum=0, maximum=20)
    blocked: bool = param(False, "apply the action constraint no_top_beside_zero")


class Counters(Spec):
    name = "constraint_counters"
    summary = "counters under a state constraint, an action constraint and a deadlock (conformance)"
    Params = CountersParams
    examples = (
        {},                                   # a deadlock inside the constraint: every counter at top
        {"limit": 3, "cap": 3},               # top-top lies outside: no deadlock; the invariant fails outside
        {"n": 3, "limit": 1, "cap": 1},       # initial states outside, one of them violating
        {"blocked": True},                    # the action constraint
        {"n": 3, "top": 1, "limit": 2, "blocked": True},
    )
    symmetric_examples = ({"n": 3}, {"n": 3, "limit": 6}, {"n": 3, "limit": 3, "cap": 3, "blocked": True})

    def names(self) -> tuple[str, ...]:
        return tuple(f"k{i + 1}" for i in range(self.params.n))

    def fields(self):
        p = self.params
        return [Int("c", p.top, (p.n,), index_labels=self.names()), Const("top", p.top), Const("limit", p.limit),
                Const("cap", p.cap), Const("blocked", int(p.blocked))]

    def initial_states(self):
        n = self.params.n
        for bits in range(1 << n):  # every counter at 0 or 1
            yield {"c": [bits >> i & 1 for i in range(n)]}

    def actions(self):
        counter = Param("i", self.params.n, self.names())
        return [Action("Inc", inc, params=(counter,)), Action("Stay", stay, params=(counter,))]

    def invariants(self):
        return [Invariant("sum_at_most_cap", sum_at_most_cap, sum_at_most_cap.__doc__)]

    def constraints(self):
        return [Constraint("sum_at_most_limit", sum_at_most_limit, sum_at_most_limit.__doc__)]

    def action_constraints(self):
        return [ActionConstraint("no_top_beside_zero", no_top_beside_zero, no_top_beside_zero.__doc__)]

    def symmetry(self):
        return Symmetry(self.names(), (Permuted("c", axes=(0,)),))


@njit(cache=True)
def step_up(s, t):
    if s.x >= 5:
        return False
    t.x = s.x + 1
    return True


@njit(cache=True)
def x_at_most_one(s):
    return s.x <= 1


@njit(cache=True)
def x_is_not_forbidden(s):
    return s.x != s.forbidden


@dataclass(frozen=True)
class RisingParams:
    forbidden: int = param(9, "the invariant: x never holds this value", minimum=0, maximum=9)
    repeated: bool = param(False, "initial_states() gives 0, 1, 0, 3, 1, 3: states given twice, as TLC's "
                                  "Init == x = 0 \\/ x = 1 \\/ x = 0 \\/ ... generates them")


class Rising(Spec):
    """TLC's own check of initial states outside a constraint (tests/test_constraints.py):
    ``Init == x \\in 0..3``, ``Next == x < 5 /\\ x' = x + 1``, ``CONSTRAINT x <= 1``,
    ``INVARIANT x # forbidden``."""

    name = "constraint_rising"
    summary = "x rises from 0..3 under the constraint x <= 1 (TLC's handling of initial states outside)"
    Params = RisingParams
    examples = ({}, {"forbidden": 2}, {"forbidden": 3})
    check_deadlock = False  # as the TLC model it is compared with (CHECK_DEADLOCK FALSE)

    def fields(self):
        return [Int("x", 5), Const("forbidden", self.params.forbidden)]

    def initial_states(self):
        for x in (0, 1, 0, 3, 1, 3) if self.params.repeated else range(4):
            yield {"x": x}

    def actions(self):
        return [Action("Next", step_up)]

    def invariants(self):
        return [Invariant("x_is_not_forbidden", x_is_not_forbidden)]

    def constraints(self):
        return [Constraint("x_at_most_one", x_at_most_one)]


@njit(cache=True)
def x_above_three(s):
    return s.x > 3


class RisingNowhere(Rising):
    """Rising under ``CONSTRAINT x > 3``, which no initial state satisfies: every one is counted
    and checked, none kept (tests/test_constraints.py)."""

    name = "constraint_rising_nowhere"

    def constraints(self):
        return [Constraint("x_above_three", x_above_three)]


class RisingEverywhere(Rising):
    """Rising without its constraint: all four initial states are kept, so a run that stops at the
    first (``forbidden=0``) has put the other three into its visited set already
    (tests/test_fingerprints.py)."""

    name = "constraint_rising_everywhere"

    def constraints(self):
        return []


@njit(cache=True)
def x_at_least_two(s):
    return s.x >= 2


class RisingFromTwo(Rising):
    """Rising under ``CONSTRAINT x >= 2``: the initial states 0 and 1, given first, lie outside,
    so the initial level holds 2 and 3 at places 0 and 1; ``forbidden=4`` is first violated one
    step from 3 (tests/test_constraints.py)."""

    name = "constraint_rising_from_two"
    examples = ({"forbidden": 4},)

    def constraints(self):
        return [Constraint("x_at_least_two", x_at_least_two)]
