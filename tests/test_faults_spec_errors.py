"""A spec's error is the spec's error on every tier (issue 46 item 2): a function of the spec that
raises on a state stops the run with ``SpecRaised`` (exit 2 from the command line), naming the
spec's file and line and the state, with its path where the explorer can rebuild it; never a
verdict over the states that did not raise.

``Faulty`` counts ``x`` from 0 to 3; its const field ``fault`` says which of its functions
raises (ZeroDivisionError) once ``x`` is 2: one set of compiled kernels serves every case."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest
from numba import njit

from kraftcheck.checker.errors import SpecError, SpecRaised
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Action, Const, Constraint, Int, Invariant, Spec, TransitionProperty, param

ACTION, INVARIANT, CONSTRAINT, PROPERTY, OWN_TYPE_ERROR = 1, 2, 3, 4, 5


@njit(cache=True)
def boom(s):
    """1 // 0 once x is 2 (Python and numba's default error model both raise ZeroDivisionError)."""
    return 1 // (s.x - 2) if s.x == 2 else 1


@njit(cache=True)
def step(s, t):
    if s.x >= 3:
        return False
    if s.fault == ACTION:
        boom(s)  # raises on x = 2, at LINE
    if s.fault == OWN_TYPE_ERROR and s.x == 2:
        raise TypeError("the spec's own")
    t.x = s.x + 1
    return True


@njit(cache=True)
def bounded(s):
    if s.fault == INVARIANT:
        return boom(s) != 0
    return s.x <= 3


@njit(cache=True)
def forward(s, t):
    if s.fault == PROPERTY:
        return boom(s) != 0
    return t.x > s.x


@njit(cache=True)
def inside(s):
    if s.fault == CONSTRAINT:
        return boom(s) != 0
    return True


LINE = next(i for i, text in enumerate(open(__file__), 1) if "return 1 // (s.x - 2)" in text)


@dataclass(frozen=True)
class FaultyParams:
    fault: int = param(ACTION, "which function raises on x = 2", minimum=1, maximum=5)


class Faulty(Spec):
    name = "faulty"
    Params = FaultyParams

    def fields(self):
        return [Int("x", 3), Const("fault", self.params.fault)]

    def initial_states(self):
        yield {"x": 0}

    def actions(self):
        return [Action("Step", step)]

    def invariants(self):
        return [Invariant("bounded", bounded)]

    def properties(self):
        return [TransitionProperty("forward", forward)]

    def constraints(self):
        return [Constraint("inside", inside)]


