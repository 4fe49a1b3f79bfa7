"""Specs written the ways a spec author may write them that the two tiers once took differently
(tests/test_two_tiers.py): an importable module, so that the compiled kernels can import them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from kraftcheck.checker.spec import (Action, ActionConstraint, Bool, Const, Constraint, Int, Invariant, Param, Spec,
                                     param)


@dataclass(frozen=True)
class GridParams:
    n: int = param(2, "rows", minimum=1, maximum=3)


@njit(cache=True)
def mark(s, t, i, j):
    """Sets cell (i, j) with numpy's two-axis index, once its left neighbour is set."""
    if s.grid[i, j]:
        return False
    if j > 0 and not s.grid[i][j - 1]:
        return False
    t.grid[i, j] = True
    t.marked = s.marked + 1
    return True


@njit(cache=True)
def clear_row(s, t, i):
    """Clears a whole row cell by cell, written with nested indices."""
    if not s.grid[i][2]:
        return False
    for j in range(3):
        t.grid[i][j] = False
    t.marked = s.marked - 3
    return True


@njit(cache=True)
def marked_counts_the_grid(s):
    total = 0
    for i in range(s.grid.shape[0]):
        for j in range(3):
            if s.grid[i, j]:
                total += 1
    return total == s.marked


@njit(cache=True)
def never_a_full_grid(s):
    return s.marked < 3 * s.grid.shape[0]


class Grid(Spec):
    """Cells of an n x 3 grid set left to right, a full row cleared at once."""

    name = "grid"
    Params = GridParams

    def fields(self):
        n = self.params.n
        return [Bool("grid", shape=(n, 3)), Int("marked", 3 * n)]

    def initial_states(self):
        yield {"grid": [[False] * 3 for _ in range(self.params.n)], "marked": 0}

    def actions(self):
        n = self.params.n
        return [Action("Mark", mark, (Param("i", n), Param("j", 3))), Action("ClearRow", clear_row, (Param("i", n),))]

    def invariants(self):
        return [Invariant("marked_counts_the_grid", marked_counts_the_grid),
                Invariant("never_a_full_grid", never_a_full_grid)]


@njit(cache=True)
def overflow(s, t):
    t.marked = s.marked + 1  # past its domain at the top
    return True


class Overflowing(Grid):
    """An action that writes a value outside its field's domain."""

    name = "overflowing"

    def actions(self):
        return [Action("Overflow", overflow)]

    def invariants(self):
        return []


@njit(cache=True)
def overflow_past_32_bits(s, t):
    t.marked = s.marked + 1 + (1 << 32)  # 4294967297 from 0: 1 once wrapped to 32 bits, inside 0..3
    return True


@njit(cache=True)
def overflow_to_the_sign_bit(s, t):
    t.marked = s.marked + (1 << 31)  # 2147483648 from 0: -2147483648 once wrapped to 32 bits
    return True


class OverflowingPast32Bits(Overflowing):
    """A value past the int32 range written to a field: a structured state of 32-bit elements wrapped it
    into the field's domain (4294967297 became 1) and the compiled tier accepted what Python's
    integers refuse."""

    name = "overflowing_past_32_bits"

    def actions(self):
        return [Action("Overflow", overflow_past_32_bits)]


class OverflowingToTheSignBit(Overflowing):
    """2^31 written to a field: wrapped to 32 bits it is -2^31, which a tier refused in other
    words than Python's integers give."""

    name = "overflowing_to_the_sign_bit"

    def actions(self):
        return [Action("Overflow", overflow_to_the_sign_bit)]


# ----------------------------------------------------------------------------------------------
# Integers below zero: Int(name, lo, hi)


@dataclass(frozen=True)
class LevelsParams:
    n: int = param(2, "rooms", minimum=1, maximum=3)
    padded: bool = param(False, "add 32 elements that never change, so the layout packs by its table")


@njit(cache=True)
def cool(s, t, i):
    """Room i one degree colder, down to the floor; ``lowest`` remembers the coldest ever."""
    if s.temp[i] == s.floor:
        return False
    t.temp[i] = s.temp[i] - 1
    if t.temp[i] < s.lowest:
        t.lowest = t.temp[i]
    return True


