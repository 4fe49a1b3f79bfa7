"""The interpreted tier and the compiled tier accept and reject the same specs and compute the
same states (issue 31 item 6): every shipped spec and specs written the ways an author may write
them (tests/odd_specs.py), run on both tiers (and some on the reference explorer)."""

from __future__ import annotations

import re

import pytest

from kraftcheck.checker.errors import SpecError, UsageError
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model

import odd_specs
from odd_specs import (AddsAString, Grid, GridParams, Levels, LevelsParams, Overflowing, Tally, TallyParams,
                       Underflowing)

EXPLORERS = {"compiled": lambda: Engine(compile="now"), "interpreted": lambda: Engine(compile="never"),
             "bytecode": lambda: Engine(compile="bytecode"), "reference": lambda: ReferenceExplorer()}


def _summary(r):
    return (r.status, r.distinct_states, r.states_generated, r.depth, r.coverage(),
            [(v.check, [s.label for s in v.steps]) for v in r.violations])


@pytest.mark.parametrize("n", [1, 2])
def test_two_axis_writes_and_reads_give_the_same_states_on_every_tier(n):
    """``t.grid[i, j] = True`` and ``s.grid[i][j - 1]``: numpy's index and nested ones. The
    interpreted tier crashed on the first (a list takes no tuple index)."""
    runs = {name: make().explore(Model(Grid(GridParams(n))), Options(keep_going=True)) for name, make in EXPLORERS.items()}
    summaries = {name: _summary(r) for name, r in runs.items()}
    assert summaries["interpreted"] == summaries["bytecode"] == summaries["compiled"] == summaries["reference"]
    assert [v.check for v in runs["compiled"].violations] == ["never_a_full_grid"]
    # rows fill left to right: 4 row states each (0-3 cells set), a full grid the violation
    assert runs["compiled"].distinct_states == 4 ** n


def _defined(spec) -> str:
    """Where the refusal says the spec's (only) action is: its function's file and first line."""
    code = spec.actions()[0].fn.py_func.__code__
    return re.escape(f" (action Overflow at {code.co_filename}:{code.co_firstlineno})")


@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_a_write_outside_a_fields_domain_is_refused_by_every_tier(name):
    """In the same words on every tier: the step, the element, its domain, what to do and where
    the action is (the file and line were missing: they cost nothing until a value is refused)."""
    spec = Overflowing(GridParams(1))
    with pytest.raises(SpecError, match=r"^after Overflow: field marked = 4 is outside its domain 0\.\.3: widen the "
                                        r"field's range in fields\(\), or make the action's guard keep it inside"
                                        rf"{_defined(spec)}$"):
        EXPLORERS[name]().explore(Model(spec), Options(keep_going=True))


@pytest.mark.parametrize("name", sorted(EXPLORERS))
@pytest.mark.parametrize("spec, value", [(odd_specs.OverflowingPast32Bits, 4294967297),
                                         (odd_specs.OverflowingToTheSignBit, 2147483648)])
def test_a_write_past_the_int32_range_is_refused_as_written_by_every_tier(name, spec, value):
    """The compiled successors hold 64-bit elements, so a value computed past 32 bits reaches the
    domain check as the action computed it: refused, with the same number, on every tier (with
    32-bit elements 4294967297 wrapped to 1 and was accepted compiled)."""
    with pytest.raises(SpecError, match=rf"^after Overflow: field marked = {value} is outside its domain 0\.\.3: "
                                        rf".*{_defined(spec(GridParams(1)))}$"):
        EXPLORERS[name]().explore(Model(spec(GridParams(1))), Options(keep_going=True))


@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_code_numba_cannot_compile_is_refused_by_every_tier_naming_its_line(name):
    """``s.marked + "1"``: the interpreted tiers meet Python's TypeError, the compiled one numba's
    typing error; each is one message naming the spec's line (not a traceback, not a line of a
    generated kernel module), so no tier accepts what another refuses."""
    import odd_specs
    line = next(i for i, text in enumerate(open(odd_specs.__file__), 1) if 's.marked + "1"' in text)
    said = {"compiled": r"the kernels of spec adds_a_string failed to compile at \S*odd_specs\.py:%d: No implementation",
            "interpreted": r"action MarkWithAString raised TypeError: .* at \S*odd_specs\.py:%d; ",
            "bytecode": r"action MarkWithAString raised TypeError: .* at \S*odd_specs\.py:%d; ",
            "reference": r"action MarkWithAString raised TypeError: .* at \S*odd_specs\.py:%d; "}[name] % line
    with pytest.raises(SpecError, match=said):
        EXPLORERS[name]().explore(Model(AddsAString(GridParams(1))), Options())


