"""Small specs with a large layout (over 32 elements), so that their kernels take the table form
(``kernels/table_expand.py``): every action's ``fire`` run as one call on batches of states, each
noting what it changed, one that packs its whole successor, an action of no instances, a spec of
one action, a spec whose only action has no instances, and a spec that
writes its source state through a view the static reading does not follow. An importable module, so that
the compiled kernels can import them."""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck.checker.spec import Action, Int, Invariant, Param, Spec, TransitionProperty, param


@njit(cache=True)
def inc(s, t, i):
    if s.x[i] >= s.cap or s.budget == 0:
        return False
    t.x[i] = s.x[i] + 1
    t.budget = s.budget - 1
    return True


@njit(cache=True)
def dec(s, t, i):
    if s.x[i] == 0:
        return False
    t.x[i] = s.x[i] - 1
    return True


@njit(cache=True)
def move(s, t, i, j):
    if i == j or s.x[i] == 0 or s.x[j] >= s.cap:
        return False
    t.x[i] = s.x[i] - 1
    t.x[j] = s.x[j] + 1
    return True


@njit(cache=True)
def copy_first_to_last(s, t):
    t.x[39] = s.x[0]
    return True


@njit(cache=True)
def clear_first(s, t, i):
    t.x[0] = 0
    return True


@njit(cache=True)
def few_in_the_first_six(s):
    total = 0
    for k in range(6):
        total += s.x[k]
    return total <= s.limit


@njit(cache=True)
def x1_never_drops_from_2(s, t):
    return not (s.x[1] == 2 and t.x[1] == 1)


@dataclass(frozen=True)
class WideParams:
    n: int = param(6, "cells that move", minimum=1, maximum=39)
    limit: int = param(5, "the most the first six cells hold together")
    budget: int = param(7, "increments allowed")
    none: int = param(0, "instances of ClearFirst", minimum=0, maximum=3)


class Wide(Spec):
    """Counters in 40 cells moved, raised and lowered; one action (ClearFirst) with no instances
    by default."""

    name = "wide"
    summary = "counters in 40 cells"
    Params = WideParams
    examples = [{}]

    def fields(self):
        return [Int("x", 3, (40,)), Int("cap", 3), Int("budget", 15), Int("limit", 99)]

    def initial_states(self):
        return [{"cap": 2, "budget": self.params.budget, "limit": self.params.limit}]

    def actions(self):
        n = self.params.n
        return [Action("Inc", inc, (Param("i", n),)),
                Action("ClearFirst", clear_first, (Param("i", self.params.none),)),
                Action("Dec", dec, (Param("i", n),)),
                Action("Move", move, (Param("i", n), Param("j", n))),
                Action("CopyFirstToLast", copy_first_to_last)]

    def invariants(self):
        return [Invariant("few_in_the_first_six", few_in_the_first_six)]

    def properties(self):
        return [TransitionProperty("x1_never_drops_from_2", x1_never_drops_from_2)]


@njit(cache=True)
def _raise_38(s, t):
    if s.x[2] == 0 or s.x[38] == 3:
        return False
    t.x[38] = s.x[38] + 1
    t.x[2] = s.x[2] - 1
    return True


@njit(cache=True)
def raise_38(s, t):
    return _raise_38(s, t=t)  # t by keyword: its writes are not read, so its kernel packs whole rows


class WideMixed(Wide):
    """Wide with one action whose writes the reading cannot tell."""

    name = "wide_mixed"

    def actions(self):
        return super().actions() + [Action("Raise38", raise_38)]


class WideOne(Wide):
    """One action only."""

    name = "wide_one"

    def actions(self):
        n = self.params.n
        return [Action("Move", move, (Param("i", n), Param("j", n)))]

    def initial_states(self):
        return [{"cap": 2, "budget": self.params.budget, "limit": self.params.limit, "x": [1, 1, 1] + [0] * 37}]


@njit(cache=True)
def inc_and_mark_the_source(s, t, i):
    if s.x[i] >= 2:
        return False
    t.x[i] = s.x[i] + 1
    if i == 5:
        kept = (s.x, 0)  # a view of the source state kept in a tuple, written through: no reading sees it
        kept[0][7] = 1
    return True


class WritesItsSourceThroughAView(Wide):
    """An action that writes its source state, which the static reading does not see."""

    name = "writes_its_source_through_a_view"

    def actions(self):
        n = self.params.n
        return [Action("Inc", inc_and_mark_the_source, (Param("i", n),)), Action("Dec", dec, (Param("i", n),))]


class WideStill(Wide):
    """Only an action of no instances: no state has a successor, each initial state is a deadlock."""

    name = "wide_still"
    check_deadlock = True

    def actions(self):
        return [Action("ClearFirst", clear_first, (Param("i", self.params.none),))]
