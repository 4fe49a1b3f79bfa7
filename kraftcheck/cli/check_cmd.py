"""``kraftcheck check``: explore a spec exhaustively and report the verdict.

The command turns click's values into one ``CheckRequest`` (kraftcheck/request.py), runs it
through the pipeline (kraftcheck/pipeline.py) and renders what came back (cli/outcome.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import click

from kraftcheck.checker.disk_full import (UnwrittenFile, disk_full_reason, is_disk_full, stopped_by_full_disk,
                                         write_kept)
from kraftcheck.checker.errors import KraftcheckError, UsageError
from kraftcheck.checker.stop import install_stop_handlers
from kraftcheck.cli.outcome import (EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_USAGE, Outcome,  # noqa: F401 (API)
                                    exit_code)
from kraftcheck.cli.params import derived_options, merge_params, option_name, parse_param_args, parse_spark_conf
from kraftcheck.output_paths import to_stdout
from kraftcheck.cli.simulation import refuse_without_simulate, simulation_strategy
from kraftcheck.cli.terminal import Terminal
from kraftcheck.cli.validate import positive, positive_number, simulation_depth
from kraftcheck.request import CheckRequest, Simulation, SparkSettings, default_max_memory_gib
from kraftcheck.specs import DEFAULT_SPEC, spec_class

DEFAULT_PARAMS = spec_class(DEFAULT_SPEC).Params


def spec_params(spec_name: str, param_items: tuple[str, ...], derived: dict[str, Any]) -> dict[str, Any]:
    """The typed parameters of ``spec_name`` from ``--param`` items and the default spec's own options."""
    given = {k[len("spec_"):]: v for k, v in derived.items() if v is not None}
    if given and spec_name != DEFAULT_SPEC:
        flag = option_name(next(iter(given)))
        raise UsageError(f"{flag} is an option of spec {DEFAULT_SPEC}; for spec {spec_name} use --param KEY=VALUE")
    return merge_params(given, parse_param_args(spec_class(spec_name).Params, spec_name, param_items))


def run_check(terminal: Terminal, request: CheckRequest) -> int:
    """Run ``request`` through the pipeline and render its outcome; the exit code."""
    from kraftcheck import pipeline
    prepared = pipeline.prepare(request, terminal.note)  # a refusal: nothing written, nothing removed
    clear_earlier_report(request.json_path)
    try:
        checked = pipeline.finish(prepared, pipeline.explore(prepared, terminal), terminal)
    except KraftcheckError as e:  # no verdict: the report says error, unless the input was refused
        report = pipeline.error_report(prepared, e)
        if report is not None and request.json_path:
            from kraftcheck.checker.report import write_report
            unwritten: list[UnwrittenFile] = []
            if not write_kept("the JSON report", request.json_path, lambda: write_report(report, request.json_path),
                              unwritten):
                terminal.error(str(unwritten[0]))  # before the error itself, the run's last line
        raise
    return Outcome(terminal, checked).report(request.json_path)


def clear_earlier_report(path: Optional[str]) -> None:
    """Remove the report an earlier run left at ``path`` as this run begins: one whose input is
    then refused (exit 2, a checkpoint of another run) writes none, and the earlier report's
    "holds" would stand beside it for a program that reads the file. Only a regular file goes (a
    link, a device or a FIFO is written into, never removed)."""
    if not path or to_stdout(path):
        return
    target = Path(path).expanduser()
    try:
        if not target.is_symlink() and target.is_file():
            target.unlink()
    except OSError:  # not there, or not ours to remove: the report is written over it at the end
        pass


@click.command(context_settings={"show_default": True})
@click.option("--spec", default=DEFAULT_SPEC, metavar="NAME",
              help="The spec to check: a name (see `kraftcheck specs`), path/to/file.py:Class or module:Class.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Set a spec parameter (repeatable).")
@click.option("--invariant", "invariants", multiple=True, metavar="NAME",
              help="Check only this invariant or transition property (repeatable). [default: all]")
@click.option("--constraint", "constraints", multiple=True, metavar="NAME",
              help="Apply only this state or action constraint of the spec (repeatable): the search keeps "
                   "the states inside them, as TLC's CONSTRAINT and ACTION_CONSTRAINT. [default: all the spec "
                   "declares]")
@click.option("--no-constraints", is_flag=True,
              help="Apply none of the spec's state and action constraints: the search keeps every reachable state.")
@click.option("--deadlock/--no-deadlock", default=None,
              help="Report a reachable state with no successor but itself as a violation (kind deadlock, "
                   "exit 1), as TLC's CHECK_DEADLOCK does, except that TLC reports only a state with no successor at all.  "
                   "[default: on, unless the spec declares its terminal states intended (check_deadlock = False)]")
@click.option("--continue", "keep_going", is_flag=True,
              help="Keep exploring after a violation; report the shortest violation of each check.")
