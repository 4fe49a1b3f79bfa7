"""Replay: prove a trace is a real behaviour of its spec.

The spec is rebuilt from the graph's attributes alone (registered name + parameters; nothing from
the file is executed), or, for a spec loaded from a file or module rather than registered, from
the class the caller names (``kraftcheck trace replay --spec file.py:Class``), which must carry
the name the trace holds. Then step 0 must be an initial state, every edge must name an action
instance enabled in the state before it that produces exactly the state after it, the
fingerprints and failing checks written in the file must be what the spec computes, and the
violation the file names (if any) must fail at the step it names. The first disagreement becomes
a ReplayError that names the step and field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence, Union

import networkx as nx
import numpy as np

from kraftcheck.checker.errors import KraftcheckError, SpecRaised, UsageError, spec_raised
from kraftcheck.checker.explore.concrete import replays_on, stricter_variant_finding
from kraftcheck.checker.model import Model, spec_instance
from kraftcheck.checker.spec import Action, Spec
from kraftcheck.specs import spec_class
from kraftcheck.traces.errors import ReplayError, TraceFormatError
from kraftcheck.traces.files import to_json, validate
from kraftcheck.traces.graph import StepTouch, action_text, jsonable, spec_lanes
from kraftcheck.traces.states import DecodeError, element_names, field_description, fingerprint, flat_from_readable, \
    state_fields
from kraftcheck.traces.stepping import Stepper, spec_hook


@dataclass
class StepCheck:
    """What the spec says about one step: which checks fail in its state / on its transition."""

    step: int
    action: Optional[str]  # "RMPrepare(rm=rm1)"; None for the initial state
    failing: list[str]     # invariants failing in the state, properties failing on the transition
    note: Optional[str] = None


@dataclass
class ReplayReport:
    spec: Optional[Spec]
    checks: list[str] = field(default_factory=list)  # every invariant and property evaluated
    docs: dict[str, str] = field(default_factory=dict)
    steps: list[StepCheck] = field(default_factory=list)
    violation: Optional[dict[str, Any]] = None  # as written in the file
    error: Optional[ReplayError] = None
    states: list[tuple[int, ...]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """The trace is a behaviour of its spec and reaches the violation it names (if any)."""
        return self.error is None

    def raise_for_error(self) -> "ReplayReport":
        if self.error is not None:
            raise self.error
        return self


DEADLOCK_DOC = "a deadlock: no action leads from the last state to another state"


def explained_by_spec(graph: nx.DiGraph, report: ReplayReport) -> None:
    """Give ``graph``, which ``report``'s replay vouched for, its spec's explanation of each check
    (``check_docs``, ``violation.doc``), which show, render and report print. Replay does not
    compare them with the file's, since a spec may reword a doc between versions; the file's are
    anyone's text, so a vouched trace is explained in the spec's words."""
    if not report.ok or report.spec is None:
        return
    words = {name: " ".join((doc or "").split()) for name, doc in report.docs.items()}
    graph.graph["check_docs"] = words
    violation = graph.graph.get("violation")
    if not violation:
        return
    if violation.get("kind") == "liveness":
        words = {p.name: " ".join((p.doc or "").split()) for p in spec_hook(report.spec, "liveness")}
    elif violation.get("kind") == "deadlock":
        words = {"deadlock": DEADLOCK_DOC}
    if violation.get("check") in words:
        graph.graph["violation"] = {**violation, "doc": words[violation["check"]]}


def rebuild_spec(graph_attrs: Mapping[str, Any], spec: Optional[type[Spec]] = None,
                 defaults_for_missing: bool = False) -> Spec:
    """The spec instance a trace was produced by, from its parameters and its registered name, or
    ``spec`` (a class the caller chose) when given. A name read from the file is only ever looked
    up among registered and installed specs: a trace cannot make kraftcheck import code.

    A trace must give every parameter of the spec (``kraftcheck check`` writes them all): one it
    leaves out would take today's default, which may not be the value it was found with, and its
    report would print a command that depends on that default too. Only an authored scenario, whose
    author leaves the rest to the spec's defaults, passes ``defaults_for_missing``."""
    name = graph_attrs.get("spec")
    cls = _spec_named(name) if spec is None else spec
    if spec is not None and getattr(spec, "name", None) != name:
        raise ReplayError(f"the trace is of spec {name!r}, but the spec given is {getattr(spec, 'name', spec)!r}",
                          field="graph.spec")
    params = dict(graph_attrs.get("params") or {})
    known = {f for f in cls.Params.__dataclass_fields__}
    for key in params:
        if key not in known:
            raise ReplayError(f"spec {name} has no parameter {key!r} (it has: {', '.join(sorted(known))})",
                              field=f"graph.params.{key}")
    missing = [key for key in cls.Params.__dataclass_fields__ if key not in params]
    if missing and not defaults_for_missing:
        raise ReplayError(f"the trace gives no value of spec {name}'s parameter{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(missing)}: a trace file names every parameter (kraftcheck check writes them "
                          "all), and is not replayed against today's defaults", field=f"graph.params.{missing[0]}")
    for key, value in params.items():  # JSON has lists where Params may hold tuples
        if isinstance(value, list):
            params[key] = tuple(value)
    try:
        return spec_instance(cls, params)
    except SpecRaised:  # the spec's own code failed, not the trace's parameters
        raise
    except KraftcheckError as e:
        raise ReplayError(str(e), field="graph.params") from None


