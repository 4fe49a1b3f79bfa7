"""State constraints, action constraints and deadlocks, counted as TLC counts them.

The conformance suite (tests/test_conformance.py, tests/constraint_specs.py) compares every
explorer with the reference explorer; these tests pin TLC's own figures and the command line.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kraftcheck.checker.errors import SpecError, UsageError
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class

from conftest import FingerprintEngine, TableLayoutEngine

ROOT = Path(__file__).resolve().parents[1]
INNER_FIFO = f"{ROOT}/bench/specs/inner_fifo.py:InnerFifo"


def _counts(result):
    return (result.status, result.initial_states, result.states_generated, result.distinct_states, result.depth)


@pytest.mark.parametrize("explorer", [ReferenceExplorer, Engine, TableLayoutEngine],
                         ids=["reference", "engine", "engine-table-layouts"])
def test_inner_fifo_gives_tlcs_counts(explorer):
    """MCInnerFIFO of the TLA+ Examples (specifications/SpecifyingSystems/FIFO at commit
    32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9: InnerFIFOInstanced with Message = {m1, m2, m3},
    qLen = 3, CONSTRAINT qConstraint, INVARIANT TypeInvariant; MCInnerFIFO.cfg unchanged), as
    TLC 2.20 (tla2tools.jar rev 96056d9, -workers 1) reports it:

        Finished computing initial states: 36 distinct states generated at 2026-11-27 03:58:53.
        Model checking completed. No error has been found.
        9660 states generated, 3864 distinct states found, 0 states left on queue.
        The depth of the complete state graph search is 11.

    The successors with a queue of 4 are generated (and counted) but not kept: without the
    constraint's TLC semantics the count of distinct states would include them, and the search
    would not end at all with an unbounded queue."""
    cls = spec_class(INNER_FIFO)
    result = explorer().explore(Model(cls(cls.Params(messages=3, q_len=3))), Options())
    assert _counts(result) == ("holds", 36, 9660, 3864, 11)


@pytest.mark.parametrize("explorer", [ReferenceExplorer, Engine, TableLayoutEngine],
                         ids=["reference", "engine", "engine-table-layouts"])
def test_initial_states_outside_a_constraint_as_tlc_counts_them(explorer):
    r"""tests/constraint_specs.py's Rising is this TLA+ module, which TLC checks so:

        Init == x \in 0..3    Next == x < 5 /\ x' = x + 1    CONSTRAINT x <= 1

        Finished computing initial states: 4 states generated, with 2 of them distinct
        6 states generated, 2 distinct states found, 0 states left on queue.
        The depth of the complete state graph search is 1.

    and with INVARIANT x # 3 (or x # 2): "Error: Invariant Inv is violated by the initial state:
    x = 3" (x = 2): an initial state outside the constraint is counted and checked, not kept."""
    cls = spec_class("constraint_specs:Rising")
    result = explorer().explore(Model(cls(cls.Params())), Options())
    assert _counts(result) == ("holds", 4, 6, 2, 1)
    for forbidden in (2, 3):
        result = explorer().explore(Model(cls(cls.Params(forbidden=forbidden))), Options())
        (violation,) = result.violations
        assert violation.depth == 1 and violation.steps[0].state[0] == forbidden


@pytest.mark.parametrize("explorer", [ReferenceExplorer, Engine, FingerprintEngine, TableLayoutEngine],
                         ids=["reference", "engine", "engine-fingerprints", "engine-table-layouts"])
def test_no_initial_state_inside_the_constraint_is_depth_one_as_tlc_counts_it(explorer):
    r"""Rising under ``CONSTRAINT x > 3``, which TLC 2.18 (-workers 1) checks so:

        Finished computing initial states: 4 states generated, with 0 of them distinct
        4 states generated, 0 distinct states found, 0 states left on queue.
        The depth of the complete state graph search is 1.

    The engine and the reference explorer said depth 0, where Spark, the graph a --liveness run
    records, and TLC said 1."""
    cls = spec_class("constraint_specs:RisingNowhere")
    result = explorer().explore(Model(cls(cls.Params())), Options())
    assert _counts(result) == ("holds", 4, 4, 0, 1)


