"""One check as one value: every option a check takes, checked once before any work.

The command line, the Python API (``kraftcheck.check``), ``kraftcheck ci``, ``sweep`` and the Spark
sweep's tasks each build a ``CheckRequest``; ``kraftcheck.pipeline`` runs it. ``validate`` refuses
what the options cannot mean together and every output location that cannot be written (exit 2,
before the spec is even built); what needs the spec (its parameters, invariant and constraint
names, its symmetry) is refused by the pipeline while it builds the model, still before exploring.

Adding an option to ``kraftcheck check``: a field here naming its flag (and its refusal in
``validate`` if it has one), one click decorator in cli/check_cmd.py, its use in the pipeline
(docs/architecture.md walks through it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.simulate import DEFAULT_STRATEGY
from kraftcheck.checker.limits import check_count, check_number

ENGINES = ("engine", "reference", "spark")
COMPILE_MODES = ("background", "now")
DEFAULT_TRACE_DIR = "kraftcheck-traces"
DEFAULT_GRAPH_LIMIT = 20_000


def default_max_memory_gib() -> float:
    """The command line's memory limit when none is given: 85% of this machine's memory, so that a
    run stops (incomplete) before the system kills it."""
    import psutil
    return 0.85 * psutil.virtual_memory().total / 2**30


@dataclass(frozen=True)
class Simulation:
    """``--simulate`` and its options (``seed`` None: a random one, reported)."""

    seed: Optional[int] = None
    depth: Optional[int] = None
    max_behaviours: Optional[int] = None
    strategy: str = DEFAULT_STRATEGY  # one of checker/explore/simulate.py's STRATEGIES


@dataclass(frozen=True)
class SparkSettings:
    """``--engine spark``'s settings; None: the explorer's default."""

    master: Optional[str] = None
    conf: Mapping[str, str] = field(default_factory=dict)
    work_dir: Optional[str] = None
    wait_s: Optional[float] = None

    def given(self) -> dict[str, Any]:
        """The Spark explorer's keyword arguments: only those given."""
        return {k: v for k, v in (("master", self.master), ("conf", dict(self.conf) or None),
                                  ("work_dir", self.work_dir), ("wait_s", self.wait_s)) if v is not None}


def _option(flag: str, default: Any = None, empty_flag: Optional[str] = None) -> Any:
    """A field that is ``kraftcheck check``'s option ``flag`` (``command_arguments`` gives it so);
    ``empty_flag``: the option that says an empty tuple, where it means other than the default."""
    return field(default=default, metadata={"flag": flag, "empty_flag": empty_flag})


