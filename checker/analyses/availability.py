"""Availability over the state graph: from which states can the system never serve again?

*Stuck states* are those from which no state where the spec's availability predicate holds can be
reached: the complement of a backward reachability from the available states. *Stuck sink
components* are strongly connected components with no transition out and no available state: the
places a run ends up in and stays. The first stuck state in breadth-first order is among the
closest to an initial state, so the path to it is a shortest path to a stuck state.

``availability_of_variants`` runs it for each setting the spec proposes
(``Spec.availability_variants``, e.g. one per recovery strategy; by default only the run's own),
each over its own state graph; ``traces.analysis_traces`` writes the stuck paths as trace files.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterator, Optional

import numpy as np

from kraftcheck.checker.analyses.graph_kernels import component_exits, reach, strongly_connected
from kraftcheck.checker.analyses.predicates import evaluate
from kraftcheck.checker.analyses.state_graph import CompiledGraph, GraphSummary, graph_to_analyse
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.result import ProgressFn, Step, memory_in_use, no_progress
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Predicate


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


@dataclass
class VariantAvailability:
    """One variant's finding, with what the report says of its graph (freed by now) and, if it
    can get stuck, the shortest path into a stuck state."""

    name: str
    model: Model
    found: AvailabilityResult
    graph: GraphSummary
    analysis_s: float
    memory_in_use: int
    stuck_path: Optional[list[Step]] = None


def availability_predicate(model: Model) -> Predicate:
    """The spec's ``Spec.availability``, or a UsageError when it does not say what it means."""
    availability = model.spec.availability()
    if availability is None:
        raise UsageError(f"spec {model.spec.name} does not say what 'available' means (Spec.availability), "
                         "so --availability cannot analyse it")
    return availability


def variant_models(model: Model) -> dict[str, Model]:
    """The model of each variant by name, in the spec's order (one ``Model(spec)`` for the spec's own settings)."""
    spec = model.spec
    variants = spec.availability_variants() or {"as configured": spec.params}
    own = Model(spec)
    return {name: own if params == spec.params else Model(type(spec)(params)) for name, params in variants.items()}


def availability_of_variants(model: Model, models: dict[str, Model], availability: Predicate,
                             max_states: Optional[int] = None, max_memory: Optional[int] = None,
                             progress: ProgressFn = no_progress, graph: Optional[CompiledGraph] = None
                             ) -> Iterator[VariantAvailability]:
    """Each variant's finding (``models``: ``variant_models(model)``), one at a time, so that a
    caller writes its trace before the next variant's graph is built. ``graph``: the state graph of
    ``model`` already built (by the check); its variant comes first, so that graph is freed before
    any other is built."""
    first = None
    if graph is not None:
        own = next((m for m in models.values() if m.spec is model.spec), None) or Model(model.spec)
        first = next((name for name, m in models.items() if _same_state_graph(m, own)), None)
    for name in ([first] if first else []) + [n for n in models if n != first]:
        yield _analyse(name, models[name], availability, max_states, max_memory, progress,
                       graph if name == first else None)
        graph = None


def _analyse(name: str, model: Model, availability: Predicate, max_states: Optional[int],
             max_memory: Optional[int], progress: ProgressFn, graph: Optional[CompiledGraph]) -> VariantAvailability:
    graph, kernels = graph_to_analyse(model, graph, max_states, max_memory, progress)
    t0 = time.perf_counter()
    found = analyse_availability(graph, evaluate(graph, kernels, availability))
    variant = VariantAvailability(name, model, found, graph.summary(), time.perf_counter() - t0, memory_in_use())
    if found.first_stuck is not None:
        variant.stuck_path = graph.steps(graph.initial_of(found.first_stuck), found.path_labels)
    return variant


def _same_state_graph(a: Model, b: Model) -> bool:
    """Whether two settings give the same state graph: the same fields, constants, actions and
    initial states (e.g. ``recovery=None`` and ``recovery="balanced"``, its default)."""
    def shape(m: Model):
        return ([(f.name, f.lo, f.domain, f.shape, f.const) for f in m.layout.fields], [str(lab) for lab in m.labels],
                [a.fn for a in m.actions], sorted(m.initial))
    return shape(a) == shape(b)
