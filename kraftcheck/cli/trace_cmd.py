"""``kraftcheck trace``: read a counterexample (or an authored scenario) as a table, a picture, a
graph file, or replay it against its spec.

Every subcommand takes a trace file written by ``kraftcheck check`` or a scenario file (YAML, or
JSON with ``steps``); for a scenario, ``--variant`` picks the setting (default: the first).
Exit codes: 0 success (``report``: kraftcheck/cli/trace_report_cmd.py; ``replay``: a valid behaviour
that reaches its recorded violation, or a scenario meeting every expectation); 1 ``replay`` found a
bad step or an unmet expectation;
2 the file cannot be read or is not a trace, or (``replay``) its spec cannot be found: a trace
names its spec, and a spec that is not registered is given with ``--spec file.py:Class``;
``show``, ``render`` and ``export`` replay a trace file first and say on standard error when it is
not a behaviour of its spec, or could not be checked (``_vouch``), which changes no exit code;
3 (``export``) the ``--output`` file could not be written (a full disk), as for any output of
``kraftcheck check``.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import click
from rich.console import Console
from rich.text import Text

from kraftcheck.checker.disk_full import UnwrittenFile, write_kept
from kraftcheck.checker.errors import KraftcheckError
from kraftcheck.output_paths import check_output_file, refuse_replacing_input, to_stdout
from kraftcheck.checker.files import write_output
from kraftcheck.specs import spec_class
from kraftcheck.traces.files import load
from kraftcheck.traces.lasso import lasso_length
from kraftcheck.traces.replay import explained_by_spec, replay as replay_trace
from kraftcheck.traces.scenario import is_scenario_file, load_scenario, run_scenario
from kraftcheck.traces.spec_terms import in_spec_terms
from kraftcheck.traces.view import TraceView

EXIT_OK, EXIT_BAD_TRACE, EXIT_INPUT, EXIT_UNWRITTEN = 0, 1, 2, 3

_file = click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
_variant = click.option("--variant", metavar="NAME", help="Scenario files: the variant (setting) to use.")
_spec_ref = click.option("--spec", "spec_ref", metavar="REF",
                         help="The spec, for a trace of one loaded from a file or module (file.py:Class, "
                              "module:Class); a trace only names its spec, and kraftcheck never imports code a "
                              "file names.")
_model_names = click.option("--model-names", is_flag=True,
                            help="The model's own fields and values (c_isr, v_pe_ok, renumbered epochs) instead of "
                                 "the spec's domain terms (Kafka: ISR, ELR, real epochs, the record each step writes).")


def _console(no_color: bool, width: Optional[int], stderr: bool = False) -> Console:
    return Console(no_color=no_color or None, color_system=None if no_color else "auto", width=width,
                   highlight=False, emoji=False, stderr=stderr, soft_wrap=False)


def _fail(message: str, code: int = EXIT_INPUT) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _check_output(output: Optional[Path], source: Path, picture: bool = False) -> None:
    """A bad output location, or the file read (``source``: the trace would be replaced), is refused
    before any work (one line, exit 2)."""
    try:
        check_output_file(output, "--output")
        refuse_replacing_input(output, "--output", source, "trace or scenario file")
    except KraftcheckError as e:
        _fail(str(e))
    if picture and Path(output).suffix.lower() not in (".svg", ".png"):
        _fail(f"--output {output}: the picture's format is its name's ending, which must be .svg or .png")


def _shown(graph, model_names: bool, spec_ref: Optional[str] = None):
    """The graph as a person reads it: in its spec's terms (its ``trace_terms``; ``spec_ref``, the
    command's --spec, for a spec not registered here) unless ``--model-names``. A ``trace_terms``
    that raises is the spec's error (exit 2, its line), not a rendering in other terms."""
    try:
        return in_spec_terms(graph, model_names, spec_class(spec_ref) if spec_ref else None)
    except KraftcheckError as e:
        _fail(f"{e}\n(--model-names shows the trace in the model's own fields, without trace_terms)")


SPEC_OF_A_SCENARIO = "--spec applies to trace files only; a scenario replays the registered spec it names"


def _open(path: Path, variant: Optional[str]):
    """(graph, scenario run or None) of a trace or scenario file."""
    if not path.exists():
        _fail(f"{path}: no such file")
    try:
        if is_scenario_file(path):
            run = run_scenario(load_scenario(path), variant)
            return run.graph, run
        if variant:
            _fail("--variant applies to scenario files only")
        return load(path), None
    except KraftcheckError as e:
        _fail(str(e))


def _open_to_display(path: Path, variant: Optional[str], spec_ref: Optional[str]):
    """``_open`` for show, export and render: a trace file vouched for (``_vouch``) against its
    spec, or ``spec_ref``'s; ``spec_ref`` refused for a scenario, before it runs."""
    if spec_ref and path.exists() and is_scenario_file(path):
        _fail(SPEC_OF_A_SCENARIO)
    graph, run = _open(path, variant)
    if run is None:
        _vouch(graph, path, spec_ref)
    return graph, run


