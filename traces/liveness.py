"""``kraftcheck check --liveness``: the spec's liveness properties under their fairness.

Records the whole reachable state graph with the compiled kernels (``checker.analyses.state_graph``),
checks each property the spec declares (``Spec.liveness``) with ``checker.analyses.liveness`` and,
for each violated one, writes its lasso (``traces.lasso``) as a trace file.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from kraftcheck.checker.analyses.liveness import check_all, fairness_requirements
from kraftcheck.checker.analyses.predicates import check_on
from kraftcheck.checker.disk_full import UnwrittenFile, write_kept
from kraftcheck.checker.errors import SpecError, UsageError
from kraftcheck.checker.explore.result import ProgressFn, Violation, memory_in_use, no_progress
from kraftcheck.checker.analyses.state_graph import CompiledGraph, graph_to_analyse
from kraftcheck.checker.files import atomic_write
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Liveness
from kraftcheck.traces.files import to_json
from kraftcheck.traces.lasso import trace_of_lasso


STRONG_FAIRNESS_BYTES = 24  # a state, beyond what every analysis needs (CompiledGraph.analysis_bytes)


def liveness_properties(model: Model, names: Optional[Sequence[str]] = None) -> list[Liveness]:
    """The spec's liveness properties (``names``: only those), each one's fairness resolved against
    ``model`` and its predicates tried on the initial states: a ``UsageError`` or ``SpecError`` (one
    line) for what cannot be checked, so that a command can refuse before it explores."""
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
            fairness_requirements(model, prop.fair)
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
    props = liveness_properties(model)
    return [] if checking else [p.name for p in props]


@dataclass
class LivenessFound:
    """What ``check_liveness_properties`` found: the report (JSON), each violated property as a
    ``Violation`` of kind ``liveness`` (its lasso's steps), and the trace files a full disk refused."""

    report: dict[str, Any]
    violations: list[Violation] = field(default_factory=list)
    unwritten: list[UnwrittenFile] = field(default_factory=list)


def liveness_report(model: Model, names: Optional[Sequence[str]] = None, max_states: Optional[int] = None,
                    max_memory: Optional[int] = None, trace_dir: Union[str, Path, None] = None,
                    run_options: Optional[dict] = None, progress: ProgressFn = no_progress,
                    graph: Optional[CompiledGraph] = None) -> dict[str, Any]:
    """Check the spec's liveness properties (``names``: only those) over the whole state graph
    (``graph``, if the check recorded it already)."""
    return check_liveness_properties(model, names, max_states, max_memory, trace_dir, run_options, progress,
                                     graph).report


def check_liveness_properties(model: Model, names: Optional[Sequence[str]] = None,
                              max_states: Optional[int] = None, max_memory: Optional[int] = None,
                              trace_dir: Union[str, Path, None] = None, run_options: Optional[dict] = None,
                              progress: ProgressFn = no_progress,
                              graph: Optional[CompiledGraph] = None) -> LivenessFound:
    """``liveness_report``, with the violations and the trace files not written beside it. A trace
    file the disk refuses leaves its property's ``trace_file`` out and the next one is still written."""
    spec = model.spec
    found_all = LivenessFound({})
    props = liveness_properties(model, names)
    graph, kernels = graph_to_analyse(model, graph, max_states, max_memory, progress)
    if any(req.strong for prop in props for req in fairness_requirements(model, prop.fair)):
        # strong fairness: enabled bits, a component array per round and the pruning mask, 8 bytes each
        graph.check_budget(max_memory, extra_per_state=STRONG_FAIRNESS_BYTES)
    t0 = time.perf_counter()
    checked = check_all(graph, kernels, props)
    analysis_s = time.perf_counter() - t0
    results = []
    for prop, found in zip(props, checked):
        entry: dict[str, Any] = {
            "property": found.name, "formula": found.formula, "fair": [str(entry) for entry in prop.fair],
            "fairness_requirements": found.fair, "doc": " ".join(prop.doc.split()),
            "verdict": found.verdict, "trigger_states": found.trigger_states,
            "doomed_states": found.doomed_states, "fair_components": found.fair_components,
        }
        if found.lasso is not None:
            lasso = found.lasso
            text = [str(model.labels[lab]) for lab in lasso.labels]
            entry["lasso"] = {"prefix": text[:lasso.cycle_from], "cycle": text[lasso.cycle_from:],
                              "stutter": lasso.stutter, "trigger_step": lasso.trigger,
                              "fairness": lasso.fairness}
            violation = Violation(found.name, "liveness", graph.steps(lasso.start, lasso.labels),
                                  cycle_start=lasso.cycle_from)
            if trace_dir is not None:
                trace = trace_of_lasso(graph, found, prop, run_options)
                safe = re.sub(r"[^A-Za-z0-9_-]+", "_", f"{spec.name}.{found.name}")
                path = Path(trace_dir) / f"{safe}.{trace.graph['trace_id']}.json"
                if write_kept(f"the lasso of liveness property {found.name}", path,
                              lambda: atomic_write(path, to_json(trace)), found_all.unwritten, found.name):
                    entry["trace_file"] = violation.trace_file = str(path)
            found_all.violations.append(violation)
        results.append(entry)
    found_all.report = {"spec": spec.name, "states": graph.size, "transitions": graph.transitions, "depth": graph.depth,
            "recorded_by": graph.recorded_by,
            "graph_bytes": graph.nbytes, "build_seconds": round(graph.build_s, 3),
            "analysis_seconds": round(analysis_s, 3),
            "memory_in_use_bytes": memory_in_use(), "properties": results,
            "violated": [r["property"] for r in results if r["verdict"] == "violated"]}
    return found_all