@njit(cache=True)
def heat(s, t, i):
    if s.temp[i] == 2:
        return False
    t.temp[i] = s.temp[i] + 1
    return True


@njit(cache=True)
def lowest_is_a_bound(s):
    # numpy's shape of a one-axis field: the interpreted tier's lists had none (issue 31 item 6)
    for i in range(s.temp.shape[0]):
        if s.temp[i] < s.lowest:
            return False
    return s.lowest <= 0


@njit(cache=True)
def never_at_the_floor(s):
    return s.lowest > s.floor


class Levels(Spec):
    """Rooms whose temperature goes from -2 to 2, read and written as written (-1 is -1)."""

    name = "levels"
    Params = LevelsParams
    check_deadlock = False

    def fields(self):
        p = self.params
        rooms = tuple(f"r{i + 1}" for i in range(p.n))
        fields = [Int("temp", -2, 2, (p.n,), index_labels=rooms), Int("lowest", -2, 0), Const("floor", -2)]
        if p.padded:
            fields.append(Int("pad", -1, 1, shape=(32,)))
        return fields

    def initial_states(self):
        p = self.params
        yield {"temp": [0] * p.n, "lowest": 0, **({"pad": [-1] * 32} if p.padded else {})}

    def actions(self):
        n = self.params.n
        return [Action("Cool", cool, (Param("i", n),)), Action("Heat", heat, (Param("i", n),))]

    def invariants(self):
        return [Invariant("lowest_is_a_bound", lowest_is_a_bound), Invariant("never_at_the_floor", never_at_the_floor)]


@njit(cache=True)
def cool_past_the_floor(s, t, i):
    t.temp[i] = s.temp[i] - 1  # below -2 at the bottom
    return True


class Underflowing(Levels):
    """An action that writes a value below its field's smallest."""

    name = "underflowing"

    def actions(self):
        return [Action("CoolPastTheFloor", cool_past_the_floor, (Param("i", self.params.n),))]

    def invariants(self):
        return []


# ----------------------------------------------------------------------------------------------
# Code numba does not compile, which Python runs (or fails on) all the same


@njit(cache=True)
def mark_with_a_string(s, t):
    if s.marked == 3:
        return False
    t.marked = s.marked + "1"  # a str: Python's TypeError interpreted, numba's typing error compiled
    return True


class AddsAString(Grid):
    """An action whose code only Python's typing reaches (and refuses) when interpreted."""

    name = "adds_a_string"

    def actions(self):
        return [Action("MarkWithAString", mark_with_a_string)]

    def invariants(self):
        return []


# ----------------------------------------------------------------------------------------------
# numpy on array fields: methods, slices across axes, operators (numba compiles them; the
# interpreted tier hands the spec numpy arrays)


@dataclass(frozen=True)
class TallyParams:
    pass


@njit(cache=True)
def bump(s, t, i):
    """Counter i up by one; ``total`` kept as the counters' sum, with numpy's sum."""
    if s.c[i] == 2:
        return False
    t.c[i] = s.c[i] + 1
    t.total = t.c.sum()
    return True


@njit(cache=True)
def raise_column(s, t, j):
    """Sets column j of the grid, written as a slice across axes, once the column left of it is up."""
    if s.g[:, j].any():
        return False
    if j > 0 and not s.g[:, j - 1].all():
        return False
    t.g[:, j] = 1
    return True


@njit(cache=True)
def reset(s, t):
    """Every counter back to 0 once all are at 2 (numpy's ==, .all(), .copy(), a slice write)."""
    if not (s.c == 2).all():
        return False
    zeros = s.c.copy()
    zeros[:] = 0
    t.c[:] = zeros
    t.total = 0
    t.g[:, :] = s.g * 0
    return True


@njit(cache=True)
def total_is_the_sum(s):
    return s.total == s.c.sum() and s.c.max() <= 2 and s.c.min() >= 0


@njit(cache=True)
def grid_fills_left_to_right(s):
    cols = s.g.sum(axis=0)
    for j in range(1, 3):
        if cols[j] > 0 and cols[j - 1] == 0:
            return False
    return s.g.argmax() == 0 or not s.g.any()


@njit(cache=True)
def grid_never_full(s):
    return not s.g.all()


