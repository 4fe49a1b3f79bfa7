"""Run one ``CheckRequest``: the same steps for the command line, the Python API, ``ci`` and the sweeps.

    request.validate()   options that cannot go together, outputs that cannot be written
    prepare()            the options, the spec built once with its parameters, the model, its symmetry
                         and liveness names
    explore()            the explorer chosen by the request (or a simulation), progress to the
                         reporter; then the stricter-variant check of what it found
    finish()             the trace files, the whole-graph analyses

Every refusal comes before ``explore`` (exit 2, nothing explored). What it returns, a ``Checked``,
the command line renders (cli/outcome.py) and the API returns as its ``Result``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol, Union

from kraftcheck.checker.disk_full import write_kept
from kraftcheck.checker.errors import KraftcheckError, UsageError
from kraftcheck.checker.files import atomic_write
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.explore.result import Options, Progress, Result
from kraftcheck.checker.model import Model, spec_instance
from kraftcheck.checker.spec import Spec
from kraftcheck.checker.stop import stop_honoured
from kraftcheck.request import CheckRequest, ENGINES
from kraftcheck.specs import checked_spec_class, spec_class


class Reporter(Protocol):
    """Where a run's notes and progress go: cli/terminal.Terminal, or ``Silent`` for the API."""

    def note(self, message: str) -> None: ...
    def error(self, message: str) -> None: ...
    def start_progress(self) -> None: ...
    def progress(self, p: Progress) -> None: ...
    def stop_progress(self) -> None: ...


class Silent:
    """A reporter that says nothing and hands progress snapshots to ``progress``."""

    def __init__(self, progress: Callable[[Progress], None]) -> None:
        self.progress = progress

    def note(self, message: str) -> None:
        pass

    error = note

    def start_progress(self) -> None:
        pass

    stop_progress = start_progress


@dataclass
class Prepared:
    """A request with its spec built: the model to explore and what the run will not check."""

    request: CheckRequest
    model: Model
    not_checked: list[str]   # the liveness properties the spec declares that this run does not check
    options: Any             # the explorer's Options, or a simulation's SimulationOptions

    def run_options(self) -> dict[str, Any]:
        """The run's options for its JSON report and its trace files."""
        m = self.model
        return self.request.run_options(self.options.keep_going, [c.name for c in m.constraints + m.action_constraints],
                                        m.check_deadlock, getattr(self.options, "seed", None))


@dataclass
class Checked:
    """One run's result on its way out: the trace files written, the files the disk refused
    (the explorer's among them), the analyses' findings (analyses.GraphAnalyses) if any ran, and
    what an interrupt (Ctrl-C, SIGTERM) once the exploration was over cut short, if one did."""

    prepared: Prepared
    result: Result
    run_options: dict[str, Any]
    trace_files: dict[str, str] = field(default_factory=dict)
    unwritten: list = field(default_factory=list)
    analyses: Any = None
    cut_short: Optional[str] = None  # what the run was doing when an interrupt came after the exploration


def explorer_for(engine: str, compile: str = "background", spark: Optional[dict[str, Any]] = None) -> Any:
    """A fresh explorer by its command-line name. With ``compile="background"`` the engine explores
    with its first tier (bytecode, or Python) while its kernels compile in another process, when
    they are not cached yet; with ``"now"`` it compiles them first. ``spark``: the Spark explorer's settings
    (``master``, ``conf``, ``work_dir``, ``wait_s``; a request refuses them for another engine);
    kraftcheck.spark is imported only for that engine."""
    if engine == "spark":
        from kraftcheck.spark import SparkExplorer
        return SparkExplorer(**(spark or {}))
    if engine == "engine":
        from kraftcheck.checker.explore.engine import Engine
        return Engine(compile=compile)
    if engine == "reference":
        from kraftcheck.checker.explore.reference import ReferenceExplorer
        return ReferenceExplorer()
    raise UsageError(f"unknown engine {engine!r}; choose one of: {', '.join(ENGINES)}")


def make_spec(spec: Union[str, type, Spec], params: dict[str, Any]) -> Spec:
    """A spec instance from a name or reference (``file.py:Class``, ``module:Class``), a Spec
    subclass, or an instance (then ``params`` must be empty)."""
    if isinstance(spec, Spec):
        if params:
            raise UsageError("give parameters either in the spec instance or as keywords, not both")
        return spec
    cls = spec_class(spec) if isinstance(spec, str) else checked_spec_class(spec)
    known = set(cls.Params.__dataclass_fields__)
    unknown = sorted(set(params) - known)
    if unknown:
        raise UsageError(f"spec {cls.name} has no parameter {unknown[0]!r}; its parameters: {', '.join(sorted(known))}")
    return spec_instance(cls, params)


