"""The bytecode tier against its reference, the spec's own Python (``InterpretedKernels``).

Every shipped spec translates; on every state reachable at its examples' parameters the bytecode
computes the same successor rows, words, fingerprints, labels and masks as Python, without
handing a state back to Python; and the interpreter's arithmetic is Python's, or it stops and
lets Python answer (hypothesis, over the whole int64 range).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

import odd_specs
from kraftcheck.checker.bytecode import Assembler, Translator, Untranslatable, translate
from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.explore.bytecode_tier import BytecodeKernels
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.kernels import bytecode as vm
from kraftcheck.checker.layout import Layout
from kraftcheck.checker.model import Model, python_function
from kraftcheck.checker.spec import Const, Int
from kraftcheck.specs import spec_class, spec_names

EWD840 = str(Path(__file__).resolve().parents[1] / "bench" / "specs" / "ewd840.py") + ":EWD840"
TEST_SPECS = ["constraint_specs:Counters", "constraint_specs:Rising", "symmetry_specs:Voting"]
CASES = [(name, example) for name in spec_names() + TEST_SPECS + [EWD840] for example in spec_class(name).examples]


def _model(name, example):
    cls = spec_class(name)
    return Model(cls(cls.Params(**example)))


def _reachable_rows(model, python, bytecode, most=1500):
    """Breadth-first over the model's states (at most ``most``): each level's successors and
    checks computed by both tiers and compared row by row."""
    level = python.pack(model.initial)
    seen = {tuple(int(x) for x in w) for w in level}
    compared = 0
    while level.shape[0] and compared < most:
        level = level[: most - compared]
        got = bytecode.successors(level)
        want = python.successors(level)
        rows = level.shape[0] * len(model.labels)
        assert np.array_equal(got.labels[:rows], want.labels[:rows])
        fired = want.labels[:rows] != NO_LABEL
        assert np.array_equal(got.words[:rows][fired], want.words[:rows][fired])
        assert np.array_equal(got.hashes[:rows][fired], want.hashes[:rows][fired])
        if model.properties or model.action_constraints:
            assert np.array_equal(got.props[:rows][fired], want.props[:rows][fired])
        assert np.array_equal(bytecode.violations(level), python.violations(level))
        compared += level.shape[0]
        fresh = []
        for w in want.words[:rows][fired]:
            key = tuple(int(x) for x in w)
            if key not in seen:
                seen.add(key)
                fresh.append(w)
        level = np.array(fresh, np.uint64).reshape(-1, model.layout.nwords)
    return compared


@pytest.mark.parametrize("name,example", CASES, ids=[f"{n.rsplit('/', 1)[-1]}-{e}" for n, e in CASES])
def test_every_shipped_spec_runs_in_bytecode_as_in_python(name, example):
    model = _model(name, example)
    bytecode = BytecodeKernels(model)  # raises Untranslatable if a function does not translate
    compared = _reachable_rows(model, InterpretedKernels(model), bytecode)
    assert compared > 0
    assert bytecode.redone_in_python == 0, "the bytecode handed states back to Python"


def test_the_default_kafka_model_runs_in_bytecode_as_in_python():
    model = _model("kafka", {})
    bytecode = BytecodeKernels(model)
    assert _reachable_rows(model, InterpretedKernels(model), bytecode, most=600) == 600
    assert bytecode.redone_in_python == 0


def test_a_state_the_bytecode_cannot_finish_is_redone_in_python():
    """``Overflowing`` writes past its field's domain: the bytecode stops at that state and
    Python raises the Python tier's error, naming the step (which the bytecode cannot)."""
    model = Model(odd_specs.Overflowing(odd_specs.GridParams(1)))
    with pytest.raises(SpecError, match=r"^after Overflow: field marked = 4 is outside its domain"):
        _reachable_rows(model, InterpretedKernels(model), BytecodeKernels(model))


