"""``kraftcheck sweep``: run a matrix of configurations as independent checks, one table out.

Exit codes: 0 every configuration holds; 1 some configuration is violated; 2 bad input (the
matrix, or a configuration the spec refuses), or a run with no verdict (refused at its start, ended
in an error, failed: ``sweep.table.NO_VERDICT``); 3 some run is incomplete, or the table could not be
written to ``--output`` (a full disk: it is printed on standard output instead), and none violated.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Optional

import click

from kraftcheck.checker.disk_full import UnwrittenFile, write_kept
from kraftcheck.checker.errors import KraftcheckError, UsageError
from kraftcheck.checker.files import write_output
from kraftcheck.checker.stop import deferred, stop_honoured
from kraftcheck.ci.jobs import JOBS_PER_CPU, check_jobs
from kraftcheck.cli.params import parse_param_args, parse_value
from kraftcheck.output_paths import (check_output_dir, check_output_file, refuse_inside, refuse_replacing_input,
                                     to_stdout)
from kraftcheck.cli.validate import positive_number
from kraftcheck.sweep import matrix
from kraftcheck.sweep.table import EXIT_BAD_INPUT, EXIT_INCOMPLETE, EXIT_OK, FORMATS, exit_code


@click.command(context_settings={"show_default": True})
@click.argument("matrix_path", metavar="[MATRIX]", required=False)
@click.option("--spec", "spec_ref", metavar="REF", help="Spec to sweep  [default: the matrix file's, else kafka]")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="A parameter of every configuration (repeatable).")
@click.option("--vary", "vary", multiple=True, metavar="KEY=V1,V2,...",
              help="Run every value of KEY (repeatable: the product of all).")
@click.option("--continue", "keep_going", is_flag=True, default=None,
              help="Each run explores on after its first violation (every invariant's shortest).")
@click.option("--time-limit", type=float, callback=positive_number("seconds"), default=None, metavar="S",
              help="Seconds of exploration per configuration  [default: the file's, else 600]")
@click.option("--max-states", type=click.IntRange(min=1), default=None, metavar="N",
              help="Stop each run after N distinct states.")
@click.option("--fingerprints", is_flag=True, default=None,
              help="Each run keeps 64-bit fingerprints only (TLC's visited set): exhaustive up to hash collisions.")
@click.option("--symmetry", is_flag=True, default=None,
              help="Each run explores one state per orbit of the spec's symmetry (Kafka: with election=any).")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="markdown", help="Table format.")
@click.option("--output", "-o", "output", metavar="FILE",
              help="Write the table to FILE ('-': standard output, the default); missing directories are created.")
@click.option("--out", "out_dir", default="kraftcheck-sweep", metavar="DIR",
              help="Run directories: DIR/NN-CONFIGURATION/ (report, traces, log).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=2,
              help=f"Configurations run at once (locally; at most {JOBS_PER_CPU} per CPU).")
@click.option("--master", metavar="URL",
              help="Run on Spark instead (local[*], spark://host:port, ...): one task per configuration.")
@click.option("--spark-conf", "spark_conf", multiple=True, metavar="KEY=VALUE", help="A Spark setting (repeatable).")
def sweep(matrix_path: Optional[str], spec_ref: Optional[str], params: tuple[str, ...], vary: tuple[str, ...],
          keep_going: Optional[bool], time_limit: Optional[float], max_states: Optional[int],
          fingerprints: Optional[bool], symmetry: Optional[bool], fmt: str,
          output: Optional[str], out_dir: str, jobs: int, master: Optional[str], spark_conf: tuple[str, ...]) -> None:
    """Run every configuration of a matrix (a TOML file, or --param/--vary on the command line) as
    its own check and print one table of verdicts, counts and shortest counterexamples.

    Exit codes: 0 every configuration holds; 1 one is violated; 2 bad input, or a configuration
    with no verdict (its row refused, error or failed); 3 a run is incomplete, or the table could
    not be written to --output (it is printed on standard output instead).
    """
    try:
        configs = _configurations(matrix_path, spec_ref, params, vary, keep_going, time_limit, max_states,
                                  fingerprints, symmetry)
        matrix.check_configurations(configs)
        if master is None:  # on Spark the cluster runs the tasks, not -j processes here
            check_jobs(jobs, len(configs))
        check_output_file(output, "--output")
        if matrix_path:
            refuse_replacing_input(output, "--output", matrix_path, "matrix file")
        check_output_dir(out_dir, "--out")
        from kraftcheck.sweep.local import directory_name, refuse_before_running
        run_dirs = {f"configuration {c.name}'s run directory": Path(out_dir) / directory_name(c, i)
                    for i, c in enumerate(configs)}
        refuse_inside(output, "--output", run_dirs,
                      "kraftcheck sweep empties before the configuration runs, then fills with its report and log")
        refuse_before_running(configs, Path(out_dir))  # before the start line, on this machine or on Spark
        made_out = not os.path.lexists(out_dir)
        from kraftcheck.ci.runner import hold_out, release_out
        hold = hold_out(Path(out_dir), "kraftcheck sweep (its --out)")
        try:
            # from the runs' start a signal is taken only between their steps; one that comes once every
            # configuration ran waits for the table
            with deferred() as held:
                rows = _run(configs, Path(out_dir), jobs, master, spark_conf)
                code = _give_table(rows, fmt, output)
        finally:
            release_out(hold, Path(out_dir), made_out)  # removed if nothing ran
    except (KraftcheckError, FileExistsError) as e:
        click.echo(f"kraftcheck: error: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt as e:
        from kraftcheck.ci.runner import Interrupted
        # which configurations ran, which were stopped, which did not run; no table of a part
        click.echo(f"kraftcheck: error: {e.describe() if isinstance(e, Interrupted) else 'interrupted'}", err=True)
        sys.exit(130)
    if held.signalled:
        stop_honoured()
        click.echo("kraftcheck: note: stopped after every configuration had run: the sweep gave its table first",
                   err=True)
    sys.exit(code)


def _give_table(rows: list, fmt: str, output: Optional[str]) -> int:
    """Print or write the table of ``rows``; the sweep's exit code."""
    text = FORMATS[fmt](rows)
    code = exit_code(rows)
    unwritten: list[UnwrittenFile] = []
    if output and not to_stdout(output):
        if write_kept("the table", output, lambda: write_output(output, text), unwritten):
            click.echo(f"table written to {output}", err=True)
        else:  # every run is done: the table is shown here instead, and the exit code says it is not in FILE
            code = EXIT_INCOMPLETE if code == EXIT_OK else code
            click.echo(FORMATS[fmt](rows, code), nl=False)  # its JSON exit_code the process's, not the rows'
            click.echo(f"kraftcheck: error: {unwritten[0]}", err=True)
    elif output:
        write_output(output, text)
    else:
        click.echo(text, nl=False)
    return code


