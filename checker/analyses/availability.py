"""Availability over a recorded state graph: from which states can the system never serve again?

*Stuck states* are those from which no state where the spec's availability predicate holds can be
reached: the complement of a backward reachability from the available states. *Stuck sink
components* are strongly connected components with no transition out and no available state: the
places a run ends up in and stays. The first stuck state in breadth-first order is among the
closest to an initial state, so the path to it is a shortest path to a stuck state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from kraftcheck.checker.analyses.state_graph import CompiledGraph
from kraftcheck.checker.analyses.graph_kernels import component_exits, reach, strongly_connected


@dataclass
class AvailabilityResult:
    states: int
    transitions: int
    available_states: int
    stuck_states: int
    stuck_sink_components: int
    sink_components: int
    components: int
    first_stuck: Optional[int] = None                      # state id, or None
    path_labels: list[int] = field(default_factory=list)   # from its initial state to first_stuck

    @property
    def verdict(self) -> str:
        return "can get stuck" if self.stuck_states else "can always recover"


def analyse_availability(graph: CompiledGraph, available: np.ndarray) -> AvailabilityResult:
    """``available``: a uint8 per state, 1 where the system can serve."""
    n = graph.size
    everything = np.ones(n, np.uint8)
    rev_offsets, rev_sources = graph.reversed()
    can_recover = np.zeros(n, np.uint8)
    reach(rev_offsets, rev_sources, available, everything, can_recover)
    stuck = np.flatnonzero(can_recover == 0)

    comp = np.empty(n, np.int64)
    ncomp = strongly_connected(graph.offsets, graph.targets, everything, comp)
    exits = component_exits(graph.offsets, graph.targets, comp, ncomp, everything)
    has_available = np.bincount(comp, weights=available, minlength=ncomp) > 0 if n else np.zeros(0, bool)
    sinks = exits == 0
    result = AvailabilityResult(
        states=n, transitions=graph.transitions, available_states=int(available.sum()),
        stuck_states=int(stuck.size), stuck_sink_components=int((sinks & ~has_available).sum()),
        sink_components=int(sinks.sum()), components=int(ncomp))
    if stuck.size:
        result.first_stuck = int(stuck[0])
        result.path_labels = graph.labels_to(result.first_stuck)
    return result
