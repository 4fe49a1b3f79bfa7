"""Readable networkx references for the compiled graph analyses (``checker.analyses``), for the
conformance tests: the state graph explored one state at a time in Python
(``traces.state_graph.explore_graph``), availability by networkx ancestors and condensation, and
liveness by the textbook definition, component by component. Slow; small models only."""

from __future__ import annotations

import networkx as nx

from kraftcheck.checker.analyses.liveness import fairness_requirements
from kraftcheck.checker.analyses.predicates import evaluate_one
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Liveness, Predicate
from kraftcheck.traces.state_graph import explore_graph


def availability_reference(model: Model, available: Predicate, max_states: int = 200_000) -> dict:
    sg = explore_graph(model, max_states)
    good = {i for i, flat in enumerate(sg.states) if evaluate_one(model.layout, available, flat)}
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


def liveness_reference(model: Model, prop: Liveness, max_states: int = 200_000) -> dict:
    """``after ~> eventually`` under weak fairness, from the definition: a violation is a state
    where after holds and eventually does not, from which, through states where eventually does
    not hold, a strongly connected set of such states (or one state, stuttering) is reachable in
    which every fairness requirement is taken on an inner transition or disabled somewhere."""
    sg = explore_graph(model, max_states)
    layout = model.layout
    n = len(sg.states)
    goal = [evaluate_one(layout, prop.eventually, f) for f in sg.states]
    after = [True if prop.after is None else evaluate_one(layout, prop.after, f) for f in sg.states]
    requirements = [set(labels) for _, labels in fairness_requirements(model, prop.fair)]
    moves: dict[int, list[tuple[int, int]]] = {v: [] for v in range(n)}
    for u, v, data in sg.graph.edges(data=True):
        if u != v:  # a transition back to its own state is stuttering
            moves[u].append((v, data["label"]))
    bad = [v for v in range(n) if not goal[v]]
    sub = nx.DiGraph()
    sub.add_nodes_from(bad)
    sub.add_edges_from((u, v) for u in bad for v, _ in moves[u] if not goal[v])

    def fair(component: set[int]) -> bool:
        for req in requirements:
            taken = any(lab in req and v in component for u in component for v, lab in moves[u])
            disabled = any(not any(lab in req for _, lab in moves[u]) for u in component)
            if not (taken or disabled):
                return False
        return True

    fair_states: set[int] = set()
    components = list(nx.strongly_connected_components(sub))
    fair_components = 0
    for comp in components:
        if fair(comp):
            fair_components += 1
            fair_states |= comp
    doomed = set(fair_states)
    for v in fair_states:
        doomed |= nx.ancestors(sub, v)
    triggers = [v for v in bad if after[v]]
    violating = sorted(v for v in triggers if v in doomed)
    return {"verdict": "violated" if violating else "holds", "trigger_states": len(triggers),
            "doomed_states": len(doomed), "fair_components": fair_components,
            "first_trigger_depth": len(sg.path_to(violating[0])) - 1 if violating else None}
