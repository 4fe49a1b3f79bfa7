"""A liveness predicate computes on the graph as it does on the initial states and in a replay.

``Predicate.holds`` receives its states as numpy columns. On the initial states (the check made
before exploring), in a lasso's replay and in the networkx reference those columns are int64;
on the recorded graph (``predicates.evaluate_many``) they were the unpacked int32 rows, so numpy
arithmetic in a predicate wrapped at 2**31 there and nowhere else: the verdict was computed on
other numbers than the ones the spec's fields hold, and the lasso written for it failed its own
replay ("'b * b > 2e9' holds here, after the trigger").

TLA+'s integers are unbounded: b = 50000 after Grow, b * b = 2,500,000,000 > 2,000,000,000, so
``<>(b * b > 2000000000)`` under WF(Grow) holds (Grow is enabled at b = 0 and weakly fair, so
every fair behaviour takes it). TLC (which computes with 32-bit integers) stops with an overflow
error rather than a wrapped answer; it never reports a violation here. kraftcheck reported
"liveness property violated", a lasso that stutters at b = 50000.

The spec is tiny and every run is in-process with the spec's functions as Python: nothing here
compiles a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck import WF, Action, Int, Liveness, Predicate, Spec, param
from kraftcheck.checker.analyses.liveness import check_all
from kraftcheck.checker.analyses.predicates import evaluate_one
from kraftcheck.checker.analyses.state_graph import build_graph
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model


@njit(cache=True)
def grow(s, t):
    if s.b != 0:
        return False
    t.b = 50000
    return True


@dataclass(frozen=True)
class GrowParams:
    unused: int = param(0, "no parameter")


BIG = Predicate("b * b > 2e9", lambda v: v["b"] * v["b"] > 2_000_000_000)


class Grows(Spec):
    """b goes from 0 to 50000 in one weakly fair step, and stays there."""

    name = "grows_big"
    summary = "b jumps to 50000; <>(b * b > 2e9) under WF(Grow)"
    Params = GrowParams
    check_deadlock = False

    def fields(self):
        return [Int("b", 60000)]

    def initial_states(self):
        yield {"b": 0}

    def actions(self):
        return [Action("Grow", grow)]

    def liveness(self):
        return [Liveness("gets_big", BIG, once=True, fair=(WF("Grow"),))]


def test_a_predicate_computes_in_64_bits_on_the_graph_as_on_the_initial_states():
    model = Model(Grows(Grows.Params()))
    kernels = InterpretedKernels(model)
    recorded = Engine(compile="never").explore(model, Options(keep_going=True, keep_graph=True)).graph
    for graph in (build_graph(model, kernels), recorded):
        assert graph.size == 2
        (found,) = check_all(graph, kernels, model.spec.liveness())
        assert found.verdict == "holds", found.lasso
    # the same predicate on the state b = 50000 as traces and replay evaluate it
    assert evaluate_one(model.layout, BIG, (50000,)) is True
