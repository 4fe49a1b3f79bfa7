"""Run the manifest's checks as ``kraftcheck check --json`` processes, several at a time.

A process per check keeps runs apart (a crash or a runaway check stops only itself), makes the
command that reproduces a failure the very command that was run, and lets the time budget be
enforced from outside: ``--time-limit`` stops exploration cleanly, and a check that is still
running ``KILL_GRACE_S`` later (compiling, or stuck) is stopped (``_stop``), as is every check
running when the runner is interrupted. An interrupted runner leaves each run directory complete or
gone (``Interrupted`` says which checks ran, which it stopped and which never started).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from kraftcheck.checker.dirlock import DirectoryLock, lock_directory
from kraftcheck.checker.disk_full import unwritten_reason
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.stop import deferred, stop_honoured, stop_requested
from kraftcheck.ci.jobs import check_jobs
from kraftcheck.ci.manifest import Check
from kraftcheck.request import default_max_memory_gib
from kraftcheck.specs import REGISTRY

KILL_GRACE_S = 300.0  # beyond the exploration budget: kernel compilation, trace writing
STOP_GRACE_S = 10.0  # a check asked to stop (SIGTERM) ends its run within this, else it is killed
POLL_S = 0.2
MARKER = "ci-check.json"  # marks a directory this runner made, so it may replace it
# a counts line, also one that a first tier's label opens while the kernels compile in the background
PROGRESS_LINE = re.compile(r"progress: (?:[a-z ,]+: )?depth ([\d,]+)\s+distinct ([\d,]+)\s+generated ([\d,]+)")

Event = Callable[[dict], None]


@dataclass
class Outcome:
    """What one check's process left: its report (None if it wrote none) and how it ended."""

    check: Check
    command: list[str]
    reproduce: str
    run_dir: Path
    exit_code: Optional[int] = None
    report: Optional[dict] = None
    wall_s: float = 0.0
    killed: bool = False
    output: str = ""

    @property
    def error_line(self) -> str:
        """The check's own error message (its last ``kraftcheck: error:`` line), or its last line."""
        lines = [ln for ln in self.output.splitlines() if ln.strip()]
        errors = [ln.split("error: ", 1)[1] for ln in lines if "kraftcheck: error:" in ln]
        return errors[-1] if errors else (lines[-1] if lines else "no output")

    @property
    def stopped_unreported(self) -> Optional[str]:
        """Why a check gave no verdict, if it never started (its run directory refused: a full disk)
        or stopped with its report unwritten (exit 3), and was not killed; else None."""
        if self.report is not None or self.exit_code not in (None, 3) or self.killed:
            return None
        return self.error_line if self.exit_code is None else f"exit 3 without a report: {self.error_line}"


def _imports_module(spec: str) -> bool:
    """``module:Class`` (not a registered name, not a file): found through PYTHONPATH."""
    where, sep, _ = spec.rpartition(":")
    return bool(sep) and spec not in REGISTRY and not where.endswith(".py") and "/" not in where


def reproduce_command(check: Check, root: Path, run_dir: Path) -> str:
    """What a developer types to rerun ``check`` alone, from the directory ``kraftcheck ci`` ran in."""
    words = ["kraftcheck", "check", *check.request.replace(trace_dir=_short(run_dir)).command_arguments()]
    text = shlex.join(words)
    if _imports_module(check.spec):
        text = f"PYTHONPATH={shlex.quote(_short(root))} {text}"
    return text


