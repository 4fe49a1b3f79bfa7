"""``kraftcheck check``: explore a spec exhaustively and report the verdict."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import click

from kraftcheck.cli.params import derived_options, merge_params, option_name, parse_param_args
from kraftcheck.cli.terminal import Terminal
from kraftcheck.cli.graph_analyses import analyse_after_check
from kraftcheck.cli.outcome import (EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_USAGE, Outcome,  # noqa: F401 (API)
                                    exit_code)
from kraftcheck.cli.validate import positive, positive_number, simulation_depth, worker_threads
from kraftcheck.checker.dirlock import LOCK_FILE
from kraftcheck.checker.disk_full import disk_full_reason, is_disk_full, stopped_by_full_disk
from kraftcheck.checker.errors import KraftcheckError, UsageError
from kraftcheck.checker.explore.bytecode_tier import start_interpreter_compile
from kraftcheck.checker.explore.checkpoint import check_resume_dir
from kraftcheck.checker.explore.stop import install_stop_handlers
from kraftcheck.checker.explore.result import Options, Result
from kraftcheck.api import explorer_for
from kraftcheck.checker.model import Model, spec_instance
from kraftcheck.checker.symmetry import canonicaliser_for
from kraftcheck.cli.paths import check_graph_file, check_output_dir, check_output_file, refuse_two_on_stdout, to_stdout
from kraftcheck.cli.simulation import (SimulationRequest, refuse_with_simulate, refuse_without_simulate,
                                       run_simulation, simulation_strategy)
from kraftcheck.specs import DEFAULT_SPEC, spec_class



DEFAULT_PARAMS = spec_class(DEFAULT_SPEC).Params


def gather_params(spec_name: str, param_items: tuple[str, ...], derived: dict[str, Any]) -> Any:
    """The Params instance of ``spec_name`` from ``--param`` items and the default spec's options."""
    cls = spec_class(spec_name)
    given = {k[len("spec_"):]: v for k, v in derived.items() if v is not None}
    if given and spec_name != DEFAULT_SPEC:
        flag = option_name(next(iter(given)))
        raise UsageError(f"{flag} is an option of spec {DEFAULT_SPEC}; for spec {spec_name} use --param KEY=VALUE")
    values = merge_params(given, parse_param_args(cls.Params, spec_name, param_items))
    defaults = {f.name for f in dataclasses.fields(cls.Params)}
    unknown = set(values) - defaults
    if unknown:
        raise UsageError(f"spec {spec_name} has no parameter {sorted(unknown)[0]!r}")
    return cls, spec_instance(cls, values).params  # a spec refusing the values says so, before any work


def default_max_memory_gib() -> float:
    """85% of this machine's memory: a run stops (incomplete) before the system kills it."""
    import psutil
    return 0.85 * psutil.virtual_memory().total / 2**30