def test_arithmetic_where_c_and_python_differ_runs_as_python():
    """odd_specs.Arithmetic: floor division and modulo of negative numbers, products past 32
    bits, shifts, min/max, and a global table the invariant reads (numba freezes it; the bytecode
    keeps it in its third memory space)."""
    model = Model(odd_specs.Arithmetic(odd_specs.ArithmeticParams()))
    bytecode = BytecodeKernels(model)
    assert _reachable_rows(model, InterpretedKernels(model), bytecode) == 15
    assert bytecode.redone_in_python == 0


def test_what_does_not_translate_is_named():
    """A spec whose functions use what the bytecode lacks (here a method call) is refused before
    anything runs, with the file, line and function; the engine then takes the Python tier."""
    with pytest.raises(Untranslatable, match=r"odd_specs\.py:\d+ \(bump\): a call of a method"):
        translate(Model(odd_specs.Tally(odd_specs.TallyParams())))


# -- the interpreter's arithmetic against Python's, over the whole int64 range

LAYOUT = Layout([Int("a", 0, 1), Int("b", 0, 1), Int("arr", 0, 1, (3,))])


@njit
def _pair(x, y):
    return x - y, x * y


@njit
def ops(s, which):
    a, b = s.a, s.b
    if which == 0:
        return a + b
    if which == 1:
        return a - b
    if which == 2:
        return a * b
    if which == 3:
        return a // b
    if which == 4:
        return a % b
    if which == 5:
        return a << (b % 70)
    if which == 6:
        return a >> (b % 70)
    if which == 7:
        return (a & b) ^ (a | ~b)
    if which == 8:
        return -a + abs(b)
    if which == 9:
        return min(a, b, 3) - max(a, -b)
    if which == 10:
        return (a or b) + (a and b) + (not a)
    if which == 11:
        return a < b <= 7 or a == b != 0
    if which == 12:
        d, p = _pair(a % 1000, b % 1000)
        return d + p if a > b else d - p
    if which == 13:
        n = 0
        x = a & 0xFFFF
        while x:
            x &= x - 1
            n += 1
        for i in range(b % 5, 7, 2):
            n += i
        return n
    if which == 14:
        return s.arr[a % 5 - 2] + s.arr[-1]
    return (a % 20) ** (b % 5)


WHICH = 16


def _run_both(which, a, b, arr):
    asm = Assembler()
    start, regs = Translator(LAYOUT, asm).program(ops, (0,), 1)
    code = asm.array()
    flat = (a, b, *arr)
    src = np.array(flat, np.int64)
    registers = np.zeros(asm.nregs, np.int64)
    registers[regs[0]] = which
    status, value = vm.run(code, start, registers, src, src, np.zeros(1, np.int64))
    try:
        expected = python_function(ops)(LAYOUT.to_object(flat), which)
        expected = int(expected)
    except (ArithmeticError, ValueError, IndexError):
        expected = None
    return status, value, expected


int64s = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-300, 300))
small = st.integers(-(1 << 20), 1 << 20)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, WHICH - 1), int64s, int64s, st.lists(st.integers(-9, 9), min_size=3, max_size=3))
def test_what_the_interpreter_answers_is_pythons(which, a, b, arr):
    """Over the whole int64 range: an answer is Python's; where a value on the way would leave
    the range (or Python raises) the interpreter stops, and Python answers instead."""
    status, value, expected = _run_both(which, a, b, arr)
    if status == vm.DONE:
        assert expected is not None and value == expected


@settings(max_examples=400, deadline=None)
@given(st.integers(0, WHICH - 1), small, small, st.lists(st.integers(-9, 9), min_size=3, max_size=3))
def test_the_interpreter_stops_only_where_python_raises_on_moderate_values(which, a, b, arr):
    """Within +-2**20 (shifts by up to 69 bits, powers up to the 4th: nothing on the way leaves
    int64 but a shift left, which it stops past 62 bits whatever it gives) the interpreter
    answers every case whose answer is an int64."""
    status, value, expected = _run_both(which, a, b, arr)
    if expected is None:
        assert status == vm.FAILED
    elif status != vm.DONE:
        assert not -(1 << 63) <= expected < (1 << 63) or (which == 5 and b % 70 > 62)
    else:
        assert value == expected


