"""Liveness under weak and strong fairness over the state graph, with lasso counterexamples.

``after ~> eventually`` fails exactly when some reachable state satisfies ``after`` but not
``eventually`` and a fair behaviour from it never reaches ``eventually``. Such a behaviour stays,
from some point on, inside one strongly connected component of the subgraph where ``eventually``
is false, visiting some strongly connected set of its states forever. A fairness requirement is
a set of labels taken as their disjunction (``WF(A, B)``, a partly bound ``Phase2a(b=1)``). Under
*weak* fairness a component admits a fair run exactly when every requirement is taken on some
transition inside it or is disabled in some state of it: the run that goes round all of it
forever then never keeps one enabled without taking it, and no smaller set does better. Under
*strong* fairness a requirement must be taken inside or disabled in *every* state the run visits,
so a component where a strong requirement is enabled somewhere and taken nowhere may still hold
a fair run that avoids the states enabling it: those are removed and the rest decomposed again
(``fair_components``, the Emerson-Lei recursion). Every state may stutter (TLA+ semantics), so a
single state is such a component too, fair when every requirement is disabled there.
Enabled is TLC's ``ENABLED``: a requirement is enabled in a state where one of its actions has a
successor other than the state, on the spec's actions alone. Under a state or action constraint,
a step that leaves the constraints is not in the graph (never taken) but still enables its action
(the graph's leaving steps, ``CompiledGraph.leaving_bits``), as TLC evaluates ``ENABLED`` without
the constraints.
``[]<>eventually`` is the case ``after`` = true; ``<>eventually`` (``once``) the case where the
triggers are the initial states.

So: components of the ``not eventually`` subgraph (Tarjan), their fairness from bitmasks
(``component_fairness``, ``enabled_bits``), backward reachability from the fair components'
states inside the subgraph: the *doomed* states. A violation is a doomed trigger state; the first
one in breadth-first order has a shortest prefix. The lasso then runs, inside the subgraph, by a
shortest path to a fair component, and goes round a cycle inside it that takes each requirement
or passes a state disabling it (or stutters in a state where all of them are disabled);
``explain_fairness`` says which, requirement by requirement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from kraftcheck.checker.analyses.predicates import evaluate_many
from kraftcheck.checker.analyses.graph_kernels import (NO_LEAVING, component_fairness, enabled_bits, quiet_states,
                                                       reach, renumber, shortest_path, strongly_connected,
                                                       transition_inside)
from kraftcheck.checker.analyses.state_graph import CompiledGraph
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Fairness, Liveness

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
    fairness: list[dict] = field(default_factory=list)  # how the cycle meets each requirement (explain_fairness)


@dataclass
class LivenessResult:
    name: str
    formula: str
    fair: list[str]
    states: int
    trigger_states: int      # states where after holds and eventually does not
    doomed_states: int       # states from which a fair behaviour never reaches eventually
    fair_components: int     # components of the "not eventually" subgraph that admit a fair run
    requirements: list[Requirement] = field(default_factory=list)
    lasso: Optional[Lasso] = None
    notes: list[str] = field(default_factory=list)
    #: why a property that holds says nothing of any behaviour (None: it does not hold, or not so):
    #: ``after`` holds in no reachable state, or no fair behaviour passes a state that could violate it
    vacuous: Optional[str] = None

    @property
    def verdict(self) -> str:
        return "violated" if self.lasso is not None else "holds"


@dataclass(frozen=True)
class Requirement:
    """One fairness requirement: its name as reports show it, the labels whose transitions take it
    (their disjunction) and whether it is strong."""

    name: str
    labels: tuple[int, ...]
    strong: bool = False


def _instances(model: Model, text: str) -> Optional[list[int]]:
    """The labels ``text`` names (spaces ignored): an action as a whole, or ``Name(p=v, ...)``, every
    instance whose named parameters show so (the others free). None if it is not of that form."""
    if "(" not in text:
        return [i for i, lab in enumerate(model.labels) if lab.action.name == text] or None
    exact = [i for i, lab in enumerate(model.labels) if str(lab).replace(" ", "") == text]
    if exact:  # a whole label as traces show it, whatever its values look like
        return exact
    if not text.endswith(")"):
        return None
    action, _, inside = text[:-1].partition("(")
    bound: dict[str, str] = {}
    for item in inside.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key or key in bound:
            return None
        bound[key] = value
    labels = [i for i, lab in enumerate(model.labels) if lab.action.name == action]
    if not labels or not set(bound) <= {p.name for p in model.labels[labels[0]].action.params}:
        return None
    return [i for i in labels
            if all(str(model.labels[i].shown_params()[k]).replace(" ", "") == v for k, v in bound.items())] or None


def fairness_requirements(model: Model, fair, most: Optional[int] = MAX_FAIR_ACTIONS) -> list[Requirement]:
    """Each fairness requirement of ``Liveness.fair`` and the labels it covers. An entry is a
    ``Fairness`` (``WF(...)`` / ``SF(...)``: the disjunction of its names) or a plain string (weak
    fairness of that name). A name is ``Name`` (the action as a whole: some instance must be
    taken), ``Name(*)`` (each instance on its own, TLA+'s ``\\A p: WF(Name(p))``) or ``Name(p=v, ...)``,
    the instances whose parameters named show those values (all of them bound: one instance).
    A name that covers nothing is a ``SpecError`` naming the actions there are."""
    actions = list(dict.fromkeys(a.name for a in model.actions))
    out: list[Requirement] = []
    for entry in dict.fromkeys(fair):
        strong = isinstance(entry, Fairness) and entry.strong
        names = entry.actions if isinstance(entry, Fairness) else (entry,)
        texts = [name.replace(" ", "") for name in names]
        if len(texts) == 1 and texts[0].endswith("(*)") and texts[0][:-3] in actions:
            each = [i for i, lab in enumerate(model.labels) if lab.action.name == texts[0][:-3]]
            out += [Requirement(f"SF({model.labels[i]})" if strong else str(model.labels[i]), (i,), strong)
                    for i in each]
            continue
        covered: list[int] = []
        for name, text in zip(names, texts):
            found = _instances(model, text)
            if found is None:
                raise SpecError(_covers_nothing(model, name, text, actions))
            covered += found
        labels = tuple(sorted(set(covered)))
        if isinstance(entry, Fairness) and (strong or len(names) > 1):
            shown = str(entry)
        else:
            # a lone weak name reads as the name itself; a fully bound instance as its label does
            shown = str(model.labels[labels[0]]) if "(" in texts[0] and len(labels) == 1 else texts[0]
        out.append(Requirement(shown, labels, strong))
    if most is not None and len(out) > most:
        raise SpecError(f"{len(out)} fairness requirements; at most {most} are supported")
    return out


def _covers_nothing(model: Model, name: str, text: str, actions: list[str]) -> str:
    """What is wrong with a fairness name that covers no instance, and what to write instead."""
    action = text.partition("(")[0]
    if action not in actions:
        return (f"fairness names {name!r}, which is neither an action of spec {model.spec.name} in these settings "
                f"({', '.join(actions)}) nor instances of one (e.g. {model.labels[0]}); write Name, Name(*) or "
                "Name(param=value, ...)")
    params = next(a for a in model.actions if a.name == action).params
    if not params:
        return f"fairness names {name!r}, but action {action} takes no parameters; write {action}"

    def values(p) -> str:
        shown = [str(p.show(v)).replace(" ", "") for v in range(min(p.count, 8))]
        return ", ".join(shown) + (", ..." if p.count > 8 else "")

    return (f"fairness names {name!r}, which covers no instance of action {action}: its parameters are "
            f"{'; '.join(f'{p.name} in {values(p)}' for p in params)}; write {action}, {action}(*) or "
            f"{action}({params[0].name}={params[0].show(0)}{', ...' if len(params) > 1 else ''}) as traces show it")


def fairness_bits(model: Model, requirements: list[Requirement]) -> np.ndarray:
    """Per label, the bits of the fairness requirements it belongs to (bit k = requirement k)."""
    bits = np.zeros(len(model.labels), np.uint64)
    for k, req in enumerate(requirements):
        bits[list(req.labels)] |= np.uint64(1) << np.uint64(k)
    return bits


def _mask(requirements: list[Requirement], strong: bool) -> np.uint64:
    mask = 0
    for k, req in enumerate(requirements):
        if req.strong == strong:
            mask |= 1 << k
    return np.uint64(mask)


@dataclass
class FairComponents:
    """The fair parts of a subgraph: ``comp[v]``, the fair component state ``v`` belongs to (-1:
    none), and per component ``taken`` and ``disabled`` (bitmasks over the requirements, as
    ``component_fairness`` gives them)."""

    comp: np.ndarray
    taken: np.ndarray
    disabled: np.ndarray
    rounds: int = 1  # decompositions made: more than one only when strong fairness pruned states

    @property
    def count(self) -> int:
        return int(self.taken.shape[0])


def fair_components(offsets, targets, labels, label_bit, allowed, weak: np.uint64, strong: np.uint64,
                    leaving: np.ndarray = NO_LEAVING) -> FairComponents:
    """The strongly connected sets of allowed states where a run can stay forever and be fair,
    as components. A run that stays in a set S forever and takes every transition inside it is
    the fairest one there: weakly fair to k when k is taken in S or disabled somewhere in S,
    strongly fair when taken in S or disabled everywhere in S. So each component C of the allowed
    subgraph is fair when both hold for every requirement; when a weak requirement fails, no
    subset of C can do better (k stays enabled everywhere, and is taken nowhere), so C is dropped;
    when only strong requirements fail (enabled somewhere in C, never taken), a fair run within
    C must avoid the states where they are enabled: those are removed and the rest decomposed
    again (the Emerson-Lei / Streett emptiness recursion; one round under weak fairness only).
    ``leaving``: per state, the requirements its steps outside the constraints enable there
    (``CompiledGraph.leaving_bits``; empty: none)."""
    n = offsets.shape[0] - 1
    pending = allowed.astype(np.uint8, copy=True)
    final: Optional[np.ndarray] = None  # the first round's component array, renumbered in place
    all_taken: list[np.ndarray] = []
    all_disabled: list[np.ndarray] = []
    found = 0
    state_enabled = enabled_bits(offsets, targets, labels, label_bit, leaving) if strong else None
    rounds = 0
    while rounds == 0 or pending.any():
        rounds += 1
        comp = np.empty(n, np.int64)
        ncomp = strongly_connected(offsets, targets, pending, comp)
        taken, disabled = component_fairness(offsets, targets, labels, label_bit, comp, ncomp, leaving)
        weak_ok = ((taken | disabled) & weak) == weak
        unmet = np.zeros(ncomp, np.uint64)
        if strong:
            inside = comp >= 0
            np.bitwise_or.at(unmet, comp[inside], state_enabled[inside])  # enabled somewhere in it
            unmet &= strong & ~taken
        fair = weak_ok & (unmet == 0)
        prune = np.where(weak_ok & ~fair, unmet, np.uint64(0))
        pending[:] = 0
        if prune.any():  # the next round: what is left of these components without the states enabling
            inside = comp >= 0
            drop = np.zeros(n, np.uint64)
            drop[inside] = prune[comp[inside]]
            pending[:] = (drop != 0) & ((state_enabled & drop) == 0)
            del drop
        number = np.full(ncomp, -1, np.int64)
        number[fair] = found + np.arange(int(fair.sum()))
        renumber(comp, number)
        if final is None:
            final = comp
        else:
            np.maximum(final, comp, out=final)
        all_taken.append(taken[fair])
        all_disabled.append(disabled[fair])
        found += int(fair.sum())
    return FairComponents(final, np.concatenate(all_taken), np.concatenate(all_disabled), rounds)


def doomed_states(offsets, targets, rev_offsets, rev_sources, labels, label_bit, allowed, weak: np.uint64,
                  strong: np.uint64, leaving: np.ndarray = NO_LEAVING) -> tuple[np.ndarray, FairComponents]:
    """The allowed states from which a fair run can stay among allowed states forever: those that
    reach a fair component (``fair_components``) without leaving them. A uint8 mask."""
    fair = fair_components(offsets, targets, labels, label_bit, allowed, weak, strong, leaving)
    doomed = np.zeros(offsets.shape[0] - 1, np.uint8)
    reach(rev_offsets, rev_sources, (fair.comp >= 0).astype(np.uint8), allowed, doomed)
    return doomed, fair


def check_leads_to(graph: CompiledGraph, name: str, formula: str, fair, eventually: np.ndarray,
                   after: Optional[np.ndarray], once: bool = False) -> LivenessResult:
    """``after ~> eventually`` (``after`` None: ``[]<>eventually``; ``once``: ``<>eventually``, a
    violation starts at an initial state), each a uint8 mask per state."""
    n = graph.size
    requirements = fairness_requirements(graph.model, fair)
    label_bit = fairness_bits(graph.model, requirements)
    weak, strong = _mask(requirements, False), _mask(requirements, True)
    allowed = (eventually == 0).astype(np.uint8)
    rev_offsets, rev_sources = graph.reversed()
    doomed, comps = doomed_states(graph.offsets, graph.targets, rev_offsets, rev_sources, graph.labels, label_bit,
                                  allowed, weak, strong, graph.leaving_bits(label_bit))
    if once:
        trigger = np.zeros(n, np.uint8)
        trigger[:graph.initial] = allowed[:graph.initial]
    else:
        trigger = allowed if after is None else (allowed & after)
    bad = np.flatnonzero(doomed & trigger)
    result = LivenessResult(name=name, formula=formula, fair=[req.name for req in requirements], states=n,
                            trigger_states=int(trigger.sum()), doomed_states=int(doomed.sum()),
                            fair_components=comps.count, requirements=requirements)
    if bad.size:
        result.lasso = fair_lasso(graph, int(bad[0]), allowed, comps, label_bit, weak, strong)
        result.lasso.fairness = explain_fairness(graph, result.lasso, requirements)
    elif after is not None and not after.any():
        result.vacuous = "no reachable state satisfies its left side, so no behaviour can violate it"
    elif trigger.any() and requirements:
        # a "holds" that no behaviour earned: from every state where a violation would start, every
        # behaviour breaks the fairness (a requirement enabled for ever and never taken, as a step out
        # of a state constraint leaves its action), so the property constrains nothing there
        del doomed, comps  # the pass below allocates as much again
        if not (_fair_run_states(graph, label_bit, weak, strong) & trigger).any():
            where = "initial state" if once else "state"
            result.vacuous = (f"no behaviour from a reachable {where} where it could fail meets the fairness: "
                              "each keeps a requirement enabled for ever and never takes it (a step out of a "
                              "state constraint enables its action)")
    return result


def _fair_run_states(graph: CompiledGraph, label_bit: np.ndarray, weak: np.uint64, strong: np.uint64) -> np.ndarray:
    """The states a fair run can start from (a uint8 mask), computed once per fairness and graph."""
    key = (label_bit.tobytes(), int(weak), int(strong))
    if key not in graph._fair_runs:
        rev_offsets, rev_sources = graph.reversed()
        graph._fair_runs[key], _ = doomed_states(graph.offsets, graph.targets, rev_offsets, rev_sources, graph.labels,
                                                 label_bit, np.ones(graph.size, np.uint8), weak, strong,
                                                 graph.leaving_bits(label_bit))
    return graph._fair_runs[key]


def _lasso_states(graph: CompiledGraph, lasso: Lasso) -> list[int]:
    """The state ids the lasso passes, ``len(labels) + 1`` of them (actions are deterministic)."""
    ids = [lasso.start]
    for lab in lasso.labels:
        v = ids[-1]
        hit = np.flatnonzero(graph.labels[graph.offsets[v]:graph.offsets[v + 1]] == lab)
        ids.append(int(graph.targets[graph.offsets[v] + hit[0]]))
    return ids


def explain_fairness(graph: CompiledGraph, lasso: Lasso, requirements: list[Requirement]) -> list[dict]:
    """How the lasso's cycle is fair to each requirement: ``{requirement, strength, how, step}``,
    ``how`` = ``taken`` (by the action from the state of step ``step``), ``disabled`` (in the state
    of step ``step``; a stuttering lasso's last state) or, for a strong requirement never taken,
    ``disabled throughout`` (in every state of the cycle; ``step`` None)."""
    ids = _lasso_states(graph, lasso)
    cycle = range(lasso.cycle_from, len(lasso.labels) if not lasso.stutter else lasso.cycle_from + 1)

    def enabled(v: int) -> set[int]:
        lo, hi = graph.offsets[v], graph.offsets[v + 1]
        return {int(lab) for lab, w in zip(graph.labels[lo:hi], graph.targets[lo:hi]) if w != v} | graph.leaving_from(v)

    out = []
    for req in requirements:
        labels = set(req.labels)
        strength = "strong" if req.strong else "weak"
        taken = next((j for j in cycle if not lasso.stutter and lasso.labels[j] in labels and ids[j] != ids[j + 1]),
                     None)
        quiet = [j for j in cycle if not enabled(ids[j]) & labels]
        if taken is not None:
            how = {"how": "taken", "step": taken}
        elif req.strong:
            if len(quiet) != len(cycle):
                raise RuntimeError(f"internal: the lasso is not strongly fair to {req.name}")
            how = {"how": "disabled throughout", "step": None}
        else:
            if not quiet:
                raise RuntimeError(f"internal: the lasso is not weakly fair to {req.name}")
            how = {"how": "disabled", "step": quiet[0]}
        out.append({"requirement": req.name, "strength": strength, **how})
    return out


def fair_lasso(graph: CompiledGraph, v: int, allowed: np.ndarray, comps: FairComponents, label_bit: np.ndarray,
               weak: np.uint64, strong: np.uint64) -> Lasso:
    """A lasso from the doomed state ``v``: a shortest prefix to it, a shortest path inside the
    ``allowed`` states into a fair component of ``comps``, and a fair cycle there (or a stutter in
    a state of it where every requirement is disabled)."""
    offsets, targets, labels = graph.offsets, graph.targets, graph.labels
    comp, disabled, taken = comps.comp, comps.disabled, comps.taken
    required = weak | strong
    leaving = graph.leaving_bits(label_bit)
    prefix = graph.labels_to(v)
    edges = list(_path(offsets, targets, v, (comp >= 0).astype(np.uint8), allowed))
    entry = int(targets[edges[-1]]) if edges else v
    c = int(comp[entry])
    in_c = (comp == c).astype(np.uint8)
    quiet = np.zeros(graph.size, np.uint8)
    if quiet_states(offsets, targets, labels, label_bit, comp, c, required, quiet, leaving):
        edges += _path(offsets, targets, entry, quiet, in_c)
        all_labels = prefix + [int(labels[e]) for e in edges]
        return Lasso(graph.initial_of(v), all_labels, len(all_labels), True, len(prefix))

    cycle: list[int] = []
    here = entry
    for k in range(64):
        bit = np.uint64(1) << np.uint64(k)
        if not required & bit:
            continue
        # a weak requirement: pass through a state of the component where it is disabled, if any.
        # A strong one must be taken if the component takes it, since the cycle may pass states
        # where it is enabled; one the component does not take is disabled in all its states.
        if disabled[c] & bit and not (strong & bit and taken[c] & bit):
            goal = np.zeros(graph.size, np.uint8)
            quiet_states(offsets, targets, labels, label_bit, comp, c, bit, goal, leaving)
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
    """One of the spec's liveness properties over the state graph."""
    return check_all(graph, kernels, [prop])[0]


def check_all(graph: CompiledGraph, kernels, props: list[Liveness]) -> list[LivenessResult]:
    """Several liveness properties; their predicates are evaluated in one pass over the states."""
    predicates = [p for prop in props for p in (prop.eventually, prop.after) if p is not None]
    masks = dict(zip(map(id, predicates), evaluate_many(graph, kernels, predicates)))
    return [check_leads_to(graph, prop.name, prop.formula(), prop.fair, masks[id(prop.eventually)],
                           masks[id(prop.after)] if prop.after is not None else None, prop.once) for prop in props]
