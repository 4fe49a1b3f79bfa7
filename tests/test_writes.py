"""What an action writes (``checker/writes.py``) and the kernels that pack only that.

The kernels trust the static reading: a write it missed would leave the source's value in the
packed successor. So the claims are checked against what every action of every spec actually
writes on reachable states, and the compiled successors against the interpreted ones, row for
row, for every spec whose actions are read (one-word and two-word layouts).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from click.testing import CliRunner
from numba import njit

from kraftcheck.api import make_spec
from kraftcheck.checker.codegen import NO_LABEL, kernel_writes, packing_fire
from kraftcheck.checker.explore.compiled import Kernels
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Bool, Enum, Int
from kraftcheck.checker.writes import Write, action_writes, may_decline_after_touching
from kraftcheck.cli.main import cli

FIELDS = [Int("n", 7), Enum("e", ("x", "y", "z"), (3,)), Int("grid", 3, (2, 2)), Bool("flag")]


def writes_of(fn, params=1):
    return action_writes(fn, FIELDS, [3] * params)


def helper(t):
    t.n = 1


def element_write(s, t, p):
    if s.e[p] == 0:
        return False
    t.e[p] = 0
    t.n += 1
    return True


def reads_only_elements_and_scalars(s, t, p):
    t.flag = t.e[p] == t.n
    return True


def expression_index(s, t, p):
    t.e[(p + 1) % 3] = 2
    return True


def reassigned_index(s, t, p):
    p = 0
    t.e[p] = 2
    return True


def alias_then_write(s, t, p):
    e = t.e
    e[p] = 1
    return True


def nested_write(s, t, p):
    t.grid[p][0] = 1
    return True


def tuple_target(s, t, p):
    t.n, t.flag = 2, 1
    return True


def length_read(s, t, p):
    t.n = len(t.e)
    return True


def successor_handed_on(s, t, p):
    helper(t)
    return True


def element_helper(x, p, t):
    x.e[p] = 2
    if t.grid[p][0] == 1 and x.e[p + 1] > 0:  # reads, compared at once: not writes
        x.flag = 1


def successor_handed_on_elsewhere(s, t, p):
    element_helper(t, p, s)
    return True


def successor_handed_by_keyword(s, t, p):
    helper(t=t)
    return True


def successor_handed_to_a_builtin(s, t, p):
    print(t)
    return True


def calls_itself(x):
    x.n = 1
    calls_itself(x)


def successor_handed_to_a_recursive_helper(s, t, p):
    calls_itself(t)
    return True


def view_kept_by_or(s, t, p):
    v = t.grid[p] or t.grid[0]
    v[0] = 1
    return True


def successor_reassigned(s, t, p):
    t = s
    return True


def unknown_attribute(s, t, p):
    t.nothing = 1
    return True


def writes_nothing(s, t):
    return s.n == t.n


def writes_nothing_to(x):
    return x.n == 0


def local_name_shadows_a_helper(s, t, p):
    writes_nothing_to = helper  # numba calls this one, not the module's function of that name
    writes_nothing_to(t)
    return True


def calls_what_it_is_handed(writes_nothing_to, x):
    writes_nothing_to(x)  # the function handed in, not the module's of that name


def successor_handed_with_a_function(s, t, p):
    calls_what_it_is_handed(helper, t)
    return True


def calls_its_keyword_default(x, *, writes_nothing_to=helper):
    # the keyword-only parameter's function, not the module's of that name (a function with
    # parameters other than plain positional ones is not read at all: unknown either way)
    writes_nothing_to(x)


def successor_handed_to_a_keyword_default(s, t, p):
    calls_its_keyword_default(t)
    return True


def successor_handed_to_an_imported_name(s, t, p):
    from math import floor as writes_nothing_to  # noqa: F401 (a name the body binds by import)
    writes_nothing_to(t)
    return True


def test_element_writes_by_a_parameter_and_whole_fields_otherwise():
    assert writes_of(element_write) == (Write("n"), Write("e", 0))
    assert writes_of(reads_only_elements_and_scalars) == (Write("flag"),)
    assert writes_of(expression_index) == (Write("e"),)
    assert writes_of(reassigned_index) == (Write("e"),)
    assert writes_of(nested_write) == (Write("grid"),)
    assert writes_of(tuple_target) == (Write("n"), Write("flag"))
    assert action_writes(writes_nothing, FIELDS, []) == ()


def test_an_array_that_leaves_the_body_counts_as_written_whole():
    assert writes_of(alias_then_write) == (Write("e"),)
    assert writes_of(length_read) == (Write("n"), Write("e"))


def test_a_parameter_with_more_values_than_the_field_has_elements_is_not_an_element_write():
    assert action_writes(element_write, FIELDS, [4]) == (Write("n"), Write("e"))


def test_a_helper_handed_the_successor_is_read_and_its_element_writes_count_whole():
    assert writes_of(successor_handed_on) == (Write("n"),)
    # the helper's parameter p is not the action's: its element write is the whole field; the
    # source handed as its third parameter is not read as a successor
    assert writes_of(successor_handed_on_elsewhere) == (Write("e"), Write("flag"))


def test_a_view_that_and_or_or_gives_back_counts_as_written():
    assert writes_of(view_kept_by_or) == (Write("grid"),)


@pytest.mark.parametrize("fn", [successor_reassigned, unknown_attribute, successor_handed_by_keyword,
                                successor_handed_to_a_builtin, successor_handed_to_a_recursive_helper])
def test_any_other_use_of_the_successor_is_unknown(fn):
    assert writes_of(fn) is None


@pytest.mark.parametrize("fn", [local_name_shadows_a_helper, successor_handed_with_a_function,
                                successor_handed_to_a_keyword_default, successor_handed_to_an_imported_name])
def test_a_call_through_a_local_name_is_unknown(fn):
    """A function called through a name the body binds (assigned, imported, or a parameter of any
    kind) is not the module's function of that name: reading that one claimed the action wrote
    nothing while numba called a function that wrote t.n, and the compiled kernels, packing only
    what the reading claims, lost the write (a small layout's run held where the reference
    explorer found the invariant violated)."""
    assert writes_of(fn) is None


def test_wrong_arity_and_compiled_functions_are_read_from_their_python_source():
    assert action_writes(element_write, FIELDS, []) is None
    assert writes_of(njit(element_write)) == (Write("n"), Write("e", 0))


# ----------------------------------------------------------------------------------------------
# Whether an action can decline after touching its successor (may_decline_after_touching): where
# it cannot, the kernels skip the comparison after an instance that does not fire


def fires_or_writes_nothing(s, t):
    if s.flag:
        return False
    t.n = 2
    return True


def writes_then_declines(s, t):
    t.n = 1
    if s.flag:
        return False
    return True


def returns_early_from_a_branch_that_wrote(s, t):
    if s.n == 0:
        t.n = 1
        return True
    if s.flag:
        return False  # no path here has touched t
    t.flag = True
    return True


def guarded_by_a_careful_helper(s, t):
    if s.n == 1 or not fires_or_writes_nothing(s, t):
        return False
    t.flag = True
    return True


def guarded_by_a_careless_helper(s, t):
    if not writes_then_declines(s, t):
        return False
    return True


def checks_after_a_helper_that_wrote(s, t):
    if not fires_or_writes_nothing(s, t) or s.n == 3:
        return False  # reached also where the helper fired and wrote
    return True


def hands_over_to_a_careful_helper(s, t):
    if s.n == 7:
        return False
    return fires_or_writes_nothing(s, t)


def hands_over_to_a_careless_helper(s, t):
    return writes_then_declines(s, t)


def declines_in_a_later_turn(s, t):
    for i in range(3):
        if s.e[i] == 1:
            return False
        t.e[i] = 1
    return True


def runs_off_its_end(s, t):
    t.n = 1


def returns_a_value_after_writing(s, t):
    t.n = 1
    return s.flag


def guarded_by_a_careless_function_named_as_a_careful_one(s, t):
    fires_or_writes_nothing = writes_then_declines  # numba calls this one
    if not fires_or_writes_nothing(s, t):
        return False
    return True


@pytest.mark.parametrize("fn,may", [
    (fires_or_writes_nothing, False), (element_write, False),
    (returns_early_from_a_branch_that_wrote, False), (guarded_by_a_careful_helper, False),
    (hands_over_to_a_careful_helper, False), (njit(hands_over_to_a_careful_helper), False),
    (writes_then_declines, True), (guarded_by_a_careless_helper, True), (checks_after_a_helper_that_wrote, True),
    (hands_over_to_a_careless_helper, True), (declines_in_a_later_turn, True), (runs_off_its_end, True),
    (returns_a_value_after_writing, True), (len, True), (guarded_by_a_careless_function_named_as_a_careful_one, True),
    (writes_nothing, True)])  # reading t counts as touching it: conservative
def test_an_action_declines_only_before_touching_its_successor_where_its_source_shows_it(fn, may):
    assert may_decline_after_touching(fn) is may


def test_every_shipped_action_tests_its_guard_before_touching_the_successor():
    """So no kernel of theirs compares after a decline (what the Kafka model's speed needs)."""
    for spec, params in CASES:
        model = Model(make_spec(spec, params))
        assert [a.name for a in model.actions if may_decline_after_touching(a.fn)] == []


CASES = [("two_phase", {"rm": 3}), ("two_phase", {"rm": 20}), ("mutex", {}),
         ("mutex", {"algorithm": "test_and_set"}), ("die_hard", {}), ("kafka", {"brokers": 3, "min_isr": 2})]


def reachable(model: Model, kernels: InterpretedKernels, limit: int) -> list[tuple[int, ...]]:
    """Up to ``limit`` states, breadth first."""
    seen, level = set(model.initial), list(model.initial)
    while level and len(seen) < limit:
        nxt = []
        for flat in level:
            for label in range(len(model.labels)):
                succ = kernels.step(flat, label)
                if succ is not None and succ not in seen:
                    seen.add(succ)
                    nxt.append(succ)
        level = nxt
    return sorted(seen)[:limit]


def _reading(model: Model, ai: int) -> tuple[Write, ...] | None:
    action = model.actions[ai]
    return action_writes(action.fn, model.layout.fields, [p.count for p in action.params])


@pytest.mark.parametrize("spec,params", CASES)
def test_what_each_action_writes_is_within_what_its_kernel_packs(spec, params):
    """Every element an action changes on reachable states is one the static reading
    (``action_writes``) names, and an action's kernel packs and restores what the reading names.
    Every action of every spec is read, the Kafka model's through the helpers they hand ``t`` to,
    and no transition property writes ``t``: so each of the Kafka model's ``fire`` kernels packs
    its successors itself (``codegen.packing_fire``)."""
    model = Model(make_spec(spec, params))
    interpreted = InterpretedKernels(model)
    layout = model.layout
    claims = [_reading(model, ai) for ai in range(len(model.actions))]
    assert all(action_writes(p.fn, layout.fields, []) == () for p in model.kernel_properties)
    assert [kernel_writes(model, ai) for ai in range(len(model.actions))] == claims
    assert all(c is not None for c in claims), claims
    if spec == "kafka":
        assert all(packing_fire(model, ai) is not None for ai in range(len(model.actions)))
    checked = 0
    for flat in reachable(model, interpreted, 400):
        for label, lab in enumerate(model.labels):
            writes = claims[lab.action_index]
            succ = interpreted.step(flat, label)
            if succ is None or writes is None:
                continue
            allowed = set()
            for w in writes:
                span = layout.field_slices[w.field]
                allowed |= set(range(span.start, span.stop)) if w.param is None else {span.start + lab.values[w.param]}
            changed = {k for k, (a, b) in enumerate(zip(flat, succ)) if a != b}
            assert changed <= allowed, (lab, changed - allowed)
            checked += 1
    assert checked


@pytest.mark.parametrize("spec,params", [c for c in CASES if c[0] != "kafka"])
def test_compiled_successors_are_the_interpreted_ones_row_for_row(spec, params):
    model = Model(make_spec(spec, params))
    compiled, interpreted = Kernels(model), InterpretedKernels(model)
    level = compiled.pack(model.initial)
    rows_compared = 0
    for _ in range(10):
        a, b = compiled.successors(level), interpreted.successors(level)
        n = level.shape[0] * compiled.nlabels
        assert a.labels[:n].tolist() == b.labels[:n].tolist()
        rows = np.flatnonzero(a.labels[:n] != NO_LABEL)
        assert a.words[rows].tolist() == b.words[rows].tolist()
        assert a.hashes[rows].tolist() == b.hashes[rows].tolist()
        rows_compared += rows.size
        level = np.unique(a.words[rows], axis=0)[:500]
    assert rows_compared > 30


OVERFLOWING_SPEC = '''\
from dataclasses import dataclass
from numba import njit
from kraftcheck import Action, Const, Int, Param, Spec, param


@njit(cache=True)
def inc(s, t, counter):
    if s.c[counter] > s.limit:  # one too many: c reaches limit + 1
        return False
    t.c[counter] = s.c[counter] + 1
    return True


@dataclass(frozen=True)
class OverflowParams:
    limit: int = param(2, "highest value of each counter", minimum=1, maximum=10)


class Overflow(Spec):
    name = "overflow"
    summary = "a counter that leaves its domain (a test of the kernels' domain check)"
    Params = OverflowParams

    def fields(self):
        return [Int("c", self.params.limit, (2,)), Const("limit", self.params.limit)]

    def initial_states(self):
        yield {"c": [0, 0]}

    def actions(self):
        return [Action("Inc", inc, params=(Param("counter", 2),))]
'''


def test_a_written_element_outside_its_domain_is_reported_by_the_compiled_kernels(tmp_path, monkeypatch):
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path / "kernels"))
    spec = tmp_path / "overflow_spec.py"
    spec.write_text(OVERFLOWING_SPEC)
    result = CliRunner().invoke(cli, ["check", "--spec", f"{spec}:Overflow", "--compile", "now"])
    assert result.exit_code == 2, result.output
    # the compiled kernels' report, re-run in Python for the message, in the words of every tier
    assert re.search(r"error: after Inc\(counter=[01]\): field c\[[01]\] = 3 is outside its domain 0\.\.2",
                     result.output), result.output