def _configurations(matrix_path: Optional[str], spec_ref: Optional[str], params: tuple[str, ...],
                    vary: tuple[str, ...], keep_going: Optional[bool], time_limit: Optional[float],
                    max_states: Optional[int], fingerprints: Optional[bool] = None,
                    symmetry: Optional[bool] = None) -> list[matrix.Configuration]:
    if matrix_path:
        configs = matrix.from_file(Path(matrix_path), spec_ref)
        if params or vary:
            raise UsageError("give the configurations in the matrix file or with --param/--vary, not both")
    else:
        spec = spec_ref or "kafka"
        from kraftcheck.specs import spec_class
        params_cls = spec_class(spec).Params
        configs = matrix.build(spec, parse_param_args(params_cls, spec, params), [],
                               _parse_vary(params_cls, spec, vary))
    overrides: dict[str, Any] = {"keep_going": keep_going, "max_states": max_states, "time_limit": time_limit,
                                 "fingerprints": fingerprints, "symmetry": symmetry}
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return [dataclasses.replace(c, **overrides) if overrides else c for c in configs]


def _parse_vary(params_cls: type, spec: str, items: tuple[str, ...]) -> dict[str, list[Any]]:
    fields = {f.name: f for f in dataclasses.fields(params_cls)}
    out: dict[str, list[Any]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not values.strip():
            raise UsageError(f"--vary expects KEY=V1,V2,..., got {item!r}")
        if key not in fields:
            raise UsageError(f"spec {spec} has no parameter {key!r}; its parameters: {', '.join(fields)}")
        if key in out:
            raise UsageError(f"--vary {key} is given twice; list all its values in one: --vary {key}=V1,V2,...")
        if any(not v.strip() for v in values.split(",")):  # a stray comma read as one more value, "not given"
            raise UsageError(f"--vary {key}: an empty value in {values!r}; list the values with no empty one "
                             "between commas; to include a parameter's default, write none")
        out[key] = [parse_value(fields[key], v.strip()) for v in values.split(",")]
    return out


def _run(configs: list[matrix.Configuration], out: Path, jobs: int, master: Optional[str],
         spark_conf: tuple[str, ...]):
    from kraftcheck.ci.runner import how_it_ended
    done = []

    def on_event(event: dict) -> None:
        if event["event"] == "finished":
            done.append(event["check"])
            click.echo(f"[{len(done)}/{len(configs)}] {event['check']}: {how_it_ended(event)} ({event['wall_s']:.1f} s)",
                       err=True)

    if master is None:
        from kraftcheck.sweep.local import run_local
        click.echo(f"kraftcheck sweep: {len(configs)} configurations, {min(jobs, len(configs))} at a time", err=True)
        return run_local(configs, out, jobs, on_event)
    from kraftcheck.cli.params import parse_spark_conf
    from kraftcheck.spark.session import start_context, stop_context
    from kraftcheck.sweep.spark import interrupted, run_on_spark
    click.echo(f"kraftcheck sweep: {len(configs)} configurations as Spark tasks on {master}", err=True)
    try:
        sc = start_context(master, parse_spark_conf(spark_conf) or None)
    except KeyboardInterrupt:  # Spark never started: no configuration ran
        stop_honoured()
        raise interrupted(configs, out.resolve(), None) from None
    try:
        return run_on_spark(sc, configs, out)
    finally:
        with deferred():  # a second signal does not cut the end of Spark's Java process short
            stop_context(sc)
