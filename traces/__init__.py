"""Counterexample traces: networkx graphs, files, tables, pictures, replay and authored scenarios.

Python API (see docs/traces.md)::

    g = traces.load("kraftcheck-traces/two_phase_eager_commit.tc_consistent.3f2a....json")
    g.nodes[3]["state"]["rm_state"]      # {'rm1': 'prepared', ...}
    g.edges[2, 3]["action"], g.edges[2, 3]["params"]
    report = traces.replay(g)            # report.ok, report.error, report.steps[i].failing
    traces.save(g, "copy.json")          # atomic

Used by ``kraftcheck check``: ``write_counterexample`` for every violation, ``dump_state_graph``
for ``--dump-graph``; the analyses' traces (``--availability``, ``--liveness``) by
``analysis_traces``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Union

import networkx as nx

from kraftcheck.checker.explore.result import Violation
from kraftcheck.checker.model import Model
from kraftcheck.traces.errors import ReplayError, ScenarioError, TraceError, TraceFormatError
from kraftcheck.checker.files import atomic_write
from kraftcheck.traces.files import load, save, to_json
from kraftcheck.traces.graph import SCHEMA, SCHEMA_VERSION, build_trace
from kraftcheck.traces.replay import DEADLOCK_DOC, ReplayReport, replay

__all__ = ["load", "save", "replay", "build_trace", "write_counterexample", "counterexample_file",
           "trace_from_violation",
           "dump_state_graph", "run_scenario", "load_scenario",
           "TraceError", "TraceFormatError", "ReplayError", "ScenarioError", "ReplayReport",
           "SCHEMA", "SCHEMA_VERSION", "trace_file_name"]

DEFAULT_TRACE_DIR = "kraftcheck-traces"


def trace_from_violation(model: Model, violation: Violation, run_options: Mapping[str, Any]) -> nx.DiGraph:
    """The trace graph of one violation found by an explorer."""
    checks = {c.name: ("invariant", c.doc) for c in model.invariants}
    checks.update({c.name: ("property", c.doc) for c in model.properties})
    checks["deadlock"] = ("deadlock", DEADLOCK_DOC)
    kind, doc = checks.get(violation.check, (violation.kind, ""))
    steps = [(s.label, tuple(s.state)) for s in violation.steps]
    info = {"check": violation.check, "kind": violation.kind or kind, "doc": " ".join((doc or "").split()),
            "step": len(steps) - 1}
    if violation.stricter_variant is not None:  # replayed on the spec's stricter variant (checker/explore/concrete.py)
        info["stricter_variant"] = dict(violation.stricter_variant)
    return build_trace(model, steps, kind="counterexample", violation=info, run_options=run_options)


def trace_file_name(graph: nx.DiGraph) -> str:
    """``<spec>.<check>.<trace id>.json``: the same trace always gets the same name."""
    attrs = graph.graph
    check = (attrs.get("violation") or {}).get("check", attrs.get("kind", "trace"))
    safe = [re.sub(r"[^A-Za-z0-9_-]+", "_", str(part)) for part in (attrs["spec"], check)]
    return f"{safe[0]}.{safe[1]}.{attrs['trace_id']}.json"


def write_counterexample(model: Model, violation: Violation, run_options: dict,
                         directory: Union[str, Path]) -> Path:
    """Write one violation's trace into ``directory`` (created if needed), atomically.

    Returns the file's path and notes it in ``violation.trace_file``.
    """
    path, text = counterexample_file(model, violation, run_options, directory)
    atomic_write(path, text)
    violation.trace_file = str(path)
    return path


def counterexample_file(model: Model, violation: Violation, run_options: dict,
                        directory: Union[str, Path]) -> tuple[Path, str]:
    """Where one violation's trace goes in ``directory``, and its JSON text."""
    graph = trace_from_violation(model, violation, run_options)
    return Path(directory) / trace_file_name(graph), to_json(graph)


def dump_state_graph(model: Model, path: Union[str, Path], max_states: int = None) -> dict:
    """Write the whole reachable state graph as GraphML (see traces.state_graph)."""
    from kraftcheck.traces.state_graph import DEFAULT_MAX_STATES, dump_state_graph as dump
    return dump(model, path, max_states if max_states is not None else DEFAULT_MAX_STATES)


def load_scenario(path: Union[str, Path]):
    from kraftcheck.traces.scenario import load_scenario as load_it
    return load_it(path)


def run_scenario(scenario, variant: str = None):
    from kraftcheck.traces.scenario import run_scenario as run
    return run(scenario, variant)