def nested_function_shadowing_the_parameter(s, t, p):
    def put(p):
        t.e[p] = 1
    for q in range(3):
        put(q)
    return True


def view_through_ellipsis(s, t, p):
    a = t.e[...]
    a[0] = 1
    return True


def view_through_a_slice_held_in_a_name(s, t, p):
    whole = slice(0, 3)
    a = t.e[whole]
    a[0] = 1
    return True


def element_reads_by_loop_variables_and_arithmetic(s, t, p):
    total = 0
    for i in range(3):
        total += t.e[i] + t.e[(p + 1) % 3] + t.e[2]
    t.n = total
    return True


def loop_variable_also_assigned_otherwise(s, t, p):
    for i in range(3):
        t.n += t.e[i]
    i = slice(0, 2)
    a = t.e[i]
    a[0] = 1
    return True


def augmented_element_write(s, t, p):
    t.e[p] += 1
    return True


def test_views_and_nested_functions_are_not_mistaken_for_element_accesses():
    assert writes_of(nested_function_shadowing_the_parameter) is None
    assert writes_of(view_through_ellipsis) == (Write("e"),)
    assert writes_of(view_through_a_slice_held_in_a_name) == (Write("e"),)
    assert writes_of(loop_variable_also_assigned_otherwise) == (Write("n"), Write("e"))
    assert writes_of(element_reads_by_loop_variables_and_arithmetic) == (Write("n"),)
    assert writes_of(augmented_element_write) == (Write("e", 0),)


