"""Accepted findings (``kraftcheck-baseline.json``): violations a team has reviewed and accepted.

A finding is identified by its check, its invariant and the signature of its shortest
counterexample: the sha256 of its action sequence, one action per line. The same violation
reached the same shortest way keeps its signature between runs and machines; a different path to
the same invariant is a new finding.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from kraftcheck.checker.files import CONFIG_MAX_BYTES, NotARegularFileError, read_at_most, write_output
from kraftcheck.ci.manifest import ManifestError

FORMAT_VERSION = 1


def signature(actions: Iterable[str]) -> str:
    """Stable identity of a counterexample: its actions, in order."""
    return "sha256:" + hashlib.sha256("\n".join(actions).encode()).hexdigest()


@dataclass(frozen=True)
class Finding:
    check: str
    invariant: str
    signature: str
    depth: int = 0
    actions: tuple[str, ...] = ()
    # a lasso's (its report's): the step its loop starts at, counted from 0; not part of its identity
    cycle_start: Optional[int] = field(default=None, compare=False)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.check, self.invariant, self.signature)

    def to_json(self) -> dict:
        return {"check": self.check, "invariant": self.invariant, "signature": self.signature,
                "depth": self.depth, "actions": list(self.actions)}


def load(path: Path) -> list[Finding]:
    """The accepted findings; none if the file does not exist."""
    if not path.exists():
        return []
    try:
        raw = read_at_most(path, CONFIG_MAX_BYTES)
        if raw is None:
            raise ValueError(f"it holds more than {CONFIG_MAX_BYTES} bytes")
        data = json.loads(raw.decode())
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"version must be {FORMAT_VERSION}")
        return [Finding(f["check"], f["invariant"], f["signature"], int(f.get("depth", 0)),
                        tuple(f.get("actions", ()))) for f in data["findings"]]
    except NotARegularFileError as e:  # a FIFO or a device, not a damaged baseline
        raise ManifestError(f"baseline {path}: {e}") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise ManifestError(f"baseline {path} is not a kraftcheck baseline ({e}); fix it, or delete it and "
                            "run kraftcheck ci --update-baseline") from None


def save(path: Path, findings: Iterable[Finding]) -> None:
    ordered = sorted(findings, key=lambda f: f.key)
    text = json.dumps({"version": FORMAT_VERSION, "findings": [f.to_json() for f in ordered]}, indent=2) + "\n"
    write_output(path, text)  # through a symlink, which is kept