def _vouch(graph, path: Path, spec_ref: Optional[str]) -> None:
    """Say on standard error when a trace file is not a behaviour of its spec (``spec_ref``, the
    command's --spec, for a spec not registered here), or could not be checked: show, render and
    export display the file as written, which anyone may have edited, so it is replayed first
    (interpreted, a fraction of a second). Standard output is untouched, but for the checks'
    explanations of a trace the replay vouched for: its spec's (``explained_by_spec``)."""
    how = shlex.join(["kraftcheck", "trace", "replay", str(path)] + (["--spec", spec_ref] if spec_ref else []))
    try:
        spec = spec_class(spec_ref) if spec_ref else None
    except KraftcheckError as e:
        _fail(str(e))
    if graph.graph.get("terms"):
        note = (f"not verified: a trace shown in {graph.graph['terms']}'s terms (an export) cannot be replayed; "
                "replay the trace file kraftcheck check wrote")
    else:
        try:
            report = replay_trace(graph, spec=spec)
        except KraftcheckError as e:  # a function of the spec raised on one of its steps
            report, note = None, f"not verified: {e}"
        if report is None:
            pass
        elif report.ok:
            explained_by_spec(graph, report)
            return
        elif report.spec is None and report.error.field == "graph.spec":
            note = (f"not verified: its spec {graph.graph.get('spec')!r} is not registered here; "
                    f"--spec file.py:Class (or module:Class) checks it against its spec")
        else:
            note = (f"this trace is NOT a behaviour of its spec ({report.error}): shown as the file says, not as "
                    f"the spec runs ('{how}' checks every step)")
    click.echo(f"note: {note}", err=True)


@click.group("trace")
def trace() -> None:
    """Show, picture, export or replay a counterexample trace or an authored scenario."""


@trace.command("show")
@_file
@_variant
@click.option("--full", is_flag=True, help="Show every field at every step, changed ones marked.")
@click.option("--broker", "lane", metavar="B", help="Keep one broker's fields (lane B) and the controller's.")
@click.option("--no-color", is_flag=True, help="Plain text (also when NO_COLOR is set).")
@click.option("--ascii", "ascii_only", is_flag=True, help="ASCII borders and arrows only.")
@click.option("--width", type=click.IntRange(30, 1000), help="Columns to fit (default: the terminal's).")
@_model_names
@_spec_ref
def show(file: Path, variant: Optional[str], full: bool, lane: Optional[str], no_color: bool,
         ascii_only: bool, width: Optional[int], model_names: bool, spec_ref: Optional[str]) -> None:
    """A table, one row per step: the action, what it writes or sends, and the values it changed.

    A trace file is replayed first: one that is not a behaviour of its spec, or whose spec is not
    registered (not checked; name it with --spec), is said so on standard error.
    """
    from kraftcheck.traces.table import print_trace

    graph, run = _open_to_display(file, variant, spec_ref)
    console = _console(no_color, width)
    try:
        print_trace(TraceView(_shown(graph, model_names, spec_ref)), console, full=full, lane=lane,
                    ascii_only=ascii_only)
    except KraftcheckError as e:
        _fail(str(e))
    if run is not None:
        _print_run(console, run)