@pytest.mark.parametrize("explorer", [ReferenceExplorer, Engine, TableLayoutEngine],
                         ids=["reference", "engine", "engine-table-layouts"])
def test_an_initial_state_given_twice_is_counted_twice_as_tlc_counts_it(explorer):
    r"""Rising with ``repeated`` is ``Init == x = 0 \/ x = 1 \/ x = 0 \/ x = 3 \/ x = 1 \/ x = 3``,
    which TLC counts so (CONSTRAINT x <= 1; without it, Rising Everywhere):

        Finished computing initial states: 6 states generated, with 2 of them distinct
        8 states generated, 2 distinct states found ... depth ... is 1.
        (no constraint) 6 states generated, with 3 of them distinct; 11 states generated,
        6 distinct states found ... depth ... is 3.

    The runs counted each state once (4 initial states, 6 generated; 3 and 8), short of TLC and of
    the counts' definition (docs/engine.md: the states initial_states() yields). A run that stops
    at an initial state counts those given up to it: x = 3, violating x # 3 outside the constraint,
    is the fourth given."""
    cls = spec_class("constraint_specs:Rising")
    result = explorer().explore(Model(cls(cls.Params(repeated=True))), Options())
    assert _counts(result) == ("holds", 6, 8, 2, 1)
    everywhere = spec_class("constraint_specs:RisingEverywhere")
    result = explorer().explore(Model(everywhere(everywhere.Params(repeated=True))), Options())
    assert _counts(result) == ("holds", 6, 11, 6, 3)
    result = explorer().explore(Model(cls(cls.Params(forbidden=3, repeated=True))), Options())
    (violation,) = result.violations
    assert violation.steps[0].state[0] == 3 and result.states_generated == 4


@pytest.mark.parametrize("explorer", [ReferenceExplorer, Engine, FingerprintEngine, TableLayoutEngine],
                         ids=["reference", "engine", "engine-fingerprints", "engine-table-layouts"])
def test_a_trace_starts_at_its_initial_state_when_earlier_ones_lie_outside(explorer):
    """Rising under ``CONSTRAINT x >= 2`` with ``INVARIANT x # 4``: the initial level holds 2 and 3
    (0 and 1, given first, lie outside), and the shortest counterexample is 3 -> 4. The engine
    started a trace at the initial state given at the level's place of its first state (place 1:
    x = 1), so it replayed 1 -> 2, found the invariant holding there and ended the run with exit 2
    and no verdict (without --symmetry; with it the right initial state was taken)."""
    cls = spec_class("constraint_specs:RisingFromTwo")
    result = explorer().explore(Model(cls(cls.Params(forbidden=4))), Options())
    assert _counts(result) == ("violated", 4, 6, 3, 2)
    (violation,) = result.violations
    assert [step.state[0] for step in violation.steps] == [3, 4]


# one state, two successors violating one invariant: the first (row 0) inside the constraint, the
# second (row 1) outside it
FIRST_INSIDE_THEN_OUTSIDE = """
from dataclasses import dataclass

from numba import njit

from kraftcheck import Action, Constraint, Int, Invariant, Spec, param


@njit(cache=True)
def to_one(s, t):
    if s.x != 0:
        return False
    t.x = 1
    return True


@njit(cache=True)
def to_two(s, t):
    if s.x != 0:
        return False
    t.x = 2
    return True


@njit(cache=True)
def stays_zero(s):
    return s.x == 0


@njit(cache=True)
def below_two(s):
    return s.x < 2


@dataclass(frozen=True)
class P:
    scale: int = param(1, "unused", minimum=1, maximum=1)


class SuccOutside(Spec):
    name = "succ_outside"
    Params = P
    check_deadlock = False

    def fields(self):
        return [Int("x", 2)]

    def initial_states(self):
        yield {"x": 0}

    def actions(self):
        return [Action("ToOne", to_one), Action("ToTwo", to_two)]

    def invariants(self):
        return [Invariant("stays_zero", stays_zero)]

    def constraints(self):
        return [Constraint("below_two", below_two)]
"""


