"""A small spec whose one bug is deep for a uniform random walk: a combination lock opened by
``turns`` turns in a row, any of ``dials`` scrambles (each a set of the dial, and the turns lost)
in between starting again. A uniform walk turns with probability 1 / (dials + 1) a step, so it
opens the lock about once in (dials + 1) ** turns steps; the state space is only
(turns + 1) x dials states. ``tests/test_simulate.py`` measures the strategies of
``--simulate`` on it."""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck.checker.spec import Action, Const, Int, Invariant, Param, Spec, param


@njit(cache=True)
def turn(s, t):
    if s.turned >= s.turns:
        return False
    t.turned = s.turned + 1
    return True


@njit(cache=True)
def scramble(s, t, dial):
    t.turned = 0
    t.dial = dial
    return True


@njit(cache=True)
def lock_stays_shut(s):
    """The lock is never turned all the way (false: the bug to find)."""
    return s.turned != s.turns


@dataclass(frozen=True)
class LockParams:
    turns: int = param(8, "turns in a row that open the lock", minimum=1, maximum=30)
    dials: int = param(12, "positions a scramble sets the dial to", minimum=1, maximum=30)


class Lock(Spec):
    name = "combination_lock"
    summary = "a lock opened by many turns in a row (a bug deep for a uniform random walk)"
    Params = LockParams
    examples = ({},)
    check_deadlock = False

    def fields(self):
        p = self.params
        return [Int("turned", p.turns, doc="turns in a row so far"),
                Int("dial", p.dials - 1, doc="where the last scramble set the dial"),
                Const("turns", p.turns)]

    def initial_states(self):
        yield {"turned": 0, "dial": 0}

    def actions(self):
        return [Action("Turn", turn), Action("Scramble", scramble, (Param("dial", self.params.dials),))]

    def invariants(self):
        return [Invariant("lock_stays_shut", lock_stays_shut, lock_stays_shut.__doc__)]