def test_numpy_array_methods_slices_and_operators_give_the_same_states_on_every_tier():
    """``s.c.sum()``, ``s.g[:, j].any()``, ``(s.c == 2).all()``, ``s.c.copy()``, ``t.g[:, j] = 1``:
    numba compiles them; the interpreted tier and the reference explorer refused them when a
    field was a list (an array method, a slice across axes), and a run that ended before its
    compile was refused where ``--compile now`` answered."""
    runs = {name: make().explore(Model(Tally(TallyParams())), Options(keep_going=True))
            for name, make in EXPLORERS.items()}
    summaries = {name: _summary(r) for name, r in runs.items()}
    assert summaries["interpreted"] == summaries["bytecode"] == summaries["compiled"] == summaries["reference"]
    # 27 counter vectors (total their sum) times 4 grids (columns raised left to right); the
    # full grid is the violation
    assert runs["compiled"].distinct_states == 27 * 4
    assert [v.check for v in runs["compiled"].violations] == ["grid_never_full"]


def _levels_count(n: int) -> int:
    """Levels' reachable states, counted by hand: every temperature vector in -2..2, and with it
    every ``lowest`` from -2 up to the coldest of 0 and the temperatures (cool a room to the
    wanted low, then heat it back)."""
    import itertools
    return sum(min(0, *temps) + 2 + 1 for temps in itertools.product(range(-2, 3), repeat=n))


@pytest.mark.parametrize("padded", [False, True], ids=["unrolled", "table"])
@pytest.mark.parametrize("n", [1, 2])
def test_negative_values_are_read_written_and_counted_alike_on_every_tier(n, padded):
    """``Int("temp", -2, 2)``: an action writes -1 and reads -1 on every tier, whether the layout
    packs by unrolled code or (padded past 32 elements) by its table."""
    spec = Levels(LevelsParams(n, padded))
    runs = {name: make().explore(Model(spec), Options(keep_going=True)) for name, make in EXPLORERS.items()}
    summaries = {name: _summary(r) for name, r in runs.items()}
    assert summaries["interpreted"] == summaries["bytecode"] == summaries["compiled"] == summaries["reference"]
    assert runs["compiled"].distinct_states == _levels_count(n) == {1: 12, 2: 50}[n]
    assert [v.check for v in runs["compiled"].violations] == ["never_at_the_floor"]
    # the shortest way to the floor: cool one room twice
    assert len(runs["compiled"].violations[0].steps) == 3


@pytest.mark.parametrize("padded", [False, True], ids=["unrolled", "table"])
@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_a_write_below_a_negative_range_is_refused_by_every_tier(name, padded):
    with pytest.raises(SpecError, match=r"^after CoolPastTheFloor\(i=0\): field temp\[r1\] = -3 is outside its domain "
                                        r"-2\.\.2: widen"):
        EXPLORERS[name]().explore(Model(Underflowing(LevelsParams(1, padded))), Options(keep_going=True))


def test_integer_arithmetic_gives_pythons_results_on_every_tier():
    """Floor division and modulo of negatives, a negative divisor, a product past 32 bits, an
    arithmetic shift: the compiled tier's int32 fields and numba's integers, the interpreted
    tiers' Python ints and int64 arrays, and Python's own results (the spec's invariant holds a
    table of them) agree on every reachable state."""
    runs = {name: make().explore(Model(odd_specs.Arithmetic(odd_specs.ArithmeticParams())), Options(keep_going=True))
            for name, make in EXPLORERS.items()}
    summaries = {name: _summary(r) for name, r in runs.items()}
    assert summaries["interpreted"] == summaries["bytecode"] == summaries["compiled"] == summaries["reference"]
    assert runs["compiled"].status == "holds" and runs["compiled"].distinct_states == 15


@pytest.mark.parametrize("padded", [False, True], ids=["unrolled", "table"])
@pytest.mark.parametrize("helper", [False, True], ids=["writes-read", "writes-unknown"])
@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_an_action_that_writes_and_declines_is_refused_by_every_tier(name, helper, padded):
    """``t.temp[i] = -2`` before a guard that returns False: the compiled kernels had started the
    next instance from the written successor and answered (a wrong answer) where the interpreted
    tiers refused. Whether the kernel compares the elements the action writes (read from its
    source) or the whole successor (written in a helper), and with either packing."""
    cls = odd_specs.DeclinesAfterWritingInAHelper if helper else odd_specs.DeclinesAfterWriting
    with pytest.raises(SpecError, match=r"^\S+odd_specs\.py:\d+: action Drop\(i=0\) changed the successor but returned False: an action "
                                        r"that does not fire must leave t as it found it"):
        EXPLORERS[name]().explore(Model(cls(LevelsParams(1, padded))), Options(keep_going=True))


