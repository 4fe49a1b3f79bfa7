"""A spec's action, invariant or constraint that returns something other than a bool is refused
(exit 2, the function, its line, what it returned, what to return instead) before any answer,
whichever tier runs it: when the model is built for a literal, by the tiers that run it as Python
at its first such value, by numba's typing before any compiled kernel runs; a bool, numpy's
included, is taken alike by every tier (checker/action_returns.py)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest

import return_value_specs as specs
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model

SPECS_FILE = inspect.getsourcefile(specs)


def _line(text: str) -> int:
    """The line of ``text`` in return_value_specs.py."""
    return next(i for i, line in enumerate(open(SPECS_FILE).read().splitlines(), 1) if text in line)


def _defined(fn) -> str:
    return f"(defined at {SPECS_FILE}:{fn.py_func.__code__.co_firstlineno})"


def _model(cls) -> Model:
    return Model(cls(cls.Params()))


@pytest.mark.parametrize("cls, function, literal, what", [
    (specs.ReturnsAPair, "action IncReturnsAPair", "(1, 2)", "a tuple"),
    (specs.InvariantSaysYes, "invariant says_yes", "'yes'", "a string"),
    (specs.ReturnsOne, "action IncReturnsOne", "0", "an integer"),  # the first such return in the source
])
def test_a_literal_that_is_no_bool_is_refused_when_the_model_is_built(cls, function, literal, what):
    line = _line(f"return {literal}".replace("'", '"'))
    with pytest.raises(SpecError) as e:
        _model(cls)
    assert f"{function} returns no bool (return {literal}, {what}, at {SPECS_FILE}:{line})" in str(e.value)
    assert "it must return True " in str(e.value) and "a bool (a comparison, True or False" in str(e.value)


# the spec, the function its error names, the first value Python gives that is no bool, and
# numba's type of what it returns
COMPUTED = [
    (specs.GivesAPair, "action IncGivesAPair", specs.inc_gives_a_pair, "(True, 0), a value of type tuple",
     "Tuple(bool, int64)"),
    (specs.InvariantCounts, "invariant room_left", specs.room_left, "4, a value of type int", "int64"),
    (specs.ConstraintCounts, "constraint below_top", specs.below_top, "3, a value of type int", "int64"),
]


@pytest.mark.parametrize("explorer", [Engine(compile="never"), Engine(compile="bytecode"), ReferenceExplorer()],
                         ids=["python tier", "bytecode tier", "reference explorer"])
@pytest.mark.parametrize("cls, function, fn, returned, _numba", COMPUTED, ids=[c[0].name for c in COMPUTED])
def test_the_tiers_that_run_python_refuse_a_computed_value(explorer, cls, function, fn, returned, _numba):
    """The Python tier and the reference explorer check every value; the bytecode tier does not
    translate a return that is no bool (a number, a field, a tuple) and leaves it to Python."""
    with pytest.raises(SpecError) as e:
        explorer.explore(_model(cls), Options(keep_going=True, threads=1))
    assert f"{function} returned {returned} {_defined(fn)}: it must return True " in str(e.value)


@pytest.mark.parametrize("cls", [specs.InvariantCounts, specs.ConstraintCounts])
def test_the_bytecode_does_not_translate_a_return_that_is_no_bool(cls):
    from kraftcheck.checker.explore.tiers import first_tier_kernels
    kernels = first_tier_kernels(_model(cls), load=False)
    assert isinstance(kernels, InterpretedKernels)
    assert "returns a value that is no bool" in kernels.why_python


@pytest.mark.parametrize("cls, function, fn, _returned, typed", COMPUTED, ids=[c[0].name for c in COMPUTED])
def test_numba_typing_refuses_a_return_type_that_is_not_boolean(cls, function, fn, _returned, typed):
    from kraftcheck.checker.typing_check import check_spec_types
    with pytest.raises(SpecError) as e:
        check_spec_types(_model(cls))
    assert f"{function} returns a value numba types as {typed} {_defined(fn)}: it must return True " in str(e.value)


@pytest.mark.parametrize("compile", ["background", "now"])
def test_a_value_numba_types_as_an_integer_is_refused_where_python_never_meets_one(compile):
    """Python's first tiers see only bools here: a run that ends in them answers only once numba's
    typing has said what the compiled kernels would return; --compile now is refused first."""
    with pytest.raises(SpecError, match="invariant x_not_past_top returns a value numba types as int64"):
        Engine(compile=compile).explore(_model(specs.IntegerOnlyWhereUnreached), Options(threads=1))
    assert Engine(compile="never").explore(_model(specs.IntegerOnlyWhereUnreached), Options()).status == "holds"


def test_compiled_kernels_are_refused_before_they_compile(tmp_path, monkeypatch):
    """``--compile now`` and simulation: numba's typing first, nothing compiled."""
    from kraftcheck.checker.explore.simulate import simulate
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path))
    model = _model(specs.GivesAPair)
    for run in (lambda: Engine(compile="now").explore(model, Options(threads=1)), lambda: simulate(model)):
        with pytest.raises(SpecError, match=r"action IncGivesAPair returns a value numba types as Tuple\(bool, int64\)"):
            run()
    assert not list(tmp_path.rglob("*.compiled")) and not list(tmp_path.rglob("*.typed"))