@pytest.mark.parametrize("rm", [4, 20])
def test_distinct_successors_of_partly_packed_kernels_are_the_successor_rows_first_occurrences(rm):
    """The distinct-successor path (where a self-loop is found on the changed words) keeps
    exactly the states of the candidate rows that are neither self-loops nor repeats, for a
    one-word and a two-word layout."""
    from kraftcheck.checker.explore.compiled import RepeatTables
    model = Model(make_spec("two_phase", {"rm": rm}))
    kernels = Kernels(model)
    level = kernels.pack(model.initial)
    for _ in range(7):
        n = level.shape[0]
        out = kernels.buffers(n)
        tables = RepeatTables(kernels.threads, out.valid.shape[0], kernels.nwords, kernels.tally_width)
        ends = kernels.distinct_successors(level, 0, n, out, tables, lambda j, a, b, end: None)
        parts = kernels.parts(n)
        got = set()
        for j in range(len(parts)):
            got |= {tuple(w) for w in out.dense_words[kernels.dense_start(j, out):ends[j]].tolist()}
        rows = kernels.successors(level)
        nl = kernels.nlabels
        expected = set()
        for i in range(n):
            source = tuple(level[i].tolist())
            for r in range(i * nl, (i + 1) * nl):
                if rows.labels[r] != NO_LABEL and tuple(rows.words[r].tolist()) != source:
                    expected.add(tuple(rows.words[r].tolist()))
        assert got == expected
        level = np.array(sorted(expected | {tuple(w) for w in level.tolist()}), np.uint64)[:400]


