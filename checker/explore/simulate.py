"""Simulation: random behaviours at full speed, reproducible by seed (TLC's ``-simulate``).

Behaviours run in lockstep, a batch at a time, on the same kernels as the breadth-first engine:
per step, ``successors`` computes every successor of every running behaviour's state (on the
worker threads), ``violations`` checks every one of them (invariants and state constraints),
their transition masks give the properties and action constraints, and ``choose_successors``
(``checker/kernels/simulation.py``) picks each behaviour's next state. Every state generated is
checked, not only the states the behaviours pass through.

Behaviour b of seed s is a fixed sequence of states: its initial state, each choice and (in swarm
runs) the actions it may take are hashes of (s, b, step, purpose), so it does not depend on the thread
count, the batch, or the tier that computed it. The violation reported for a check is that of
the lowest-numbered behaviour that violates it, cut at its first violating state, with its
cycles removed (a state that repeats closes a loop the trace does not need); once one is found,
no higher-numbered behaviour starts, the lower ones still running finish, and so the answer is
the same whatever the batch. A behaviour ends at ``depth`` states, in a deadlock (reported when
the model checks for deadlocks), at a state outside the state constraints (checked, not extended,
as TLC does), or where no successor is left to take (only self-loops, or every successor outside
the action constraints or switched off by swarm).

The strategy (``SimulationOptions.strategy``) is how a behaviour picks its next state:

- ``by-action`` (the default): uniformly among the actions that have a candidate, then uniformly
  among that action's candidates: every enabled action is equally likely, however many instances
  it has.
- ``uniform``: uniformly among its candidate successors (TLC's way). An action with many
  instances enabled (an ISR shrink per subset of followers) is taken that much more often.
- ``swarm``: uniform, but each behaviour may take only a random half of the actions (at least
  one), a different half per behaviour (swarm testing, Groce et al. 2012): rare interleavings of
  few actions come up far more often than under a uniform choice over all of them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.errors import SpecRaised, UsageError
from kraftcheck.checker.explore.spec_raised import placed
from kraftcheck.checker.limits import check_count, check_depth, check_number
from kraftcheck.checker.explore.compiled import kernel_shapes
from kraftcheck.checker.explore.chunks import close_gaps
from kraftcheck.checker.explore.constraints import outside_constraints
from kraftcheck.checker.explore.kernel_audit import KernelAudit, confirm_counterexamples
from kraftcheck.checker.explore.result import (INCOMPLETE, VIOLATED, Progress, ProgressFn, Result, Step, Violation,
                                               no_progress)
from kraftcheck.checker.explore.run_limits import Clock, memory_exceeded
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.stop import raise_if_stop_requested, stop_honoured
from kraftcheck.checker.kernels.simulation import ENDS, GOES, behaviour_starts, choose_successors, take_steps
from kraftcheck.checker.kernels.successor_rows import valid_rows_part
from kraftcheck.checker.model import DEADLOCK, Model

# behaviours advanced together: enough that a step's successors keep both threads busy, few
# enough that their paths stay small (BATCH x depth x words)
BATCH = 4096
PATH_BYTES = 64 << 20  # the batch shrinks below BATCH to keep the paths within this
# the default depth: this many times the diameter when a short breadth-first probe exhausts the
# model, else this many times the depth the probe reached (a lower bound of the diameter)
DEPTH_PER_DIAMETER = 2
DEPTH_PER_PROBE_DEPTH = 4
PROBE_STATES = 50_000
PROBE_STATES_INTERPRETED = 2_000
PROBE_CHUNK = 2048
MIN_DEFAULT_DEPTH = 10
STRATEGIES = ("uniform", "by-action", "swarm")
# the strategy of a run that names none: of the three the one that reaches the Kafka model's deep
# data-loss checks at four brokers (bench/RESULTS.md, "Simulation's default strategy")
DEFAULT_STRATEGY = "by-action"


@dataclass(frozen=True)
class SimulationOptions:
    """What a simulation run does and when it stops."""

    seed: int = 0
    depth: Optional[int] = None           # states per behaviour at most (initial state counted); None: estimated
    max_behaviours: Optional[int] = None  # stop after this many behaviours have ended
    time_limit: Optional[float] = None    # seconds
    max_memory: Optional[int] = None      # bytes of the process
    keep_going: bool = False              # after a violation, go on: the first violation of each check
    strategy: str = DEFAULT_STRATEGY      # how a behaviour picks its next state: one of STRATEGIES
    threads: Optional[int] = None         # worker threads; None: KRAFTCHECK_THREADS, else every CPU

    def __post_init__(self) -> None:
        # every entry point builds its simulation's options: a bad setting is refused here, before any work
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise UsageError(f"seed: must be a whole number from 0 to 2**63 - 1, got {self.seed!r}")
        check_depth("depth", self.depth)
        check_count("max_behaviours", self.max_behaviours)
        check_number("time_limit", self.time_limit, "seconds")
        check_count("max_memory", self.max_memory)
        check_count("threads", self.threads)
        if self.strategy not in STRATEGIES:
            raise UsageError(f"unknown simulation strategy {self.strategy!r}: use one of {', '.join(STRATEGIES)}")


@dataclass
class SimulationFigures:
    """TLC-like statistics of a simulation run (the report's ``simulation`` object)."""

    seed: int
    depth: int
    depth_source: str
    strategy: str
    behaviours: int = 0            # behaviours that ended
    states: int = 0                # states the behaviours passed through, initial states counted
    ends: dict[str, int] = field(default_factory=lambda: {"depth": 0, "deadlock": 0, "constraint": 0,
                                                           "no successor": 0, "violation": 0,
                                                           "cut short": 0})
    length_min: int = 0
    length_max: int = 0
    length_sum: int = 0
    taken: Any = None  # per action (an int64 array): steps of the behaviours that took it
    found_after_s: dict[str, float] = field(default_factory=dict)  # check -> seconds to its first violation
    # check -> the number of the lowest-numbered behaviour seen violating it: what a seed determines,
    # so strategies compare on a loaded machine by behaviours as well as by seconds
    found_in_behaviour: dict[str, int] = field(default_factory=dict)

    def as_dict(self, model: Model) -> dict[str, Any]:
        mean = self.length_sum / self.behaviours if self.behaviours else 0.0
        return {"seed": self.seed, "depth": self.depth, "depth_source": self.depth_source,
                "strategy": self.strategy, "swarm": self.strategy == "swarm",
                "behaviours": self.behaviours, "states": self.states,
                "behaviour_length": {"min": self.length_min, "mean": round(mean, 2), "max": self.length_max},
                "ends": dict(self.ends),
                "actions_taken": {a.name: int(n) for a, n in zip(model.actions, self.taken)},
                "found_after_s": {k: round(v, 4) for k, v in self.found_after_s.items()},
                "found_in_behaviour": dict(self.found_in_behaviour)}


def estimate_depth(model: Model, kernels: Any) -> tuple[int, str]:
    """The default behaviour length and where it comes from: a breadth-first probe of up to
    PROBE_STATES states (PROBE_STATES_INTERPRETED on the interpreted tier), fingerprints only (a
    collision could only make it shorter), keeping to the constraints as the exhaustive search
    does: an initial state or a step's successor outside a state constraint, and a step outside an
    action constraint, are not expanded (else "the levels of the whole state space" counted
    levels the search does not have)."""
    most = PROBE_STATES if kernels.compiled else PROBE_STATES_INTERPRETED
    nl = len(model.labels)
    level = kernels.pack(model.initial)
    if model.constraints:
        level = np.ascontiguousarray(level[~outside_constraints(model, kernels.violations(level))])
    seen = np.unique(fingerprints(level))
    levels = 1
    buf = kernels.buffers(PROBE_CHUNK)
    while level.shape[0] and seen.size < most:
        found = []
        for lo in range(0, level.shape[0], PROBE_CHUNK):
            hi = min(level.shape[0], lo + PROBE_CHUNK)
            out = kernels.successors(level, lo, hi, buf)
            rows = np.flatnonzero(out.labels[: (hi - lo) * nl] != NO_LABEL)
            if model.action_constraints and rows.size:
                rows = rows[~outside_constraints(model, props=out.props[rows].astype(np.uint64))]
            found.append((out.words[rows].copy(), out.hashes[rows].copy()))
        words = np.concatenate([w for w, _ in found])
        hashes, first = np.unique(np.concatenate([h for _, h in found]), return_index=True)
        fresh = ~np.isin(hashes, seen, assume_unique=True)
        seen = np.union1d(seen, hashes[fresh])
        level = words[first[fresh]]
        if model.constraints and level.shape[0]:
            level = level[~outside_constraints(model, kernels.violations(level))]
        if level.shape[0]:
            levels += 1
    if level.shape[0] == 0:
        return (max(MIN_DEFAULT_DEPTH, DEPTH_PER_DIAMETER * levels),
                f"{DEPTH_PER_DIAMETER} x the {levels} levels of the whole state space")
    return (max(MIN_DEFAULT_DEPTH, DEPTH_PER_PROBE_DEPTH * levels),
            f"{DEPTH_PER_PROBE_DEPTH} x the {levels} levels a breadth-first probe of {seen.size:,} states reached")


def without_cycles(states: list[np.ndarray], labels: list[int]) -> tuple[list[np.ndarray], list[int]]:
    """The path with every loop cut out: where a state repeats, the steps between its two
    occurrences go (still a behaviour: the step after the second occurrence leaves the first)."""
    out_states: list[np.ndarray] = []
    out_labels: list[int] = []
    where: dict[bytes, int] = {}
    for k, s in enumerate(states):
        key = s.tobytes()
        if key in where:
            cut = where[key]
            for gone in out_states[cut + 1:]:
                where.pop(gone.tobytes(), None)
            del out_states[cut + 1:]
            del out_labels[cut:]
            continue
        where[key] = len(out_states)
        if k:
            out_labels.append(labels[k - 1])
        out_states.append(s)
    return out_states, out_labels


class Simulator:
    """Random behaviours of a model on given kernels (``Kernels`` or ``InterpretedKernels``)."""

    name = "simulate"

    def run(self, model: Model, kernels: Any, options: SimulationOptions = SimulationOptions(),
            progress: ProgressFn = no_progress) -> Result:
        if options.depth is not None and options.depth < 1:
            raise UsageError("--depth must be at least 1 (states per behaviour, the initial state counted)")
        if options.max_behaviours is not None and options.max_behaviours < 1:
            raise UsageError("--max-behaviours must be at least 1")
        if options.strategy not in STRATEGIES:
            raise UsageError(f"unknown simulation strategy {options.strategy!r}: use one of {', '.join(STRATEGIES)}")
        if options.depth is None:
            depth, source = estimate_depth(model, kernels)
        else:
            depth, source = options.depth, "--depth"
        run = _SimulationRun(model, kernels, options, depth, source, progress)
        try:
            run.simulate()
        except KeyboardInterrupt:
            stop_honoured()
            run.result.interrupted = True
            run.result.incomplete_reason = "interrupted"  # as every explorer says it, in the report too
        return run.finish()


class _SimulationRun:
    """The state of one simulation: the batch of running behaviours and what they found."""

    def __init__(self, model: Model, kernels: Any, options: SimulationOptions, depth: int, depth_source: str,
                 progress: ProgressFn) -> None:
        self.model, self.kernels, self.options, self.depth, self.progress = model, kernels, options, depth, progress
        nw, nl = kernels.nwords, len(model.labels)
        self.nl = nl
        self.batch = max(16, min(BATCH, PATH_BYTES // max(1, depth * nw * 8)))
        if options.max_behaviours is not None:
            self.batch = min(self.batch, options.max_behaviours)
        self.buffers = kernels.buffers(self.batch)
        self.audit = KernelAudit(model)  # the compiled kernels against the spec's Python, on a sample
        self.cur = np.zeros((self.batch, nw), np.uint64)
        self.paths = np.zeros((self.batch, depth, nw), np.uint64)
        self.path_labels = np.zeros((self.batch, depth), np.int64)
        self.behaviour = np.zeros(self.batch, np.int64)  # running behaviour number of each walker
        self.step = np.zeros(self.batch, np.int64)       # its index in paths: states so far - 1
        self.action_on = np.ones((self.batch, len(model.actions)), np.uint8)
        self.chosen = np.zeros(self.batch, np.int64)
        self.moved = np.zeros(self.batch, np.uint8)
        self.label_action = np.array(model.label_action, np.int64)
        self.blocked = np.uint64(model.action_constraint_bits)
        self.inv_bits = (1 << len(model.invariants)) - 1
        self.constraint_bits = model.constraint_bits
        self.prop_bits = (1 << len(model.properties)) - 1
        self.initial_words = kernels.pack(model.initial)
        try:
            self.initial_masks = kernels.violations(self.initial_words) if model.invariants or model.constraints \
                else np.zeros(len(model.initial), np.uint64)
        except SpecRaised as e:  # on initial state e.at
            raise placed(model, e, None if e.at is None else [Step(None, model.initial[e.at])]) from None
        self.running = 0
        self.next_behaviour = 0
        self.stop_starting_at: Optional[int] = None  # no behaviour numbered this or more starts
        self.found: dict[str, tuple[int, Violation]] = {}  # check -> (behaviour, violation)
        self.by_action = options.strategy == "by-action"
        self.figures = SimulationFigures(options.seed, depth, depth_source, options.strategy,
                                         taken=np.zeros(len(model.actions), np.int64))
        self.generated = 0
        self.clock = Clock(options.time_limit)
        self.last_progress = 0.0
        self.result = Result(model=model, engine=Simulator.name, fired=[0] * len(model.actions),
                             new_states=[0] * len(model.actions))

    # -- behaviours starting and ending
    def _startable(self) -> int:
        """How many behaviours may start in the free walkers: none numbered at or past the
        lowest-numbered violating one (without --continue) or --max-behaviours."""
        limits = [x for x in (self.stop_starting_at, self.options.max_behaviours) if x is not None]
        return max(0, min([self.batch - self.running] + [x - self.next_behaviour for x in limits]))

    def _fill(self) -> None:
        """Start new behaviours in the free walkers (those from ``running`` on); one whose initial
        state violates an invariant or breaks a state constraint ends at once."""
        while (count := self._startable()) > 0:
            ids = np.arange(self.next_behaviour, self.next_behaviour + count, dtype=np.int64)
            self.next_behaviour += count
            initial = np.zeros(len(ids), np.int64)
            on = np.ones((len(ids), len(self.model.actions)), np.uint8)
            behaviour_starts(np.uint64(self.options.seed), ids, len(self.model.initial),
                             self.options.strategy == "swarm", on,
                             initial)
            first, end = self.running, self.running + count
            self.behaviour[first:end] = ids
            self.step[first:end] = 0
            self.action_on[first:end] = on
            self.cur[first:end] = self.initial_words[initial]
            self.paths[first:end, 0] = self.cur[first:end]
            self.generated += count
            self.running = end
            masks = self.initial_masks[initial]
            why = np.zeros(end, np.int8)  # the walkers before first go on
            violating = np.flatnonzero(masks & np.uint64(self.inv_bits))
            for j in violating.tolist():
                self._violated_invariants(first + j, int(masks[j]), None)
            if not self.options.keep_going:  # with --continue it goes on: other checks may fail past it
                why[first + violating] = ENDS.index("violation")
            outside = np.flatnonzero((why[first:] == GOES) & (masks & np.uint64(self.constraint_bits) != 0))
            why[first + outside] = ENDS.index("constraint")
            if self.depth == 1:  # a behaviour of one state is its initial state: none takes a step
                why[first:][why[first:] == GOES] = ENDS.index("depth")
            self._end_all(end, why)

    # -- violations
    def _trace(self, i: int, extra: Optional[tuple[int, np.ndarray]]) -> list[Step]:
        """Walker i's path (and the step ``extra`` = (label, words) beyond it), loops cut out."""
        k = int(self.step[i]) + 1
        states = [self.paths[i, j] for j in range(k)]
        labels = [int(x) for x in self.path_labels[i, : k - 1]]
        if extra is not None:
            labels.append(extra[0])
            states.append(extra[1])
        states, labels = without_cycles(states, labels)
        flats = self.kernels.unpack(np.array(states, np.uint64).reshape(len(states), self.kernels.nwords))
        return [Step(None, flats[0])] + [Step(lab, s) for lab, s in zip(labels, flats[1:])]

    def _note_violation(self, name: str, kind: str, i: int, extra: Optional[tuple[int, np.ndarray]]) -> None:
        b = int(self.behaviour[i])
        self.figures.found_after_s.setdefault(name, self.clock.elapsed)
        old = self.found.get(name)
        if old is not None and old[0] <= b:
            return
        self.found[name] = (b, Violation(name, kind, self._trace(i, extra)))
        if not self.options.keep_going:
            self.stop_starting_at = b if self.stop_starting_at is None else min(self.stop_starting_at, b)

    def _violated_invariants(self, i: int, mask: int, extra: Optional[tuple[int, np.ndarray]]) -> None:
        for k, inv in enumerate(self.model.invariants):
            if mask >> k & 1:
                self._note_violation(inv.name, "invariant", i, extra)

    def _note_successors(self, checks: list, kind: str, masks: np.ndarray, rows: np.ndarray, out: Any) -> None:
        """Note what the successors at ``rows`` violate (bit k of ``masks[p]``: ``checks[k]`` fails
        on ``rows[p]``): for each check the successor of the lowest-numbered behaviour (the first in
        row order among its), the checks in the order of their first violating row, as one note
        per violating successor would enter them (a run with --continue violates some check in
        many successors a step)."""
        firsts = []
        for k in range(len(checks)):
            at = np.flatnonzero(masks & np.uint64(1 << k))
            if at.size:
                firsts.append((int(at[0]), k, at))
        for _, k, at in sorted(firsts, key=lambda first: first[:2]):
            p = int(at[np.argmin(self.behaviour[rows[at] // self.nl])])
            r = int(rows[p])
            self._note_violation(checks[k].name, kind, r // self.nl, (r % self.nl, out.words[r]))

    # -- the loop
    def simulate(self) -> None:
        model, kernels, nl = self.model, self.kernels, self.nl
        self._fill()
        while self.running:
            raise_if_stop_requested()
            n = self.running
            try:
                self.audit.chunk(kernels, self.cur, 0, n, None)
            except SpecRaised as e:  # the spec's Python raised on walker e.at's state
                raise placed(model, e, None if e.at is None else self._trace(e.at, None)) from None
            found: dict[int, tuple[int, int]] = {}  # part -> its first row, and how many of its rows hold a successor
            try:
                out = kernels.successors(self.cur, 0, n, self.buffers, after_part=self._after_part(found))
            except SpecRaised as e:  # on walker e.at's state
                raise placed(model, e, None if e.at is None else self._trace(e.at, None)) from None
            parts = [found[j] for j in sorted(found)]  # in row order
            rows = out.valid[: sum(count for _, count in parts)]
            close_gaps((out.valid,), [start for start, _ in parts], [count for _, count in parts])
            self.generated += rows.size
            try:
                masks = kernels.violations(out.words[rows]) if (model.invariants or model.constraints) and rows.size \
                    else np.zeros(rows.size, np.uint64)
            except SpecRaised as e:  # on the successor of row rows[e.at]
                r = None if e.at is None else int(rows[e.at])
                raise placed(model, e, None if r is None else self._trace(r // nl, (r % nl, out.words[r]))) from None
            props = out.props[rows] if model.properties and rows.size else None
            if model.invariants and rows.size:
                self._note_successors(model.invariants, "invariant", masks, rows, out)
            if props is not None:
                self._note_successors(model.properties, "property", props, rows, out)
            self._advance(n, out, rows, masks)
            if self._limit_hit():
                break
            self._fill()
            self._report(False)
        self._report(True)

    def _after_part(self, found: dict[int, tuple[int, int]]):
        """What runs on the thread that expanded walkers a..b-1 (part j), while their rows are in
        its caches: the rows holding a successor, listed from the part's first row of ``valid``
        (``found[j]``: that row and how many), and each walker's pick of its successor
        (``chosen``, ``moved``). A pass of its own over every row, on one thread, took a tenth of a
        step, and the picks a hand-off to the threads of their own."""
        buf, nl, seed = self.buffers, self.nl, np.uint64(self.options.seed)

        def after_part(j: int, a: int, b: int) -> None:
            found[j] = (a * nl, valid_rows_part(buf.labels, a * nl, b * nl, NO_LABEL, buf.valid))
            choose_successors(buf.labels, buf.words, self.cur, buf.props, self.blocked, self.label_action,
                              self.action_on, nl, a, b, NO_LABEL, seed, self.behaviour, self.step, self.by_action,
                              self.chosen, self.moved)
        return after_part

    def _advance(self, n: int, out: Any, rows: np.ndarray, masks: np.ndarray) -> None:
        """Walkers 0..n-1 take their chosen successors; those whose behaviour ends here end."""
        if self.model.check_deadlock:
            for i in np.flatnonzero(self.moved[:n] == 0):
                self._note_violation(DEADLOCK, "deadlock", int(i), None)
        why = np.empty(n, np.int8)
        stop_at = -1 if self.stop_starting_at is None else self.stop_starting_at
        masks = masks if masks.size else np.zeros(1, np.uint64)  # no row listed: none is read
        take_steps(n, self.chosen, self.moved, self.behaviour, stop_at, out.words, rows, rows.size, masks,
                   np.uint64(self.constraint_bits), self.nl, self.label_action, self.depth, self.step,
                   self.path_labels, self.paths, self.cur, self.figures.taken, why)
        self._end_all(n, why)

    def _end_all(self, n: int, why: np.ndarray) -> None:
        """The behaviours of walkers 0..n-1 whose ``why`` is not GOES end here (their states
        counted); running walkers past the survivors move into the ended ones' places."""
        ended = np.flatnonzero(why != GOES)
        if not ended.size:
            return
        lengths = self.step[ended] + 1
        states = int(lengths.sum())
        f = self.figures
        f.length_min = int(lengths.min()) if f.behaviours == 0 else min(f.length_min, int(lengths.min()))
        f.behaviours += int(ended.size)
        f.states += states
        f.length_sum += states
        f.length_max = max(f.length_max, int(lengths.max()))
        for code, count in enumerate(np.bincount(why[ended], minlength=len(ENDS)).tolist()):
            if code != GOES:
                f.ends[ENDS[code]] += count
        survivors = n - int(ended.size)
        holes = ended[ended < survivors]
        movers = np.flatnonzero(why[survivors:n] == GOES) + survivors
        if holes.size:
            self.behaviour[holes] = self.behaviour[movers]
            self.step[holes] = self.step[movers]
            self.action_on[holes] = self.action_on[movers]
            self.cur[holes] = self.cur[movers]
            self.paths[holes] = self.paths[movers]
            self.path_labels[holes] = self.path_labels[movers]
        self.running -= int(ended.size)

    def _limit_hit(self) -> bool:
        if self.clock.expired():
            self.result.incomplete_reason = f"stopped at --time-limit {self.options.time_limit}"
            return True
        if memory_exceeded(self.options):  # type: ignore[arg-type]
            self.result.incomplete_reason = f"stopped at --max-memory {self.options.max_memory / 2**30:.1f} GiB"
            return True
        return False

    def _report(self, force: bool) -> None:
        now = self.clock.elapsed
        if force or now - self.last_progress >= 0.25:
            self.last_progress = now
            self.progress(Progress(int(self.step[: self.running].max(initial=0)) + 1, self.figures.states,
                                   self.generated, self.running, now, engine=Simulator.name,
                                   behaviours=self.figures.behaviours))

    def finish(self) -> Result:
        r = self.result
        f = self.figures
        r.initial_states = self.model.initial_generated  # as the exhaustive runs count them: one given twice, twice
        r.states_generated = self.generated
        r.distinct_states = 0  # not tracked: a simulation does not know which states repeat
        r.depth = f.length_max
        r.elapsed_s = self.clock.elapsed
        r.fired = [int(x) for x in f.taken]
        f.found_in_behaviour = {name: b for name, (b, _) in self.found.items()}
        r.simulation = f.as_dict(self.model)
        found = list(self.found.values())
        if not self.options.keep_going and found:  # the lowest-numbered violating behaviour's, whatever the batch
            first = min(b for b, _ in found)
            found = [(b, v) for b, v in found if b == first]
        violations = [v for _, v in found]
        if not r.incomplete_reason:
            r.incomplete_reason = (f"simulation: {f.behaviours:,} random behaviours of at most {f.depth:,} states, "
                                   f"not an exhaustive search")
        confirm_counterexamples(self.model, violations)
        r.conclude(violations, self.options.keep_going)
        r.exhaustive = False
        r.status = VIOLATED if violations else INCOMPLETE
        return r


def simulate(model: Model, options: SimulationOptions = SimulationOptions(), progress: ProgressFn = no_progress,
             compile: str = "now") -> Result:
    """Simulate ``model`` on its compiled kernels (built first if not cached: ``compile`` "now"),
    or interpreted throughout (``compile`` "never": the same behaviours, far slower)."""
    import numba

    from kraftcheck.checker.explore.interpreted import InterpretedKernels
    from kraftcheck.checker.explore.tiers import compile_now
    from kraftcheck.checker.kernels import simulation
    from kraftcheck.checker.kernels.threads import using_threads

    if compile not in ("now", "never"):
        raise UsageError(f"simulation compiles its kernels first (compile 'now') or interprets ('never'), "
                         f"not {compile!r}")
    t0 = time.perf_counter()
    with using_threads(options.threads):
        if compile == "never" or numba.config.DISABLE_JIT:
            kernels: Any = InterpretedKernels(model)
        else:
            kernels = compile_now(model, kernel_shapes(model), progress, t0)
        simulation.warm_up()
        compile_s = time.perf_counter() - t0
        result = Simulator().run(model, kernels, options, progress)
    result.compile_s = compile_s
    return result
