"""Lamport's Voting algorithm, the abstract Paxos of the TLA+ Examples, as a kraftcheck spec file.

Written from ``specifications/Paxos/Voting.tla`` of the TLA+ Examples (Leslie Lamport; commit
32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9), with the model of ``MCVoting.tla`` / ``MCVoting.cfg``:
three acceptors, two values, ballots ``0..1``, the quorums every two acceptors. It is the worked
translation of docs/writing-a-spec.md ("From TLA+"), chosen for the two things a TLA+ spec has
that a spec once had to write around: a value below zero (``maxBal[a] = -1``, no ballot yet) and a
function of several arguments (``votes``, a set of ``<<ballot, value>>`` pairs per acceptor).

The translation, part by part:

* ``votes \\in [Acceptor -> SUBSET (Ballot \\X Value)]`` is a boolean per (acceptor, ballot,
  value): ``Bool("votes", (n, ballots, values))``, its axes labelled so that traces show
  ``votes[a1][0][v2]``;
* ``maxBal \\in [Acceptor -> Ballot \\cup {-1}]`` is ``Int("max_bal", -1, ballots - 1, (n,))``:
  actions and traces read and write -1 as -1;
* ``Quorum`` (the constant ``MCQuorum = {{a1, a2}, {a1, a3}, {a2, a3}}``) is every set of
  ``n // 2 + 1`` acceptors, a bitmask of them, numbered by the helper ``quorum`` (for three
  acceptors exactly ``MCQuorum``); ``\\E Q \\in Quorum`` in an invariant is a loop over them;
* ``Next == \\E a, b : IncreaseMaxBal(a, b) \\/ \\E v : VoteFor(a, b, v)`` is two actions with
  parameters, instantiated for every acceptor, ballot and value;
* every other ``\\E`` that ``VoteFor`` reaches, ``\\E Q \\in Quorum``, ``\\E c \\in -1..(b-1)``
  and ``\\E a \\in Q`` inside ``ShowsSafeAt`` (even the one right of ``=>``), is a parameter too
  (``Q``, ``c``, ``w``): TLC computes one successor per witness and counts each in *states
  generated*, and so does an action parameter. Loops inside the action would find the same
  states and count one successor per (a, b, v): 2,080 generated instead of 3,124;
* ``Inv == TypeOK /\\ VotesSafe /\\ OneValuePerBallot``: ``TypeOK`` holds by the fields' domains,
  the other two are invariants;
* ``MCSymmetry == Permutations(MCAcceptor) \\cup Permutations(MCValue)`` is two symmetry sets,
  acceptors and values (``symmetry()``), which ``--symmetry`` reduces by their product group;
  ballots are ordered, so not symmetric.

``CHECK_DEADLOCK FALSE`` as in ``MCVoting.cfg``: once every acceptor has reached the last ballot
and voted what it can, no action is enabled. Not checked here: ``MCVoting.cfg``'s ``PROPERTY
ConsensusSpecBar`` (refinement of ``Consensus``).

TLC on the same constants, without the symmetry, finds 599 distinct states, 3,124 generated,
depth 11; with ballots 0..2 (``--param ballots=3``), 6,752 distinct, 41,017 generated, depth 16
(tests/test_tla_examples_voting.py quotes its output); with ``SYMMETRY MCSymmetry``, 77 distinct
(the orbits), 451 generated, depth 11 (tests/test_symmetry.py). Not registered:

    kraftcheck check --spec bench/specs/voting.py:Voting [--symmetry]
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck import Action, Bool, Const, Int, Invariant, Param, Permuted, Spec, Symmetry, param


@njit(cache=True)
def popcount(mask):
    count = 0
    while mask:
        count += mask & 1
        mask >>= 1
    return count


@njit(cache=True)
def is_quorum(s, q):
    """Q \\in Quorum: q, a bitmask of acceptors, holds exactly quorum_size of them."""
    return popcount(q) == s.quorum_size


@njit(cache=True)
def quorum(s, k):
    """The k-th quorum (from 0), as a bitmask of acceptors, in increasing order of masks."""
    for q in range(1 << len(s.max_bal)):
        if is_quorum(s, q):
            if k == 0:
                return q
            k -= 1
    return 0


@njit(cache=True)
def did_not_vote_at(s, a, b):
    """DidNotVoteAt(a, b) == \\A v \\in Value : ~VotedFor(a, b, v)."""
    for v in range(s.votes.shape[2]):
        if s.votes[a, b, v]:
            return False
    return True


@njit(cache=True)
def none_other_choosable_at(s, b, v):
    """NoneOtherChoosableAt(b, v) == \\E Q \\in Quorum : \\A a \\in Q :
    VotedFor(a, b, v) \\/ CannotVoteAt(a, b), with CannotVoteAt(a, b) == maxBal[a] > b /\\ DidNotVoteAt(a, b)."""
    n = len(s.max_bal)
    for q in range(1 << n):
        if not is_quorum(s, q):
            continue
        every = True
        for a in range(n):
            if q >> a & 1 and not (s.votes[a, b, v] or (s.max_bal[a] > b and did_not_vote_at(s, a, b))):
                every = False
                break
        if every:
            return True
    return False


@njit(cache=True)
def safe_at(s, b, v):
    """SafeAt(b, v) == \\A c \\in 0..(b-1) : NoneOtherChoosableAt(c, v)."""
    for c in range(b):
        if not none_other_choosable_at(s, c, v):
            return False
    return True


@njit(cache=True)
def shows_safe_at(s, q, b, v, c, w):
    """ShowsSafeAt(Q, b, v) with its witnesses c and w (TLC enumerates both, below):
    /\\ \\A a \\in Q : maxBal[a] >= b
    /\\ \\E c \\in -1..(b-1) : /\\ (c # -1) => \\E w \\in Q : VotedFor(w, c, v)
                             /\\ \\A d \\in (c+1)..(b-1), a \\in Q : DidNotVoteAt(a, d)
    ``w`` is the acceptor of Q that voted for v in ballot c, or n (no acceptor) when c = -1."""
    n = len(s.max_bal)
    if c > b - 1:
        return False
    for a in range(n):
        if q >> a & 1 and s.max_bal[a] < b:
            return False
    if c == -1:
        if w != n:
            return False
    elif not (w < n and q >> w & 1 and s.votes[w, c, v]):
        return False
    for d in range(c + 1, b):
        for a in range(n):
            if q >> a & 1 and not did_not_vote_at(s, a, d):
                return False
    return True


@njit(cache=True)
def increase_max_bal(s, t, a, b):
    """IncreaseMaxBal(a, b) == b > maxBal[a] /\\ maxBal' = [maxBal EXCEPT ![a] = b] /\\ UNCHANGED votes."""
    if b <= s.max_bal[a]:
        return False
    t.max_bal[a] = b
    return True


@njit(cache=True)
def vote_for(s, t, a, b, v, k, c1, w):
    """VoteFor(a, b, v) with the witnesses of ShowsSafeAt: Q (the k-th quorum), c = c1 - 1 and w.
    a votes for v in ballot b, if it has not voted in b, every other vote in b is for v, and Q
    shows v safe at b."""
    if s.max_bal[a] > b or not did_not_vote_at(s, a, b):
        return False
    for other in range(len(s.max_bal)):
        for u in range(s.votes.shape[2]):
            if other != a and u != v and s.votes[other, b, u]:
                return False
    if not shows_safe_at(s, quorum(s, k), b, v, c1 - 1, w):
        return False
    t.votes[a, b, v] = True
    t.max_bal[a] = b
    return True


@njit(cache=True)
def votes_safe(s):
    """VotesSafe == \\A a \\in Acceptor, b \\in Ballot, v \\in Value : VotedFor(a, b, v) => SafeAt(b, v)."""
    for a in range(s.votes.shape[0]):
        for b in range(s.votes.shape[1]):
            for v in range(s.votes.shape[2]):
                if s.votes[a, b, v] and not safe_at(s, b, v):
                    return False
    return True


@njit(cache=True)
def one_value_per_ballot(s):
    """OneValuePerBallot == \\A a1, a2 \\in Acceptor, b \\in Ballot, v1, v2 \\in Value :
    VotedFor(a1, b, v1) /\\ VotedFor(a2, b, v2) => (v1 = v2)."""
    for b in range(s.votes.shape[1]):
        seen = -1
        for a in range(s.votes.shape[0]):
            for v in range(s.votes.shape[2]):
                if s.votes[a, b, v]:
                    if seen != -1 and seen != v:
                        return False
                    seen = v
    return True


@dataclass(frozen=True)
class VotingParams:
    acceptors: int = param(3, "acceptors (MCVoting: a1, a2, a3)", minimum=1, maximum=5)
    ballots: int = param(2, "ballots 0..ballots-1 (MCVoting: 0..1)", minimum=1, maximum=4)
    values: int = param(2, "values (MCVoting: v1, v2)", minimum=1, maximum=3)


class Voting(Spec):
    name = "voting"
    summary = "Lamport's Voting (abstract Paxos) from the TLA+ Examples"
    Params = VotingParams
    examples = ({"acceptors": 2, "ballots": 2, "values": 2}, {})
    symmetric_examples = examples
    check_deadlock = False  # MCVoting.cfg: CHECK_DEADLOCK FALSE; the last ballot is an end

    def acceptor_names(self):
        return tuple(f"a{i + 1}" for i in range(self.params.acceptors))

    def value_names(self):
        return tuple(f"v{i + 1}" for i in range(self.params.values))

    def quorum_names(self):
        """Each quorum as TLC would print it, {a1,a2}, in the order ``quorum`` numbers them."""
        n, size = self.params.acceptors, self.params.acceptors // 2 + 1
        masks = [q for q in range(1 << n) if bin(q).count("1") == size]
        return tuple("{" + ",".join(f"a{i + 1}" for i in range(n) if q >> i & 1) + "}" for q in masks)

    def fields(self):
        p = self.params
        acceptors = self.acceptor_names()
        return [
            Bool("votes", (p.acceptors, p.ballots, p.values), axis_labels=(acceptors, None, self.value_names()),
                 doc="votes[a][b][v]: acceptor a voted for value v in ballot b"),
            Int("max_bal", -1, p.ballots - 1, (p.acceptors,), index_labels=acceptors,
                doc="the ballot below which acceptor a votes no more (-1: none yet)"),
            Const("quorum_size", p.acceptors // 2 + 1),
        ]

    def initial_states(self):
        yield {"votes": False, "max_bal": -1}

    def actions(self):
        p = self.params
        acceptor = Param("a", p.acceptors, self.acceptor_names())
        quorums = self.quorum_names()
        return [
            Action("IncreaseMaxBal", increase_max_bal, (acceptor, Param("b", p.ballots))),
            Action("VoteFor", vote_for, (acceptor, Param("b", p.ballots), Param("v", p.values, self.value_names()),
                                         Param("Q", len(quorums), quorums),
                                         Param("c", p.ballots + 1, tuple(str(c) for c in range(-1, p.ballots))),
                                         Param("w", p.acceptors + 1, self.acceptor_names() + ("none",)))),
        ]

    def invariants(self):
        return [Invariant("VotesSafe", votes_safe, votes_safe.__doc__),
                Invariant("OneValuePerBallot", one_value_per_ballot, one_value_per_ballot.__doc__)]

    def symmetry(self):
        """``MCSymmetry == Permutations(MCAcceptor) \\cup Permutations(MCValue)``: two sets."""
        return [Symmetry(self.acceptor_names(), (Permuted("votes", axes=(0,)), Permuted("max_bal", axes=(0,)))),
                Symmetry(self.value_names(), (Permuted("votes", axes=(2,)),))]