@pytest.fixture(scope="module")
def first_inside_then_outside(tmp_path_factory):
    """The spec's class, its file written once (compiled once for every test here)."""
    path = tmp_path_factory.mktemp("succ_outside") / "succ_outside.py"
    path.write_text(FIRST_INSIDE_THEN_OUTSIDE)
    return spec_class(f"{path}:SuccOutside")


@pytest.mark.parametrize("keep_going", [False, True])
@pytest.mark.parametrize("explorer", [ReferenceExplorer, lambda: Engine(compile="bytecode")],
                         ids=["reference", "engine"])  # the engine's tiers share the chunks' code: no compile
def test_a_violation_is_found_at_the_first_successor_inside_or_outside_the_constraints(first_inside_then_outside,
                                                                                       explorer, keep_going):
    """Successors outside the constraints are checked before the chunk's new states: the engine
    reported the later one outside (ToTwo) with one transition more counted, where the reference
    explorer, taking the rows in order, finds ToOne."""
    cls = first_inside_then_outside
    result = explorer().explore(Model(cls(cls.Params())), Options(keep_going=keep_going))
    assert [s.label for s in result.violations[0].steps] == [None, 0]  # ToOne
    assert result.states_generated == (3 if keep_going else 2)


def test_inner_fifo_without_its_constraint_keeps_the_longer_queues():
    """The constraint is what stops the search at queues of 3: an empty selection keeps every
    state the fields can hold (queues of 4 too, which the fields were sized for)."""
    cls = spec_class(INNER_FIFO)
    model = Model(cls(cls.Params(messages=2, q_len=1)), constraints=[])
    assert not model.constrained
    unconstrained = ReferenceExplorer().explore(model, Options())
    constrained = ReferenceExplorer().explore(Model(cls(cls.Params(messages=2, q_len=1))), Options())
    assert unconstrained.distinct_states > constrained.distinct_states


def test_an_unknown_constraint_is_refused_before_exploring():
    cls = spec_class(INNER_FIFO)
    with pytest.raises(UsageError, match="unknown constraint 'qLength'.*choose from: qConstraint$"):
        Model(cls(cls.Params()), constraints=["qLength"])
    # a name of the other kind: say which option selects it
    with pytest.raises(UsageError, match=r"qConstraint is a constraint: --constraint selects constraints\)$"):
        Model(cls(cls.Params()), check=["qConstraint"])
    with pytest.raises(UsageError, match=r"TypeInvariant is an invariant or property: --invariant selects those\)$"):
        Model(cls(cls.Params()), constraints=["TypeInvariant"])


def test_a_constraint_that_is_not_compiled_is_refused(monkeypatch):
    """Constraints are compiled into the kernels as invariants are: a plain Python function is
    refused when the model is built, with its file and line and what to do."""
    from kraftcheck.checker.spec import Constraint
    cls = spec_class(INNER_FIFO)

    class Plain(cls):
        name = "inner_fifo_plain"

        def constraints(self):
            return [Constraint("short", lambda s: s.q_len <= 1)]

    with pytest.raises(SpecError, match=rf"constraint short of spec inner_fifo_plain \({re.escape(__file__)}:\d+\) "
                                        r"is a plain Python function: decorate it with @njit\(cache=True\)"):
        Model(Plain(Plain.Params()))


