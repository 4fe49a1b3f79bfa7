"""A sweep's results as one table: Markdown for people, CSV and JSON for programs.

Each row is one configuration and what its ``kraftcheck check`` report said (or why it has none),
and the sweep's exit code is the worst of its rows.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from kraftcheck.sweep.matrix import Configuration

EXIT_OK, EXIT_VIOLATED, EXIT_BAD_INPUT, EXIT_INCOMPLETE = 0, 1, 2, 3

# A row's result is its check's verdict (holds, violated, incomplete) or why it has none, told apart
# by what the check left, never by its text: refused, no report and exit 2 (it refused its input
# before it ran; also kraftcheck's own internal error, which its message says); error, a report
# saying error (it ran, and a function of the spec raised on a state, say); failed, no report otherwise.
NO_VERDICT = {"refused", "error", "failed"}


@dataclass
class Row:
    configuration: str
    parameters: str
    result: str                      # holds / violated / incomplete, or NO_VERDICT: refused / error / failed
    violations: list[dict[str, Any]] = field(default_factory=list)  # {invariant, depth, trace_file}
    distinct_states: Optional[int] = None
    states_generated: Optional[int] = None
    depth: Optional[int] = None
    wall_s: Optional[float] = None
    message: str = ""                # why a run was refused or failed, or stopped early

    @property
    def verdict(self) -> str:
        if self.result == "violated":
            found = ", ".join(f"`{v['invariant']}` ({v['depth']} states)" for v in self.violations)
            # a --continue run cut short after its violations: the others may not have been reached
            return f"{found}; {self.message}" if self.message else found
        if self.result in ("holds", "incomplete"):
            counted = f"{self.distinct_states:,} states" if self.distinct_states is not None else ""
            said = ", ".join(filter(None, [counted, self.message]))  # a run killed or never started has no counts
            return f"{self.result} ({said})" if said else self.result
        return f"{self.result}: {self.message}"


def row_from_report(config: Configuration, report: Optional[dict], wall_s: float, message: str = "") -> Row:
    """The row of one configuration: its report, or (no report) ``message`` saying why."""
    if report is None:
        result = "refused" if message.startswith("refused") else "failed"
        return Row(config.name, config.parameter_text(), result, wall_s=round(wall_s, 1),
                   message=message.removeprefix("refused: "))
    if report["result"] == "error":  # the run began, then ended with no verdict and no counts
        first = (report.get("error") or "").splitlines()  # the rest, a path to the state, is in the report
        return Row(config.name, config.parameter_text(), "error", wall_s=round(wall_s, 1),
                   message=first[0] if first else "")
    reduced = [what for what, on in (("one state per orbit (--symmetry)", report.get("symmetry")),
                                     ("up to fingerprint collisions", report.get("fingerprints"))) if on]
    return Row(config.name, config.parameter_text(), report["result"],
               [{"invariant": v["invariant"], "depth": v["depth"], "trace_file": v.get("trace_file")}
                for v in report["violations"]],
               report["distinct_states"], report["states_generated"], report["depth"], round(wall_s, 1),
               "; ".join(filter(None, [report.get("incomplete_reason"), *reduced])))


def exit_code(rows: list[Row]) -> int:
    """2 if a configuration has no verdict (refused, error or failed), else 1 if one is violated,
    else 3 if one is incomplete, else 0."""
    results = {r.result for r in rows}
    if results & NO_VERDICT:
        return EXIT_BAD_INPUT
    if "violated" in results:
        return EXIT_VIOLATED
    return EXIT_INCOMPLETE if "incomplete" in results else EXIT_OK


def _cell(text: str) -> str:
    """``text`` as one markdown table cell: a ``|`` (a row's name, a message's 'one of a|b') would end
    the cell even in a code span, and a line break the row."""
    return " ".join(text.split()).replace("|", "\\|")


def markdown(rows: list[Row], code: Optional[int] = None) -> str:
    lines = ["| configuration | parameters | verdict | distinct | depth |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        distinct = f"{r.distinct_states:,}" if r.distinct_states is not None else ""
        depth = str(r.depth) if r.depth is not None else ""
        cells = (_cell(r.configuration), f"`{_cell(r.parameters)}`", _cell(r.verdict), distinct, depth)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def csv_text(rows: list[Row], code: Optional[int] = None) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["configuration", "parameters", "result", "violations", "distinct_states", "states_generated",
                     "depth", "wall_s", "message"])
    for r in rows:
        violations = ";".join(f"{v['invariant']}:{v['depth']}" for v in r.violations)
        writer.writerow([r.configuration, r.parameters, r.result, violations, r.distinct_states, r.states_generated,
                         r.depth, r.wall_s, r.message])
    return out.getvalue()


def json_text(rows: list[Row], code: Optional[int] = None) -> str:
    """The rows and the sweep's exit code: ``code`` when the sweep's differs from its rows' (a table
    that could not be written to its file), so that the table says what the process exits with."""
    return json.dumps({"configurations": [asdict(r) for r in rows],
                       "exit_code": exit_code(rows) if code is None else code}, indent=2) + "\n"


# each takes the rows and the sweep's exit code (the rows' if None); only JSON carries the code
FORMATS = {"markdown": markdown, "csv": csv_text, "json": json_text}