def _spec_named(name: Any) -> type[Spec]:
    try:
        return spec_class(name, names_only=True)
    except KraftcheckError as e:
        raise ReplayError(f"{e}; a spec loaded from a file or module is not looked up from a trace: name "
                          "it with --spec file.py:Class (or module:Class)", field="graph.spec") from None


def parse_params(action: Action, given: Any, step: Optional[int], error=ReplayError) -> tuple[int, ...]:
    """Shown parameter values (labels or integers) of ``action`` back to the integers it takes."""
    if not isinstance(given, Mapping):
        raise error("parameters must be a mapping of name to value", step, "params")
    names = [p.name for p in action.params]
    for key in given:
        if key not in names:
            takes = ", ".join(names) or "no parameters"
            raise error(f"{action.name} has no parameter {key!r} (it takes {takes})", step, f"params.{key}")
    values = []
    for p in action.params:
        if p.name not in given:
            raise error(f"{action.name} needs parameter {p.name!r}", step, f"params.{p.name}")
        v = given[p.name]
        if p.labels is not None and isinstance(v, str):
            if v not in p.labels:
                raise error(f"{v!r} is not one of {', '.join(p.labels)}", step, f"params.{p.name}")
            values.append(p.labels.index(v))
        elif isinstance(v, int) and not isinstance(v, bool) and 0 <= v < p.count:
            if p.labels is not None and error is ReplayError:
                raise error(f"expected one of {', '.join(p.labels)}, got {v}", step, f"params.{p.name}")
            values.append(v)
        else:
            allowed = ", ".join(p.labels) if p.labels else f"0..{p.count - 1}"
            raise error(f"{v!r} is not a value of {p.name} ({allowed})", step, f"params.{p.name}")
    return tuple(values)


def find_action(model: Model, name: Any, step: Optional[int], error=ReplayError) -> Action:
    for a in model.actions:
        if a.name == name:
            return a
    raise error(f"spec {model.spec.name} has no action {name!r} (its actions: "
                f"{', '.join(a.name for a in model.actions)})", step, "action")


def first_difference(model: Model, produced: Sequence[int], written: Sequence[int]) -> tuple[str, str]:
    """(element, 'the action produces X, the trace says Y') for the first element that differs."""
    names = [n for f in model.layout.fields for n in element_names(f)]
    fields = [f for f in model.layout.fields for _ in range(f.size)]
    for i, (a, b) in enumerate(zip(produced, written)):
        if a != b:
            f = fields[i]
            return names[i], f"the action produces {f.show_value(a)!r}, the trace says {f.show_value(b)!r}"
    return "state", "states differ"


