"""``kraftcheck ci``: run a manifest's checks and gate on their expected verdicts.

Exit codes: 0 every expectation holds; 1 an unexpected violation, a missing expected violation, a
count mismatch or a crashed check; 2 bad input (manifest, baseline, a check's options); 3 a budget
ran out or a run stopped before its end, a full disk say, or the ``--junit`` or ``--progress-json``
file could not be written (and nothing failed).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Optional

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kraftcheck.checker.dirlock import LOCK_FILE
from kraftcheck.checker.disk_full import UnwrittenFile, write_kept
from kraftcheck.checker.errors import KraftcheckError
from kraftcheck.checker.files import atomic_write
from kraftcheck.checker.stop import deferred, stop_honoured
from kraftcheck.ci import baseline as baselines
from kraftcheck.ci import manifest as manifests
from kraftcheck.ci.jobs import JOBS_PER_CPU
from kraftcheck.ci.github import count_cell, seconds_cell
from kraftcheck.ci.judge import (BAD_INPUT, BUDGET, FAIL, INCOMPLETE, PASS, STOPPED, Judgement, counts_of, judge,
                                 step_lines)
from kraftcheck.ci.runner import (MARKER, Interrupted, hold_out, how_it_ended, refuse_before_running, release_out,
                                  run_checks)
from kraftcheck.output_paths import (check_output_dir, check_output_file, check_replaceable, refuse_inside,
                                     refuse_replacing_input, refuse_same_file, refuse_two_on_stdout, to_stdout)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_BUDGET = 0, 1, 2, 3
LOG_WIDTH = 140
STYLE = {PASS: "green", FAIL: "bold red", BUDGET: "yellow", STOPPED: "yellow", BAD_INPUT: "bold red"}


def gate_exit_code(judgements: list[Judgement]) -> int:
    statuses = {j.status for j in judgements}
    if BAD_INPUT in statuses:
        return EXIT_BAD_INPUT
    if FAIL in statuses:
        return EXIT_FAILED
    return EXIT_BUDGET if statuses & set(INCOMPLETE) else EXIT_OK


@click.command(context_settings={"show_default": True})
@click.argument("manifest_path", metavar="[MANIFEST]", required=False)
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=os.cpu_count() or 1,
              help=f"Checks run at once, each in its own process (at most {JOBS_PER_CPU} per CPU).")
@click.option("--only", "only", multiple=True, metavar="NAME", help="Run only this check (repeatable).")
@click.option("--out", "out_dir", default="kraftcheck-ci", metavar="DIR",
              help="Run directory: each failing check leaves DIR/CHECK/ (traces, report, log, command).")
@click.option("--junit", "junit_path", metavar="FILE",
              help="Write a JUnit XML report ('-': standard output); missing directories are created.")
@click.option("--progress-json", "progress_path", metavar="FILE",
              help="Write an NDJSON stream: one object per check started, progress line and check finished "
                   "('-': standard output); missing directories are created.")
@click.option("--baseline", "baseline_path", metavar="FILE",
              help="Accepted findings.  [default: the manifest's baseline, kraftcheck-baseline.json beside it]")
@click.option("--update-baseline", is_flag=True,
              help="Rewrite the baseline to accept every unexpected violation found now (prints the changes).")
@click.option("--update-counts", is_flag=True,
              help="Rewrite the expected counts in the manifest from exhaustive runs (prints the changes).")
@click.option("--record", "update_counts_alias", is_flag=True, hidden=True)  # its name before --update-counts
@click.option("--no-color", is_flag=True, help="Plain text output.")
def ci(manifest_path: Optional[str], jobs: int, only: tuple[str, ...], out_dir: str, junit_path: Optional[str],
       progress_path: Optional[str], baseline_path: Optional[str], update_baseline: bool, update_counts: bool,
       update_counts_alias: bool, no_color: bool) -> None:
    """Run every check of a manifest (kraftcheck.toml, or [tool.kraftcheck] in pyproject.toml)
    and exit 0 only if every expectation holds.

    Exit codes: 0 every expectation holds; 1 an unexpected violation, a missing expected
    violation or a count mismatch; 2 bad input; 3 a time budget ran out or a run stopped before
    its end (a full disk), or the --junit or --progress-json file could not be written (and
    nothing failed).
    """
    # markup off: action names and messages may hold brackets, which are not rich styles
    console = Console(no_color=no_color, highlight=False, soft_wrap=True, markup=False)
    if not console.is_terminal:
        console.width = max(console.width, LOG_WIDTH)  # CI logs: a table that does not wrap
    err = Console(stderr=True, no_color=no_color, highlight=False, soft_wrap=True, markup=False)
    if to_stdout(junit_path) or to_stdout(progress_path):
        console = err  # standard output carries the report
    try:
        code = run_gate(console, manifest_path, jobs, only, Path(out_dir), junit_path, progress_path,
                        baseline_path, update_baseline, update_counts or update_counts_alias)
    except (KraftcheckError, FileExistsError) as e:
        err.print(Text(f"kraftcheck: error: {e}", style="bold red"))
        code = EXIT_BAD_INPUT
    except KeyboardInterrupt as e:
        said = e.describe() if isinstance(e, Interrupted) else "interrupted"  # which checks ran, which did not
        err.print(Text(f"kraftcheck: error: {said}", style="bold red"))
        code = 130
    sys.exit(code)


def run_gate(console: Console, manifest_path: Optional[str], jobs: int, only: tuple[str, ...], out: Path,
             junit_path: Optional[str], progress_path: Optional[str], baseline_path: Optional[str],
             update_baseline: bool, update_counts: bool) -> int:
    manifest = manifests.load(manifests.find_manifest(manifest_path))
    checks = manifest.checks
    if only:
        unknown = sorted(set(only) - {c.name for c in checks})
        if unknown:
            raise manifests.ManifestError(f"no check {unknown[0]!r} in {manifest.path}; its checks: "
                                          f"{', '.join(c.name for c in checks)}")
        checks = [c for c in checks if c.name in only]
    baseline_file = Path(baseline_path) if baseline_path else manifest.baseline
    accepted = baselines.load(baseline_file)
    check_outputs(out, junit_path, progress_path, manifest.path if update_counts else None,
                  baseline_file if update_baseline else None)
    if update_counts:  # a check it could not write the counts of: refused now, not after every check ran
        from kraftcheck.ci.expected_counts import refuse_unwritable_layout
        refuse_unwritable_layout(manifest, [c.name for c in checks])
    run_dirs = {f"check {c.name}'s run directory": out / c.name for c in checks}
    for option, path in (("--junit", junit_path), ("--progress-json", progress_path)):
        refuse_replacing_input(path, option, manifest.path, "manifest")
        refuse_replacing_input(path, option, baseline_file, "baseline")
        refuse_inside(path, option, run_dirs, "kraftcheck ci empties before the check runs and removes once it passes")
    refuse_before_running(checks, out, jobs)  # before the progress file is made

    removable = _removable_once_empty(out)
    hold = hold_out(out, "kraftcheck ci (its --out)")
    try:
        from kraftcheck.ci.progress import ProgressStream
        stream = ProgressStream(progress_path)
        console.print(f"kraftcheck ci: {len(checks)} checks from {manifest.path}, {min(jobs, len(checks))} at a time")
        finished = []

        def on_event(event: dict) -> None:
            stream(event)
            if event["event"] == "finished":  # a line per check, so a long CI log shows it moving
                finished.append(event["check"])
                console.print(f"[{len(finished)}/{len(checks)}] {event['check']}: {how_it_ended(event)} "
                              f"({event['wall_s']:.1f} s)")

        # once the checks ran, a signal waits for the gate's report: stopped halfway it would leave some
        # passing checks' directories and not others, and no report of a gate whose every check ran
        with deferred() as held:
            try:
                outcomes = run_checks(checks, manifest.root.resolve(), out, jobs, on_event)
            finally:
                stream.close()
            judgements = [judge(o, accepted) for o in outcomes]

            if update_baseline:
                accepted = _update_baseline(console, baseline_file, accepted, judgements, {c.name for c in checks},
                                            {c.name for c in manifest.checks})
                judgements = [judge(o, accepted) for o in outcomes]
            if update_counts:
                from kraftcheck.ci.expected_counts import update_counts as rewrite_counts
                counts = {j.name: counts_of(j.outcome.report) for j in judgements if counts_of(j.outcome.report)}
                changes = rewrite_counts(manifest, counts)
                for line in changes:
                    console.print(f"updated in {manifest.path}: {line}")
                if not changes:
                    console.print(f"--update-counts: the counts in {manifest.path} are already those of this run")
                by_name = {c.name: c for c in manifests.load(manifest.path).checks}
                for o in outcomes:
                    o.check = by_name[o.check.name]
                judgements = [judge(o, accepted) for o in outcomes]

            manifest_checks = {c.name for c in manifest.checks}
            for gone in sorted({a.check for a in accepted} - manifest_checks):
                console.print(f"note: {baseline_file} accepts findings of check {gone}, which {manifest.path} no "
                              "longer has; prune it with --update-baseline")
            code = gate_exit_code(judgements)
            unwritten = [stream.unwritten] if stream.unwritten else []
            _keep_failing_runs(judgements, unwritten)
            if junit_path:
                from kraftcheck.ci.junit import write_junit
                write_kept("the JUnit report", junit_path, lambda: write_junit(Path(junit_path), judgements), unwritten)
            code = EXIT_BUDGET if unwritten and code == EXIT_OK else code  # a gate without its report cannot pass
            from kraftcheck.ci.github import report_to_github, under_github_actions
            if under_github_actions():
                # workflow commands verbatim, never styled; on standard error when standard output carries
                # the JUnit report or the progress stream (the runner reads both), which they would corrupt
                on_stderr = to_stdout(junit_path) or to_stdout(progress_path)
                unwritten += report_to_github(judgements, code, lambda line: click.echo(line, err=on_stderr))
                code = EXIT_BUDGET if unwritten and code == EXIT_OK else code
            _print_summary(console, judgements, code, out)
            for u in unwritten:
                click.echo(f"kraftcheck: error: {u}", err=True)
        if held.signalled:
            stop_honoured()
            click.echo("kraftcheck: note: stopped after every check had run: the gate gave its report first", err=True)
    finally:
        release_out(hold, out, removable)
    return code


def check_outputs(out: Path, junit_path: Optional[str], progress_path: Optional[str], manifest: Optional[Path],
                  baseline: Optional[Path]) -> None:
    """Every file the gate will write can be written: refused now, not after every check ran.
    ``manifest``/``baseline``: given when --update-counts/--update-baseline will rewrite them."""
    check_output_dir(out, "--out")
    check_output_file(junit_path, "--junit")
    check_output_file(progress_path, "--progress-json")
    refuse_two_on_stdout({"--junit": junit_path, "--progress-json": progress_path})
    refuse_same_file({"--junit": junit_path, "--progress-json": progress_path})
    if manifest is not None:
        check_replaceable(manifest, "--update-counts")
    if baseline is not None:
        check_replaceable(baseline, "--update-baseline")


def _update_baseline(console: Console, path: Path, accepted: list[baselines.Finding], judgements: list[Judgement],
                     ran: set[str], known: set[str]) -> list[baselines.Finding]:
    """Accept every unexpected violation found now; keep entries of checks that did not run
    (--only), drop those of checks the manifest no longer has."""
    budget_cut = {j.name for j in judgements if j.status in (*INCOMPLETE, BAD_INPUT)}
    keep = [a for a in accepted if (a.check not in ran or a.check in budget_cut) and a.check in known]
    now = keep + [f for j in judgements if j.name not in budget_cut for f in j.new + j.accepted]
    before, after = {a.key for a in accepted}, {f.key for f in now}
    for f in now:
        if f.key not in before:
            console.print(f"baseline {path}: accepted {f.check} / {f.invariant} ({f.depth} states, {f.signature[:19]})")
    for a in accepted:
        if a.key not in after:
            console.print(f"baseline {path}: removed {a.check} / {a.invariant} ({a.signature[:19]}), no longer found")
    if before != after or not path.exists():
        baselines.save(path, now)
    else:
        console.print(f"baseline {path}: unchanged")
    return now


def _removable_once_empty(out: Path) -> bool:
    """Whether the gate may remove ``out`` once no run is left in it: a directory it makes, or one
    that held only earlier gates' runs; never a directory the user made (empty, say, for the
    gate to fill), nor a symbolic link."""
    if out.is_symlink():
        return False
    if not out.exists():
        return True
    entries = [e for e in out.iterdir() if e.name != LOCK_FILE] if out.is_dir() else []  # a killed gate's lock file
    return bool(entries) and all((e / MARKER).exists() for e in entries)


def _keep_failing_runs(judgements: list[Judgement], unwritten: list[UnwrittenFile]) -> None:
    """A failing check keeps its directory, with its verdict and the command to reproduce it;
    a passing one leaves nothing behind. A file the disk refuses is noted in ``unwritten``: the
    verdicts and the summary are still given."""
    for j in judgements:
        o = j.outcome
        if j.status == PASS:
            shutil.rmtree(o.run_dir, ignore_errors=True)
            continue
        if not o.run_dir.is_dir():  # never started: its directory could not be written
            continue
        verdict = {"check": j.name, "verdict": j.status, "problems": j.problems, "reproduce": o.reproduce,
                  "exit_code": o.exit_code,
                  "trace_files": [v["trace_file"] for v in (o.report or {}).get("violations", []) if v.get("trace_file")]}
        kept = {MARKER: json.dumps(verdict, indent=2) + "\n", "reproduce.sh": f"#!/bin/sh\n{o.reproduce}\n"}
        for name, text in kept.items():
            path = o.run_dir / name
            write_kept(f"check {j.name}'s {name}", path, lambda path=path, text=text: atomic_write(path, text),
                       unwritten)


def _print_summary(console: Console, judgements: list[Judgement], code: int, out: Path) -> None:
    table = Table(title="kraftcheck ci", title_justify="left")
    for column, justify in (("check", "left"), ("expectation", "left"), ("verdict", "left"),
                            ("distinct", "right"), ("depth", "right"), ("compile s", "right"),
                            ("explore s", "right"), ("wall s", "right")):
        table.add_column(column, justify=justify)
    for j in judgements:
        r = j.outcome.report or {}
        table.add_row(j.name, j.outcome.check.expectation, Text(j.status, style=STYLE[j.status]),
                      # none where the run gave none (no report, or one saying error): a 0 would read as counted
                      count_cell(r.get("distinct_states")), str(r.get("depth", "")),
                      seconds_cell(r.get("compile_s")), seconds_cell(r.get("elapsed_s")), f"{j.outcome.wall_s:.1f}")
    console.print(table)
    for j in judgements:
        for note in j.notes:
            console.print(f"{j.name}: note: {note}")
        if j.status == PASS:
            continue
        for problem in j.problems:
            console.print(Text(f"{j.name}: {j.status}: {problem}", style=STYLE[j.status]))
        for f in j.new:
            console.print(f"  counterexample ({f.depth} states):")
            for line in step_lines(f):
                console.print(f"    {line}")
        for v in (j.outcome.report or {}).get("violations", []):
            if v.get("trace_file"):
                console.print(f"  trace: {v['trace_file']}")
        console.print(f"  reproduce: {j.outcome.reproduce}")
    passed = sum(j.status == PASS for j in judgements)
    console.print(f"{passed} of {len(judgements)} checks pass; exit {code}"
                  + (f"; failing runs are in {out}/" if any(j.status != PASS and j.outcome.run_dir.is_dir()
                                                             for j in judgements) else ""))
