"""Readable networkx references for the compiled graph analyses (``checker.analyses``), for the
conformance tests: the state graph explored one state at a time in Python
(``traces.state_graph.explore_graph``), availability by networkx ancestors and condensation, and
liveness by a brute-force search for fair lassos, behaviour by behaviour. Nothing here calls
``checker.analyses``: predicates are evaluated and fairness names read here, from their
documented meaning. Slow; small models only."""

from __future__ import annotations

from collections import deque

import networkx as nx
import numpy as np

from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Liveness, Predicate
from kraftcheck.traces.state_graph import explore_graph


def _holds(layout, predicate: Predicate, flat: tuple[int, ...]) -> bool:
    """``predicate`` on one state, given its flat values: the spec's function on a batch of one."""
    value = np.asarray(predicate.holds(layout.columns(np.array([flat], np.int64))))
    return bool(value.reshape(-1)[0])


def availability_reference(model: Model, available: Predicate, max_states: int = 200_000) -> dict:
    sg = explore_graph(model, max_states)
    good = {i for i, flat in enumerate(sg.states) if _holds(model.layout, available, flat)}
    g = nx.DiGraph(sg.graph)
    can_recover = set(good)
    for i in good:
        can_recover |= nx.ancestors(g, i)
    stuck = sorted(set(range(len(sg.states))) - can_recover)
    condensed = nx.condensation(g)
    sinks = [c for c in condensed.nodes if condensed.out_degree(c) == 0]
    stuck_sinks = [c for c in sinks if not condensed.nodes[c]["members"] & good]
    return {"states": len(sg.states), "transitions": sg.graph.number_of_edges(), "available_states": len(good),
            "stuck_states": len(stuck), "stuck_sink_components": len(stuck_sinks), "sink_components": len(sinks),
            "components": condensed.number_of_nodes(),
            "first_stuck_depth": len(sg.path_to(stuck[0])) - 1 if stuck else None}


def _label_params(text: str) -> tuple[str, dict[str, str]]:
    """``"Name(a=1, b=x)"`` -> ``("Name", {"a": "1", "b": "x"})``, spaces ignored."""
    text = text.replace(" ", "")
    if "(" not in text:
        return text, {}
    name, _, inside = text[:-1].partition("(")
    return name, dict(item.split("=", 1) for item in inside.split(",") if item)


def _fairness_requirements(model: Model, fair) -> list[tuple[frozenset[int], bool]]:
    """Each fairness requirement of ``fair`` as (the set of labels that take it, strong?), as
    ``Liveness`` and docs/writing-a-spec.md describe them: an entry is a plain name (weak) or an
    object with ``strong`` and ``actions`` (``WF(...)``/``SF(...)``: the union of its names'
    labels); ``Name`` is the action as a whole, ``Name(*)`` (alone) one requirement per instance,
    ``Name(p=v, ...)`` every instance whose label shows those parameter values."""
    texts = [str(lab) for lab in model.labels]
    requirements: list[tuple[frozenset[int], bool]] = []
    for entry in dict.fromkeys(fair):
        strong = bool(getattr(entry, "strong", False))
        names = list(entry.actions) if hasattr(entry, "actions") else [entry]
        if len(names) == 1 and names[0].replace(" ", "").endswith("(*)"):
            action = names[0].replace(" ", "")[:-3]
            requirements += [(frozenset([i]), strong) for i, t in enumerate(texts) if _label_params(t)[0] == action]
            continue
        covered: set[int] = set()
        for name in names:
            action, bound = _label_params(name)
            hit = {i for i, t in enumerate(texts) if _label_params(t)[0] == action
                   and bound.items() <= _label_params(t)[1].items()}
            if not hit:
                raise ValueError(f"fairness names {name!r}, neither an action nor action instances")
            covered |= hit
        requirements.append((frozenset(covered), strong))
    return requirements


def fair_walk(walk: list[tuple[int, int | None, int]], requirements: list[tuple[frozenset[int], bool]],
          enabled: dict[int, set[int]]) -> bool:
    """Whether going round the closed ``walk`` forever (steps ``(state, label, next state)``,
    label None for a stutter) is fair to every requirement, by the definitions: requirement k is
    taken on some step (a label of k, to another state), or, if weak, disabled in some state of
    the walk (so it is not enabled forever), or, if strong, disabled in every state of the walk
    (so it is not enabled infinitely often)."""
    states = {u for u, _, _ in walk}
    for k, (labels, strong) in enumerate(requirements):
        taken = any(label in labels and u != v for u, label, v in walk)
        disabled = [k not in enabled[u] for u in states]
        if not (taken or (all(disabled) if strong else any(disabled))):
            return False
    return True


