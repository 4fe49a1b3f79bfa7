"""The one object that writes to the terminal: progress while exploring, the summary after.

Explorers never print; they send ``Progress`` snapshots here. On a terminal, a rich live line
refreshed several times a second; otherwise (CI logs, pipes) a plain line every 10 seconds;
nothing at all with ``--quiet``. Results go to stdout, progress and errors to stderr.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from typing import Mapping, Optional, Sequence

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kraftcheck.checker.explore.result import HOLDS, INCOMPLETE, VIOLATED, Progress, Result
from kraftcheck.cli.diagnostics import raw_standard_error
from kraftcheck.traces.lasso import lasso_length

PLAIN_PROGRESS_EVERY_S = 10.0
PLAIN_PREFIX = "progress: "


def compile_summary(result: Result) -> str:
    if not result.compiled_in_background:
        return f"{result.compile_s:,.2f} s"
    tier = "in bytecode" if result.first_tier == "bytecode" else "interpreted in Python"
    interpreted = f"{result.interpreted_states:,} states {tier} meanwhile"
    if result.compile_s is not None:
        later = ("; its faster form goes on in the background for the next run (kraftcheck cache status)"
                 if result.compile_continues else "")
        return f"{result.compile_s:,.2f} s in the background ({interpreted}){later}"
    if result.compile_continues:
        return (f"unfinished; the run ended first ({interpreted}); it goes on in the background for the next run "
                "(kraftcheck cache status)")
    return f"unfinished; the run ended first ({interpreted})"


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f}/s" if seconds > 0 else "-"


def _three_digits(value: float, units: tuple[str, ...], base: int) -> str:
    """``value`` (in units[0]) in the first unit that keeps it below 1000, three significant digits."""
    for unit in units:
        if round(value, 3 - len(str(int(value)))) < 1000 or unit == units[-1]:
            return f"{value:.3g}{unit}" if value < 1000 else f"{value:,.0f}{unit}"
        value /= base
    raise AssertionError("unreachable")


def short_count(n: int) -> str:
    """A count in at most five characters: 9,999, 12.3k, 296k, 2.74M."""
    return f"{n:,}" if n < 10_000 else _three_digits(n / 1000, ("k", "M", "G", "T"), 1000)


def _short_rate(n: int, seconds: float) -> str:
    return f"{short_count(round(n / seconds))}/s" if seconds > 0 else "-"


def byte_size(n: int) -> str:
    """Bytes in binary units, three significant digits: 812 B, 2.4 KiB, 1.02 GiB."""
    return f"{n} B" if n < 1000 else _three_digits(n / 1024, (" KiB", " MiB", " GiB", " TiB"), 1024)


MAX_PROGRESS_WIDTH = 80


def spark_progress_line(p: Progress, width: int = MAX_PROGRESS_WIDTH) -> str:
    """A Spark run's progress: the level, counts kept short (Spark runs are big), the new states
    of the last level, the rate, the bytes that level shuffled, and the time if the line still
    fits ``width`` columns (the summary has it anyway)."""
    shuffled = "-" if p.shuffle_bytes is None else byte_size(p.shuffle_bytes)
    rate = _short_rate(p.distinct, p.elapsed_s)
    line = (f"level {p.depth:,}  distinct {short_count(p.distinct)} (+{short_count(p.frontier)})  "
            f"generated {short_count(p.generated)}  {rate}  shuffle {shuffled}")
    timed = f"{line}  {p.elapsed_s:,.1f}s"
    return timed if len(timed) <= width else line


def simulation_progress_line(p: Progress, width: int = MAX_PROGRESS_WIDTH) -> str:
    """A simulation's progress: behaviours ended and states passed, with their rates, in ``width``
    columns if they can be: the time goes first, then the rates, then the counts are kept short."""
    behaviours = p.behaviours or 0
    rates = (f" ({_rate(behaviours, p.elapsed_s)})", f" ({_rate(p.distinct, p.elapsed_s)})")
    seconds = f"  {p.elapsed_s:,.1f}s"
    whole = (f"{behaviours:,}", f"{p.distinct:,}", f"{p.generated:,}", f"{p.frontier:,}")
    short = tuple(short_count(n) for n in (behaviours, p.distinct, p.generated, p.frontier))

    def line(counts: tuple, with_rates: bool, timed: bool) -> str:
        b, s, g, r = counts
        return (f"behaviours {b}{rates[0] if with_rates else ''}  states {s}{rates[1] if with_rates else ''}  "
                f"generated {g}  running {r}{seconds if timed else ''}")

    candidates = (line(whole, True, True), line(whole, True, False), line(whole, False, False),
                  line(short, False, False))
    return next((c for c in candidates if len(c) <= width), candidates[-1])


def exploration_counts(p: Progress, width: int = MAX_PROGRESS_WIDTH) -> str:
    """A local run's counts, rate and time in ``width`` columns if they can be: the rate's word
    goes first, then the time (the summary has both), then the frontier and the rate are kept
    short. Depth, distinct and generated stay whole, wider than ``width`` if they must be:
    ``kraftcheck ci`` reads them from the plain lines."""
    head = f"depth {p.depth:,}  distinct {p.distinct:,}  generated {p.generated:,}  frontier "
    rate, seconds = _rate(p.distinct, p.elapsed_s), f"{p.elapsed_s:,.1f}s"
    frontier = f"{p.frontier:,}"
    short_rate = _short_rate(p.distinct, p.elapsed_s)
    candidates = (f"{head}{frontier}  {rate} distinct  {seconds}", f"{head}{frontier}  {rate}  {seconds}",
                  f"{head}{frontier}  {rate}", f"{head}{short_count(p.frontier)}  {short_rate}")
    return next((line for line in candidates if len(line) <= width), candidates[-1])


def progress_line(p: Progress, width: int = MAX_PROGRESS_WIDTH) -> str:
    """One line of progress: compiling (and what), and/or the exploration's counts and rates, the
    counts in ``width`` columns where they can be."""
    if p.engine == "spark" and getattr(p, "waiting", None):  # before the first level (kraftcheck.spark.readiness)
        return f"{p.waiting}  {p.elapsed_s:,.1f}s"
    if p.engine == "spark" and p.compiling is None:
        return spark_progress_line(p, width)
    if p.behaviours is not None:
        return simulation_progress_line(p, width)
    spilled = "" if p.levels_spilled_to is None else f"\nlevels spilled to disk: {p.levels_spilled_to}"
    if p.compiling is None:
        return exploration_counts(p, width) + spilled
    if p.distinct == 0:
        return f"compiling kernels: {p.compiling}  {p.elapsed_s:,.1f}s"
    meanwhile = {"interpreting": "interpreting meanwhile",
                 "waiting": "interpreted until now, waiting for the kernels",
                 "table form": "exploring meanwhile with the table form, compiled first"}.get(p.meanwhile, p.meanwhile)
    counts = f"{meanwhile}: {exploration_counts(p, width - len(meanwhile) - 2)}"
    if len(counts) > width:  # the counts on a line of their own
        counts = f"{meanwhile}:\n{exploration_counts(p, width)}"
    return f"compiling kernels in the background: {p.compiling}\n{counts}{spilled}"


def spark_table(figures: dict) -> Table:
    """The Spark section of the summary, from the report's ``spark`` object."""
    table = Table(title="spark", title_justify="left", show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("partitions", f"{figures['partitions']:,}")
    if not figures["available"]:
        # Text, not markup: a Java error's "[class ...]" is not a style
        table.add_row("figures", Text(f"unavailable ({figures['unavailable_reason']})"))
        return table
    table.add_row("stages, tasks", f"{figures['stages']:,} stages, {figures['tasks']:,} tasks "
                                   f"({figures['seconds']:,.1f} s of executor time)")
    table.add_row("shuffle", f"{byte_size(figures['shuffle_write_bytes'])} written, "
                             f"{byte_size(figures['shuffle_read_bytes'])} read")
    if figures["levels"]:
        top = max(figures["levels"], key=lambda f: f["shuffle_write_bytes"])
        table.add_row("largest level", f"level {top['level']:,}: {byte_size(top['shuffle_write_bytes'])} "
                                       f"shuffled, {top['new_states']:,} new states")
    return table


def violated_what(result: Result) -> str:
    """The verdict's words for a violated run, by the kinds of its violations."""
    kinds = {v.kind for v in result.violations}
    if kinds == {"deadlock"}:
        return "deadlock reached"
    if kinds == {"liveness"}:
        return "liveness property violated"
    if "liveness" in kinds:
        return "invariant and liveness property violated"
    return "invariant violated"


def cut_short(result: Result) -> str:
    """For a run that found violations and then stopped early (a limit, a full disk, --continue
    cut short): that it did, why, and the depth it reached; and an analysis after it that a limit
    stopped (--liveness over --max-memory); else nothing. (An incomplete run without violations
    says so in its verdict.)"""
    if result.status != VIOLATED:
        return ""
    cut = f"; exploration cut short: {result.incomplete_reason}, at depth {result.depth:,}" \
        if result.incomplete_reason else ""
    return cut + (f"; then {result.analysis_stopped}" if result.analysis_stopped else "")



class _Console(Console):
    """rich's console, except that a reader gone from the pipe is an output not written, not the
    end of the process: rich exits 1 there, which says "violated", and the JSON report and the
    verdict's exit code would not follow."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more to this reader
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, (sys.stderr if self.stderr else sys.stdout).fileno())
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


class _ClosedStream:
    """The results console's file when its standard stream was closed before the start (``>&-``),
    which Python gives as None and rich would write to as to nothing: the summary was not written."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "it is closed")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class _DiagnosticsConsole(_Console):
    """The console of progress, notes and errors on standard error: if standard error fails (a
    reader gone, a full device, a closed stream) they are dropped, and the run, its summary on
    standard output, its JSON report and its exit code go on as if they had been said. (A summary
    sent to standard error is on the results console, where a failure is an output not written.)
    Nothing is redirected here: the interpreter's own flush at exit is ``cli.main``'s to quiet."""

    def _check_buffer(self) -> None:
        try:
            super()._check_buffer()
        except (OSError, ValueError):
            self.on_broken_pipe()

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more to a standard error that failed once
        del self._buffer[:]


class Terminal:
    """Owns the rich consoles; every command prints through one of these."""

    def __init__(self, quiet: bool = False, color: Optional[bool] = None, width: Optional[int] = None,
                 results_to_stderr: bool = False) -> None:
        no_color = color is False
        # results_to_stderr keeps stdout clean when it carries the JSON report
        self.out = _Console(stderr=results_to_stderr, no_color=no_color, width=width, highlight=False, soft_wrap=False)
        if results_to_stderr:  # not the command line's forgiving standard error: the summary's loss is known
            self.out.file = raw_standard_error() or _ClosedStream()
        elif sys.stdout is None:
            self.out.file = _ClosedStream()
        self.err = _DiagnosticsConsole(stderr=True, no_color=no_color, width=width, highlight=False)
        self.quiet = quiet
        self._live: Optional[Live] = None
        self._last_plain = 0.0
        self._last: Optional[Progress] = None

    # -- errors and notes
    def error(self, message: str) -> None:
        self.err.print(Text(f"kraftcheck: error: {message}", style="bold red"), soft_wrap=True)

    def hint(self, message: str) -> None:
        """What to do next, not an error: said even under --quiet."""
        self.err.print(Text(f"kraftcheck: {message}", style="bold"), soft_wrap=True)

    def note(self, message: str) -> None:
        if not self.quiet:
            self.err.print(Text(message, style="dim"), soft_wrap=True)

    # -- progress
    def start_progress(self) -> None:
        if self.quiet:
            return
        if self.err.is_terminal:
            self._live = Live(Text("starting..."), console=self.err, refresh_per_second=4, transient=True)
            self._live.start()
        self._last_plain = time.monotonic()

    def progress(self, p: Progress) -> None:
        self._last = p
        if self.quiet:
            return
        if self._live is not None:
            self._live.update(Text(progress_line(p, max(self.err.width, MAX_PROGRESS_WIDTH)), style="cyan",
                                   no_wrap=True, overflow="ellipsis"))
        elif time.monotonic() - self._last_plain >= PLAIN_PROGRESS_EVERY_S:
            self._last_plain = time.monotonic()
            # one "progress: " line per line, each within the width where it can be (CI logs are read too)
            for line in progress_line(p, MAX_PROGRESS_WIDTH - len(PLAIN_PREFIX)).splitlines():
                self.err.print(f"{PLAIN_PREFIX}{line}", soft_wrap=True)

    def stop_progress(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    # -- the summary
    def summary(self, result: Result, trace_files: dict[str, str], not_checked: Sequence[str] = (),
                unwritten: Optional[Mapping[str, str]] = None, errored: bool = False,
                liveness_skipped: bool = False) -> None:
        """The verdict, the statistics, coverage and the counterexamples. ``not_checked``: liveness
        properties the spec declares that the run did not check (``liveness_skipped``: though it
        was asked to, with --liveness, whose analysis did not run); ``unwritten``: check -> the
        trace file that could not be written and why; ``errored``: an analysis after the exploration failed, so
        the run gives no verdict (the exploration's is shown, marked so)."""
        if self.quiet:
            return
        if result.simulation is not None:
            self.simulation_summary(result, trace_files, not_checked, unwritten)
            return
        verdict = {
            HOLDS: ("[bold green]all invariants hold over the complete state space[/]"),
            VIOLATED: f"[bold red]{violated_what(result)}[/]",
            INCOMPLETE: (f"[bold yellow]exploration incomplete[/]: {result.incomplete_reason}, at depth "
                         f"{result.depth:,}" if result.incomplete_reason else
                         f"[bold yellow]incomplete[/]: every state explored, then {result.analysis_stopped}"),
        }[result.status]
        model = result.model
        if result.fingerprints and result.status == HOLDS:
            verdict += " [bold green](up to hash collisions)[/]"
        no_verdict = "; then the run stopped with an error (below): no verdict" if errored else ""
        self.out.print(Text.from_markup(f"{model.spec.title()}: {verdict}") + Text(cut_short(result) + no_verdict))
        stats = Table(show_header=False, box=None, pad_edge=False)
        stats.add_column(style="bold")
        stats.add_column(justify="right")
        stats.add_row("initial states", f"{result.initial_states:,}")
        stats.add_row("states generated", f"{result.states_generated:,}")
        stats.add_row("distinct states", f"{result.distinct_states:,}" + (" (orbits under --symmetry)"
                                                                          if result.symmetry else ""))
        stats.add_row("depth", f"{result.depth:,}")
        stats.add_row("exploration", f"{result.elapsed_s:,.2f} s ({result.states_per_s:,.0f} distinct states/s)")
        stats.add_row("compilation", compile_summary(result))
        if result.first_tier_python_because and result.interpreted_states:
            # the user's spec is in the slow tier: say why, so that they can keep it out
            stats.add_row("first tier", "Python, not bytecode: " + result.first_tier_python_because)
        if result.resumed:
            stats.add_row("resumed", f"from level {result.resumed_from_level:,}" if result.resumed_from_level else
                          "from the start: the checkpoint's run stopped before its first level was on disk")
        if result.levels_spilled is not None:
            spill = result.levels_spilled
            stats.add_row("levels", f"spilled to disk at level {spill['at_level']:,}, {spill['at_distinct']:,} states "
                                    f"({byte_size(spill['levels_bytes'])} > {byte_size(spill['threshold_bytes'])})")
            stats.add_row("spilled to", f"{spill['directory']}, removed at the end")
        if result.collision_probability is not None:
            p = result.collision_probability
            stats.add_row("collision probability",
                          f"{p['optimistic']:.1e} optimistic, {p['from_fingerprints']:.1e} from the fingerprints")
        elif result.fingerprints and result.simulation is None and result.spark is None:
            stats.add_row("collision probability", "not estimated: the run stopped while it rebuilt its visited "
                                                   "set from the checkpoint")
        self.out.print(stats)
        if result.spark is not None:
            self.out.print(spark_table(result.spark))
        self.out.print(Text(f"checked: {', '.join(model.check_names) or '(nothing)'}"))
        self._not_checked(not_checked, "its --liveness analysis did not run or finish" if liveness_skipped
                          else "add --liveness to check them")

        cov = Table(title="coverage", title_justify="left", show_edge=False)
        cov.add_column("action")
        cov.add_column("fired", justify="right")
        cov.add_column("new states", justify="right")
        for name, c in result.coverage().items():
            style = "yellow" if c["fired"] == 0 else None
            cov.add_row(name, f"{c['fired']:,}", f"{c['new']:,}", style=style)
        self.out.print(cov)
        never = result.never_fired()
        if never and result.exhaustive:  # after an early stop, unfired actions prove nothing
            self.out.print(f"[yellow]warning[/]: never enabled in this state space (a model bug, or bounds under which these actions cannot happen): {', '.join(never)}")

        self._violations(result, trace_files, "shortest counterexample", unwritten or {})

    def _not_checked(self, names: Sequence[str], how: str) -> None:
        if names:
            self.out.print(Text(f"not checked: liveness properties {', '.join(names)} (declared by the spec; "
                                f"{how})", style="yellow"))

    def _violations(self, result: Result, trace_files: dict[str, str], what_trace: str,
                    unwritten: Mapping[str, str]) -> None:
        model = result.model
        for v in result.violations:
            where = trace_files.get(v.check)
            written = f", written to {where}" if where else \
                f", [red]not written[/] to {unwritten[v.check]}" if v.check in unwritten else ""
            stutters = v.cycle_start is not None and v.cycle_start == len(v.steps) - 1
            if v.kind == "liveness":
                self.out.print(f"[red]violated[/] liveness [bold]{v.check}[/]: lasso of "
                               f"{lasso_length(v.depth, v.cycle_start, stutters)}{written}")
            else:
                what = "[red]deadlock[/]: no successor but itself" if v.kind == "deadlock" else \
                    f"[red]violated[/] {v.kind} [bold]{v.check}[/]"
                self.out.print(f"{what}: {what_trace} has {v.depth} states{written}")
            for i, step in enumerate(v.steps):
                if v.cycle_start is not None and i == v.cycle_start + 1:
                    self.out.print(f"       then forever, from {v.cycle_start + 1}:")
                if v.cycle_start is not None and i == len(v.steps) - 1 and not stutters:
                    # not numbered: it leads to a state listed already
                    self.out.print(f"       closing step: {model.labels[step.label]}, back to {v.cycle_start + 1}")
                    continue
                action = "initial state" if step.label is None else str(model.labels[step.label])
                self.out.print(f"  {i + 1:>3}. {action}")
            if stutters:
                self.out.print("       (stutters: no fair action changes this state)")
            if v.stricter_variant is not None:
                self.out.print(Text(f"  {v.stricter_variant['note']}"))

    def simulation_summary(self, result: Result, trace_files: dict[str, str], not_checked: Sequence[str] = (),
                           unwritten: Optional[Mapping[str, str]] = None) -> None:
        """The summary of a --simulate run: its verdict (never exhaustive), TLC-like statistics,
        the actions taken, and the violations' traces."""
        sim = result.simulation
        model = result.model
        if result.violations:
            verdict = "[bold red]deadlock reached[/]" if all(v.kind == "deadlock" for v in result.violations) \
                else "[bold red]invariant violated[/]"
        else:
            verdict = "[bold yellow]no violation found[/] (a simulation is not exhaustive)"
        self.out.print(f"{model.spec.title()}: {verdict}")
        stats = Table(show_header=False, box=None, pad_edge=False)
        stats.add_column(style="bold")
        stats.add_column(justify="right")
        stats.add_row("seed", f"{sim['seed']}, strategy {sim['strategy']}")
        stats.add_row("behaviours", f"{sim['behaviours']:,} ({_rate(sim['behaviours'], result.elapsed_s)})")
        stats.add_row("states", f"{sim['states']:,} in behaviours ({_rate(sim['states'], result.elapsed_s)}), "
                                f"{result.states_generated:,} generated and checked")
        length = sim["behaviour_length"]
        stats.add_row("behaviour length", f"{length['min']:,} to {length['max']:,} states, mean {length['mean']:,}; "
                                          f"at most {sim['depth']:,} ({sim['depth_source']})")
        ends = ", ".join(f"{n:,} {why}" for why, n in sim["ends"].items() if n)
        stats.add_row("behaviours ended by", ends or "-")
        stats.add_row("simulation", f"{result.elapsed_s:,.2f} s")
        stats.add_row("compilation", f"{result.compile_s:,.2f} s")
        if result.incomplete_reason and not result.incomplete_reason.startswith("simulation:"):
            stats.add_row("stopped", result.incomplete_reason)
        self.out.print(stats)
        self.out.print(Text(f"checked: {', '.join(model.check_names) or '(nothing)'}"))
        self._not_checked(not_checked, "--liveness needs the exhaustive search")
        cov = Table(title="actions taken", title_justify="left", show_edge=False)
        cov.add_column("action")
        cov.add_column("steps", justify="right")
        for name, n in sim["actions_taken"].items():
            cov.add_row(name, f"{n:,}", style="yellow" if n == 0 else None)
        self.out.print(cov)
        self._violations(result, trace_files, "counterexample (a random behaviour, loops cut out)", unwritten or {})
