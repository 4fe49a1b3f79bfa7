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


def _fairness_requirements(model: Model, fair: tuple[str, ...]) -> list[frozenset[int]]:
    """Each weak-fairness requirement of ``fair`` as the set of labels that take it, as
    ``Liveness`` and docs/analyses.md describe the names: ``Name`` is the action as a whole (any of
    its instances), ``Name(*)`` one requirement per instance, anything else the one instance whose
    label reads so (spaces ignored)."""
    actions = {a.name for a in model.actions}
    requirements: list[frozenset[int]] = []
    for entry in fair:
        text = entry.replace(" ", "")
        if text.endswith("(*)") and text[:-3] in actions:
            requirements += [frozenset([i]) for i, lab in enumerate(model.labels) if lab.action.name == text[:-3]]
        elif text in actions:
            requirements.append(frozenset(i for i, lab in enumerate(model.labels) if lab.action.name == text))
        else:
            instance = [i for i, lab in enumerate(model.labels) if str(lab).replace(" ", "") == text]
            if not instance:
                raise ValueError(f"fairness names {entry!r}, neither an action nor an action instance")
            requirements.append(frozenset(instance))
    return requirements


def _weakly_fair(walk: list[tuple[int, int | None, int]], requirements: list[frozenset[int]],
                 enabled: dict[int, set[int]]) -> bool:
    """Whether going round the closed ``walk`` forever (steps ``(state, label, next state)``,
    label None for a stutter) is weakly fair to every requirement, by the definition: requirement
    k is taken on some step (a label of k, to another state) or disabled in some state of the walk
    (``enabled[state]`` lacks k), so the behaviour never keeps it enabled without taking it."""
    states = {u for u, _, _ in walk}
    for k, labels in enumerate(requirements):
        taken = any(label in labels and u != v for u, label, v in walk)
        disabled = any(k not in enabled[u] for u in states)
        if not (taken or disabled):
            return False
    return True


def _fair_closed_walk(start: int, moves: dict[int, list[tuple[int, int]]], inside: set[int],
                      requirements: list[frozenset[int]], enabled: dict[int, set[int]]):
    """A closed walk from ``start`` back to it, through the states of ``inside`` only, that is
    weakly fair (``_weakly_fair``); None if there is none. Brute force: a breadth-first search over
    pairs (state, the requirements met since ``start``) where a step from u meets the requirements
    disabled at u and, if it moves by a label, those that label takes; a step may stutter. A fair
    closed walk exists exactly when (start, all of them) is reached after at least one step."""
    everything = frozenset(range(len(requirements)))

    def met_by(u: int, label: int | None) -> frozenset[int]:
        met = {k for k in everything if k not in enabled[u]}
        if label is not None:
            met |= {k for k, labels in enumerate(requirements) if label in labels}
        return frozenset(met)

    initial = (start, frozenset())
    parent: dict[tuple[int, frozenset[int]], tuple[tuple[int, frozenset[int]], int | None]] = {}
    queue: deque[tuple[int, frozenset[int]]] = deque([initial])
    while queue:
        node = queue.popleft()
        u, met = node
        for v, label in [(u, None)] + moves[u]:
            if v not in inside:
                continue
            nxt = (v, met | met_by(u, label))
            # tested before the visited pairs: with no requirement at all the goal is the first
            # pair itself, reached again by one stutter
            if nxt == (start, everything):
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


def liveness_reference(model: Model, prop: Liveness, max_states: int = 200_000) -> dict:
    """``after ~> eventually`` under weak fairness, by searching for fair lassos.

    A violation is a behaviour that passes a state where ``after`` holds and ``eventually`` does
    not, and from there never reaches ``eventually`` while being weakly fair. On a finite graph
    such a behaviour ends going round and round among states where ``eventually`` is false; it is
    fair exactly when some closed walk of that ending, from one of its states back to it, meets
    every requirement (``_weakly_fair``), and then the lasso "there, then that walk forever" is a
    fair violation too. So every state where ``eventually`` does not hold is tried as the start of
    such a walk (``_fair_closed_walk``), each walk found is checked against the definition, and
    a state is *doomed* when it reaches such a start through states where ``eventually`` is
    false. ``fair_components``: how many classes of mutually reachable states those starts form
    (the components of the ``not eventually`` subgraph that admit a fair run)."""
    sg = explore_graph(model, max_states)
    layout = model.layout
    n = len(sg.states)
    goal = [_holds(layout, prop.eventually, f) for f in sg.states]
    after = [True if prop.after is None else _holds(layout, prop.after, f) for f in sg.states]
    requirements = _fairness_requirements(model, prop.fair)
    # a transition back to its own state is stuttering: it neither takes nor enables an action
    moves: dict[int, list[tuple[int, int]]] = {v: [] for v in range(n)}
    for u, v, data in sg.graph.edges(data=True):
        if u != v:
            moves[u].append((v, data["label"]))
    enabled = {u: {k for k, labels in enumerate(requirements) if any(lab in labels for _, lab in moves[u])}
               for u in range(n)}
    bad = [v for v in range(n) if not goal[v]]
    sub = nx.DiGraph()
    sub.add_nodes_from(bad)
    sub.add_edges_from((u, v) for u in bad for v, _ in moves[u] if not goal[v])

    starts: dict[int, frozenset[int]] = {}  # start of a fair closed walk -> the states it can go round
    for s in bad:
        # a closed walk from s never leaves the states that s reaches and that reach s
        round_s = (nx.descendants(sub, s) & nx.ancestors(sub, s)) | {s}
        walk = _fair_closed_walk(s, moves, round_s, requirements, enabled)
        if walk is not None:
            assert walk[0][0] == s == walk[-1][2] and all(u in round_s and v in round_s for u, _, v in walk)
            assert _weakly_fair(walk, requirements, enabled), walk
            starts[s] = frozenset(round_s)
    doomed = set(starts)
    for s in starts:
        doomed |= nx.ancestors(sub, s)
    triggers = [v for v in bad if after[v]]
    violating = sorted(v for v in triggers if v in doomed)
    return {"verdict": "violated" if violating else "holds", "trigger_states": len(triggers),
            "doomed_states": len(doomed), "fair_components": len(set(starts.values())),
            "first_trigger_depth": len(sg.path_to(violating[0])) - 1 if violating else None}
