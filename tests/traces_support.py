"""Shared helpers of the trace tests: a real counterexample, written the way ``check`` writes it,
and a toy leader-election spec whose availability depends on its recovery strategy."""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Action, Availability, Const, Enum, Int, Invariant, Param, Set, Spec, param
from kraftcheck.specs import spec_class

RUN_OPTIONS = {"engine": "reference", "max_states": None, "max_depth": None, "keep_going": True,
               "check": ["tc_consistent"]}


def eager_commit_violation():
    """(model, violation) of the broken Two-Phase Commit: tc_consistent fails after 5 steps."""
    model = Model(spec_class("two_phase_eager_commit")())
    result = ReferenceExplorer().explore(model, Options(keep_going=True))
    (violation,) = result.violations
    return model, violation


# ----------------------------------------------------------------------------------------------
# A two-broker partition: the ISR shrinks, the last ISR member dies for good, and only an unclean
# election (strategy "unclean") can give the partition a leader again.

NONE_LEADER, B1, B2 = 0, 1, 2
STRATEGIES = ("none", "unclean")


@njit(cache=True)
def shrink(s, t, b):
    """Follower ``b`` falls out of the ISR."""
    if s.leader == 0 or s.leader == b + 1 or not (s.isr >> b & 1):
        return False
    t.isr = s.isr & ~(1 << b)
    return True


@njit(cache=True)
def crash(s, t, b):
    """Broker ``b`` dies for good (at most one crash); the last ISR member stays in the ISR."""
    if s.crashed != 0 or not (s.alive >> b & 1):
        return False
    t.crashed = 1
    t.alive = s.alive & ~(1 << b)
    if s.leader == b + 1:
        t.leader = 0
    if s.isr != (1 << b):
        t.isr = s.isr & ~(1 << b)
    return True


@njit(cache=True)
def elect(s, t, b):
    if s.leader != 0 or not (s.alive >> b & 1) or not (s.isr >> b & 1):
        return False
    t.leader = b + 1
    return True


@njit(cache=True)
def unclean_elect(s, t, b):
    if s.strategy != 1 or s.leader != 0 or not (s.alive >> b & 1) or (s.isr >> b & 1):
        return False
    t.leader = b + 1
    t.isr = 1 << b
    return True


@njit(cache=True)
def leader_alive(s):
    """The leader, if any, is alive."""
    return s.leader == 0 or (s.alive >> (s.leader - 1) & 1) == 1


@dataclass(frozen=True)
class ToyParams:
    strategy: str = param("none", "recovery strategy", choices=STRATEGIES)


class ToyPartition(Spec):
    name = "toy_partition"
    summary = "two brokers, one crash, recovery strategy none or unclean"
    Params = ToyParams
    main_lane = "controller"

    def fields(self):
        brokers = ("b1", "b2")
        return [Enum("leader", ("none", "b1", "b2")), Set("isr", brokers), Set("alive", brokers),
                Enum("crashed", ("no", "yes")),
                Const("strategy", STRATEGIES.index(self.params.strategy), "enum", STRATEGIES)]

    def initial_states(self):
        yield {"leader": B1, "isr": 0b11, "alive": 0b11}

    def actions(self):
        b = Param("b", 2, ("b1", "b2"))
        return [Action("Shrink", shrink, (b,)), Action("Crash", crash, (b,)), Action("Elect", elect, (b,)),
                Action("UncleanElect", unclean_elect, (b,))]

    def invariants(self):
        return [Invariant("leader_alive", leader_alive, leader_alive.__doc__)]

    def availability(self):
        return Availability("the partition has a leader", lambda v: v["leader"] != 0)

    def availability_variants(self):
        return {f"strategy={s}": ToyParams(strategy=s) for s in STRATEGIES}


# ----------------------------------------------------------------------------------------------
# A counter that can also jump by two; its stricter variant (the "real system") only steps by one.


@njit(cache=True)
def step_by_one(s, t):
    if s.x >= 4:
        return False
    t.x = s.x + 1
    return True


@njit(cache=True)
def jump_by_two(s, t):
    if s.x >= 3:
        return False
    t.x = s.x + 2
    return True


@njit(cache=True)
def x_below_three(s):
    """The counter stays below 3."""
    return s.x < 3


@dataclass(frozen=True)
class JumpsParams:
    jumps: bool = param(True, "the counter may also jump by two")


class Jumps(Spec):
    name = "toy_jumps"
    summary = "a counter that steps by one or jumps by two; the stricter variant only steps"
    Params = JumpsParams
    check_deadlock = False

    def fields(self):
        return [Int("x", 4)]

    def initial_states(self):
        yield {"x": 0}

    def actions(self):
        return [Action("Step", step_by_one)] + ([Action("Jump", jump_by_two)] if self.params.jumps else [])

    def invariants(self):
        return [Invariant("x_below_three", x_below_three, x_below_three.__doc__)]

    def stricter_variant(self):
        return ("the stepping counter", Jumps(JumpsParams(jumps=False))) if self.params.jumps else None