@trace.command("export")
@_file
@_variant
@click.option("--format", "fmt", required=True, type=click.Choice(["graphml", "dot", "json", "mermaid"]),
              help="graphml / dot / json (node-link) / mermaid (sequence diagram).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="File to write (atomically; missing directories are created); '-' or none: standard output.")
@_model_names
@_spec_ref
def export_cmd(file: Path, variant: Optional[str], fmt: str, output: Optional[Path], model_names: bool,
               spec_ref: Optional[str]) -> None:
    """The trace in another graph format.

    Exit codes: 0 written; 2 the file cannot be read or is not a trace; 3 the output could not
    be written (a full disk), said in one error line. A trace file that is not a behaviour of its
    spec, or could not be checked, is said so on standard error, as by show.
    """
    from kraftcheck.traces.export import export

    _check_output(output, file)
    graph, run = _open_to_display(file, variant, spec_ref)
    text = export(_shown(graph, model_names, spec_ref), fmt)
    if output is None:
        click.echo(text, nl=False)
        return
    if to_stdout(output):
        write_output(output, text)
        return
    unwritten: list[UnwrittenFile] = []
    if not write_kept("the export", output, lambda: write_output(output, text), unwritten):
        _fail(str(unwritten[0]), EXIT_UNWRITTEN)
    click.echo(f"wrote {output}", err=True)


@trace.command("render")
@_file
@_variant
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Picture to write: a .svg or .png file (missing directories are created).")
@click.option("--dpi", default=150, show_default=True, type=click.IntRange(50, 600), help="PNG resolution.")
@_model_names
@_spec_ref
def render_cmd(file: Path, variant: Optional[str], output: Path, dpi: int, model_names: bool,
               spec_ref: Optional[str]) -> None:
    """A picture: lanes for the controller and each broker, time flowing down.

    A trace file that is not a behaviour of its spec, or could not be checked, is said so on
    standard error, as by show.
    """
    from kraftcheck.traces.render import render

    _check_output(output, file, picture=True)
    graph, run = _open_to_display(file, variant, spec_ref)
    unwritten: list[UnwrittenFile] = []
    try:
        # a full disk or a file size limit is one line and exit 3, as for export and report
        written = write_kept("the picture", output,
                             lambda: render(_shown(graph, model_names, spec_ref), output, dpi=dpi), unwritten)
    except KraftcheckError as e:
        _fail(str(e))
    if not written:
        _fail(str(unwritten[0]), EXIT_UNWRITTEN)
    click.echo(f"wrote {output}", err=True)


@trace.command("replay")
@_file
@_variant
@click.option("--all-variants/--one-variant", default=True,
              help="Scenario files: replay every variant (default) or only --variant / the first.")
@click.option("--compiled", is_flag=True, help="Step through the engine's compiled actions.")
@_spec_ref
@click.option("--quiet", is_flag=True, help="Only the verdict, no table.")
@click.option("--no-color", is_flag=True, help="Plain text.")
@click.option("--width", type=click.IntRange(30, 1000), help="Columns to fit.")
def replay_cmd(file: Path, variant: Optional[str], all_variants: bool, compiled: bool, spec_ref: Optional[str],
               quiet: bool, no_color: bool, width: Optional[int]) -> None:
    """Check the trace is a real behaviour of its spec; exit 1 at the first bad step."""
    from kraftcheck.traces.table import print_trace

    console = _console(no_color, width)
    if not file.exists():
        _fail(f"{file}: no such file")
    if is_scenario_file(file):
        if spec_ref:
            _fail(SPEC_OF_A_SCENARIO)
        try:
            scenario = load_scenario(file)
            names = [variant] if variant or not all_variants else list(scenario.variants)
            runs = [run_scenario(scenario, name or None, compiled=compiled) for name in names]
        except KraftcheckError as e:
            _fail(str(e))
        for run in runs:
            if not quiet:
                print_trace(TraceView(run.graph), console)
            _print_run(console, run)
        sys.exit(EXIT_OK if all(r.ok for r in runs) else EXIT_BAD_TRACE)
    # a trace file has no variants: its verdict would not be the one asked for
    if variant or not all_variants:
        _fail(f"{'--variant' if variant else '--one-variant'} applies to scenario files only")

    try:
        graph = load(file)
        spec = spec_class(spec_ref) if spec_ref else None
    except KraftcheckError as e:
        _fail(str(e))
    if graph.graph.get("terms"):
        _fail(f"{file} is a trace shown in {graph.graph['terms']}'s terms (trace export --format json), which "
              "cannot be replayed: replay the trace file kraftcheck check wrote, or export it with --model-names")
    try:
        report = replay_trace(graph, compiled=compiled, spec=spec)
    except KraftcheckError as e:  # the spec's own function raised: no verdict on the trace
        _fail(str(e))
    if report.error is not None and report.spec is None and report.error.field == "graph.spec":
        _fail(str(report.error))  # no spec to replay against: the user must name one, not a bad step
    if report.error is not None:
        console.print(Text(f"NOT A VALID TRACE: {report.error}", style="bold red"))
        sys.exit(EXIT_BAD_TRACE)
    if not quiet:
        print_trace(TraceView(graph), console)
    v = report.violation
    tail = f"; reaches {v['kind']} {v['check']} violated at step {v['step']}" if v else ""
    stuck = graph.graph.get("availability")
    if stuck is not None:
        tail = (f"; its last state is stuck (availability variant {stuck['variant']}): no state where "
                f"{stuck['available_means']} is reachable from it")
    lasso = graph.graph.get("lasso")
    if lasso is None:
        said = (f"valid: {len(report.steps)} states ({len(report.steps) - 1} actions) of {report.spec!r}, "
                f"each an enabled action producing exactly the next state{tail}")
    else:  # its length as kraftcheck check says it, the closing step apart
        length = lasso_length(len(report.steps), lasso["cycle_start"], lasso["stutter"])
        ending = f"then stuttering at step {lasso['cycle_start']}" if lasso["stutter"] else \
            f"the closing step too (back to step {lasso['cycle_start']})"
        said = (f"valid: lasso of {report.spec!r}: {length}; each step an enabled action producing exactly the "
                f"next state, {ending}: a fair behaviour in which liveness {v['check']} never reaches its goal "
                f"after step {v['step']}")
    console.print(Text(said, style="bold green"))
    sys.exit(EXIT_OK)


def _print_run(console: Console, run) -> None:
    verdict = "as expected" if run.ok else "NOT as expected"
    style = "bold green" if run.ok else "bold red"
    console.print(Text(f"scenario {run.scenario.name} [{run.variant}]: {run.outcome()} -- {verdict}", style=style))
    for problem in run.problems:
        console.print(Text(f"  {problem}", style="red"))


def _add_report() -> None:
    """``trace report`` lives in its own module (kraftcheck/cli/trace_report_cmd.py), which uses
    this one's helpers."""
    from kraftcheck.cli.trace_report_cmd import report_cmd
    trace.add_command(report_cmd)


_add_report()
