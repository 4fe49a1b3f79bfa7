"""``kraftcheck trace render``: a trace as a picture (SVG or PNG) drawn with matplotlib.

Time flows down; one lane per participant (the controller / main lane first, then each broker).
Each step is a box on the lane it runs on, with arrows for the messages it sends or consumes; the
values it changes are written under it on the lanes that own them; the violating step is red and
the violated check's explanation closes the picture. Drawn on a bare ``Figure`` (no pyplot, no
global state, no display needed) and written atomically.
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import Optional, Union

import networkx as nx
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.files import write_output
from kraftcheck.traces.lasso import fairness_phrase
from kraftcheck.traces.view import TraceView, zero_like

LANE_W_IN = 2.5        # inches per lane
LINE_IN = 0.13         # inches per text line (FONT points with 1.25 line spacing)
FONT = 7.5
WRAP = 38              # characters per line inside a lane
RED, INK, GREY, ACTION_BG = "#c62828", "#222222", "#9e9e9e", "#e8eef7"
FORMATS = (".svg", ".png")
# The largest picture drawn. matplotlib keeps an object for every piece of text and, for a PNG, the
# whole image in memory: 3,000 steps (1,290 inches at 150 dpi) took 0.85 GB and 19 s, and a simulated
# trace of 100,000 would take more memory than a machine has.
MAX_HEIGHT_IN = 500        # about 1,000 steps
MAX_WIDTH_IN = 500         # 199 lanes: each lane is a header, a line and its notes' texts at every step
MAX_PNG_PIXELS = 2 ** 27   # 512 MiB of RGBA


def _short(element: str, lane: str) -> str:
    """``log[b1][0]`` on lane b1 reads as ``log[0]``: the lane already says whose it is."""
    tag = f"[{lane}]"
    return element.replace(tag, "", 1) if tag in element else element


def _wrap(text: str, width: int = WRAP) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


def render(graph: nx.DiGraph, out: Union[str, Path], dpi: int = 150) -> Path:
    """Draw ``graph`` to ``out`` (.svg or .png); returns the path written."""
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise UsageError(f"cannot render to {out.name}: the file name must end in .svg or .png")
    fig = draw(graph, dpi if out.suffix.lower() == ".png" else None)
    picture = io.BytesIO()
    fig.savefig(picture, format=out.suffix.lower().lstrip("."), dpi=dpi, facecolor="white")
    write_output(out, picture.getvalue())  # a symlink followed, a device written into, never replaced
    return out


def _refuse_too_large(steps: int, lanes: int, width_in: float, height_in: float, dpi: Optional[int]) -> None:
    instead = "trace show and trace export (dot, mermaid) give every step of a trace of any length"
    if width_in > MAX_WIDTH_IN:
        raise UsageError(f"a picture of this trace's {lanes:,} lanes would be {width_in:,.0f} inches wide, more than "
                         f"the {MAX_WIDTH_IN} trace render draws ({int((MAX_WIDTH_IN - 0.6) // LANE_W_IN)} lanes); "
                         "trace show --broker B gives one lane beside the main one, and trace export (dot, mermaid) "
                         "every lane of a trace of any width")
    if height_in > MAX_HEIGHT_IN:
        raise UsageError(f"a picture of this trace's {steps:,} steps would be {height_in:,.0f} inches tall, more than "
                         f"the {MAX_HEIGHT_IN} trace render draws (about 1,000 steps); {instead}")
    if dpi is not None and (width_in * dpi) * (height_in * dpi) > MAX_PNG_PIXELS:
        raise UsageError(f"a PNG of this trace's {steps:,} steps at {dpi} dpi would be {width_in * dpi:,.0f} x "
                         f"{height_in * dpi:,.0f} pixels, more than the {MAX_PNG_PIXELS:,} trace render draws: give a "
                         f"lower --dpi, or write an .svg; {instead}")


def draw(graph: nx.DiGraph, dpi: Optional[int] = None) -> Figure:
    """The picture of a trace as a matplotlib Figure; UsageError, before drawing, for one past
    ``MAX_WIDTH_IN`` or ``MAX_HEIGHT_IN`` or, at ``dpi`` (a PNG's), past ``MAX_PNG_PIXELS``."""
    view = TraceView(graph)
    lanes = view.lanes
    x_of = {lane: i for i, lane in enumerate(lanes)}
    bad = view.violating_step

    # Lay the rows out first: each step needs room for its action and its tallest lane of changes.
    rows = []
    for step in view.steps:
        if step.step == 0:  # the initial state without its zeros, as in the table
            shown = {e: v for e, v in step.values.items() if not zero_like(v)}
        else:
            shown = {e: step.values[e] for e in step.changed}
        notes: dict[str, list[str]] = {}
        for e, v in shown.items():
            lane = view.lane_of[e]
            notes.setdefault(lane, []).extend(_wrap(f"{_short(e, lane)} = {view.fmt(e, v)}"))
        if step.step == 0 and len(shown) < len(step.values):
            notes.setdefault(view.main_lane, []).append("(others 0 / false / empty)")
        label = _wrap(f"{step.step}. {step.action or 'initial state'}")
        extra = _wrap("violates " + ", ".join(step.failing)) if step.failing else []
        if view.lasso is not None and step.step == view.lasso["trigger"]:
            extra = extra + ["<- trigger"]
        if view.lasso is not None and step.step == view.lasso["cycle_start"]:
            extra = extra + ["(cycle starts here)"]
        if step.note:  # an authored scenario's words for the step
            extra = extra + _wrap(step.note)
        for line in step.writes:  # the record or request, in the spec's terms
            extra = extra + _wrap(line)
        height = len(label) + len(extra) + max([len(n) for n in notes.values()] + [0]) + 1.3
        rows.append((step, label, extra, notes, height))

    params = {k: v for k, v in (view.attrs.get("params") or {}).items() if v is not None and v is not False}
    title = _wrap(f"{view.spec}  " + ", ".join(f"{k}={v}" for k, v in params.items()),
                  int(WRAP * max(len(lanes), 2) * 0.85))
    closing = []
    width_chars = int(WRAP * max(len(lanes), 2) * 0.9)
    if view.lasso is not None:
        lasso, last = view.lasso, view.steps[-1].step
        back = f"Then step {last} stays forever (stuttering)." if lasso["stutter"] else \
            f"Then {view.closing_action} leads back to step {lasso['cycle_start']}: steps {lasso['cycle_start']}-{last} " \
            "repeat forever."
        closing = _wrap(back, width_chars) + _wrap(
            f"Liveness {view.violation.get('check')} fails: {lasso['formula']}; from step {lasso['trigger']} on the "
            "goal never holds, under " + fairness_phrase(lasso["fair"]) + " " + (", ".join(lasso["fair"]) or "nothing")
            + ".", width_chars)
    elif view.violation:
        v = view.violation
        closing = _wrap(f"Step {bad} violates {v.get('kind', 'check')} {v.get('check')}: {v.get('doc', '')}",
                        width_chars)
    else:
        failing = [s for s in view.steps if s.failing]
        if failing:
            closing = _wrap(f"First failure at step {failing[0].step}: {', '.join(failing[0].failing)}", width_chars)
    header = 2.0 + 1.3 * len(title)
    total = header + sum(r[-1] for r in rows) + len(closing) + 1.5
    width_in = max(5.0, LANE_W_IN * len(lanes) + 0.6)
    height_in = max(3.0, total * LINE_IN)
    _refuse_too_large(len(view.steps), len(lanes), width_in, height_in, dpi)
    fig = Figure(figsize=(width_in, height_in))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-0.62, len(lanes) - 0.5)
    ax.set_ylim(-total, 0)
    ax.axis("off")

    ax.text(-0.55, -0.4, "\n".join(title), fontsize=FONT + 1.5, weight="bold", va="top", color=INK,
            linespacing=1.3)
    top = -header
    for lane, x in x_of.items():
        ax.text(x, top + 0.6, lane, ha="center", va="center", fontsize=FONT + 1, weight="bold",
                bbox=dict(boxstyle="round,pad=0.3", fc="white", ec=INK, lw=0.8))
        ax.plot([x, x], [top, -(total - len(closing) - 1.0)], color=GREY, lw=0.7, ls=(0, (4, 3)), zorder=0)

    y = top - 0.6
    for step, label, extra, notes, height in rows:
        red = step.step == bad or bool(step.failing)
        touch = step.touch or {}
        actor = touch.get("lane") if touch.get("lane") in x_of else view.main_lane
        ax_x = x_of[actor]
        box_y = y - (len(label) + len(extra)) / 2
        # text width estimate: a bold glyph is about 0.62 em wide
        half_box = (max(len(t) for t in label + extra) * FONT * 0.62 / 72 + 0.12) / LANE_W_IN / 2
        ax.text(ax_x, box_y, "\n".join(label + extra), ha="center", va="center", fontsize=FONT,
                color=RED if red else INK, weight="bold" if step.step else "normal", zorder=3,
                linespacing=1.2,
                bbox=dict(boxstyle="round,pad=0.35", fc="#ffebee" if red else (ACTION_BG if step.step else "white"),
                          ec=RED if red else INK, lw=1.4 if red else 0.7))
        for src, dst in [(s, actor) for s in touch.get("receives_from", [])] + \
                        [(actor, d) for d in touch.get("sends_to", [])]:
            if src in x_of and dst in x_of and src != dst:
                sign = 1 if x_of[dst] > x_of[src] else -1
                # arrows start or end at the edge of the action's box, not under it
                start = x_of[src] + sign * (half_box if src == actor else 0.02)
                end = x_of[dst] - sign * (half_box if dst == actor else 0.02)
                ax.add_patch(FancyArrowPatch((start, box_y), (end, box_y),
                                             arrowstyle="-|>", mutation_scale=9, lw=1.0,
                                             color=RED if red else "#1565c0", zorder=2))
        note_top = y - len(label) - len(extra) - 0.5
        ax.text(-0.57, box_y, f"{step.step}", fontsize=FONT, color=RED if red else GREY, va="center")
        for lane, lines in notes.items():
            ax.text(x_of[lane], note_top, "\n".join(lines), ha="center", va="top", fontsize=FONT - 0.5,
                    color=RED if red else "#37474f", family="monospace", zorder=3, linespacing=1.25,
                    bbox=dict(boxstyle="square,pad=0.15", fc="white", ec="none", alpha=0.85))
        y -= height

    if closing:
        ax.text(-0.55, y - 0.4, "\n".join(closing), fontsize=FONT + 0.5, color=RED, va="top", weight="bold")
    return fig