@dataclass(frozen=True)
class CheckRequest:
    """Everything one check is asked to do. ``spec``: a name or reference (``file.py:Class``,
    ``module:Class``), a Spec subclass or instance; ``params``: its parameters, typed.
    ``constraints`` None: every constraint the spec declares; ``deadlock`` None: the spec's
    ``check_deadlock``. ``max_memory_gib`` None: no memory limit (the command line gives its default).
    ``threads`` None: ``KRAFTCHECK_THREADS``, else every usable CPU. ``compile`` None: "background"
    (``compile_mode``); given, it is refused for an engine that compiles no kernels in the
    background. ``trace_dir`` None: no trace files."""

    spec: Any
    params: Mapping[str, Any] = field(default_factory=dict)
    invariants: tuple[str, ...] = _option("--invariant", ())
    constraints: Optional[tuple[str, ...]] = _option("--constraint", empty_flag="--no-constraints")
    deadlock: Optional[bool] = _option("--deadlock")
    keep_going: bool = _option("--continue", False)
    max_states: Optional[int] = _option("--max-states")
    max_depth: Optional[int] = _option("--max-depth")
    time_limit: Optional[float] = _option("--time-limit")
    max_memory_gib: Optional[float] = _option("--max-memory")
    engine: str = _option("--engine", "engine")
    compile: Optional[str] = _option("--compile")  # None: background, for the compiled engine only
    spark: SparkSettings = SparkSettings()
    fingerprints: bool = _option("--fingerprints", False)
    compact: bool = _option("--compact", False)
    symmetry: bool = _option("--symmetry", False)
    checkpoint: Optional[str] = _option("--checkpoint")
    resume: Optional[str] = _option("--resume")
    threads: Optional[int] = _option("--threads")
    simulation: Optional[Simulation] = None
    availability: bool = _option("--availability", False)
    liveness: bool = _option("--liveness", False)
    dump_graph: Optional[str] = _option("--dump-graph")
    graph_limit: int = _option("--graph-limit", DEFAULT_GRAPH_LIMIT)
    json_path: Optional[str] = _option("--json")
    trace_dir: Optional[str] = _option("--trace-dir")

    def replace(self, **changes: Any) -> "CheckRequest":
        return dataclasses.replace(self, **changes)

    @property
    def graph_analyses(self) -> bool:
        return bool(self.dump_graph or self.availability or self.liveness)

    @property
    def compile_mode(self) -> str:
        return self.compile or "background"

    @property
    def max_memory(self) -> Optional[int]:
        """``max_memory_gib`` in bytes, at most 2**62: a finite number of GiB such as 1e300 is
        infinite in bytes, and no machine has more anyway."""
        return None if self.max_memory_gib is None else max(1, int(min(self.max_memory_gib * 2**30, 2**62)))

    @property
    def explores_for_analyses(self) -> bool:
        """--availability and --liveness need every state: they imply --continue."""
        return self.availability or self.liveness

    def validate(self) -> None:
        """Refuse, before any work, what these options cannot mean together and every output that
        cannot be written (``UsageError``, exit 2)."""
        from kraftcheck.output_paths import (check_graph_file, check_output_dir, check_output_file,
                                          refuse_replacing_input, refuse_same_file, refuse_two_on_stdout)
        if self.engine not in ENGINES:
            raise UsageError(f"unknown engine {self.engine!r}; choose one of: {', '.join(ENGINES)}")
        self._check_kinds()
        check_number("max_memory_gib", self.max_memory_gib, "GiB")  # before it is turned into bytes
        refuse_two_on_stdout({"--json": self.json_path, "--dump-graph": self.dump_graph})
        refuse_same_file({"--json": self.json_path, "--dump-graph": self.dump_graph})
        from kraftcheck.specs import source_file
        spec_file = source_file(self.spec)
        if spec_file is not None:  # the run reads it (and imports it again in its compile processes)
            for option, path in (("--json", self.json_path), ("--dump-graph", self.dump_graph)):
                refuse_replacing_input(path, option, spec_file, "spec file")
        if self.simulation is not None:
            self._refuse_with_simulate()
        # every output location is checked before exploring: a bad one must not cost the run
        check_output_file(self.json_path, "--json")
        check_output_dir(self.trace_dir, "--trace-dir")
        check_graph_file(self.dump_graph, "--dump-graph")
        if self.checkpoint and self.resume:
            raise UsageError("give --checkpoint DIR for a new run or --resume DIR to continue one, not both")
        if self.engine == "reference" and (self.checkpoint or self.resume):
            raise UsageError("--checkpoint and --resume work with the compiled engine, not --engine reference")
        if self.engine == "reference" and self.threads is not None:  # KRAFTCHECK_THREADS, ambient, is not refused
            raise UsageError(f"--threads {self.threads} sets the compiled engine's worker threads; --engine reference "
                             "explores on one thread: leave --threads out")
        if self.compile is not None and self.engine != "engine":
            how = "explores in Python and compiles no kernels" if self.engine == "reference" else \
                "compiles its kernels on the driver and the executors before exploring"
            raise UsageError(f"--compile {self.compile} says when the compiled engine compiles its kernels; "
                             f"--engine {self.engine} {how}: leave --compile out")
        if self.engine == "engine" and self.resume:
            from kraftcheck.checker.explore.checkpoint import check_resume_dir
            check_resume_dir(self.resume)  # a mistyped path: refused before any work, and nothing created
        check_output_dir(self.checkpoint or self.resume, "--checkpoint" if self.checkpoint else "--resume")
        self._refuse_outputs_over_the_checkpoint()
        if self.compact:
            self._check_compact()
        if self.symmetry and self.engine == "spark":
            raise UsageError("--symmetry works with the compiled engine and --engine reference, not on Spark")
        if self.symmetry and self.graph_analyses:
            raise UsageError("--symmetry explores one state per orbit; --availability, --liveness and --dump-graph "
                             "need every state")
        self._check_spark()

    def _check_kinds(self) -> None:
        """The options the command line types itself, as the Python API may give them: a flag is
        True or False (``keep_going="no"`` would be true), names a tuple of names, ``compile`` a
        mode, ``threads`` a count (``"2"`` or ``2.5`` would not be one)."""
        for name in ("keep_going", "fingerprints", "compact", "symmetry", "availability", "liveness"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise UsageError(f"{name}: give True or False, got {value!r}")
        if self.deadlock is not None and not isinstance(self.deadlock, bool):
            raise UsageError(f"deadlock: give True, False or None (the spec's check_deadlock), got {self.deadlock!r}")
        for name in ("invariants", "constraints"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, tuple) and all(isinstance(x, str) and x for x in value)):
                raise UsageError(f"{name}: give a list of names, got {value!r}")
        # "never": a simulation's Python-only tier, which only a request built in Python asks for
        modes = COMPILE_MODES + (("never",) if self.simulation is not None else ())
        if self.compile is not None and self.compile not in modes:
            raise UsageError(f"compile: {self.compile!r} is not a compile mode; choose one of: {', '.join(modes)} "
                             "(or None: background)")
        check_count("threads", self.threads)

    def _refuse_with_simulate(self) -> None:
        """The exhaustive search's options that mean nothing for random behaviours."""
        if self.engine != "engine":
            raise UsageError(f"--simulate runs on the compiled engine, not --engine {self.engine}")
        for flag, given in (("--fingerprints", self.fingerprints), ("--compact", self.compact),
                            ("--symmetry", self.symmetry),
                            ("--checkpoint", self.checkpoint), ("--resume", self.resume)):
            if given:
                raise UsageError(f"{flag} is an option of the exhaustive search; --simulate keeps no visited states")
        if self.compile == "background":
            raise UsageError("--simulate compiles the kernels before its first behaviour: leave --compile "
                             "background out")
        if self.max_states is not None:
            raise UsageError("--max-states bounds the exhaustive search; with --simulate use --max-behaviours or "
                             "--time-limit")
        if self.max_depth is not None:
            raise UsageError("--max-depth bounds the exhaustive search; with --simulate use --depth (states per "
                             "behaviour)")
        if self.graph_analyses:
            raise UsageError("--availability, --liveness and --dump-graph need every state; --simulate explores "
                             "random behaviours")

    def _refuse_outputs_over_the_checkpoint(self) -> None:
        """An output must not replace a file of the run's checkpoint (``--json DIR/checkpoint.json``):
        the run would end saying to resume a checkpoint its own report had overwritten."""
        directory = self.checkpoint or self.resume or self.spark.work_dir
        if not directory:
            return
        from kraftcheck.checker.explore.checkpoint import is_run_file
        from kraftcheck.checker.files import descriptor_of
        for flag, path in (("--json", self.json_path), ("--dump-graph", self.dump_graph),
                           ("--trace-dir", self.trace_dir)):
            if path and descriptor_of(path) is None and is_run_file(directory, path):
                raise UsageError(f"{flag} {path} names a file of the run's own checkpoint in {directory}, which "
                                 "writing there would replace; give another name (beside the checkpoint is fine)")

    def _check_compact(self) -> None:
        """--compact is one of the compiled engine's visited sets: the others are refused with it."""
        if self.engine != "engine":
            raise UsageError(f"--compact is a visited set of the compiled engine; --engine {self.engine} keeps "
                             "its own: give one of them")
        if self.fingerprints:
            raise UsageError("--compact keeps every state exactly in fewer bytes, --fingerprints keeps 64-bit "
                             "fingerprints only: give one of them")
        if self.graph_analyses:
            raise UsageError("--availability, --liveness and --dump-graph record the state graph, whose set numbers "
                             "every state; --compact keeps another set: leave it out")

    def _check_spark(self) -> None:
        given = self.spark.given()
        if given and self.engine != "spark":
            raise UsageError(f"{', '.join(sorted(given))}: Spark settings need --engine spark")
        work_dir = self.spark.work_dir
        if work_dir:
            from kraftcheck.checker.dirlock import LOCK_FILE
            from kraftcheck.output_paths import check_output_dir
            check_output_dir(work_dir, "--work-dir")
            path = Path(work_dir).expanduser()
            # a work dir with a run's lock file is the explorer's to judge: it names the run holding it
            if path.is_dir() and not (path / LOCK_FILE).exists() and any(path.iterdir()):
                raise UsageError(f"--work-dir {work_dir} is not empty; give a new or empty directory")

    def run_options(self, keep_going: bool, constraints: list[str], deadlock: bool,
                    seed: Optional[int] = None) -> dict[str, Any]:
        """The run's options as the JSON report and every trace file give them: ``keep_going`` as
        the run explored, the model's ``constraints`` and ``deadlock``, a simulation's ``seed``."""
        if self.simulation is not None:
            s = self.simulation
            return {"simulate": True, "seed": seed, "depth": s.depth, "max_behaviours": s.max_behaviours,
                    "strategy": s.strategy, "invariants": list(self.invariants), "continue": keep_going,
                    "time_limit": self.time_limit, "max_memory_bytes": self.max_memory, "engine": self.engine,
                    "compile": self.compile_mode, "constraints": constraints, "deadlock": deadlock}
        return {"invariants": list(self.invariants), "continue": keep_going, "max_states": self.max_states,
                "max_depth": self.max_depth, "time_limit": self.time_limit, "max_memory_bytes": self.max_memory,
                "engine": self.engine, "compile": self.compile_mode, "fingerprints": self.fingerprints,
                "compact": self.compact, "checkpoint": self.checkpoint, "resume": self.resume, "symmetry": self.symmetry,
                "constraints": constraints, "deadlock": deadlock}

    def command_arguments(self) -> list[str]:
        """The ``kraftcheck check`` arguments that make this request (``spec`` a name or reference):
        ``kraftcheck ci`` and ``sweep`` run each check as such a process. Every field with a flag
        that differs from its default is given: a tuple as the flag repeated (an empty one as its
        ``empty_flag``: ``--no-constraints``), a true flag alone (a tri-state one false as
        ``--no-...``), any other value after its flag."""
        if not isinstance(self.spec, str):
            raise UsageError("a check run as a command names its spec (a name, file.py:Class or module:Class)")
        if self.simulation is not None or self.spark.given():
            raise UsageError("a check run as a command is exhaustive and local")
        args = ["--spec", self.spec]
        for key, value in self.params.items():
            args += ["--param", f"{key}={_word(value)}"]
        for f in dataclasses.fields(self):
            flag, value = f.metadata.get("flag"), getattr(self, f.name)
            if flag is None or value == f.default:
                continue
            if isinstance(value, tuple):
                if not value and f.metadata["empty_flag"]:  # none, where the default (None) is all
                    args.append(f.metadata["empty_flag"])
                args += [word for item in value for word in (flag, item)]
            elif isinstance(value, bool):
                args.append(flag if value else "--no-" + flag[2:])
            else:
                args += [flag, _word(value)]
        return args


def _word(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)