def test_deadlock_follows_the_spec_and_the_option():
    """Two-Phase Commit declares its terminal states intended (its states at the end have only
    self-loops, which kraftcheck counts as no way out): no deadlock unless asked for; asked for,
    the shortest one is 4 states at rm=2 (the TM aborts, both RMs choose to abort)."""
    cls = spec_class("two_phase")
    assert cls.check_deadlock is False
    default = ReferenceExplorer().explore(Model(cls(cls.Params(rm=2))), Options())
    assert default.status == "holds"
    for explorer in (ReferenceExplorer(), Engine(), TableLayoutEngine()):
        asked = explorer.explore(Model(cls(cls.Params(rm=2)), deadlock=True), Options())
        assert asked.status == "violated"
        assert [(v.check, v.kind, v.depth) for v in asked.violations] == [("deadlock", "deadlock", 4)]
    die_hard = spec_class("die_hard")
    assert Model(die_hard(die_hard.Params())).check_deadlock
    assert not Model(die_hard(die_hard.Params()), deadlock=False).check_deadlock


def test_every_shipped_spec_declares_whether_it_checks_deadlocks_and_says_why():
    """Issue 31: each spec states TLC's CHECK_DEADLOCK for itself (not by inheriting the default
    silently) and its module docstring gives the reason."""
    import sys
    from kraftcheck.specs import spec_names
    bench = [f"{ROOT}/bench/specs/{f}" for f in ("voting.py:Voting", "inner_fifo.py:InnerFifo",
                                                  "simple_allocator.py:SimpleAllocator", "ewd840.py:EWD840")]
    for name in spec_names() + bench:
        cls = spec_class(name)
        doc = sys.modules[cls.__module__].__doc__ or ""
        assert "deadlock" in doc.lower() or "CHECK_DEADLOCK" in doc, f"{name}: its docstring says nothing of deadlocks"
        assert "check_deadlock" in vars(cls), f"{name} does not declare check_deadlock"


@pytest.mark.parametrize("keep_going", [True, False], ids=["continue", "first"])
@pytest.mark.parametrize("rm", [1, 3])
def test_deadlock_on_the_distinct_successor_path_agrees_with_reference(rm, keep_going):
    """Without constraints the compiled engine keeps its distinct-successor path, where the action
    kernels mark the states that have a way out (both kernel forms); its deadlock, counts and
    trace are the reference explorer's, and the interpreted tier's (candidate rows)."""
    from conftest import EXPLORERS
    cls = spec_class("two_phase")

    def summary(result):
        return (_counts(result), result.coverage(), [(v.check, v.kind, v.depth) for v in result.violations])

    expected = ReferenceExplorer().explore(Model(cls(cls.Params(rm=rm)), deadlock=True), Options(keep_going=keep_going))
    assert [v.check for v in expected.violations][:1] == ["deadlock"]
    for name in ("engine", "engine-small-chunks", "engine-table-layouts", "engine-interpreted", "engine-fingerprints"):
        model = Model(cls(cls.Params(rm=rm)), deadlock=True)
        got = EXPLORERS[name]().explore(model, Options(keep_going=keep_going))
        assert summary(got) == summary(expected), name
        from counterexample_support import assert_counterexample_replays
        for v in got.violations:
            assert_counterexample_replays(model, v)