def test_distinct_successors_refuse_buffers_not_from_the_compiled_kernels():
    from kraftcheck.checker.explore.compiled import ChunkBuffers, RepeatTables
    model = Model(make_spec("two_phase", {"rm": 3}))
    kernels = Kernels(model)
    if kernels.threads == 1:
        pytest.skip("every size is a multiple of one thread")
    out = ChunkBuffers(kernels.threads * 10 + 1, kernels.nlabels, model.layout, False)
    tables = RepeatTables(kernels.threads, out.valid.shape[0], kernels.nwords, kernels.tally_width)
    with pytest.raises(ValueError, match="needs buffers from Kernels.buffers"):
        kernels.distinct_successors(kernels.pack(model.initial), 0, 1, out, tables, lambda *a: None)


def test_a_write_the_reading_missed_stops_the_run_with_no_verdict(monkeypatch):
    """The fire kernels restore only what the reading names, in the batch's twin the next action
    runs on: a write it missed would give successors without it and leave the twin changed. The
    generic kernel compares the twin with the states once every action has run, so such a run
    stops (an internal error, exit 2) and names the element, instead of counting wrong states,
    unless a later action writes that element again (it restores it): here the spec's last
    action's reading misses an element, which no action after it can hide."""
    from kraftcheck.checker import codegen
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.result import Options

    real = codegen.packing_fire

    def last_action_missing_an_element(model, ai):
        found = real(model, ai)
        return (found[0][1:], found[1]) if ai == len(model.actions) - 1 else found

    monkeypatch.setattr(codegen, "packing_fire", last_action_missing_an_element)
    monkeypatch.setattr(codegen, "INLINE_PACK_MAX_ELEMENTS", -1)  # every layout packs by its table
    model = Model(make_spec("die_hard", {"small": 3, "big": 5}))
    with pytest.raises(RuntimeError, match=r"wrote (small|big) .* did not expect it"):
        Engine(compile="now").explore(model, Options(keep_going=True))