@click.option("--max-states", type=int, callback=positive, metavar="N", help="Stop (incomplete, exit 3) once more than N distinct states are found.")
@click.option("--max-depth", type=int, callback=positive, metavar="N", help="Do not expand states at depth N (initial states are depth 1); unexpanded states make the run incomplete.")
@click.option("--time-limit", type=float, callback=positive_number("seconds"), metavar="SECONDS", help="Stop exploring after this long.")
@click.option("--max-memory", "max_memory_gib", type=float, callback=positive_number("GiB"), metavar="GIB",
              help="Stop (incomplete, exit 3) once the process's resident memory (pages of mapped level files "
                   "included) exceeds GIB GiB. Without --checkpoint the levels move to a temporary directory "
                   "(under $TMPDIR, removed at the end) once they hold 1/16 of GIB.  [default: 85% of this "
                   "machine's memory]")
@click.option("--fingerprints", is_flag=True,
              help="Keep 64-bit fingerprints of visited states instead of the states (TLC's way, 8 bytes a "
                   "state): exhaustive up to hash collisions, whose probability the report estimates.")
@click.option("--compact", is_flag=True,
              help="Keep visited states tree-compressed: each half of a state's words stored once, a state as "
                   "the pair of its halves' numbers (8 bytes at the table's load). Exact, as the default set; "
                   "fewer bytes when a model's states share their halves (the Kafka model's do), some more time.")
@click.option("--symmetry", is_flag=True,
              help="Explore one state per orbit under the spec's symmetry (its sets of interchangeable "
                   "values permuted at once; Kafka: permuted brokers, with --election any); traces stay "
                   "concrete.")
@click.option("--checkpoint", metavar="DIR",
              help="Keep the levels on disk in DIR (a new or empty directory) and make the run resumable: "
                   "every finished level is durable, whatever stops the run. (Without it, levels that outgrow "
                   "their share of --max-memory go to a temporary directory.)")
@click.option("--resume", metavar="DIR",
              help="Continue the run checkpointed in DIR from its last finished level (same spec, "
                   "parameters and checks; --continue if its run went on past a violation; no --max-depth "
                   "or --max-states below the depth or states it holds). Every file "
                   "of the checkpoint is checked against its checksum first; a damaged checkpoint, or one "
                   "another run holds, is refused.")
@click.option("--simulate", is_flag=True,
              help="Instead of the exhaustive search, run random behaviours (TLC's -simulate) on the compiled "
                   "kernels, checking every state generated; stops at the first violation (or, with --continue, "
                   "at --time-limit, --max-behaviours or Ctrl-C). Never exhaustive: exit 1 on a violation, else 3.")
@click.option("--seed", type=click.IntRange(min=0, max=2**63 - 1), metavar="S",
              help="--simulate: the seed; the same seed gives the same behaviours and the same violation "
                   "whatever the thread count.  [default: a random seed, printed and in the report]")
@click.option("--depth", type=int, callback=simulation_depth, metavar="N",
              help="--simulate: states per behaviour at most (the initial state counted).  [default: twice the "
                   "number of levels if a 50,000-state breadth-first probe exhausts the model, else 4 x the levels "
                   "it reached; at least 10]")
@click.option("--max-behaviours", type=int, callback=positive, metavar="N",
              help="--simulate: stop after N behaviours.")
@click.option("--strategy", type=click.Choice(["uniform", "by-action", "swarm"]),
              help="--simulate: how a behaviour picks its next state: uniformly among the enabled actions, "
                   "then among that action's successors, so an action with many instances does not crowd out "
                   "one with few (by-action); uniformly among its successors (uniform, TLC's way); or "
                   "uniformly, each behaviour with only a random half of the actions (swarm testing).  "
                   "[default: by-action]")
@click.option("--swarm", is_flag=True, help="--simulate: short for --strategy swarm.")
@click.option("--json", "json_path", metavar="PATH",
              help="Write a JSON report to PATH ('-' for stdout); missing directories are created.")
@click.option("--trace-dir", default="kraftcheck-traces", metavar="DIR",
              help="Where counterexample traces are written (created if missing).")
@click.option("--engine", type=click.Choice(["engine", "reference", "spark"]), default="engine",
              help="The compiled explorer, the slow pure-Python reference explorer, or the compiled kernels on "
                   "Apache Spark (docs/spark.md).")
@click.option("--master", metavar="URL", help="--engine spark: the Spark master (local[N], spark://HOST:PORT, "
              "yarn, k8s://...).  [default: local[*], or spark-submit's]")
@click.option("--spark-conf", "spark_conf", multiple=True, metavar="KEY=VALUE",
              help="--engine spark: a Spark setting (repeatable), e.g. spark.executor.memory=8g.")
@click.option("--work-dir", metavar="DIR", help="--engine spark: a new or empty directory for the levels and the "
              "visited set, on a file system every executor sees.  [default: a temporary directory]")