class FieldsRaise(Faulty):
    name = "fields_raise"

    def fields(self):
        return [Int("x", 3 // (self.params.fault - 1))]


class FieldsMisspell(Faulty):
    name = "fields_misspell"

    def fields(self):
        return [Int("x", self.params.faultt)]


class InitRaises(Faulty):
    name = "init_raises"

    def initial_states(self):
        yield {"x": [0][self.params.fault]}


class StartsAtTwo(Faulty):
    name = "starts_at_two"

    def initial_states(self):
        yield {"x": 2}


@njit(cache=True)
def divide_by_an_element(s, t):
    if s.c[0] >= 2:
        return False
    t.c[1] = (1 // (1 - s.c[0])) % 2  # by zero where c[0] is 1: an element is a numpy integer in Python
    t.c[0] = s.c[0] + 1
    return True


class DividesByAnElement(Faulty):
    name = "divides_by_an_element"

    def fields(self):
        return [Int("c", 2, (2,))]

    def initial_states(self):
        yield {}

    def actions(self):
        return [Action("Step", divide_by_an_element)]

    def invariants(self):
        return []

    def properties(self):
        return []

    def constraints(self):
        return []


def _model(fault):
    """Without the constraint unless it is the one that raises: the engine's compiled kernels then
    take their distinct-successor path."""
    return Model(Faulty(FaultyParams(fault)), constraints=None if fault == CONSTRAINT else [])


def _assert_stops(run, what, path=({"x": 0}, {"x": 1}, {"x": 2})):
    """``run()`` raises the spec's error naming ``what``, this file's LINE and the state x = 2,
    with the path to it (a transition property's: from it)."""
    with pytest.raises(SpecRaised) as caught:
        run()
    e = caught.value
    text = str(e)
    assert text.startswith(what) and " raised ZeroDivisionError: " in text and f"{__file__}:{LINE}; " in text, text
    assert e.state == {"x": 2}, text
    assert [fields for _, fields in e.path] == list(path), text
    assert [action for action, _ in e.path] == [None] + ["Step"] * (len(path) - 1), text
    return e


@pytest.mark.parametrize("tier", ["never", "bytecode"])
@pytest.mark.parametrize("fault, what", [(ACTION, "action Step"), (INVARIANT, "invariant bounded"),
                                         (CONSTRAINT, "constraint inside"), (PROPERTY, "transition property forward")])
def test_the_first_tiers_stop_at_the_spec_error(tier, fault, what):
    """The Python tier and the bytecode tier (which redoes the state in Python) stop on it."""
    _assert_stops(lambda: Engine(compile=tier).explore(_model(fault), Options(keep_going=True)), what)


@pytest.mark.parametrize("fault, what", [(ACTION, "action Step"), (INVARIANT, "invariant bounded"),
                                         (CONSTRAINT, "constraint inside"), (PROPERTY, "transition property forward")])
def test_the_reference_explorer_stops_at_the_spec_error(fault, what):
    _assert_stops(lambda: ReferenceExplorer().explore(_model(fault), Options(keep_going=True)), what)


@njit(cache=True)
def divides_in_a_constraint(s):
    return 1 // (1 - s.c[0]) >= 0


class ConstraintDividesByAnElement(DividesByAnElement):
    name = "constraint_divides_by_an_element"

    def constraints(self):
        return [Constraint("inside", divides_in_a_constraint)]


def test_a_constraint_the_compiled_code_found_dividing_by_zero_is_found_again_in_python():
    """The compiled constraint raises ZeroDivisionError with no line; run again as Python to name
    it, numpy's division by zero of an element gave 0, and the error said none raised there."""
    model = Model(ConstraintDividesByAnElement(FaultyParams()))
    with pytest.raises(SpecRaised, match=r"^constraint inside raised FloatingPointError: divide by zero"):
        model.in_model(None, (1, 0))


class TooWide(Faulty):
    name = "too_wide"

    def fields(self):
        return [Int("x", 3, (5000,))]  # 2 bits each: over 64 words


def test_a_state_wider_than_the_engine_packs_is_refused_when_the_model_is_built():
    """The visited sets take states of at most 64 words: a wider layout was a ValueError of the
    engine's, said as kraftcheck's internal error, once the run had started."""
    with pytest.raises(SpecError, match=r"^spec too_wide: a state takes \d+ 64-bit words \(\d+ bits of fields\); "
                                        r"at most 64"):
        Model(TooWide(FaultyParams()))


@pytest.mark.parametrize("explorer", ["never", "bytecode", "reference"])
def test_a_division_by_zero_of_an_array_element_stops_every_first_tier(explorer):
    """An array field's element is a numpy integer in the Python tiers, and numpy divides it by
    zero as 0 with a warning: the Python tier and the reference explorer said "holds" where the
    compiled kernels and the bytecode stop with ZeroDivisionError."""
    model = Model(DividesByAnElement(FaultyParams()))
    run = ReferenceExplorer() if explorer == "reference" else Engine(compile=explorer)
    with pytest.raises(SpecRaised, match=r"^action Step raised (ZeroDivisionError|FloatingPointError): .*divi"):
        run.explore(model, Options(keep_going=True))


@pytest.mark.parametrize("explorer", ["never", "bytecode", "reference"])
@pytest.mark.parametrize("fault, what", [(INVARIANT, "invariant bounded"), (CONSTRAINT, "constraint inside")])
def test_a_check_that_raises_on_an_initial_state_stops_there(explorer, fault, what):
    model = Model(StartsAtTwo(FaultyParams(fault)), constraints=None if fault == CONSTRAINT else [])
    make = ReferenceExplorer if explorer == "reference" else lambda: Engine(compile=explorer)
    _assert_stops(lambda: make().explore(model, Options(keep_going=True)), what, path=({"x": 2},))


def test_an_error_in_any_part_on_the_threads_reaches_the_caller():
    """The bytecode tier and the compiled kernels run parts of a batch on threads: the error of
    the earliest part that raised is raised once every part is done, whichever thread it was on."""
    from kraftcheck.checker.kernels.threads import run_parts
    done = []

    def part(j):
        done.append(j)
        if j >= 2:
            raise (ZeroDivisionError if j == 2 else IndexError)(f"part {j}")

    with pytest.raises(ZeroDivisionError, match="part 2"):
        run_parts(part, 4)
    assert sorted(done) == [0, 1, 2, 3]


@pytest.mark.parametrize("fault, what", [(ACTION, "action Step"), (CONSTRAINT, "constraint inside"),
                                         (PROPERTY, "transition property forward")])
def test_the_compiled_kernels_stop_at_the_spec_error(fault, what):
    """numba raises ZeroDivisionError with no line of the spec's: the state is found again in
    Python, on the distinct-successor path (no constraint) and the candidate-row path."""
    _assert_stops(lambda: Engine(compile="now").explore(_model(fault), Options()), what)


@pytest.mark.slow
def test_the_table_forms_callbacks_do_not_swallow_the_spec_error(capfd):
    """A large layout's ``fire`` kernels are C callbacks, which cannot raise: numba printed
    "Exception ignored" and the action counted as never fired, a verdict over the other states."""
    from conftest import TableLayoutEngine
    _assert_stops(lambda: TableLayoutEngine(compile="now").explore(_model(ACTION), Options()), "action Step")
    assert "Exception ignored" not in capfd.readouterr().err



def _unraisable(error: BaseException):
    """What Python hands ``sys.unraisablehook`` for an error a numba callback could only print."""
    from types import SimpleNamespace
    return SimpleNamespace(exc_type=type(error), exc_value=error, exc_traceback=None, err_msg=None,
                           object="<numba.core.cpu.CPUContext>")


def test_callback_errors_of_batches_that_overlap_are_all_kept_and_the_hook_restored(monkeypatch):
    """Batches in two threads overlap and end in any order: the first to end must not take the
    hook from the other (whose spec error would be printed, the action counted as never fired),
    and the hook there was before is back once both have ended."""
    from kraftcheck.checker.explore.spec_raised import _CallbackErrors
    printed = []
    monkeypatch.setattr(sys, "unraisablehook", printed.append)
    first, second = _CallbackErrors(), _CallbackErrors()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    error = ZeroDivisionError("in the second batch")
    sys.unraisablehook(_unraisable(error))
    second.__exit__(None, None, None)
    assert second.caught == [error] and printed == []
    assert sys.unraisablehook == printed.append


def test_an_interrupt_a_finalizer_swallowed_is_no_spec_error(monkeypatch):
    """Ctrl-C arriving in a finalizer of numba's while a batch runs is the interrupt's (exit 130),
    not an error of the spec's (exit 2)."""
    from kraftcheck.checker.explore.spec_raised import _CallbackErrors
    printed = []
    monkeypatch.setattr(sys, "unraisablehook", printed.append)
    with _CallbackErrors() as callbacks:
        sys.unraisablehook(_unraisable(KeyboardInterrupt()))
    assert callbacks.caught == [] and len(printed) == 1

def test_a_type_error_the_spec_raises_itself_is_its_error_on_the_compiled_tier_too():
    """TypeError is what the first tier hands on as Python's alone; raised by numba's code as
    well, it is the spec's error, found in Python on its state (not "none raised as Python")."""
    with pytest.raises(SpecRaised, match=r"^action Step raised TypeError: the spec's own at \S*"
                                         r"test_faults_spec_errors\.py:\d+; a spec's error") as caught:
        Engine(compile="now").explore(_model(OWN_TYPE_ERROR), Options())
    assert caught.value.state == {"x": 2} and len(caught.value.path) == 3


def test_a_simulation_stops_at_the_spec_error():
    from kraftcheck.checker.explore.simulate import SimulationOptions, simulate
    _assert_stops(lambda: simulate(_model(ACTION), SimulationOptions(seed=1, depth=10, max_behaviours=5),
                                   compile="never"), "action Step")


def test_python_only_errors_are_the_first_tiers_and_others_the_specs():
    """What only Python raises on code numba runs (``s["x"]``: TypeError) leaves the state to the
    compiled kernels; an error of value (ZeroDivisionError, IndexError) is the spec's."""
    from kraftcheck.checker.errors import spec_raised
    for error, python_only in [(TypeError("'State' object is not subscriptable"), True),
                               (AttributeError("no attribute"), True), (ZeroDivisionError("by zero"), False),
                               (IndexError("out of bounds"), False), (AssertionError(), False)]:
        assert spec_raised("action A", error).python_only is python_only


def test_a_first_tier_error_of_the_specs_does_not_wait_for_the_compiled_kernels(monkeypatch):
    """On the Python tier of a ``--compile background`` run, ZeroDivisionError stops the run at
    once: it is not redone compiled (where the table form's callbacks, or an index out of range
    without bounds checks, would have answered over the other states). A run that redoes a chunk
    compiled first waits for the compile, which the observer hears (``waiting_for_compile``); the
    compile here never finishes, so such a run could only end there."""
    from kraftcheck.checker.explore import tiers
    from kraftcheck.checker.explore.observer import RunObserver

    class NoWaitForTheCompile(RunObserver):
        def waiting_for_compile(self):
            pytest.fail("the spec's own error was left to the compiled kernels: the run waited for them")

    class NeverReady:
        def __init__(self, forms):
            self.shapes = forms[-1] if isinstance(forms, list) else forms
            self.status, self.elapsed, self.left_running, self.ready = "scripted", 0.0, False, {}

        def ready_form(self):
            return None

        def failed(self):
            return False

        def hurry(self):
            pass

        def stop(self, keep=None):
            pass

    monkeypatch.setenv("KRAFTCHECK_INTERPRET_S", "60")
    monkeypatch.setattr(tiers, "is_compiled", lambda shapes: False)
    monkeypatch.setattr(tiers, "BackgroundCompile", NeverReady)
    monkeypatch.setattr(tiers, "first_tier_kernels", lambda model, load=True: tiers.InterpretedKernels(model))
    _assert_stops(lambda: Engine(compile="background").explore(_model(ACTION), Options(),
                                                                observer=NoWaitForTheCompile()), "action Step")


def test_fields_and_initial_states_that_raise_name_the_specs_line():
    def line_of(text):
        return next(i for i, t in enumerate(open(__file__), 1) if text in t)

    with pytest.raises(SpecRaised, match=r"^fields\(\) of spec fields_raise raised ZeroDivisionError: .* at "
                                         rf"\S*test_faults_spec_errors\.py:{line_of('3 // (self.params')}; "):
        Model(FieldsRaise(FaultyParams(1)))
    with pytest.raises(SpecRaised, match=r"^initial_states\(\) of spec init_raises raised IndexError: .* at "
                                         rf"\S*test_faults_spec_errors\.py:{line_of('[0][self.params')}; "):
        Model(InitRaises(FaultyParams(1)))
    # an AttributeError of code only Python runs is the spec's own error, not a tier's limit
    with pytest.raises(SpecRaised, match=r"^fields\(\) of spec fields_misspell raised AttributeError: .* at "
                                         rf"\S*test_faults_spec_errors\.py:{line_of('self.params.faultt')}; "
                                         r"a spec's error stops the run, with no verdict"):
        Model(FieldsMisspell(FaultyParams(1)))


class BareInvariant(Faulty):
    name = "bare_invariant"

    def invariants(self):
        return [bounded]


class OneAction(Faulty):
    name = "one_action"

    def actions(self):
        return Action("Step", step)


class ActionAsATuple(Faulty):
    name = "action_as_a_tuple"

    def actions(self):
        return [("Step", step)]


class FieldsAsADict(Faulty):
    name = "fields_as_a_dict"

    def fields(self):
        return {"x": Int("x", 3), "fault": Const("fault", self.params.fault)}


class BareConstraint(Faulty):
    name = "bare_constraint"

    def constraints(self):
        return [inside]


class OneInitialState(Faulty):
    name = "one_initial_state"

    def initial_states(self):
        return {"x": 0}


class InitialStatesAsLists(Faulty):
    name = "initial_states_as_lists"

    def initial_states(self):
        return [[0]]


@pytest.mark.parametrize("cls, message", [
    (BareInvariant, r"invariants\(\) of spec bare_invariant gives the function bounded, which is no Invariant; "
                    r'write Invariant\("bounded", bounded\)$'),
    (OneAction, r"actions\(\) of spec one_action returned one Action, not a list: return a list of them"),
    (ActionAsATuple, r"actions\(\) of spec action_as_a_tuple gives \('Step', .*\(a tuple\), which is no Action: "
                     r'each is written Action\("Name", fn\)$'),
    (FieldsAsADict, r"fields\(\) of spec fields_as_a_dict returned \{'x': .* \(a dict\): return a list of Field"),
    (BareConstraint, r"constraints\(\) of spec bare_constraint gives the function inside, which is no Constraint"),
    (OneInitialState, r"initial_states\(\) of spec one_initial_state returned one dict; return a list of them"),
    (InitialStatesAsLists, r"initial_states\(\) of spec initial_states_as_lists gives \[0\] \(a list\), which "
                           r"is no dict of field values"),
])
def test_what_a_declaring_method_returns_is_refused_in_one_line_unless_a_list_of_its_objects(cls, message):
    """A function where an Invariant belongs, one Action where a list of them does, a tuple of an
    action's pieces, a dict of fields, one dict of initial values: each was an internal error (an
    AttributeError or TypeError where kraftcheck read a name from it); now a SpecError saying what
    was given and how it is written."""
    with pytest.raises(SpecError, match=message) as e:
        Model(cls(FaultyParams(1)))
    assert type(e.value) is SpecError


SPEC_FILE = '''
from dataclasses import dataclass

from numba import njit
from kraftcheck.checker.spec import Action, Int, Spec


@dataclass(frozen=True)
class NoParams:
    pass


@njit(cache=True)
def step(s, t):
    if s.x >= 3:
        return False
    t.x = s.x + 1 + 0 // (s.x - 2)
    return True


class Divides(Spec):
    name = "divides_by_zero"
    Params = NoParams

    def fields(self):
        return [Int("x", 3)]

    def initial_states(self):
        yield {"x": 0}

    def actions(self):
        return [Action("Step", step)]
'''


def test_the_command_line_exits_2_with_the_error_and_a_report_saying_error(tmp_path):
    """``--spec path.py:Class`` whose action divides by zero on x = 2: exit 2, the file and line,
    the path to the state; no verdict, no count, and a JSON report saying ``error`` with the same
    message and no count (it wrote none, so a program could not tell this run's error from a
    refusal of its input before it ran)."""
    spec = tmp_path / "divides.py"
    spec.write_text(SPEC_FILE)
    report = tmp_path / "report.json"
    env = dict(os.environ, KRAFTCHECK_CACHE_DIR=str(tmp_path / "cache"), NO_COLOR="1")
    run = subprocess.run([sys.executable, "-m", "kraftcheck", "check", "--spec", f"{spec}:Divides", "--json",
                          str(report)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    line = next(i for i, text in enumerate(SPEC_FILE.splitlines(), 1) if "0 // (s.x - 2)" in text)
    assert f"action Step raised ZeroDivisionError: integer division or modulo by zero at {spec}:{line}; " in \
        run.stderr, run.stderr
    assert "3. Step: x=2" in run.stderr
    assert "hold" not in run.stdout + run.stderr and "distinct" not in run.stdout + run.stderr
    said = json.loads(report.read_text())
    assert (said["result"], said["spec"]) == ("error", "divides_by_zero"), said
    assert said["error"].startswith(f"action Step raised ZeroDivisionError: integer division or modulo by zero at "
                                    f"{spec}:{line}; "), said
    assert " ".join(f"kraftcheck: error: {said['error']}".split()) in " ".join(run.stderr.split()), run.stderr
    assert said["exhaustive"] is False and not {"distinct_states", "states_generated", "depth"} & set(said), said
    refused = subprocess.run([sys.executable, "-m", "kraftcheck", "check", "--spec", f"{spec}:Divides", "--invariant",
                              "nope", "--json", str(report)], capture_output=True, text=True, env=env, timeout=300)
    assert refused.returncode == 2 and "nope" in refused.stderr, refused.stderr
    assert report.exists()  # a refusal before the run: nothing written, nothing removed


def test_the_debug_mode_compiles_with_bounds_checks_into_a_cache_of_its_own(monkeypatch, tmp_path):
    """``KRAFTCHECK_DEBUG_KERNELS=1``: numba's bounds checks on, and both the kernel cache and
    numba's cache apart from the normal ones, which it must never overwrite nor load."""
    import numba

    from kraftcheck.checker import codegen, debug_kernels
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(numba.config, "BOUNDSCHECK", numba.config.BOUNDSCHECK)
    monkeypatch.setattr(numba.config, "CACHE_DIR", numba.config.CACHE_DIR)
    monkeypatch.delenv(debug_kernels.ENV, raising=False)
    normal, before = codegen.cache_dir(), numba.config.BOUNDSCHECK
    debug_kernels.apply()
    assert numba.config.BOUNDSCHECK == before
    monkeypatch.setenv(debug_kernels.ENV, "1")
    debug_kernels.apply()
    assert numba.config.BOUNDSCHECK == 1
    assert codegen.cache_dir() != normal and codegen.cache_dir().parent == normal.parent
    assert numba.config.CACHE_DIR.startswith(str(tmp_path)) and not numba.config.CACHE_DIR.startswith(str(normal))


def test_a_domain_error_found_by_two_threads_names_the_first_parts_action_and_state():
    """Two parts of a chunk, on two threads, each meet an action leaving a field's domain: the
    error is the first part's, its state with its action, on every run. The parts once wrote one
    pair of cells, so the last part to write was named, and a state of one could be paired with
    the other's action (then the message blamed an action that did nothing wrong there)."""
    from odd_specs import OverflowingByHalves

    for _ in range(5):
        with pytest.raises(SpecError, match=r"^after OverflowBelowEight: field c = 5 is outside its domain"):
            Engine(compile="now").explore(Model(OverflowingByHalves(OverflowingByHalves.Params())), Options(threads=2))
