"""``kraftcheck check --availability``: can the system always serve again without an operator?

Durability has a price in availability: a recovery strategy that refuses unsafe elections can leave
a partition with no leader for good. For each setting the spec proposes (``Spec.availability_variants``,
e.g. one per recovery strategy; by default only the run's own), this explores the whole reachable
state graph and reports

* *stuck states*: states from which no state where the system is available
  (``Spec.availability().holds``, e.g. "the partition has a leader") can ever be reached;
* *stuck sink components*: strongly connected components with no way out and no available state,
  the places a run ends up in and stays;
* a shortest path to a stuck state, so a person can see how the partition got there.

Within the model's bounds, an operator action is whatever the model does not contain; a bound that
runs out (no more restarts left) can make a state stuck too, which the example path shows.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import networkx as nx

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.model import Model
from kraftcheck.traces.graph import jsonable
from kraftcheck.traces.state_graph import explore_graph
from kraftcheck.traces.states import readable_state


def availability_report(model: Model, max_states: int) -> dict[str, Any]:
    spec = model.spec
    availability = spec.availability()
    if availability is None:
        raise UsageError(f"spec {spec.name} does not say what 'available' means (Spec.availability), "
                         "so --availability cannot analyse it")
    variants = spec.availability_variants() or {"as configured": spec.params}
    results = []
    for name, params in variants.items():
        variant_spec = spec if params == spec.params else type(spec)(params)
        results.append(_analyse(Model(variant_spec), availability.holds, name, max_states))
    return {"spec": spec.name, "available_means": availability.description,
            "stuck_means": f"no state where {availability.description} can ever be reached again",
            "variants": results,
            "can_get_stuck": [r["variant"] for r in results if r["stuck_states"]]}


def _analyse(model: Model, holds, name: str, max_states: int) -> dict[str, Any]:
    sg = explore_graph(model, max_states)
    layout = model.layout
    available = [bool(holds(layout.values(flat))) for flat in sg.states]

    # Backwards from every available state: whatever reaches one can recover.
    reverse = sg.graph.reverse(copy=False)
    can_recover = [False] * len(sg.states)
    queue = deque(i for i, a in enumerate(available) if a)
    for i in queue:
        can_recover[i] = True
    while queue:
        i = queue.popleft()
        for j in reverse.successors(i):
            if not can_recover[j]:
                can_recover[j] = True
                queue.append(j)
    stuck = [i for i, ok in enumerate(can_recover) if not ok]

    condensed = nx.condensation(nx.DiGraph(sg.graph))
    stuck_sinks = [c for c in condensed.nodes if condensed.out_degree(c) == 0
                   and not any(available[i] for i in condensed.nodes[c]["members"])]

    report: dict[str, Any] = {
        "variant": name, "params": jsonable(model.spec.options()), "states": len(sg.states),
        "transitions": sg.graph.number_of_edges(), "available_states": sum(available),
        "stuck_states": len(stuck), "stuck_sink_components": len(stuck_sinks),
        "verdict": "can get stuck" if stuck else "can always recover",
    }
    if stuck:
        first = min(stuck)  # breadth-first numbering: the first is among the closest to the start
        path = sg.path_to(first)
        report["example"] = {"steps": [str(model.labels[lab]) for lab, _ in path[1:]],
                             "stuck_state": readable_state(layout, sg.states[first])}
    return report

