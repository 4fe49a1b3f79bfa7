"""The checks manifest: ``kraftcheck.toml``, or ``[tool.kraftcheck]`` in a ``pyproject.toml``.

Every check is validated before anything runs; an error names the file, line and key, and what to
write instead (``ManifestError``, exit 2). A manifest looks like::

    [defaults]                     # optional: applies to every check
    time_budget = 300              # seconds of exploration (--time-limit)

    [checks.two_phase]
    spec = "two_phase"             # a registered name, file.py:Class or module:Class
    params = { rm = 3 }
    expect = "holds"               # or: violates = ["invariant", ...]
    distinct = 288                 # optional counts, compared when the run is exhaustive
"""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from kraftcheck.checker.errors import SpecRaised, UsageError
from kraftcheck.checker.files import CONFIG_MAX_BYTES, not_a_file, read_at_most
from kraftcheck.checker.limits import count_problem, number_problem
from kraftcheck.checker.model import DEADLOCK, spec_call, spec_instance
from kraftcheck.checker.symmetry import declared_symmetry
from kraftcheck.request import CheckRequest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DEFAULT_MANIFEST = "kraftcheck.toml"
DEFAULT_BASELINE = "kraftcheck-baseline.json"
DEFAULT_TIME_BUDGET_S = 600.0
COUNT_KEYS = ("distinct", "generated", "depth")
# keys a check may take from [defaults]; expectations and counts belong to one check only
RUN_KEYS = ("spec", "params", "invariants", "continue", "max_states", "max_depth", "max_memory", "time_budget",
            "fingerprints", "symmetry", "liveness")
CHECK_KEYS = RUN_KEYS + ("expect", "violates") + COUNT_KEYS
TOP_KEYS = ("defaults", "checks", "baseline")
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")  # also a directory name under --out
NAME_MAX = 200  # characters: a file system's names end at 255 bytes


class ManifestError(UsageError):
    """The manifest cannot be used as written (exit 2)."""


@dataclass
class Check:
    """One named check: what to run (its request, whose ``time_limit`` is the check's time budget
    and whose spec reference is absolute) and what its result must be."""

    name: str
    request: CheckRequest
    violates: list[str] = field(default_factory=list)  # empty: the check must hold
    counts: dict[str, int] = field(default_factory=dict)  # expected distinct/generated/depth

    @property
    def expectation(self) -> str:
        return "holds" if not self.violates else "violates " + ", ".join(self.violates)

    @property
    def time_budget(self) -> float:
        return self.request.time_limit

    @property
    def spec(self) -> str:
        return self.request.spec

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.request.params)

    @property
    def invariants(self) -> list[str]:
        return list(self.request.invariants)


@dataclass
class Manifest:
    path: Path
    text: str
    table_prefix: tuple[str, ...]  # () for kraftcheck.toml, ("tool", "kraftcheck") in pyproject.toml
    checks: list[Check]
    baseline: Path

    @property
    def root(self) -> Path:
        """Spec files and modules are found relative to the manifest's directory."""
        return self.path.parent


def find_manifest(given: Optional[str]) -> Path:
    """The manifest named on the command line, else kraftcheck.toml, else pyproject.toml here."""
    if given:
        path = Path(given)
        kind = not_a_file(path)
        if kind:
            raise ManifestError(f"manifest {given} is {kind}, not a file; name the manifest's TOML file (its "
                                f"{DEFAULT_MANIFEST}, or pyproject.toml with [tool.kraftcheck])")
        if not path.is_file():
            raise ManifestError(f"manifest {given} does not exist")
        return path
    own, project = Path(DEFAULT_MANIFEST), Path("pyproject.toml")
    for here in (own, project) if not own.is_file() else ():
        kind = not_a_file(here)
        if kind:  # neither passed over for the other nor said to be missing
            raise ManifestError(f"{here} in this directory is {kind}, not a file; make it the manifest's TOML "
                                "file, or name the manifest: kraftcheck ci PATH")
    if own.is_file():
        # checks in both would have the gate pass on one file's while the other's never ran
        if project.is_file() and _has_tool_table(project):
            raise ManifestError(f"both {DEFAULT_MANIFEST} and pyproject.toml's [tool.kraftcheck] hold a manifest; "
                                f"keep one, or name the one to run: kraftcheck ci {DEFAULT_MANIFEST}")
        return own
    if project.is_file():
        return project
    raise ManifestError(f"no {DEFAULT_MANIFEST} (or pyproject.toml with [tool.kraftcheck]) in this directory; "
                        "name the manifest: kraftcheck ci PATH")


