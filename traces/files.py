"""Trace files: schema-versioned node-link JSON, written atomically, read strictly.

Writing is atomic (``kraftcheck.checker.files``: a crash leaves the old file or the new one). Reading
parses JSON only (nothing in a file is ever imported, evaluated or unpickled) and checks every
attribute's presence and type before building the graph; each complaint names the step and field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Union

import networkx as nx

from kraftcheck.checker.files import PathLike, atomic_write, read_at_most
from kraftcheck.traces.errors import TraceFormatError
from kraftcheck.traces.graph import SCHEMA, SCHEMA_VERSION

STUTTERING = "(stuttering)"  # the action of a stuttering lasso's closing self-loop (traces.lasso)

MAX_FILE_BYTES = 256 * 2**20
KINDS = ("counterexample", "scenario")
FAIRNESS_HOW = ("taken", "disabled", "disabled throughout")  # graph.lasso.fairness (checker.analyses.liveness)
_HEX16 = re.compile(r"^[0-9a-f]{16}$")


def to_json(graph: nx.DiGraph) -> str:
    """The canonical text of a trace: node-link JSON, keys in a stable order, one file per trace."""
    data = nx.node_link_data(graph, edges="edges")
    try:
        return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    except (TypeError, ValueError) as e:
        raise TraceFormatError(f"the graph holds a value JSON cannot represent ({e}); trace attributes are "
                               "plain numbers, text, lists and mappings") from None


def save(graph: nx.DiGraph, path: PathLike) -> Path:
    """Check ``graph`` is a well-formed trace and write it to ``path`` atomically."""
    data = json.loads(to_json(graph))
    validate(data, source=str(path))
    return atomic_write(path, to_json(graph))


def load(path: PathLike) -> nx.DiGraph:
    """Read a trace file into a ``networkx.DiGraph``; raises TraceFormatError naming what is wrong."""
    source = str(path)
    try:
        raw = read_at_most(path, MAX_FILE_BYTES)
    except OSError as e:
        raise TraceFormatError(f"cannot read the file: {e.strerror or e}", source=source) from None
    if raw is None:
        raise TraceFormatError(f"file holds more than {MAX_FILE_BYTES} bytes; traces are at most that", source=source)
    return from_text(raw, source)


def from_text(raw: Union[str, bytes], source: str = "<trace>") -> nx.DiGraph:
    try:
        data = json.loads(raw, parse_constant=_reject_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError, RecursionError) as e:  # RecursionError: nesting
        raise TraceFormatError(f"not valid JSON ({e}); a trace file is node-link JSON written by kraftcheck",
                               source=source) from None
    validate(data, source)
    return from_data(data)


def from_data(data: dict[str, Any]) -> nx.DiGraph:
    """The graph of already validated node-link data."""
    g = nx.DiGraph()
    g.graph.update(data["graph"])
    for node in sorted(data["nodes"], key=lambda n: n["id"]):
        attrs = {k: v for k, v in node.items() if k != "id"}
        g.add_node(node["id"], **attrs)
    for edge in data["edges"]:
        attrs = {k: v for k, v in edge.items() if k not in ("source", "target")}
        g.add_edge(edge["source"], edge["target"], **attrs)
    return g


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a trace")


# ----------------------------------------------------------------------------------------------
# structure checks


def validate(data: Any, source: str = "<trace>") -> None:
    """Check the node-link structure of a trace; types only, the spec is not consulted."""

    def fail(reason: str, step: int | None = None, field: str | None = None) -> None:
        raise TraceFormatError(reason, step, field, source)

    if not isinstance(data, dict):
        fail("the top level must be a JSON object (node-link data)")
    for key, kind in (("graph", dict), ("nodes", list), ("edges", list)):
        if not isinstance(data.get(key), kind):
            fail(f"missing or not a {kind.__name__}", field=key)
    if data.get("directed") is not True or data.get("multigraph", False) is not False:
        fail("a trace is a directed graph without parallel edges", field="directed")
    graph = data["graph"]
    if graph.get("schema") != SCHEMA:
        fail(f"expected {SCHEMA!r}, got {graph.get('schema')!r}: not a kraftcheck trace", field="graph.schema")
    version = graph.get("schema_version")
    if not _is_int(version):
        fail("missing or not an integer", field="graph.schema_version")
    if version > SCHEMA_VERSION:
        fail(f"the file has format version {version}, this kraftcheck reads up to {SCHEMA_VERSION}: "
             "upgrade kraftcheck", field="graph.schema_version")
    if version < 1:
        fail(f"unknown format version {version}", field="graph.schema_version")
    _check_graph_attrs(graph, fail)

    nodes = data["nodes"]
    if not nodes:
        fail("a trace has at least its initial state", field="nodes")
    ids = []
    for pos, node in enumerate(nodes):
        if not isinstance(node, dict) or not _is_int(node.get("id")):
            fail("each node needs an integer id", field=f"nodes[{pos}].id")
        ids.append(node["id"])
    if sorted(ids) != list(range(len(nodes))):
        fail(f"node ids must be the steps 0..{len(nodes) - 1}, got {sorted(ids)[:8]}", field="nodes")
    for node in nodes:
        step = node["id"]
        if not isinstance(node.get("state"), dict):
            fail("missing or not an object", step, "state")
        if not isinstance(node.get("fingerprint"), str) or not _HEX16.match(node["fingerprint"]):
            fail("missing or not 16 hex digits", step, "fingerprint")
        _check_names(node.get("violated"), fail, step, "violated")
        if "note" in node and not isinstance(node["note"], str):
            fail("must be text", step, "note")
    prints = graph["fingerprints"]
    if len(prints) != len(nodes):
        fail(f"{len(prints)} fingerprints for {len(nodes)} steps", field="graph.fingerprints")
    for node in nodes:
        if prints[node["id"]] != node["fingerprint"]:
            fail(f"the node says {node['fingerprint']}, graph.fingerprints says {prints[node['id']]}",
                 node["id"], "fingerprint")

    edges = data["edges"]
    lasso = graph.get("lasso")
    last = len(nodes) - 1
    if lasso is not None:
        _check_lasso(lasso, last, fail)
    closing = (last, lasso["cycle_start"]) if lasso is not None else None
    if len(edges) != last + (1 if lasso is not None else 0):
        fail(f"{len(edges)} transitions for {len(nodes)} steps; a trace is a path"
             + (" and one edge closing its cycle" if lasso is not None else ""), field="edges")
    seen = set()
    closed = False
    for pos, edge in enumerate(edges):
        if not isinstance(edge, dict) or not _is_int(edge.get("source")) or not _is_int(edge.get("target")):
            fail("each transition needs integer source and target", field=f"edges[{pos}]")
        step = edge["target"]
        if closing is not None and (edge["source"], step) == closing and not closed:
            closed = True
            if lasso["stutter"]:
                if edge.get("action") != STUTTERING or edge.get("params") != {}:
                    fail(f"a stuttering lasso ends with the self-loop {STUTTERING!r} (no parameters)", last, "action")
        elif edge["source"] != step - 1 or not 1 <= step < len(nodes) or step in seen:
            fail(f"transition {edge['source']} -> {step} does not link consecutive steps"
                 + (f" (the only other edge allowed closes the cycle: {closing[0]} -> {closing[1]})"
                    if closing is not None else ""), step, "edge")
        else:
            seen.add(step)
        if not isinstance(edge.get("action"), str) or not edge["action"]:
            fail("missing or not a name", step, "action")
        params = edge.get("params")
        if not isinstance(params, dict):
            fail("missing or not an object", step, "params")
        for name, value in params.items():
            if not (isinstance(value, str) or _is_int(value)):
                fail(f"must be a label or an integer, got {value!r}", step, f"params.{name}")
        touch = edge.get("touch")
        if not isinstance(touch, dict) or not isinstance(touch.get("lane"), str):
            fail("missing or without a lane", step, "touch")
        for key in ("receives_from", "sends_to"):
            _check_names(touch.get(key, []), fail, step, f"touch.{key}")
        _check_names(edge.get("violated"), fail, step, "violated")
    if closing is not None and not closed:
        fail(f"a lasso's last edge goes from step {closing[0]} back to step {closing[1]}; there is none",
             field="edges")


def _check_lasso(lasso: Any, last: int, fail: Callable[..., None]) -> None:
    """``graph.lasso`` of a liveness counterexample (see traces.lasso)."""
    if not isinstance(lasso, dict) or not _is_int(lasso.get("cycle_start")) or not _is_int(lasso.get("trigger")) \
            or not isinstance(lasso.get("stutter"), bool) or not isinstance(lasso.get("formula"), str):
        fail("must be {cycle_start, trigger, stutter, formula, fair}", field="graph.lasso")
    _check_names(lasso.get("fair"), fail, None, "graph.lasso.fair")
    fairness = lasso.get("fairness")  # optional: how the cycle meets each requirement, as show says it
    if fairness is not None and (not isinstance(fairness, list) or not all(
            isinstance(f, dict) and isinstance(f.get("requirement"), str) and f.get("strength") in ("weak", "strong")
            and f.get("how") in FAIRNESS_HOW and (f.get("step") is None if f.get("how") == "disabled throughout"
                                                  else _is_int(f.get("step")))
            for f in fairness)):
        fail("must be a list of {requirement, strength: weak|strong, how: taken|disabled|disabled throughout, "
             "step: an integer, null when disabled throughout}", field="graph.lasso.fairness")
    start, trigger = lasso["cycle_start"], lasso["trigger"]
    if lasso["stutter"] and start != last:
        fail(f"a stuttering lasso's cycle is its last step ({last}), not step {start}", field="graph.lasso.cycle_start")
    if not lasso["stutter"] and not 0 <= start <= last - 1:
        fail(f"the cycle must start at a step from 0 to {last - 1}, got {start}", field="graph.lasso.cycle_start")
    if not 0 <= trigger <= start:
        fail(f"the trigger step must be between 0 and the cycle's start ({start}), got {trigger}",
             field="graph.lasso.trigger")


def _check_graph_attrs(graph: dict[str, Any], fail: Callable[..., None]) -> None:
    types = {"kind": str, "spec": str, "params": dict, "run_options": dict, "fields": list,
             "lanes": dict, "fingerprints": list, "kraftcheck_version": str, "settings": dict}
    for key, kind in types.items():
        if not isinstance(graph.get(key), kind):
            fail(f"missing or not a {kind.__name__}", field=f"graph.{key}")
    if graph["kind"] not in KINDS:
        fail(f"{graph['kind']!r} is not one of {', '.join(KINDS)}", field="graph.kind")
    violation = graph.get("violation")
    if violation is not None:
        if not isinstance(violation, dict) or not isinstance(violation.get("check"), str) \
                or violation.get("kind") not in ("invariant", "property", "liveness", "deadlock") \
                or not _is_int(violation.get("step")):
            fail("must be null or {check, kind: invariant|property|liveness|deadlock, step}", field="graph.violation")
    liveness = violation is not None and violation.get("kind") == "liveness"
    if liveness != (graph.get("lasso") is not None):
        fail("a liveness violation comes with its lasso (graph.lasso), and only a liveness violation does",
             field="graph.lasso")
    if liveness and violation["step"] != graph["lasso"].get("trigger"):
        fail("a liveness violation is recorded at its lasso's trigger step", field="graph.violation.step")
    for i, f in enumerate(graph["fields"]):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not isinstance(f.get("shape"), list) \
                or not all(_is_int(n) and n > 0 for n in f["shape"]) or not isinstance(f.get("kind"), str):
            fail("each field needs a name, a kind and a shape", field=f"graph.fields[{i}]")
        labels = f.get("index_labels")
        if labels is not None and (not isinstance(labels, list) or not f["shape"] or len(labels) != f["shape"][0]):
            fail("index_labels must name each position of the first axis", field=f"graph.fields[{i}]")
        axes = f.get("axis_labels")
        if axes is not None and (not isinstance(axes, list) or len(axes) != len(f["shape"]) or any(
                a is not None and (not isinstance(a, list) or len(a) != n) for a, n in zip(axes, f["shape"]))
                or axes[0] != labels):
            fail("axis_labels must have one entry per axis, null or a name for each position, the first equal to "
                 "index_labels", field=f"graph.fields[{i}]")
        names = f.get("axis_names")
        if names is not None and (not isinstance(names, list) or len(names) != len(f["shape"])
                                  or not all(isinstance(n, str) for n in names)):
            fail("axis_names must name each axis", field=f"graph.fields[{i}]")
        if f.get("lo") is not None and not _is_int(f["lo"]):
            fail("lo, the field's smallest value, must be an integer", field=f"graph.fields[{i}]")
    for lane, selectors in graph["lanes"].items():
        _check_names(selectors, fail, None, f"graph.lanes.{lane}")
    for i, fp in enumerate(graph["fingerprints"]):
        if not isinstance(fp, str) or not _HEX16.match(fp):
            fail("not 16 hex digits", i, "graph.fingerprints")


def _check_names(value: Any, fail: Callable[..., None], step: int | None, field: str) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        fail("missing or not a list of names", step, field)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
