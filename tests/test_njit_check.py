"""A spec function or helper without @njit is named, with its file and line, before anything
runs (``checker.njit_check``), rather than as numba's error in a generated file after the
interpreted tier has run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.model import Model

SPEC = '''
from dataclasses import dataclass

from numba import njit
from kraftcheck import Action, Int, Invariant, Spec


@dataclass(frozen=True)
class CounterParams:
    pass


{helper_decorator}
def bump(x):
    return x + 1


{action_decorator}
def step(s, t):
    if s.n >= 3:
        return False
    t.n = bump(s.n)
    return True


@njit(cache=True)
def small(s):
    return s.n <= 3


class Counter(Spec):
    name = "counter"
    Params = CounterParams

    def fields(self):
        return [Int("n", 4)]

    def initial_states(self):
        yield {{"n": 0}}

    def actions(self):
        return [Action("Step", step)]

    def invariants(self):
        return [Invariant("small", small)]
'''


def _spec_file(tmp_path: Path, action: str, helper: str) -> Path:
    path = tmp_path / "counter_spec.py"
    path.write_text(SPEC.format(action_decorator=action, helper_decorator=helper))
    return path


def _load(path: Path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"counter_spec_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Counter


def test_an_action_without_njit_is_named_with_its_file_and_line(tmp_path):
    path = _spec_file(tmp_path, action="", helper="@njit(cache=True)")
    with pytest.raises(SpecError, match=rf"action Step of spec counter \({path}:\d+\) is a plain Python function: "
                                        r"decorate it with @njit\(cache=True\)"):
        Model(_load(path)())


def test_a_helper_without_njit_is_named_with_its_file_and_line(tmp_path):
    path = _spec_file(tmp_path, action="@njit(cache=True)", helper="")
    with pytest.raises(SpecError, match=rf"action Step of spec counter calls bump \({path}:\d+\) from step, a plain "
                                        r"Python function: decorate bump with @njit\(cache=True\) too"):
        Model(_load(path)())


def test_a_spec_whose_functions_are_compiled_passes(tmp_path):
    """The check refuses nothing it should take: with both decorated, the model is built and runs
    (as Python here: the reference explorer compiles nothing). Its invariant holds on n = 0..3;
    n = 3, with no successor and no terminal states declared, is its one violation, a deadlock."""
    model = Model(_load(_spec_file(tmp_path, action="@njit(cache=True)", helper="@njit(cache=True)"))())
    assert [a.name for a in model.actions] == ["Step"]
    result = ReferenceExplorer().explore(model)
    assert result.distinct_states == 4 and [v.check for v in result.violations] == ["deadlock"]


def test_the_command_line_says_it_in_one_line_with_exit_2_before_exploring(tmp_path):
    path = _spec_file(tmp_path, action="@njit(cache=True)", helper="")
    out = subprocess.run([str(Path(sys.executable).parent / "kraftcheck"), "check", "--spec", f"{path}:Counter"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "decorate bump with @njit(cache=True) too" in out.stderr
    assert "Traceback" not in out.stderr and "distinct" not in out.stdout


def test_a_module_level_list_an_action_reads_is_named_before_anything_runs(tmp_path):
    """Python reads a module-level list, numba cannot freeze one: without this check the
    interpreted tier would explore a small model to its end and the compiled tier refuse it."""
    path = tmp_path / "counter_spec.py"
    path.write_text(SPEC.format(action_decorator="@njit(cache=True)", helper_decorator="@njit(cache=True)")
                    .replace("    t.n = bump(s.n)", "    t.n = bump(s.n) + STEP[0] - 1")
                    .replace("@dataclass(frozen=True)", "STEP = [1]\n\n\n@dataclass(frozen=True)"))
    with pytest.raises(SpecError, match=rf"action Step of spec counter reads the module-level list STEP in step "
                                        rf"\({path}:\d+\): numba freezes .* make STEP a tuple"):
        Model(_load(path)())