def replay(graph: nx.DiGraph, compiled: bool = False, spec: Union[type[Spec], str, None] = None) -> ReplayReport:
    """Check ``graph`` against its spec step by step; see the module docstring.

    Never raises for a bad trace: the report's ``error`` holds the first problem (``ok`` is False).
    A function of the spec that raises on a step is the spec's error (``SpecRaised``), not a verdict
    (``stepping`` tells it apart); any other exception is kraftcheck's own and propagates as it is.
    ``compiled=True`` steps through the engine's compiled actions instead of interpreting them.
    ``spec`` is the spec class, or a reference to it (``file.py:Class``, ``module:Class``), for a
    trace of a spec that is not registered; a reference is imported, so pass only your own.
    """
    cls = spec_class(spec) if isinstance(spec, str) else spec  # a bad reference is the caller's error: raises
    report = ReplayReport(spec=None)
    try:
        _replay(graph, compiled, report, cls)
    except TraceFormatError as e:
        report.error = ReplayError(e.reason, e.step, e.field)
    except ReplayError as e:
        report.error = e
    return report


def _replay(graph: nx.DiGraph, compiled: bool, report: ReplayReport, spec_cls: Optional[type[Spec]]) -> None:
    validate(json.loads(to_json(graph)))
    attrs = graph.graph
    spec = rebuild_spec(attrs, spec_cls)
    report.spec = spec
    try:
        model = Model(spec, constraints=_applied_constraints(attrs))
    except UsageError as e:  # a constraint the spec does not declare
        raise ReplayError(str(e), field="graph.run_options.constraints") from None
    stepper = Stepper(model, compiled=compiled)
    report.checks = model.check_names
    report.docs = {c.name: c.doc for c in list(model.invariants) + list(model.properties)}
    report.violation = attrs.get("violation")

    consts = {f.name: f.show_value(f.const) for f in model.layout.fields if f.const is not None}
    for name, value in attrs.get("settings", {}).items():
        if name not in consts:
            raise ReplayError(f"the spec has no setting {name!r}", field=f"graph.settings.{name}")
        if json.loads(json.dumps(consts[name])) != value:
            raise ReplayError(f"the spec's parameters give {consts[name]!r}, the file says {value!r}",
                              field=f"graph.settings.{name}")

    n = graph.number_of_nodes()
    states: list[tuple[int, ...]] = []
    # show, render, export and report draw each step on its lane with its messages, as the file's
    # lanes and touch say: they must be what the spec says, as for graph.fields
    lanes = spec_lanes(spec)
    touch_of = StepTouch(model, lanes)
    for step in range(n):
        node = graph.nodes[step]
        try:
            flat = flat_from_readable(model.layout, node["state"])
        except DecodeError as e:
            raise ReplayError(e.reason, step, e.element) from None
        states.append(flat)
        report.states.append(flat)

        # The transition is checked before the fingerprint: an edited value is then reported by
        # its own name, whether or not the editor also fixed the fingerprint.
        action = None
        failing = stepper.violated_invariants(flat)
        if step == 0:
            if flat not in model.initial:
                elem, _ = first_difference(model, model.initial[0], flat)
                raise ReplayError("not an initial state of the spec (first difference from its initial "
                                  "state is here)", 0, elem)
        else:
            edge = graph.edges[step - 1, step]
            act = find_action(model, edge["action"], step)
            values = parse_params(act, edge["params"], step)
            label = model.label_for(act.name, values)
            action = action_text(act.name, edge["params"])
            produced = stepper.step(states[step - 1], label)
            if produced is None:
                raise ReplayError(f"{action} is not enabled in the state of step {step - 1}", step, "action")
            if produced != flat:
                elem, why = first_difference(model, produced, flat)
                raise ReplayError(why, step, elem)
            _check_touch(edge, touch_of(label, states[step - 1], flat), step)
            props = stepper.violated_properties(states[step - 1], flat)
            if sorted(props) != sorted(edge["violated"]):
                raise ReplayError(f"the spec says the failing properties here are {sorted(props)}, "
                                  f"the file says {sorted(edge['violated'])}", step, "violated")
            failing = failing + props
        if fingerprint(flat) != node["fingerprint"]:
            raise ReplayError(f"the state recorded here has fingerprint {fingerprint(flat)}, the file says "
                              f"{node['fingerprint']}: the fingerprint was edited", step, "fingerprint")
        invariants_failing = [c for c in failing if c in {i.name for i in model.invariants}]
        if sorted(invariants_failing) != sorted(node["violated"]):
            raise ReplayError(f"the spec says the failing invariants here are {sorted(invariants_failing)}, "
                              f"the file says {sorted(node['violated'])}", step, "violated")
        report.steps.append(StepCheck(step, action, failing, node.get("note")))

    # after the steps: a trace of other parameters is said by the state that differs, not by the
    # field descriptions that follow from them
    _check_field_descriptions(model, attrs["fields"])
    if jsonable(lanes) != attrs["lanes"]:
        raise ReplayError(f"the spec's lanes are {jsonable(lanes)}, the file says {attrs['lanes']}", field="graph.lanes")
    violation = report.violation
    # the states the run expanded: every one but the last, which it only generated and checked
    # (a state outside the constraints is that too), unless the trace ends in a deadlock or a lasso
    expanded = n if attrs.get("lasso") is not None or (violation or {}).get("kind") == "deadlock" else n - 1
    _check_inside_constraints(stepper, states, expanded)
    if attrs.get("availability") is not None:
        _check_stuck(attrs["availability"], model, stepper, spec, states[-1], n - 1)
    if isinstance(violation, Mapping) and "stricter_variant" in violation:
        _check_stricter_variant(spec, violation["stricter_variant"], states)
    if attrs.get("lasso") is not None:
        _replay_lasso(graph, model, stepper, states, spec, touch_of)
        return
    if violation is not None and (violation["kind"] == "deadlock") != (violation["check"] == "deadlock"):
        raise ReplayError(f"a deadlock is recorded as check 'deadlock' of kind deadlock, the file says "
                          f"{violation['kind']} {violation['check']!r}", field="graph.violation.kind")
    if violation is not None and violation["kind"] == "deadlock":
        if violation["step"] != n - 1:
            raise ReplayError(f"the deadlock is recorded at step {violation['step']} but the trace ends at step "
                              f"{n - 1}", field="graph.violation.step")
        last = states[-1]
        for label in range(len(model.labels)):  # a deadlock: no successor but the state itself
            succ = stepper.step(last, label)
            if succ is not None and succ != last:
                raise ReplayError(f"the trace ends in a deadlock, but {model.labels[label]} leads from its last "
                                  "state to another state", n - 1, "violation")
        report.steps[-1].failing.append("deadlock")
        return
    if violation is not None:
        check, at = violation["check"], violation["step"]
        if check not in report.checks:
            raise ReplayError(f"spec {spec.name} has no check {check!r}", field="graph.violation.check")
        kind = "invariant" if check in {i.name for i in model.invariants} else "property"
        if violation["kind"] != kind:
            raise ReplayError(f"{check} is an {kind} of spec {spec.name}, the file says it is a {violation['kind']}"
                              if kind == "invariant" else
                              f"{check} is a transition property of spec {spec.name}, the file says it is an "
                              f"{violation['kind']}", field="graph.violation.kind")
        if at != n - 1:
            raise ReplayError(f"the violation is recorded at step {at} but the trace ends at step {n - 1}",
                              field="graph.violation.step")
        if check not in report.steps[at].failing:
            raise ReplayError(f"the trace ends here, but {violation['kind']} {check} holds: "
                              "the trace does not reach its recorded violation", at, "violation")


