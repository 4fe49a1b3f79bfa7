"""What an exploration returns and reports while it runs: options, progress, violations, result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from kraftcheck.checker.errors import SpecError, UsageError
from kraftcheck.checker.limits import check_count, check_number
from kraftcheck.checker.model import Model

HOLDS, VIOLATED, INCOMPLETE = "holds", "violated", "incomplete"


@dataclass(frozen=True)
class Options:
    """Limits and modes of one exploration."""

    max_states: Optional[int] = None   # stop (incomplete) once more distinct states than this are found
    max_depth: Optional[int] = None    # do not expand states at this depth (initial level = 1)
    time_limit: Optional[float] = None  # seconds of exploration
    max_memory: Optional[int] = None   # stop (incomplete) once the process uses more bytes than this
    keep_going: bool = False           # --continue: find the shortest violation of each check
    fingerprints: bool = False         # --fingerprints: keep 64-bit fingerprints, not whole states
    compact: bool = False              # --compact: keep states tree-compressed (exact, fewer bytes)
    checkpoint_dir: Optional[str] = None  # --checkpoint / --resume: levels on disk there, resumable
    resume: bool = False               # continue the run whose checkpoint is in checkpoint_dir
    keep_graph: bool = False           # also keep every transition, for the graph analyses (engine only; needs keep_going)
    symmetry: bool = False             # --symmetry: canonical states under the spec's symmetry
    threads: Optional[int] = None      # --threads: worker threads; None: KRAFTCHECK_THREADS, else every CPU

    def __post_init__(self) -> None:
        # every entry point builds its check's Options: a bad limit is refused here, before any work
        check_count("max_states", self.max_states)
        check_count("max_depth", self.max_depth)
        check_number("time_limit", self.time_limit, "seconds")
        check_count("max_memory", self.max_memory)
        check_count("threads", self.threads)
        if self.compact and (self.fingerprints or self.keep_graph):
            other = "--fingerprints" if self.fingerprints else "recording the state graph"
            raise UsageError(f"--compact keeps every state exactly in fewer bytes; {other} keeps another set: "
                             "give one of them")


@dataclass(frozen=True)
class Progress:
    """A snapshot sent to the reporter during a run; the explorer never prints."""

    depth: int
    distinct: int
    generated: int
    frontier: int
    elapsed_s: float
    compiling: Optional[str] = None  # what is being compiled, while the kernels are being built
    # while compiling in the background, what explores meanwhile: "interpreting", "waiting" (the
    # interpreted tier's time is up) or "table form" (a small layout's quick kernels)
    meanwhile: str = "interpreting"
    engine: str = ""  # the explorer's name, for engines whose progress reads differently ("spark")
    shuffle_bytes: Optional[int] = None  # distributed engines: bytes the last finished level shuffled
    # simulation: behaviours ended so far (then distinct = states the behaviours passed through,
    # frontier = behaviours running, depth = the longest running one's states)
    behaviours: Optional[int] = None
    levels_spilled_to: Optional[str] = None  # the engine's levels outgrew memory: the directory they are in


ProgressFn = Callable[[Progress], None]


@dataclass
class Step:
    """One state of a trace and the action that led to it (None for the initial state)."""

    label: Optional[int]
    state: tuple[int, ...]


def replay_path(model: Model, index: int, parent_of: Callable[[int], tuple[int, int]],
                step: Callable[[tuple[int, ...], int], Optional[tuple[int, ...]]],
                initial: Optional[Callable[[int], tuple[int, ...]]] = None) -> list[Step]:
    """The trace to state ``index``: follow ``parent_of(index) -> (parent, label)`` back to an
    initial state (parent < 0), then replay the labels forward with ``step``. Every explorer that
    stores a parent link and a label per state rebuilds its counterexamples this way.
    ``initial(i)``: the state of initial-level index i (default: ``model.initial[i]``)."""
    labels = []
    while True:
        parent, label = parent_of(index)
        if parent < 0:
            break
        labels.append(label)
        index = parent
    state = model.initial[index] if initial is None else initial(index)  # initial states come first, in order
    steps = [Step(None, state)]
    for label in reversed(labels):
        state = step(state, label)
        if state is None:
            raise SpecError(f"internal: replaying {model.labels[label]} found it disabled")
        steps.append(Step(label, state))
    return steps


@dataclass
class Violation:
    """The shortest counterexample found for one invariant or transition property."""

    check: str
    # "invariant", "property", "deadlock" (check "deadlock": the last state has no successor but itself)
    # or "liveness" (a lasso: ``steps`` run on forever from ``cycle_start``, traces/liveness.py)
    kind: str
    steps: list[Step]
    trace_file: Optional[str] = None
    # the counterexample replayed on the spec's stricter variant (checker/explore/concrete.py)
    stricter_variant: Optional[dict[str, Any]] = None
    # a lasso: the step its cycle starts at (the last step is that state again, unless it stutters
    # forever, then the cycle is the last state alone); None for every other kind
    cycle_start: Optional[int] = None

    @property
    def depth(self) -> int:
        """Number of states in the trace, the initial state counted (TLC's trace length). A lasso's
        closing step (its last, unless it stutters) leads back to a state counted already: it adds
        none, as TLC's "back to state" adds none."""
        if self.cycle_start is not None and self.cycle_start < len(self.steps) - 1:
            return len(self.steps) - 1
        return len(self.steps)


@dataclass
class Result:
    """Counts follow TLC: generated = initial states + every successor computed, duplicates included;
    depth = number of BFS levels with the initial level counted."""

    model: Model
    status: str = HOLDS
    incomplete_reason: Optional[str] = None
    interrupted: bool = False
    # an analysis after a complete exploration (--liveness, --availability) stopped by a limit the
    # run was given: why (starting "stopped at --max-memory"); the verdict is then incomplete
    analysis_stopped: Optional[str] = None
    initial_states: int = 0
    states_generated: int = 0
    distinct_states: int = 0
    depth: int = 0
    elapsed_s: float = 0.0
    compile_s: Optional[float] = 0.0  # None: compiling in the background, unfinished when the run ended
    fired: list[int] = field(default_factory=list)      # per action: transitions computed
    new_states: list[int] = field(default_factory=list)  # per action: new distinct states found
    violations: list[Violation] = field(default_factory=list)
    engine: str = ""
    exhaustive: bool = False  # every reachable state was explored (no limit, no early stop)
    interpreted_states: int = 0  # states expanded by the first tier while kernels compiled
    first_tier: Optional[str] = None  # what explored before compiled kernels: "bytecode" or "python"
    first_tier_python_because: Optional[str] = None  # what of the spec the bytecode does not translate
    compiled_in_background: bool = False  # compile_s ran beside the exploration
    compile_continues: bool = False  # the run ended first and left the background compile to finish
    fingerprints: bool = False  # visited states kept as fingerprints: exhaustive up to collisions
    compact: bool = False  # visited states kept tree-compressed (--compact): exact, as the packed states
    collision_probability: Optional[dict[str, float]] = None  # TLC's two estimates, with fingerprints
    checkpoint_dir: Optional[str] = None  # where the run's levels and checkpoint are
    graph: Any = None  # with Options.keep_graph and a complete run: the CompiledGraph (analyses/state_graph.py)
    # a --resume run: the levels it found finished in its checkpoint (0: none); None: not resumed
    resumed_from_level: Optional[int] = None
    spark: Optional[dict[str, Any]] = None  # the Spark explorer's figures (kraftcheck/spark/figures.py)
    symmetry: bool = False  # states were canonicalised: distinct states count orbits
    simulation: Optional[dict[str, Any]] = None  # a simulation's figures (explore/simulate.py), else None
    # the engine's levels outgrew their share of memory and went on in a temporary directory,
    # removed at the end: {directory, at_level, at_distinct, levels_bytes, threshold_bytes}; else None
    levels_spilled: Optional[dict[str, Any]] = None
    # files of the exploration's own a full disk refused (checker.disk_full.UnwrittenFile), the verdict kept
    unwritten: list[Any] = field(default_factory=list)

    @property
    def resumed(self) -> bool:
        """A --resume run (``resumed_from_level`` 0: its checkpoint had no finished level)."""
        return self.resumed_from_level is not None

    @property
    def states_per_s(self) -> float:
        return self.distinct_states / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def coverage(self) -> dict[str, dict[str, int]]:
        return {a.name: {"fired": f, "new": n}
                for a, f, n in zip(self.model.actions, self.fired, self.new_states)}

    def settle(self, options: Options, violations: list[Violation], distinct: int, generated: int, depth: int,
               elapsed_s: float, fired: Optional[Any] = None, new_states: Optional[Any] = None,
               collision_probability: Optional[dict[str, float]] = None) -> None:
        """What every explorer ends with: its counts (``fired``, ``new_states`` per action, when
        not kept in this result as they went), the modes it ran in, then the verdict
        (``conclude``)."""
        # the initial level counts once its states are generated, though a constraint kept none of
        # them (TLC's depth is 1 there too, and so was Spark's and the recorded graph's)
        depth = max(depth, 1) if generated else depth
        self.distinct_states, self.states_generated, self.depth, self.elapsed_s = distinct, generated, depth, elapsed_s
        if fired is not None:
            self.fired = [int(x) for x in fired]
        if new_states is not None:
            self.new_states = [int(x) for x in new_states]
        self.fingerprints, self.symmetry, self.compact = options.fingerprints, options.symmetry, options.compact
        if options.fingerprints:
            self.collision_probability = collision_probability
        self.conclude(violations, options.keep_going)

    def conclude(self, violations: list[Violation], keep_going: bool) -> None:
        """Keep the violations found, shortest first, and the verdict they and the limits give."""
        names = self.model.check_names
        self.violations = sorted(violations, key=lambda v: (v.depth, names.index(v.check) if v.check in names
                                                            else len(names)))  # a deadlock last
        self.exhaustive = not self.incomplete_reason and (keep_going or not self.violations)
        if self.violations:
            self.status = VIOLATED
        elif self.incomplete_reason:
            self.status = INCOMPLETE
        else:
            self.status = HOLDS

    def add_liveness_violations(self, violations: list[Violation]) -> None:
        """Liveness properties found violated over the whole state graph, after the exploration:
        they join the violations, and make the run's verdict violated."""
        self.violations = self.violations + list(violations)
        if violations:
            self.status = VIOLATED

    def stop_analysis(self, reason: str) -> None:
        """An analysis after the exploration stopped at a limit (``reason``): what it was to
        check is not known, so a run that found nothing violated is incomplete, not holds."""
        self.analysis_stopped = reason
        if self.status == HOLDS:
            self.status = INCOMPLETE

    def agreed(self) -> dict[str, Any]:
        """What every explorer of one model with the same options must give alike (the conformance
        and differential tests compare it): the verdict, the counts, the depth, each action's
        coverage and each violation's check, kind and depth, in the order kept (``conclude``)."""
        return {
            "status": self.status,
            "initial": self.initial_states,
            "distinct": self.distinct_states,
            "generated": self.states_generated,
            "depth": self.depth,
            "coverage": self.coverage(),
            "violations": [(v.check, v.kind, v.depth) for v in self.violations],
        }

    def never_fired(self) -> Optional[list[str]]:
        """The actions that never fired, or None when the run did not see every state (an action
        it never fired then proves nothing)."""
        if not self.exhaustive:
            return None
        return [a.name for a, f in zip(self.model.actions, self.fired) if f == 0]


# the limits' own module; importable from here too, as before it existed
from kraftcheck.checker.explore.run_limits import (  # noqa: E402,F401
    Clock, describe_limit, memory_exceeded, memory_in_use, memory_total)


def no_progress(_: Progress) -> None:
    return None


Reporter = Any
