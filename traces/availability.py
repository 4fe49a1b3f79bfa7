"""``kraftcheck check --availability``: can the system always serve again without an operator?

Durability has a price in availability: a recovery strategy that refuses unsafe elections can leave
a partition with no leader for good. For each setting the spec proposes (``Spec.availability_variants``,
e.g. one per recovery strategy; by default only the run's own), this records the whole reachable
state graph with the compiled kernels (``checker.analyses.state_graph``) and reports, from the
compiled analysis (``checker.analyses.availability``):

* *stuck states*: states from which no state where the system is available
  (``Spec.availability().holds``, e.g. "the partition has a leader") can ever be reached;
* *stuck sink components*: strongly connected components with no way out and no available state,
  the places a run ends up in and stays;
* a shortest path to a stuck state, as a trace file, so a person can see how the partition got there.

Within the model's bounds, an operator action is whatever the model does not contain; a bound that
runs out (no more restarts left) can make a state stuck too, which the example path shows.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Optional, Union

from kraftcheck.checker.analyses.availability import analyse_availability
from kraftcheck.checker.analyses.predicates import evaluate
from kraftcheck.checker.disk_full import UnwrittenFile, write_kept
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.result import ProgressFn, memory_in_use, no_progress
from kraftcheck.checker.analyses.state_graph import CompiledGraph, graph_to_analyse
from kraftcheck.checker.files import atomic_write
from kraftcheck.checker.model import Model
from kraftcheck.traces.files import to_json
from kraftcheck.traces.graph import build_trace, jsonable
from kraftcheck.traces.states import readable_state


def availability_report(model: Model, max_states: Optional[int] = None, max_memory: Optional[int] = None,
                        trace_dir: Union[str, Path, None] = None, run_options: Optional[dict] = None,
                        progress: ProgressFn = no_progress, graph: Optional[CompiledGraph] = None,
                        unwritten: Optional[list[UnwrittenFile]] = None) -> dict[str, Any]:
    """The report of every variant; with ``trace_dir``, each variant that can get stuck also gets
    a trace file of its shortest path into a stuck state (``trace_file`` in its entry; one the disk
    refuses is left out and noted in ``unwritten``, if given, else raised). ``graph``: the state
    graph of ``model`` already recorded (by the check), used for the variant of the same settings."""
    spec = model.spec
    availability = spec.availability()
    if availability is None:
        raise UsageError(f"spec {spec.name} does not say what 'available' means (Spec.availability), "
                         "so --availability cannot analyse it")
    variants = spec.availability_variants() or {"as configured": spec.params}
    results = []
    own = Model(spec)
    models = {name: own if params == spec.params else Model(type(spec)(params)) for name, params in variants.items()}
    # the variant whose graph is already recorded goes first, so that graph is freed before any other is recorded
    first = next((name for name, m in models.items() if graph is not None and _same_state_graph(m, own)), None)
    found = {}
    for name in ([first] if first else []) + [n for n in models if n != first]:
        found[name] = _analyse(models[name], availability, name, max_states, max_memory, trace_dir, run_options,
                               progress, graph if name == first else None, unwritten)
        graph = None
    results = [found[name] for name in models]
    return {"spec": spec.name, "available_means": availability.description,
            "stuck_means": f"no state where {availability.description} can ever be reached again",
            "variants": results,
            "can_get_stuck": [r["variant"] for r in results if r["stuck_states"]]}


def _analyse(model: Model, availability, name: str, max_states: Optional[int], max_memory: Optional[int],
             trace_dir, run_options, progress: ProgressFn, graph: Optional[CompiledGraph],
             unwritten: Optional[list[UnwrittenFile]]) -> dict[str, Any]:
    graph, kernels = graph_to_analyse(model, graph, max_states, max_memory, progress)
    t0 = time.perf_counter()
    available = evaluate(graph, kernels, availability)
    found = analyse_availability(graph, available)
    analysis_s = time.perf_counter() - t0
    report: dict[str, Any] = {
        "variant": name, "params": jsonable(model.spec.options()), "states": found.states,
        "transitions": found.transitions, "available_states": found.available_states,
        "stuck_states": found.stuck_states, "stuck_sink_components": found.stuck_sink_components,
        "sink_components": found.sink_components, "components": found.components,
        "verdict": found.verdict, "depth": graph.depth, "recorded_by": graph.recorded_by, "graph_bytes": graph.nbytes,
        "build_seconds": round(graph.build_s, 3), "analysis_seconds": round(analysis_s, 3),
        "memory_in_use_bytes": memory_in_use(),
    }
    if found.first_stuck is not None:
        steps = graph.steps(graph.initial_of(found.first_stuck), found.path_labels)
        report["example"] = {"steps": [str(model.labels[s.label]) for s in steps[1:]],
                             "stuck_state": readable_state(model.layout, tuple(steps[-1].state))}
        if trace_dir is not None:
            trace = build_trace(model, [(s.label, tuple(s.state)) for s in steps], kind="counterexample",
                                run_options=run_options,
                                extra={"availability": {"variant": name, "stuck": True,
                                                        "available_means": availability.description}})
            path = Path(trace_dir) / _file_name(model, name, trace.graph["trace_id"])
            if unwritten is None:
                atomic_write(path, to_json(trace))
                report["trace_file"] = str(path)
            elif write_kept(f"the stuck path of availability variant {name}", path,
                            lambda: atomic_write(path, to_json(trace)), unwritten):
                report["trace_file"] = str(path)
    return report


def _same_state_graph(a: Model, b: Model) -> bool:
    """Whether two settings give the same state graph: the same fields, constants, actions and
    initial states (e.g. ``recovery=None`` and ``recovery="balanced"``, its default)."""
    def shape(m: Model):
        return ([(f.name, f.lo, f.domain, f.shape, f.const) for f in m.layout.fields], [str(lab) for lab in m.labels],
                [a.fn for a in m.actions], sorted(m.initial))
    return shape(a) == shape(b)


def _file_name(model: Model, variant: str, trace_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", f"{model.spec.name}.stuck.{variant}")
    return f"{safe}.{trace_id}.json"
