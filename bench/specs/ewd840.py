"""Dijkstra's termination detection on a ring (EWD 840), as a kraftcheck spec file of a user's.

Written from the algorithm as the TLA+ Examples model it (``specifications/ewd840/EWD840.tla``,
by Stephan Merz): N nodes on a ring, each active or passive and white or black, and a token,
white or black, passed from node N-1 down to node 0. Its safety part only: the initial states
are every activity and colour of the nodes, with the token black anywhere; the invariants are
``TerminationDetection`` and Dijkstra's inductive invariant ``Inv`` (``TypeOK`` holds by the
fields' domains). It is here for ``bench/first_result_tlc.py``, which checks that its distinct
states equal TLC's on the same constants, and is not registered:

    kraftcheck check --spec bench/specs/ewd840.py:EWD840 --param n=7

Terminal states are intended (``check_deadlock = False``), as in the Examples' ``EWD840.cfg``
(``CHECK_DEADLOCK FALSE``): once every node is passive and the token has come back white to a
white node 0, termination is detected and no action is enabled.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from numba import njit

from kraftcheck import Action, Bool, Enum, Int, Invariant, Param, Spec, param

WHITE, BLACK = 0, 1
COLORS = ("white", "black")


@njit(cache=True)
def initiate_probe(s, t):
    """Node 0 holds the token and it or the token is black: a white token goes to node N-1."""
    if s.tpos != 0 or not (s.tcolor == BLACK or s.color[0] == BLACK):
        return False
    t.tpos = len(s.active) - 1
    t.tcolor = WHITE
    t.color[0] = WHITE
    return True


@njit(cache=True)
def pass_token(s, t, i):
    """Node i > 0 passes the token to node i-1, staining it if i is black; i turns white."""
    if i == 0 or s.tpos != i or not (s.active[i] == 0 or s.color[i] == BLACK or s.tcolor == BLACK):
        return False
    t.tpos = i - 1
    if s.color[i] == BLACK:
        t.tcolor = BLACK
    t.color[i] = WHITE
    return True


@njit(cache=True)
def send_msg(s, t, i, j):
    """Active node i activates node j != i; sending to a higher node blackens i."""
    if s.active[i] == 0 or i == j:
        return False
    t.active[j] = 1
    if j > i:
        t.color[i] = BLACK
    return True


@njit(cache=True)
def deactivate(s, t, i):
    """An active node becomes passive."""
    if s.active[i] == 0:
        return False
    t.active[i] = 0
    return True


@njit(cache=True)
def termination_detection(s):
    """A white token at a white, passive node 0 means every node is passive."""
    if not (s.tpos == 0 and s.tcolor == WHITE and s.color[0] == WHITE and s.active[0] == 0):
        return True
    for i in range(len(s.active)):
        if s.active[i] == 1:
            return False
    return True


@njit(cache=True)
def inv(s):
    """Dijkstra's invariant: nodes past the token are passive, or a node up to it is black, or the token is."""
    p0 = True
    for i in range(s.tpos + 1, len(s.active)):
        if s.active[i] == 1:
            p0 = False
    p1 = False
    for j in range(s.tpos + 1):
        if s.color[j] == BLACK:
            p1 = True
    return p0 or p1 or s.tcolor == BLACK


@dataclass(frozen=True)
class EWD840Params:
    n: int = param(3, "number of nodes on the ring", minimum=1, maximum=12)


class EWD840(Spec):
    name = "ewd840"
    summary = "Dijkstra's termination detection on a ring (EWD 840), safety part"
    Params = EWD840Params
    examples = ({"n": 2}, {"n": 3})
    check_deadlock = False  # termination detected is the end, as CHECK_DEADLOCK FALSE in EWD840.cfg

    def nodes(self) -> tuple[str, ...]:
        return tuple(f"n{i}" for i in range(self.params.n))

    def fields(self):
        n, nodes = self.params.n, self.nodes()
        return [
            Bool("active", (n,), index_labels=nodes, doc="the node is active"),
            Enum("color", COLORS, (n,), index_labels=nodes, doc="the node's colour"),
            Int("tpos", n - 1, doc="the node holding the token"),
            Enum("tcolor", COLORS, doc="the token's colour"),
        ]

    def initial_states(self):
        n = self.params.n
        for active in itertools.product((0, 1), repeat=n):
            for color in itertools.product((WHITE, BLACK), repeat=n):
                for tpos in range(n):
                    yield {"active": list(active), "color": list(color), "tpos": tpos, "tcolor": BLACK}

    def actions(self):
        i = Param("i", self.params.n, self.nodes())
        j = Param("j", self.params.n, self.nodes())
        return [
            Action("InitiateProbe", initiate_probe),
            Action("PassToken", pass_token, (i,)),
            Action("SendMsg", send_msg, (i, j)),
            Action("Deactivate", deactivate, (i,)),
        ]

    def invariants(self):
        return [Invariant("TerminationDetection", termination_detection, termination_detection.__doc__),
                Invariant("Inv", inv, inv.__doc__)]
