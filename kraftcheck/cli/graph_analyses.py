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

from typing import Optional

import click
from rich.text import Text

from kraftcheck.cli.terminal import Terminal
from kraftcheck.checker.errors import KraftcheckError
from kraftcheck.checker.model import Model
from kraftcheck.traces.lasso import fairness_phrase

EXIT_VIOLATED, EXIT_USAGE = 1, 2

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


def run_graph_analyses(terminal: Terminal, model: Model, dump_graph: Optional[str], availability: bool,
                       liveness: bool, limit: int, max_states: Optional[int] = None,
                       max_memory: Optional[int] = None, trace_dir: Optional[str] = None,
                       run_options: Optional[dict] = None, recorded: Optional[list] = None
                       ) -> tuple[Optional[int], dict]:
    """Run the requested analyses: an exit code when one failed or found a liveness violation (else
    None), and what they found, for the JSON report (``state_graph``, ``availability``, ``liveness``).
    ``recorded``: ``[the state graph the check recorded while exploring]`` if it did (else each
    analysis records its own); it is taken out of the list once its last user has it, so its
    memory goes back before another variant's graph is recorded."""
    from kraftcheck import traces
    found: dict = {}
    code = None
    try:
        if dump_graph:
            summary = traces.dump_state_graph(model, dump_graph, limit)
            found["state_graph"] = summary
            terminal.out.print(Text(f"state graph: {summary['states']} states, {summary['transitions']} "
                                    f"transitions written to {summary['file']}"))
        if liveness:
            terminal.note("liveness: analysing the state graph")
            terminal.start_progress()
            try:
                report = traces.liveness_report(model, None, max_states, max_memory, trace_dir, run_options,
                                                progress=terminal.progress,
                                                graph=recorded[0] if recorded else None)
            finally:
                terminal.stop_progress()
            found["liveness"] = report
            print_liveness(terminal, report)
            if report["violated"]:
                code = EXIT_VIOLATED
        if availability:
            terminal.note("availability: analysing the state graph of each variant")
            terminal.start_progress()
            try:
                graph = recorded.pop() if recorded else None
                report = traces.availability_report(model, max_states, max_memory, trace_dir, run_options,
                                                    progress=terminal.progress, graph=graph)
                del graph
            finally:
                terminal.stop_progress()
            found["availability"] = report
            print_availability(terminal, report)
    except KraftcheckError as e:
        terminal.error(str(e))
        return EXIT_USAGE, found
    return code, found


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