@pytest.mark.parametrize("which", range(WHICH))
def test_every_operation_runs_in_the_interpreter_on_small_values(which):
    status, value, expected = _run_both(which, 17, 5, [1, -2, 3])
    assert status == vm.DONE and value == expected


# -- names Python might find unassigned: they do not translate (a register would hold another
# state's value where Python raises UnboundLocalError)

@njit
def _assigned_in_one_branch(s):
    if s.a > 0:
        x = 1
    return x  # noqa: F821 - unbound when s.a <= 0, on purpose


@njit
def _assigned_in_a_loop(s):
    for i in range(s.a):
        pass
    return i  # noqa: F821 - unbound when s.a <= 0, on purpose


@njit
def _assigned_on_every_path(s):
    if s.a > 0:
        x = 1
    elif s.b > 0:
        return 7
    else:
        x = 2
    y = 0
    for i in range(3):
        y += i
    return x + y


@pytest.mark.parametrize("fn", [_assigned_in_one_branch, _assigned_in_a_loop])
def test_a_name_python_may_find_unassigned_does_not_translate(fn):
    with pytest.raises(Untranslatable, match=r"may be read before it is assigned"):
        Translator(LAYOUT, Assembler()).program(fn, (0,))


@pytest.mark.parametrize("a,b", [(1, 0), (0, 1), (0, 0)])
def test_a_name_assigned_on_every_path_translates(a, b):
    asm = Assembler()
    start, _ = Translator(LAYOUT, asm).program(_assigned_on_every_path, (0,))
    src = np.array((a, b, 0, 0, 0), np.int64)
    status, value = vm.run(asm.array(), start, np.zeros(asm.nregs, np.int64), src, src, np.zeros(1, np.int64))
    assert status == vm.DONE and value == python_function(_assigned_on_every_path)(LAYOUT.to_object(tuple(src)))


# -- what a review found the bytecode computing otherwise than Python (session 25): each now
# either does not translate or computes as Python does

U8 = np.array([0, 200], np.uint8)
WIDE = 1 << 70


@njit
def _numpy_bools_added(s):
    return (s.arr[0] > 0) + (s.arr[1] > 0) == 2  # Python: np.True_ + np.True_ is True


@njit
def _numpy_bool_inverted(s):
    return ~(s.arr[0] > 0)


@njit
def _bools_from_a_helper_added(s):
    x, y = _flags(s)
    return x + y


@njit
def _flags(s):
    return s.arr[0] > 0, s.arr[1] > 0


@njit
def _narrow_global(s):
    return U8[0] - 1 < 0  # Python: uint8 wraps to 255


@njit
def _bool_index(s):
    return s.arr[s.a > 0] == 7  # numpy takes a bool index as a mask


@njit
def _wide_constant(s):
    return s.a < WIDE


@pytest.mark.parametrize("fn, says", [(_numpy_bools_added, "may be bools"), (_numpy_bool_inverted, "may be a bool"),
                                      (_bools_from_a_helper_added, "may be bools"),
                                      (_narrow_global, "U8 is not a number"), (_bool_index, "may be a bool"),
                                      (_wide_constant, "past 64 bits")])
def test_what_python_computes_otherwise_does_not_translate(fn, says):
    with pytest.raises(Untranslatable, match=says):
        Translator(LAYOUT, Assembler()).program(fn, (0,))


@njit
def _int_of_bools_added(s):
    return int(s.arr[0] > 0) + int(s.arr[1] > 0)