def _kraftcheck(*args, cwd):
    return subprocess.run([sys.executable, "-m", "kraftcheck", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_a_deadlock_trace_replays_from_the_command_line(tmp_path):
    """``kraftcheck check --deadlock`` exits 1 with a deadlock of its shortest trace, and
    ``kraftcheck trace replay`` accepts the trace: every step is the spec's, and no action leads
    out of the last state."""
    run = _kraftcheck("check", "--spec", "two_phase", "--param", "rm=2", "--deadlock", "--json", "report.json",
                      "--trace-dir", "traces", "--no-color", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "deadlock reached" in run.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    (violation,) = report["violations"]
    assert (violation["invariant"], violation["kind"], violation["depth"]) == ("deadlock", "deadlock", 4)
    replay = _kraftcheck("trace", "replay", violation["trace_file"], cwd=tmp_path)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "reaches deadlock deadlock violated at step 3" in " ".join(replay.stdout.split())

    # the same trace with its last step cut off does not end in a deadlock: replay says so
    from kraftcheck.traces.files import load, save
    graph = load(tmp_path / violation["trace_file"])
    graph.remove_node(3)
    graph.graph["violation"]["step"] = 2
    graph.graph["fingerprints"] = graph.graph["fingerprints"][:3]
    save(graph, tmp_path / "cut.json")
    bad = _kraftcheck("trace", "replay", "cut.json", cwd=tmp_path)
    assert bad.returncode != 0 and "leads from its last state to another state" in " ".join(bad.stdout.split())

    quiet = _kraftcheck("check", "--spec", "two_phase", "--param", "rm=2", "--no-deadlock", "--quiet", cwd=tmp_path)
    assert quiet.returncode == 0


def test_the_command_line_names_its_constraint_and_deadlock_options(tmp_path):
    help_text = " ".join(_kraftcheck("check", "--help", cwd=tmp_path).stdout.split())
    assert "--deadlock / --no-deadlock" in help_text and "--constraint NAME" in help_text
    bad = _kraftcheck("check", "--spec", INNER_FIFO, "--constraint", "nope", cwd=tmp_path)
    assert bad.returncode == 2 and "unknown constraint 'nope'" in bad.stderr + bad.stdout
    ok = _kraftcheck("check", "--spec", INNER_FIFO, "--param", "messages=2", "--param", "q_len=1", "--json", "-",
                     "--quiet", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    reference = ReferenceExplorer().explore(Model(spec_class(INNER_FIFO)(spec_class(INNER_FIFO).Params(
        messages=2, q_len=1))), Options())
    assert (report["distinct_states"], report["states_generated"]) == (reference.distinct_states,
                                                                        reference.states_generated)


def test_a_checkpointed_constrained_run_resumes_to_the_same_counts(tmp_path):
    """Checkpoints record the constraints and the deadlock check in the run's identity, and a
    resumed run ends with the uninterrupted run's counts and deadlock."""
    cls = spec_class("constraint_specs:Counters")

    def model():
        return Model(cls(cls.Params(n=3, top=2, limit=5)))

    whole = Engine().explore(model(), Options(keep_going=True))
    first = Engine().explore(model(), Options(keep_going=True, max_depth=3, checkpoint_dir=str(tmp_path / "c")))
    assert first.status == "incomplete"
    resumed = Engine().explore(model(), Options(keep_going=True, checkpoint_dir=str(tmp_path / "c"), resume=True))
    assert _counts(resumed) == _counts(whole)
    assert [(v.check, v.depth) for v in resumed.violations] == [(v.check, v.depth) for v in whole.violations]
    with pytest.raises(UsageError, match="deadlock"):
        Engine().explore(Model(cls(cls.Params(n=3, top=2, limit=5)), deadlock=False),
                         Options(keep_going=True, checkpoint_dir=str(tmp_path / "c"), resume=True))


def test_the_recorded_graph_is_the_constrained_one():
    """Liveness and the other graph analyses see TLC's graph: no transition leaves the
    constraints, and a state whose successors all lie outside has none."""
    cls = spec_class("constraint_specs:Counters")
    model = Model(cls(cls.Params(n=2, top=2, limit=3)))
    result = Engine().explore(model, Options(keep_going=True, keep_graph=True))
    graph = result.graph
    assert graph.size == result.distinct_states == 8
    # the graph by brute force: the transitions inside the constraints between states inside them
    seen = [s for s in model.initial if model.in_model(None, s)]
    edges = 0
    for state in seen:
        for label in range(len(model.labels)):
            succ = model.step(state, label)
            if succ is not None and model.in_model(state, succ):
                edges += 1
                if succ not in seen:
                    seen.append(succ)
    assert len(seen) == 8 and int(graph.offsets[-1]) == edges
    assert edges < result.states_generated - result.initial_states  # some successors lie outside