@pytest.mark.parametrize("explorer", ["now", "reference", "bytecode"])
def test_a_write_to_the_source_state_on_some_states_stops_a_small_layouts_run(explorer):
    """An in-place add on a name bound to a field of ``s``, on the states where ``k`` is 2: the
    model's build does not see it. The unrolled kernels of a small layout widened each state into
    a scratch row once for all of an action's instances, so the next instance read the changed
    ``s`` and the run said "holds" with one state too many; now each kernel compares with the
    state, once its instances ran, the elements of the fields the action hands out as a view
    (``writes.source_view_fields``: ``c`` here), and the run stops as the Python tiers do (they
    hand ``s`` read-only)."""
    import odd_specs

    from kraftcheck.checker import codegen
    from kraftcheck.checker.errors import SpecError
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.reference import ReferenceExplorer
    from kraftcheck.checker.explore.result import Options

    cls = odd_specs.WritesItsSourceOnSomeStates
    model = Model(cls(cls.Params()))
    assert not codegen.uses_layout_table(model.layout)
    run = ReferenceExplorer() if explorer == "reference" else Engine(compile=explorer)
    said = (r"wrote c\[0\] of its source state s \(from 2 to 3\)" if explorer == "now"
            else r"^action CountUp(\(i=0\))? raised ValueError: output array is read-only")
    with pytest.raises(SpecError, match=said):
        run.explore(model, Options(keep_going=True))


