"""Liveness counterexamples as traces: a lasso, a prefix and a cycle, whose last edge closes the cycle.

A lasso trace is a counterexample trace (``traces.graph``) with two differences:

* its ``violation`` names a liveness property (``kind`` ``"liveness"``; ``step`` is where its
  ``after`` condition held), and the graph attribute ``lasso`` says how the behaviour goes on:
  ``{"cycle_start": k, "stutter": bool, "formula": ..., "fair": [...], "trigger": step}`` and, when
  the checker wrote it, ``fairness``: how the cycle meets each requirement (``{requirement,
  strength, how, step}``, ``checker.analyses.liveness.explain_fairness``);
* its last edge goes *back*: from the last node to node ``cycle_start``, by the action that leads
  from the last state to that node's state, so the behaviour is the prefix followed by the cycle
  forever. With ``stutter`` the behaviour stops: the last edge is a self-loop on the last node whose
  action is ``(stuttering)``, allowed because no fair action can change that state.

``replay`` (``traces.replay``) checks the closing edge and the lasso's claim: ``after`` holds at the
trigger, ``eventually`` holds at no state from there on, and every requirement is taken on the
cycle or disabled in one of its states (a strong one: in all of them).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import networkx as nx

from kraftcheck.checker.model import Model
from kraftcheck.traces.files import STUTTERING
from kraftcheck.traces.graph import build_trace


def fairness_phrase(requirements: Sequence[str]) -> str:
    """How reports introduce a property's fairness requirements (their names: plain ones are weak,
    strong ones read ``SF(...)``)."""
    if any(name.startswith("SF(") for name in requirements):
        return "fairness (weak unless marked SF) of"
    return "weak fairness of"


def lasso_length(states: int, cycle_start: int, stutter: bool) -> str:
    """How long a lasso is, as ``kraftcheck check`` and the trace commands all say it: its distinct
    states (the initial one counted, as a counterexample's), the actions between them, and how it
    goes on: the closing step (one more action, back to state ``cycle_start``, counted from 0) into a
    loop of the last states, or stuttering forever in the last. The closing step's state is the
    loop's first again, so it is not counted twice."""
    actions = f"{states - 1} action{'' if states == 2 else 's'}"
    counted = f"{states} state{'' if states == 1 else 's'} ({actions})"
    if stutter:
        return f"{counted}, then stuttering forever in the last"
    return f"{counted}, then the closing step back into a loop of the last {states - cycle_start}"


def lasso_trace(model: Model, steps: Sequence[tuple[Optional[int], tuple[int, ...]]], *, cycle_start: int,
                stutter: bool, trigger: int, check: str, formula: str, fair: Sequence[str], doc: str = "",
                run_options: Optional[Mapping[str, Any]] = None,
                fairness: Optional[Sequence[Mapping[str, Any]]] = None) -> nx.DiGraph:
    """The trace of a lasso. ``steps`` = [(label or None, flat state), ...] from the initial state
    to the end of the cycle: without ``stutter`` its last state equals ``steps[cycle_start]``'s and
    becomes the closing edge's target; with ``stutter`` the last state repeats forever."""
    if stutter:
        if cycle_start != len(steps) - 1:
            raise ValueError("a stuttering lasso's cycle is its last state")
    else:
        if not 0 <= cycle_start < len(steps) - 1 or tuple(steps[-1][1]) != tuple(steps[cycle_start][1]):
            raise ValueError("the last state of a lasso must be its cycle's first state")
        if len(steps) - 1 - cycle_start < 2:
            raise ValueError("a lasso's cycle has at least two distinct states (one is stuttering)")
    info = {"check": check, "kind": "liveness", "doc": " ".join((doc or "").split()), "step": trigger}
    lasso = {"cycle_start": cycle_start, "stutter": stutter, "formula": formula, "fair": list(fair),
             "trigger": trigger}
    if fairness is not None:  # how the cycle meets each requirement, for readers (replay checks each claim)
        lasso["fairness"] = [dict(f) for f in fairness]
    g = build_trace(model, steps, kind="counterexample", violation=info, run_options=run_options,
                    extra={"lasso": lasso})
    last = len(steps) - 1
    if stutter:
        main_lane = next(iter(g.graph["lanes"]), "")  # stuttering happens nowhere; shown on the first lane
        g.add_edge(last, last, action=STUTTERING, params={}, touch={"lane": main_lane, "receives_from": [],
                                                                    "sends_to": []}, violated=[])
        return g
    closing = dict(g.edges[last - 1, last])
    g.remove_node(last)
    g.graph["fingerprints"] = g.graph["fingerprints"][:-1]
    g.add_edge(last - 1, cycle_start, **closing)
    return g


def trace_of_lasso(graph, result, prop, run_options: Optional[Mapping[str, Any]] = None) -> nx.DiGraph:
    """The trace of the lasso a liveness check found (``checker.analyses.liveness``): ``graph`` is
    the state graph it ran over, ``result`` the ``LivenessResult``, ``prop`` the spec's ``Liveness``."""
    return trace_of_found_lasso(graph.model, graph.steps(result.lasso.start, result.lasso.labels), result, prop,
                                run_options)


def trace_of_found_lasso(model: Model, steps: Sequence[Any], result, prop,
                         run_options: Optional[Mapping[str, Any]] = None) -> nx.DiGraph:
    """``trace_of_lasso`` from the lasso's ``steps`` (``checker.explore.result.Step``s, as its
    ``Violation`` holds them), once the graph is gone."""
    lasso = result.lasso
    steps = [(s.label, tuple(s.state)) for s in steps]
    return lasso_trace(model, steps, cycle_start=lasso.cycle_from, stutter=lasso.stutter,
                       trigger=lasso.trigger, check=result.name, formula=result.formula, fair=result.fair,
                       doc=prop.doc, run_options=run_options, fairness=lasso.fairness)


def is_lasso(graph: nx.DiGraph) -> bool:
    return bool(graph.graph.get("lasso"))
