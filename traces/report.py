"""``kraftcheck trace report``: a counterexample as a bug report, in Markdown or JIRA markup.

Built from the trace alone, shown in its spec's terms (``traces.spec_terms``): a summary (the
violated property's text, the step that breaks it and what that step changed, the records and
requests that led there), the configuration (preset, bounds, switches), the steps with what each
writes or sends, the values it changes and, where the spec names them, the code paths, the
command that reproduces the trace, and the verdicts of fix switches the caller re-ran
(``FixVerdict``; the command line runs them). What a report cannot say (why tests and production
missed it, which releases hold each code path, a reading of the fix) stays for a person to write.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import networkx as nx

from kraftcheck.traces.view import StepView, TraceView

FORMATS = ("markdown", "jira")


@dataclass
class FixVerdict:
    """One fix switch re-run on the trace's configuration."""

    switch: str                 # the parameter, e.g. fix_reassignment_min_isr
    verdict: str                # holds / violated / incomplete / refused / error
    detail: str                 # "every invariant holds over 5,958,994 states (depth 43)", ...
    command: str                # the command that runs it


def reproduce_command(attrs: Mapping[str, Any], defaults: Mapping[str, Any], default_spec: str,
                      check: Optional[str] = None, extra: Mapping[str, Any] = None,
                      spec_ref: Optional[str] = None, options: Sequence[str] = ()) -> str:
    """The ``kraftcheck check`` command for the trace's spec and parameters, stopping at ``check``:
    every number (sizes and bounds, so that the command means the same if a default changes) and
    every other parameter that differs from its default. ``spec_ref``: how the spec is loaded
    when its name is not registered (``file.py:Class``); ``options``: the run's other options
    that change what it finds (``run_options``). Each word is quoted for a POSIX shell: the command
    is pasted into one, and a path with a space or a text value with ``;`` must reach kraftcheck
    as it is."""
    params = {**(attrs.get("params") or {}), **(extra or {})}
    spec = spec_ref or attrs.get("spec", "?")
    words = ["kraftcheck", "check"]
    if spec != default_spec:
        words += ["--spec", spec]
    for key, value in params.items():
        number = isinstance(value, int) and not isinstance(value, bool)
        if key in defaults and _same(defaults[key], value) and not number:
            continue
        if spec == default_spec:
            flag = "--" + key.replace("_", "-")
            if value is True:
                words.append(flag)
            elif value is False:
                words += ["--no-" + key.replace("_", "-")] if key not in defaults else [flag, "false"]
            elif value is not None:
                words += [flag, str(value)]
        elif value is not None:
            words += ["--param", f"{key}={_text(value)}"]
    words += list(options)
    if check:
        words += ["--invariant", check]
    return shlex.join(words)


def run_option_words(run_options: Mapping[str, Any], declared_constraints: Sequence[str],
                     spec_checks_deadlock: bool) -> list[str]:
    """The options of the trace's run that change what a run finds, as ``kraftcheck check`` takes
    them: the constraints it applied when not every one the spec declares (``--constraint``, or
    ``--no-constraints`` for none), and deadlock checking when not the spec's default. Without them
    a reproduction could explore another state space and stop elsewhere."""
    words: list[str] = []
    applied = run_options.get("constraints")
    if isinstance(applied, list) and sorted(applied) != sorted(declared_constraints):
        words += [w for name in applied for w in ("--constraint", str(name))] or ["--no-constraints"]
    deadlock = run_options.get("deadlock")
    if isinstance(deadlock, bool) and deadlock != spec_checks_deadlock:
        words.append("--deadlock" if deadlock else "--no-deadlock")
    return words


def _same(a: Any, b: Any) -> bool:
    return (list(a) if isinstance(a, tuple) else a) == (list(b) if isinstance(b, tuple) else b)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# ----------------------------------------------------------------------------------------------
# the content, format-free


def _changes(view: TraceView, step: StepView, prev: Optional[StepView]) -> list[str]:
    if prev is None:
        return []
    return [f"{view.name(e)}: {view.fmt(e, prev.values[e])} → {view.fmt(e, step.values[e])}" for e in step.changed]