def run_check(terminal: Terminal, spec: str, params: tuple[str, ...], invariants: tuple[str, ...],
              keep_going: bool, max_states: Optional[int], max_depth: Optional[int],
              time_limit: Optional[float], json_path: Optional[str], trace_dir: str, engine: str,
              derived: dict[str, Any], max_memory_gib: Optional[float] = None, compile: str = "background",
              fingerprints: bool = False, checkpoint: Optional[str] = None, resume: Optional[str] = None,
              graph: tuple[Optional[str], bool, bool, int] = (None, False, False, 20_000),
              spark: Optional[dict[str, Any]] = None, symmetry: bool = False,
              constraints: tuple[str, ...] = (), deadlock: Optional[bool] = None,
              simulation: Optional[SimulationRequest] = None) -> int:
    """One check, then the whole-graph analyses ``graph`` = (--dump-graph, --availability,
    --liveness, --graph-limit) if asked for; the JSON report holds both. Returns the exit code.
    ``simulation``: random behaviours (--simulate) instead of the exhaustive search."""
    dump_graph, availability, liveness, graph_limit = graph
    if simulation is not None:
        refuse_with_simulate(engine, fingerprints, symmetry, checkpoint, resume, max_states, max_depth,
                             bool(dump_graph or availability or liveness))
    # every output location is checked before exploring: a bad one must not cost the run
    check_output_file(json_path, "--json")
    check_output_dir(trace_dir, "--trace-dir")
    check_graph_file(dump_graph, "--dump-graph")
    if checkpoint and resume:
        raise UsageError("give --checkpoint DIR for a new run or --resume DIR to continue one, not both")
    if engine == "reference" and (checkpoint or resume):
        raise UsageError("--checkpoint and --resume work with the compiled engine, not --engine reference")
    if engine == "engine":
        check_resume_dir(resume)  # a mistyped path: refused before any work, and nothing created
    check_output_dir(checkpoint or resume, "--checkpoint" if checkpoint else "--resume")
    if symmetry and engine == "spark":
        raise UsageError("--symmetry works with the compiled engine and --engine reference, not on Spark")
    if symmetry and (dump_graph or availability or liveness):
        raise UsageError("--symmetry explores one state per orbit; --availability, --liveness and --dump-graph "
                         "need every state")
    cls, param_values = gather_params(spec, params, derived)
    if engine == "engine" and compile == "background" and simulation is None:
        start_interpreter_compile()  # an installation's first run: beside building the model
    model = Model(cls(param_values), check=list(invariants) or None, constraints=list(constraints) or None,
                  deadlock=deadlock)
    if symmetry:
        canonicaliser_for(model)  # a spec without a symmetry refuses before anything runs
    from kraftcheck.traces.liveness import unchecked_liveness
    not_checked = unchecked_liveness(model, checking=liveness)  # a bad fairness name: refused now, on every run
    max_memory = int((max_memory_gib or default_max_memory_gib()) * 2**30)
    if simulation is not None:
        result, run_options = run_simulation(terminal, model, simulation, keep_going, time_limit, max_memory, compile)
        return report_outcome(terminal, model, result, run_options, trace_dir, json_path, not_checked)
    # the analyses need every state: they imply --continue, and the compiled engine records the
    # graph while it explores (others leave it to a recording pass of its own)
    analyses_wanted = availability or liveness
    keep_going = keep_going or analyses_wanted
    record = analyses_wanted and engine == "engine" and not fingerprints and not (checkpoint or resume)
    options = Options(max_states=max_states, max_depth=max_depth, time_limit=time_limit, keep_going=keep_going,
                      max_memory=max_memory, fingerprints=fingerprints, checkpoint_dir=checkpoint or resume,
                      resume=bool(resume), record_graph=record, symmetry=symmetry)
    explorer = explorer_for(engine, compile, spark)
    terminal.note(f"checking {model.spec.title()}: {len(model.labels)} action instances, "
                  f"{model.layout.state_bits} bits per state")
    terminal.start_progress()
    try:
        result = explorer.explore(model, options, terminal.progress)
    finally:
        terminal.stop_progress()

    run_options = {"invariants": list(invariants), "continue": keep_going, "max_states": max_states,
                   "max_depth": max_depth, "time_limit": time_limit, "max_memory_bytes": max_memory,
                   "engine": engine, "compile": compile, "fingerprints": fingerprints,
                   "checkpoint": checkpoint, "resume": resume, "symmetry": symmetry,
                   "constraints": [c.name for c in model.constraints + model.action_constraints],
                   "deadlock": model.check_deadlock}
    outcome = Outcome(terminal, model, result, run_options, not_checked)
    outcome.write_traces(trace_dir)  # the traces first: the analyses' lassos, the summary and JSON follow
    outcome.add_analyses(analyse_after_check(
        terminal, result, lambda: Model(cls(param_values), constraints=list(constraints) or None, deadlock=deadlock),
        dump_graph, availability, liveness, graph_limit, max_states, max_memory, trace_dir, run_options))
    return outcome.report(json_path)


def report_outcome(terminal: Terminal, model: Model, result: Result, run_options: dict[str, Any], trace_dir: str,
                   json_path: Optional[str], not_checked: Sequence[str] = ()) -> int:
    """A simulation's outcome: its trace files, the summary, the JSON report; the exit code."""
    outcome = Outcome(terminal, model, result, run_options, not_checked)
    outcome.write_traces(trace_dir)
    return outcome.report(json_path)


def spark_settings(master: Optional[str], conf_items: tuple[str, ...], work_dir: Optional[str],
                   wait: Optional[float] = None) -> dict[str, Any]:
    """The Spark explorer's keyword arguments from --master, --spark-conf, --work-dir and
    --spark-wait (only those given: with none, the explorer's defaults)."""
    settings: dict[str, Any] = {}
    if master:
        settings["master"] = master
    if conf_items:
        conf = {}
        for item in conf_items:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"--spark-conf {item!r}: give KEY=VALUE, e.g. spark.executor.memory=8g")
            conf[key.strip()] = value
        settings["conf"] = conf
    if work_dir:
        check_output_dir(work_dir, "--work-dir")
        given = Path(work_dir).expanduser()
        # a work dir with a run's lock file is the explorer's to judge: it names the run holding it
        if given.is_dir() and not (given / LOCK_FILE).exists() and any(given.iterdir()):
            raise UsageError(f"--work-dir {work_dir} is not empty; give a new or empty directory")
        settings["work_dir"] = work_dir
    if wait is not None:
        settings["wait_s"] = wait
    return settings


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
@click.option("--deadlock/--no-deadlock", default=None,
              help="Report a reachable state with no successor but itself as a violation (kind deadlock, "
                   "exit 1), as TLC's CHECK_DEADLOCK.  [default: on, unless the spec declares its terminal "
                   "states intended (check_deadlock = False)]")
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
                   "parameters and checks). Every file of the checkpoint is checked against its checksum "
                   "first; a damaged checkpoint, or one another run holds, is refused.")
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
              help="--simulate: how a behaviour picks its next state: uniformly among its successors "
                   "(uniform); uniformly among the enabled actions, then among that action's successors, so "
                   "an action with many instances does not crowd out one with few (by-action); or uniformly, "
                   "each behaviour with only a random half of the actions (swarm testing).  [default: uniform]")
