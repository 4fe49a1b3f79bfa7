"""Authored scenarios: a story told as a list of actions, replayed against the spec.

A scenario file (YAML or JSON; read with ``yaml.safe_load`` / ``json``, so nothing in it runs)::

    name: last-replica-standing
    spec: kafka
    source: KIP-966, Motivation            # where the story comes from
    params: {brokers: 3, min_isr: 2}       # shared by every variant
    variants:                              # optional; default one variant "default"
      flawed: {params: {preset: kafka-3.5}, expect: {violates: [acked_write_kept]}}
      fixed:  {params: {preset: kip-966},   expect: {holds: true}}
    initial: 0                             # optional: which initial state of the spec
    steps:
      - {action: FenceBroker, params: {b: b1}, note: "T0: broker 0 leaves the ISR"}
      - "Produce(acks=all)"                # or Name(p=v, ...) as one string
      - {action: ElectLeader, only: [fixed]}  # a step taken in some variants only

Expectations: ``violates: [checks]`` (every step runs and each named check fails somewhere),
``holds: true`` (every step runs and every check holds throughout), ``blocked_at: N`` (step N,
counted from 1 among the variant's steps, is not enabled: the protocol refuses the move; every
check holds before it). Each variant becomes a trace graph of kind ``scenario`` that ``show``,
``render`` and ``export`` read like any counterexample.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import networkx as nx
import yaml

from kraftcheck.checker.files import open_regular, read_at_most
from kraftcheck.checker.model import Model
from kraftcheck.traces.errors import ReplayError, ScenarioError
from kraftcheck.traces.files import MAX_FILE_BYTES
from kraftcheck.traces.graph import build_trace
from kraftcheck.traces.replay import find_action, parse_params, rebuild_spec
from kraftcheck.traces.stepping import Stepper

_STEP_TEXT = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:\((.*)\))?\s*$")
EXPECT_KEYS = ("violates", "holds", "blocked_at")


@dataclass
class ScenarioStep:
    action: str
    params: dict[str, Any]
    note: Optional[str] = None
    only: Optional[list[str]] = None


@dataclass
class Scenario:
    name: str
    spec: str
    params: dict[str, Any]
    variants: dict[str, dict[str, Any]]  # name -> {params, expect}
    steps: list[ScenarioStep]
    source: str = ""
    description: str = ""
    path: str = ""
    initial: int = 0  # which of the spec's initial states the story starts from


@dataclass
class ScenarioRun:
    """One variant of a scenario, replayed."""

    scenario: Scenario
    variant: str
    graph: nx.DiGraph
    blocked_at: Optional[int]          # 1-based step that was not enabled, or None
    blocked_action: Optional[str]
    first_failure: dict[str, int] = field(default_factory=dict)  # check -> first step it fails
    expect: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # expectations not met

    @property
    def ok(self) -> bool:
        return not self.problems

    def outcome(self) -> str:
        """One line: what happened in this variant."""
        if self.blocked_at is not None:
            head = f"blocked at step {self.blocked_at}: {self.blocked_action} is not enabled"
        else:
            head = f"all {self.graph.number_of_nodes() - 1} steps ran"
        if self.first_failure:
            fails = ", ".join(f"{c} fails at step {s}" for c, s in self.first_failure.items())
            return f"{head}; {fails}"
        return f"{head}; every check holds"


def is_scenario_file(path: Union[str, Path]) -> bool:
    """YAML files are scenarios; a JSON file is one when it has ``steps`` instead of ``nodes``."""
    p = Path(path)
    if p.suffix.lower() in (".yaml", ".yml"):
        return True
    if p.suffix.lower() == ".json":
        try:
            with open_regular(p) as f:
                head = f.read(4096)
        except OSError:  # a FIFO among them, never opened: the reader that follows says what it is
            return False
        return b'"steps"' in head and b'"nodes"' not in head
    return False


def load_scenario(path: Union[str, Path]) -> Scenario:
    source = str(path)
    try:
        raw = read_at_most(path, MAX_FILE_BYTES)
        if raw is None:
            raise ScenarioError(f"file holds more than {MAX_FILE_BYTES} bytes; scenarios are at most that",
                                source=source)
        text = raw.decode()
    except OSError as e:
        raise ScenarioError(f"cannot read the file: {e.strerror or e}", source=source) from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"not text ({e}); a scenario is YAML or JSON", source=source) from None
    try:
        data = json.loads(text) if Path(path).suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError, RecursionError) as e:  # nesting deeper than the parser goes too
        raise ScenarioError(f"not valid {'JSON' if source.endswith('.json') else 'YAML'}: {e}", source=source) from None
    _refuse_expanding(data, source)
    return parse_scenario(data, source)


# values a scenario may hold, each use of a YAML alias (*name) counting its anchor's values again: a
# few lines of nested aliases ("billion laughs") load at once as shared lists and are 387 million
# values to anything that reads them (str of one took 50 s and 6 GB); a story holds hundreds
MAX_VALUES = 1_000_000


def _refuse_expanding(data: Any, source: str) -> None:
    """ScenarioError if ``data`` holds more than ``MAX_VALUES`` values, counted as a reader meets
    them (an alias's each time it is used; an alias of its own list, which never ends, too)."""
    left, pending = MAX_VALUES, [data]
    while pending:
        node = pending.pop()
        left -= 1
        if left < 0:
            raise ScenarioError(f"holds more than {MAX_VALUES:,} values, YAML aliases (*name) counted each time they "
                                "are used: a scenario is a short story, write its values out", source=source)
        if isinstance(node, dict):
            pending += node.keys()
            pending += node.values()
        elif isinstance(node, list):
            pending += node


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    def fail(reason: str, step: Optional[int] = None, where: Optional[str] = None):
        raise ScenarioError(reason, step, where, source)

    if not isinstance(data, dict):
        fail("a scenario is a mapping with spec, params and steps")
    for key in data:
        if key not in ("name", "spec", "params", "variants", "steps", "source", "description", "initial"):
            fail(f"unknown key {key!r}", where=str(key))
    if not isinstance(data.get("spec"), str):
        fail("missing or not a spec name", where="spec")
    params = data.get("params") or {}
    if not isinstance(params, dict):
        fail("must be a mapping of parameter to value", where="params")
    variants = data.get("variants") or {"default": {}}
    if not isinstance(variants, dict):
        fail("must be a mapping of variant name to {params, expect}", where="variants")
    for name, v in variants.items():
        if not isinstance(v, dict) or not set(v) <= {"params", "expect", "description"}:
            fail("each variant is a mapping with params and expect", where=f"variants.{name}")
        if not isinstance(v.get("params", {}), dict):
            fail("must be a mapping", where=f"variants.{name}.params")
        expect = v.get("expect", {})
        if not isinstance(expect, dict) or not set(expect) <= set(EXPECT_KEYS):
            fail(f"expect takes {', '.join(EXPECT_KEYS)}", where=f"variants.{name}.expect")
        if "violates" in expect and not (isinstance(expect["violates"], list) and expect["violates"]
                                         and all(isinstance(c, str) for c in expect["violates"])):
            fail("must be a non-empty list of check names", where=f"variants.{name}.expect.violates")
        if "holds" in expect and expect["holds"] is not True:  # false would expect nothing at all
            fail("must be true (or left out)", where=f"variants.{name}.expect.holds")
        if "blocked_at" in expect and not (isinstance(expect["blocked_at"], int) and expect["blocked_at"] >= 1):
            fail("must be a step number (from 1)", where=f"variants.{name}.expect.blocked_at")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        fail("missing or empty: list the actions of the story", where="steps")
    steps = []
    for i, raw in enumerate(raw_steps, start=1):
        if isinstance(raw, str):
            m = _STEP_TEXT.match(raw)
            if not m:
                fail(f"{raw!r} is not Name or Name(param=value, ...)", i, "action")
            args: dict[str, Any] = {}
            for part in filter(None, (p.strip() for p in (m.group(2) or "").split(","))):
                if "=" not in part:
                    fail(f"argument {part!r} is not param=value", i, "params")
                k, v = (s.strip() for s in part.split("=", 1))
                args[k] = int(v) if re.fullmatch(r"\d+", v) else v
            steps.append(ScenarioStep(m.group(1), args))
            continue
        if not isinstance(raw, dict) or not isinstance(raw.get("action"), str):
            fail("each step is Name(param=value, ...) or a mapping with action", i, "action")
        unknown = set(raw) - {"action", "params", "note", "only"}
        if unknown:
            fail(f"unknown key {sorted(unknown)[0]!r} (a step has action, params, note, only)", i)
        only = raw.get("only")
        if only is not None and (not isinstance(only, list) or any(o not in variants for o in only)):
            fail(f"only must list variants among {', '.join(variants)}", i, "only")
        step_params = raw.get("params") or {}
        if not isinstance(step_params, dict):
            fail("must be a mapping of parameter to value", i, "params")
        note = raw.get("note")
        steps.append(ScenarioStep(raw["action"], step_params, str(note).strip() if note else None, only))
    initial = data.get("initial", 0)
    if not isinstance(initial, int) or isinstance(initial, bool):
        fail("must be the number of one of the spec's initial states (from 0)", where="initial")
    return Scenario(name=str(data.get("name") or Path(source).stem), spec=data["spec"], params=params,
                    variants=variants, steps=steps, source=str(data.get("source") or ""),
                    description=str(data.get("description") or "").strip(), path=source, initial=initial)


def run_scenario(scenario: Scenario, variant: Optional[str] = None, compiled: bool = False) -> ScenarioRun:
    """Replay one variant (the first when None) and judge it against its expectation. A function
    of the spec that raises is the spec's error (``SpecRaised``, told apart by ``stepping``), not
    kraftcheck's; any other exception is kraftcheck's own and propagates as it is."""
    name = variant or next(iter(scenario.variants))
    if name not in scenario.variants:
        raise ScenarioError(f"no variant {name!r}; this scenario has: {', '.join(scenario.variants)}",
                            source=scenario.path, field="variant")
    spec_variant = scenario.variants[name]
    params = {**scenario.params, **(spec_variant.get("params") or {})}
    try:
        spec = rebuild_spec({"spec": scenario.spec, "params": params}, defaults_for_missing=True)
    except ReplayError as e:
        raise ScenarioError(str(e), source=scenario.path, field=f"variants.{name}.params") from None
    model = Model(spec)
    stepper = Stepper(model, compiled=compiled)
    checks = model.check_names
    steps = [s for s in scenario.steps if s.only is None or name in s.only]

    initial = scenario.initial
    if not 0 <= initial < len(model.initial):
        raise ScenarioError(f"the spec has {len(model.initial)} initial state(s); initial must be "
                            f"0..{len(model.initial) - 1}", source=scenario.path, field="initial")
    state = model.initial[initial]
    path: list[tuple[Optional[int], tuple[int, ...]]] = [(None, state)]
    notes: list[Optional[str]] = [None]
    blocked_at = blocked_action = None
    for number, step in enumerate(steps, start=1):
        action = find_action(model, step.action, number, error=_scenario_error(scenario))
        values = parse_params(action, step.params, number, error=_scenario_error(scenario))
        label = model.label_for(action.name, values)
        succ = stepper.step(state, label)
        if succ is None:
            blocked_at, blocked_action = number, str(model.labels[label])
            break
        path.append((label, succ))
        notes.append(step.note)
        state = succ

    extra = {"scenario": {"name": scenario.name, "variant": name, "source": scenario.source,
                          "file": scenario.path, "expect": spec_variant.get("expect", {}),
                          "blocked": {"step": blocked_at, "action": blocked_action} if blocked_at else None}}
    graph = build_trace(model, path, kind="scenario", run_options={"scenario": scenario.name, "variant": name},
                        notes=notes, extra=extra, compiled=compiled)
    run = ScenarioRun(scenario, name, graph, blocked_at, blocked_action, expect=spec_variant.get("expect", {}))
    for i in range(graph.number_of_nodes()):
        failing = list(graph.nodes[i]["violated"]) + (list(graph.edges[i - 1, i]["violated"]) if i else [])
        for check in failing:
            run.first_failure.setdefault(check, i)
    _judge(run, checks)
    return run


def _scenario_error(scenario: Scenario):
    def make(reason: str, step: Optional[int] = None, where: Optional[str] = None) -> ScenarioError:
        return ScenarioError(reason, step, where, scenario.path)
    return make


def _judge(run: ScenarioRun, checks: list[str]) -> None:
    expect = run.expect
    if not expect and run.blocked_at is not None:  # no expectation: the story is a behaviour, every step runs
        run.problems.append(f"step {run.blocked_at} ({run.blocked_action}) is not enabled, and the variant expects "
                            f"nothing else: every step must run (if the refusal is the story, expect "
                            f"blocked_at: {run.blocked_at})")
    for check in expect.get("violates", []):
        if check not in checks:
            run.problems.append(f"expected check {check!r} does not exist (checks: {', '.join(checks)})")
        elif check not in run.first_failure:
            run.problems.append(f"expected {check} to fail, but it holds at every step")
    if expect.get("violates") and run.blocked_at is not None:
        run.problems.append(f"expected every step to run, but step {run.blocked_at} "
                            f"({run.blocked_action}) is not enabled")
    if expect.get("holds"):
        if run.blocked_at is not None:
            run.problems.append(f"expected every step to run, but step {run.blocked_at} "
                                f"({run.blocked_action}) is not enabled")
        if run.first_failure:
            run.problems.append("expected every check to hold, but " +
                                ", ".join(f"{c} fails at step {s}" for c, s in run.first_failure.items()))
    if "blocked_at" in expect:
        if run.blocked_at != expect["blocked_at"]:
            got = f"step {run.blocked_at}" if run.blocked_at else "no step"
            run.problems.append(f"expected step {expect['blocked_at']} to be refused, but {got} was")
        if run.first_failure:
            run.problems.append("expected every check to hold until the refused step, but " +
                                ", ".join(f"{c} fails at step {s}" for c, s in run.first_failure.items()))
