"""Liveness under weak fairness over a recorded state graph, with lasso counterexamples.

``after ~> eventually`` fails exactly when some reachable state satisfies ``after`` but not
``eventually`` and a fair behaviour from it never reaches ``eventually``. Such a behaviour stays,
from some point on, inside one strongly connected component of the subgraph where ``eventually``
is false, visiting it forever. Under *weak* fairness a component admits a fair run exactly when
every fair action is taken on some transition inside it or is disabled in some state of it: the
run that goes round all of it forever then never keeps an action enabled without taking it, and
if some fair action is enabled in every state of the component and never taken inside, no run
within the component is fair (one action per state suffices, so this is exact, unlike strong
fairness). Every state may stutter (TLA+ semantics), so a single state is such a component too,
fair when every fair action is disabled there. ``[]<>eventually`` is the case ``after`` = true.

So: components of the ``not eventually`` subgraph (Tarjan), their fairness from two bitmasks each
(``component_fairness``), backward reachability from the fair components' states inside the
subgraph: the *doomed* states. A violation is a doomed state where ``after`` holds; the first one
in breadth-first order has a shortest prefix. The lasso then runs, inside the subgraph, by a
shortest path to a fair component, and goes round a cycle inside it that takes or passes a state
disabling every fair action (or stutters in a state where all of them are disabled).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from kraftcheck.checker.analyses.predicates import evaluate_many
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.explore.state_graph import CompiledGraph
from kraftcheck.checker.kernels.graph import (component_fairness, quiet_states, reach, shortest_path,
                                              strongly_connected, transition_inside)
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Liveness

MAX_FAIR_ACTIONS = 64


@dataclass
class Lasso:
    """A behaviour that violates the property: from initial state ``start``, the labels ``labels``;
    the last ``len(labels) - cycle_from`` of them go round the cycle back to the state reached
    after ``cycle_from`` labels. With ``stutter``, the cycle is the last state repeated forever
    (``cycle_from == len(labels)``). ``trigger`` is the step where ``after`` held."""

    start: int
    labels: list[int]
    cycle_from: int
    stutter: bool
    trigger: int


@dataclass
class LivenessResult:
    name: str
    formula: str
    fair: list[str]
    states: int
    trigger_states: int      # states where after holds and eventually does not
    doomed_states: int       # states from which a fair behaviour never reaches eventually
    fair_components: int     # components of the "not eventually" subgraph that admit a fair run
    lasso: Optional[Lasso] = None
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return "violated" if self.lasso is not None else "holds"


def fairness_requirements(model: Model, fair: tuple[str, ...]) -> list[tuple[str, list[int]]]:
    """Each weak-fairness requirement and the labels it covers. ``fair`` entries: ``Name`` (the
    action as a whole: some instance must be taken), ``Name(*)`` (each instance on its own, TLA+'s
    ``\\A p: WF(Name(p))``) or one instance as its label reads, ``Name(p=v, ...)``."""
    names = list(dict.fromkeys(a.name for a in model.actions))
    by_text = {str(lab): i for i, lab in enumerate(model.labels)}
    out: list[tuple[str, list[int]]] = []
    for entry in dict.fromkeys(fair):
        text = entry.replace(" ", "")
        action = text[:-3] if text.endswith("(*)") else text
        if action in names:
            labels = [i for i, lab in enumerate(model.labels) if lab.action.name == action]
            if text.endswith("(*)"):
                out += [(str(model.labels[i]), [i]) for i in labels]
            else:
                out.append((action, labels))
        elif text in {t.replace(" ", "") for t in by_text}:
            i = next(i for t, i in by_text.items() if t.replace(" ", "") == text)
            out.append((str(model.labels[i]), [i]))
        else:
            raise SpecError(f"fairness names {entry!r}, which is neither an action of spec {model.spec.name} in "
                            f"these settings ({', '.join(names)}) nor one of their instances (e.g. "
                            f"{model.labels[0]}); write Name, Name(*) or an instance as a trace shows it")
    if len(out) > MAX_FAIR_ACTIONS:
        raise SpecError(f"{len(out)} weak-fairness requirements; at most {MAX_FAIR_ACTIONS} are supported")
    return out


def fairness_bits(model: Model, requirements: list[tuple[str, list[int]]]) -> np.ndarray:
    """Per label, the bits of the fairness requirements it belongs to (bit k = requirement k)."""
    bits = np.zeros(len(model.labels), np.uint64)
    for k, (_, labels) in enumerate(requirements):
        bits[labels] |= np.uint64(1) << np.uint64(k)
    return bits


def check_leads_to(graph: CompiledGraph, name: str, formula: str, fair: tuple[str, ...],
                   eventually: np.ndarray, after: Optional[np.ndarray]) -> LivenessResult:
    """``after ~> eventually`` (``after`` None: ``[]<>eventually``), each a uint8 mask per state."""
    n = graph.size
    requirements = fairness_requirements(graph.model, fair)
    label_bit = fairness_bits(graph.model, requirements)
    required = np.uint64(0)
    for b in label_bit:
        required |= b
    allowed = (eventually == 0).astype(np.uint8)
    comp = np.empty(n, np.int64)
    ncomp = strongly_connected(graph.offsets, graph.targets, allowed, comp)
    taken, disabled = component_fairness(graph.offsets, graph.targets, graph.labels, label_bit, comp, ncomp)
    fair_comp = ((taken | disabled) & required) == required
    fair_state = np.zeros(n, np.uint8)
    inside = comp >= 0
    fair_state[inside] = fair_comp[comp[inside]]
    rev_offsets, rev_sources = graph.reversed()
    doomed = np.zeros(n, np.uint8)
    reach(rev_offsets, rev_sources, fair_state, allowed, doomed)
    trigger = allowed if after is None else (allowed & after)
    bad = np.flatnonzero(doomed & trigger)
    result = LivenessResult(name=name, formula=formula, fair=[name for name, _ in requirements], states=n,
                            trigger_states=int(trigger.sum()), doomed_states=int(doomed.sum()),
                            fair_components=int(fair_comp.sum()))
    if bad.size:
        result.lasso = _lasso(graph, int(bad[0]), allowed, fair_state, comp, label_bit, required, disabled)
    return result


def _lasso(graph: CompiledGraph, v: int, allowed: np.ndarray, fair_state: np.ndarray, comp: np.ndarray,
           label_bit: np.ndarray, required: np.uint64, disabled: np.ndarray) -> Lasso:
    offsets, targets, labels = graph.offsets, graph.targets, graph.labels
    prefix = graph.labels_to(v)
    edges = list(_path(offsets, targets, v, fair_state, allowed))
    entry = int(targets[edges[-1]]) if edges else v
    c = int(comp[entry])
    in_c = (comp == c).astype(np.uint8)
    quiet = np.zeros(graph.size, np.uint8)
    if quiet_states(offsets, targets, labels, label_bit, comp, c, required, quiet):
        edges += _path(offsets, targets, entry, quiet, in_c)
        all_labels = prefix + [int(labels[e]) for e in edges]
        return Lasso(graph.initial_of(v), all_labels, len(all_labels), True, len(prefix))

    cycle: list[int] = []
    here = entry
    for k in range(64):
        bit = np.uint64(1) << np.uint64(k)
        if not required & bit:
            continue
        if disabled[c] & bit:  # pass through a state of the component where the action is disabled
            goal = np.zeros(graph.size, np.uint8)
            quiet_states(offsets, targets, labels, label_bit, comp, c, bit, goal)
            step = _path(offsets, targets, here, goal, in_c)
        else:                  # take the action inside the component
            e = transition_inside(offsets, targets, labels, label_bit, comp, c, bit)
            src = graph.source_of(e)
            goal = np.zeros(graph.size, np.uint8)
            goal[src] = 1
            step = _path(offsets, targets, here, goal, in_c) + [e]
        cycle += step
        if step:
            here = int(targets[step[-1]])
    home = np.zeros(graph.size, np.uint8)
    home[entry] = 1
    cycle += _path(offsets, targets, here, home, in_c)
    if not cycle:
        raise RuntimeError("internal: a fair component without a quiet state gave an empty cycle")
    all_labels = prefix + [int(labels[e]) for e in edges]
    cycle_from = len(all_labels)
    all_labels += [int(labels[e]) for e in cycle]
    return Lasso(graph.initial_of(v), all_labels, cycle_from, False, len(prefix))


def _path(offsets, targets, start: int, goal: np.ndarray, allowed: np.ndarray) -> list[int]:
    found = shortest_path(offsets, targets, start, goal, allowed)
    if found.shape[0] == 1 and found[0] == -1:
        raise RuntimeError("internal: no path where the analysis found one")
    return [int(e) for e in found]


def check_liveness(graph: CompiledGraph, kernels, prop: Liveness) -> LivenessResult:
    """One of the spec's liveness properties over the recorded graph."""
    return check_all(graph, kernels, [prop])[0]


def check_all(graph: CompiledGraph, kernels, props: list[Liveness]) -> list[LivenessResult]:
    """Several liveness properties; their predicates are evaluated in one pass over the states."""
    predicates = [p for prop in props for p in (prop.eventually, prop.after) if p is not None]
    masks = dict(zip(map(id, predicates), evaluate_many(graph, kernels, predicates)))
    return [check_leads_to(graph, prop.name, prop.formula(), prop.fair, masks[id(prop.eventually)],
                           masks[id(prop.after)] if prop.after is not None else None) for prop in props]
