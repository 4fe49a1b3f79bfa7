"""The whole reachable state graph of a small model, as a networkx MultiDiGraph.

Nodes are states (numbered in breadth-first order, with their fingerprint and readable values),
edges are transitions (one per enabled action instance, self-loops included, so parallel edges
occur). Built in Python one state at a time, which is fine for thousands of states and hopeless
for millions: above ``max_states`` it refuses with a message saying what to do instead.
``kraftcheck check --dump-graph FILE.graphml`` writes it; ``--availability`` analyses it.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import networkx as nx

from kraftcheck.checker import __version__
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Spec
from kraftcheck.checker.files import STDOUT, write_output
from kraftcheck.traces.graph import jsonable
from kraftcheck.traces.states import element_names, fingerprint, format_element, state_fields
from kraftcheck.traces.stepping import Stepper

DEFAULT_MAX_STATES = 20_000
# how the reason of a check stopped at --graph-limit begins (kraftcheck.pipeline): the graph to dump
# has at least the check's states, so it stops there rather than after exploring everything
GRAPH_LIMIT_REASON = "stopped at --graph-limit"


def too_large(spec: Spec, max_states: int) -> str:
    """The refusal of a state graph of more than ``max_states`` states to dump."""
    return (f"the reachable state graph of {spec.title()} has more than {max_states:,} states (--graph-limit "
            f"{max_states}): --dump-graph writes GraphML for small models; to shrink the model, "
            f"{spec.smaller_model_hint()}; or raise --graph-limit if you have the memory and patience")


@dataclass
class StateGraph:
    model: Model
    graph: nx.MultiDiGraph
    states: list[tuple[int, ...]]
    parent: list[int]        # breadth-first tree: parent state of each state (-1 for initial ones)
    parent_label: list[int]  # label of the transition from the parent (-1 for initial ones)

    def path_to(self, i: int) -> list[tuple[Optional[int], tuple[int, ...]]]:
        """A shortest path from an initial state to state ``i``, as (label, state) steps."""
        steps = []
        while i >= 0:
            steps.append((self.parent_label[i] if self.parent_label[i] >= 0 else None, self.states[i]))
            i = self.parent[i]
        return steps[::-1]


def explore_graph(model: Model, max_states: int = DEFAULT_MAX_STATES) -> StateGraph:
    """Every reachable state and transition; UsageError above ``max_states`` distinct states.

    The graph is the one a run keeps: a state outside the model's state constraints is no state
    of it (never expanded: its successors may lie past the fields' domains), and a step that
    breaks an action constraint is not taken, as docs/writing-a-spec.md says of a run."""
    stepper = Stepper(model)
    constrained = bool(model.constraints or model.action_constraints)

    def kept(before: Optional[tuple[int, ...]], after: tuple[int, ...]) -> bool:
        return not constrained or not stepper.outside_constraints(after) and (
            before is None or not stepper.outside_action_constraints(before, after))

    index: dict[tuple[int, ...], int] = {}
    states: list[tuple[int, ...]] = []
    parent: list[int] = []
    parent_label: list[int] = []
    g = nx.MultiDiGraph()

    def add(flat: tuple[int, ...], par: int, lab: int) -> int:
        if len(states) >= max_states:
            raise UsageError(too_large(model.spec, max_states))
        index[flat] = len(states)
        states.append(flat)
        parent.append(par)
        parent_label.append(lab)
        g.add_node(index[flat])
        return index[flat]

    queue: deque[int] = deque()
    for flat in model.initial:
        if flat not in index and kept(None, flat):
            queue.append(add(flat, -1, -1))
    while queue:
        i = queue.popleft()
        for lab, succ in stepper.successors(states[i]):
            if not kept(states[i], succ):
                continue
            j = index.get(succ)
            if j is None:
                j = add(succ, i, lab)
                queue.append(j)
            g.add_edge(i, j, label=lab)
    return StateGraph(model, g, states, parent, parent_label)


def annotated(sg: StateGraph) -> nx.MultiDiGraph:
    """A copy with GraphML-friendly attributes: every state element, fingerprint, actions."""
    model = sg.model
    layout = model.layout
    stepper = Stepper(model)
    fields = state_fields(layout)
    initial = set(model.initial)
    out = nx.MultiDiGraph()
    out.graph.update(spec=model.spec.name, params=json.dumps(jsonable(model.spec.options())),
                     kraftcheck_version=__version__, states=len(sg.states),
                     transitions=sg.graph.number_of_edges())
    for i, flat in enumerate(sg.states):
        attrs = {"fingerprint": fingerprint(flat), "initial": flat in initial,
                 "violated": ",".join(stepper.violated_invariants(flat))}
        for f in fields:
            names = element_names(f)
            values = flat[layout.field_slices[f.name]]
            attrs.update({n: format_element(f.kind, f.show_value(v)) for n, v in zip(names, values)})
        out.add_node(i, **attrs)
    for u, v, data in sg.graph.edges(data=True):
        lab = model.labels[data["label"]]
        out.add_edge(u, v, action=lab.name, label=str(lab), params=json.dumps(jsonable(lab.shown_params())))
    return out


def dump_state_graph(model: Model, path: Union[str, Path], max_states: int = DEFAULT_MAX_STATES) -> dict:
    """Write the reachable state graph to ``path`` as GraphML (a file atomically, ``-`` to
    standard output); returns a summary."""
    path = Path(path)
    if path.suffix.lower() != ".graphml" and str(path) != STDOUT:
        raise UsageError(f"--dump-graph writes GraphML: name the file *.graphml (got {path.name})")
    sg = explore_graph(model, max_states)
    text = "\n".join(nx.generate_graphml(annotated(sg), prettyprint=True)) + "\n"
    write_output(path, text)
    return {"file": str(path), "states": len(sg.states), "transitions": sg.graph.number_of_edges()}