def prepare(request: CheckRequest, note: Callable[[str], None]) -> Prepared:
    """Validate ``request`` and build its options and its model, once; every refusal is here,
    before any work."""
    request.validate()
    threads = worker_threads(request.threads, note)
    options = _options(request, threads)  # a bad limit is refused before the spec is built
    spec = make_spec(request.spec, dict(request.params))  # a spec refusing its parameters says so now
    if request.engine == "engine" and request.compile_mode == "background" and request.simulation is None:
        from kraftcheck.checker.explore.bytecode_tier import start_interpreter_compile
        start_interpreter_compile()  # an installation's first run: beside building the model
    model = Model(spec, check=list(request.invariants) or None,
                  constraints=None if request.constraints is None else list(request.constraints),
                  deadlock=request.deadlock)
    if request.symmetry:
        from kraftcheck.checker.symmetry import canonicaliser_for
        canonicaliser_for(model)  # a spec without a symmetry refuses before anything runs
    from kraftcheck.checker.analyses.liveness_properties import unchecked_liveness
    not_checked = unchecked_liveness(model, checking=request.liveness)  # a bad fairness name: refused on every run
    if request.availability:  # a spec that does not say what 'available' means, or a predicate that
        # cannot run (a misspelt field), is refused now, as --liveness refuses, not after the exploration
        from kraftcheck.checker.analyses.availability import availability_predicate
        from kraftcheck.checker.analyses.predicates import check_on
        check_on(model.layout, availability_predicate(model), model.initial)
    return Prepared(request, model, not_checked, options)


def worker_threads(requested: Optional[int], note: Callable[[str], None]) -> Optional[int]:
    """The worker threads to run: the request's (else ``KRAFTCHECK_THREADS``, checked by
    ``threads.requested_threads``), at most the usable CPUs (``note`` says so when it lowers
    them): each worker thread takes its own tables (tens of MiB), and threads the CPUs cannot run
    only wait their turn. None: the engine's default (every usable CPU)."""
    from kraftcheck.checker.kernels.threads import requested_threads, usable_cpus
    source = "--threads"
    if requested is None:
        requested = requested_threads()
        if requested is None:
            return None
        source = "KRAFTCHECK_THREADS"
    cpus = usable_cpus()
    if requested > cpus:
        note(f"{source} {requested} is more than the {cpus} CPUs this process may use; running {cpus} threads")
        return cpus
    return requested


def _options(request: CheckRequest, threads: Optional[int]) -> Any:
    """The explorer's Options, or a simulation's SimulationOptions (its seed drawn if not given)."""
    if request.simulation is not None:
        from kraftcheck.checker.explore.simulate import SimulationOptions
        s = request.simulation
        return SimulationOptions(seed=s.seed if s.seed is not None else int.from_bytes(os.urandom(4), "little"),
                                 depth=s.depth, max_behaviours=s.max_behaviours, time_limit=request.time_limit,
                                 max_memory=request.max_memory, keep_going=request.keep_going, strategy=s.strategy,
                                 threads=threads)
    keep_going = request.keep_going or request.explores_for_analyses
    # the compiled engine keeps the graph for the analyses while it explores (others leave it to
    # a pass of their own that builds it)
    keep_graph = request.explores_for_analyses and request.engine == "engine" and not request.fingerprints \
        and not (request.checkpoint or request.resume)
    return Options(max_states=_max_states(request), max_depth=request.max_depth, time_limit=request.time_limit,
                   keep_going=keep_going, max_memory=request.max_memory, fingerprints=request.fingerprints,
                   compact=request.compact, checkpoint_dir=request.checkpoint or request.resume, resume=bool(request.resume),
                   keep_graph=keep_graph, symmetry=request.symmetry, threads=threads)


def _max_states(request: CheckRequest) -> Optional[int]:
    """The run's --max-states, or --graph-limit when --dump-graph asks for a graph of at most that
    many states: the graph has at least the check's states, so a check past the limit stops there
    (``GRAPH_LIMIT_REASON``) rather than after exploring every state for a dump refused at once."""
    if request.dump_graph and (request.max_states is None or request.graph_limit < request.max_states):
        return request.graph_limit
    return request.max_states