@pytest.mark.parametrize("explorer", ["now", "reference"])
def test_an_invariant_that_writes_its_state_through_a_view_stops_the_run(explorer):
    """The invariants kernel runs every check on one int64 row of the state: a check that wrote
    it through a view changed what the checks after it read. The kernel compares the fields the
    checks hand out as views once they ran, and the run stops with the check's error in Python,
    where ``s`` is read-only, as the reference explorer's."""
    import odd_specs

    from kraftcheck.checker.codegen import invariant_check_indices
    from kraftcheck.checker.errors import SpecRaised
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.reference import ReferenceExplorer
    from kraftcheck.checker.explore.result import Options

    cls = odd_specs.AnInvariantWritesItsState
    model = Model(cls(cls.Params()))
    assert invariant_check_indices(model) == [0, 1]  # c, not k
    run = ReferenceExplorer() if explorer == "reference" else Engine(compile=explorer)
    with pytest.raises(SpecRaised, match=r"^invariant bumps_its_counts raised ValueError: output array is read-only"):
        run.explore(model, Options(keep_going=True))


@pytest.mark.parametrize("explorer", ["reference", "never", "bytecode", "now"])
def test_an_action_constraint_that_writes_the_successor_through_a_view_stops_every_explorer(explorer):
    """A check of a step is handed its successor read-only on the Python tiers, as a state check
    is its state, and the compiled kernels' states are run as Python by the audit: the write stops
    every explorer with the constraint's error. Before, the reference explorer checked the
    invariants of a state outside the constraint on the state the constraint had written (violated,
    3 states) and every engine tier said "holds" with the same counts."""
    import odd_specs

    from kraftcheck.checker.errors import SpecRaised
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.reference import ReferenceExplorer
    from kraftcheck.checker.explore.result import Options

    cls = odd_specs.AConstraintWritesItsSuccessor
    run = ReferenceExplorer() if explorer == "reference" else Engine(compile=explorer)
    with pytest.raises(SpecRaised, match=r"^action constraint bumps_the_successor (on a step of CountUp\(i=0\) )?"
                                         r"raised ValueError: output array is read-only"):
        run.explore(Model(cls(cls.Params())), Options(keep_going=True))


@njit(cache=True)
def zeroes_its_k(s):
    s.k = 0
    return True


@njit(cache=True)
def zeroes_the_successors_k(s, t):
    t.k = 0
    return True


@njit(cache=True)
def marks_the_source(s, t):
    s.c[0] = 1
    return True


@pytest.mark.parametrize("kind, fn, said", [
    ("invariants", zeroes_its_k, r"invariant written assigns to its state s \(s\.k, .*test_writes\.py:\d+\)"),
    ("constraints", zeroes_its_k, r"constraint written assigns to its state s \(s\.k, "),
    ("properties", zeroes_the_successors_k, r"transition property written assigns to the step's successor t \(t\.k, "),
    ("action_constraints", zeroes_the_successors_k, r"action constraint written assigns to the step's successor t "),
    ("action_constraints", marks_the_source, r"action constraint written assigns to the step's source state s "
                                             r"\(s\.c, "),
])
def test_a_check_or_constraint_that_assigns_to_its_states_is_refused_when_the_model_is_built(kind, fn, said):
    """A check or constraint only reads: one that assigns to a field of a state it is handed would
    change what the checks after it read (on the Python tiers a scalar field is a plain attribute,
    on the compiled ones the kernels' scratch row). Refused before any state is explored."""
    import odd_specs

    from kraftcheck.checker.errors import SpecError
    from kraftcheck.checker.spec import ActionConstraint, Constraint, Invariant, TransitionProperty

    make = {"invariants": Invariant, "constraints": Constraint, "properties": TransitionProperty,
            "action_constraints": ActionConstraint}[kind]
    cls = type("AssignsInACheck", (odd_specs.WritesItsSourceOnSomeStates,),
               {"name": "assigns_in_a_check", kind: lambda self: [make("written", fn)]})
    with pytest.raises(SpecError, match=said):
        Model(cls(cls.Params()))


