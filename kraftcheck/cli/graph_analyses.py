"""``kraftcheck check --availability``, ``--liveness`` and ``--dump-graph FILE.graphml``: their
options and how the terminal shows what they found. The analyses themselves run after the check
(``kraftcheck.analyses.analyse_after_check``; the algorithms are in ``checker.analyses``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.text import Text

from kraftcheck.cli.terminal import Terminal
from kraftcheck.traces.lasso import fairness_phrase

if TYPE_CHECKING:  # the analyses' modules load only when a check runs them
    from kraftcheck.analyses import GraphAnalyses

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
                 help="Also write the whole reachable state graph as GraphML (small models only: --graph-limit); "
                      "missing directories are created."),
    click.Option(["--graph-limit"], type=click.IntRange(min=1), default=20_000, metavar="N", show_default=True,
                 help="Refuse --dump-graph above N distinct states: the check stops once it has found more "
                      "(exit 2, before exploring the rest; --availability and --liveness then do not run)."),
]


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
        if p.get("vacuous"):
            out.print(Text(f"    vacuously: {p['vacuous']}", style="yellow"))
        lasso = p.get("lasso")
        if lasso:
            prefix = " -> ".join(lasso["prefix"]) or "(initial state)"
            cycle = "stutters forever" if lasso["stutter"] else \
                "then forever: " + " -> ".join(lasso["cycle"])
            out.print(Text(f"    lasso: {prefix}; {cycle}", style="dim"))
        if "trace_file" in p:
            out.print(Text(f"    trace: {p['trace_file']}", style="dim"))
