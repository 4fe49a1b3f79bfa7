"""``kraftcheck trace show``: a trace as a table a person reads top to bottom.

One row per step: the action and the fields it changed (old -> new, the new value highlighted);
``full`` lists every field with the changed ones marked; ``lane`` keeps one broker's fields and
the controller's. The violating step is marked and the check's explanation closes the table.
Every value from the file goes in as plain text (never as rich markup). Below ``NARROW`` columns
the table becomes a list of blocks, one per step, which reads well at any width.
"""

from __future__ import annotations

from typing import Iterable, Optional

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from kraftcheck.traces.lasso import fairness_phrase, lasso_length
from kraftcheck.traces.view import StepView, TraceView, zero_like

NARROW = 72


def _arrow(ascii_only: bool) -> str:
    return " -> " if ascii_only else " → "


def _lines(view: TraceView, step: StepView, prev: Optional[StepView], elements: list[str], full: bool,
           ascii_only: bool) -> Text:
    out = Text()
    hidden = 0
    if full:
        shown = elements
    elif prev is None:
        # the initial state without its zeros: a large model's start fits on a screen
        shown = [e for e in elements if not zero_like(step.values[e])]
        hidden = len(elements) - len(shown)
    else:
        shown = [e for e in elements if e in step.changed]
    for e in shown:
        if out:
            out.append("\n")
        if prev is not None and e in step.changed:
            out.append(f"{view.name(e)}: ")
            out.append(view.fmt(e, prev.values[e]), style="dim")
            out.append(_arrow(ascii_only))
            out.append(view.fmt(e, step.values[e]), style="bold yellow")
        else:
            out.append(f"{view.name(e)}: {view.fmt(e, step.values[e])}", style="dim" if prev is not None else "")
    if hidden:
        out.append(("\n" if out else "") + f"(the other {hidden} values are 0, false or empty)", style="dim")
    if not shown and not hidden:
        out.append("(no change)", style="dim")
    return out


def _failing(step: StepView, mark: bool) -> Text:
    if not step.failing:
        return Text("ok", style="green")
    return Text(("VIOLATED:\n" if mark else "fails:\n") + "\n".join(step.failing), style="bold red")


def _action(step: StepView, view: Optional[TraceView] = None, ascii_only: bool = False) -> Text:
    text = Text(step.action or "initial state", style="bold" if step.action else "italic")
    if step.note:
        text.append("\n" + step.note, style="dim italic")
    for line in step.writes:  # the record or request, in the spec's terms
        text.append("\n" + line, style="cyan")
    lasso = view.lasso if view is not None else None
    if lasso is not None:
        if step.step == lasso["trigger"]:
            text.append("\n" + ("<- " if ascii_only else "← ") + "trigger", style="bold red")
        if step.step == lasso["cycle_start"]:
            text.append("\n" + ("@ " if ascii_only else "↺ ") + "cycle starts here", style="bold magenta")
    return text