# what a field's description says of its values: trace show, render and export read a state through
# it (a doc may change between versions, and is not compared)
_DESCRIBING = ("name", "kind", "shape", "domain", "labels", "index_labels", "lo", "axis_labels", "axis_names")


def _check_field_descriptions(model: Model, given: Sequence[Mapping[str, Any]]) -> None:
    """The file's ``graph.fields`` are the spec's: show, render and export display a trace through
    them, so one dropped or edited would show a behaviour the replay confirmed otherwise than it is
    (a field left out shows no change at all)."""
    expected = [field_description(f) for f in state_fields(model.layout)]
    for i, (want, got) in enumerate(zip(expected, given)):
        for key in _DESCRIBING:
            if want.get(key) != got.get(key):
                raise ReplayError(f"the spec describes field {want['name']}'s {key} as {want.get(key)!r}, the file "
                                  f"says {got.get(key)!r}", field=f"graph.fields[{i}].{key}")
    if len(given) != len(expected):
        names = [f["name"] for f in expected]
        raise ReplayError(f"the spec's fields are {', '.join(names)}; the file describes {len(given)} "
                          f"({', '.join(str(f.get('name')) for f in given)})", field="graph.fields")


def _applied_constraints(attrs: Mapping[str, Any]) -> Optional[list[str]]:
    """The constraints the trace's run applied (``run_options.constraints``, every one the spec
    declares if the file does not say)."""
    names = (attrs.get("run_options") or {}).get("constraints")
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
        raise ReplayError("must be a list of constraint names", field="graph.run_options.constraints")
    return names