class Tally(Spec):
    """Counters and a 2 x 3 grid read and written with numpy's array methods, slices and operators."""

    name = "tally"
    Params = TallyParams
    check_deadlock = False

    def fields(self):
        return [Int("c", 2, (3,)), Int("total", 6), Bool("g", (2, 3))]

    def initial_states(self):
        yield {}

    def actions(self):
        return [Action("Bump", bump, (Param("i", 3),)), Action("RaiseColumn", raise_column, (Param("j", 3),)),
                Action("Reset", reset)]

    def invariants(self):
        return [Invariant("total_is_the_sum", total_is_the_sum),
                Invariant("grid_fills_left_to_right", grid_fills_left_to_right),
                Invariant("grid_never_full", grid_never_full)]


# ----------------------------------------------------------------------------------------------
# Code that Python runs and numba refuses, or the reverse, and functions numba is never handed


@njit(cache=True)
def mark_by_bit_length(s, t):
    if s.marked == 3:
        return False
    t.marked = (s.marked + 1).bit_length()  # a Python int's method: numba's int32 has none
    return True


class PythonOnlyMethod(Grid):
    """An action whose code Python runs (int.bit_length) and numba refuses."""

    name = "python_only_method"

    def actions(self):
        return [Action("MarkByBitLength", mark_by_bit_length)]

    def invariants(self):
        return []


@njit(cache=True)
def marked_formats_as_one_digit(s):
    return len("%d" % s.marked) == 1  # string formatting: Python runs it, numba refuses it


class FormatsAString(Grid):
    """An invariant that formats a string: Python runs it, numba refuses it."""

    name = "formats_a_string"

    def invariants(self):
        return [Invariant("marked_formats_as_one_digit", marked_formats_as_one_digit)]


@njit(cache=True)
def marked_by_name(s):
    return s["marked"] <= 3 * s.grid.shape[0]  # a structured state's field by name: numba compiles it


class FieldByName(Grid):
    """An invariant reading a field as ``s["marked"]``, which numba compiles and the interpreted
    tier's states do not take: the engine redoes that work compiled."""

    name = "field_by_name"

    def invariants(self):
        return [Invariant("marked_by_name", marked_by_name), Invariant("never_a_full_grid", never_a_full_grid)]


@njit(cache=True)
def mark_by_name(s, t, i, j):
    """``mark``, but past the second cell it counts with ``s["marked"]`` (numba compiles it)."""
    if s.grid[i, j] or (j > 0 and not s.grid[i][j - 1]):
        return False
    t.grid[i, j] = True
    if s.marked <= 1:
        t.marked = s.marked + 1
    else:
        t["marked"] = s["marked"] + 1
    return True


@njit(cache=True)
def at_most_three_marked(s):
    return s.marked <= 1 or s["marked"] <= 3  # by name once two cells are marked


class FieldByNameLater(Grid):
    """An action and a state constraint that read a field by name only past the initial state:
    the interpreted tier explores the first levels, then the engine redoes a chunk compiled."""

    name = "field_by_name_later"

    def actions(self):
        n = self.params.n
        return [Action("MarkByName", mark_by_name, (Param("i", n), Param("j", 3))),
                Action("ClearRow", clear_row, (Param("i", n),))]

    def constraints(self):
        return [Constraint("at_most_three_marked", at_most_three_marked)]


def plain_mark(s, t):  # no @njit
    if s.marked == 3:
        return False
    t.marked = s.marked + 1
    return True


class MissingNjit(Grid):
    """An action that is a plain Python function."""

    name = "missing_njit"

    def actions(self):
        return [Action("PlainMark", plain_mark)]

    def invariants(self):
        return []


def plus_one(x):  # a helper without @njit
    return x + 1


@njit(cache=True)
def mark_with_a_plain_helper(s, t):
    if s.marked == 3:
        return False
    t.marked = plus_one(s.marked)
    return True


class PlainHelper(Grid):
    """An @njit action calling a helper that is a plain Python function."""

    name = "plain_helper"

    def actions(self):
        return [Action("MarkWithAPlainHelper", mark_with_a_plain_helper)]

    def invariants(self):
        return []


# ----------------------------------------------------------------------------------------------
# An action that writes its successor and then says it did not fire: a bug every tier refuses