@click.option("--spark-wait", "spark_wait", type=float, callback=positive_number("seconds"), metavar="SECONDS",
              help="--engine spark: how long to wait for the master to take the run, then for an executor to "
                   "register, before stopping with exit 2 (a master without workers); later, how long a level may go "
                   "without any executor before stopping incomplete, exit 3, unless --spark-conf "
                   "spark.kraftcheck.noExecutorWait=SECONDS says otherwise.  [default: 60]")
@click.option("--compile", "compile", type=click.Choice(["background", "now"]),
              help="When the compiled engine's kernels are not compiled yet: explore with the spec's functions in "
                   "bytecode on every core (in Python, on one, if they do not translate; at most "
                   "KRAFTCHECK_INTERPRET_S, default 1.5 s, 1 s in Python, then wait) while other processes compile "
                   "them at the lowest priority, a small model's quick table form first (background); or compile "
                   "them first (now). Refused with --engine reference or spark, and background with --simulate, "
                   "which compile no kernels in the background.  [default: background]")
@click.option("--threads", type=int, callback=positive, metavar="N",
              help="Worker threads of the compiled engine (refused with --engine reference, which runs on one). "
                   "[default: CPU count]")
@click.option("--quiet", "-q", is_flag=True, help="No progress and no summary (the exit code and --json still tell).")
@click.option("--no-color", is_flag=True, help="Plain text output.")
def check(**given: Any) -> None:
    """Explore every reachable state of a spec and check its invariants.

    Exit codes: 0 every invariant holds over the complete state space (and, with --liveness, every
    liveness property); 1 an invariant or, with --liveness, a liveness property is violated, or a
    state deadlocks (unless the spec declares terminal states intended, or --no-deadlock), even if
    the run then stopped early; 2 no verdict: usage or input error, a function of the spec raised
    on a state, or an internal error; 3 nothing violated and the exploration
    incomplete (a limit was hit, also by the analysis of --liveness or --availability, the disk
    filled up, or --simulate found no violation: it is never exhaustive), or an output that could
    not be written; 130 interrupted.
    """
    install_stop_handlers()
    terminal = Terminal(quiet=given.pop("quiet"), color=False if given.pop("no_color") else None,
                        results_to_stderr=to_stdout(given["json_path"]) or to_stdout(given["dump_graph"]))
    try:
        code = run_check(terminal, request_from(given))
    except KraftcheckError as e:
        terminal.error(str(e))
        code = EXIT_USAGE
    except KeyboardInterrupt:
        terminal.error("interrupted")
        code = EXIT_INTERRUPTED
    except OSError as e:  # the disk filled up outside the exploration and its outputs, which keep what they found
        if not is_disk_full(e):
            raise
        terminal.error(stopped_by_full_disk(disk_full_reason(e), given["checkpoint"] or given["resume"]))
        code = EXIT_INCOMPLETE
    sys.exit(code)


def request_from(given: dict[str, Any]) -> CheckRequest:
    """The request click's values make: an option named as a field of CheckRequest is that field;
    the spec's parameters, --simulate's and --engine spark's options are gathered here."""
    given = dict(given)
    derived = {k: given.pop(k) for k in list(given) if k.startswith("spec_")}
    simulate = given.pop("simulate")
    seed, depth, max_behaviours, swarm, strategy = (given.pop(k) for k in
                                                    ("seed", "depth", "max_behaviours", "swarm", "strategy"))
    if not simulate:
        refuse_without_simulate(seed, depth, max_behaviours, swarm, strategy)
    no_constraints = given.pop("no_constraints")
    if no_constraints and given["constraints"]:
        raise UsageError(f"--no-constraints applies none of the spec's constraints; it cannot go with --constraint "
                         f"{given['constraints'][0]}: give one or the other")
    spark = SparkSettings(given.pop("master"), parse_spark_conf(given.pop("spark_conf")), given.pop("work_dir"),
                          given.pop("spark_wait"))
    return CheckRequest(**{
        **given,
        "params": spec_params(given["spec"], given["params"], derived),
        "constraints": () if no_constraints else given["constraints"] or None,
        "max_memory_gib": given["max_memory_gib"] or default_max_memory_gib(),
        "spark": spark,
        "simulation": Simulation(seed, depth, max_behaviours, simulation_strategy(swarm, strategy))
        if simulate else None})


# -- whole-graph analyses (traces/): --availability, --liveness, --dump-graph, --graph-limit (before --no-color)
from kraftcheck.cli.graph_analyses import OPTIONS as GRAPH_ANALYSIS_OPTIONS  # noqa: E402
_at = next(i for i, p in enumerate(check.params) if p.name == "no_color")
check.params[_at:_at] = GRAPH_ANALYSIS_OPTIONS
check.params.extend(derived_options(DEFAULT_PARAMS))
if DEFAULT_SPEC:
    check.help = (check.help or "") + (f"\n\nThe options after --no-color are the parameters of the default spec "
                                       f"({DEFAULT_SPEC}); other specs take --param KEY=VALUE.")
