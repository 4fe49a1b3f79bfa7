"""The compiled graph kernels (``checker/analyses/graph_kernels.py``) and the dense state numbering
(``checker/kernels/state_index.py``) checked on random directed multigraphs.

Each kernel is compared with its plain-Python reference twin where it has one, with networkx where
networkx answers the same question, and with a straightforward Python reading of its docstring
otherwise. The graphs are in the kernels' compressed sparse row form (``offsets`` int64,
``targets`` uint32, ``labels`` uint16) and include self-loops and parallel transitions; the masks
are uint8. Every kernel also has one small hand-checked example (``HAND`` below).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftcheck.checker.analyses.graph_kernels import (component_exits, component_fairness, component_fairness_reference,
                                              quiet_states, reach, reach_reference, reverse, shortest_path,
                                              strongly_connected, strongly_connected_reference, transition_inside)
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.kernels.state_index import StateIndex

ALL_ONES = (1 << 64) - 1
SETTINGS = settings(max_examples=150, deadline=None)


# -------------------------------------------------------------------------------------------------
# graphs


@dataclass
class Graph:
    n: int
    edges: list[tuple[int, int, int]]  # (source, target, label) in transition-position order
    offsets: np.ndarray
    targets: np.ndarray
    labels: np.ndarray
    nlabels: int

    def digraph(self, allowed=None) -> nx.DiGraph:
        """The simple digraph induced by the allowed states (all states if ``allowed`` is None)."""
        keep = [v for v in range(self.n) if allowed is None or allowed[v]]
        g = nx.DiGraph()
        g.add_nodes_from(keep)
        g.add_edges_from((v, w) for v, w, _ in self.edges if v in g and w in g)
        return g


def make_graph(n: int, edges: list[tuple[int, int, int]], nlabels: int | None = None) -> Graph:
    """CSR form of ``edges``; transitions of one state keep their order in the list."""
    ordered = sorted(edges, key=lambda e: e[0])  # stable
    degree = np.bincount([v for v, _, _ in ordered], minlength=n).astype(np.int64) if ordered else np.zeros(n, np.int64)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(degree, out=offsets[1:])
    targets = np.array([w for _, w, _ in ordered], dtype=np.uint32)
    labels = np.array([lab for _, _, lab in ordered], dtype=np.uint16)
    if nlabels is None:
        nlabels = 1 + max((lab for _, _, lab in ordered), default=0)
    return Graph(n, ordered, offsets, targets, labels, nlabels)


@st.composite
def graphs(draw, min_nodes: int = 0, max_nodes: int = 40, max_labels: int = 4) -> Graph:
    """Up to ``max_nodes`` states and about 120 transitions, with self-loops and parallel ones."""
    n = draw(st.integers(min_nodes, max_nodes))
    nlabels = draw(st.integers(1, max_labels))
    if n == 0:
        return make_graph(0, [], nlabels)
    node = st.integers(0, n - 1)
    label = st.integers(0, nlabels - 1)
    m = draw(st.integers(0, min(100, 4 * n)))  # drawn first: lists alone come out too sparse
    edges = draw(st.lists(st.tuples(node, node, label), min_size=m, max_size=m))
    edges += [(v, v, lab) for v, lab in draw(st.lists(st.tuples(node, label), max_size=10))]  # self-loops
    if edges:  # parallel transitions: copies of drawn ones, with the same or another label
        for i, lab in draw(st.lists(st.tuples(st.integers(0, len(edges) - 1), label), max_size=10)):
            edges.append((edges[i][0], edges[i][1], lab))
    order = draw(st.permutations(range(len(edges))))
    return make_graph(n, [edges[i] for i in order], nlabels)


def masks(n: int, p_one: st.SearchStrategy[bool] | None = None) -> st.SearchStrategy[np.ndarray]:
    bit = p_one if p_one is not None else st.booleans()
    return st.lists(bit, min_size=n, max_size=n).map(lambda bs: np.array(bs, dtype=np.uint8))


def mostly_ones(n: int) -> st.SearchStrategy[np.ndarray]:
    """An ``allowed`` mask: everything, or about three states in four."""
    return st.one_of(st.just(np.ones(n, np.uint8)), masks(n, st.integers(0, 3).map(bool)))


@st.composite
def graph_and_allowed(draw, min_nodes: int = 0) -> tuple[Graph, np.ndarray]:
    g = draw(graphs(min_nodes=min_nodes))
    return g, draw(mostly_ones(g.n))


def label_bits(nlabels: int) -> st.SearchStrategy[np.ndarray]:
    """One uint64 per label: a few low bits and bit 63 (to catch signed arithmetic), or any word."""
    few = st.sets(st.sampled_from([0, 1, 2, 3, 63])).map(lambda bs: sum(1 << b for b in bs))
    word = st.one_of(few, st.integers(0, ALL_ONES))
    return st.lists(word, min_size=nlabels, max_size=nlabels).map(lambda ws: np.array(ws, dtype=np.uint64))


def reference_comp(g: Graph, allowed: np.ndarray) -> tuple[np.ndarray, int, list[frozenset[int]]]:
    """A component array numbered from the reference components (another numbering than Tarjan's)."""
    comps = strongly_connected_reference(g.offsets, g.targets, allowed)
    comp = np.full(g.n, -1, np.int64)
    for i, members in enumerate(comps):
        comp[list(members)] = i
    return comp, len(comps), comps


def partition(comp: np.ndarray) -> set[frozenset[int]]:
    groups: dict[int, set[int]] = {}
    for v, c in enumerate(comp.tolist()):
        if c >= 0:
            groups.setdefault(c, set()).add(v)
    return {frozenset(s) for s in groups.values()}


def enabled_bits(g: Graph, label_bit: np.ndarray, v: int) -> int:
    """The actions that change state ``v`` (self-loops are stuttering)."""
    out = 0
    for e in range(g.offsets[v], g.offsets[v + 1]):
        if g.edges[e][1] != v:
            out |= int(label_bit[g.edges[e][2]])
    return out


# The hand-checked example:   5 -> {0, 1, 2} -> {3, 4}, with self-loops at 3, 4, 5 and a parallel
# pair 0 -> 1. Labels 0, 1, 2 have fairness bits 1, 2, 4.
HAND_EDGES = [
    (0, 1, 0), (0, 1, 1),  # positions 0, 1
    (1, 2, 0),             # 2
    (2, 0, 1), (2, 3, 1),  # 3, 4
    (3, 3, 0), (3, 4, 2),  # 5, 6
    (4, 3, 2), (4, 4, 0),  # 7, 8
    (5, 0, 0), (5, 5, 1),  # 9, 10
]
HAND_BITS = np.array([1, 2, 4], np.uint64)


@pytest.fixture
def hand() -> Graph:
    g = make_graph(6, HAND_EDGES)
    assert g.offsets.tolist() == [0, 2, 3, 5, 7, 9, 11]
    return g


def ones(n: int) -> np.ndarray:
    return np.ones(n, np.uint8)


def mask_of(n: int, states) -> np.ndarray:
    m = np.zeros(n, np.uint8)
    m[list(states)] = 1
    return m


# -------------------------------------------------------------------------------------------------
# reverse


def test_reverse_by_hand(hand):
    rev_offsets, rev_sources = reverse(hand.offsets, hand.targets)
    assert rev_offsets.tolist() == [0, 2, 4, 5, 8, 10, 11]
    assert rev_sources.tolist() == [2, 5, 0, 0, 1, 2, 3, 4, 3, 4, 5]


@given(graphs())
@SETTINGS
def test_reverse_is_the_transposed_multigraph(g):
    rev_offsets, rev_sources = reverse(g.offsets, g.targets)
    assert rev_offsets.dtype == np.int64 and rev_sources.dtype == np.uint32
    assert rev_offsets.shape == (g.n + 1,) and rev_sources.shape == g.targets.shape
    assert rev_offsets[0] == 0 and np.all(np.diff(rev_offsets) >= 0)
    reversed_edges = Counter((int(rev_sources[e]), w) for w in range(g.n)
                             for e in range(rev_offsets[w], rev_offsets[w + 1]))
    assert reversed_edges == Counter((v, w) for v, w, _ in g.edges)
    # "predecessors of each state in order": in the order of the forward transitions
    for w in range(g.n):
        assert rev_sources[rev_offsets[w]:rev_offsets[w + 1]].tolist() == [v for v, t, _ in g.edges if t == w]


# -------------------------------------------------------------------------------------------------
# reach


def test_reach_by_hand(hand):
    reached = np.zeros(6, np.uint8)
    assert reach(hand.offsets, hand.targets, mask_of(6, [3]), ones(6), reached) == 2
    assert reached.tolist() == [0, 0, 0, 1, 1, 0]
    allowed = mask_of(6, [0, 1, 3, 4, 5])  # 2 cut out: 5 reaches 0 and 1 only
    reached = np.zeros(6, np.uint8)
    assert reach(hand.offsets, hand.targets, mask_of(6, [5]), allowed, reached) == 3
    assert reached.tolist() == [1, 1, 0, 0, 0, 1]
    # on the reversed graph: the states that can reach 3
    rev_offsets, rev_sources = reverse(hand.offsets, hand.targets)
    reached = np.zeros(6, np.uint8)
    assert reach(rev_offsets, rev_sources, mask_of(6, [3]), ones(6), reached) == 6
    reached = np.zeros(6, np.uint8)
    assert reach(rev_offsets, rev_sources, mask_of(6, [3]), allowed, reached) == 2
    assert reached.tolist() == [0, 0, 0, 1, 1, 0]
    # a seed that is not allowed reaches nothing
    reached = np.zeros(6, np.uint8)
    assert reach(hand.offsets, hand.targets, mask_of(6, [2]), allowed, reached) == 0
    assert not reached.any()


@st.composite
def reach_cases(draw):
    g, allowed = draw(graph_and_allowed())
    seeds = draw(st.one_of(masks(g.n), masks(g.n, st.integers(0, 7).map(lambda k: k == 0))))
    return g, allowed, seeds


@given(reach_cases())
@SETTINGS
def test_reach_matches_reference_and_networkx(case):
    g, allowed, seeds = case
    reached = np.zeros(g.n, np.uint8)
    count = reach(g.offsets, g.targets, seeds, allowed, reached)
    assert reached.tolist() == reach_reference(g.offsets, g.targets, seeds, allowed).tolist()
    assert count == int(reached.sum())
    sub = g.digraph(allowed)
    expected = set()
    for s in range(g.n):
        if seeds[s] and allowed[s]:
            expected |= {s} | nx.descendants(sub, s)
    assert set(np.flatnonzero(reached).tolist()) == expected


@given(reach_cases())
@SETTINGS
def test_reach_on_the_reversed_graph_finds_the_states_that_can_reach_a_seed(case):
    g, allowed, seeds = case
    rev_offsets, rev_sources = reverse(g.offsets, g.targets)
    reached = np.zeros(g.n, np.uint8)
    count = reach(rev_offsets, rev_sources, seeds, allowed, reached)
    sub = g.digraph(allowed)
    expected = set()
    for s in range(g.n):
        if seeds[s] and allowed[s]:
            expected |= {s} | nx.ancestors(sub, s)
    assert set(np.flatnonzero(reached).tolist()) == expected
    assert count == len(expected)


# -------------------------------------------------------------------------------------------------
# strongly connected components


def test_strongly_connected_by_hand(hand):
    comp = np.empty(6, np.int64)
    assert strongly_connected(hand.offsets, hand.targets, ones(6), comp) == 3
    # 5 -> {0,1,2} -> {3,4} is a chain, so "sinks first" fixes the numbering
    assert comp.tolist() == [1, 1, 1, 0, 0, 2]
    comp = np.empty(6, np.int64)
    assert strongly_connected(hand.offsets, hand.targets, mask_of(6, [0, 1, 3, 4, 5]), comp) == 4
    assert comp[2] == -1
    assert partition(comp) == {frozenset({0}), frozenset({1}), frozenset({3, 4}), frozenset({5})}
    assert comp[0] > comp[1] and comp[5] > comp[0]  # 5 -> 0 -> 1


@given(graph_and_allowed())
@SETTINGS
def test_strongly_connected_partitions_like_reference_and_networkx(case):
    g, allowed = case
    comp = np.full(g.n, 12345, np.int64)  # garbage: the kernel must set every entry
    ncomp = strongly_connected(g.offsets, g.targets, allowed, comp)
    for v in range(g.n):
        assert (comp[v] == -1) == (not allowed[v])
    assert sorted(set(comp[comp >= 0].tolist())) == list(range(ncomp))
    got = partition(comp)
    assert len(got) == ncomp
    assert got == set(strongly_connected_reference(g.offsets, g.targets, allowed))
    assert got == {frozenset(c) for c in nx.strongly_connected_components(g.digraph(allowed))}


@given(graph_and_allowed())
@SETTINGS
def test_strongly_connected_numbers_sinks_first(case):
    g, allowed = case
    comp = np.empty(g.n, np.int64)
    strongly_connected(g.offsets, g.targets, allowed, comp)
    # reverse topological order: a transition inside the allowed states never leads to a later component
    for v, w, _ in g.edges:
        if allowed[v] and allowed[w]:
            assert comp[w] <= comp[v], (v, w)


# -------------------------------------------------------------------------------------------------
# shortest path


def check_path(g: Graph, path: np.ndarray, start: int, goal: np.ndarray, allowed: np.ndarray) -> None:
    """``path`` is a chain of transitions from ``start`` through allowed states ending at a goal."""
    here = start
    for e in path.tolist():
        assert 0 <= e < len(g.edges)
        v, w, _ = g.edges[e]
        assert v == here
        assert allowed[w]
        here = w
    assert goal[here]


def test_shortest_path_by_hand(hand):
    goal = mask_of(6, [4])
    path = shortest_path(hand.offsets, hand.targets, 5, goal, ones(6))
    # 5 -> 0 -> 1 -> 2 -> 3 -> 4; either of the parallel transitions 0 -> 1 will do
    assert len(path) == 5 and path[0] == 9 and path[1] in (0, 1) and path[2:].tolist() == [2, 4, 6]
    check_path(hand, path, 5, goal, ones(6))
    # the nearest of two goals
    path = shortest_path(hand.offsets, hand.targets, 0, mask_of(6, [2, 4]), ones(6))
    assert path.tolist()[1:] == [2] and path[0] in (0, 1)
    # no path: 2 not allowed; or the goal upstream of the start
    assert shortest_path(hand.offsets, hand.targets, 5, goal, mask_of(6, [0, 1, 3, 4, 5])).tolist() == [-1]
    assert shortest_path(hand.offsets, hand.targets, 3, mask_of(6, [0]), ones(6)).tolist() == [-1]
    # a goal that is not allowed is never entered
    assert shortest_path(hand.offsets, hand.targets, 3, goal, mask_of(6, [3])).tolist() == [-1]


def test_shortest_path_from_a_goal_is_empty(hand):
    # the shortest path from a goal state to a goal state has no transitions (not [-1], not a cycle)
    path = shortest_path(hand.offsets, hand.targets, 3, mask_of(6, [3, 4]), ones(6))
    assert path.dtype == np.int64 and path.shape == (0,)
    path = shortest_path(hand.offsets, hand.targets, 0, mask_of(6, [0]), ones(6))
    assert path.shape == (0,)


@st.composite
def path_cases(draw):
    g, allowed = draw(graph_and_allowed(min_nodes=1))
    start = draw(st.integers(0, g.n - 1))
    allowed = allowed.copy()
    allowed[start] = 1  # the path runs inside the allowed states, the start included
    goal = draw(st.one_of(masks(g.n, st.integers(0, 9).map(lambda k: k == 0)), masks(g.n))).copy()
    if draw(st.integers(0, 4)):  # mostly a start that is not a goal itself, for a path to find
        goal[start] = 0
    return g, start, goal, allowed


@given(path_cases())
@SETTINGS
def test_shortest_path_is_a_shortest_chain_to_the_nearest_goal(case):
    g, start, goal, allowed = case
    path = shortest_path(g.offsets, g.targets, start, goal, allowed)
    assert path.dtype == np.int64
    dist = nx.single_source_shortest_path_length(g.digraph(allowed), start)
    nearest = min((d for v, d in dist.items() if goal[v]), default=None)
    if nearest is None:
        assert path.tolist() == [-1]
    else:
        assert len(path) == nearest
        check_path(g, path, start, goal, allowed)


# -------------------------------------------------------------------------------------------------
# component exits, fairness, quiet states, transitions inside


@pytest.fixture
def hand_comp(hand) -> np.ndarray:
    comp = np.empty(6, np.int64)
    assert strongly_connected(hand.offsets, hand.targets, ones(6), comp) == 3
    assert comp.tolist() == [1, 1, 1, 0, 0, 2]  # {3,4}: 0, {0,1,2}: 1, {5}: 2
    return comp


def test_component_exits_by_hand(hand, hand_comp):
    assert component_exits(hand.offsets, hand.targets, hand_comp, 3, ones(6)).tolist() == [0, 1, 1]


def test_component_fairness_by_hand(hand, hand_comp):
    taken, disabled = component_fairness(hand.offsets, hand.targets, hand.labels, HAND_BITS, hand_comp, 3)
    # {3,4}: label 2 both ways, the label-0 self-loops are stuttering; {0,1,2}: labels 0 and 1 inside,
    # 2 -> 3 (label 1) leaves; {5}: 5 -> 0 leaves, the label-1 self-loop is stuttering
    assert taken.tolist() == [4, 3, 0]
    assert disabled.tolist() == [ALL_ONES & ~4, ALL_ONES, ALL_ONES & ~1]
    for c, members in enumerate([frozenset({3, 4}), frozenset({0, 1, 2}), frozenset({5})]):
        ref = component_fairness_reference(hand.offsets, hand.targets, hand.labels, HAND_BITS, members)
        assert ref == (int(taken[c]), int(disabled[c]))


def test_quiet_states_by_hand(hand, hand_comp):
    def quiet(c, mask):
        out = np.zeros(6, np.uint8)
        count = quiet_states(hand.offsets, hand.targets, hand.labels, HAND_BITS, hand_comp, c, np.uint64(mask), out)
        assert count == int(out.sum())
        return np.flatnonzero(out).tolist()

    assert quiet(0, 4) == []
    assert quiet(0, 1) == [3, 4]  # label 0 only on self-loops there
    assert quiet(1, 1) == [2]
    assert quiet(1, 2) == [1]
    assert quiet(1, 0) == [0, 1, 2]
    assert quiet(2, 2) == [5]
    assert quiet(2, 1) == []


def test_transition_inside_by_hand(hand, hand_comp):
    def inside(c, bit):
        return transition_inside(hand.offsets, hand.targets, hand.labels, HAND_BITS, hand_comp, c, np.uint64(bit))

    assert inside(0, 4) in (6, 7)
    assert inside(0, 1) == -1  # only self-loops
    assert inside(1, 2) in (1, 3)  # not 4: 2 -> 3 leaves the component
    assert inside(1, 4) == -1
    assert inside(2, 2) == -1 and inside(2, 1) == -1


def test_component_exits_ignore_states_that_are_not_allowed(hand):
    allowed = mask_of(6, [0, 1, 2, 5])  # {3,4} cut out: {0,1,2} has no way out any more
    comp = np.empty(6, np.int64)
    ncomp = strongly_connected(hand.offsets, hand.targets, allowed, comp)
    assert ncomp == 2 and comp.tolist() == [0, 0, 0, -1, -1, 1]
    assert component_exits(hand.offsets, hand.targets, comp, ncomp, allowed).tolist() == [0, 1]


@given(graph_and_allowed())
@SETTINGS
def test_component_exits_mark_the_components_with_a_way_out(case):
    g, allowed = case
    comp, ncomp, _ = reference_comp(g, allowed)
    exits = component_exits(g.offsets, g.targets, comp, ncomp, allowed)
    expected = [0] * ncomp
    for v, w, _ in g.edges:
        if allowed[v] and allowed[w] and comp[v] != comp[w]:
            expected[comp[v]] = 1
    assert exits.tolist() == expected
    # the components without a way out are the sinks of the condensation
    cond = nx.condensation(g.digraph(allowed))
    sinks = {frozenset(cond.nodes[x]["members"]) for x in cond if cond.out_degree(x) == 0}
    assert {frozenset(np.flatnonzero(comp == c).tolist()) for c in range(ncomp) if not exits[c]} == sinks


@st.composite
def fairness_cases(draw):
    g, allowed = draw(graph_and_allowed())
    return g, allowed, draw(label_bits(g.nlabels))


def expected_fairness(g: Graph, label_bit: np.ndarray, members: frozenset[int]) -> tuple[int, int]:
    """``taken`` and ``disabled`` from the docstring, transition by transition."""
    taken = 0
    for v, w, lab in g.edges:
        if v != w and v in members and w in members:
            taken |= int(label_bit[lab])
    disabled = 0
    for v in members:
        disabled |= ALL_ONES & ~enabled_bits(g, label_bit, v)
    return taken, disabled


@given(fairness_cases())
@SETTINGS
def test_component_fairness_matches_reference_and_docstring(case):
    g, allowed, label_bit = case
    comp, ncomp, comps = reference_comp(g, allowed)
    taken, disabled = component_fairness(g.offsets, g.targets, g.labels, label_bit, comp, ncomp)
    assert taken.dtype == np.uint64 and disabled.dtype == np.uint64
    assert taken.shape == disabled.shape == (ncomp,)
    for c, members in enumerate(comps):
        got = (int(taken[c]), int(disabled[c]))
        assert got == component_fairness_reference(g.offsets, g.targets, g.labels, label_bit, members)
        assert got == expected_fairness(g, label_bit, members)


@given(fairness_cases())
@SETTINGS
def test_component_fairness_ignores_self_loops(case):
    g, allowed, label_bit = case
    comp, ncomp, _ = reference_comp(g, allowed)  # self-loops do not change the components
    taken, disabled = component_fairness(g.offsets, g.targets, g.labels, label_bit, comp, ncomp)
    h = make_graph(g.n, [(v, w, lab) for v, w, lab in g.edges if v != w], g.nlabels)
    taken2, disabled2 = component_fairness(h.offsets, h.targets, h.labels, label_bit, comp, ncomp)
    assert taken.tolist() == taken2.tolist() and disabled.tolist() == disabled2.tolist()


@st.composite
def component_cases(draw):
    g, allowed, label_bit = draw(fairness_cases())
    comp, ncomp, _ = reference_comp(g, allowed)
    c = draw(st.integers(0, ncomp - 1)) if ncomp else 0  # no component: nothing is in component 0
    word = st.one_of(st.sets(st.sampled_from([0, 1, 2, 3, 63])).map(lambda bs: sum(1 << b for b in bs)),
                     st.integers(0, ALL_ONES))
    return g, label_bit, comp, c, draw(word)


@given(component_cases())
@SETTINGS
def test_quiet_states_are_the_component_states_where_the_mask_is_disabled(case):
    g, label_bit, comp, c, mask = case
    out = np.zeros(g.n, np.uint8)
    count = quiet_states(g.offsets, g.targets, g.labels, label_bit, comp, c, np.uint64(mask), out)
    expected = [v for v in range(g.n) if comp[v] == c and enabled_bits(g, label_bit, v) & mask == 0]
    assert np.flatnonzero(out).tolist() == expected
    assert count == len(expected)


@given(component_cases())
@SETTINGS
def test_transition_inside_finds_a_non_stuttering_transition_within_the_component(case):
    g, label_bit, comp, c, bit = case
    e = transition_inside(g.offsets, g.targets, g.labels, label_bit, comp, c, np.uint64(bit))
    candidates = {i for i, (v, w, lab) in enumerate(g.edges)
                  if v != w and comp[v] == c and comp[w] == c and int(label_bit[lab]) & bit}
    if candidates:
        assert e in candidates
    else:
        assert e == -1


# -------------------------------------------------------------------------------------------------
# StateIndex


def add_batch(index: StateIndex, batch: np.ndarray, rows: np.ndarray, nrows: int, first: int, stride: int,
              labels: np.ndarray) -> tuple[int, np.ndarray]:
    """``index.add`` as ``build_graph`` calls it."""
    ids = np.full(batch.shape[0], -1, np.int64)
    new = index.add(batch, fingerprints(batch), rows, nrows, ids, first, stride, labels)
    return new, ids


def test_state_index_by_hand():
    index = StateIndex(2, capacity=2)
    words = np.array([[1, 2], [3, 4], [1, 2], [5, 6], [3, 4]], np.uint64)
    labels = np.array([7, 8, 9, 10, 11], np.uint16)
    new, ids = add_batch(index, words, np.arange(5, dtype=np.int64), 5, 10, 2, labels)
    assert new == 3 and index.count == 3
    assert ids.tolist() == [0, 1, 0, 2, 1]
    assert index.states[:3].tolist() == [[1, 2], [3, 4], [5, 6]]
    assert index.parent[:3].tolist() == [10, 10, 11]  # first + row // stride
    assert index.parent_label[:3].tolist() == [7, 8, 10]
    # a second batch: old states keep their ids; rows past nrows are left alone
    words = np.array([[5, 6], [9, 9], [1, 2], [8, 8]], np.uint64)
    new, ids = add_batch(index, words, np.array([1, 0, 2, 3], np.int64), 3, 20, 1, np.zeros(4, np.uint16))
    assert new == 1 and index.count == 4
    assert ids.tolist() == [2, 3, 0, -1]
    index.trim()
    assert index.states.tolist() == [[1, 2], [3, 4], [5, 6], [9, 9]]
    assert index.parent.tolist() == [10, 10, 11, 21]


def test_state_index_rejects_wrong_arrays():
    index = StateIndex(2)
    words = np.zeros((3, 2), np.uint64)
    rows = np.arange(3, dtype=np.int64)
    with pytest.raises(TypeError):
        index.add(np.zeros((3, 3), np.uint64), fingerprints(np.zeros((3, 3), np.uint64)), rows, 3,
                  np.empty(3, np.int64), 0, 1, np.zeros(3, np.uint16))
    with pytest.raises(TypeError):
        index.add(words, fingerprints(words), rows.astype(np.int32), 3, np.empty(3, np.int64), 0, 1,
                  np.zeros(3, np.uint16))
    with pytest.raises(ValueError):
        StateIndex(0)


class DictIndex:
    """What ``StateIndex`` must do, with a dict."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, ...], int] = {}
        self.parent: list[int] = []
        self.parent_label: list[int] = []

    def add(self, batch, rows, first, stride, labels) -> dict[int, int]:
        out = {}
        for r in rows:
            key = tuple(int(x) for x in batch[r])
            if key not in self.ids:
                self.ids[key] = len(self.ids)
                self.parent.append(first + r // stride)
                self.parent_label.append(int(labels[r]))
            out[r] = self.ids[key]
        return out


def check_same(index: StateIndex, ref: DictIndex) -> None:
    assert index.count == len(ref.ids)
    assert index.states[: index.count].tolist() == [list(k) for k in ref.ids]  # dicts keep insertion order
    assert index.parent[: index.count].tolist() == ref.parent
    assert index.parent_label[: index.count].tolist() == ref.parent_label


@st.composite
def index_cases(draw):
    nwords = draw(st.integers(1, 3))
    word = st.one_of(st.integers(0, 3), st.integers(0, ALL_ONES))
    pool = draw(st.lists(st.tuples(*[word] * nwords), min_size=1, max_size=60, unique=True))
    batches = []
    for _ in range(draw(st.integers(1, 6))):
        picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=0, max_size=40))
        batch = np.array([pool[i] for i in picks], dtype=np.uint64).reshape(len(picks), nwords)
        selected = draw(st.lists(st.integers(0, len(picks) - 1), unique=True)) if picks else []
        rest = [r for r in range(len(picks)) if r not in selected]
        stride = draw(st.integers(1, 4))
        labels = np.array(draw(st.lists(st.integers(0, 65535), min_size=len(picks), max_size=len(picks))),
                          dtype=np.uint16)
        batches.append((batch, selected, rest, stride, labels))
    return nwords, draw(st.integers(1, 8)), batches


@given(index_cases())
@settings(max_examples=100, deadline=None)
def test_state_index_numbers_like_a_dict_in_first_seen_order(case):
    nwords, capacity, batches = case
    index = StateIndex(nwords, capacity=capacity)
    ref = DictIndex()
    for k, (batch, selected, rest, stride, labels) in enumerate(batches):
        rows = np.array(selected + rest, dtype=np.int64)  # rows past nrows must be ignored
        first = 1000 * k
        new, ids = add_batch(index, batch, rows, len(selected), first, stride, labels)
        before = len(ref.ids)
        expected = ref.add(batch, selected, first, stride, labels)
        assert new == len(ref.ids) - before
        assert {r: int(ids[r]) for r in selected} == expected
        assert all(ids[r] == -1 for r in rest)
        check_same(index, ref)
    index.trim()
    assert index.states.shape == (len(ref.ids), nwords)
    check_same(index, ref)


def test_state_index_grows_and_rebuilds_without_losing_states():
    rng = np.random.default_rng(20240611)
    nwords = 3
    # rows that agree in all words but one, so that a probe compares states differing in one word only
    pool = rng.integers(0, 4, size=(6000, nwords)).astype(np.uint64)
    for k in range(nwords):
        part = slice(2000 * k, 2000 * (k + 1))
        pool[part, k] = rng.integers(0, 2**64, size=2000, dtype=np.uint64)
    pool = np.unique(pool, axis=0)
    rng.shuffle(pool)
    index = StateIndex(nwords, capacity=4)
    first_table = index.table.shape[0]
    ref = DictIndex()
    for k in range(12):
        batch = pool[rng.integers(0, min(len(pool), 500 * (k + 1)), size=1500)]
        rows = np.arange(batch.shape[0], dtype=np.int64)
        labels = rng.integers(0, 100, size=batch.shape[0]).astype(np.uint16)
        new, ids = add_batch(index, batch, rows, batch.shape[0], 7 * k, 1, labels)
        before = len(ref.ids)
        expected = ref.add(batch, range(batch.shape[0]), 7 * k, 1, labels)
        assert new == len(ref.ids) - before
        assert ids.tolist() == [expected[r] for r in range(batch.shape[0])]
    check_same(index, ref)
    assert index.count > 4000 and index.table.shape[0] >= 2 * index.count > first_table
    # every state is found again after the rebuilds: the same ids, nothing new
    known = index.states[: index.count].copy()
    new, ids = add_batch(index, known, np.arange(known.shape[0], dtype=np.int64), known.shape[0], 0, 1,
                         np.zeros(known.shape[0], np.uint16))
    assert new == 0 and ids.tolist() == list(range(known.shape[0]))
