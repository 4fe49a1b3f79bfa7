"""The interpreted tier and the compiled tier accept and reject the same specs and compute the
same states (issue 31 item 6): specs written the ways an author may write them
(tests/odd_specs.py), run on both tiers and the reference explorer."""

from __future__ import annotations

import pytest

from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model

from odd_specs import (AddsAString, Grid, GridParams, Levels, LevelsParams, Overflowing, Tally, TallyParams,
                       Underflowing)

EXPLORERS = {"compiled": lambda: Engine(compile="now"), "interpreted": lambda: Engine(compile="never"),
             "reference": lambda: ReferenceExplorer()}


def _summary(r):
    return (r.status, r.distinct_states, r.states_generated, r.depth, r.coverage(),
            [(v.check, [s.label for s in v.steps]) for v in r.violations])


@pytest.mark.parametrize("n", [1, 2])
def test_two_axis_writes_and_reads_give_the_same_states_on_every_tier(n):
    """``t.grid[i, j] = True`` and ``s.grid[i][j - 1]``: numpy's index and nested ones. The
    interpreted tier crashed on the first (a list takes no tuple index)."""
    runs = {name: make().explore(Model(Grid(GridParams(n))), Options(keep_going=True)) for name, make in EXPLORERS.items()}
    summaries = {name: _summary(r) for name, r in runs.items()}
    assert summaries["interpreted"] == summaries["compiled"] == summaries["reference"]
    assert [v.check for v in runs["compiled"].violations] == ["never_a_full_grid"]
    # rows fill left to right: 4 row states each (0-3 cells set), a full grid the violation
    assert runs["compiled"].distinct_states == 4 ** n


@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_a_write_outside_a_fields_domain_is_refused_by_every_tier(name):
    """In the same words on every tier: the step, the element, its domain and what to do."""
    with pytest.raises(SpecError, match=r"^after Overflow: field marked = 4 is outside its domain 0\.\.3: widen the "
                                        r"field's range in fields\(\), or make the action's guard keep it inside$"):
        EXPLORERS[name]().explore(Model(Overflowing(GridParams(1))), Options(keep_going=True))


@pytest.mark.parametrize("name", sorted(EXPLORERS))
def test_code_numba_cannot_compile_is_refused_by_every_tier_naming_its_line(name):
    """``s.marked + "1"``: the interpreted tiers meet Python's TypeError, the compiled one numba's
    typing error; each is one message naming the spec's line (not a traceback, not a line of a
    generated kernel module), so no tier accepts what another refuses."""
    import odd_specs
    line = next(i for i, text in enumerate(open(odd_specs.__file__), 1) if 's.marked + "1"' in text)
    said = {"compiled": r"the kernels of spec adds_a_string failed to compile at \S*odd_specs\.py:%d: No implementation",
            "interpreted": r"action MarkWithAString raised TypeError: .* at \S*odd_specs\.py:%d; ",
            "reference": r"a function of the spec raised TypeError: .* at \S*odd_specs\.py:%d; "}[name] % line
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
    assert summaries["interpreted"] == summaries["compiled"] == summaries["reference"]
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
    assert summaries["interpreted"] == summaries["compiled"] == summaries["reference"]
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
