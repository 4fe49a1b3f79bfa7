"""Trace files of the whole-graph analyses' findings (``checker.analyses``): the shortest path
into a stuck state of an availability variant, and the lasso of a violated liveness property.

Each is written atomically into ``trace_dir``; with ``unwritten`` (a list), a file the disk
refuses is noted there and left out (the function returns None) instead of raised.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Optional

from kraftcheck.checker.analyses.availability import VariantAvailability
from kraftcheck.checker.analyses.liveness_properties import PropertyChecked
from kraftcheck.checker.disk_full import UnwrittenFile, write_kept
from kraftcheck.checker.files import atomic_write
from kraftcheck.checker.model import Model
from kraftcheck.traces.files import to_json
from kraftcheck.traces.graph import build_trace
from kraftcheck.traces.lasso import trace_of_found_lasso


def write_stuck_trace(variant: VariantAvailability, available_means: str, trace_dir: str | Path,
                      run_options: Optional[Mapping[str, Any]] = None,
                      unwritten: Optional[list[UnwrittenFile]] = None) -> Optional[str]:
    """The trace file of ``variant``'s shortest path into a stuck state (it has one); its path."""
    model, name = variant.model, variant.name
    trace = build_trace(model, [(s.label, tuple(s.state)) for s in variant.stuck_path], kind="counterexample",
                        run_options=run_options,
                        extra={"availability": {"variant": name, "stuck": True, "available_means": available_means}})
    path = Path(trace_dir) / _file_name(model, f"stuck.{name}", trace.graph["trace_id"])
    if unwritten is None:
        atomic_write(path, to_json(trace))
        return str(path)
    if write_kept(f"the stuck path of availability variant {name}", path,
                  lambda: atomic_write(path, to_json(trace)), unwritten):
        return str(path)
    return None


def write_lasso_trace(model: Model, checked: PropertyChecked, trace_dir: str | Path,
                      run_options: Optional[Mapping[str, Any]], unwritten: list[UnwrittenFile]) -> Optional[str]:
    """The trace file of a violated liveness property's lasso; its path, or None if the disk refused it."""
    found = checked.found
    trace = trace_of_found_lasso(model, checked.violation.steps, found, checked.prop, run_options)
    path = Path(trace_dir) / _file_name(model, found.name, trace.graph["trace_id"])
    if write_kept(f"the lasso of liveness property {found.name}", path,
                  lambda: atomic_write(path, to_json(trace)), unwritten, found.name):
        return str(path)
    return None


def _file_name(model: Model, what: str, trace_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", f"{model.spec.name}.{what}")
    return f"{safe}.{trace_id}.json"
