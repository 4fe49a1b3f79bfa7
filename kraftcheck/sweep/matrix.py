"""The configurations of a sweep: a base (spec, parameters, run options) times the values to vary.

A matrix file (TOML) says the same as the command line::

    spec = "kafka"                                   # default: the default spec
    params = { brokers = 3, min_isr = 2 }            # every configuration's parameters, unless a row sets one
    continue = false                                 # --continue for every run
    time_limit = 600                                 # seconds per run (optional)
    fingerprints = false                             # --fingerprints for every run
    symmetry = false                                 # --symmetry for every run

    [vary]                                           # the product of these values
    min_isr_changes = [1, 0]

    [[configurations]]                               # named rows (optional; default: one, "")
    name = "kip-966"
    params = {}
    [[configurations]]
    name = "kafka-4.x"
    params = { protocol = "kafka-4.x" }

Every row is crossed with every combination of ``vary``; a row's name and the varied values name
the configuration. A row's ``params`` take the place of the top-level ones they name, and a
varied value the place of both. Values are checked against the spec's parameters, and every configuration
against what its run would refuse at its start (``check_configurations``), before anything runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from kraftcheck.checker.errors import KraftcheckError, UsageError
from kraftcheck.checker.files import CONFIG_MAX_BYTES, read_at_most
from kraftcheck.checker.limits import check_count, check_number
from kraftcheck.checker.model import spec_instance
from kraftcheck.checker.symmetry import declared_symmetry
from kraftcheck.specs import spec_class

if TYPE_CHECKING:
    from kraftcheck.request import CheckRequest

MAX_CONFIGURATIONS = 10_000
FILE_KEYS = {"spec", "params", "continue", "time_limit", "max_states", "fingerprints", "symmetry", "vary",
             "configurations"}
ROW_KEYS = {"name", "params"}


@dataclass(frozen=True)
class Configuration:
    """One run of the sweep."""

    name: str
    spec: str
    params: dict[str, Any] = field(default_factory=dict)
    keep_going: bool = False
    time_limit: Optional[float] = None
    max_states: Optional[int] = None
    fingerprints: bool = False
    symmetry: bool = False

    def request(self, trace_dir: Optional[str] = None) -> "CheckRequest":
        """What this configuration's run does (on the local engine; traces in ``trace_dir``)."""
        from kraftcheck.request import CheckRequest
        return CheckRequest(self.spec, dict(self.params), keep_going=self.keep_going, time_limit=self.time_limit,
                            max_states=self.max_states, fingerprints=self.fingerprints, symmetry=self.symmetry,
                            trace_dir=trace_dir)

    def parameter_text(self) -> str:
        """``key=value`` pairs, as ``--param`` takes them."""
        return " ".join(f"{k}={_text(v)}" for k, v in self.params.items()) or "(defaults)"


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def build(spec: str, params: dict[str, Any], rows: list[tuple[str, dict[str, Any]]],
          vary: dict[str, list[Any]], keep_going: bool = False, time_limit: Optional[float] = None,
          max_states: Optional[int] = None, fingerprints: bool = False,
          symmetry: bool = False) -> list[Configuration]:
    """Every row crossed with every combination of ``vary``, each parameter checked against the spec."""
    fields = {f.name for f in dataclasses.fields(spec_class(spec).Params)}
    for key in [*params, *vary, *(k for _, row in rows for k in row)]:
        if key not in fields:
            raise UsageError(f"spec {spec} has no parameter {key!r}; its parameters: {', '.join(fields)}")
    for key, values in vary.items():
        if not isinstance(values, list) or not values:
            raise UsageError(f"vary {key}: give a non-empty list of values")
        if len({repr(v) for v in values}) != len(values):  # the same configuration would run twice
            raise UsageError(f"vary {key}: a value is listed twice ({', '.join(map(str, values))}); list each once")
        fixed = [f"configuration {name}" if name else "--param or params" for name, row in [("", params), *rows]
                 if key in row]
        if fixed:  # the varied values would replace the fixed one without a word
            raise UsageError(f"parameter {key} is both varied and fixed ({fixed[0]}); give it one way")
    rows = rows or [("", {})]
    count = len(rows) * math.prod(len(values) for values in vary.values())
    if count > MAX_CONFIGURATIONS:  # each a check of its own: built and checked one by one before any ran, silently
        factors = ([f"{len(rows)} rows"] if len(rows) > 1 else []) + [f"{len(v)} {k}" for k, v in vary.items()]
        sizes = " x ".join(factors)
        raise UsageError(f"the matrix makes {count:,} configurations ({sizes}), more than the {MAX_CONFIGURATIONS:,} "
                         "a sweep runs, each a check of its own: vary fewer parameters or values, or split the matrix")
    names = [name for name, _ in rows]
    if len(set(names)) != len(names):
        raise UsageError("two configurations have the same name; give each row its own")
    out = []
    for name, row in rows:
        for combination in itertools.product(*vary.values()) if vary else [()]:
            varied = dict(zip(vary, combination))
            label = " ".join(filter(None, [name, *(f"{k}={_text(v)}" for k, v in varied.items())])) or "(defaults)"
            out.append(Configuration(label, spec, {**params, **row, **varied}, keep_going, time_limit, max_states,
                                     fingerprints, symmetry))
    return out