def _check_inside_constraints(stepper: Stepper, states: list[tuple[int, ...]], expanded: int) -> None:
    """The run keeps (and so expands) only states inside its state constraints reached by steps
    inside its action constraints: each of the first ``expanded`` states must be one, or no run
    could have taken the step after it."""
    for i in range(expanded):
        outside = stepper.outside_constraints(states[i])
        if outside:
            raise ReplayError(f"the state is outside constraint {outside[0]}, which the run applied: it keeps no "
                              "such state, so no step leaves it", i, "constraint")
        if i > 0:
            broken = stepper.outside_action_constraints(states[i - 1], states[i])
            if broken:
                raise ReplayError(f"the step breaks action constraint {broken[0]}, which the run applied: it keeps "
                                  "no state reached so, so no step leaves it", i, "constraint")


def _check_stuck(claim: Any, model: Model, stepper: Stepper, spec: Spec, last: tuple[int, ...], step: int) -> None:
    """``graph.availability`` of a stuck path (``--availability``, traces.analysis_traces): the
    trace is of the availability variant it names, and its last state is *stuck*: no state where
    the spec's availability predicate holds is reachable from it, in the state graph the run
    analysed (the states inside its constraints, by steps inside its action constraints). The
    states reachable from a stuck one are all stuck, so the search covers only the stuck region
    the claim is about."""
    where = "graph.availability"
    if not isinstance(claim, Mapping) or claim.get("stuck") is not True:
        raise ReplayError(f"a stuck path's trace says {{variant, stuck: true, available_means}}, the file says {claim!r}",
                          field=where)
    predicate = spec_hook(spec, "availability")
    if predicate is None:
        raise ReplayError(f"spec {spec.name} does not say what 'available' means (Spec.availability), but the file "
                          "says the trace ends in a stuck state", field=where)
    if claim.get("available_means") != predicate.description:
        raise ReplayError(f"the spec's availability is '{predicate.description}', the file says "
                          f"{claim.get('available_means')!r}", field=f"{where}.available_means")
    variants = spec_hook(spec, "availability_variants") or {"as configured": spec.params}
    if variants.get(claim.get("variant")) != spec.params:
        named = [name for name, params in variants.items() if params == spec.params]
        raise ReplayError(f"the trace's parameters are those of the spec's availability variant "
                          f"{' or '.join(map(repr, named)) or '(none)'}, the file says {claim.get('variant')!r}",
                          field=f"{where}.variant")
    outside = stepper.outside_constraints(last)
    if outside:
        raise ReplayError(f"the trace ends outside constraint {outside[0]}, which the run applied: no state of the "
                          "graph it analysed", step, "constraint")
    seen, frontier = {last}, [last]
    while frontier:
        state = frontier.pop()
        if _holds(model, predicate, state):
            how = "it" if state == last else "a state reachable from it"
            raise ReplayError(f"the trace is said to end in a stuck state, but '{predicate.description}' holds in "
                              f"{how}", step, f"{where}.stuck")
        for _, succ in stepper.successors(state):
            if succ in seen or stepper.outside_constraints(succ) or stepper.outside_action_constraints(state, succ):
                continue
            seen.add(succ)
            frontier.append(succ)


def _check_stricter_variant(spec: Spec, claim: Any, states: list[tuple[int, ...]]) -> None:
    """``violation.stricter_variant``: whether the real system (the spec's stricter variant,
    ``Spec.stricter_variant``) has this counterexample too, as check recorded it. A reader takes
    ``replays`` as that answer, so it is recomputed as check computes it
    (``checker.explore.concrete.replays_on``)."""
    found = spec_hook(spec, "stricter_variant")
    where = "graph.violation.stricter_variant"
    if found is None:
        raise ReplayError(f"spec {spec.name} has no stricter variant, but the file says the counterexample was "
                          "replayed on one", field=where)
    what, variant_spec = found
    expected = stricter_variant_finding(what, replays_on(Model(variant_spec), states))
    if claim != expected:
        raise ReplayError(f"replayed on the spec's stricter variant, the counterexample gives {expected}, the file "
                          f"says {claim}", field=where)