@click.option("--swarm", is_flag=True, help="--simulate: short for --strategy swarm.")
@click.option("--json", "json_path", metavar="PATH", help="Write a JSON report to PATH ('-' for stdout).")
@click.option("--trace-dir", default="kraftcheck-traces", metavar="DIR", help="Where counterexample traces are written.")
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
                   "register, before stopping with exit 2 (a master without workers).  [default: 60]")
@click.option("--compile", "compile_mode", type=click.Choice(["background", "now"]), default="background",
              help="When the kernels are not compiled yet: explore with the spec's functions in bytecode "
                   "on every core (in Python, on one, if they do not translate; at most KRAFTCHECK_INTERPRET_S, "
                   "default 1.5 s, 1 s in Python, then wait) while other processes compile them at the lowest "
                   "priority, a small model's quick table form first (background); or compile them first (now).")
@click.option("--threads", type=int, callback=positive, metavar="N", help="Worker threads. [default: CPU count]")
@click.option("--quiet", "-q", is_flag=True, help="No progress and no summary (the exit code and --json still tell).")
@click.option("--no-color", is_flag=True, help="Plain text output.")
def check(spec: str, params: tuple[str, ...], invariants: tuple[str, ...], constraints: tuple[str, ...],
          deadlock: Optional[bool], keep_going: bool,
          max_states: Optional[int], max_depth: Optional[int], time_limit: Optional[float],
          max_memory_gib: Optional[float], json_path: Optional[str], trace_dir: str, engine: str,
          fingerprints: bool, symmetry: bool, checkpoint: Optional[str], resume: Optional[str], compile_mode: str,
          threads: Optional[int], quiet: bool,
          no_color: bool, dump_graph: Optional[str] = None, availability: bool = False,
          liveness: bool = False, graph_limit: int = 20_000, master: Optional[str] = None, spark_conf: tuple[str, ...] = (),
          work_dir: Optional[str] = None, spark_wait: Optional[float] = None, simulate: bool = False, seed: Optional[int] = None,
          depth: Optional[int] = None, max_behaviours: Optional[int] = None, swarm: bool = False,
          strategy: Optional[str] = None, **derived: Any) -> None:
    """Explore every reachable state of a spec and check its invariants.

    Exit codes: 0 every invariant holds over the complete state space (and, with --liveness, every
    liveness property); 1 an invariant or, with --liveness, a liveness property is violated, or a
    state deadlocks (unless the spec declares terminal states intended, or --no-deadlock), even if
    the run then stopped early; 2 no verdict: usage or input error, a function of the spec raised
    on a state, or an internal error; 3 nothing violated and the exploration
    incomplete (a limit was hit, the disk filled up, or --simulate found no violation: it is never
    exhaustive), or an output that could not be written; 130 interrupted.
    """
    install_stop_handlers()
    terminal = Terminal(quiet=quiet, color=False if no_color else None,
                        results_to_stderr=to_stdout(json_path) or to_stdout(dump_graph))
    try:
        refuse_two_on_stdout({"--json": json_path, "--dump-graph": dump_graph})
        threads = worker_threads(threads, terminal.note)
        if threads:
            os.environ["KRAFTCHECK_THREADS"] = str(threads)
        if not simulate:
            refuse_without_simulate(seed, depth, max_behaviours, swarm, strategy)
        simulation = SimulationRequest(seed, depth, max_behaviours, simulation_strategy(swarm, strategy)) \
            if simulate else None
        code = run_check(terminal, spec, params, invariants, keep_going, max_states, max_depth, time_limit,
                         json_path, trace_dir, engine, derived, max_memory_gib, compile_mode, fingerprints,
                         checkpoint, resume,
                         graph=(dump_graph, availability, liveness, graph_limit),
                         spark=spark_settings(master, spark_conf, work_dir, spark_wait), symmetry=symmetry,
                         constraints=constraints, deadlock=deadlock, simulation=simulation)
    except KraftcheckError as e:
        terminal.error(str(e))
        code = EXIT_USAGE
    except KeyboardInterrupt:
        terminal.error("interrupted")
        code = EXIT_INTERRUPTED
    except OSError as e:  # the disk filled up outside the exploration and its outputs, which keep what they found
        if not is_disk_full(e):
            raise
        terminal.error(stopped_by_full_disk(disk_full_reason(e), checkpoint or resume))
        code = EXIT_INCOMPLETE
    sys.exit(code)


# -- whole-graph analyses (traces/): --availability, --liveness, --dump-graph, --graph-limit (before --no-color)
from kraftcheck.cli.graph_analyses import OPTIONS as GRAPH_ANALYSIS_OPTIONS  # noqa: E402
_at = next(i for i, p in enumerate(check.params) if p.name == "no_color")
check.params[_at:_at] = GRAPH_ANALYSIS_OPTIONS
check.params.extend(derived_options(DEFAULT_PARAMS))
if DEFAULT_SPEC:
    check.help = (check.help or "") + (f"\n\nThe options after --no-color are the parameters of the default spec "
                                       f"({DEFAULT_SPEC}); other specs take --param KEY=VALUE.")