def _short(path: Path) -> str:
    """``path`` relative to the current directory when inside it: what a person would type."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(path)


def prepare_dir(run_dir: Path) -> None:
    """An empty directory for one check; replaces only a directory an earlier ci run made."""
    if run_dir.exists():
        if not (run_dir / MARKER).exists():
            raise FileExistsError(f"{run_dir} exists and was not made by kraftcheck ci; choose another --out")
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)


class _Running:
    def __init__(self, outcome: Outcome, process: subprocess.Popen, log, started: float) -> None:
        self.outcome, self.process, self.log, self.started = outcome, process, log, started
        self.read_upto = 0


def refuse_before_running(checks: list[Check], out: Path, jobs: int) -> None:
    """What ``run_checks`` would refuse, refused before anything runs (or is written), not halfway through."""
    check_jobs(jobs, len(checks))
    for check in checks:
        if (out / check.name).exists() and not (out / check.name / MARKER).exists():
            raise FileExistsError(f"{out / check.name} exists and was not made by kraftcheck ci; choose another --out")


def hold_out(out: Path, purpose: str) -> DirectoryLock:
    """Hold ``out`` (a link's target, made if need be) for one gate or sweep at a time: another's
    would empty this one's run directories as its checks write them. ``DirectoryBusy`` (exit 2)
    names the one that holds it."""
    try:
        target = out.resolve()
    except RuntimeError:  # pathlib's word for a loop of symbolic links, which no check could write into
        raise UsageError(f"--out {out} is a loop of symbolic links; give a directory") from None
    return lock_directory(target, purpose)


def release_out(hold: DirectoryLock, out: Path, remove_if_empty: bool) -> None:
    """Give ``out`` up and, if ``remove_if_empty``, remove it once nothing is left in it. Only rmdir
    says so: another gate or sweep may take ``out`` the moment this one gives it up, and its lock
    file, come between a look and the rmdir, made the rmdir fail after this one's report."""
    hold.release()
    if remove_if_empty:
        try:
            out.rmdir()
        except OSError:  # not empty (runs kept, another's hold), or gone: it stays as it is
            pass


def run_checks(checks: list[Check], root: Path, out: Path, jobs: int, on_event: Event) -> list[Outcome]:
    """Run every check, at most ``jobs`` at once; returns the outcomes in manifest order.

    ``on_event`` receives ``started``, ``progress`` and ``finished`` events as they happen.
    Stopped (a signal), it stops the checks still running and raises ``Interrupted``; a stop that
    comes once every check has ended, none by it, cuts nothing short: the outcomes are returned and
    the request left to the caller (``stop_requested()``), which gives its report first."""
    refuse_before_running(checks, out, jobs)
    jobs = max(1, min(jobs, len(checks)))  # each check's threads and memory are its share of those that run
    threads = max(1, (os.cpu_count() or 1) // jobs)
    # each check's memory when none is set: the command line's default shared by the checks running at once
    memory_share = default_max_memory_gib() / jobs
    waiting = list(checks)
    running: list[_Running] = []
    done: dict[str, Outcome] = {}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    # a signal only asks to stop, seen between two steps here: never between making a check's
    # directory and starting its process, nor while a finished check's report is read
    with deferred():
        try:
            while (waiting or running) and not stop_requested():
                while waiting and len(running) < jobs and not stop_requested():
                    check = waiting.pop(0)
                    try:
                        running.append(_start(check, root, out, threads, memory_share, env, on_event))
                    except _NotStarted as e:  # a full disk, no process to fork: this check cannot run, the others may
                        done[check.name] = _not_started(check, root, out, e.reason, on_event)
                time.sleep(POLL_S)
                for job in list(running):
                    _forward_progress(job, on_event)
                    if job.process.poll() is None and \
                            time.monotonic() - job.started > job.outcome.check.time_budget + KILL_GRACE_S:
                        _stop([job])
                        job.outcome.killed = True
                    if job.process.poll() is not None:
                        running.remove(job)
                        done[job.outcome.check.name] = _finish(job, on_event)
        finally:
            _stop(running)  # interrupted: leave no process behind
            for job in running:
                job.log.close()
    # a check's end is seen a poll after it: a stop that came in between, the last check ended and
    # none by a signal (130, or killed by one, not for its budget), cut no check short
    cut_short = waiting or running or any(o.command and not o.killed and (o.exit_code == 130 or o.exit_code < 0)
                                          for o in done.values())
    if stop_requested() and cut_short:
        stop_honoured()
        interrupted = _interrupted(checks, done, running, out)
        for job in running:  # a reader of the events learns how every check that started ended
            _ended_at_stop(job, job.outcome.check.name not in interrupted.ran, on_event)
        raise interrupted
    return [done[c.name] for c in checks]


class Interrupted(KeyboardInterrupt):
    """``run_checks`` stopped by a signal, every check's process ended: which checks ran to their
    end, which it stopped (keeping the directory of one that wrote its report, removing the
    directory of one that wrote none), which never started (and of those, the ones whose run
    directory is an earlier run's)."""

    def __init__(self, ran: list[str], stopped_kept: list[str], stopped_removed: list[str], not_run: list[str],
                 earlier: list[Path]) -> None:
        super().__init__()
        self.ran, self.stopped_kept, self.stopped_removed = ran, stopped_kept, stopped_removed
        self.not_run, self.earlier = not_run, earlier

    def describe(self) -> str:
        """One line: 'interrupted; ran to their end: ...; ...; did not run: ...'."""
        parts = []
        for names, one, many in (
                (self.ran, "ran to its end", "ran to their end"),
                (self.stopped_kept, "stopped (its run directory keeps its report of the run so far)",
                 "stopped (their run directories keep their reports of the run so far)"),
                (self.stopped_removed, "stopped before it wrote a report (its run directory removed)",
                 "stopped before they wrote a report (their run directories removed)"),
                (self.not_run, "did not run", "did not run")):
            if names:
                parts.append(f"{one if len(names) == 1 else many}: {_some(names)}")
        if self.earlier:
            paths = [str(p) for p in self.earlier]
            parts[-1] += f" ({_some(paths)} {'is an earlier run' if len(paths) == 1 else 'are earlier runs'}'s)"
        return "; ".join(["interrupted", *parts])


def _some(names: list[str], shown: int = 8) -> str:
    """``names`` joined, the first ``shown`` of a long list and how many more."""
    if len(names) <= shown + 1:
        return ", ".join(names)
    return ", ".join(names[:shown]) + f" and {len(names) - shown} more"


def _interrupted(checks: list[Check], done: dict[str, "Outcome"], running: list["_Running"],
                 out: Path) -> Interrupted:
    """What an interrupted run left, once every process ended. A check stopped before it wrote its
    report (its directory held only the marker and a log saying 'interrupted') leaves nothing; one
    that wrote it keeps it, as ``kraftcheck check`` stopped alone does. A check ran to its end if
    it was seen to end before the signal (a kill past its budget included), or ended in the moment
    before it was asked to stop, otherwise than interrupted (130) or killed; one that ended by the
    signal too (Ctrl-C reaches the whole process group) counts as stopped."""
    ran, kept, removed = [], [], []
    stopped_at = {job.outcome.check.name: job for job in running}
    for check in checks:
        if check.name in done:  # seen to end (a budget's kill included), or could not start
            outcome = done[check.name]
            if not outcome.command:
                continue
            if outcome.exit_code != 130:
                ran.append(check.name)
                continue
        elif check.name in stopped_at:
            outcome, code = stopped_at[check.name].outcome, stopped_at[check.name].process.returncode
            if code is not None and code >= 0 and code != 130:
                ran.append(check.name)
                continue
        else:
            continue
        if (outcome.run_dir / "report.json").exists():
            kept.append(check.name)
        else:
            removed.append(check.name)
            shutil.rmtree(outcome.run_dir, ignore_errors=True)
    accounted = set(ran + kept + removed)
    not_run = [c.name for c in checks if c.name not in accounted]
    earlier = [out / name for name in not_run if (out / name / MARKER).exists() and name not in done]
    return Interrupted(ran, kept, removed, not_run, earlier)


def _ended_at_stop(job: "_Running", stopped: bool, on_event: Event) -> None:
    """The ``finished`` event of a check that was running when the runner was stopped: ``stopped``
    if the stop ended it, its result that of the report it left (the run so far), if any."""
    report = job.outcome.run_dir / "report.json"
    try:
        result = json.loads(report.read_text()).get("result") if report.exists() else None
    except (OSError, ValueError, AttributeError):  # a report cut short: no result to name
        result = None
    _finished(on_event, job.outcome.check.name, job.process.returncode, result, False, stopped,
              time.monotonic() - job.started)


def _stop(jobs: list["_Running"]) -> None:
    """End the checks of ``jobs`` as Ctrl-C ends a run (SIGTERM: each stops its exploration and its
    background compile, or leaves the compile registered to finish, as any run that ends first
    does); one still running STOP_GRACE_S later is killed, with the compiles it started: they run
    in sessions of their own, which its end does not reach, and a check killed outright left them
    compiling, unregistered (``kraftcheck cache status`` did not see them), for up to 20 minutes."""
    for job in jobs:
        if job.process.poll() is None:
            job.process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for job in jobs:
        try:
            job.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            compiles = _sessions_started_by(job.process.pid)
            job.process.kill()
            job.process.wait()
            for pid in compiles:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:  # ended meanwhile
                    pass


def _sessions_started_by(pid: int) -> list[int]:
    """The children of process ``pid`` that lead sessions of their own (its background compiles)."""
    import psutil
    try:
        children = psutil.Process(pid).children()
    except psutil.Error:
        return []
    leaders = []
    for child in children:
        try:
            if os.getsid(child.pid) == child.pid:
                leaders.append(child.pid)
        except OSError:
            pass
    return leaders


class _NotStarted(Exception):
    """A check that cannot run: ``reason`` says why (its run directory, its process)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _start(check: Check, root: Path, out: Path, threads: int, memory_share: float, env: dict,
           on_event: Event) -> _Running:
    run_dir = (out / check.name).resolve()
    request = check.request.replace(json_path=str(run_dir / "report.json"), trace_dir=str(run_dir), threads=threads,
                                    max_memory_gib=check.request.max_memory_gib or round(memory_share, 2))
    command = [sys.executable, "-m", "kraftcheck", "check", *request.command_arguments(), "--no-color"]
    outcome = Outcome(check, command, reproduce_command(check, root, run_dir), run_dir)
    made = False
    try:
        prepare_dir(run_dir)
        made = True
        (run_dir / MARKER).write_text(json.dumps({"check": check.name, "reproduce": outcome.reproduce}, indent=2)
                                      + "\n")
        log = open(run_dir / "output.log", "w+")
    except OSError as e:
        said = f"its run directory {run_dir} could not be written: {unwritten_reason(e)}"
        if made:  # a directory holding a marker and no log is no run's: it goes
            shutil.rmtree(run_dir, ignore_errors=True)
            said += " (what was made of it is removed)" if not run_dir.exists() else \
                " (what was made of it could not be removed either: remove it)"
        raise _NotStarted(said) from None
    on_event({"event": "started", "check": check.name, "command": outcome.reproduce})
    try:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    except OSError as e:  # the system would not start it (no memory to fork, too many processes)
        log.close()
        raise _NotStarted(f"its process could not be started: {e.strerror or e}") from None
    return _Running(outcome, process, log, time.monotonic())


def _not_started(check: Check, root: Path, out: Path, reason: str, on_event: Event) -> Outcome:
    """The outcome of a check that could not run (``reason``): no process, no report, and the
    reason as the check's own error line (exit_code None says it never ran)."""
    run_dir = (out / check.name).resolve()
    outcome = Outcome(check, [], reproduce_command(check, root, run_dir), run_dir,
                      output=f"kraftcheck: error: not started: {reason}")
    _finished(on_event, check.name, None, None, False, False, 0.0)
    return outcome


def _forward_progress(job: _Running, on_event: Event) -> None:
    """Progress lines the check printed since the last look (a plain line every 10 s)."""
    job.log.flush()
    with open(job.log.name) as f:
        f.seek(job.read_upto)
        text = f.read()
    complete = text[:text.rfind("\n") + 1]
    job.read_upto += len(complete.encode())
    for match in PROGRESS_LINE.finditer(complete):
        depth, distinct, generated = (int(g.replace(",", "")) for g in match.groups())
        on_event({"event": "progress", "check": job.outcome.check.name, "depth": depth, "distinct": distinct,
                  "generated": generated, "wall_s": round(time.monotonic() - job.started, 1)})


def _finish(job: _Running, on_event: Event) -> Outcome:
    outcome = job.outcome
    outcome.exit_code = job.process.returncode
    outcome.wall_s = time.monotonic() - job.started
    job.log.close()
    outcome.output = Path(job.log.name).read_text(errors="replace")
    report = outcome.run_dir / "report.json"
    if report.exists() and not outcome.killed:
        outcome.report = json.loads(report.read_text())
    _finished(on_event, outcome.check.name, outcome.exit_code, outcome.report["result"] if outcome.report else None,
              outcome.killed, False, outcome.wall_s)
    return outcome


def _finished(on_event: Event, check: str, exit_code: Optional[int], result: Optional[str], killed: bool,
              stopped: bool, wall_s: float) -> None:
    """A check's ``finished`` event: how it ended (exit code None: it never started)."""
    on_event({"event": "finished", "check": check, "exit_code": exit_code, "result": result, "killed": killed,
              "stopped": stopped, "wall_s": round(wall_s, 2)})


def how_it_ended(event: dict) -> str:
    """A ``finished`` event in a word or two, for the line a gate or sweep prints per check: killed,
    stopped, its result, not started (no exit code: its run directory refused), or its exit code."""
    if event["killed"]:
        return "killed"
    if event["stopped"]:
        return "stopped"
    return event["result"] or ("not started" if event["exit_code"] is None else f"exit {event['exit_code']}")
