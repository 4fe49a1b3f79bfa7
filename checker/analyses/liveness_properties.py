"""The spec's liveness properties (``Spec.liveness``) checked under their fairness over the whole
state graph, one graph for all of them (``liveness.check_all``).

``liveness_properties`` resolves them and tries their predicates before anything explores, so a
misspelt fairness name or a predicate that raises is refused first. ``check_liveness_properties``
gives, for each, the finding and, for each violated one, its lasso as a ``Violation`` (kind
``liveness``); ``traces.analysis_traces`` writes the lassos as trace files.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

from kraftcheck.checker.analyses.liveness import MAX_FAIR_ACTIONS, LivenessResult, check_all, fairness_requirements
from kraftcheck.checker.analyses.predicates import check_on
from kraftcheck.checker.analyses.state_graph import CompiledGraph, GraphSummary, graph_to_analyse
from kraftcheck.checker.errors import SpecError, UsageError
from kraftcheck.checker.explore.result import ProgressFn, Violation, memory_in_use, no_progress
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Liveness

STRONG_FAIRNESS_BYTES = 24  # a state, beyond what every analysis needs (CompiledGraph.analysis_bytes)


def liveness_properties(model: Model, names: Optional[Sequence[str]] = None,
                        most: Optional[int] = MAX_FAIR_ACTIONS) -> list[Liveness]:
    """The spec's liveness properties (``names``: only those), each one's fairness resolved against
    ``model`` and its predicates tried on the initial states: a ``UsageError`` or ``SpecError`` (one
    line) for what cannot be checked, so that a command can refuse before it explores. ``most``:
    the fairness requirements a property may have (None: no limit, for properties not checked)."""
    spec = model.spec
    props = spec.liveness()
    if not props:
        raise UsageError(f"spec {spec.name} declares no liveness properties (Spec.liveness), so --liveness "
                         "has nothing to check")
    if names:
        known = {p.name for p in props}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(f"spec {spec.name} has no liveness property {unknown[0]!r}; it has: "
                             f"{', '.join(sorted(known))}")
        props = [p for p in props if p.name in names]
    for prop in props:
        try:
            fairness_requirements(model, prop.fair, most)
            for predicate in (prop.eventually, prop.after):
                if predicate is not None:
                    check_on(model.layout, predicate, model.initial)
        except SpecError as e:
            raise SpecError(f"liveness property {prop.name}: {e}") from None
    return props


def unchecked_liveness(model: Model, checking: bool) -> list[str]:
    """Before a run explores: the spec's liveness properties checked as ``liveness_properties``
    checks them (fairness names, predicates), whether or not the run checks liveness, so that a
    misspelt fairness name is refused on every run; ``checking`` (--liveness) also refuses a spec
    that declares none. Returns the names of those the run will not check (none if ``checking``)."""
    if not checking and not model.spec.liveness():
        return []
    # the limit on fairness requirements is the liveness checker's: a run that does not check them is not refused
    props = liveness_properties(model, most=MAX_FAIR_ACTIONS if checking else None)
    return [] if checking else [p.name for p in props]


@dataclass
class PropertyChecked:
    """One property's finding; ``violation``: its lasso, when it is violated."""

    prop: Liveness
    found: LivenessResult
    violation: Optional[Violation] = None


@dataclass
class LivenessChecked:
    """Every property checked, with what the report says of the graph (freed by now)."""

    model: Model
    properties: list[PropertyChecked]
    graph: GraphSummary
    analysis_s: float
    memory_in_use: int
    violations: list[Violation] = field(default_factory=list)


def check_liveness_properties(model: Model, names: Optional[Sequence[str]] = None,
                              max_states: Optional[int] = None, max_memory: Optional[int] = None,
                              progress: ProgressFn = no_progress,
                              graph: Optional[CompiledGraph] = None) -> LivenessChecked:
    """Check the spec's liveness properties (``names``: only those) over the whole state graph
    (``graph``, if the check built it already; else one built now)."""
    props = liveness_properties(model, names)
    graph, kernels = graph_to_analyse(model, graph, max_states, max_memory, progress)
    if any(req.strong for prop in props for req in fairness_requirements(model, prop.fair)):
        # strong fairness: enabled bits, a component array per round and the pruning mask, 8 bytes each
        graph.check_budget(max_memory, extra_per_state=STRONG_FAIRNESS_BYTES)
    t0 = time.perf_counter()
    found = check_all(graph, kernels, props)
    analysis_s = time.perf_counter() - t0
    checked = []
    for prop, result in zip(props, found):
        one = PropertyChecked(prop, result)
        if result.lasso is not None:
            one.violation = Violation(result.name, "liveness", graph.steps(result.lasso.start, result.lasso.labels),
                                      cycle_start=result.lasso.cycle_from)
        checked.append(one)
    return LivenessChecked(model, checked, graph.summary(), analysis_s, memory_in_use(),
                           [c.violation for c in checked if c.violation is not None])
