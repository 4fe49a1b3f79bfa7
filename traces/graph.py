"""A trace as a ``networkx.DiGraph``: one node per step, one edge per transition.

Node ``i`` (0 is the initial state) carries ``state`` (the readable state: field name -> value, see
``traces.states``), ``fingerprint`` and ``violated`` (the spec's invariants that fail there).
Edge ``(i-1, i)`` carries ``action`` (its name), ``params`` (parameter name -> shown value),
``touch`` (the lane it runs on and the lanes it messages) and ``violated`` (transition properties
that fail on it). Graph attributes say what the trace is; see ``GRAPH_KEYS``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any, Mapping, Optional, Sequence

import networkx as nx

from kraftcheck.checker import __version__
from kraftcheck.checker.model import Label, Model
from kraftcheck.traces.lanes import derive_touch, element_lanes, touch_to_dict
from kraftcheck.traces.states import (element_names, field_description, fingerprint, readable_state,
                           state_fields)
from kraftcheck.traces.stepping import Stepper, spec_hook

SCHEMA = "kraftcheck-trace"
SCHEMA_VERSION = 1

# Graph attributes of every trace, and what each means.
GRAPH_KEYS = {
    "schema": "always 'kraftcheck-trace'",
    "schema_version": "format version of the file (an int)",
    "kind": "'counterexample' (found by check) or 'scenario' (authored)",
    "spec": "registered spec name; with params it rebuilds the spec",
    "params": "every spec parameter (preset, switches, bounds)",
    "settings": "the spec's constant fields (per-run settings) as shown values",
    "run_options": "every option of the run that found it (engine, limits, checks, ...)",
    "violation": "{check, kind, doc, step} of the violated check, or null",
    "kraftcheck_version": "version that wrote the trace",
    "fields": "description of every field the trace holds (name, kind, shape, domain, labels, index_labels, doc; lo "
              "when the smallest value is not 0, axis_labels when an axis after the first has labels, axis_names "
              "when the spec names the axes)",
    "lanes": "lane name -> element selectors it owns (first lane = controller / main)",
    "check_docs": "every invariant and property of the spec -> its explanation",
    "fingerprints": "fingerprint of each step's state, in order",
    "trace_id": "fingerprint of the whole trace (spec, params, actions, states)",
    "created": "UTC time the trace was written",
}


def jsonable(value: Any) -> Any:
    """Options as plain JSON values: tuples to lists, anything exotic to its text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [jsonable(v) for v in value]
        return sorted(items, key=str) if isinstance(value, (set, frozenset)) else items
    return str(value)


def trace_id(spec: str, params: Mapping[str, Any], actions: Sequence[str], fingerprints: Sequence[str]) -> str:
    """12 hex digits naming a trace: same spec, settings, actions and states -> same id."""
    text = json.dumps([spec, jsonable(params), list(actions), list(fingerprints)], sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


_last_full: list[tuple[Any, Model]] = []  # the spec traced last and its full model


def full_model(spec) -> Model:
    """The model of every check of ``spec``, whatever subset a run selected. A run writes a trace
    per violation it found, all of one spec (seven for the default Kafka check): the model, 0.1 s
    to build for the Kafka model, is built once for them. Only the last spec's is kept (a model
    holds its spec, so a cache keyed by specs would keep every one alive)."""
    last = _last_full[0] if _last_full else None  # read once: another thread may replace it
    if last is not None and last[0] is spec:
        return last[1]
    full = Model(spec)
    _last_full[:] = [(spec, full)]
    return full


def build_trace(model: Model, steps: Sequence[tuple[Optional[int], tuple[int, ...]]], *,
                kind: str = "counterexample", violation: Optional[Mapping[str, Any]] = None,
                run_options: Optional[Mapping[str, Any]] = None, notes: Optional[Sequence[str]] = None,
                extra: Optional[Mapping[str, Any]] = None, compiled: bool = False) -> nx.DiGraph:
    """The trace graph of ``steps`` = [(label or None, flat state), ...] (label None only first).

    Every invariant and property of the spec is evaluated at every step (not only those the run
    checked), so a reader sees everything that fails along the way.
    """
    spec = model.spec
    full = full_model(spec)
    stepper = Stepper(full, compiled=compiled)
    layout = full.layout
    fields = state_fields(layout)
    lanes = spec_lanes(spec)
    options = spec_hook(spec, "options")
    touch_of = StepTouch(model, lanes)

    g = nx.DiGraph()
    prints = [fingerprint(flat) for _, flat in steps]
    texts = []
    for i, (label, flat) in enumerate(steps):
        g.add_node(i, state=readable_state(layout, flat), fingerprint=prints[i],
                   violated=stepper.violated_invariants(flat))
        if notes and i < len(notes) and notes[i]:
            g.nodes[i]["note"] = notes[i]
        if i == 0:
            continue
        lab: Label = model.labels[label]
        before = steps[i - 1][1]
        params = lab.shown_params()
        g.add_edge(i - 1, i, action=lab.name, params=jsonable(params), touch=touch_of(label, before, flat),
                   violated=stepper.violated_properties(before, flat))
        texts.append(str(lab))

    g.graph.update(
        schema=SCHEMA, schema_version=SCHEMA_VERSION, kind=kind, spec=spec.name,
        params=jsonable(options),
        settings={f.name: jsonable(f.show_value(f.const)) for f in layout.fields if f.const is not None},
        run_options=jsonable(run_options or {}), violation=jsonable(violation) if violation else None,
        kraftcheck_version=__version__, fields=[field_description(f) for f in fields], lanes=lanes,
        check_docs={c.name: " ".join((c.doc or "").split()) for c in list(full.invariants) + list(full.properties)},
        fingerprints=prints, trace_id=trace_id(spec.name, options, texts, prints),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    if extra:
        g.graph.update(jsonable(extra))
    return g


def spec_lanes(spec) -> dict[str, list[str]]:
    """The trace's ``lanes``: lane name -> the element selectors it owns (``Spec.lanes``)."""
    return {lane: list(sel) for lane, sel in spec_hook(spec, "lanes").items()}


class StepTouch:
    """A step's ``touch`` (the lane it runs on, the lanes it receives from and sends to), as a
    trace records it: the spec's ``action_lanes``, else guessed from the lanes whose state changed."""

    def __init__(self, model: Model, lanes: Mapping[str, Sequence[str]]) -> None:
        self.model = model
        self.lanes = list(lanes)
        fields = state_fields(model.layout)
        self.elements = [e for f in fields for e in element_names(f)]
        self.lane_of = element_lanes(lanes, self.elements)
        self.index_of = {e: i for i, e in enumerate(name for f in model.layout.fields for name in element_names(f))}

    def __call__(self, label: int, before: Sequence[int], after: Sequence[int]) -> dict[str, Any]:
        lab: Label = self.model.labels[label]
        params = lab.shown_params()
        changed = [e for e in self.elements if before[self.index_of[e]] != after[self.index_of[e]]]
        touch = spec_hook(self.model.spec, "action_lanes", lab.name, dict(params)) or \
            derive_touch(self.lanes, [self.lane_of[e] for e in changed], params)
        return touch_to_dict(touch)


def action_text(action: str, params: Mapping[str, Any]) -> str:
    """``RMPrepare(rm=rm1)``, as the CLI and pictures show a step."""
    args = ", ".join(f"{k}={v}" for k, v in params.items())
    return f"{action}({args})" if args else action
