"""The machine-readable report of a run (``--json``): one flat JSON object."""

from __future__ import annotations

import json
import resource
import sys
from typing import Any, Mapping, Optional, Sequence

from kraftcheck.checker import __version__
from kraftcheck.checker.disk_full import UnwrittenFile
from kraftcheck.checker.explore.result import Result
from kraftcheck.checker.files import write_output


ERROR = "error"  # the result of a run that ended in an error after exploring


def peak_rss_bytes() -> int:
    """Peak resident memory of this process so far."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


def build_report(result: Result, run_options: Mapping[str, Any], trace_files: Mapping[str, str],
                 not_checked: Sequence[str] = (), unwritten: Sequence[UnwrittenFile] = (),
                 error: Optional[str] = None) -> dict:
    """The report of ``result``; ``not_checked``: the liveness properties the spec declares that the
    run did not check; ``unwritten``: output files a full disk refused; ``error``: what stopped the
    run after exploring (an analysis that failed): then its result is ``error``, never a verdict."""
    model = result.model
    return {
        "result": ERROR if error is not None else result.status,
        "error": error,
        # the exploration's limit, else the one that stopped an analysis after it (--liveness)
        "incomplete_reason": result.incomplete_reason or result.analysis_stopped,
        "exhaustive": result.exhaustive and error is None,
        "spec": model.spec.name,
        "params": model.spec.options(),
        "options": dict(run_options),
        "engine": result.engine,
        "kraftcheck_version": __version__,
        "checked": model.check_names,
        "initial_states": result.initial_states,
        "states_generated": result.states_generated,
        "distinct_states": result.distinct_states,
        "depth": result.depth,
        "elapsed_s": round(result.elapsed_s, 4),
        "compile_s": None if result.compile_s is None else round(result.compile_s, 4),
        "compiled_in_background": result.compiled_in_background,
        "compile_continues": result.compile_continues,
        "interpreted_states": result.interpreted_states,
        "first_tier": result.first_tier,
        "first_tier_python_because": result.first_tier_python_because,
        "fingerprints": result.fingerprints,
        "compact": result.compact,
        "collision_probability": result.collision_probability,
        "symmetry": result.symmetry,
        "checkpoint_dir": result.checkpoint_dir,
        "resumed_from_level": result.resumed_from_level,
        "resumed": result.resumed,
        "levels_spilled": result.levels_spilled,
        "spark": result.spark,
        "simulation": result.simulation,
        "states_per_s": round(result.states_per_s, 1),
        "peak_rss_bytes": peak_rss_bytes(),
        "coverage": result.coverage(),
        "never_fired": result.never_fired(),
        "violations": [
            {"invariant": v.check, "kind": v.kind, "depth": v.depth, "trace_file": trace_files.get(v.check),
             "actions": [str(model.labels[s.label]) for s in v.steps if s.label is not None],
             **({"stricter_variant": v.stricter_variant} if v.stricter_variant is not None else {}),
             **({"cycle_start": v.cycle_start} if v.cycle_start is not None else {})}
            for v in result.violations
        ],
        "liveness_not_checked": list(not_checked),
        "unwritten_files": [{"what": u.what, "path": u.path, "reason": u.reason} for u in unwritten],
    }


def error_report(model: Any, run_options: Mapping[str, Any], error: str) -> dict:
    """The report of a run that began and ended in ``error``, with no verdict (a function of the
    spec raised on a state, the compiled kernels failed): its result ``error``, what ran, and that
    it did not explore every state. The error left the counts unknown, so the report has none (a 0
    would read as counted), nor violations: a run with no verdict names none."""
    return {"result": ERROR, "error": error, "exhaustive": False, "spec": model.spec.name,
            "params": model.spec.options(), "options": dict(run_options), "kraftcheck_version": __version__,
            "checked": model.check_names}


def write_report(report: dict, path: str) -> None:
    """Write to ``path``: a file whole or not at all, ``-`` standard output, a device or FIFO
    written into (``files.write_output``)."""
    write_output(path, json.dumps(report, indent=2) + "\n")