def _check_touch(edge: Mapping[str, Any], expected: Mapping[str, Any], step: int) -> None:
    """The edge's lane and messages (``touch``) are the spec's, and it holds no ``writes`` or
    ``code``: those lines are what a view in the spec's terms computes (traces.spec_terms), never
    stored in a trace file, and show would print them under the action as the records it wrote."""
    if edge["touch"] != expected:
        raise ReplayError(f"the spec places this step as {expected}, the file says {edge['touch']}", step, "touch")
    for key in ("writes", "code"):
        if key in edge:
            raise ReplayError(f"a trace file's transitions hold no {key!r} (a view in the spec's terms computes "
                              "them): the file was edited", step, key)


def _replay_lasso(graph: nx.DiGraph, model: Model, stepper: Stepper, states: list[tuple[int, ...]], spec: Spec,
                  touch_of: StepTouch) -> None:
    """A liveness counterexample (see traces.lasso): the closing edge leads back into the cycle, and
    the cycle is a fair behaviour in which the property's goal never holds after its trigger."""
    from kraftcheck.checker.analyses.liveness import fairness_requirements
    from kraftcheck.traces.files import STUTTERING
    lasso, violation = graph.graph["lasso"], graph.graph["violation"]
    last, start, trigger = len(states) - 1, lasso["cycle_start"], lasso["trigger"]
    props = {p.name: p for p in spec_hook(spec, "liveness")}
    prop = props.get(violation["check"])
    if prop is None:
        raise ReplayError(f"spec {spec.name} has no liveness property {violation['check']!r}"
                          + (f"; it has: {', '.join(props)}" if props else ""), field="graph.violation.check")
    if lasso["formula"] != prop.formula():
        raise ReplayError(f"the spec's property is {prop.formula()}, the file says {lasso['formula']}",
                          field="graph.lasso.formula")
    requirements = fairness_requirements(model, prop.fair)
    if lasso["fair"] != [req.name for req in requirements]:
        raise ReplayError(f"the spec's property assumes fairness of {[req.name for req in requirements]}, "
                          f"the file says {lasso['fair']}", field="graph.lasso.fair")

    # the cycle's transitions: (label or None for stuttering, state before, state after)
    cycle = [(_label_of(model, graph.edges[i - 1, i], i), states[i - 1], states[i]) for i in range(start + 1, last + 1)]
    edge = graph.edges[last, start]
    if lasso["stutter"]:
        if edge["action"] != STUTTERING:
            raise ReplayError(f"a stuttering lasso ends with {STUTTERING}", last, "action")
        # stuttering happens nowhere: traces.lasso shows it on the first lane
        _check_touch(edge, {"lane": next(iter(graph.graph["lanes"]), ""), "receives_from": [], "sends_to": []}, last)
    else:
        label = _label_of(model, edge, last)
        produced = stepper.step(states[last], label)
        closing = action_text(edge["action"], edge["params"])
        if produced is None:
            raise ReplayError(f"{closing}, the edge closing the cycle, is not enabled in the state of step {last}",
                              last, "action")
        if produced != states[start]:
            elem, why = first_difference(model, produced, states[start])
            raise ReplayError(f"{closing} from step {last} does not lead back to step {start}'s state: {why}",
                              last, elem)
        _check_touch(edge, touch_of(label, states[last], produced), last)
        broken = stepper.outside_action_constraints(states[last], produced)
        if broken:
            raise ReplayError(f"{closing}, the edge closing the cycle, breaks action constraint {broken[0]}, which the "
                              "run applied: the state graph has no such edge", last, "constraint")
        props_failing = stepper.violated_properties(states[last], produced)
        if sorted(props_failing) != sorted(edge["violated"]):
            raise ReplayError(f"the spec says the failing properties on the closing edge are {sorted(props_failing)}, "
                              f"the file says {sorted(edge['violated'])}", last, "violated")
        cycle.append((label, states[last], produced))

    if prop.once and trigger != 0:
        raise ReplayError(f"{prop.formula()} is about behaviours from an initial state; the trigger must be "
                          f"step 0, not step {trigger}", trigger, "lasso.trigger")
    if prop.after is not None and not _holds(model, prop.after, states[trigger]):
        raise ReplayError(f"'{prop.after.description}' does not hold at the trigger step", trigger, "lasso.trigger")
    for i in range(trigger, last + 1):
        if _holds(model, prop.eventually, states[i]):
            raise ReplayError(f"'{prop.eventually.description}' holds here, after the trigger: the behaviour does "
                              "not violate the property", i, "lasso")
    in_cycle = states[start: last + 1]
    claims = lasso.get("fairness")
    if claims is not None and [c["requirement"] for c in claims] != [req.name for req in requirements]:
        raise ReplayError(f"explains how the cycle meets {[c['requirement'] for c in claims]}, the property's "
                          f"requirements are {[req.name for req in requirements]}", start, "lasso.fairness")
    for n, req in enumerate(requirements):
        taken = any(lab in req.labels and before != after for lab, before, after in cycle)
        disabled = [all(stepper.step(s, lab) in (None, s) for lab in req.labels) for s in in_cycle]
        if claims is not None:
            _check_fairness_claim(claims[n], req, cycle, disabled, start, last)
        if req.strong and not (taken or all(disabled)):
            raise ReplayError(f"the cycle is not fair to {req.name}: it is enabled in some state of the cycle and "
                              "never taken, which strong fairness forbids", start, "lasso.fair")
        if not (taken or any(disabled)):
            raise ReplayError(f"the cycle is not fair to {req.name}: it is enabled in every state of the cycle and "
                              "never taken, which weak fairness forbids", start, "lasso.fair")


