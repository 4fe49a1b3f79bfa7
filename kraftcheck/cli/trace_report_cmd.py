"""``kraftcheck trace report``: a counterexample as a bug report (Markdown, or JIRA markup with
``--format jira``), in its spec's terms; ``--with-fix NAME`` re-runs the check on the trace's
configuration with a fix switch on and adds its verdict.

The trace is replayed against its spec first: a file that is not a behaviour of the spec reaching
its recorded violation (an edited state or step, another spec's parameters) gets no report. The
spec is looked up by the name the file holds among registered specs only, never imported from a
path the file names; a spec loaded from a file or module is given with ``--spec``.

Exit codes: 0 the report is written (whatever the fixes' verdicts); 2 the file cannot be read, is
not a counterexample or does not replay, its spec cannot be found, or a ``--with-fix`` name is not
a switch of the spec; 3 the output could not be written.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Optional

import click

from kraftcheck.checker.disk_full import UnwrittenFile, write_kept
from kraftcheck.checker.errors import KraftcheckError, UsageError
from kraftcheck.checker.files import write_output
from kraftcheck.output_paths import to_stdout
from kraftcheck.specs import DEFAULT_SPEC, spec_class
from kraftcheck.traces.replay import rebuild_spec
from kraftcheck.traces.scenario import is_scenario_file
from kraftcheck.traces.report import FORMATS, FixVerdict, report, reproduce_command, run_option_words


EXIT_UNWRITTEN = 3


def _fail(message: str, code: int = 2) -> None:
    from kraftcheck.cli.trace_cmd import _fail as fail
    fail(message, code)


def _switch(cls, name: str, params: dict) -> str:
    """``--with-fix`` NAME as the spec's parameter, or a usage error naming the switches."""
    key = name.lstrip("-").replace("-", "_")
    fields = {f.name: f for f in dataclasses.fields(cls.Params)}
    switches = [f for f, d in fields.items() if d.type in (bool, "bool") and f.startswith("fix_")]
    if key not in fields or fields[key].type not in (bool, "bool"):
        _fail(f"--with-fix {name}: spec {cls.name} has no switch {key!r}; its fix switches: "
              + (", ".join(switches) or "(none)"))
    if params.get(key):
        _fail(f"--with-fix {name}: the trace was found with {key} already on")
    return key


def _defaults(cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls.Params):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
    return out


def _run_fix(spec, params: dict, key: str, command: str, time_limit: Optional[float],
             constraints: Optional[list] = None, deadlock: Optional[bool] = None,
             liveness: bool = False) -> FixVerdict:
    """``liveness``: the trace is a lasso, so the fix is judged by the liveness properties too (an
    exploration alone checks only the invariants, which a lasso does not break)."""
    from kraftcheck.api import run
    from kraftcheck.request import CheckRequest

    started = time.monotonic()
    last = [started]

    def progress(p) -> None:  # one line every 30 s on standard error: a fix run takes minutes
        now = time.monotonic()
        if now - last[0] >= 30:
            last[0] = now
            click.echo(f"  {key}: depth {p.depth}, {p.distinct:,} states, {p.elapsed_s:.0f} s", err=True)

    try:
        result = run(CheckRequest(spec, {**params, key: True}, time_limit=time_limit, deadlock=deadlock,
                                  constraints=None if constraints is None else tuple(constraints),
                                  liveness=liveness), progress)
    except UsageError as e:
        return FixVerdict(key, "refused", str(e), command)
    except KraftcheckError as e:  # the spec's code failed on a state, or an analysis did: no verdict
        return FixVerdict(key, "error", str(e), command)
    took = f"{time.monotonic() - started:.0f} s"
    states = f"{result.distinct_states:,} states"
    if result.status == "holds":
        checked = "every invariant and liveness property" if liveness else "every invariant"
        return FixVerdict(key, "holds", f"{checked} holds over {states} (depth {result.depth}; {took})", command)
    if result.status == "violated":
        names = sorted({v.check for v in result.violations})
        return FixVerdict(key, "violated", f"violates {', '.join(names)} ({states} explored; {took})", command)
    return FixVerdict(key, "incomplete", f"no verdict: {result.incomplete_reason or 'stopped'} after {states} "
                                         f"({took})", command)


def _stopping_at_the_trace(run_options: dict, declared: list[str], spec_checks_deadlock: bool, kind: Optional[str],
                           options: list[str]) -> list[str]:
    """The run's options for a command that stops at the trace's own check. A run that went on past
    its first violation (--continue) may have found another check's first: an invariant's trace
    needs no deadlock check (it changes nothing of the search), and a deadlock's needs the run's
    --continue, or the command would stop at a shallower invariant; a deadlock's trace also needs
    the run's --invariant names, the only invariants it checked."""
    continued = run_options.get("continue") is True
    if kind in ("invariant", "property") and continued and run_options.get("deadlock") is True:
        return run_option_words({**run_options, "deadlock": False}, declared, spec_checks_deadlock)
    if kind == "deadlock":
        names = run_options.get("invariants")
        names = [str(n) for n in names] if isinstance(names, list) else []
        return options + [w for n in names for w in ("--invariant", n)] + (["--continue"] if continued else [])
    return options