def test_bools_made_ints_add_as_ints():
    status, value, expected = _run_program(_int_of_bools_added, (0, 0, 1, 1, 0))
    assert status == vm.DONE and value == expected == 2


CONST_LAYOUT = Layout([Int("a", 0, 1), Const("c", 0)])


@njit
def _writes_a_const_back(s, t):
    t.c = 1
    x = t.c
    t.c = 0
    t.a = x
    return True


def test_a_const_field_written_then_read_back_reads_what_was_written():
    asm = Assembler()
    start, _ = Translator(CONST_LAYOUT, asm).program(_writes_a_const_back, (0, 1), writable=(1,))
    src = np.array((0, 0), np.int64)
    dst = src.copy()
    status, fired = vm.run(asm.array(), start, np.zeros(asm.nregs, np.int64), src, dst, np.zeros(1, np.int64))
    after = CONST_LAYOUT.to_object((0, 0))
    python_function(_writes_a_const_back)(CONST_LAYOUT.to_object((0, 0)), after)
    assert status == vm.DONE and fired and tuple(dst) == CONST_LAYOUT.from_object(after) == (1, 0)


@njit
def _power(s):
    return s.a ** s.b


@pytest.mark.parametrize("base", [0, 1, -1])
def test_a_power_of_0_1_or_minus_1_is_not_a_loop_of_its_exponent(base):
    status, value, expected = _run_program(_power, (base, 10 ** 18, 0, 0, 0))
    assert status == vm.DONE and value == expected


def _run_program(fn, flat):
    asm = Assembler()
    start, _ = Translator(LAYOUT, asm).program(fn, (0,))
    src = np.array(flat, np.int64)
    status, value = vm.run(asm.array(), start, np.zeros(asm.nregs, np.int64), src, src, np.zeros(1, np.int64))
    return status, value, int(python_function(fn)(LAYOUT.to_object(tuple(flat))))


def _states(model, xs):
    return InterpretedKernels(model).pack([model.layout.flat_from_values({"x": x, "y": 0}) for x in xs])


def test_threads_split_a_batch_and_hand_states_back_in_each_part(monkeypatch):
    """600 states are two parts on two threads; every state from x = 1 is handed back to Python
    (a product past 64 bits), in both parts, and the rows are Python's."""
    monkeypatch.setenv("KRAFTCHECK_THREADS", "2")
    model = Model(odd_specs.HandBack(odd_specs.HandBackParams()))
    bytecode = BytecodeKernels(model)
    words = _states(model, range(600))
    assert [b - a for a, b in bytecode.parts(600)] == [300, 300]
    parts_seen = []
    got = bytecode.successors(words, after_part=lambda j, a, b: parts_seen.append((j, a, b)))
    want = InterpretedKernels(model).successors(words)
    assert sorted(parts_seen) == [(0, 0, 300), (1, 300, 600)]
    assert np.array_equal(got.labels[:600], want.labels[:600])
    fired = want.labels[:600] != NO_LABEL
    assert np.array_equal(got.words[:600][fired], want.words[:600][fired])
    assert np.array_equal(got.hashes[:600][fired], want.hashes[:600][fired])
    assert bytecode.redone_in_python == 598  # x = 1 .. 598 (599 is disabled: no product)


def test_the_earliest_states_error_is_raised_whatever_thread_fails_first(monkeypatch):
    """Both parts fail (x = 100 in the first, x = 300 on in the second): the error is the first
    state's, as one thread would raise it."""
    monkeypatch.setenv("KRAFTCHECK_THREADS", "2")
    model = Model(odd_specs.HandBackAndFail(odd_specs.HandBackParams()))
    words = _states(model, range(600))
    with pytest.raises(SpecError, match=r"action Read.*index 100 is out of bounds"):
        BytecodeKernels(model).successors(words)
    with pytest.raises(SpecError, match=r"action Read.*index 300 is out of bounds"):
        BytecodeKernels(model).successors(words, 300, 600)