def test_the_spark_driver_refuses_before_it_compiles(tmp_path, monkeypatch):
    from kraftcheck.spark.explorer import _driver_kernels
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path))
    with pytest.raises(SpecError, match="invariant room_left returns a value numba types as int64"):
        _driver_kernels(_model(specs.InvariantCounts))
    assert not list(tmp_path.rglob("*.compiled"))


def test_a_typing_marker_that_did_not_check_return_types_is_not_trusted(tmp_path, monkeypatch):
    """A marker that does not say the return types were checked (an older kraftcheck's text) says
    nothing of them: the spec is typed again."""
    from kraftcheck.checker.compile import typed_marker_path
    from kraftcheck.checker.explore.compiled import kernel_shapes
    from kraftcheck.checker.explore.tiers import TypingVerdicts, type_spec_once
    from kraftcheck.checker.typing_check import typing_keys
    import numba
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path))
    model = _model(specs.InvariantCounts)
    shapes = kernel_shapes(model)
    for key in typing_keys(model):
        typed_marker_path(shapes, key).write_text(f"numba {numba.__version__}\n")
    assert not TypingVerdicts().accepted(model, shapes)
    with pytest.raises(SpecError, match="invariant room_left returns a value numba types as int64"):
        type_spec_once(model, shapes)


def test_configurations_that_differ_in_bounds_only_share_one_typing(tmp_path, monkeypatch):
    """The typing reads the fields' names and shapes, not their ranges: a run of another bound
    (its own kernels) takes the verdicts a run of the first wrote; a spec with a function of its
    own types that one alone (its invariant: the action is Counter's)."""
    from kraftcheck.checker.explore.compiled import kernel_shapes
    from kraftcheck.checker.explore.tiers import TypingVerdicts
    from kraftcheck.checker.typing_check import kernel_calls, typing_keys
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path))
    small, large = (Model(specs.Counter(specs.CounterParams(top=top))) for top in (3, 9))
    small_shapes, large_shapes = kernel_shapes(small), kernel_shapes(large)
    assert small_shapes.module_name != large_shapes.module_name  # x's range differs: kernels of their own
    TypingVerdicts().remember(TypingVerdicts().untyped(small, small_shapes), small_shapes)
    assert TypingVerdicts().accepted(large, large_shapes)
    other = _model(specs.ConstraintCounts)
    assert [key for key, _ in TypingVerdicts().untyped(other, kernel_shapes(other))] == typing_keys(other)[-1:]
    assert [what for what, _, _ in kernel_calls(other)][-1] == "constraint below_top"