@pytest.mark.parametrize("source,expected", [
    ("def a(s, t, i):\n    t.n = s.n + s.c[i]\n    return s.c[0] == 1\n", ()),
    ("def a(s, t, i):\n    v = s.c\n    v += 1\n    return True\n", ("c",)),
    ("def a(s, t, i):\n    t.n = (s.c,)[0][i]\n    return True\n", ("c",)),
    ("def a(s, t, i):\n    t.n = len(s.c) + s.n\n    return True\n", ("c",)),
    ("def a(s, t, i):\n    s2 = s\n    return True\n", None),
])
def test_source_view_fields_names_every_field_of_s_a_view_could_write(tmp_path, source, expected):
    """What a small layout's kernels compare after an action's instances: the fields of ``s`` it
    hands out as a view, or None (every element) where the reading cannot tell."""
    from kraftcheck.checker.writes import source_view_fields

    fields = [Int("n", 4), Int("c", 4, shape=(2,))]
    assert source_view_fields(_function_a(tmp_path, source), fields, [2]) == expected


@pytest.mark.parametrize("explorer", ["reference", "never", "bytecode"])
def test_a_write_through_a_view_of_the_source_state_stops_the_python_tiers(explorer):
    """The model's build cannot see a view of ``s`` kept in a tuple and written through: the
    Python tiers hand ``s`` read-only, so the write raises there (each of them said "holds" before)."""
    import large_layout_specs

    from kraftcheck.checker.errors import SpecRaised
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.reference import ReferenceExplorer
    from kraftcheck.checker.explore.result import Options

    cls = large_layout_specs.WritesItsSourceThroughAView
    run = ReferenceExplorer() if explorer == "reference" else Engine(compile=explorer)
    with pytest.raises(SpecRaised, match=r"^action Inc.* raised ValueError: assignment destination is read-only"):
        run.explore(Model(cls(cls.Params())), Options(keep_going=True))


def test_an_action_assigning_to_its_source_state_is_refused_when_the_model_is_built():
    """The kernels read a source state from the level's packed words, the first tiers hand the
    action the state itself: a spec that writes ``s`` would be explored differently by each, so
    it is refused before anything runs, with the line (here in a helper handed ``s``)."""
    import odd_specs

    from kraftcheck.checker.errors import SpecError

    with pytest.raises(SpecError, match=r"action MarkAndResetTheSource assigns to its source state "
                                        r"\(s\.marked, .*odd_specs\.py:\d+\).*write t\.marked instead"):
        Model(odd_specs.AssignsToItsSource(odd_specs.AssignsToItsSource.Params()))