def _has_tool_table(path: Path) -> bool:
    """Whether ``path`` (a pyproject.toml) has a [tool.kraftcheck] table; one that cannot be read or
    parsed is not this command's to judge when another manifest was chosen, so it says no."""
    try:
        data = tomllib.loads((read_at_most(path, CONFIG_MAX_BYTES) or b"").decode())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    tool = data.get("tool")
    return isinstance(tool, dict) and "kraftcheck" in tool


def load(path: Path) -> Manifest:
    """Read and validate ``path``; raises ManifestError naming the line and key."""
    try:
        raw = read_at_most(path, CONFIG_MAX_BYTES)
        if raw is None:
            raise ManifestError(f"manifest {path} holds more than {CONFIG_MAX_BYTES} bytes, far more than a "
                                "manifest: name the TOML file")
        text = raw.decode()
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(f"cannot read manifest {path}: {e}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        # the message ends with "(at line L, column C)"
        raise ManifestError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise ManifestError(f"{path}: not valid TOML: nested deeper than a manifest can be") from None
    prefix: tuple[str, ...] = ()
    if path.name == "pyproject.toml":
        prefix = ("tool", "kraftcheck")
        data = data.get("tool", {}).get("kraftcheck")
        if data is None:
            raise ManifestError(f"{path} has no [tool.kraftcheck] table; add one with [tool.kraftcheck.checks.NAME] "
                                "tables, or use a kraftcheck.toml")
    return _Validator(path, text, prefix).manifest(data)


class _Validator:
    """Turns the parsed TOML into Checks, with errors that point at the line."""

    def __init__(self, path: Path, text: str, prefix: tuple[str, ...]) -> None:
        self.path, self.text, self.prefix = path, text, prefix

    def fail(self, table: tuple[str, ...], key: Optional[str], message: str) -> ManifestError:
        line = key_line(self.text, self.prefix + table, key)
        where = f"{self.path}:{line}" if line else str(self.path)
        dotted = ".".join(self.prefix + table + ((key,) if key else ()))
        return ManifestError(f"{where}: {dotted}: {message}")

    def manifest(self, data: dict) -> Manifest:
        for key in data:
            if key not in TOP_KEYS:
                raise self.fail((), key, f"unknown key; a manifest has {', '.join(TOP_KEYS)}")
        defaults = data.get("defaults", {})
        if not isinstance(defaults, dict):
            raise self.fail((), "defaults", "must be a table: [defaults]")
        for key in defaults:
            if key not in RUN_KEYS:
                raise self.fail(("defaults",), key, f"not a default; [defaults] takes {', '.join(RUN_KEYS)}")
        checks = data.get("checks")
        if not isinstance(checks, dict) or not checks:
            raise self.fail((), "checks",
                            "no checks: add at least one [checks.NAME] table with spec and an expectation")
        baseline = data.get("baseline", DEFAULT_BASELINE)
        if not isinstance(baseline, str) or not baseline:
            raise self.fail((), "baseline", "must be a file name such as \"kraftcheck-baseline.json\"")
        parsed = [self.check(name, body, defaults) for name, body in checks.items()]
        return Manifest(self.path, self.text, self.prefix, parsed, self.path.parent / baseline)

    def check(self, name: str, body: Any, defaults: dict) -> Check:
        table = ("checks", name)
        if not NAME.match(name):
            raise self.fail(table, None, "a check name may hold letters, digits, '_' and '-' only")
        if len(name) > NAME_MAX:
            raise self.fail(table, None, f"a check name is also its run directory's name under --out: give one of "
                                         f"at most {NAME_MAX} characters, not {len(name)}")
        if not isinstance(body, dict):
            raise self.fail(("checks",), name, "must be a table: [checks.NAME]")
        for key in body:
            if key not in CHECK_KEYS:
                raise self.fail(table, key, f"unknown key; a check takes {', '.join(CHECK_KEYS)}")
        for place, given in ((("defaults",), defaults), (table, body)):  # merged below: each a table first
            if not isinstance(given.get("params", {}), dict):
                raise self.fail(place, "params", f"must be a table: params = {{ key = value }}, got "
                                                  f"{given['params']!r}")
        merged = {**defaults, **body, "params": {**defaults.get("params", {}), **body.get("params", {})}}

        def where(key: str) -> tuple[str, ...]:
            return table if key in body else ("defaults",)

        def typed(key: str, kinds: tuple, what: str, ok=lambda v: True) -> Any:
            value = merged.get(key)
            if value is None:
                return None
            if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds) or not ok(value):
                raise self.fail(where(key), key, f"must be {what}, got {value!r}")
            return value

        spec = typed("spec", (str,), "a spec: a registered name, file.py:Class or module:Class", bool)
        if spec is None:
            raise self.fail(table, None, "no spec: add spec = \"NAME\" (or file.py:Class, module:Class)")
        params = merged["params"]
        if not isinstance(params, dict):
            raise self.fail(where("params"), "params", "must be a table: params = { key = value }")
        for key, value in params.items():
            if not isinstance(value, (bool, int, str)):
                raise self.fail(where("params"), "params", f"parameter {key} must be a boolean, integer or string")
        names = typed("invariants", (list,), "a list of invariant names",
                      lambda v: all(isinstance(x, str) and x for x in v)) or []
        keep_going = typed("continue", (bool,), "true or false") or False
        fingerprints = typed("fingerprints", (bool,), "true or false") or False
        symmetry = typed("symmetry", (bool,), "true or false") or False
        liveness = typed("liveness", (bool,), "true or false") or False
        if liveness and symmetry:  # as the command line refuses --liveness --symmetry, before any run
            raise self.fail(where("liveness"), "liveness", "liveness needs every state and symmetry keeps one per "
                                                           "orbit: give one of them")

        def limit(key: str, problem: Any) -> Any:  # said as the command line's options say it
            value = merged.get(key)
            why = None if value is None else problem(value)
            if why:
                raise self.fail(where(key), key, why)
            return value

        max_states = limit("max_states", count_problem)
        max_depth = limit("max_depth", count_problem)
        max_memory = limit("max_memory", lambda v: number_problem(v, "GiB"))  # TOML has nan and inf
        budget = limit("time_budget", lambda v: number_problem(v, "seconds"))
        expect, violates = body.get("expect"), body.get("violates")
        if expect is not None and violates is not None:
            raise self.fail(table, "violates", "a check expects either expect = \"holds\" or violates = [...], "
                                               "not both: remove one")
        if expect is None and violates is None:
            raise self.fail(table, None, "no expectation: add expect = \"holds\" or violates = [\"invariant\", ...]")
        if expect is not None and expect != "holds":
            raise self.fail(table, "expect", f"must be \"holds\" (for expected violations write violates = [...]), "
                                             f"got {expect!r}")
        if violates is not None:
            if not (isinstance(violates, list) and violates and all(isinstance(x, str) and x for x in violates)):
                raise self.fail(table, "violates", "must be a non-empty list of invariant names")
        counts = {}
        for key in COUNT_KEYS:
            value = body.get(key)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise self.fail(table, key, f"must be a non-negative integer, got {value!r}")
                counts[key] = value
        self.spec_and_params(table, where, spec, params, list(names), list(violates or []), symmetry, liveness)
        request = CheckRequest(resolve_spec(spec, self.path.parent), dict(params), invariants=tuple(names),
                               keep_going=keep_going, max_states=max_states, max_depth=max_depth,
                               max_memory_gib=max_memory,
                               time_limit=float(budget) if budget is not None else DEFAULT_TIME_BUDGET_S,
                               fingerprints=fingerprints, symmetry=symmetry, liveness=liveness)
        return Check(name, request, violates=list(violates or []), counts=counts)

    def spec_and_params(self, table: tuple[str, ...], where: Any, spec: str, params: dict, invariants: list[str],
                        violates: list[str], symmetry: bool = False, liveness: bool = False) -> None:
        """The spec loads (file paths relative to the manifest), knows every parameter, takes
        their values, has every invariant the check names (to check, or expected violated; with
        ``liveness``, a liveness property may be expected violated), with ``symmetry`` declares a
        symmetry for these values, and with ``liveness`` declares liveness properties."""
        from kraftcheck.specs import spec_class
        root = str(self.path.parent.resolve())
        sys.path.insert(0, root)  # module:Class is found beside the manifest, as the runner's PYTHONPATH has it
        try:
            cls = spec_class(resolve_spec(spec, self.path.parent))
        except UsageError as e:
            raise self.fail(where("spec"), "spec", str(e)) from None
        finally:
            sys.path.remove(root)
        known = {f.name: f for f in dataclasses.fields(cls.Params)}
        for key in params:
            if key not in known:
                raise self.fail(where("params"), "params",
                                f"spec {spec} has no parameter {key!r}; its parameters: {', '.join(known)}")
        try:
            instance = spec_instance(cls, params)
            checks = [x.name for x in list(spec_call(instance, "invariants")) + list(spec_call(instance, "properties"))]
            declared_liveness = [x.name for x in spec_call(instance, "liveness")]
        except SpecRaised as e:  # the spec's own code failed: its line, as a run would say it
            raise self.fail(where("spec"), "spec", str(e)) from None
        except UsageError as e:
            raise self.fail(where("params"), "params", str(e)) from None
        if symmetry:
            try:
                declared_symmetry(instance)
            except UsageError as e:
                raise self.fail(where("symmetry"), "symmetry", str(e)) from None
        if liveness and not declared_liveness:
            raise self.fail(where("liveness"), "liveness", f"spec {spec} declares no liveness property to check")
        if DEADLOCK in violates and DEADLOCK not in checks and not cls.check_deadlock:
            raise self.fail(where("violates"), "violates", f"spec {spec} does not check for deadlocks "
                                                           "(its check_deadlock is False): no deadlock can be reported")
        for key, names in (("invariants", invariants), ("violates", violates)):
            # a liveness property may be expected violated, not selected: the run's --invariant
            # knows invariants and transition properties only, and --liveness checks every one
            known = checks + declared_liveness if liveness and key == "violates" else checks
            unknown = [n for n in names if n not in known and (key, n) != ("violates", DEADLOCK)]
            if unknown and key == "invariants" and unknown[0] in declared_liveness:
                raise self.fail(where(key), key, f"{unknown[0]} is a liveness property of spec {spec}: invariants "
                                                 "selects invariants and transition properties; liveness = true "
                                                 "checks every liveness property")
            if unknown and key == "violates" and unknown[0] in declared_liveness:
                raise self.fail(where(key), key, f"{unknown[0]} is a liveness property of spec {spec}, which only a "
                                                 "check with liveness = true analyses: add it")
            if unknown:
                raise self.fail(where(key), key, f"spec {spec} has no invariant or property {unknown[0]!r}; "
                                                 f"its checks: {', '.join(known) or '(none)'}")
        unchecked = [n for n in violates if invariants and n not in invariants and n != DEADLOCK
                     and not (liveness and n in declared_liveness)]
        if unchecked:
            raise self.fail(table, "violates", f"{unchecked[0]} is expected violated but not among the invariants "
                                               f"this check checks ({', '.join(invariants)}); add it to invariants")