@njit(cache=True)
def drop_unless_warm(s, t, i):
    t.temp[i] = -2  # written before the guard, which then declines where room i is warm
    if s.temp[i] == 2:
        return False
    return True


@njit(cache=True)
def chill(t, i):
    t.temp[i] = -2


@njit(cache=True)
def drop_unless_warm_in_a_helper(s, t, i):
    chill(t, i)  # t handed to a helper: what the action writes cannot be read from its source
    if s.temp[i] == 2:
        return False
    return True


class DeclinesAfterWriting(Levels):
    """Heat a room; drop it to the floor, unless it is warm: then the action has written the drop
    and declines. The compiled kernels once started the next instance from the written successor."""

    name = "declines_after_writing"

    def actions(self):
        n = self.params.n
        return [Action("Heat", heat, (Param("i", n),)), Action("Drop", drop_unless_warm, (Param("i", n),))]

    def invariants(self):
        return []


class DeclinesAfterWritingInAHelper(DeclinesAfterWriting):
    """The same, the write in a helper (the kernels then compare the whole successor)."""

    name = "declines_after_writing_in_a_helper"

    def actions(self):
        n = self.params.n
        return [Action("Heat", heat, (Param("i", n),)),
                Action("Drop", drop_unless_warm_in_a_helper, (Param("i", n),))]


# ----------------------------------------------------------------------------------------------
# Integer arithmetic: Python's floor division and modulo, intermediates past int32, shifts


@dataclass(frozen=True)
class ArithmeticParams:
    pass