# ----------------------------------------------------------------------------------------------
# One answer whatever tier runs: the default run (``--compile background``) that ends while it
# still interprets, against a run compiled first (``--compile now``)

# (spec, parameters, whether the run goes on after a violation): every shipped spec at the
# parameters of its first conformance example, and the odd ones
SHIPPED = {"two_phase": ({"rm": 2}, True), "two_phase_eager_commit": ({"rm": 2}, False), "die_hard": ({}, True),
           "mutex": ({}, True), "kafka": ({}, False)}
ODD = {
    "multi-axis writes": (lambda: Grid(GridParams(2)), True),
    "out-of-domain write": (lambda: Overflowing(GridParams(1)), True),
    "out-of-domain write past 32 bits": (lambda: odd_specs.OverflowingPast32Bits(GridParams(1)), True),
    "out-of-domain write below a negative range": (lambda: Underflowing(LevelsParams(1, False)), True),
    "numpy array methods, slices and operators": (lambda: Tally(TallyParams()), True),
    "a str added to a field": (lambda: AddsAString(GridParams(1)), False),
    "a Python-only method": (lambda: odd_specs.PythonOnlyMethod(GridParams(1)), False),
    "string formatting in an invariant": (lambda: odd_specs.FormatsAString(GridParams(1)), False),
    "a structured state's field by name": (lambda: odd_specs.FieldByName(GridParams(1)), True),
    "a structured state's field by name in an action and a constraint": (lambda: odd_specs.FieldByNameLater(GridParams(2)), True),
    "missing @njit on an action": (lambda: odd_specs.MissingNjit(GridParams(1)), False),
    "a helper without @njit": (lambda: odd_specs.PlainHelper(GridParams(1)), False),
    "integer arithmetic": (lambda: odd_specs.Arithmetic(odd_specs.ArithmeticParams()), True),
    "an action that writes and declines": (lambda: odd_specs.DeclinesAfterWriting(LevelsParams(1, False)), True),
}


def test_every_shipped_spec_is_run_on_both_tiers():
    from kraftcheck.specs import REGISTRY
    assert sorted(SHIPPED) == sorted(REGISTRY), "a shipped spec is missing from test_two_tiers.SHIPPED"


def _spec(case):
    if case in SHIPPED:
        from kraftcheck.specs import spec_class
        cls = spec_class(case)
        params = dict(cls.examples[0], **SHIPPED[case][0]) if case != "kafka" else dict(cls.examples[0])
        return cls(cls.Params(**params)), SHIPPED[case][1]
    make, keep_going = ODD[case]
    return make(), keep_going


def _outcome(case, tier):
    """What a run of ``case`` on ``tier`` answers: its counts, or the class and words of its error."""
    try:
        spec, keep_going = _spec(case)
        model = Model(spec)
        engine = Engine(compile="now" if tier == "compiled" else "background")
        result = engine.explore(model, Options(keep_going=keep_going))
    except (SpecError, UsageError) as e:
        return ("refused", type(e).__name__, str(e)), None
    return ("answered",) + _summary(result), result


class CompileWhenWaitedFor:
    """Stands in for ``BackgroundCompile`` (whose process would cost each case a second or two
    of starting): its kernels are never ready unless the run waits for them, then they are
    compiled here (loaded: the compiled run has put them in the cache). tests/test_compile_tiers.py
    runs the real one."""

    def __init__(self, forms):
        self.forms = [forms] if not isinstance(forms, list) else forms
        self.shapes, self.ready, self.status, self.elapsed = self.forms[-1], {}, "scripted", 0.0
        self.finished_s, self.left_running, self.waited = None, False, False

    def ready_form(self):
        from kraftcheck.checker.compile import compile_in_process
        if self.waited and not self.ready:
            compile_in_process(self.shapes, processes=1)
            self.ready[self.shapes.module_name] = 0.0
        return self.shapes if self.ready else None

    def failed(self):
        return False

    def hurry(self):  # the run waits for the compile from now on
        self.waited = True

    def stop(self, keep=None):
        pass


