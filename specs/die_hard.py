"""The water-jug puzzle from *Die Hard 3*, as in the TLA+ examples: get exactly 4 gallons.

A classic first spec, and the worked example of docs/writing-a-spec.md. The "invariant"
``big_jug_never_holds_4`` is meant to fail: its shortest counterexample (7 states) is the
puzzle's solution. Deadlock is checked (TLC's default): a jug can always be filled or emptied,
so every state has a successor other than itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck.checker.spec import Action, Const, Int, Invariant, Spec, param


@njit(cache=True)
def fill_small(s, t):
    t.small = s.small_capacity
    return True


@njit(cache=True)
def fill_big(s, t):
    t.big = s.big_capacity
    return True


@njit(cache=True)
def empty_small(s, t):
    t.small = 0
    return True


@njit(cache=True)
def empty_big(s, t):
    t.big = 0
    return True


@njit(cache=True)
def small_to_big(s, t):
    poured = min(s.small, s.big_capacity - s.big)
    t.small = s.small - poured
    t.big = s.big + poured
    return True


@njit(cache=True)
def big_to_small(s, t):
    poured = min(s.big, s.small_capacity - s.small)
    t.big = s.big - poured
    t.small = s.small + poured
    return True


@njit(cache=True)
def big_jug_never_holds_4(s):
    """The big jug never holds exactly 4 gallons (false: that is the puzzle's answer)."""
    return s.big != 4


@dataclass(frozen=True)
class DieHardParams:
    small: int = param(3, "capacity of the small jug", minimum=1, maximum=50)
    big: int = param(5, "capacity of the big jug", minimum=1, maximum=50)


class DieHard(Spec):
    name = "die_hard"
    summary = "the Die Hard water-jug puzzle (a failing invariant whose counterexample is the answer)"
    Params = DieHardParams
    examples = ({}, {"small": 4, "big": 9})
    check_deadlock = True  # every state can fill or empty a jug

    def fields(self):
        p = self.params
        return [
            Int("small", p.small, doc="gallons in the small jug"),
            Int("big", p.big, doc="gallons in the big jug"),
            Const("small_capacity", p.small),
            Const("big_capacity", p.big),
        ]

    def initial_states(self):
        yield {"small": 0, "big": 0}

    def actions(self):
        return [
            Action("FillSmall", fill_small),
            Action("FillBig", fill_big),
            Action("EmptySmall", empty_small),
            Action("EmptyBig", empty_big),
            Action("SmallToBig", small_to_big),
            Action("BigToSmall", big_to_small),
        ]

    def invariants(self):
        return [Invariant("big_jug_never_holds_4", big_jug_never_holds_4, big_jug_never_holds_4.__doc__)]
