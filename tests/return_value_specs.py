"""Specs whose actions, invariants or constraints return something other than a bool
(tests/test_action_return_values.py), and one that returns numpy's bool where Python's is usual:
an importable module, so that the compiled kernels can import them."""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck.checker.spec import Action, Constraint, Int, Invariant, Spec, param


@dataclass(frozen=True)
class CounterParams:
    top: int = param(3, "the largest value of x", minimum=1, maximum=9)


@njit(cache=True)
def inc(s, t):
    if s.x >= s.top:
        return False
    t.x = s.x + 1
    t.seen[s.x % 2] = 1
    return True


@njit(cache=True)
def x_in_range(s):
    # numpy's bool when run as Python (an element of an array field compared): a bool all the same
    return s.seen[0] >= 0


class Counter(Spec):
    """x counts up to top; every function returns a bool (top + 1 distinct states, depth top + 1)."""

    name = "counter"
    summary = "a counter whose functions return bools"
    Params = CounterParams
    check_deadlock = False

    def fields(self):
        from kraftcheck.checker.spec import Const
        return [Int("x", self.params.top), Int("seen", 1, shape=(2,)), Const("top", self.params.top)]

    def initial_states(self):
        return [{"x": 0, "seen": [0, 0], "top": self.params.top}]

    def actions(self):
        return [Action("Inc", inc)]

    def invariants(self):
        return [Invariant("x_in_range", x_in_range)]


# ----------------------------------------------------------------------------------------------
# literals that are no bool: refused when the model is built


@njit(cache=True)
def inc_returns_a_pair(s, t):
    if s.x >= s.top:
        return False
    t.x = s.x + 1
    return (1, 2)


class ReturnsAPair(Counter):
    name = "returns_a_pair"

    def actions(self):
        return [Action("IncReturnsAPair", inc_returns_a_pair)]


@njit(cache=True)
def says_yes(s):
    return "yes"


class InvariantSaysYes(Counter):
    name = "invariant_says_yes"

    def invariants(self):
        return [Invariant("says_yes", says_yes)]


@njit(cache=True)
def inc_returns_one(s, t):
    if s.x >= s.top:
        return 0
    t.x = s.x + 1
    return 1


class ReturnsOne(Counter):
    name = "returns_one"

    def actions(self):
        return [Action("IncReturnsOne", inc_returns_one)]


# ----------------------------------------------------------------------------------------------
# values computed as they run that are no bool: refused by the tiers and numba's typing


@njit(cache=True)
def inc_gives_a_pair(s, t):
    fires = s.x < s.top
    if fires:
        t.x = s.x + 1
    pair = (fires, s.x)
    return pair  # a tuple is true in Python: the action would fire everywhere


class GivesAPair(Counter):
    name = "gives_a_pair"

    def actions(self):
        return [Action("IncGivesAPair", inc_gives_a_pair)]


@njit(cache=True)
def room_left(s):
    return s.top + 1 - s.x  # an integer, never 0 here: it would "hold" whatever it meant


class InvariantCounts(Counter):
    name = "invariant_counts"

    def invariants(self):
        return [Invariant("room_left", room_left)]


@njit(cache=True)
def below_top(s):
    return s.top - s.x  # 0 at the top: that state would silently be left out


class ConstraintCounts(Counter):
    name = "constraint_counts"

    def constraints(self):
        return [Constraint("below_top", below_top)]


# ----------------------------------------------------------------------------------------------
# functions that cannot be called as every tier calls them: refused when the model is built


@njit(cache=True)
def inc_by(s, t, step):
    if s.x + step > s.top:
        return False
    t.x = s.x + step
    return True


class UndeclaredParameter(Counter):
    """An action taking a parameter its Action does not declare."""

    name = "undeclared_parameter"

    def actions(self):
        return [Action("IncBy", inc_by)]


@njit(cache=True)
def x_never_drops(s, t):
    return t.x >= s.x


class StepAsInvariant(Counter):
    """A transition property (s, t) declared as an invariant."""

    name = "step_as_invariant"

    def invariants(self):
        return [Invariant("x_never_drops", x_never_drops)]


# ----------------------------------------------------------------------------------------------
# a value that is a bool on every state Python meets, and that numba types as an integer


@njit(cache=True)
def x_not_past_top(s):
    holds = s.x <= s.top
    if s.x > s.top + 100:  # never so: Python never returns the integer
        holds = 5
    return holds


class IntegerOnlyWhereUnreached(Counter):
    name = "integer_only_where_unreached"

    def invariants(self):
        return [Invariant("x_not_past_top", x_not_past_top)]