def _python_results(x: int) -> tuple[int, ...]:
    """What Python's integers give for ``step``'s expressions (fields q, r, v[0], v[1], b, m)."""
    return (x // 3, x % 3, -(x // -2), (x * 1000000000) // 1000000000 - x, (x >> 1) & 3, max(min(x * 3, 7), -7))


# a table the invariant reads (numba freezes a global array into the code): one row per x
PYTHON_RESULTS = np.array([_python_results(x) for x in range(-7, 8)], np.int64)


@njit(cache=True)
def step(s, t, up):
    """x one up or down; the other fields computed from it, each by an expression where C's
    integers (truncating division, a product wrapping at 32 bits) would differ from Python's."""
    if up == 1:
        if s.x == 7:
            return False
        t.x = s.x + 1
    else:
        if s.x == -7:
            return False
        t.x = s.x - 1
    x = t.x
    t.q = x // 3
    t.r = x % 3
    t.v[0] = -(x // -2)
    t.v[1] = (x * 1000000000) // 1000000000 - x
    t.b = (x >> 1) & 3
    t.m = max(min(x * 3, 7), -7)
    return True


@njit(cache=True)
def computes_as_python_does(s):
    e = PYTHON_RESULTS[s.x + 7]
    return s.q == e[0] and s.r == e[1] and s.v[0] == e[2] and s.v[1] == e[3] and s.b == e[4] and s.m == e[5]


class Arithmetic(Spec):
    """One integer x in -7..7 and fields computed from it by integer arithmetic; every reachable
    state must hold Python's results (15 states), on every tier."""

    name = "arithmetic"
    Params = ArithmeticParams
    check_deadlock = False

    def fields(self):
        return [Int("x", -7, 7), Int("q", -3, 2), Int("r", 0, 2), Int("v", -4, 4, (2,)), Int("b", 0, 3),
                Int("m", -7, 7)]

    def initial_states(self):
        yield {"x": 0, "q": 0, "r": 0, "v": [0, 0], "b": 0, "m": 0}

    def actions(self):
        return [Action("Step", step, (Param("up", 2),))]

    def invariants(self):
        return [Invariant("computes_as_python_does", computes_as_python_does)]



# ----------------------------------------------------------------------------------------------
# States the bytecode hands back to Python, in batches the bytecode tier splits among threads


@dataclass(frozen=True)
class HandBackParams:
    pass


HUNDRED = np.arange(100, dtype=np.int64)  # read at x: out of range from x = 100


@njit(cache=True)
def through_a_big_product(s, t):
    """x + 1 by a product past 64 bits (exact in Python; the bytecode stops and hands it back)."""
    if s.x >= 599:
        return False
    t.x = (s.x + 1) * (1 << 62) // (1 << 62) if s.x >= 1 else s.x + 1
    return True


@njit(cache=True)
def read_the_table(s, t):
    """y from a table of 100 entries at x: numpy's IndexError from x = 100, naming x."""
    t.y = HUNDRED[s.x] % 2
    return True


class HandBack(Spec):
    """x in 0..599; ``Grow`` hands every state from x = 1 back to Python, which answers."""

    name = "hand_back"
    Params = HandBackParams
    check_deadlock = False

    def fields(self):
        return [Int("x", 0, 599), Int("y", 0, 1)]

    def initial_states(self):
        yield {"x": 0, "y": 0}

    def actions(self):
        return [Action("Grow", through_a_big_product)]

    def invariants(self):
        return []


class HandBackAndFail(HandBack):
    """HandBack and an action whose table read fails from x = 100 on."""

    name = "hand_back_and_fail"

    def actions(self):
        return [Action("Grow", through_a_big_product), Action("Read", read_the_table)]


# ----------------------------------------------------------------------------------------------
# An action that assigns to its source state: refused when the model is built


@njit(cache=True)
def _unmark(s):
    s.marked = 0


@njit(cache=True)
def mark_and_reset_the_source(s, t):
    if s.marked == 3:
        return False
    t.marked = s.marked + 1
    _unmark(s)
    return True


class AssignsToItsSource(Grid):
    """An action that hands its source state to a helper that assigns to it."""

    name = "assigns_to_its_source"

    def actions(self):
        return [Action("MarkAndResetTheSource", mark_and_reset_the_source)]


@njit(cache=True)
def count_up_and_bump_the_source(s, t, i):
    if s.k >= 3:
        return False
    if s.k == 2 and i == 0:
        bumped = s.c
        bumped += 1  # an in-place add on a name bound to a field of s: the reading does not follow it
    t.c[i] = min(s.c[i] + 1, 5)
    t.k = s.k + 1
    return True


@njit(cache=True)
def every_count_within_five(s):
    return s.c[0] <= 5 and s.c[1] <= 5


class WritesItsSourceOnSomeStates(Spec):
    """An action that writes its source state, on the states where ``k`` is 2 only, through a view
    the reading of its writes does not see: a small layout (unrolled kernels), where instance
    ``i=1`` would read the changed ``s.c`` and every check hold with one state too many."""

    name = "writes_its_source_on_some_states"
    Params = GridParams
    check_deadlock = False

    def fields(self):
        return [Int("c", 6, shape=(2,)), Int("k", 4)]

    def initial_states(self):
        yield {"c": [0, 0], "k": 0}

    def actions(self):
        return [Action("CountUp", count_up_and_bump_the_source, (Param("i", 2),))]

    def invariants(self):
        return [Invariant("every_count_within_five", every_count_within_five)]



@njit(cache=True)
def count_up(s, t, i):
    if s.k >= 3:
        return False
    t.c[i] = min(s.c[i] + 1, 5)
    t.k = s.k + 1
    return True


@njit(cache=True)
def bumps_its_counts(s):
    counts = s.c
    counts += 1  # an in-place add on a name bound to a field of s: the reading does not follow it
    return True


@njit(cache=True)
def first_count_below_three(s):
    return s.c[0] < 3


class AnInvariantWritesItsState(WritesItsSourceOnSomeStates):
    """An invariant that writes its state through a view the model's build does not refuse, before
    another invariant reads that state: compiled, the second read the changed counts."""

    name = "an_invariant_writes_its_state"

    def actions(self):
        return [Action("CountUp", count_up, (Param("i", 2),))]

    def invariants(self):
        return [Invariant("bumps_its_counts", bumps_its_counts),
                Invariant("first_count_below_three", first_count_below_three)]

@njit(cache=True)
def count_up_reading_past_the_counts(s, t, i):
    if s.k >= 3:
        return False
    if s.k == 2:
        t.k = s.k + 1 + 0 * s.c[s.k]  # c has two elements: Python raises, compiled code reads on
        return True
    t.c[i] = min(s.c[i] + 1, 5)
    t.k = s.k + 1
    return True


@njit(cache=True)
def k_below_three(s):
    return s.k < 3


class ReadsPastAnArrayOnItsLastStep(WritesItsSourceOnSomeStates):
    """An action that reads past its array field on the step to a violation: the compiled kernels
    (without ``KRAFTCHECK_DEBUG_KERNELS``) read on and find ``k_below_three`` violated; Python
    raises IndexError on the trace's third state."""

    name = "reads_past_an_array_on_its_last_step"

    def actions(self):
        return [Action("CountUp", count_up_reading_past_the_counts, (Param("i", 2),))]

    def invariants(self):
        return [Invariant("k_below_three", k_below_three)]

# ----------------------------------------------------------------------------------------------
# An action that can end without a return: refused when the model is built


@njit(cache=True)
def mark_without_saying_it_fired(s, t):
    if s.marked == 3:
        return False
    t.marked = s.marked + 1


class ForgetsToReturn(Grid):
    """An action whose body ends without ``return True``: it would never fire."""

    name = "forgets_to_return"

    def actions(self):
        return [Action("MarkWithoutSayingItFired", mark_without_saying_it_fired)]


# ----------------------------------------------------------------------------------------------
# Two actions leaving their field's domain on different halves of the initial states: each half
# of the first chunk is a part of its own, expanded on a thread of its own


@njit(cache=True)
def overflow_below_eight(s, t):
    if s.a >= 8:
        return False
    t.c = 5  # c holds 0..3
    return True


@njit(cache=True)
def overflow_from_eight(s, t):
    if s.a < 8:
        return False
    t.c = 6
    return True


class OverflowingByHalves(Spec):
    """512 initial states, a from 0 to 15 in order: below 8 one action leaves c's domain, from 8
    the other does."""

    name = "overflowing_by_halves"
    Params = GridParams

    def fields(self):
        return [Int("a", 15), Int("b", 31), Int("c", 3)]

    def initial_states(self):
        for a in range(16):
            for b in range(32):
                yield {"a": a, "b": b, "c": 0}

    def actions(self):
        return [Action("OverflowBelowEight", overflow_below_eight), Action("OverflowFromEight", overflow_from_eight)]


# ----------------------------------------------------------------------------------------------
# An action whose arithmetic passes int64: Python's integers grow, numba's wrap, so the compiled
# kernels and the spec's Python give different successors (kernel_audit stops such a run)


@njit(cache=True)
def step_past_int64(s, t):
    if s.x == 4:
        return False
    t.x = (s.x * 4611686018427387904 * 4 + 1) % 5  # x * 2**64 + 1: Python x + 1, numba 1
    return True


class PastInt64(Spec):
    """x from 1: Python steps to 2, 3, 4; numba's int64 wraps x * 2**64 to 0, so it steps to 1."""

    name = "past_int64"
    Params = GridParams

    def fields(self):
        return [Int("x", 4)]

    def initial_states(self):
        yield {"x": 1}

    def actions(self):
        return [Action("StepPastInt64", step_past_int64)]


@njit(cache=True)
def coin(limit):
    return np.random.randint(0, limit)


@njit(cache=True)
def step_by_coin(s, t):
    """Steps x by a coin's throw: a random answer, sampled, not explored."""
    if s.x >= 3 or coin(2) == 0:
        return False
    t.x = s.x + 1
    return True


class RandomStep(Spec):
    """An action that draws a random number (through a helper): refused before any work."""

    name = "random_step"
    Params = GridParams

    def fields(self):
        return [Int("x", 4)]

    def initial_states(self):
        yield {"x": 0}

    def actions(self):
        return [Action("StepByCoin", step_by_coin)]


CALLS = np.zeros(1, np.int64)  # changed by the spec's Python at each call; numba would refuse the write


@njit(cache=True)
def step_every_other_call(s, t):
    """Enabled on every other call: a module-level value the function changes, which no static
    reading of the spec refuses."""
    CALLS[0] += 1
    if s.x >= 3 or CALLS[0] % 2 == 0:
        return False
    t.x = s.x + 1
    return True


class EveryOtherCall(Spec):
    """An action whose answer depends on how often it was called (the spec's Python only)."""

    name = "every_other_call"
    Params = GridParams

    def fields(self):
        return [Int("x", 4)]

    def initial_states(self):
        yield {"x": 0}

    def actions(self):
        return [Action("StepEveryOtherCall", step_every_other_call)]


@njit(cache=True)
def grow_past_int32_squares(s, t):
    if s.b != 0:
        return False
    t.b = 50000
    return True


@njit(cache=True)
def square_within_two_billion(s):
    return s.b * s.b <= 2_000_000_000  # 50,000 squared is 2.5e9: past int32, within int64


class SquarePastInt32(Spec):
    """An invariant whose arithmetic passes int32 and stays within int64: numba computes in int64,
    numpy on the states' int32 records wraps (the square of 50,000 to about -1.8e9)."""

    name = "square_past_int32"
    Params = GridParams

    def fields(self):
        return [Int("b", 50001)]

    def initial_states(self):
        yield {"b": 0}

    def actions(self):
        return [Action("Grow", grow_past_int32_squares)]

    def invariants(self):
        return [Invariant("square_within_two_billion", square_within_two_billion)]


@njit(cache=True)
def grow_array_past_int32_squares(s, t):
    if s.c[1] != 0:
        return False
    t.c[1] = 50000
    return True


@njit(cache=True)
def squares_within_two_billion(s):
    return (s.c * s.c).sum() <= 2_000_000_000  # an array product: int32 elements would wrap it


class ArraySquaresPastInt32(Spec):
    """An invariant computing on a whole array field past int32: numpy's product of two int32 arrays
    is int32 and wraps (the compiled kernels read the chunk's int32 rows, and held it), Python's
    int64 arrays do not."""

    name = "array_squares_past_int32"
    Params = GridParams

    def fields(self):
        return [Int("c", 50001, shape=(2,))]

    def initial_states(self):
        yield {"c": [0, 0]}

    def actions(self):
        return [Action("Grow", grow_array_past_int32_squares)]

    def invariants(self):
        return [Invariant("squares_within_two_billion", squares_within_two_billion)]


# ----------------------------------------------------------------------------------------------
# A state of two 64-bit words, cheap to compile (tests/test_visited_compact.py)


@njit(cache=True)
def step_a_wide_counter(s, t, i):
    if s.wide[i] >= 20:
        return False
    t.wide[i] = s.wide[i] + 1
    return True


class TwoWordCounters(Spec):
    """Three counters of 31 bits each: 93 bits, a state of two words; 21 ** 3 states."""

    name = "two_word_counters"
    Params = GridParams
    check_deadlock = False

    def fields(self):
        return [Int("wide", 2**31 - 1, shape=(3,))]

    def initial_states(self):
        yield {"wide": [0, 0, 0]}

    def actions(self):
        return [Action("Step", step_a_wide_counter, (Param("i", 3),))]


@njit(cache=True)
def bumps_the_successor(s, t):
    counts = t.c
    counts += 1  # an in-place add on a name bound to a field of t: the reading does not follow it
    return s.k < 1  # past the first step every successor is outside, checked and not kept


class AConstraintWritesItsSuccessor(AnInvariantWritesItsState):
    """An action constraint that writes the successor it is asked about, through a view the
    model's build does not refuse: the states kept, and what the checks read, would be others."""

    name = "a_constraint_writes_its_successor"

    def invariants(self):
        return [Invariant("first_count_below_three", first_count_below_three)]

    def action_constraints(self):
        return [ActionConstraint("bumps_the_successor", bumps_the_successor)]


@dataclass(frozen=True)
class DeepRingParams:
    n: int = param(400, "states, one a level", minimum=2)


@njit(cache=True)
def step_along(s, t):
    if s.x + 1 >= s.n:
        return False
    t.x = s.x + 1
    return True


@njit(cache=True)
def x_not_negative(s):
    return s.x >= 0


class DeepRing(Spec):
    """A narrow, deep state space: n states, one a level (x = 0, 1, ..., n - 1)."""

    name = "deep_ring"
    Params = DeepRingParams
    check_deadlock = False

    def fields(self):
        return [Int("x", self.params.n), Const("n", self.params.n)]

    def initial_states(self):
        yield {"x": 0}

    def actions(self):
        return [Action("Step", step_along)]

    def invariants(self):
        return [Invariant("x_not_negative", x_not_negative)]