def test_a_kernel_cache_that_cannot_be_written_gets_no_typing_marker(tmp_path, monkeypatch):
    """A read-only cache holding the run's kernels is used as it is: the acceptance stays in this
    process, and nothing is written there."""
    from pathlib import Path

    from kraftcheck.checker import codegen
    from kraftcheck.checker.explore.compiled import kernel_shapes
    from kraftcheck.checker.explore.tiers import TypingVerdicts
    from kraftcheck.checker.typing_check import typing_keys
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path))
    model = _model(specs.Counter)
    shapes = kernel_shapes(model)
    monkeypatch.setitem(codegen._cache_problems, Path(shapes.module_path).parent, "Read-only file system")
    verdicts = TypingVerdicts()
    verdicts.remember(verdicts.untyped(model, shapes), shapes)
    assert verdicts.accepted(model, shapes) and not TypingVerdicts().accepted(model, shapes)
    assert not list(tmp_path.rglob("*.typed"))


def test_trace_stepping_refuses_it_interpreted_and_compiled():
    from kraftcheck.traces.stepping import Stepper
    model = _model(specs.GivesAPair)
    for compiled in (False, True):
        with pytest.raises(SpecError, match=r"action IncGivesAPair returned \(True, 0\), a value of type tuple"):
            Stepper(model, compiled=compiled).step(model.initial[0], 0)


def test_the_command_line_exits_2_with_the_function_and_writes_no_trace_and_a_report_saying_error(tmp_path):
    report, traces = tmp_path / "report.json", tmp_path / "traces"
    env = dict(os.environ, KRAFTCHECK_CACHE_DIR=str(tmp_path / "cache"), NO_COLOR="1")
    run = subprocess.run([sys.executable, "-m", "kraftcheck", "check", "--spec", f"{SPECS_FILE}:GivesAPair",
                          "--threads", "1", "--json", str(report), "--trace-dir", str(traces)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "action IncGivesAPair" in run.stderr and f"{SPECS_FILE}:" in run.stderr, run.stderr
    assert "hold" not in run.stdout and "distinct" not in run.stdout + run.stderr
    assert not traces.exists()
    said = json.loads(report.read_text())  # no verdict, no count: its error, as the last line gives it
    assert said["result"] == "error" and "action IncGivesAPair" in said["error"] and "distinct_states" not in said


JIT_DISABLED_RUN = """
import sys
sys.path.insert(0, {tests!r})
import return_value_specs as specs
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
for name in ("GivesAPair", "InvariantCounts", "ConstraintCounts"):
    cls = getattr(specs, name)
    try:
        result = Engine(compile="now").explore(Model(cls(cls.Params())), Options(keep_going=True, threads=1))
        print(name, "gave", result.status)
    except SpecError as e:
        print(name, "refused:", e)
"""


def test_with_numba_disabled_the_compiled_kernels_check_each_value(tmp_path):
    """NUMBA_DISABLE_JIT=1 runs the spec's functions as Python (the interpreted tier), where no
    typing sees the returns: each value is checked there."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", KRAFTCHECK_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-c", JIT_DISABLED_RUN.format(tests=os.path.dirname(SPECS_FILE))],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    said = run.stdout.splitlines()
    assert len(said) == len(COMPUTED), run.stdout
    for line, (cls, function, fn, returned, _numba) in zip(said, COMPUTED):
        # the values as the interpreted tier gives them
        assert line.startswith(f"{cls.__name__} refused: {function} returned ") and \
            f" {_defined(fn)}: it must return " in line, line


@pytest.mark.parametrize("explorer", [Engine(compile="never"), Engine(compile="bytecode"), ReferenceExplorer(),
                                      Engine(compile="now")],
                         ids=["python tier", "bytecode tier", "reference explorer", "compiled"])
def test_a_spec_that_returns_bools_numpys_included_runs_alike_everywhere(explorer):
    """Counter's invariant gives numpy's bool as Python (an array element compared)."""
    result = explorer.explore(_model(specs.Counter), Options(keep_going=True, threads=1))
    assert (result.status, result.distinct_states, result.depth) == ("holds", 4, 4)
