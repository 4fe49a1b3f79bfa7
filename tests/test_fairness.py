"""Fairness as TLA+ states it (``checker.analyses.liveness``): weak and strong fairness of a
disjunction of actions and of partly bound instances, and ``<>P``.

The analysis that finds fair runs (``fair_components``, ``doomed_states``: the Emerson-Lei
recursion for strong fairness) is compared on many small random graphs with the brute-force
search of ``graph_reference.fair_runs_reference``, which reads the definitions of weak and strong
fairness walk by walk and shares no code with it. Fairness names are resolved and refused on
small specs; the textbook answer for strong fairness (a test-and-set lock is starvation-free under
strong fairness of entering, not under weak) is checked end to end, lasso replay included."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from graph_reference import fair_runs_reference, fair_walk, liveness_found, liveness_reference
from kraftcheck import SF, WF, traces
from kraftcheck.checker.analyses.liveness import (Requirement, check_liveness, doomed_states, explain_fairness,
                                                  fair_components, fair_lasso,
                                                  fairness_requirements)
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.analyses.state_graph import CompiledGraph, build_graph, model_kernels
from kraftcheck.checker.analyses.graph_kernels import (enabled_bits, enabled_bits_reference, renumber, renumber_reference,
                                              reverse)
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Liveness, Predicate
from kraftcheck.cli.main import cli
from kraftcheck.specs import spec_class
from kraftcheck.traces.files import from_text, to_json
from kraftcheck.traces.lasso import lasso_trace, trace_of_lasso
from odd_specs import Grid
from test_graph_kernels import make_graph

# -------------------------------------------------------------------------------------------------
# the analysis against the brute force, on random graphs


def random_case(rng: np.random.Generator):
    """A graph of 1 to 7 states (self-loops and parallel transitions included), a goal mask (about
    one state in four) and 1 to 4 requirements, each one or two labels, weak or strong. Biased so
    that strong fairness matters: transitions into goal states carry labels 0 and 1, the others
    1 and up, so a requirement is often enabled on the way out of a cycle and untaken inside it;
    half the time a ring through every state by a label of its own makes big cycles, and half the
    time weak fairness of every label rules out stopping where something can move."""
    n = int(rng.integers(1, 8))
    nlabels = int(rng.integers(2, 7))
    goal = [bool(x) for x in rng.random(n) < 0.25]
    edges = []
    for _ in range(int(rng.integers(0, 3 * n + 1))):
        v, w = int(rng.integers(n)), int(rng.integers(n))
        edges.append((v, w, int(rng.integers(2)) if goal[w] else int(rng.integers(1, nlabels))))
    if rng.random() < 0.5:
        edges += [(v, (v + 1) % n, nlabels) for v in range(n)]
    requirements = [(frozenset(int(x) for x in rng.choice(nlabels, int(rng.integers(1, 3)), replace=False)),
                     bool(rng.random() < 0.6)) for _ in range(int(rng.integers(1, 4)))]
    if rng.random() < 0.5:
        requirements.append((frozenset(range(nlabels + 1)), False))
    return make_graph(n, edges, nlabels + 1), goal, requirements


def fairness_graphs():
    return st.integers(0, 2**32).map(lambda seed: random_case(np.random.default_rng(seed)))


def _analyse(g, goal, requirements):
    label_bit = np.zeros(g.nlabels, np.uint64)
    weak = strong = 0
    for k, (labels, is_strong) in enumerate(requirements):
        label_bit[list(labels)] |= np.uint64(1 << k)
        if is_strong:
            strong |= 1 << k
        else:
            weak |= 1 << k
    allowed = np.array([not x for x in goal], np.uint8)
    rev_offsets, rev_sources = reverse(g.offsets, g.targets)
    return doomed_states(g.offsets, g.targets, rev_offsets, rev_sources, g.labels, label_bit, allowed,
                         np.uint64(weak), np.uint64(strong))


def _reference(g, goal, requirements):
    moves = {v: [] for v in range(g.n)}
    for v, w, lab in g.edges:
        if v != w:
            moves[v].append((w, lab))
    return fair_runs_reference(g.n, moves, goal, requirements)


@given(fairness_graphs())
@settings(max_examples=1000, deadline=None)
def test_fair_runs_match_the_brute_force_under_weak_and_strong_fairness(case):
    g, goal, requirements = case
    doomed, comps = _analyse(g, goal, requirements)
    expected = _reference(g, goal, requirements)
    assert set(np.flatnonzero(doomed).tolist()) == expected["doomed"]
    assert set(np.flatnonzero(comps.comp >= 0).tolist()) == expected["starts"]
    assert comps.count == expected["fair_components"]


def test_the_random_graphs_exercise_strong_fairness_and_its_recursion():
    # the comparison above is only as good as its graphs: on these, strong fairness must change
    # the answer (against the same requirements taken as weak) and the recursion must run deep
    changed = pruned = deep = 0
    for seed in range(2000):
        g, goal, requirements = random_case(np.random.default_rng(seed))
        _, comps = _analyse(g, goal, requirements)
        _, weak = _analyse(g, goal, [(labels, False) for labels, _ in requirements])
        changed += not np.array_equal(comps.comp >= 0, weak.comp >= 0)
        pruned += comps.rounds > 1
        deep += comps.rounds > 2
    assert changed >= 40 and pruned >= 40, (changed, pruned)
    for seed in (4834, 9164):  # the rare graphs where one pruning leaves another to do
        case = random_case(np.random.default_rng(seed))
        doomed, comps = _analyse(*case)
        assert comps.rounds == 3 and set(np.flatnonzero(doomed).tolist()) == _reference(*case)["doomed"]


def test_a_pruned_component_can_need_pruning_again():
    # 0 -> 1 -> 2 -> 3 -> {0, 1, 2} by label 0; label 1 leads from 0 to the goal 4; label 2 from 0
    # to 1 and from 1 to the goal. SF(1): enabled at 0, never taken: drop 0. Without 0, SF(2) is
    # no longer taken (0 -> 1 is gone) and is enabled at 1: drop 1. {2, 3} is fair.
    edges = [(0, 1, 0), (1, 2, 0), (2, 3, 0), (3, 0, 0), (3, 1, 0), (3, 2, 0), (0, 4, 1), (0, 1, 2), (1, 4, 2),
             (4, 4, 0)]
    g = make_graph(5, edges, 3)
    goal = [False, False, False, False, True]
    strong = [(frozenset([1]), True), (frozenset([2]), True)]
    doomed, comps = _analyse(g, goal, strong)
    assert comps.rounds == 3 and np.flatnonzero(comps.comp >= 0).tolist() == [2, 3] and comps.count == 1
    assert np.flatnonzero(doomed).tolist() == [0, 1, 2, 3]
    weak_doomed, weak = _analyse(g, goal, [(labels, False) for labels, _ in strong])
    assert weak.rounds == 1 and np.flatnonzero(weak.comp >= 0).tolist() == [0, 1, 2, 3]
    for reqs, (d, c) in ((strong, (doomed, comps)), ([(labels, False) for labels, _ in strong], (weak_doomed, weak))):
        expected = _reference(g, goal, reqs)
        assert set(np.flatnonzero(d).tolist()) == expected["doomed"] and c.count == expected["fair_components"]
        assert set(np.flatnonzero(c.comp >= 0).tolist()) == expected["starts"]


def _deterministic(case):
    """``case`` with at most one transition per (state, label), as a model's actions are: a
    lasso is written as labels and read back by following them."""
    g, goal, requirements = case
    seen, edges = set(), []
    for v, w, lab in g.edges:
        if (v, lab) not in seen:
            seen.add((v, lab))
            edges.append((v, w, lab))
    return make_graph(g.n, edges, g.nlabels), goal, requirements


def _as_compiled(g) -> CompiledGraph:
    """The random graph as the analyses' ``CompiledGraph``: breadth-first parents from state 0,
    every state not reached from an earlier root a root of its own (an initial state)."""
    parent = np.full(g.n, -2, np.int64)
    parent_label = np.zeros(g.n, np.uint16)
    for root in range(g.n):
        if parent[root] != -2:
            continue
        parent[root] = -1
        queue = [root]
        for v in queue:
            for e in range(g.offsets[v], g.offsets[v + 1]):
                w = int(g.targets[e])
                if parent[w] == -2:
                    parent[w], parent_label[w] = v, g.labels[e]
                    queue.append(w)
    return CompiledGraph(model=None, states=np.zeros((g.n, 1), np.uint64), parent=parent, parent_label=parent_label,
                         offsets=g.offsets, targets=g.targets, labels=g.labels, initial=0, depth=0)


@given(fairness_graphs().map(_deterministic))
@settings(max_examples=800, deadline=None)
@example(_deterministic(random_case(np.random.default_rng(587))))  # a strong requirement the cycle must take
def test_every_lasso_is_a_fair_behaviour_that_never_reaches_the_goal(case):
    # the lasso from each doomed state, checked by the definitions (graph_reference.fair_walk)
    g, goal, requirements = case
    doomed, comps = _analyse(g, goal, requirements)
    graph = _as_compiled(g)
    label_bit = np.zeros(g.nlabels, np.uint64)
    for k, (labels, _) in enumerate(requirements):
        label_bit[list(labels)] |= np.uint64(1 << k)
    allowed = np.array([not x for x in goal], np.uint8)
    moves = {v: [(int(g.targets[e]), int(g.labels[e])) for e in range(g.offsets[v], g.offsets[v + 1])
                 if g.targets[e] != v] for v in range(g.n)}
    enabled = {u: {k for k, (labels, _) in enumerate(requirements) if any(lab in labels for _, lab in moves[u])}
               for u in range(g.n)}
    weak = np.uint64(sum(1 << k for k, (_, strong) in enumerate(requirements) if not strong))
    strong = np.uint64(sum(1 << k for k, (_, strong) in enumerate(requirements) if strong))
    for v in np.flatnonzero(doomed).tolist():
        lasso = fair_lasso(graph, v, allowed, comps, label_bit, weak, strong)
        states = [lasso.start]
        for lab in lasso.labels:  # every step is a transition of the graph
            nxt = [w for w, label in moves[states[-1]] + [(states[-1], None)] if label == lab]
            nxt += [int(g.targets[e]) for e in range(g.offsets[states[-1]], g.offsets[states[-1] + 1])
                    if g.labels[e] == lab and g.targets[e] == states[-1]]
            assert nxt, (states, lab)
            states.append(nxt[0])
        assert states[lasso.trigger] == v and not any(goal[s] for s in states[lasso.trigger:])
        if lasso.stutter:
            walk = [(states[-1], None, states[-1])]
        else:
            assert states[-1] == states[lasso.cycle_from] and len(lasso.labels) > lasso.cycle_from
            walk = [(states[i], lasso.labels[i], states[i + 1]) for i in range(lasso.cycle_from, len(lasso.labels))]
        assert fair_walk(walk, requirements, enabled), walk
        # and it says how, consistently (explain_fairness raises on a requirement it cannot meet)
        reqs = [Requirement(f"r{k}", tuple(sorted(labels)), strong) for k, (labels, strong) in enumerate(requirements)]
        for k, how in enumerate(explain_fairness(graph, lasso, reqs)):
            if how["how"] == "taken":
                assert lasso.labels[how["step"]] in requirements[k][0]
            elif how["how"] == "disabled":
                assert k not in enabled[states[how["step"]]]
            else:
                assert requirements[k][1] and all(k not in enabled[u] for u, _, _ in walk)


# A hand example where strong fairness needs the recursion: 0 <-> 1 by label 0, 1 <-> 2 by label 1,
# a self-loop at 1 (label 3, stuttering) and label 2 from 1 to the goal 3 (which loops by label 0).
HAND = [(0, 1, 0), (1, 0, 0), (1, 2, 1), (2, 1, 1), (1, 1, 3), (1, 3, 2), (3, 3, 0)]


def test_strong_fairness_removes_the_states_that_enable_an_untaken_requirement():
    g = make_graph(4, HAND, 4)
    goal = [False, False, False, True]  # state 3 is the goal; label 2 leads there from 1 only
    # WF(label 2): enabled at 1 only, so disabled at 0 and 2: going round 0-1-2 forever is weakly fair
    doomed, comps = _analyse(g, goal, [(frozenset([2]), False)])
    assert np.flatnonzero(doomed).tolist() == [0, 1, 2] and comps.count == 1
    # SF(label 2): enabled at 1, infinitely often on that round, never taken: unfair. Runs must
    # avoid 1; {0} and {2} alone are fair (stuttering there, label 2 is never enabled)
    doomed, comps = _analyse(g, goal, [(frozenset([2]), True)])
    assert np.flatnonzero(doomed).tolist() == [0, 1, 2] and comps.count == 2
    assert np.flatnonzero(comps.comp >= 0).tolist() == [0, 2]
    # and if 0 and 2 must also move (WF of labels 0 and 1 each): no fair run avoids the goal
    doomed, comps = _analyse(g, goal, [(frozenset([2]), True), (frozenset([0]), False), (frozenset([1]), False)])
    assert not doomed.any() and comps.count == 0
    for reqs in ([(frozenset([2]), False)], [(frozenset([2]), True)],
                 [(frozenset([2]), True), (frozenset([0]), False), (frozenset([1]), False)]):
        expected = _reference(g, goal, reqs)
        doomed, comps = _analyse(g, goal, reqs)
        assert set(np.flatnonzero(doomed).tolist()) == expected["doomed"] and comps.count == expected["fair_components"]


def test_under_weak_fairness_only_one_round_gives_the_fair_components():
    g = make_graph(4, HAND, 4)
    label_bit = np.array([1, 2, 4, 0], np.uint64)
    allowed = np.array([1, 1, 1, 0], np.uint8)
    comps = fair_components(g.offsets, g.targets, g.labels, label_bit, allowed, np.uint64(7), np.uint64(0))
    # {0, 1, 2} takes labels 0 and 1 and disables label 2 at 0: fair
    assert comps.count == 1 and comps.comp.tolist() == [0, 0, 0, -1]
    assert int(comps.taken[0]) == 3 and int(comps.disabled[0]) & 4


@given(st.integers(0, 2**31).map(np.random.default_rng))
@settings(max_examples=100, deadline=None)
def test_enabled_bits_kernel_matches_its_reference(rng):
    n = int(rng.integers(0, 12))
    nlabels = int(rng.integers(1, 5))
    edges = [(int(rng.integers(n)), int(rng.integers(n)), int(rng.integers(nlabels)))
             for _ in range(int(rng.integers(0, 3 * n + 1)))] if n else []
    g = make_graph(n, edges, nlabels)
    label_bit = rng.integers(0, 2**63, nlabels, dtype=np.uint64) | np.uint64(1 << 63)
    got = enabled_bits(g.offsets, g.targets, g.labels, label_bit)
    assert got.dtype == np.uint64 and [int(x) for x in got] == enabled_bits_reference(g.offsets, g.targets, g.labels,
                                                                                      label_bit)


@given(st.integers(0, 2**31).map(np.random.default_rng))
@settings(max_examples=100, deadline=None)
def test_renumber_kernel_matches_its_reference(rng):
    ncomp = int(rng.integers(0, 6))
    comp = rng.integers(-1, ncomp, int(rng.integers(0, 20))).astype(np.int64)
    number = rng.integers(-1, 10, ncomp).astype(np.int64)
    expected = renumber_reference(comp, number)
    renumber(comp, number)
    assert comp.tolist() == expected.tolist()


# -------------------------------------------------------------------------------------------------
# names: disjunctions, partly bound instances, refusal before exploring


def _model(name, **params):
    cls = spec_class(name)
    return Model(cls(cls.Params(**params)))


def test_fairness_names_resolve_to_the_labels_they_cover():
    model = _model("two_phase", rm=3)
    text = [str(lab) for lab in model.labels]

    def covered(entry):
        (req,) = fairness_requirements(model, (entry,))
        return req, sorted(text[i] for i in req.labels)

    req, labels = covered("RMPrepare")
    assert (req.name, req.strong) == ("RMPrepare", False) and len(labels) == 3
    req, labels = covered("RMPrepare(rm = rm2)")    # fully bound: one instance, named as traces show it
    assert req.name == "RMPrepare(rm=rm2)" and labels == ["RMPrepare(rm=rm2)"]
    req, labels = covered(WF("TMCommit", "TMAbort"))  # the disjunction: either one
    assert req.name == "WF(TMCommit, TMAbort)" and labels == ["TMAbort", "TMCommit"]
    req, labels = covered(SF("RMPrepare(rm=rm1)", "TMAbort"))
    assert req.name == "SF(RMPrepare(rm=rm1), TMAbort)" and req.strong and labels == ["RMPrepare(rm=rm1)", "TMAbort"]
    assert [r.name for r in fairness_requirements(model, (SF("RMPrepare(*)"),))] == \
        ["SF(RMPrepare(rm=rm1))", "SF(RMPrepare(rm=rm2))", "SF(RMPrepare(rm=rm3))"]
    assert fairness_requirements(model, ("TMCommit",)) == fairness_requirements(model, (WF("TMCommit"),))


def test_a_partly_bound_instance_covers_every_instance_whose_bound_params_match():
    model = Model(spec_class("mutex")(spec_class("mutex").Params()))
    assert [str(model.labels[i]) for i in fairness_requirements(model, ("Enter(p=p2)",))[0].labels] == \
        ["Enter(p=p2)"]
    # the Kafka model under --election any: Restart(b, leader); bind one parameter, either one
    kafka = _model("kafka", brokers=2, min_isr=1, fences=0, min_isr_changes=0, election="any")

    def covered(entry):
        return [str(kafka.labels[i]) for i in fairness_requirements(kafka, (entry,))[0].labels]

    assert covered(WF("Restart(b=b1)")) == ["Restart(b=b1, leader=b1)", "Restart(b=b1, leader=b2)",
                                            "Restart(b=b1, leader=none)"]
    assert covered("Restart(leader=none)") == ["Restart(b=b1, leader=none)", "Restart(b=b2, leader=none)"]
    assert covered(SF("Restart(leader=none)", "Unfence(b=b2, leader=b1)")) == \
        ["Unfence(b=b2, leader=b1)", "Restart(b=b1, leader=none)", "Restart(b=b2, leader=none)"]


@pytest.mark.parametrize("entry,message", [
    ("FillHuge", "'FillHuge', which is neither an action.*FillSmall, FillBig"),
    ("FillBig(x=1)", "'FillBig\\(x=1\\)', but action FillBig takes no parameters; write FillBig$"),
    (WF("FillBig", "Nope(a=1)"), "'Nope\\(a=1\\)'"),
])
def test_names_that_cover_nothing_are_refused(entry, message):
    with pytest.raises(SpecError, match=message):
        fairness_requirements(_model("die_hard"), (entry,))


@pytest.mark.parametrize("entry", ["Mark(k=1)", "Mark(i=2)", WF("ClearRow", "Mark(i=0, j=3)")])
def test_a_name_that_binds_a_missing_parameter_or_value_says_what_the_action_takes(entry):
    with pytest.raises(SpecError, match=r"which covers no instance of action Mark: its parameters are i in 0, 1; "
                                        r"j in 0, 1, 2; write Mark, Mark\(\*\) or Mark\(i=0, \.\.\.\) as traces "
                                        r"show it$"):
        fairness_requirements(_grid(), (entry,))


def test_malformed_declarations_are_refused_when_declared():
    with pytest.raises(SpecError, match="one or more action names"):
        WF()
    with pytest.raises(SpecError, match="stands alone"):
        SF("Enter(*)", "Leave")
    p = Predicate("big holds 4", lambda v: v["big"] == 4)
    with pytest.raises(SpecError, match="once=True.*no after"):
        Liveness("x", p, after=p, once=True)
    with pytest.raises(SpecError, match="tuple of requirements"):
        Liveness("x", p, fair="FillBig")


BAD_SPEC = '''
from kraftcheck.checker.spec import Liveness, Predicate, WF
from kraftcheck.specs.die_hard import DieHard


class Bad(DieHard):
    name = "bad"

    def liveness(self):
        return [Liveness("four", Predicate("big holds 4", lambda v: v[FIELD] == 4), fair=(WF("FillBig", NAME),))]
'''


@pytest.mark.parametrize("field,name,message", [
    ("big", "FillHuge", "liveness property four: fairness names 'FillHuge', which is neither an action"),
    ("bigg", "FillSmall", "liveness property four: the predicate 'big holds 4' reads field 'bigg', which the spec "
                          "does not have (fields: small, big, small_capacity, big_capacity)"),
])
def test_the_cli_refuses_a_bad_name_before_exploring(tmp_path, monkeypatch, field, name, message):
    spec_file = tmp_path / "bad.py"
    spec_file.write_text(BAD_SPEC.replace("FIELD", repr(field)).replace("NAME", repr(name)))
    from kraftcheck.checker.explore.engine import Engine
    monkeypatch.setattr(Engine, "explore", lambda *a, **k: pytest.fail("explored before refusing"))
    result = CliRunner().invoke(cli, ["check", "--no-color", "--spec", f"{spec_file}:Bad", "--liveness",
                                      "--json", str(tmp_path / "r.json"), "--trace-dir", str(tmp_path / "t")])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.output
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "t").exists()


# -------------------------------------------------------------------------------------------------
# the new forms on specs, against the brute force


def _die_hard_four(**kw):
    return Liveness("four", Predicate("big holds 4", lambda v: v["big"] == 4), **kw)


def _two_phase_decides(fair, **kw):
    decided = Predicate("every RM committed or aborted", lambda v: (v["rm_state"] >= 2).all(axis=1))
    return Liveness("rms_decide", decided, fair=fair, **kw)


def _grid():
    return Model(Grid(Grid.Params(n=2)))


def _row0_full_to_empty(fair):
    return Liveness("row0", Predicate("row 0 is empty", lambda v: ~v["grid"][:, 0].any(axis=1)),
                    after=Predicate("row 0 is full", lambda v: v["grid"][:, 0].all(axis=1)), fair=fair)

SPEC_CASES = [
    ("mutex test-and-set, SF of entering", lambda: _model("mutex", algorithm="test_and_set", strong=True), None),
    ("mutex peterson, SF of entering", lambda: _model("mutex", strong=True), None),
    ("mutex test-and-set, SF of p2 entering only", lambda: _model("mutex", algorithm="test_and_set"),
     Liveness("p1", Predicate("p1 critical", lambda v: v["pc"][:, 0] == 3),
              after=Predicate("p1 waiting", lambda v: v["pc"][:, 0] == 2),
              fair=(SF("Enter(p=p2)"), "Enter(p=p1)", "Leave(*)"))),
    ("two phase, WF of the TM deciding either way", lambda: _model("two_phase", rm=2),
     _two_phase_decides(("TMRcvPrepared(*)", WF("TMCommit", "TMAbort"), "RMPrepare(*)", "RMRcvCommitMsg(*)",
                         "RMRcvAbortMsg(*)"))),
    ("two phase, SF of the RMs' steps", lambda: _model("two_phase", rm=2),
     _two_phase_decides((SF("RMPrepare", "RMChooseToAbort"), "TMRcvPrepared(*)", SF("TMCommit"),
                         "RMRcvCommitMsg(*)", "RMRcvAbortMsg(*)"))),
    ("two phase, eventually decided once, fair", lambda: _model("two_phase", rm=2),
     _two_phase_decides(("TMRcvPrepared(*)", WF("TMCommit", "TMAbort"), "RMPrepare(*)", "RMRcvCommitMsg(*)",
                         "RMRcvAbortMsg(*)"), once=True)),
    ("two phase, eventually decided once, no fairness", lambda: _model("two_phase", rm=2),
     _two_phase_decides((), once=True)),
    ("die hard, eventually 4, SF of the pours", lambda: _model("die_hard"),
     _die_hard_four(fair=(SF("FillBig"), SF("SmallToBig")), once=True)),
    ("die hard, always eventually 4, SF", lambda: _model("die_hard"),
     _die_hard_four(fair=(SF("FillBig", "SmallToBig"),))),
    # Mark(i, j) has two parameters: bind one of them
    ("grid, row 0 full leads to empty, WF of a row", lambda: _grid(),
     _row0_full_to_empty(fair=(WF("ClearRow(i=0)"), WF("Mark(i=1)")))),
    ("grid, row 0 full leads to empty, SF of a row", lambda: _grid(),
     _row0_full_to_empty(fair=(SF("ClearRow(i=0)"), WF("Mark(i=1)")))),
    ("grid, always eventually empty, SF of a column or a clear", lambda: _grid(),
     Liveness("empty", Predicate("the grid is empty", lambda v: v["marked"] == 0),
              fair=(SF("Mark(j=2)", "ClearRow(i=1)"), "ClearRow(*)", WF("Mark(i=0, j=0)")))),
    ("grid, eventually empty once, WF of column 0", lambda: _grid(),
     Liveness("empty_once", Predicate("row 1 is full", lambda v: v["grid"][:, 1].all(axis=1)), once=True,
              fair=(WF("Mark(i=1)"), "Mark(j=0)"))),
]



def _prop(model, which):
    return model.spec.liveness()[0] if which is None else which


def _compiled(model):
    kernels = model_kernels(model)
    return build_graph(model, kernels), kernels


@pytest.mark.parametrize("case", SPEC_CASES, ids=[c[0] for c in SPEC_CASES])
def test_fairness_forms_on_specs_agree_with_the_brute_force(case):
    _, make, which = case
    model = make()
    prop = _prop(model, which)
    graph, kernels = _compiled(model)
    found = check_liveness(graph, kernels, prop)
    assert liveness_found(found) == liveness_reference(model, prop)
    if found.lasso is not None:  # every lasso found replays: fair to every requirement, the goal never reached
        trace = from_text(to_json(trace_of_lasso(graph, found, prop, {"engine": "engine"})))
        assert traces.replay(trace, spec=_declaring(type(model.spec), prop)).ok


def _declaring(cls, prop):
    """``cls`` with ``prop`` as its only liveness property: replay finds the property in the spec."""
    return type(cls.__name__, (cls,), {"liveness": lambda self: [prop]})


def test_spec_cases_cover_both_verdicts_and_both_strengths():
    verdicts, strengths = set(), set()
    for _, make, which in SPEC_CASES:
        model = make()
        prop = _prop(model, which)
        graph, kernels = _compiled(model)
        verdicts.add(check_liveness(graph, kernels, prop).verdict)
        strengths |= {r.strong for r in fairness_requirements(model, prop.fair)}
    assert verdicts == {"holds", "violated"} and strengths == {True, False}


def test_a_test_and_set_lock_is_starvation_free_under_strong_fairness_only():
    def verdict(strong):
        model = _model("mutex", algorithm="test_and_set", strong=strong)
        graph, kernels = _compiled(model)
        return check_liveness(graph, kernels, model.spec.liveness()[0])

    assert verdict(False).verdict == "violated" and verdict(True).verdict == "holds"


def test_eventually_once_starts_its_lasso_at_an_initial_state():
    model = _model("two_phase", rm=2)
    graph, kernels = _compiled(model)
    prop = _two_phase_decides((), once=True)
    found = check_liveness(graph, kernels, prop)
    assert found.formula == "<>(every RM committed or aborted)"
    assert found.verdict == "violated" and found.lasso.trigger == 0 and found.lasso.stutter
    assert found.trigger_states == graph.initial  # every initial state is undecided
    # replay holds a <>Q lasso to its initial state: the same behaviour triggered later is refused
    die_hard = _model("die_hard")
    graph, kernels = _compiled(die_hard)
    prop = _die_hard_four(fair=(SF("FillBig"), SF("SmallToBig")), once=True)
    found = check_liveness(graph, kernels, prop)
    assert found.verdict == "violated" and found.lasso.trigger == 0 and found.lasso.cycle_from >= 1
    data = json.loads(to_json(trace_of_lasso(graph, found, prop)))
    declaring = _declaring(type(die_hard.spec), prop)
    assert traces.replay(from_text(json.dumps(data)), spec=declaring).ok
    data["graph"]["lasso"]["trigger"] = data["graph"]["violation"]["step"] = 1
    report = traces.replay(from_text(json.dumps(data)), spec=declaring)
    assert not report.ok and "the trigger must be step 0" in str(report.error)


def test_a_lasso_says_how_it_meets_each_requirement(tmp_path):
    result = CliRunner().invoke(cli, ["check", "--no-color", "--spec", "mutex", "--param", "algorithm=test_and_set",
                                      "--liveness", "--json", str(tmp_path / "r.json"),
                                      "--trace-dir", str(tmp_path / "t")])
    assert result.exit_code == 1, result.output
    (prop,) = json.loads((tmp_path / "r.json").read_text())["liveness"]["properties"]
    # the cycle: Try(p2) from step 1, Enter(p2) from step 2, Leave(p2) from step 3 back to step 1;
    # p1 waits throughout, and its Enter is disabled at step 3, where p2 holds the lock
    assert prop["lasso"]["fairness"] == [
        {"requirement": "Enter(p=p1)", "strength": "weak", "how": "disabled", "step": 3},
        {"requirement": "Enter(p=p2)", "strength": "weak", "how": "taken", "step": 2},
        {"requirement": "Leave(p=p1)", "strength": "weak", "how": "disabled", "step": 1},
        {"requirement": "Leave(p=p2)", "strength": "weak", "how": "taken", "step": 3},
    ]
    trace = json.loads((tmp_path / "t" / prop["trace_file"].split("/")[-1]).read_text())
    assert trace["graph"]["lasso"]["fairness"] == prop["lasso"]["fairness"]
    shown = CliRunner().invoke(cli, ["trace", "show", "--no-color", prop["trace_file"]])
    assert shown.exit_code == 0, shown.output
    assert "the cycle meets them: Enter(p=p1) disabled at step 3; Enter(p=p2) taken from step 2;" in \
        " ".join(shown.output.split())


def test_a_weakly_fair_cycle_is_refused_by_replay_under_strong_fairness():
    # test-and-set's starving lasso is weakly fair (p1's Enter is disabled while p2 holds the lock)
    # but not strongly fair: p1's Enter is enabled whenever the lock is free, and never taken
    model = _model("mutex", algorithm="test_and_set")
    graph, kernels = _compiled(model)
    prop = model.spec.liveness()[0]
    found = check_liveness(graph, kernels, prop)
    assert traces.replay(trace_of_lasso(graph, found, prop)).ok
    strong = _model("mutex", algorithm="test_and_set", strong=True)
    strong_prop = strong.spec.liveness()[0]
    steps = [(s.label, tuple(s.state)) for s in graph.steps(found.lasso.start, found.lasso.labels)]
    fair = [r.name for r in fairness_requirements(strong, strong_prop.fair)]
    assert "SF(Enter(p=p1))" in fair
    trace = lasso_trace(strong, steps, cycle_start=found.lasso.cycle_from, stutter=False, trigger=found.lasso.trigger,
                        check=strong_prop.name, formula=strong_prop.formula(), fair=fair)
    report = traces.replay(trace)
    assert not report.ok and "not fair to SF(Enter(p=p1))" in str(report.error)
    assert "strong fairness forbids" in str(report.error)


def test_the_cli_reports_strong_fairness_and_holds_for_test_and_set(tmp_path):
    result = CliRunner().invoke(cli, ["check", "--no-color", "--spec", "mutex", "--param", "algorithm=test_and_set",
                                      "--param", "strong=true", "--liveness", "--trace-dir", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    assert "p1_trying_leads_to_p1_critical: holds" in result.output
    assert "fairness (weak unless marked SF) of: SF(Enter(*)), Leave(*)" in result.output


def test_the_memory_budget_counts_what_strong_fairness_adds():
    from kraftcheck.checker.errors import UsageError
    from kraftcheck.checker.explore.result import memory_in_use
    graph, _ = _compiled(_model("two_phase", rm=3))
    budget = memory_in_use() + graph.analysis_bytes() + (64 << 20)
    graph.check_budget(budget)  # room enough without the extra
    with pytest.raises(UsageError, match="raise --max-memory"):
        graph.check_budget(budget, extra_per_state=(256 << 20) // graph.size + 1)
