"""A trace in its spec's own terms: the hook ``Spec.trace_terms`` and the graph it gives.

A spec that knows how its domain speaks (the Kafka spec: ISR, ELR, leader epoch, partition
epoch, the record each step writes) fills ``Spec.trace_terms(model, steps)``; this module rebuilds
the spec from the trace (as replay does: registered name and parameters, nothing from the file is
executed), hands it the decoded steps, and turns the answer into a trace graph of the same shape
as the file's, so that ``show``, ``render`` and ``export`` read it unchanged. The graph keeps the
file's ``violation``, checks, fingerprints and notes, and adds ``terms`` (whose terms), per edge
``writes`` (what the step writes or sends, one line each) and ``real_epochs``. A spec without the
hook, or a trace whose spec cannot be rebuilt, is shown as it is.

What the hook returns (plain data, so a spec needs nothing from this layer): ``terms`` (a name),
``fields`` (field descriptions as in a trace file), ``lanes`` (lane -> element selectors),
``lane_names`` (the file's lane -> its lane here), ``states`` (one readable state per step),
``writes`` and ``params`` (per step, step 0 empty), optionally ``code`` (per step, the code paths
it stands for), ``real_epochs`` and ``notes``.
"""

from __future__ import annotations

from typing import Any, Optional

import networkx as nx

from kraftcheck.checker.errors import KraftcheckError, SpecError, spec_raised
from kraftcheck.checker.model import Model
from kraftcheck.traces.graph import jsonable
from kraftcheck.traces.replay import _label_of, rebuild_spec
from kraftcheck.traces.states import flat_from_readable

HOOK = "trace_terms"


def decoded_steps(graph: nx.DiGraph, model: Model) -> list[tuple[Optional[int], tuple[int, ...]]]:
    """[(label or None, flat state), ...] of a trace file's graph."""
    steps = []
    for i in sorted(graph.nodes):
        flat = flat_from_readable(model.layout, graph.nodes[i]["state"])
        steps.append((None if i == 0 else _label_of(model, graph.edges[i - 1, i], i), flat))
    return steps


def spec_terms(graph: nx.DiGraph, spec_cls: Optional[type] = None) -> Optional[dict[str, Any]]:
    """What the trace's spec (its registered name's, or ``spec_cls``: a command's --spec) says of
    it in its own terms, or None (no hook, or no spec here). A hook that raises is the spec's error
    (``SpecRaised``, with its file and line), never a rendering silently in other terms."""
    if graph.graph.get("terms") or graph.graph.get("lasso") is not None:
        return None
    try:
        spec = rebuild_spec(graph.graph, spec_cls)
    except (KraftcheckError, ValueError, TypeError):
        return None
    hook = getattr(spec, HOOK, None)
    if hook is None:
        return None
    model = Model(spec)
    settings = {f.name: jsonable(f.show_value(f.const)) for f in model.layout.fields if f.const is not None}
    if settings != graph.graph.get("settings", settings):
        return None  # the spec changed since the trace was written: what it says now may not be what ran
    try:
        steps = decoded_steps(graph, model)
    except (KraftcheckError, ValueError):  # a file of an older layout of the spec: shown as written
        return None
    try:
        return hook(model, steps)
    except (KraftcheckError, MemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - the spec's code raised: its error, with its line
        raise spec_raised(f"{HOOK}() of spec {spec.name}", e, compiled_too=False) from None


def in_spec_terms(graph: nx.DiGraph, model_names: bool = False, spec_cls: Optional[type] = None) -> nx.DiGraph:
    """The trace as its spec's domain speaks (see the module docstring), or ``graph`` itself with
    ``model_names`` or when the spec offers no translation. ``spec_cls``: the spec, where its name
    is not registered (a command's --spec)."""
    if model_names:
        return graph
    terms = spec_terms(graph, spec_cls)
    if terms is None:
        return graph
    try:
        return _graph_of(graph, terms)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        raise SpecError(f"{HOOK}() of spec {graph.graph.get('spec')} returned what no trace can be built from "
                        f"({type(e).__name__}: {e}); what it returns is described in traces/spec_terms.py") from None


def _graph_of(graph: nx.DiGraph, terms: dict[str, Any]) -> nx.DiGraph:
    """``in_spec_terms``'s graph from what the hook returned."""
    lane_names = terms.get("lane_names", {})
    g = nx.DiGraph()
    g.graph.update(graph.graph)
    g.graph.update(terms=terms["terms"], fields=jsonable(terms["fields"]), lanes=jsonable(terms["lanes"]),
                   real_epochs=bool(terms.get("real_epochs", False)), terms_notes=list(terms.get("notes", [])),
                   model_settings=graph.graph.get("settings"))
    for i in sorted(graph.nodes):
        node = dict(graph.nodes[i])
        node["state"] = jsonable(terms["states"][i])
        g.add_node(i, **node)
    for u, v, data in graph.edges(data=True):
        edge = dict(data)
        if v == u + 1:
            edge["params"] = jsonable(terms["params"][v])
            edge["writes"] = list(terms["writes"][v])
            if terms.get("code"):
                edge["code"] = list(terms["code"][v])
        touch = edge.get("touch")
        if touch:
            edge["touch"] = {"lane": lane_names.get(touch["lane"], touch["lane"]),
                             "receives_from": [lane_names.get(x, x) for x in touch.get("receives_from", [])],
                             "sends_to": [lane_names.get(x, x) for x in touch.get("sends_to", [])]}
        g.add_edge(u, v, **edge)
    return g
