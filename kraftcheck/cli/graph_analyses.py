"""``kraftcheck check --availability``, ``--liveness`` and ``--dump-graph FILE.graphml``: the
whole-state-graph analyses, run after the check.

``--availability`` and ``--liveness`` analyse the whole reachable graph (``traces.availability``,
``traces.liveness``): the one the compiled engine recorded while exploring (the check explores
every state for them, as with ``--continue``), or one recorded by the compiled kernels in a pass of
their own (other engines, other variants). No state limit: the run's ``--max-states`` and
``--max-memory`` bound them. Counterexamples are trace files in ``--trace-dir``.
``--dump-graph`` writes GraphML through networkx, for small models (``--graph-limit``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import click
from rich.text import Text

from kraftcheck.cli.terminal import Terminal
from kraftcheck.checker.disk_full import UnwrittenFile, write_kept
from kraftcheck.checker.errors import KraftcheckError
from kraftcheck.checker.explore.result import Result, Violation
from kraftcheck.checker.model import Model
from kraftcheck.traces.lasso import fairness_phrase

OPTIONS = [
    click.Option(["--availability"], is_flag=True,
                 help="Also report the states from which the system can never serve again (no leader can be "
                      "elected), per recovery strategy, with a shortest path into one as a trace file. Explores "
                      "every state (as --continue). Reports only: the exit code stays the check's."),
    click.Option(["--liveness"], is_flag=True,
                 help="Also check the spec's liveness properties under their fairness, weak or strong (for kafka: the "
                      "partition regains a leader; an acknowledged write becomes readable). Explores every state "
                      "(as --continue); a violation is a lasso trace file and makes the exit code 1."),
    click.Option(["--dump-graph"], metavar="FILE.graphml",
                 help="Also write the whole reachable state graph as GraphML (small models only: --graph-limit)."),
    click.Option(["--graph-limit"], type=click.IntRange(min=1), default=20_000, metavar="N", show_default=True,
                 help="Refuse --dump-graph above N distinct states."),
]


@dataclass
class GraphAnalyses:
    """What the analyses found: ``found`` for the JSON report (``state_graph``, ``availability``,
    ``liveness``), the violated liveness properties as violations, the files a full disk refused,
    and the error that stopped an analysis (then the run's answer is that error, exit 2)."""

    found: dict = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    unwritten: list[UnwrittenFile] = field(default_factory=list)
    error: Optional[str] = None


def analyse_after_check(terminal: Terminal, result: Result, make_model: Callable[[], Model],
                        dump_graph: Optional[str], availability: bool, liveness: bool, limit: int,
                        max_states: Optional[int], max_memory: Optional[int], trace_dir: Optional[str],
                        run_options: dict) -> Optional[GraphAnalyses]:
    """The analyses asked for, after the check that explored for them (``result``); None if none
    ran. Skipped after an interrupted check; --availability and --liveness also after one that
    stopped early (they need every state), with a line saying so. ``make_model``: the model to
    analyse (the spec without the check's choice of invariants)."""
    if result.interrupted:
        return None
    if (availability or liveness) and result.incomplete_reason:
        terminal.error(f"--availability and --liveness need every state; the exploration stopped early "
                       f"({result.incomplete_reason}), so they did not run")
        availability = liveness = False
    if not (dump_graph or availability or liveness):
        return None
    # only the analyses hold the recorded graph (a list they take it out of), so it is freed once used
    recorded = [result.graph] if result.graph is not None else None
    result.graph = None
    return run_graph_analyses(terminal, make_model(), dump_graph, availability, liveness, limit, max_states,
                              max_memory, trace_dir, run_options, recorded=recorded)


def run_graph_analyses(terminal: Terminal, model: Model, dump_graph: Optional[str], availability: bool,
                       liveness: bool, limit: int, max_states: Optional[int] = None,
                       max_memory: Optional[int] = None, trace_dir: Optional[str] = None,
                       run_options: Optional[dict] = None, recorded: Optional[list] = None) -> GraphAnalyses:
    """Run the requested analyses (printing nothing but progress: ``print_analyses`` shows what
    they found). ``recorded``: ``[the state graph the check recorded while exploring]`` if it did
    (else each analysis records its own); it is taken out of the list once its last user has it,
    so its memory goes back before another variant's graph is recorded."""
    from kraftcheck import traces
    from kraftcheck.traces.availability import availability_report
    from kraftcheck.traces.liveness import check_liveness_properties
    done = GraphAnalyses()
    try:
        if dump_graph:
            write_kept("the state graph", dump_graph,
                       lambda: done.found.update(state_graph=traces.dump_state_graph(model, dump_graph, limit)),
                       done.unwritten)
        if liveness:
            terminal.note("liveness: analysing the state graph")
            terminal.start_progress()
            try:
                checked = check_liveness_properties(model, None, max_states, max_memory, trace_dir, run_options,
                                                    progress=terminal.progress,
                                                    graph=recorded[0] if recorded else None)
            finally:
                terminal.stop_progress()
            done.found["liveness"] = checked.report
            done.violations += checked.violations
            done.unwritten += checked.unwritten
        if availability:
            terminal.note("availability: analysing the state graph of each variant")
            terminal.start_progress()
            try:
                graph = recorded.pop() if recorded else None
                done.found["availability"] = availability_report(model, max_states, max_memory, trace_dir,
                                                                 run_options, progress=terminal.progress,
                                                                 graph=graph, unwritten=done.unwritten)
                del graph
            finally:
                terminal.stop_progress()
    except KraftcheckError as e:  # said after the summary (Outcome.report)
        done.error = str(e)
    return done


def print_analyses(terminal: Terminal, done: GraphAnalyses) -> None:
    """What the analyses found, after the check's summary."""
    if terminal.quiet:
        return
    summary = done.found.get("state_graph")
    if summary:
        terminal.out.print(Text(f"state graph: {summary['states']} states, {summary['transitions']} "
                                f"transitions written to {summary['file']}"))
    if "liveness" in done.found:
        print_liveness(terminal, done.found["liveness"])
    if "availability" in done.found:
        print_availability(terminal, done.found["availability"])


def _graph_line(r: dict) -> str:
    how = "recorded by the check's exploration" if r["recorded_by"] == "the check's exploration" else \
        f"recorded in {r['build_seconds']:,.1f} s"
    return f"{r['states']:,} states, {r['transitions']:,} transitions, {how} ({r['graph_bytes'] / 2**20:,.0f} MiB)"


def print_availability(terminal: Terminal, report: dict) -> None:
    if terminal.quiet:
        return
    out = terminal.out
    out.print(Text(f"availability: from every reachable state, is a state where {report['available_means']} "
                   "still reachable?", style="bold"))
    for v in report["variants"]:
        stuck = v["stuck_states"]
        style = "red" if stuck else "green"
        line = (f"  {v['variant']}: {v['verdict']} ({stuck:,} of {v['states']:,} states stuck, "
                f"{v['stuck_sink_components']:,} stuck sink components)")
        out.print(Text(line, style=style))
        out.print(Text(f"    graph: {_graph_line(v)}; analysed in {v['analysis_seconds']:,.1f} s", style="dim"))
        if "example" in v:
            out.print(Text("    shortest path: " + " -> ".join(v["example"]["steps"] or ["(initial state)"]),
                           style="dim"))
        if "trace_file" in v:
            out.print(Text(f"    trace: {v['trace_file']}", style="dim"))


def print_liveness(terminal: Terminal, report: dict) -> None:
    if terminal.quiet:
        return
    out = terminal.out
    out.print(Text(f"liveness: {_graph_line(report)}; analysed in {report['analysis_seconds']:,.1f} s",
                   style="bold"))
    for p in report["properties"]:
        style = "red" if p["verdict"] == "violated" else "green"
        out.print(Text(f"  {p['property']}: {p['verdict']}  {p['formula']}", style=style))
        if p["fair"]:
            out.print(Text(f"    {fairness_phrase(p['fair'])}: {', '.join(p['fair'])}", style="dim"))
        else:
            out.print(Text("    no fairness: any step may never happen", style="dim"))
        lasso = p.get("lasso")
        if lasso:
            prefix = " -> ".join(lasso["prefix"]) or "(initial state)"
            cycle = "stutters forever" if lasso["stutter"] else \
                "then forever: " + " -> ".join(lasso["cycle"])
            out.print(Text(f"    lasso: {prefix}; {cycle}", style="dim"))
        if "trace_file" in p:
            out.print(Text(f"    trace: {p['trace_file']}", style="dim"))
