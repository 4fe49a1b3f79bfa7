"""How much a partial-order reduction would leave out: the stubborn-set searches of
``checker/explore/partial_order.py`` against the full breadth-first search, on small Kafka
configurations and on the conformance and TLA+ Examples specs.

Per configuration: the action instances, the fraction of instance pairs independent by their read
and write sets (``checker/access.py``), the instances that may write an element a check reads
(visible), the distinct states of the full search (also run through the reference explorer, whose
counts and verdicts it must equal), of the ``visible`` reduction (Peled's C0-C3) and of the
``reach`` reduction (up-sets), each verdict compared with the full search's, and of the
``dependence`` search (no visibility condition: what the dependency relation alone would allow).
``--optimistic`` adds both with ``OptimisticClosure``, per-state commutation in place of the
static relation: not sound, a bound on what conditional independence could give. ``--commuting`` adds,
over the full graph, the fraction of pairs of instances enabled together on a state that commute
there (both orders enabled, the same state): what any reduction built on per-state independence
could at best exploit.

    .venv/bin/python bench/partial_order.py [--set small|large|all] [--commuting] [--optimistic] [--only TEXT]

Every run is plain Python (the reference explorer's speed): the small configurations take seconds
each, the large ones (12,990 and 17,345 states) up to about a minute a search. Exit 1 if a
reduction's verdict differs from the full search's.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time

from kraftcheck.checker.access import action_accesses, dependent, visible_positions
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.explore.partial_order import Closure, explore_reduced
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.invariants import kafka_invariants
from kraftcheck.pipeline import make_spec

NO_FAULTS = {"lossy_shutdowns": 0, "fences": 0, "isr_shrinks": 0, "min_isr_changes": 0}
KAFKA_INVARIANTS = [fn.__name__ for fn in kafka_invariants()]

CONFIGS = [
    # (what, spec, parameters, checks (None: all))
    ("kafka 3 brokers, min ISR 2, 1 min ISR change", "kafka", {**NO_FAULTS, "min_isr_changes": 1}, None),
    ("kafka 3 brokers, min ISR 2, 1 lossy shutdown", "kafka", {**NO_FAULTS, "lossy_shutdowns": 1}, None),
    ("kafka 3 brokers, election any, 1 min ISR change", "kafka", {**NO_FAULTS, "min_isr_changes": 1,
                                                                   "election": "any"}, None),
    ("kafka 2 brokers, 1 fence, 1 min ISR change", "kafka", {**NO_FAULTS, "brokers": 2, "fences": 1,
                                                              "min_isr_changes": 1}, None),
    ("kafka 3 brokers, min ISR 2, 1 fence", "kafka", {**NO_FAULTS, "fences": 1}, None),
    ("kafka 3 brokers, min ISR 2, 1 ISR shrink", "kafka", {**NO_FAULTS, "isr_shrinks": 1}, None),
    ("kafka 3 brokers, 1 lossy shutdown, invariants only", "kafka", {**NO_FAULTS, "lossy_shutdowns": 1},
     KAFKA_INVARIANTS),
    ("kafka 3 brokers, 1 lossy shutdown, acked_writes_survive only", "kafka", {**NO_FAULTS, "lossy_shutdowns": 1},
     ["acked_writes_survive"]),
    ("kafka 3 brokers, 1 lossy shutdown, elr_disjoint_from_isr only", "kafka", {**NO_FAULTS, "lossy_shutdowns": 1},
     ["elr_disjoint_from_isr"]),
    ("kafka 2 brokers, replay known changes (F5)", "kafka", {**NO_FAULTS, "brokers": 2, "min_isr": 1,
                                                             "replay_known_changes": True, "isr_shrinks": 1}, None),
    ("two_phase rm=3", "two_phase", {"rm": 3}, None),
    ("two_phase rm=5", "two_phase", {"rm": 5}, None),
    ("two_phase_eager_commit rm=4", "two_phase_eager_commit", {"rm": 4}, None),
    ("ewd840 n=4", "bench/specs/ewd840.py:EWD840", {"n": 4}, None),
    ("voting (MCVoting)", "bench/specs/voting.py:Voting", {}, None),
    ("simple_allocator (deadlock check off)", "bench/specs/simple_allocator.py:SimpleAllocator", {}, None),
    ("mutex (deadlock check off)", "mutex", {}, None),
    ("die_hard (deadlock check off)", "die_hard", {}, None),
]
LARGE = [
    ("kafka 2 brokers, 1 lossy shutdown, 1 fence", "kafka", {**NO_FAULTS, "brokers": 2, "lossy_shutdowns": 1,
                                                             "fences": 1}, None),
    ("kafka 3 brokers, min ISR 2, 1 fence, 1 min ISR change", "kafka", {**NO_FAULTS, "fences": 1,
                                                                         "min_isr_changes": 1}, None),
]


class OptimisticClosure(Closure):
    """Not sound, for a bound only: an enabled instance brings in just the enabled instances it
    does not commute with *on this state* (both orders enabled, one state), none of the disabled
    ones it may enable; a disabled one still brings in its necessary enabling set. A stubborn set
    built on per-state (conditional) independence from the same start holds at least these
    instances, so the counts indicate how far such a reduction could go (an indication, not a
    proof: smaller sets at each state need not mean fewer states in all)."""

    def __init__(self, successors, before, actions, sets, copy_state, layout) -> None:
        super().__init__(successors, before, actions, sets, copy_state)
        self.layout = layout
        self._against: dict[int, int] = {}

    def _fire(self, flat, lab):
        fn, values = self.actions[lab]
        layout = self.layout
        before = layout.to_object(flat)
        after = self.copy_state(before)
        return layout.from_object(after) if fn(before, after, *values) else None

    def _not_commuting(self, lab: int) -> int:
        if lab not in self._against:
            mask = 0
            for other, succ in self.successors.items():
                if other != lab and self.sets.dependents[lab] >> other & 1:
                    both = self._fire(self.successors[lab], other)
                    if both is None or both != self._fire(succ, lab):
                        mask |= 1 << other
            self._against[lab] = mask
        return self._against[lab]

    def close(self, stubborn: int, stop: int = 0) -> int:
        done = 0
        while stubborn & ~done and not stubborn & stop:
            lab = (stubborn & ~done).bit_length() - 1
            done |= 1 << lab
            stubborn |= self._not_commuting(lab) if self.enabled >> lab & 1 else self.necessary_enabling(lab)
        return stubborn


def independence(model: Model) -> tuple[int, float, int]:
    """(instances, fraction of instance pairs independent, instances writing a visible element)."""
    access = action_accesses(model)
    visible, _ = visible_positions(model)
    n = len(access)
    pairs = n * (n - 1) // 2
    independent = sum(not dependent(access[i], access[j]) for i in range(n) for j in range(i + 1, n))
    return n, independent / pairs if pairs else 1.0, sum(bool(a.writes & visible) for a in access)


def commuting(model: Model) -> tuple[int, int]:
    """Over the full graph: (pairs of distinct instances enabled on a state, those that commute
    there). A pair commutes at s when each stays enabled after the other and both orders reach
    the same state."""
    fire = InterpretedKernels(model).step  # the interpreted tier's successor (None: disabled)
    actions = model.labels

    seen, frontier = set(model.initial), list(model.initial)
    together = commute = 0
    while frontier:
        following = []
        for flat in frontier:
            succ = {lab: s for lab in range(len(actions)) if (s := fire(flat, lab)) is not None}
            labs = sorted(succ)
            for i, a in enumerate(labs):
                for b in labs[i + 1:]:
                    together += 1
                    ab, ba = fire(succ[a], b), fire(succ[b], a)
                    commute += ab is not None and ab == ba
            for s in succ.values():
                if s not in seen:
                    seen.add(s)
                    following.append(s)
        frontier = following
    return together, commute


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=("small", "large", "all"), default="small",
                    help="the configurations: seconds each (small), or the two of 12,990 and 17,345 states (large)")
    ap.add_argument("--commuting", action="store_true", help="also the fraction of co-enabled pairs that commute")
    ap.add_argument("--only", default="", help="only the configurations whose name holds this text")
    ap.add_argument("--optimistic", action="store_true",
                    help="also the reach and dependence searches with OptimisticClosure (an unsound bound)")
    args = ap.parse_args(argv)
    print("| configuration | instances | independent pairs | visible instances | full: distinct (s) "
          "| visible: distinct (x) | reach: distinct (x) | dependence only: distinct (x) "
          + ("| optimistic reach: distinct (x) | optimistic dependence: distinct (x) " if args.optimistic else "")
          + "| violated (full) | same verdicts |" + (" co-enabled pairs commuting |" if args.commuting else ""))
    print("| --- " * (10 + 2 * args.optimistic + args.commuting) + "|")
    wrong = 0
    for what, spec, params, checks in {"small": CONFIGS, "large": LARGE, "all": CONFIGS + LARGE}[args.set]:
        if args.only not in what:
            continue
        model = Model(make_spec(spec, params), check=checks, deadlock=False)
        n, independent, visible = independence(model)
        reference = ReferenceExplorer().explore(model, Options(keep_going=True))
        runs, seconds = {}, {}
        for mode in ("none", "visible", "reach", "dependence"):
            start = time.perf_counter()
            runs[mode] = explore_reduced(model, mode)
            seconds[mode] = time.perf_counter() - start
        if args.optimistic:
            optimistic = functools.partial(OptimisticClosure, layout=model.layout)
            for mode in ("reach", "dependence"):
                runs["optimistic " + mode] = explore_reduced(model, mode, closure=optimistic)
        full = runs["none"]
        expected = {v.check: len(v.steps) for v in reference.violations}  # shortest trace, in states
        same = ((full.distinct, full.generated, full.depth) == (reference.distinct_states, reference.states_generated,
                                                               reference.depth)
                and all(set(r.violated) == set(expected) and not r.undecided for m, r in runs.items()
                        if m in ("none", "visible", "reach"))
                and full.violated == runs["reach"].violated == expected)
        wrong += not same
        cells = [what, str(n), f"{independent:.1%}", f"{visible}/{n}", f"{full.distinct:,} ({seconds['none']:.1f})"]
        for mode in ("visible", "reach", "dependence"):
            r = runs[mode]
            cells.append(f"{r.distinct:,} ({full.distinct / max(1, r.distinct):.2f}x)")
        if args.optimistic:
            for mode in ("optimistic reach", "optimistic dependence"):
                r = runs[mode]
                cells.append(f"{r.distinct:,} ({full.distinct / max(1, r.distinct):.2f}x)")
        cells += [", ".join(sorted(expected)) or "none", "yes" if same else "NO"]
        if args.commuting:
            together, commute = commuting(model)
            cells.append(f"{commute:,}/{together:,} ({commute / max(1, together):.1%})")
        print("| " + " | ".join(cells) + " |", flush=True)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
