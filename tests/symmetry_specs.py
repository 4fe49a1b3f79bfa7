"""A small spec with two symmetry sets, for the conformance suite and tests/test_symmetry.py.

``Voting``: acceptors a1..aA vote for proposed values v1..vV, and a value some majority voted
for is chosen, as in the voting layer under Paxos (without ballots). Acceptors are
interchangeable, and so are values: the spec declares two symmetry sets, and ``--symmetry``
explores one state per orbit of their product group (permuting acceptors and values at once).
Every field moves under one set or both: ``vote`` is acceptor x value (its axes move with
different sets), ``voted`` is per acceptor and names a value, ``proposed`` and ``chosen`` are sets
of values, ``last_voter`` names an acceptor and is a filler (0) until the first vote.

Each acceptor votes once, so two majorities never choose different values: ``at_most_one_chosen``
holds. With ``revote`` an acceptor may vote again for another value, and it fails (3 acceptors,
2 values: v1 is proposed, a1 and a2 vote for it, it is chosen, and the same for v2: 9 states).
A state where nothing is left to propose, vote or choose is where the protocol ends, not a
deadlock (``check_deadlock = False``).
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck import Action, Bool, Const, Enum, Int, Invariant, Param, Permuted, Set, Spec, Symmetry, param


@njit(cache=True)
def propose(s, t, v):
    if s.proposed >> v & 1:
        return False
    t.proposed = s.proposed | (1 << v)
    return True


@njit(cache=True)
def vote(s, t, a, v):
    if not s.proposed >> v & 1 or s.vote[a, v]:
        return False
    if not s.revote and s.voted[a] != s.vote.shape[1]:  # voted for a value already
        return False
    t.vote[a, v] = 1
    t.voted[a] = v
    t.last_voter = a
    t.votes_cast = s.votes_cast + 1
    return True


@njit(cache=True)
def votes_for(s, v):
    n = 0
    for a in range(s.vote.shape[0]):
        n += s.vote[a, v]
    return n


@njit(cache=True)
def choose(s, t, v):
    if s.chosen >> v & 1 or 2 * votes_for(s, v) <= s.vote.shape[0]:
        return False
    t.chosen = s.chosen | (1 << v)
    return True


@njit(cache=True)
def at_most_one_chosen(s):
    """At most one value is chosen."""
    return s.chosen & (s.chosen - 1) == 0


@njit(cache=True)
def chosen_values_have_a_majority(s):
    """Every chosen value was proposed and has votes from a majority of the acceptors."""
    for v in range(s.vote.shape[1]):
        if s.chosen >> v & 1 and (not s.proposed >> v & 1 or 2 * votes_for(s, v) <= s.vote.shape[0]):
            return False
    return True


@dataclass(frozen=True)
class VotingParams:
    acceptors: int = param(3, "acceptors", minimum=1, maximum=4)
    values: int = param(2, "values that can be proposed", minimum=1, maximum=3)
    revote: bool = param(False, "an acceptor may vote again for another value (breaks at_most_one_chosen)")


class Voting(Spec):
    name = "symmetry_voting"
    summary = "acceptors vote for values, a majority chooses (two symmetry sets: acceptors and values)"
    Params = VotingParams
    check_deadlock = False  # every value proposed, every vote cast, every majority's value chosen: the end
    examples = ({}, {"revote": True}, {"acceptors": 2, "values": 3})
    symmetric_examples = ({}, {"revote": True}, {"acceptors": 2, "values": 3})

    def acceptor_names(self) -> tuple[str, ...]:
        return tuple(f"a{i + 1}" for i in range(self.params.acceptors))

    def value_names(self) -> tuple[str, ...]:
        return tuple(f"v{i + 1}" for i in range(self.params.values))

    def fields(self):
        p = self.params
        acceptors, values = self.acceptor_names(), self.value_names()
        return [
            Bool("vote", (p.acceptors, p.values), index_labels=acceptors, doc="acceptor a voted for value v"),
            Enum("voted", values + ("none",), (p.acceptors,), index_labels=acceptors,
                 doc="the value each acceptor last voted for"),
            Set("proposed", values, doc="the values proposed"),
            Set("chosen", values, doc="the values chosen"),
            Enum("last_voter", acceptors, doc="the acceptor that voted last (a1 before any vote)"),
            Int("votes_cast", p.acceptors * p.values),
            Const("revote", int(p.revote)),
        ]

    def initial_states(self):
        yield {"voted": [self.params.values] * self.params.acceptors}

    def actions(self):
        a = Param("a", self.params.acceptors, self.acceptor_names())
        v = Param("v", self.params.values, self.value_names())
        return [Action("Propose", propose, params=(v,)), Action("Vote", vote, params=(a, v)),
                Action("Choose", choose, params=(v,))]

    def invariants(self):
        return [Invariant("at_most_one_chosen", at_most_one_chosen, at_most_one_chosen.__doc__),
                Invariant("chosen_values_have_a_majority", chosen_values_have_a_majority,
                          chosen_values_have_a_majority.__doc__)]

    def symmetry(self):
        return [
            Symmetry(self.acceptor_names(), (Permuted("vote", axes=(0,)), Permuted("voted", axes=(0,)),
                                             Permuted("last_voter", holds="member", unless=("votes_cast", 0)))),
            Symmetry(self.value_names(), (Permuted("vote", axes=(1,)), Permuted("voted", holds="member"),
                                          Permuted("proposed", holds="subset"), Permuted("chosen", holds="subset"))),
        ]


# -- a declaration that is wrong only deep in the space ---------------------------------------

DEEP_DATA = ("d1", "d2")
DEEP_LIMIT = 30  # the step that breaks the symmetry is enabled from this count on


@njit(cache=True)
def count_up(s, t):
    if s.n >= DEEP_LIMIT:
        return False
    t.n = s.n + 1
    return True


@njit(cache=True)
def swap_datum(s, t):
    t.x = 1 - s.x
    return True


@njit(cache=True)
def wiggle(s, t):
    t.y = (s.y + 1) % 10
    return True


@njit(cache=True)
def reset_to_d1(s, t):
    """Names d1: from d2 at the limit, back to d1 and y 0; from d1 nothing. Not symmetric."""
    if s.n != DEEP_LIMIT or s.x == 0:
        return False
    t.x = 0
    t.y = 0
    return True


@njit(cache=True)
def y_in_range(s):
    return s.y < 10


@dataclass(frozen=True)
class DeepParams:
    pass


class DeepAsymmetry(Spec):
    """A datum x of two interchangeable values, a counter n and a wheel y (620 states), declared
    symmetric in x; the one step that names a value is enabled only at n = DEEP_LIMIT, past the
    first 200 states breadth-first that ``check_symmetry`` tries."""

    name = "deep_asymmetry"
    Params = DeepParams
    check_deadlock = False

    def fields(self):
        return [Enum("x", DEEP_DATA), Int("n", DEEP_LIMIT + 1), Int("y", 10)]

    def initial_states(self):
        yield {"x": 0, "n": 0, "y": 0}

    def actions(self):
        return [Action("CountUp", count_up), Action("SwapDatum", swap_datum), Action("Wiggle", wiggle),
                Action("ResetToD1", reset_to_d1)]

    def invariants(self):
        return [Invariant("y_in_range", y_in_range)]

    def symmetry(self):
        return Symmetry(DEEP_DATA, (Permuted("x", holds="member"),))


# -- a symmetry broken only where no generator of the group looks


REVERSED_TOP = 6


@njit(cache=True)
def raise_counter(s, t, i):
    if s.c[i] >= REVERSED_TOP:
        return False
    t.c[i] = s.c[i] + 1
    return True


@njit(cache=True)
def trip_when_reversed(s, t):
    """Enabled only at c = (top, top - 1, 0): a step that tells the counters apart."""
    if s.tripped or s.c[0] != REVERSED_TOP or s.c[1] != REVERSED_TOP - 1 or s.c[2] != 0:
        return False
    t.tripped = True
    return True


@njit(cache=True)
def never_tripped(s):
    return not s.tripped


@dataclass(frozen=True)
class ReversedParams:
    pass


class ReversedAsymmetry(Spec):
    """Three counters declared interchangeable, and one step that is not: it fires only at
    c = (6, 5, 0), 343 counter states in, and breaks the invariant. The state's orbit is
    represented by (0, 5, 6), whose images under the group's generators (the swap of k1 and k2,
    the rotation) are (5, 0, 6), (6, 0, 5) and (5, 6, 0): no trial of the declaration on
    representatives sees (6, 5, 0), and the reduced search never takes the step."""

    name = "reversed_asymmetry"
    Params = ReversedParams
    check_deadlock = False

    def names(self):
        return ("k1", "k2", "k3")

    def fields(self):
        return [Int("c", REVERSED_TOP, (3,), index_labels=self.names()), Bool("tripped")]

    def initial_states(self):
        yield {}

    def actions(self):
        return [Action("Raise", raise_counter, params=(Param("i", 3, self.names()),)),
                Action("Trip", trip_when_reversed)]

    def invariants(self):
        return [Invariant("never_tripped", never_tripped)]

    def symmetry(self):
        return Symmetry(self.names(), (Permuted("c", axes=(0,)),))