@pytest.mark.parametrize("case", list(SHIPPED) + list(ODD))
def test_one_answer_whatever_tier_runs(case, monkeypatch):
    """The default run ending while it still interprets (its kernels not compiled yet), and a run
    compiled first, give one answer: the same counts, coverage, violations and traces; or the
    same error in the same words (code numba refuses: numba's compile error naming the spec's
    line, whichever tier ran it)."""
    from kraftcheck.checker.explore import tiers
    compiled, _ = _outcome(case, "compiled")
    monkeypatch.setenv("KRAFTCHECK_INTERPRET_S", "60")
    # the kernels just compiled are taken for not compiled, and their compile for one that is
    # ready only once the run waits for it (the engine starts both itself)
    monkeypatch.setattr(tiers, "is_compiled", lambda shapes: False)
    monkeypatch.setattr(tiers, "BackgroundCompile", CompileWhenWaitedFor)
    interpreted, run = _outcome(case, "interpreted")
    assert interpreted == compiled
    if run is not None:
        assert run.compiled_in_background
        if case == "a structured state's field by name":  # the interpreted tier's states take no s["name"]:
            assert run.interpreted_states == 0 and run.compile_s is not None  # the first check went compiled
        elif case.startswith("a structured state's field by name"):  # the first levels interpreted, then compiled
            assert 0 < run.interpreted_states < run.distinct_states and run.compile_s is not None
        else:
            assert run.interpreted_states > 0 and run.compile_s is None, "the run should have ended interpreting"
            # it answered on numba's acceptance, typed now or kept from an earlier run (test below): numba
            # accepts the spec's functions (a refusal is never kept, so the run typed every refused case)
            from kraftcheck.checker.typing_check import check_spec_types
            check_spec_types(Model(_spec(case)[0]))


class Typings(RunObserver):
    """Counts the times a run had numba type the spec's functions."""

    def __init__(self):
        self.count = 0

    def typing_spec(self):
        self.count += 1


RECURSIVE_SPEC = '''
from numba import njit
from kraftcheck import Action, Int, Invariant, Spec
from odd_specs import GridParams


@njit(cache=True)
def triangle(k):
    if k <= 0:
        return 0
    return k + triangle(k - 1)


@njit(cache=True)
def step(s, t):
    if triangle(s.x + 1) > 6:
        return False
    t.x = s.x + 1
    return True


@njit(cache=True)
def within_six(s):
    return triangle(s.x) <= 6


class RecursiveHelper(Spec):
    name = "recursive_helper"
    Params = GridParams
    check_deadlock = False

    def fields(self):
        return [Int("x", 4)]

    def initial_states(self):
        yield {"x": 0}

    def actions(self):
        return [Action("Step", step)]

    def invariants(self):
        return [Invariant("WithinSix", within_six)]
'''


def test_a_recursive_helper_is_typed_and_compiled_as_numba_compiles_it(tmp_path, monkeypatch):
    """A helper that calls itself, which numba compiles (the recursive call typed from the frame
    being typed), is accepted by the check of numba's typing, and every tier gives the reference
    explorer's answer. The check typed the helper outside its dispatcher, so its recursive call
    compiled it again from inside its own typing (when numba's cache did not hold it), which
    numba refused: "compiler re-entrant to the same function signature", no line named, "if the
    spec's do, it is kraftcheck's bug"."""
    import importlib
    from kraftcheck.checker.typing_check import check_spec_types
    name = f"recursive_spec_{abs(hash(str(tmp_path)))}"  # a new module: numba's cache holds none of it
    (tmp_path / f"{name}.py").write_text(RECURSIVE_SPEC)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    check_spec_types(Model(module.RecursiveHelper(GridParams(1))))
    answers = {name: _summary(make().explore(Model(module.RecursiveHelper(GridParams(1))), Options()))
               for name, make in EXPLORERS.items()}
    assert len(set(map(repr, answers.values()))) == 1, answers
    assert answers["reference"][1] == 4  # x = 0..3


def test_a_spec_typed_once_is_not_typed_again_for_the_same_fields(monkeypatch, tmp_path):
    """The type inference's acceptance is kept in the kernel cache (under a digest of the spec's
    sources and of its fields' names and shapes) and in the process: the next run of the same spec
    version and fields that ends while interpreting answers without typing again, and a new
    process (a new ``TypingVerdicts``) knows it from the file; a refusal is never kept."""
    from kraftcheck.checker.explore import tiers
    from kraftcheck.checker.explore.compiled import kernel_shapes
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KRAFTCHECK_INTERPRET_S", "60")
    monkeypatch.setattr(tiers, "BackgroundCompile", CompileWhenWaitedFor)
    grid = Model(Grid(GridParams(3)))  # three rows: a grid no other test runs, so not typed in this process yet
    refused = Model(odd_specs.PythonOnlyMethod(GridParams(1)))
    typed = []
    for _ in range(2):
        typings = Typings()
        assert Engine(compile="background").explore(grid, Options(), observer=typings).interpreted_states > 0
        typed.append(("grid", typings.count))
        typings = Typings()
        with pytest.raises(SpecError, match="failed to compile"):
            Engine(compile="background").explore(refused, Options(), observer=typings)
        typed.append(("python_only_method", typings.count))
    assert typed == [("grid", 1), ("python_only_method", 1), ("grid", 0), ("python_only_method", 1)]
    assert tiers.TypingVerdicts().accepted(grid, kernel_shapes(grid))
    assert not tiers.TypingVerdicts().accepted(refused, kernel_shapes(refused))