@pytest.mark.parametrize("source,expected", [
    ("def a(s, t):\n    s.n = 1\n    return True\n", ("n", 2)),
    ("def a(s, t, i):\n    s.grid[i][0] += 1\n    return True\n", ("grid", 2)),
    ("def a(s, t):\n    t.n, s.flag = 1, True\n    return True\n", ("flag", 2)),
    ("def a(s, t):\n    t.n = s.n + 1\n    x = s.grid[0, 0]\n    return x == 0\n", None),
    ("def a(src, t):\n    t.n = src.n\n    return True\n", None),
    ("def h(src, dst):\n    src.n = 1\n\n\ndef a(s, t):\n    h(dst=t, src=s)\n    return True\n", ("n", 2)),
    ("def a(s, t, i):\n    s.grid[i].fill(0)\n    return True\n", ("grid", 2)),
    ("import numpy as np\ndef a(s, t):\n    np.add(s.e, 1, out=s.e)\n    return True\n", ("e", 3)),
    ("import numpy as np\ndef a(s, t):\n    np.copyto(s.e, t.e)\n    return True\n", ("e", 3)),
    ("def a(s, t):\n    t.e.sort()\n    x = s.e.copy()\n    x.sort()\n    return True\n", None),
    # through a view named in the body, or handed to a helper that writes its parameter
    ("def a(s, t):\n    cells = s.e\n    cells[1] = 2\n    return True\n", ("e", 3)),
    ("def a(s, t, i):\n    row = s.grid[i]\n    part = row[1:]\n    part.fill(0)\n    return True\n", ("grid", 4)),
    ("def h(cells):\n    cells[0] = 1\n\n\ndef a(s, t):\n    h(s.e)\n    return True\n", ("e", 2)),
    ("def h(x, cells):\n    cells[0] = x\n\n\ndef a(s, t):\n    h(1, cells=s.e)\n    return True\n", ("e", 2)),
    ("def a(s, t):\n    x = s.n\n    x += 1\n    t.n = x\n    return True\n", None),
    ("def h(cells):\n    return cells[0] == 1\n\n\ndef a(s, t):\n    return h(s.e)\n", None),
    ("def a(s, t):\n    cells = s.e.copy()\n    cells[0] = 1\n    t.e[0] = cells[0]\n    return True\n", None),
    ("def a(s, t):\n    cells = t.e\n    cells[0] = s.e[1]\n    return True\n", None),
    # a name also bound to something else is not surely a view where it is written through
    ("def h(x):\n    x = x.copy()\n    x[0] = 0\n    return x[1] == 0\n\n\ndef a(s, t):\n    return h(s.e)\n", None),
    ("def a(s, t, i):\n    row = s.grid[i]\n    n = row[0]\n    row = t.grid[i]\n    row[1] = n\n    return True\n",
     None),
    ("def a(s, t):\n    for i in range(2):\n        row = s.grid[i]\n        row[0] = 1\n    return True\n", ("grid", 4)),
    ("def a(s, t, i):\n    row = s.grid[0]\n    if i:\n        row = s.grid[1]\n    row[0] = 1\n    return True\n",
     ("grid", 5)),
])
def test_source_writes_names_only_sure_assignments_to_s(tmp_path, source, expected):
    from kraftcheck.checker.writes import source_writes

    found = source_writes(_function_a(tmp_path, source))
    assert (found if found is None else found[:2]) == expected


def _function_a(tmp_path, source: str):
    """Function ``a`` of a module of ``source`` written to a file (so that its source can be read)."""
    import importlib.util

    path = tmp_path / "module_of_a.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("module_of_a", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.a


def test_an_action_that_can_end_without_a_return_is_refused_when_the_model_is_built():
    """A missing ``return True`` reads as False in every tier: the action would silently never
    fire where it should, and a check could hold for want of the states it reaches."""
    import odd_specs

    from kraftcheck.checker.errors import SpecError

    with pytest.raises(SpecError, match=r"action MarkWithoutSayingItFired may return nothing \(its body can end "
                                        r"without a return, .*odd_specs\.py:\d+\)"):
        Model(odd_specs.ForgetsToReturn(odd_specs.ForgetsToReturn.Params()))


@pytest.mark.parametrize("source,expected", [
    ("def a(s, t):\n    if s.n:\n        return False\n    t.n = 1\n    return True\n", None),
    ("def a(s, t):\n    if s.n:\n        return False\n    else:\n        return True\n", None),
    ("def a(s, t):\n    if s.n:\n        return True\n", "its body can end without a return"),
    ("def a(s, t):\n    if s.n:\n        return\n    return True\n", "a bare return"),
    ("def a(s, t):\n    for i in range(3):\n        if s.n == i:\n            return True\n", "its body can end without a return"),
    ("def a(s, t):\n    raise ValueError\n", None),
])
def test_returns_nothing_reads_every_path(tmp_path, source, expected):
    from kraftcheck.checker.action_returns import returns_nothing

    found = returns_nothing(_function_a(tmp_path, source))
    assert (found if found is None else found[2]) == expected
