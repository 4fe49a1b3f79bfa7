"""Who is at fault when a spec's function cannot be called as the kernels call it: the spec, when
its function's parameters do not fit what every tier hands it (refused when the model is built);
kraftcheck, when numba cannot bind a call a kernel module it generated makes, which numba's
message places by its arguments only (compile.compile_error)."""

from __future__ import annotations

import importlib.util
import inspect
import re

import numba
import pytest

import return_value_specs as specs
from kraftcheck.checker.compile import compile_error
from kraftcheck.checker.errors import KraftcheckBug, SpecError
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Action, Constraint, Invariant, Param

SPECS_FILE = inspect.getsourcefile(specs)


@pytest.mark.parametrize("cls, said", [
    (specs.UndeclaredParameter, "action IncBy ({file}:{line}) cannot be called as every tier calls it, inc_by(s, t) "
                                "(missing a required argument: 'step'; its declared parameters: none): an action takes "
                                "the state s, the successor t and one argument per Param it declares"),
    (specs.StepAsInvariant, "invariant x_never_drops ({file}:{line}) cannot be called as every tier calls it, "
                            "x_never_drops(s) (missing a required argument: 't'): "),
])
def test_a_function_whose_parameters_do_not_fit_its_calls_is_refused_when_the_model_is_built(cls, said):
    fn = specs.inc_by if cls is specs.UndeclaredParameter else specs.x_never_drops
    with pytest.raises(SpecError) as e:
        Model(cls(cls.Params()))
    assert said.format(file=SPECS_FILE, line=fn.py_func.__code__.co_firstlineno) in str(e.value)


@pytest.mark.parametrize("params", [Param("step", 3), "step", (Param("step", 3), 3)],
                         ids=["one Param", "a name", "a number among them"])
def test_an_actions_params_not_a_sequence_of_params_is_refused_where_it_is_declared(params):
    """``Action("IncBy", fn, Param("step", 3))``, a Param where a tuple of them belongs, was an
    internal error (a TypeError) once the model was built; the declaration itself now says what to
    write (the command line adds the spec's line: ``kraftcheck check`` exits 2)."""
    with pytest.raises(SpecError, match=r"^action IncBy: params is .*; give a tuple of Param, one for each parameter "
                                        r"after \(s, t\): params=\(Param\("):
        Action("IncBy", specs.inc_by, params)
    assert Action("IncBy", specs.inc_by, [Param("step", 3)]).params == (Param("step", 3),)


@pytest.mark.parametrize("make, message", [
    (lambda: Param("step", -1), r"^action parameter step: count must be a whole number of values \(0\.\.count-1\), "
                                r"got -1$"),
    (lambda: Param("step", 2.0), r"count must be a whole number of values .*got 2\.0$"),
    (lambda: Param("step", True), r"count must be a whole number of values .*got True$"),
    (lambda: Param("step", 3, ("one", "two")), r"^action parameter step: labels must name each of its 3 values, "
                                               r"got 2: \('one', 'two'\)$"),
    (lambda: Param("step", 1, ("one")), r"^action parameter step: labels is the string 'one', which would be read as "
                                        r"the names 'o', 'n', 'e'; give a tuple of names: \('one',\) for one"),
])
def test_a_param_whose_count_or_labels_do_not_fit_is_refused_where_it_is_declared(make, message):
    """A count of 2.0 was an internal error (TypeError) once the model was built, a negative one an
    action with no instance, warned about as never enabled; labels that name fewer values than the
    count were an internal error (IndexError) as a counterexample through an unnamed value was
    written, and a string of labels gave each of its letters to a value."""
    with pytest.raises(SpecError, match=message):
        make()
    assert Param("step", 2, ["one", "two"]).labels == ("one", "two")
    assert Param("step", 0).count == 0  # no value: an action with no instance, warned about as never enabled


@pytest.mark.parametrize("make, message", [
    (lambda: Action(specs.inc_by, "IncBy"), r"^action 'inc_by': the name comes first, then the function: "
                                           r"Action\(\"Name\", fn, \(Param\(\"i\", 3\),\)\), not CPUDispatcher, str$"),
    (lambda: Invariant(specs.inc_by, "Fine"), r"^invariant 'inc_by': the name comes first, then the function: "
                                             r"Invariant\(\"Name\", fn\), not CPUDispatcher, str$"),
    (lambda: Constraint("Inside", None), r"^constraint 'Inside': the name comes first, then the function"),
    (lambda: Action("IncBy", specs.inc_by, (Param("step", 3), Param("step", 2))),
     r"^action IncBy: two of its parameters are named 'step'; give each its own name$"),
])
def test_a_declaration_with_its_name_and_function_swapped_or_a_parameter_named_twice_is_refused(make, message):
    """``Invariant(ok, "Ok")`` was refused as "invariant CPUDispatcher(<function ok ...>) ... is a
    plain Python function", ``Action(fn, "Name")`` an internal error (AttributeError); two
    parameters of one name ran, and a trace, which shows each value by its parameter's name, lost
    one of them."""
    with pytest.raises(SpecError, match=message):
        make()


CALLER = '''
from numba import njit


def two(a, b):
    return a + b


inlined_two = njit(inline="always")(two)


@njit
def kernel(a):
    return inlined_two(a)
'''


def _unbindable_call(directory, name: str) -> numba.core.errors.TypingError:
    """numba's own refusal of an inlined call with an argument missing, made in module ``name``."""
    path = directory / name
    path.write_text(CALLER)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(numba.core.errors.TypingError) as e:
        module.kernel(1)
    assert "Cannot bind" in str(e.value) and 'File "' not in str(e.value)  # what this test is about
    return e.value


def test_an_unbindable_call_in_a_generated_kernel_module_is_kraftcheck_s_bug(tmp_path, monkeypatch):
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    from kraftcheck.checker.codegen import cache_dir
    name = "kc_counter_action_Inc_0123456789abcdef0123.py"  # a generated module's name
    error = compile_error("counter", _unbindable_call(tmp_path, name))
    assert isinstance(error, KraftcheckBug)
    assert re.match(rf"kraftcheck's own kernel code failed to compile at {re.escape(str(cache_dir() / name))}:\d+ \(a "
                    r"kernel module kraftcheck generated\), compiling the kernels of spec counter: Cannot bind", str(error))
    assert "this is a bug of kraftcheck's, not of the spec (no verdict): please report it" in str(error)


def test_an_unbindable_call_elsewhere_says_whose_it_is_cannot_be_told(tmp_path):
    error = compile_error("counter", _unbindable_call(tmp_path, "helpers_of_mine.py"))
    assert type(error) is SpecError
    assert re.search(r"; numba names only where the arguments of a call it could not bind come from, "
                     r"helpers_of_mine\.py:\d+ \(no folder\), so whose code it is cannot be told \(no verdict\): a "
                     r"spec's functions keep to what both tiers run", str(error))
    assert "if the spec's do, it is kraftcheck's bug: please report it" in str(error)
    assert "fix that line" not in str(error)
