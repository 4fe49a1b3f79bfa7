"""The whole-state-graph analyses a check asks for, run after it: ``analyse_after_check`` is the
one entry point (the pipeline calls it); ``availability_report`` and ``liveness_report`` are the
same analyses from Python, each giving its JSON report.

``--availability`` and ``--liveness`` analyse the whole reachable graph (``checker.analyses``):
the one the compiled engine built while exploring (the check explores every state for them, as
with ``--continue``), or one the compiled kernels build in a pass of their own (other engines,
other variants). No state limit: the run's ``--max-states`` and ``--max-memory`` bound them.
Counterexamples are trace files in ``--trace-dir`` (``traces.analysis_traces``). ``--dump-graph``
writes GraphML through networkx, for small models (``--graph-limit``). The CLI's options and
its rendering of the findings are in ``cli/graph_analyses.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from kraftcheck.checker.analyses.availability import VariantAvailability, availability_of_variants, \
    availability_predicate, variant_models
from kraftcheck.checker.analyses.liveness_properties import LivenessChecked, check_liveness_properties
from kraftcheck.checker.analyses.state_graph import CompiledGraph, GraphSummary
from kraftcheck.checker.disk_full import UnwrittenFile, write_kept
from kraftcheck.checker.errors import KraftcheckError, OverBudget, UsageError
from kraftcheck.checker.explore.result import ProgressFn, Result, Violation, no_progress
from kraftcheck.checker.model import Model
from kraftcheck.traces import dump_state_graph
from kraftcheck.traces.state_graph import GRAPH_LIMIT_REASON, too_large as graph_too_large
from kraftcheck.traces.analysis_traces import write_lasso_trace, write_stuck_trace
from kraftcheck.traces.graph import jsonable
from kraftcheck.traces.states import readable_state


@dataclass
class GraphAnalyses:
    """What the analyses found: ``found`` for the JSON report (``state_graph``, ``availability``,
    ``liveness``), the violated liveness properties as violations, the files a full disk refused,
    the limit that stopped an analysis (``stopped``, beginning "stopped at --max-memory": the run
    is then incomplete, exit 3, unless something was found violated), and the error that stopped
    an analysis (then the run's answer is that error, exit 2)."""

    found: dict = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    unwritten: list[UnwrittenFile] = field(default_factory=list)
    stopped: Optional[str] = None
    error: Optional[str] = None
    refused: bool = False  # the error asks for other input (a limit to raise), as a UsageError does


def analyse_after_check(reporter: Any, result: Result, make_model: Callable[[], Model],
                        dump_graph: Optional[str], availability: bool, liveness: bool, limit: int,
                        max_states: Optional[int], max_memory: Optional[int], trace_dir: Optional[str],
                        run_options: dict) -> Optional[GraphAnalyses]:
    """The analyses asked for, after the check that explored for them (``result``); None if none
    ran. Skipped after an interrupted check; --availability and --liveness also after one that
    stopped early (they need every state), with a line saying so. ``make_model``: the model to
    analyse (the spec without the check's choice of invariants). ``reporter``: where notes and
    progress go (``pipeline.Reporter``); the findings are the caller's to show."""
    if result.interrupted:
        return None
    asked = " and ".join(option for option, given in (("--availability", availability), ("--liveness", liveness))
                         if given)
    both = availability and liveness
    if dump_graph and (result.incomplete_reason or "").startswith(GRAPH_LIMIT_REASON):
        # the check stopped at --graph-limit: the graph has more states, no need to explore it again;
        # the analyses, which have no limit of their own, did not run for the dump's (one error says both)
        error = graph_too_large(result.model.spec, limit)
        if asked:
            error += (f"; {asked}, which {'need' if both else 'needs'} every state, did not run: raise "
                      f"--graph-limit, or leave out --dump-graph ({asked} without it {'have' if both else 'has'} "
                      f"no state limit of {'their' if both else 'its'} own)")
        return GraphAnalyses(error=error, refused=True)
    if asked and result.incomplete_reason:
        reporter.error(f"{asked} {'need' if both else 'needs'} every state; the exploration stopped early "
                       f"({result.incomplete_reason}), so {'they' if both else 'it'} did not run")
        availability = liveness = False
    if not (dump_graph or availability or liveness):
        return None
    # only the analyses hold the check's graph (a list they take it out of), so it is freed once used
    built = [result.graph] if result.graph is not None else None
    result.graph = None
    return _run_analyses(reporter, make_model(), dump_graph, availability, liveness, limit, max_states,
                         max_memory, trace_dir, run_options, built)


def _run_analyses(reporter: Any, model: Model, dump_graph: Optional[str], availability: bool, liveness: bool,
                  limit: int, max_states: Optional[int], max_memory: Optional[int], trace_dir: Optional[str],
                  run_options: Optional[dict], built: Optional[list]) -> GraphAnalyses:
    """``built``: ``[the state graph the check built while exploring]`` if it did (else each
    analysis builds its own); it is taken out of the list once its last user has it, so its
    memory goes back before another variant's graph is built."""
    done = GraphAnalyses()
    doing = "--dump-graph"
    try:
        if dump_graph:
            write_kept("the state graph", dump_graph,
                       lambda: done.found.update(state_graph=dump_state_graph(model, dump_graph, limit)),
                       done.unwritten)
        if liveness:
            doing = "--liveness"
            reporter.note("liveness: analysing the state graph")
            reporter.start_progress()
            try:
                checked = check_liveness_properties(model, None, max_states, max_memory, progress=reporter.progress,
                                                    graph=built[0] if built else None)
            finally:
                reporter.stop_progress()
            done.found["liveness"] = _liveness_report(checked, trace_dir, run_options, done.unwritten)
            done.violations += checked.violations
        if availability:
            doing = "--availability"
            reporter.note("availability: analysing the state graph of each variant")
            reporter.start_progress()
            try:
                graph = built.pop() if built else None
                done.found["availability"] = availability_report(model, max_states, max_memory, trace_dir,
                                                                 run_options, progress=reporter.progress,
                                                                 graph=graph, unwritten=done.unwritten)
                del graph
            finally:
                reporter.stop_progress()
    except OverBudget as e:  # a limit, as one that stops an exploration: incomplete, not an error
        done.stopped = f"stopped at {e.option}: {doing} did not finish: {e}"
    except KraftcheckError as e:  # said after the summary (Outcome.report)
        done.error, done.refused = str(e), isinstance(e, UsageError)
    return done


def availability_report(model: Model, max_states: Optional[int] = None, max_memory: Optional[int] = None,
                        trace_dir: Union[str, Path, None] = None, run_options: Optional[dict] = None,
                        progress: ProgressFn = no_progress, graph: Optional[CompiledGraph] = None,
                        unwritten: Optional[list[UnwrittenFile]] = None) -> dict[str, Any]:
    """States from which the system can never serve again, per variant (``checker.analyses.availability``).
    With ``trace_dir``, each variant that can get stuck also gets a trace file of its shortest path
    into a stuck state (``trace_file`` in its entry; one the disk refuses is left out and noted in
    ``unwritten``, if given, else raised). ``graph``: the state graph of ``model`` already built
    (by the check), used for the variant of the same settings."""
    availability = availability_predicate(model)
    means = availability.description
    models = variant_models(model)
    entries = {}
    for variant in availability_of_variants(model, models, availability, max_states, max_memory, progress, graph):
        entries[variant.name] = _variant_entry(variant, means, trace_dir, run_options, unwritten)
    results = [entries[name] for name in models]
    return {"spec": model.spec.name, "available_means": means,
            "stuck_means": f"no state where {means} can ever be reached again",
            "variants": results,
            "can_get_stuck": [r["variant"] for r in results if r["stuck_states"]]}


def _graph_entry(graph: GraphSummary) -> dict[str, Any]:
    return {"depth": graph.depth, "recorded_by": graph.built_by, "graph_bytes": graph.nbytes,
            "build_seconds": round(graph.build_s, 3)}


def _variant_entry(variant: VariantAvailability, means: str, trace_dir, run_options: Optional[dict],
                   unwritten: Optional[list[UnwrittenFile]]) -> dict[str, Any]:
    found, model = variant.found, variant.model
    entry: dict[str, Any] = {
        "variant": variant.name, "params": jsonable(model.spec.options()), "states": found.states,
        "transitions": found.transitions, "available_states": found.available_states,
        "stuck_states": found.stuck_states, "stuck_sink_components": found.stuck_sink_components,
        "sink_components": found.sink_components, "components": found.components,
        "verdict": found.verdict, **_graph_entry(variant.graph), "analysis_seconds": round(variant.analysis_s, 3),
        "memory_in_use_bytes": variant.memory_in_use,
    }
    steps = variant.stuck_path
    if steps is not None:
        entry["example"] = {"steps": [str(model.labels[s.label]) for s in steps[1:]],
                            "stuck_state": readable_state(model.layout, tuple(steps[-1].state))}
        if trace_dir is not None:
            path = write_stuck_trace(variant, means, trace_dir, run_options, unwritten)
            if path is not None:
                entry["trace_file"] = path
    return entry


def liveness_report(model: Model, names: Optional[Sequence[str]] = None, max_states: Optional[int] = None,
                    max_memory: Optional[int] = None, trace_dir: Union[str, Path, None] = None,
                    run_options: Optional[dict] = None, progress: ProgressFn = no_progress,
                    graph: Optional[CompiledGraph] = None) -> dict[str, Any]:
    """The spec's liveness properties (``names``: only those) under their fairness over the whole
    state graph (``graph``, if the check built it already), with a lasso trace file in
    ``trace_dir`` for each violated one. A trace file the disk refuses leaves its property's
    ``trace_file`` out and the next one is still written."""
    checked = check_liveness_properties(model, names, max_states, max_memory, progress, graph)
    return _liveness_report(checked, trace_dir, run_options, [])


def _liveness_report(checked: LivenessChecked, trace_dir, run_options: Optional[dict],
                     unwritten: list[UnwrittenFile]) -> dict[str, Any]:
    model = checked.model
    results = []
    for one in checked.properties:
        prop, found = one.prop, one.found
        entry: dict[str, Any] = {
            "property": found.name, "formula": found.formula, "fair": [str(entry) for entry in prop.fair],
            "fairness_requirements": found.fair, "doc": " ".join(prop.doc.split()),
            "verdict": found.verdict, "trigger_states": found.trigger_states,
            "doomed_states": found.doomed_states, "fair_components": found.fair_components,
            "vacuous": found.vacuous,
        }
        if found.lasso is not None:
            lasso = found.lasso
            text = [str(model.labels[lab]) for lab in lasso.labels]
            entry["lasso"] = {"prefix": text[:lasso.cycle_from], "cycle": text[lasso.cycle_from:],
                              "stutter": lasso.stutter, "trigger_step": lasso.trigger,
                              "fairness": lasso.fairness}
            if trace_dir is not None:
                path = write_lasso_trace(model, one, trace_dir, run_options, unwritten)
                if path is not None:
                    entry["trace_file"] = one.violation.trace_file = path
        results.append(entry)
    graph = checked.graph
    return {"spec": model.spec.name, "states": graph.states, "transitions": graph.transitions,
            **_graph_entry(graph), "analysis_seconds": round(checked.analysis_s, 3),
            "memory_in_use_bytes": checked.memory_in_use, "properties": results,
            "violated": [r["property"] for r in results if r["verdict"] == "violated"]}