def check_configurations(configs: list[Configuration]) -> None:
    """Refuse (UsageError naming the configuration) any configuration a run would refuse at its
    start: its limits, its parameters as the spec takes them (``Params`` and the spec's own checks)
    and, with ``symmetry``, the spec's symmetry for them. Called on the whole matrix before its
    first run, so a bad last row never costs the runs before it."""
    for c in configs:
        try:
            check_number("time_limit", c.time_limit, "seconds")
            check_count("max_states", c.max_states)
            instance = spec_instance(spec_class(c.spec), dict(c.params))
            if c.symmetry:
                declared_symmetry(instance)
        except KraftcheckError as e:
            raise UsageError(f"configuration {c.name}: {e}") from None


def from_file(path: Path, spec_override: Optional[str] = None) -> list[Configuration]:
    """The configurations a matrix file describes; a bad file is one line naming what is wrong."""
    try:
        raw = read_at_most(path, CONFIG_MAX_BYTES)
        if raw is None:
            raise UsageError(f"{path} holds more than {CONFIG_MAX_BYTES} bytes, far more than a matrix file: name "
                             "the TOML file")
        data = tomllib.loads(raw.decode())
    except OSError as e:
        raise UsageError(f"cannot read the matrix file {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not text ({e}); a matrix file is TOML") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise UsageError(f"{path}: not valid TOML: nested deeper than a matrix file can be") from None
    unknown = set(data) - FILE_KEYS
    if unknown:
        raise UsageError(f"{path}: unknown key {sorted(unknown)[0]!r}; a matrix file has {', '.join(sorted(FILE_KEYS))}")
    for key, what in (("params", "a table: params = { key = value }"), ("vary", "a table: [vary] with key = [values]")):
        if not isinstance(data.get(key, {}), dict):
            raise UsageError(f"{path}: {key} must be {what}, got {data[key]!r}")
    if not isinstance(data.get("configurations", []), list):
        raise UsageError(f"{path}: configurations must be [[configurations]] tables, each a name and a params table")
    if not isinstance(data.get("spec", ""), str):
        raise UsageError(f"{path}: spec must be a name, file.py:Class or module:Class, got {data['spec']!r}")
    rows = []
    for i, row in enumerate(data.get("configurations", [])):
        if not isinstance(row, dict) or set(row) - ROW_KEYS or not isinstance(row.get("params", {}), dict):
            raise UsageError(f"{path}: configurations[{i}] takes a name and a params table only")
        rows.append((str(row.get("name", f"#{i + 1}")), dict(row.get("params", {}))))
    spec = spec_override or data.get("spec") or "kafka"
    for key in ("continue", "fingerprints", "symmetry"):
        if not isinstance(data.get(key, False), bool):
            raise UsageError(f"{path}: {key} must be true or false, got {data[key]!r}")
    return build(spec, dict(data.get("params", {})), rows, dict(data.get("vary", {})),
                 data.get("continue", False), data.get("time_limit"), data.get("max_states"),
                 data.get("fingerprints", False), data.get("symmetry", False))
