"""A spec with a text parameter, for the report's reproduction command: a counter climbs to the
length of ``label`` and the invariant fails there, so a command that passes another label (cut at
a space, or rewritten by a shell) finds another counterexample, or none."""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck import Action, Const, Int, Invariant, Spec, param


@njit(cache=True)
def up(s, t):
    if s.x >= s.stop:
        return False
    t.x = s.x + 1
    return True


@njit(cache=True)
def below_top(s):
    """The counter stays below the label's length."""
    return s.x < s.top


@dataclass(frozen=True)
class LabelParams:
    label: str = param("plain", "any text; its length is where the counter stops")
    fix_stop_early: bool = param(False, "the counter stops one below the top")


class Labelled(Spec):
    name = "labelled_counter"
    summary = "a counter that climbs to the length of a text parameter"
    Params = LabelParams
    check_deadlock = False  # the counter stops at the top: the end of the story, not a bug

    def fields(self):
        top = len(self.params.label)
        return [Int("x", top), Const("top", top), Const("stop", top - 1 if self.params.fix_stop_early else top)]

    def initial_states(self):
        yield {"x": 0}

    def actions(self):
        return [Action("Up", up)]

    def invariants(self):
        return [Invariant("below_top", below_top, below_top.__doc__)]