def _configuration(attrs: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every number (sizes and bounds), and every other parameter not at its default."""
    params = attrs.get("params") or {}
    return [(k, _text(v)) for k, v in params.items() if v is not None and (
        (isinstance(v, int) and not isinstance(v, bool)) or k not in defaults or not _same(defaults[k], v))]


HISTORY_LANE = "history"  # the lane of a spec's ghost variables (docs/traces.md: the Kafka model's)


def summary_lines(view: TraceView) -> list[str]:
    """The summary, one paragraph per item, from the violated check's text and the steps."""
    v = view.violation or {}
    bad = view.violating_step
    n = len(view.steps)
    params = view.attrs.get("params") or {}
    preset = params.get("protocol")
    where = f" under `{preset}`" if preset else ""
    out = [f"**{v.get('check', 'a check')}** ({v.get('kind', 'check')}) fails at step {bad} of the {n}-state "
           f"counterexample{where}."]
    if v.get("doc"):
        out.append(f"The property: {v['doc']}")
    if bad is not None and 0 < bad < n:
        step, prev = view.steps[bad], view.steps[bad - 1]
        wrote = "; ".join(step.writes) if step.writes else ""
        out.append(f"The step that breaks it, {step.action}" + (f" ({wrote})" if wrote else "") + ", changes: "
                   + "; ".join(_changes(view, step, prev)) + ".")
    # the steps that changed the main participant's state (the controller's) or the history (a
    # lane named so, where a spec keeps what happened: faults used, acknowledged writes), and those
    # where a check starts failing, with what they wrote; not another participant's lane, which
    # would single out one of several alike (two-phase's last resource manager)
    lanes = {view.main_lane} | ({HISTORY_LANE} & set(view.lanes))
    watched = set(view.elements_for(lanes))
    path, failing = [], set(view.steps[0].failing)
    for s in view.steps[1:bad]:
        starts = [c for c in s.failing if c not in failing]
        failing |= set(s.failing)
        if watched & set(s.changed) or starts:
            path.append(f"{s.step}. {s.action}" + (f": {s.writes[-1]}" if s.writes else "")
                        + (f" ({', '.join(starts)} start{'s' if len(starts) == 1 else ''} failing)"
                           if starts else ""))
    if path:
        out.append(f"Before it (the steps that change the {' or the '.join(sorted(lanes, key=view.lanes.index))}, "
                   "or where a check starts failing; every step is under Steps): " + "; ".join(path) + ".")
    return out


# ----------------------------------------------------------------------------------------------
# Markdown and JIRA


class _Markdown:
    def h(self, level: int, text: str) -> str:
        return "#" * level + " " + text

    def cell(self, text: str) -> str:
        return text.replace("|", "\\|").replace("\n", "<br>")

    def table(self, head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
        out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
        out += ["| " + " | ".join(self.cell(c) for c in row) + " |" for row in rows]
        return out

    def code(self, text: str) -> list[str]:
        return ["```sh", text, "```"]

    def text(self, text: str) -> str:
        return text

    def mono(self, text: str) -> str:
        return f"`{text}`"


class _Jira(_Markdown):
    SPECIAL = re.compile(r"([\[\]{}|*_+^~])")

    def h(self, level: int, text: str) -> str:
        return f"h{level}. {self.text(text)}"

    def text(self, text: str) -> str:
        # Markdown's **bold** and `code` of the summary become JIRA's *bold* and {{code}}
        parts = re.split(r"(\*\*[^*]+\*\*|`[^`]+`)", text)
        out = []
        for p in parts:
            if p.startswith("**") and p.endswith("**") and len(p) > 4:
                out.append("*" + self._escape(p[2:-2]) + "*")
            elif p.startswith("`") and p.endswith("`") and len(p) > 2:
                out.append("{{" + self._escape(p[1:-1]) + "}}")
            else:
                out.append(self._escape(p))
        return "".join(out)

    def _escape(self, text: str) -> str:
        # JIRA's markup characters, and a '-' that could open a -strikethrough- (-1, ->)
        return re.sub(r"(^|\s)-", r"\1\\-", self.SPECIAL.sub(r"\\\1", text))

    def cell(self, text: str) -> str:
        return self._escape(text).replace("\n", " \\\\ ") or " "

    def table(self, head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
        out = ["||" + "||".join(head) + "||"]
        out += ["|" + "|".join(self.cell(c) for c in row) + "|" for row in rows]
        return out

    def code(self, text: str) -> list[str]:
        return ["{noformat}", text, "{noformat}"]

    def mono(self, text: str) -> str:
        return "{{" + self._escape(text) + "}}"


def report(graph: nx.DiGraph, fmt: str = "markdown", *, command: str, trace_file: str = "",
           fixes: Sequence[FixVerdict] = (), defaults: Mapping[str, Any] = None, code_paths: bool = True) -> str:
    """The report of ``graph`` (best shown in its spec's terms) as Markdown or JIRA markup."""
    w = _Jira() if fmt == "jira" else _Markdown()
    view = TraceView(graph)
    attrs = view.attrs
    v = view.violation or {}
    title = f"{attrs.get('spec', '?')}: {v.get('check', 'counterexample')}"
    params = attrs.get("params") or {}
    if params.get("protocol"):
        title += f" under {params['protocol']}"
    lines = [w.h(1, title), ""]
    lines += [w.h(2, "Summary"), ""]
    for para in summary_lines(view):
        lines += [w.text(para), ""]
    if view.terms is None:
        lines += [w.text("(shown in the model's own fields: the spec offers no translation, or --model-names)"), ""]
    elif not attrs.get("real_epochs"):
        lines += [w.text("(epochs as the model stores them, renumbered: " + "; ".join(attrs.get("terms_notes") or [])
                         + ")"), ""]

    lines += [w.h(2, "Configuration"), ""]
    lines += [w.text("Sizes and bounds, and every other parameter that is not at its default:"), ""]
    lines += w.table(["parameter", "value"], _configuration(attrs, defaults or {})) + [""]

    code_column = code_paths and any(s.code for s in view.steps)
    head = ["#", "step", "what it writes or sends", "changes", "checks failing"] + (["code path"] if code_column else [])
    rows = []
    for i, step in enumerate(view.steps):
        prev = view.steps[i - 1] if i else None
        if prev is None:
            changes = [f"{view.name(e)}: {view.fmt(e, x)}" for e, x in step.values.items()
                       if x not in (None, False, 0, [], {})]
        else:
            changes = _changes(view, step, prev)
        row = [str(step.step), step.action or "initial state", "\n".join(step.writes), "\n".join(changes),
               ", ".join(step.failing)]
        if code_column:
            row.append("\n".join(step.code))
        rows.append(row)
    lines += [w.h(2, "Steps"), ""] + w.table(head, rows) + [""]

    show = shlex.join(["kraftcheck", "trace", "show", trace_file])  # pasted into a shell, as the command
    lines += [w.h(2, "Reproduce"), ""] + w.code(command + (f"\n{show}" if trace_file else ""))
    lines.append("")
    if fixes:
        lines += [w.h(2, "Fixes re-run on this configuration"), ""]
        lines += w.table(["switch", "verdict", "what the check says", "command"],
                         [[f.switch, f.verdict, f.detail, f.command] for f in fixes]) + [""]
    return "\n".join(lines)