@click.command("report")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--variant", metavar="NAME",
              help="Refused: a scenario is not a counterexample (trace replay shows its failing checks).")
@click.option("--format", "fmt", default="markdown", show_default=True, type=click.Choice(FORMATS),
              help="markdown, or jira (JIRA wiki markup).")
@click.option("--with-fix", "fixes", multiple=True, metavar="NAME",
              help="Re-run the check on the trace's configuration with this fix switch on (e.g. "
                   "fix-reassignment-min-isr) and add its verdict (repeatable; each run is a full check).")
@click.option("--fix-time-limit", type=click.FloatRange(min=1), metavar="SECONDS",
              help="Stop each --with-fix run after this long (its verdict is then 'incomplete').")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="File to write (atomically; missing directories are created); '-' or none: standard output.")
@click.option("--model-names", is_flag=True,
              help="The model's own fields and values instead of the spec's domain terms.")
@click.option("--spec", "spec_ref", metavar="REF",
              help="The spec, for a trace of one loaded from a file or module (file.py:Class, module:Class); "
                   "a trace only names its spec, and kraftcheck never imports code a file names.")
def report_cmd(file: Path, variant: Optional[str], fmt: str, fixes: tuple[str, ...], fix_time_limit: Optional[float],
               output: Optional[Path], model_names: bool, spec_ref: Optional[str]) -> None:
    """A bug report of a counterexample: summary, configuration, steps, reproduction, fix verdicts."""
    from kraftcheck.cli.trace_cmd import _check_output, _open, _shown  # that module registers this command
    from kraftcheck.traces.replay import explained_by_spec, replay

    _check_output(output, file)
    if file.exists() and is_scenario_file(file):  # it records no violation, whatever its checks do along it
        _fail(f"{file} is a scenario, not a counterexample: a report is of a trace file kraftcheck check wrote; "
              f"check the scenario's configuration (kraftcheck trace replay {file} shows which checks fail)")
    graph, _ = _open(file, variant)
    attrs = graph.graph
    if not attrs.get("violation"):
        _fail(f"{file}: the trace violates nothing; a report needs a counterexample")
    try:
        # a name read from the file is looked up among registered specs only: a trace must not make
        # kraftcheck import the code it names
        cls = spec_class(spec_ref) if spec_ref else spec_class(attrs["spec"], names_only=True)
    except KraftcheckError as e:
        hint = "" if spec_ref else ("; a spec loaded from a file or module is not looked up from a trace: name it "
                                    "with --spec file.py:Class (or module:Class)")
        _fail(f"{e}{hint}")
    if attrs.get("terms"):
        _fail(f"{file} is a trace shown in {attrs['terms']}'s terms (trace export --format json), which cannot be "
              "replayed: report on the trace file kraftcheck check wrote, or export it with --model-names")
    try:  # the file says what anyone wrote in it
        checked = replay(graph, spec=cls)
    except KraftcheckError as e:  # the spec's own function raised: no verdict on the trace
        _fail(str(e))
    if checked.error is not None:
        _fail(f"{file} is not a valid trace, no report written: {checked.error} (kraftcheck trace replay "
              "shows every step)")
    explained_by_spec(graph, checked)
    params = dict(attrs.get("params") or {})
    keys = [_switch(cls, name, params) for name in fixes]  # every name checked before any run
    defaults = _defaults(cls)
    check = attrs["violation"].get("check")
    invariant = check if attrs["violation"].get("kind") in ("invariant", "property") else None
    # the run's constraints and deadlock setting, so that the command explores what the run did
    run_options = attrs.get("run_options") or {}
    instance = rebuild_spec(attrs, cls)
    declared = [c.name for c in list(instance.constraints()) + list(instance.action_constraints())]
    # a lasso breaks a liveness property, which only a run with --liveness checks
    liveness = attrs["violation"].get("kind") == "liveness"
    options = run_option_words(run_options, declared, cls.check_deadlock) + (["--liveness"] if liveness else [])
    applied = run_options.get("constraints") if isinstance(run_options.get("constraints"), list) else None
    deadlock = run_options.get("deadlock") if isinstance(run_options.get("deadlock"), bool) else None
    command = reproduce_command(attrs, defaults, DEFAULT_SPEC, invariant, spec_ref=spec_ref,
                                options=_stopping_at_the_trace(run_options, declared, cls.check_deadlock,
                                                               attrs["violation"].get("kind"), options))
    verdicts = []
    for key in keys:
        fix_command = reproduce_command(attrs, defaults, DEFAULT_SPEC, None, {key: True}, spec_ref=spec_ref,
                                        options=options)
        click.echo(f"running: {fix_command}", err=True)
        verdicts.append(_run_fix(cls, params, key, fix_command, fix_time_limit, applied, deadlock, liveness))
    text = report(_shown(graph, model_names, spec_ref), fmt, command=command, trace_file=str(file), fixes=verdicts,
                  defaults=defaults) + "\n"
    if output is None or to_stdout(output):
        click.echo(text, nl=False)
        return
    unwritten: list[UnwrittenFile] = []
    if not write_kept("the report", output, lambda: write_output(output, text), unwritten):
        _fail(str(unwritten[0]), EXIT_UNWRITTEN)
    click.echo(f"wrote {output}", err=True)
