"""Checkpoints: a run whose levels live on disk (``DiskLevels``) can be resumed from its last
finished level, whenever and however it stopped (SIGKILL included).

Before the first level (no level finished) and after each finished level the engine writes
``checkpoint.json`` atomically: which run this is
(spec, parameters, checks, state layout, labels, kraftcheck version, fingerprint mode), how many
levels are finished and their sizes, and the counters at that moment (generated, coverage,
violations found so far as state indices). The level files themselves were fsynced before, so
the manifest never names data that is not on disk. Resuming maps the finished levels, rebuilds the
visited set from their words (the visited set is exactly the union of all levels' states), drops
whatever was written after the manifest, and continues with the next level, so the run ends with
the counts, verdicts and traces of an uninterrupted one. A run stopped before its first level
was durable resumes from the initial states, and says so (``Result.resumed``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from kraftcheck.checker import __version__
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.files import atomic_write
from kraftcheck.checker.model import Model

MANIFEST = "checkpoint.json"
# identity entries that checkpoints written before them lack, with the value they had then
IDENTITY_DEFAULTS = {"symmetry": False, "constraints": []}
FORMAT = "kraftcheck-checkpoint"
FORMAT_VERSION = 1


def run_identity(model: Model, fingerprints: bool, symmetry: bool = False) -> dict[str, Any]:
    """What must be the same for a checkpoint to be resumed by a run."""
    spec = model.spec
    # a run under --symmetry holds canonical states (checkpoints older than the option say nothing:
    # IDENTITY_DEFAULTS)
    return {"symmetry": symmetry,
        "spec": spec.name,
        "params": json.loads(json.dumps(spec.options(), default=str)),
        "checks": model.check_names,
        "layout": {"nwords": model.layout.nwords, "dtype": [list(map(str, d)) for d in model.layout.dtype.descr],
                   "state_bits": model.layout.state_bits},
        "labels": len(model.labels),
        "actions": [a.name for a in model.actions],
        "fingerprints": fingerprints,
        "constraints": [c.name for c in model.constraints + model.action_constraints],
        "deadlock": model.check_deadlock,
        "kraftcheck_version": __version__,
    }


def write_manifest(directory: Path, identity: dict[str, Any], progress: dict[str, Any]) -> None:
    atomic_write(Path(directory) / MANIFEST,
                 json.dumps({"format": FORMAT, "format_version": FORMAT_VERSION, "identity": identity,
                             **progress}, indent=1) + "\n")


def read_manifest(directory: Path) -> Optional[dict[str, Any]]:
    path = Path(directory) / MANIFEST
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{path} is not a readable checkpoint ({e})") from None
    if data.get("format") != FORMAT or data.get("format_version") != FORMAT_VERSION:
        raise UsageError(f"{path} is not a kraftcheck checkpoint of format {FORMAT_VERSION}")
    return data


def check_new_checkpoint_dir(directory: Path) -> None:
    """A new run writes its checkpoint into an empty (or new) directory, never over another run's."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--checkpoint {directory} exists and is not a directory")
    if (directory / MANIFEST).exists():
        raise UsageError(f"--checkpoint {directory} already holds a checkpoint: continue it with --resume "
                         f"{directory}, or give an empty directory")
    if directory.exists() and any(directory.iterdir()):
        raise UsageError(f"--checkpoint {directory} is not empty; give an empty or new directory")


def check_resumable(directory: Path, identity: dict[str, Any]) -> dict[str, Any]:
    """The manifest of a checkpoint this run may resume; a clear refusal otherwise."""
    manifest = read_manifest(directory)
    if manifest is None:
        raise UsageError(f"--resume {directory}: no checkpoint there ({MANIFEST} is missing)")
    theirs = manifest["identity"]
    differ = [key for key in identity if theirs.get(key, IDENTITY_DEFAULTS.get(key)) != identity[key]]
    if differ:
        details = "; ".join(f"{key}: checkpoint {_short(theirs.get(key))}, this run {_short(identity[key])}"
                            for key in differ)
        raise UsageError(f"--resume {directory}: the checkpoint belongs to another run ({details}); resume it "
                         "with the same spec, parameters, checks and kraftcheck version")
    if manifest.get("finished"):
        raise UsageError(f"--resume {directory}: that run already finished ({manifest.get('status')}); "
                         "nothing to resume")
    return manifest


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