def explore(prepared: Prepared, reporter: Reporter, observer: Optional[RunObserver] = None) -> Result:
    """Explore (or simulate) the prepared model with progress on ``reporter`` and the run's events
    on ``observer`` (an exploration's: checker/explore/observer.py); the result (``finish`` checks
    its counterexamples on the spec's stricter variant)."""
    request, model, options = prepared.request, prepared.model, prepared.options
    if request.simulation is not None:
        reporter.note(f"simulating {model.spec.title()}: random behaviours, seed {options.seed}, strategy "
                      f"{options.strategy} ({len(model.labels)} action instances)")
    else:
        explorer = explorer_for(request.engine, request.compile_mode, request.spark.given())
        reporter.note(f"checking {model.spec.title()}: {len(model.labels)} action instances, "
                      f"{model.layout.state_bits} bits per state")
    from kraftcheck.checker.explore.checkpoint import ResumePastMaxStates
    reporter.start_progress()
    try:
        if request.simulation is not None:
            from kraftcheck.checker.explore.simulate import simulate
            result = simulate(model, options, reporter.progress,
                              compile="never" if request.compile == "never" else "now")
        else:
            result = explorer.explore(model, options, reporter.progress, observer)
    except ResumePastMaxStates as e:
        if options.max_states == request.max_states:
            raise
        # the limit is --graph-limit's (_max_states): --max-states, however large, would not lift it
        raise UsageError(f"--resume {e.directory}: its checkpoint holds {e.states:,} states already, more than "
                         f"--graph-limit {e.max_states:,} lets --dump-graph write; give --graph-limit {e.states:,} "
                         "or more, or leave --dump-graph out") from None
    finally:
        reporter.stop_progress()
    if request.simulation is None and options.max_states != request.max_states \
            and result.incomplete_reason == f"stopped at --max-states {options.max_states}":
        # the limit the run stopped at is --graph-limit's (a simulation's options have no state limit)
        from kraftcheck.traces.state_graph import GRAPH_LIMIT_REASON
        result.incomplete_reason = f"{GRAPH_LIMIT_REASON} {options.max_states} (the state graph to dump has more " \
                                   "states)"
    return result


def write_traces(model: Model, result: Result, run_options: dict[str, Any], trace_dir: Optional[str],
                 unwritten: list, written: Optional[dict[str, str]] = None) -> dict[str, str]:
    """Each violation's trace file, one by one: one the disk refuses is added to ``unwritten``
    and the next still written. Returns check name -> file written (``written``, filled as each
    is written, if given)."""
    written = {} if written is None else written
    if trace_dir is None or not result.violations:
        return written
    from kraftcheck.traces import counterexample_file
    for v in result.violations:
        path, text = counterexample_file(model, v, run_options, trace_dir)
        if write_kept(f"the trace of {v.kind} {v.check}", path, lambda: atomic_write(path, text), unwritten, v.check):
            v.trace_file = written[v.check] = str(path)
    return written


def finish(prepared: Prepared, result: Result, reporter: Reporter) -> Checked:
    """The counterexamples checked on the spec's stricter variant, their trace files, then the
    whole-graph analyses the request asks for (their lassos go beside the traces); the summary
    and the JSON report are the caller's to give. An interrupt meanwhile ends this early, not the
    run's answer: what it cut short is in ``cut_short`` (the analyses' findings then unknown)."""
    request, run_options = prepared.request, prepared.run_options()
    checked = Checked(prepared, result, run_options, unwritten=list(result.unwritten))
    doing = "checking the counterexamples on the spec's stricter variant"
    try:
        from kraftcheck.checker.explore.concrete import check_in_stricter_variant
        check_in_stricter_variant(prepared.model, result.violations)
        doing = "writing the trace files"
        write_traces(prepared.model, result, run_options, request.trace_dir, checked.unwritten, checked.trace_files)
        doing = "analysing the state graph"
        _analyse(prepared, result, reporter, checked)
    except KeyboardInterrupt:
        stop_honoured()
        checked.cut_short = doing
    return checked


def _analyse(prepared: Prepared, result: Result, reporter: Reporter, checked: Checked) -> None:
    """The whole-graph analyses the request asks for, their findings into ``checked``."""
    request, run_options = prepared.request, checked.run_options
    if request.graph_analyses and request.simulation is None:
        from kraftcheck.analyses import analyse_after_check
        spec = prepared.model.spec
        checked.analyses = analyse_after_check(
            reporter, result,
            lambda: Model(type(spec)(spec.params), constraints=None if request.constraints is None
                          else list(request.constraints), deadlock=request.deadlock),
            request.dump_graph, request.availability, request.liveness, request.graph_limit, request.max_states,
            request.max_memory, request.trace_dir, run_options)
        if checked.analyses is not None:
            result.add_liveness_violations(checked.analyses.violations)
            if checked.analyses.stopped is not None:
                result.stop_analysis(checked.analyses.stopped)
            for v in checked.analyses.violations:
                if v.trace_file:
                    checked.trace_files[v.check] = v.trace_file
            checked.unwritten += checked.analyses.unwritten


def error_report(prepared: Prepared, error: KraftcheckError) -> Optional[dict]:
    """The JSON report of a run that ``prepare`` let begin and that ended in ``error`` (from
    ``explore`` or ``finish``: a function of the spec raised on a state, the kernels failed), so that
    a program reading it tells it from a refusal of its input, which writes none. None for a
    ``UsageError``: input refused once the run began (a checkpoint of another run), as any refusal."""
    if isinstance(error, UsageError):
        return None
    from kraftcheck.checker.report import error_report as report_of_error
    return report_of_error(prepared.model, prepared.run_options(), str(error))


def run(request: CheckRequest, reporter: Reporter, observer: Optional[RunObserver] = None) -> Checked:
    """The whole pipeline: prepare, explore (its events to ``observer``, if any), finish."""
    prepared = prepare(request, reporter.note)
    return finish(prepared, explore(prepared, reporter, observer), reporter)

