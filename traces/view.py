"""A trace read for presentation: per step, every element's shown value, what changed, on which
lane, and which checks fail. Built from the graph alone (no spec code), so tables, pictures and
diagrams work on any well-formed trace file; shared by ``table``, ``render`` and ``export``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import networkx as nx

from kraftcheck.checker.errors import UsageError
from kraftcheck.traces.graph import action_text
from kraftcheck.traces.lanes import element_lanes
from kraftcheck.traces.states import axis_named_elements, format_element, readable_elements


def zero_like(value: Any) -> bool:
    """A shown value that says nothing at the start of a trace (0, false, empty, unset)."""
    return value is None or value is False or value == 0 or value == []


@dataclass
class StepView:
    step: int
    action: Optional[str]           # "TMCommit" / "RMPrepare(rm=rm1)"; None for the initial state
    values: dict[str, Any]          # element -> shown value
    changed: list[str]              # elements whose value differs from the previous step
    failing: list[str]              # invariants failing here, properties failing on the way in
    touch: Optional[dict[str, Any]]  # {lane, receives_from, sends_to}
    note: Optional[str] = None
    writes: list[str] = field(default_factory=list)  # in a spec's terms: the record or request the step writes
    code: list[str] = field(default_factory=list)    # in a spec's terms: the code paths the step stands for


class TraceView:
    """Everything a reader of one trace needs, in reading order."""

    def __init__(self, graph: nx.DiGraph) -> None:
        attrs = graph.graph
        self.attrs = attrs
        self.spec: str = attrs.get("spec", "?")
        self.fields = attrs.get("fields", [])
        self.terms: Optional[str] = attrs.get("terms")  # whose terms (traces.spec_terms), None: the model's
        self.violation: Optional[dict[str, Any]] = attrs.get("violation")
        self.lasso: Optional[dict[str, Any]] = attrs.get("lasso")  # a liveness counterexample (traces.lasso)
        self.kind_of: dict[str, str] = {}
        self.field_of: dict[str, str] = {}
        self.shown_names = axis_named_elements(self.fields)  # elements of fields that name their axes
        steps = sorted(graph.nodes)
        values = [readable_elements(self.fields, graph.nodes[i]["state"]) for i in steps]
        elements = list(values[0]) if values else []
        for f in self.fields:
            for e in elements:
                if e == f["name"] or e.startswith(f["name"] + "["):
                    self.kind_of[e], self.field_of[e] = f["kind"], f["name"]
        self.lane_of = element_lanes(attrs.get("lanes") or {"global": []}, elements)
        self.lanes: list[str] = list(attrs.get("lanes") or {}) or ["global"]
        for lane in self.lane_of.values():
            if lane not in self.lanes:
                self.lanes.append(lane)
        self.main_lane = self.lanes[0]
        self.steps: list[StepView] = []
        for i in steps:
            node = graph.nodes[i]
            failing = list(node.get("violated", []))
            if i == 0:
                self.steps.append(StepView(0, None, values[0], [], failing, None, node.get("note")))
                continue
            edge = graph.edges[i - 1, i]
            changed = [e for e in elements if values[i][e] != values[i - 1][e]]
            self.steps.append(StepView(i, action_text(edge["action"], edge.get("params", {})), values[i],
                                       changed, list(edge.get("violated", [])) + failing, edge.get("touch"),
                                       node.get("note"), list(edge.get("writes", [])), list(edge.get("code", []))))

        self.closing_action: Optional[str] = None  # the action of the edge that closes a lasso's cycle
        if self.lasso is not None and steps:
            closing = graph.edges[steps[-1], self.lasso["cycle_start"]]
            self.closing_action = action_text(closing["action"], closing.get("params", {}))

    def name(self, element: str) -> str:
        """How a table names an element: with its axes named where its field names them."""
        return self.shown_names.get(element, element)

    def fmt(self, element: str, value: Any) -> str:
        return format_element(self.kind_of.get(element, "int"), value)

    @property
    def violating_step(self) -> Optional[int]:
        if self.violation is not None:
            return self.violation.get("step")
        return None

    def resolve_lane(self, wanted: str) -> str:
        """A lane by name (``b2``), or by its number (``2``; ``b2`` for ``broker 2`` in a spec's
        terms) when that is unambiguous."""
        if wanted in self.lanes:
            return wanted
        number = wanted[len(wanted.rstrip("0123456789")):]
        matches = [lane for lane in self.lanes if number and lane.rstrip("0123456789") != lane
                   and lane[len(lane.rstrip("0123456789")):] == number]
        if len(matches) == 1:
            return matches[0]
        raise UsageError(f"no lane {wanted!r} in this trace; its lanes are: {', '.join(self.lanes)}")

    def elements_for(self, lanes: Optional[set[str]]) -> list[str]:
        """The elements of ``lanes`` (all when None), in field order."""
        return [e for e in self.lane_of if lanes is None or self.lane_of[e] in lanes]
