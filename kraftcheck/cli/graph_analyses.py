"""``kraftcheck check --dump-graph FILE.graphml`` and ``--availability``: whole-state-graph analyses
of small models (see ``traces.state_graph`` and ``traces.availability``), run after the check."""

from __future__ import annotations

from typing import Optional

import click
from rich.text import Text

from kraftcheck.cli.terminal import Terminal
from kraftcheck.checker.errors import KraftcheckError
from kraftcheck.checker.model import Model

EXIT_USAGE = 2

OPTIONS = [
    click.Option(["--dump-graph"], metavar="FILE.graphml",
                 help="Also write the whole reachable state graph as GraphML (small models only)."),
    click.Option(["--availability"], is_flag=True,
                 help="Also report states from which no leader can ever be elected again, per recovery strategy "
                      "(small models only)."),
    click.Option(["--graph-limit"], type=click.IntRange(min=1), default=20_000, metavar="N", show_default=True,
                 help="Refuse --dump-graph / --availability above N distinct states."),
]


def run_graph_analyses(terminal: Terminal, model: Model, dump_graph: Optional[str], availability: bool,
                       limit: int) -> tuple[Optional[int], dict]:
    """Run the requested analyses: an exit code when one failed (else None), and what they found,
    for the JSON report (``state_graph``, ``availability``)."""
    from kraftcheck import traces
    found: dict = {}
    try:
        if dump_graph:
            summary = traces.dump_state_graph(model, dump_graph, limit)
            found["state_graph"] = summary
            terminal.out.print(Text(f"state graph: {summary['states']} states, {summary['transitions']} "
                                    f"transitions written to {summary['file']}"))
        if availability:
            report = traces.availability_report(model, limit)
            found["availability"] = report
            print_availability(terminal, report)
    except KraftcheckError as e:
        terminal.error(str(e))
        return EXIT_USAGE, found
    return None, found


def print_availability(terminal: Terminal, report: dict) -> None:
    out = terminal.out
    out.print(Text(f"availability: from every reachable state, is a state where {report['available_means']} "
                   "still reachable?", style="bold"))
    for v in report["variants"]:
        stuck = v["stuck_states"]
        style = "red" if stuck else "green"
        line = (f"  {v['variant']}: {v['verdict']} ({stuck} of {v['states']} states stuck, "
                f"{v['stuck_sink_components']} stuck sink components)")
        out.print(Text(line, style=style))
        if "example" in v:
            out.print(Text("    e.g. " + " -> ".join(v["example"]["steps"] or ["(initial state)"]), style="dim"))
