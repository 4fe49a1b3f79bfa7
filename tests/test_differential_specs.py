"""The explorers agree with the reference explorer on generated specs (tests/spec_generator.py).

A handful of fixed seeds, chosen so that together they use the whole grammar: the bytecode and
interpreted first tiers on each, the compiled kernels on one (a compile costs seconds), and
--symmetry where the spec declares one. bench/fuzz_explorers.py runs the same comparison, with
every other explorer, over as many seeds as one likes.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
import spec_generator

from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class

SEEDS = [379, 390, 72, 302, 229]
COMPILED_SEED = 379  # symmetric, two words a state, most of the grammar
REDUCED_SEED = 379  # a symmetric one whose orbits are fewer than its states

# what each part of the grammar looks like in a generated spec's source (not in the helpers every spec has)
GRAMMAR = {
    "a negative range": r'Int\("\w+", -\d',
    "an enumeration": r"Enum\(",
    "a set": r"Set\(",
    "an array of two axes": r", \(\d, \d\)",
    "a per-run setting": r"Const\(",
    "a field tens of bits wide": r"LO_WIDE\d = ",
    "a state constraint": r'Constraint\("Within',
    "an action constraint": r'ActionConstraint\("',
    "a transition property": r'TransitionProperty\("',
    "a symmetry": "def symmetry",
    "a set of processes": r'Set\("members"',
    "a process named by a value": r'Enum\("leader"',
    "a deadlock check": "check_deadlock = True",
    "a loop": r"for i in range\((len\(s\.|s\.|\d)",
    "a numpy method": r"\.(sum|max|min)\(\)",
    "modulo": r" % -?\d\)",
    "floor division": r" // -?\d\)",
    "a helper returning a tuple": r"split\(.*\)\[",
    "a conditional expression": r"\) if .* else ",
    "a write guarded by its domain": r"return False\n    w\d = ",
    "an index computed": r"\) % \d\]",
}


@pytest.fixture(scope="module")
def specs():
    """The seeds' specs, in a folder that outlives the run: a file left unchanged keeps its
    compiled kernels in the cache, so only the first run pays the compile."""
    folder = Path(tempfile.gettempdir()) / f"kraftcheck-generated-specs-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return {seed: spec_class(spec_generator.write(seed, folder)) for seed in SEEDS}


def _model(specs, seed):
    cls = specs[seed]
    return Model(cls(cls.Params()))


def test_the_seeds_cover_the_grammar():
    """Together the fixed seeds use every part of the grammar, and a generated spec is the same
    text for the same seed."""
    sources = [spec_generator.generate(seed) for seed in SEEDS]
    missing = [part for part, pattern in GRAMMAR.items() if not any(re.search(pattern, s) for s in sources)]
    assert missing == []
    assert {spec_generator.is_symmetric(seed) for seed in SEEDS} == {True, False}
    assert spec_generator.generate(SEEDS[0]) == sources[0] != sources[1]


@pytest.mark.parametrize("keep_going", [True, False], ids=["continue", "first-violation"])
@pytest.mark.parametrize("seed", SEEDS)
def test_the_first_tiers_agree_with_the_reference(specs, seed, keep_going):
    options = Options(keep_going=keep_going)
    expected = ReferenceExplorer().explore(_model(specs, seed), options).agreed()
    assert 30 <= expected["distinct"] <= 3000 or not keep_going  # a space worth comparing, quickly
    for compile in ("bytecode", "never"):
        assert Engine(compile=compile).explore(_model(specs, seed), options).agreed() == expected, compile


@pytest.mark.parametrize("seed", [s for s in SEEDS if spec_generator.is_symmetric(s)])
def test_symmetry_agrees_with_the_reference(specs, seed):
    options = Options(keep_going=True, symmetry=True)
    expected = ReferenceExplorer().explore(_model(specs, seed), options).agreed()
    if seed == REDUCED_SEED:
        states = ReferenceExplorer().explore(_model(specs, seed), Options(keep_going=True)).distinct_states
        assert expected["distinct"] < states
    assert Engine(compile="bytecode").explore(_model(specs, seed), options).agreed() == expected


def test_the_compiled_kernels_agree_with_the_reference(specs):
    """One compile serves every run: complete, first violation, and --symmetry."""
    engine = Engine(compile="now")
    for options in (Options(keep_going=True), Options(), Options(keep_going=True, symmetry=True)):
        expected = ReferenceExplorer().explore(_model(specs, COMPILED_SEED), options).agreed()
        assert engine.explore(_model(specs, COMPILED_SEED), options).agreed() == expected, options


# Found by the fuzzer (seed 4 of its first campaign), made small: two initial states, both violating the
# invariant, the second outside the state constraint.
FIRST_INITIAL_STATE_VIOLATES = '''
from dataclasses import dataclass

from numba import njit

from kraftcheck import Action, Constraint, Int, Invariant, Spec, param


@njit(cache=True)
def stay(s, t):
    return True


@njit(cache=True)
def never(s):
    return s.x < 0


@njit(cache=True)
def small(s):
    return s.x == 0


@dataclass(frozen=True)
class TwoStartsParams:
    scale: int = param(1, "unused", minimum=1, maximum=1)


class TwoStarts(Spec):
    name = "two_starts"
    Params = TwoStartsParams
    check_deadlock = False

    def fields(self):
        return [Int("x", 1)]

    def initial_states(self):
        yield {"x": 0}
        yield {"x": 1}

    def actions(self):
        return [Action("Stay", stay)]

    def invariants(self):
        return [Invariant("never", never)]

    def constraints(self):
        return [Constraint("small", small)]
'''


def test_a_run_stops_at_the_first_violating_initial_state(tmp_path):
    path = tmp_path / "two_starts.py"
    path.write_text(FIRST_INITIAL_STATE_VIOLATES)
    cls = spec_class(f"{path}:TwoStarts")
    expected = ReferenceExplorer().explore(Model(cls(cls.Params())), Options())
    assert (expected.states_generated, expected.violations[0].steps[-1].state) == (1, (0,))
    got = Engine(compile="bytecode").explore(Model(cls(cls.Params())), Options())
    assert (got.states_generated, got.violations[0].steps[-1].state) == (1, (0,))


# Found by the fuzzer's simulation check, made small: the initial state violates one invariant,
# its successors another.
TWO_CHECKS = '''
from dataclasses import dataclass

from numba import njit

from kraftcheck import Action, Int, Invariant, Spec, param


@njit(cache=True)
def count(s, t):
    if s.x == 3:
        return False
    t.x = s.x + 1
    return True


@njit(cache=True)
def started(s):
    return s.x != 0


@njit(cache=True)
def below_two(s):
    return s.x < 2


@dataclass(frozen=True)
class TwoChecksParams:
    scale: int = param(1, "unused", minimum=1, maximum=1)


class TwoChecks(Spec):
    name = "two_checks"
    Params = TwoChecksParams
    check_deadlock = False

    def fields(self):
        return [Int("x", 3)]

    def initial_states(self):
        yield {}

    def actions(self):
        return [Action("Count", count)]

    def invariants(self):
        return [Invariant("started", started), Invariant("below_two", below_two)]
'''


def test_a_continued_simulation_finds_what_lies_past_a_violation(tmp_path):
    from kraftcheck.checker.explore.simulate import SimulationOptions, simulate
    path = tmp_path / "two_checks.py"
    path.write_text(TWO_CHECKS)
    cls = spec_class(f"{path}:TwoChecks")
    searched = ReferenceExplorer().explore(Model(cls(cls.Params())), Options(keep_going=True))
    assert sorted(v.check for v in searched.violations) == ["below_two", "started"]
    simulated = simulate(Model(cls(cls.Params())), SimulationOptions(seed=1, depth=5, max_behaviours=50,
                                                                     keep_going=True), compile="never")
    assert sorted(v.check for v in simulated.violations) == ["below_two", "started"]
