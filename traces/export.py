"""``kraftcheck trace export``: a trace in the usual graph formats.

* ``json``: the canonical node-link file itself;
* ``graphml``: through networkx, with every attribute flattened to a scalar (one node attribute
  per state element, e.g. ``rm_state[rm1]``; structured values as JSON text), since GraphML holds
  only scalars;
* ``dot``: Graphviz, written here (networkx needs pydot or pygraphviz for DOT, which kraftcheck does
  not depend on): one box per step listing what changed, the violating step in red;
* ``mermaid``: a sequence diagram (lanes as participants, messages as arrows, changes as notes, the
  violating step in a red box) that code-review sites render inline.
"""

from __future__ import annotations

import json
import re
from typing import Callable

import networkx as nx

from kraftcheck.checker.errors import UsageError
from kraftcheck.traces.files import to_json
from kraftcheck.traces.view import TraceView

FORMATS = ("graphml", "dot", "json", "mermaid")


def export(graph: nx.DiGraph, fmt: str) -> str:
    """The trace as text in ``fmt`` (one of FORMATS)."""
    writers: dict[str, Callable[[nx.DiGraph], str]] = {
        "json": to_json, "graphml": to_graphml, "dot": to_dot, "mermaid": to_mermaid}
    if fmt not in writers:
        raise UsageError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return writers[fmt](graph)


def _scalar(v) -> object:
    if v is None:
        return ""
    if isinstance(v, (bool, int, float, str)):
        return v
    return json.dumps(v, ensure_ascii=False)


def flat_graph(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy whose every attribute is a scalar: what GraphML (and most graph tools) can hold."""
    view = TraceView(graph)
    flat = nx.DiGraph()
    flat.graph.update({k: _scalar(v) for k, v in graph.graph.items()})
    for step in view.steps:
        node = graph.nodes[step.step]
        attrs = {"step": step.step, "fingerprint": node["fingerprint"], "violated": ",".join(node["violated"]),
                 "changed": ",".join(step.changed)}
        if step.note:
            attrs["note"] = step.note
        attrs.update({e: view.fmt(e, v) for e, v in step.values.items()})
        flat.add_node(step.step, **attrs)
    for u, v, data in graph.edges(data=True):
        touch = data.get("touch", {})
        flat.add_edge(u, v, action=data["action"], label=view.steps[v].action or data["action"],
                      params=_scalar(data.get("params", {})), lane=touch.get("lane", ""),
                      sends_to=",".join(touch.get("sends_to", [])),
                      receives_from=",".join(touch.get("receives_from", [])),
                      violated=",".join(data.get("violated", [])), writes="\n".join(data.get("writes", [])))
    return flat


def to_graphml(graph: nx.DiGraph) -> str:
    return "\n".join(nx.generate_graphml(flat_graph(graph), prettyprint=True)) + "\n"


# ----------------------------------------------------------------------------------------------
# DOT


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\l") + '"'


def to_dot(graph: nx.DiGraph) -> str:
    view = TraceView(graph)
    bad = view.violating_step
    title = f"{view.spec}"
    if view.violation:
        title += f": violates {view.violation['check']} at step {bad}"
    out = ["digraph trace {", "  rankdir=TB;", '  node [shape=box, fontname="monospace", fontsize=10];',
           '  edge [fontname="monospace", fontsize=10];', f"  label={_dot_quote(title)};", "  labelloc=t;"]
    for i, step in enumerate(view.steps):
        shown = step.values if i == 0 else {e: step.values[e] for e in step.changed}
        lines = [f"{step.step}: {step.action or 'initial state'}"] + list(step.writes)
        lines += [f"{e} = {view.fmt(e, v)}" for e, v in shown.items()]
        if step.failing:
            lines.append("FAILS: " + ", ".join(step.failing))
        style = ', color=red, fontcolor=red, penwidth=2' if step.step == bad else ""
        out.append(f"  s{step.step} [label={_dot_quote(chr(10).join(lines) + chr(10))}{style}];")
    for step in view.steps[1:]:
        out.append(f"  s{step.step - 1} -> s{step.step} [label={_dot_quote(step.action or '')}];")
    if view.lasso is not None:  # the edge that closes a liveness counterexample's cycle
        last = view.steps[-1].step
        out.append(f"  s{last} -> s{view.lasso['cycle_start']} [label={_dot_quote(view.closing_action or '')}, "
                   "color=magenta, fontcolor=magenta, style=bold, constraint=false];")
    out.append("}")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
# Mermaid


def _mermaid_text(text: str) -> str:
    """Text safe inside a Mermaid message or note: entity codes for characters Mermaid parses."""
    text = text.replace("#", "#35;").replace(";", "#59;").replace("<", "#lt;").replace(">", "#gt;")
    return text.replace("\n", "<br/>")


def to_mermaid(graph: nx.DiGraph) -> str:
    view = TraceView(graph)
    bad = view.violating_step
    ids = {lane: f"L{i}" for i, lane in enumerate(view.lanes)}
    out = ["sequenceDiagram"]
    title = f"{view.spec}" + (f": {view.violation['check']} violated" if view.violation else "")
    out.append(f"  title {_mermaid_text(title)}")
    for lane in view.lanes:
        label = re.sub(r"[^A-Za-z0-9_. -]", "_", lane)
        out.append(f"  participant {ids[lane]} as {label}")
    for step in view.steps:
        body: list[str] = []
        changes_by_lane: dict[str, list[str]] = {}
        shown = step.changed if step.step else []
        for e in shown:
            changes_by_lane.setdefault(view.lane_of[e], []).append(f"{e}={view.fmt(e, step.values[e])}")
        if step.step == 0:
            body.append(f"  Note over {ids[view.lanes[0]]},{ids[view.lanes[-1]]}: 0. initial state")
        else:
            touch = step.touch or {"lane": view.main_lane}
            actor = touch.get("lane", view.main_lane)
            actor = actor if actor in ids else view.main_lane
            text = _mermaid_text("\n".join([f"{step.step}. {step.action}"] + step.writes))
            arrows = [(src, actor) for src in touch.get("receives_from", []) if src in ids]
            arrows += [(actor, dst) for dst in touch.get("sends_to", []) if dst in ids]
            if arrows:
                for src, dst in arrows:
                    body.append(f"  {ids[src]}->>{ids[dst]}: {text}")
            else:
                body.append(f"  Note over {ids[actor]}: {text}")
        for lane, items in changes_by_lane.items():
            body.append(f"  Note over {ids[lane]}: {_mermaid_text(chr(10).join(items))}")
        if step.failing:
            body.append(f"  Note over {ids[view.lanes[0]]},{ids[view.lanes[-1]]}: "
                        f"{_mermaid_text('VIOLATED: ' + ', '.join(step.failing))}")
        if view.lasso is not None and step.step == view.lasso["cycle_start"]:
            body.append(f"  Note over {ids[view.lanes[0]]},{ids[view.lanes[-1]]}: cycle starts here")
        if step.step == bad:
            out.append("  rect rgb(255, 215, 215)")
            out.extend("  " + line for line in body)
            out.append("  end")
        else:
            out.extend(body)
    if view.lasso is not None:
        back = "then stays here forever (stuttering)" if view.lasso["stutter"] else \
            f"then {view.closing_action} back to step {view.lasso['cycle_start']}, forever"
        out.append(f"  Note over {ids[view.lanes[0]]},{ids[view.lanes[-1]]}: {_mermaid_text(back)}")
    return "\n".join(out) + "\n"