def _fair_closed_walk(start: int, moves: dict[int, list[tuple[int, int]]], inside: set[int],
                      requirements: list[tuple[frozenset[int], bool]], enabled: dict[int, set[int]]):
    """A closed walk from ``start`` back to it, through the states of ``inside`` only, that is
    fair (``fair_walk``); None if there is none. Brute force: a breadth-first search over (state,
    what the walk so far has done): the weak requirements met (taken or disabled at a state
    passed), the strong ones taken, the strong ones enabled at a state passed. A step from u adds
    what u disables or enables and, if it moves by a label, what that label takes; a step may
    stutter. Every such summary reachable back at ``start`` after at least one step is tried."""
    weak = frozenset(k for k, (_, strong) in enumerate(requirements) if not strong)
    strong = frozenset(k for k, (_, s) in enumerate(requirements) if s)

    def after(node, u: int, label: int | None, v: int):
        _, met, taken, seen = node
        took = {k for k, (labels, _) in enumerate(requirements) if label is not None and label in labels}
        return (v, met | {k for k in weak if k not in enabled[u]} | (took & weak), taken | (took & strong),
                seen | (enabled[u] & strong))

    def good(node) -> bool:
        _, met, taken, seen = node
        return met == weak and all(k in taken or k not in seen for k in strong)

    initial = (start, frozenset(), frozenset(), frozenset())
    parent: dict = {}
    queue: deque = deque([initial])
    while queue:
        node = queue.popleft()
        u = node[0]
        for v, label in [(u, None)] + moves[u]:
            if v not in inside:
                continue
            nxt = tuple(frozenset(x) if i else x for i, x in enumerate(after(node, u, label, v)))
            # tested before the visited nodes: with no requirement at all the goal is the first
            # node itself, reached again by one stutter
            if v == start and good(nxt):
                walk = [(u, label, v)]
                while node != initial:
                    before, step_label = parent[node]
                    walk.append((before[0], step_label, node[0]))
                    node = before
                return walk[::-1]
            if nxt != initial and nxt not in parent:
                parent[nxt] = (node, label)
                queue.append(nxt)
    return None


def fair_runs_reference(n: int, moves: dict[int, list[tuple[int, int]]], goal: list[bool],
                        requirements: list[tuple[frozenset[int], bool]]) -> dict:
    """On a graph of ``n`` states given by ``moves`` (u -> [(v, label)], u != v; every state may
    also stutter), which states a fair behaviour can, from there, keep ``goal`` false forever.

    Such a behaviour ends going round and round among states where ``goal`` is false; it is fair
    exactly when some closed walk of that ending, from one of its states back to it, is fair
    (``fair_walk``), and then "there, then that walk forever" is fair too. So every state where
    ``goal`` does not hold is tried as the start of such a walk (``_fair_closed_walk``), each
    walk found is checked against the definition, and a state is *doomed* when it reaches such a
    start through states where ``goal`` is false. ``fair_components``: the classes of starts
    mutually reachable through starts (two fair walks that can reach each other make one)."""
    enabled = {u: {k for k, (labels, _) in enumerate(requirements) if any(lab in labels for _, lab in moves[u])}
               for u in range(n)}
    bad = [v for v in range(n) if not goal[v]]
    sub = nx.DiGraph()
    sub.add_nodes_from(bad)
    sub.add_edges_from((u, v) for u in bad for v, _ in moves[u] if not goal[v])
    starts: set[int] = set()
    for s in bad:
        # a closed walk from s never leaves the states that s reaches and that reach s
        round_s = (nx.descendants(sub, s) & nx.ancestors(sub, s)) | {s}
        walk = _fair_closed_walk(s, moves, round_s, requirements, enabled)
        if walk is not None:
            assert walk[0][0] == s == walk[-1][2] and all(u in round_s and v in round_s for u, _, v in walk)
            assert fair_walk(walk, requirements, enabled), walk
            starts.add(s)
    doomed = set(starts)
    for s in starts:
        doomed |= nx.ancestors(sub, s)
    classes = nx.number_strongly_connected_components(sub.subgraph(starts))
    return {"doomed": doomed, "starts": starts, "fair_components": classes}


def liveness_reference(model: Model, prop: Liveness, max_states: int = 200_000) -> dict:
    """``after ~> eventually`` (``[]<>eventually`` without ``after``, ``<>eventually`` with
    ``once``) under the property's fairness, by searching for fair lassos (``fair_runs_reference``):
    it fails when a state where ``after`` holds (with ``once``: an initial state) and ``eventually``
    does not is doomed."""
    sg = explore_graph(model, max_states)
    layout = model.layout
    n = len(sg.states)
    goal = [_holds(layout, prop.eventually, f) for f in sg.states]
    if getattr(prop, "once", False):
        after = [sg.parent[v] == -1 for v in range(n)]
    else:
        after = [True if prop.after is None else _holds(layout, prop.after, f) for f in sg.states]
    requirements = _fairness_requirements(model, prop.fair)
    # a transition back to its own state is stuttering: it neither takes nor enables an action
    moves: dict[int, list[tuple[int, int]]] = {v: [] for v in range(n)}
    for u, v, data in sg.graph.edges(data=True):
        if u != v:
            moves[u].append((v, data["label"]))
    runs = fair_runs_reference(n, moves, goal, requirements)
    triggers = [v for v in range(n) if after[v] and not goal[v]]
    violating = sorted(v for v in triggers if v in runs["doomed"])
    return {"verdict": "violated" if violating else "holds", "trigger_states": len(triggers),
            "doomed_states": len(runs["doomed"]), "fair_components": runs["fair_components"],
            "first_trigger_depth": len(sg.path_to(violating[0])) - 1 if violating else None}


def liveness_found(found) -> dict:
    """What the compiled analysis found (``check_liveness``'s result), in ``liveness_reference``'s
    terms, for the tests to compare."""
    return {"verdict": found.verdict, "trigger_states": found.trigger_states, "doomed_states": found.doomed_states,
            "fair_components": found.fair_components,
            "first_trigger_depth": found.lasso.trigger if found.lasso else None}