def resolve_spec(spec: str, root: Path) -> str:
    """``file.py:Class`` relative to the manifest's directory becomes an absolute path."""
    where, sep, name = spec.rpartition(":")
    if sep and (where.endswith(".py") or "/" in where) and not Path(where).is_absolute():
        return f"{(root / where).resolve()}:{name}"
    return spec


def key_line(text: str, table: tuple[str, ...], key: Optional[str]) -> Optional[int]:
    """The 1-based line of ``key`` in ``[table]`` (or of the table's header when key is None)."""
    current: tuple[str, ...] = ()
    header_line = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("[") and not line.startswith("[["):
            current = _header(line)
            if current == table:
                header_line = number
                if key is None:
                    return number
            continue
        if key is None:
            continue
        name = line.split("=", 1)[0].strip() if "=" in line else ""
        if current == table and name.strip('"\'') == key:
            return number
        # dotted keys written under a parent table: checks.x.spec = ... or x.spec = ...
        full = current + tuple(p.strip().strip('"\'') for p in name.split("."))
        if name and full == table + (key,):
            return number
    return header_line


def _header(line: str) -> tuple[str, ...]:
    inner = line[1:line.index("]")] if "]" in line else line[1:]
    return tuple(p.strip().strip('"\'') for p in inner.split("."))
