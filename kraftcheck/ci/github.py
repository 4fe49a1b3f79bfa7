"""Under GitHub Actions (``GITHUB_ACTIONS=true``): annotations on the run and a Markdown job summary.

Annotations are workflow commands printed to stdout (``::error title=...::message``); the summary
is Markdown appended to the file ``GITHUB_STEP_SUMMARY`` names.
"""

from __future__ import annotations

import os
from typing import Callable

from kraftcheck.checker.disk_full import UnwrittenFile, write_kept
from kraftcheck.ci.judge import BAD_INPUT, BUDGET, FAIL, INCOMPLETE, PASS, STOPPED, Judgement, step_lines

ICON = {PASS: "✅ pass", FAIL: "❌ fail", BUDGET: "⏱️ budget ran out", STOPPED: "⏹️ stopped before its end",
        BAD_INPUT: "⚠️ bad input"}


def under_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotations(judgements: list[Judgement]) -> list[str]:
    """One ``::error`` per failing check, ``::warning`` for budgets and baseline entries to prune."""
    lines = []
    for j in judgements:
        title = _escape_property(f"kraftcheck {j.name}")
        if j.status != PASS:
            level = "warning" if j.status in INCOMPLETE else "error"
            body = "\n".join(j.problems + [f"reproduce: {j.outcome.reproduce}"])
            lines.append(f"::{level} title={title}::{_escape_data(body)}")
        for note in j.notes:
            if "baseline" in note:
                lines.append(f"::warning title={title}::{_escape_data(note)}")
    return lines


def seconds_cell(value) -> str:
    """A report's seconds, or "-" where there are none (a compile unfinished when the run ended, a
    run with no report)."""
    return "-" if value is None else f"{value:.1f}"


def count_cell(value) -> str:
    """A report's count, or nothing where it has none (no report, or one saying error): a 0 would
    read as counted."""
    return "" if value is None else f"{value:,}"


def summary_markdown(judgements: list[Judgement], exit_code: int) -> str:
    rows = ["## kraftcheck ci", "",
            f"{sum(j.status == PASS for j in judgements)} of {len(judgements)} checks pass (exit {exit_code}).", "",
            "| check | expectation | verdict | distinct states | compile s | explore s |",
            "| --- | --- | --- | ---: | ---: | ---: |"]
    for j in judgements:
        r = j.outcome.report or {}
        rows.append(f"| {j.name} | {j.outcome.check.expectation} | {ICON[j.status]} | "
                    f"{count_cell(r.get('distinct_states'))} | {seconds_cell(r.get('compile_s'))} | "
                    f"{seconds_cell(r.get('elapsed_s'))} |")
    for j in judgements:
        if j.status == PASS:
            continue
        rows += ["", f"### {j.name}", ""] + [f"- {p}" for p in j.problems]
        for f in j.new:
            rows += ["", f"<details><summary>{f.invariant}: {f.depth} states</summary>", "", "```text",
                     *step_lines(f), "```", "</details>"]
        rows += ["", "Reproduce:", "", "```bash", j.outcome.reproduce, "```"]
    return "\n".join(rows) + "\n"


def report_to_github(judgements: list[Judgement], exit_code: int, echo: Callable[[str], None]) -> list[UnwrittenFile]:
    """The annotations, and the job summary appended to ``GITHUB_STEP_SUMMARY``; returns the
    summary as an unwritten file if the system refused it (the verdicts still stand)."""
    for line in annotations(judgements):
        echo(line)
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    unwritten: list[UnwrittenFile] = []
    if path:
        def append() -> None:
            with open(path, "a", encoding="utf-8") as f:  # appended: other steps write to it too
                f.write(summary_markdown(judgements, exit_code))
        write_kept("the GitHub job summary (GITHUB_STEP_SUMMARY)", path, append, unwritten)
    return unwritten