def trace_renderable(view: TraceView, *, full: bool = False, lane: Optional[str] = None,
                     ascii_only: bool = False, width: int = 100) -> RenderableType:
    """The table (or, when narrow, the step blocks) and the closing explanation."""
    keep = None
    if lane is not None:
        keep = {view.main_lane, view.resolve_lane(lane)}
    elements = view.elements_for(keep)
    bad = view.violating_step
    kind = view.attrs.get('kind', 'trace') + (" (lasso)" if view.lasso is not None else "")
    # counted as kraftcheck check counts a counterexample: in states, the initial one included
    length = f"{len(view.steps)} states ({len(view.steps) - 1} actions)" if view.lasso is None else \
        lasso_length(len(view.steps), view.lasso["cycle_start"], view.lasso["stutter"])
    title = f"{view.spec}: {kind} of {length}"
    # switches left off (False / None) are the defaults: naming them only buries the ones that matter
    params = {k: v for k, v in (view.attrs.get("params") or {}).items() if v is not None and v is not False}
    if params:
        title += " (" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")"
    if view.terms is not None:
        title += f"\nin {view.terms}'s terms" + ("" if view.attrs.get("real_epochs") else " (epochs as stored)") + \
            "; --model-names shows the model's fields"
    parts: list[RenderableType] = [Text(title, style="bold")]
    if keep is not None:
        parts.append(Text("lanes shown: " + ", ".join(sorted(keep, key=view.lanes.index)), style="dim"))

    rows = []
    for i, step in enumerate(view.steps):
        prev = view.steps[i - 1] if i else None
        rows.append((step, _action(step, view, ascii_only), _lines(view, step, prev, elements, full, ascii_only),
                     _failing(step, step.step == bad)))

    if width >= NARROW:
        table = Table(box=box.ASCII if ascii_only else box.SIMPLE_HEAVY, show_lines=True,
                      header_style="bold", expand=False, pad_edge=False)
        table.add_column("#", justify="right", no_wrap=True)
        longest = max((len(s.action or "") for s in view.steps), default=12)
        table.add_column("action" if view.terms is None else "action: what it writes or sends", overflow="fold",
                         min_width=min(longest, width // 3), max_width=max(18, (width * 2) // 5 if view.terms else width // 3))
        table.add_column("state" if full else "changes", overflow="fold")
        longest_check = max((len(c) for s in view.steps for c in s.failing), default=8)
        table.add_column("checks", overflow="fold", min_width=min(longest_check, width // 4),
                         max_width=max(12, width // 4))
        for step, action, lines, failing in rows:
            table.add_row(str(step.step), action, lines, failing,
                          style="red" if step.step == bad else None)
        parts.append(table)
    else:
        rule = "-" if ascii_only else "─"
        for step, action, lines, failing in rows:
            head = Text(f"{rule * 2} step {step.step}: ", style="red" if step.step == bad else "")
            head.append_text(action)
            parts.append(head)
            for block in (lines, failing):
                parts.append(Text("  ") + Text("\n  ").join(block.split("\n")))
    parts.extend(_closing(view))
    return Group(*parts)


def _how_met(f: dict) -> str:
    """One requirement of a lasso's ``fairness`` (traces.lasso), as a reader says it."""
    if f.get("how") == "taken":
        return f"{f['requirement']} taken from step {f['step']}"
    if f.get("how") == "disabled":
        return f"{f['requirement']} disabled at step {f['step']}"
    return f"{f['requirement']} {f.get('how')}"


def _closing(view: TraceView) -> Iterable[Text]:
    v = view.violation
    if v is None:
        failing = [s for s in view.steps if s.failing]
        if failing:
            first = failing[0]
            yield Text(f"first failure at step {first.step}: {', '.join(first.failing)}", style="bold red")
            docs = view.attrs.get("check_docs") or {}
            for check in first.failing:
                if docs.get(check):
                    yield Text(f"  {check}: {docs[check]}", style="red")
        else:
            yield Text("every check holds at every step", style="green")
        return
    lasso = view.lasso
    if lasso is not None:
        last = view.steps[-1].step
        if lasso["stutter"]:
            yield Text(f"then step {last}'s state stays forever (stuttering: no fair action can change it)",
                       style="bold magenta")
        else:
            yield Text(f"then {view.closing_action} leads back to step {lasso['cycle_start']}: steps "
                       f"{lasso['cycle_start']} to {last} repeat forever", style="bold magenta")
        yield Text(f"liveness property {v.get('check')} fails: {lasso['formula']}", style="bold red")
        yield Text(f"  from step {lasso['trigger']} on, the goal never holds", style="red")
        yield Text(f"  under {fairness_phrase(lasso['fair'])}: " + ", ".join(lasso["fair"]) if lasso["fair"] else
                   "  with no fairness: any step may never happen", style="red")
        if lasso.get("fairness"):  # written by the checker: how the cycle meets each requirement
            yield Text("  the cycle meets them: " + "; ".join(_how_met(f) for f in lasso["fairness"]), style="red")
        if v.get("doc"):
            yield Text(f"  {v['doc']}", style="red")
        return
    text = Text(f"step {v.get('step')} violates {v.get('kind', 'check')} {v.get('check')}", style="bold red")
    if v.get("doc"):
        text.append(f": {v['doc']}", style="red")
    yield text


def print_trace(view: TraceView, console: Console, *, full: bool = False, lane: Optional[str] = None,
                ascii_only: bool = False) -> None:
    console.print(trace_renderable(view, full=full, lane=lane, ascii_only=ascii_only, width=console.width))


def trace_text(view: TraceView, *, width: int = 100, full: bool = False, lane: Optional[str] = None,
               ascii_only: bool = True) -> str:
    """The table as plain text (no color), e.g. for tests or a CI log."""
    console = Console(width=width, no_color=True, color_system=None, record=True, file=_Null(),
                      highlight=False, emoji=False, legacy_windows=False)
    print_trace(view, console, full=full, lane=lane, ascii_only=ascii_only)
    return console.export_text()


class _Null:
    def write(self, _: str) -> int:
        return 0

    def flush(self) -> None:
        pass