def _check_fairness_claim(claim: Mapping[str, Any], req: Any, cycle: list, disabled: list[bool], start: int,
                          last: int) -> None:
    """One entry of ``graph.lasso.fairness``, which show prints as the file says it ("Enter(p=p1)
    taken from step 2"): the step it names is on the cycle, and there the requirement's action is
    taken (the transition from that step changes the state) or disabled, as the entry says."""
    strength = "strong" if req.strong else "weak"
    said = f"{req.name} {claim['how']}" + (f" at step {claim['step']}" if claim["step"] is not None else "")
    if claim["strength"] != strength:
        raise ReplayError(f"says {req.name} is {claim['strength']}ly fair; the property's fairness of it is "
                          f"{strength}", start, "lasso.fairness")
    step = claim["step"]
    if claim["how"] == "disabled throughout":
        if not req.strong or not all(disabled):
            raise ReplayError(f"says {said}, but it is enabled in a state of the cycle"
                              if req.strong else f"says {said}, which only explains a strong requirement",
                              start, "lasso.fairness")
        return
    if not start <= step <= last or (claim["how"] == "taken" and step - start >= len(cycle)):
        raise ReplayError(f"says {said}, a step outside the cycle (steps {start} to {last})", start,
                          "lasso.fairness")
    if claim["how"] == "taken":
        label, before, after = cycle[step - start]
        if label not in req.labels or before == after:
            raise ReplayError(f"says {said}, but the step from there is not {req.name} changing the state",
                              step, "lasso.fairness")
    elif not disabled[step - start]:
        raise ReplayError(f"says {said}, but it is enabled in the state of step {step}", step, "lasso.fairness")


def _holds(model: Model, predicate: Any, flat: tuple[int, ...]) -> bool:
    """Whether the spec's ``predicate`` holds in ``flat``; what its function raises is the spec's error."""
    columns = model.layout.columns(np.array([flat], np.int64))
    try:
        value = predicate.holds(columns)
    except KraftcheckError:
        raise
    except Exception as e:  # noqa: BLE001 - the spec's own function raised
        raise spec_raised(f"the predicate '{predicate.description}'", e, compiled_too=False) from None
    return bool(np.asarray(value).reshape(-1)[0])


def _label_of(model: Model, edge: Mapping[str, Any], step: int) -> int:
    act = find_action(model, edge["action"], step)
    return model.label_for(act.name, parse_params(act, edge["params"], step))
