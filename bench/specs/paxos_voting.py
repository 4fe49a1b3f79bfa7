"""Lamport's Voting algorithm (the abstraction under Paxos), as a kraftcheck spec file of a user's.

Written from the TLA+ Examples' ``specifications/Paxos/Voting.tla`` and its model ``MCVoting``:
acceptors cast votes for values in numbered ballots, an acceptor votes in ballot b only for a
value that is safe at b (shown by a quorum), and a value is chosen when a quorum votes for it in
one ballot. ``votes[a]`` (a set of <<ballot, value>> pairs) is ``vote[a, b, v]``; ``maxBal[a]``
(a ballot or -1) is held plus one. The quorums are the sets of a majority's size (MCVoting's
``{{a1, a2}, {a1, a3}, {a2, a3}}`` for three acceptors). The invariant is ``Inv`` (``TypeOK``
holds by the fields' domains, ``VotesSafe``, ``OneValuePerBallot``); the refinement property
``C!Spec`` is not translated. ``MCSymmetry == Permutations(MCAcceptor) \\cup
Permutations(MCValue)``: acceptors and values are two symmetry sets (ballots are ordered, so not
symmetric). tests/test_symmetry.py compares the counts with TLC's. It is not registered:

    kraftcheck check --spec bench/specs/paxos_voting.py:PaxosVoting --symmetry

Terminal states are intended (``CHECK_DEADLOCK FALSE`` in MCVoting.cfg): with every acceptor at
the last ballot no action is enabled.
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck import Action, Bool, Int, Invariant, Param, Permuted, Spec, Symmetry, param


@njit(cache=True)
def max_bal(s, a):
    return s.max_bal[a] - 1  # held plus one: 0 is -1, no ballot yet


@njit(cache=True)
def did_not_vote_at(s, a, b):
    for v in range(s.vote.shape[2]):
        if s.vote[a, b, v]:
            return False
    return True


@njit(cache=True)
def is_quorum(q, acceptors):
    """A quorum is a set of a majority's size."""
    n = 0
    for a in range(acceptors):
        n += q >> a & 1
    return n == acceptors // 2 + 1


@njit(cache=True)
def shows_safe_at(s, q, b, v, c, w):
    """ShowsSafeAt(Q, b, v) with c the witness of its ``\\E c \\in -1..(b-1)`` and, when c # -1,
    acceptor w that of ``\\E a \\in Q : VotedFor(a, c, v)`` (w is "none" when c = -1)."""
    acceptors = s.vote.shape[0]
    if c >= b or (c == -1) != (w == acceptors):
        return False
    for a in range(acceptors):
        if q >> a & 1 and max_bal(s, a) < b:
            return False
    if c != -1 and not (q >> w & 1 and s.vote[w, c, v]):
        return False
    for d in range(c + 1, b):
        for a in range(acceptors):
            if q >> a & 1 and not did_not_vote_at(s, a, d):
                return False
    return True


@njit(cache=True)
def increase_max_bal(s, t, a, b):
    """IncreaseMaxBal(a, b)."""
    if b <= max_bal(s, a):
        return False
    t.max_bal[a] = b + 1
    return True


@njit(cache=True)
def vote_for(s, t, a, b, v, q, c1, w):
    """VoteFor(a, b, v), with quorum q the witness of its ``\\E Q \\in Quorum : ShowsSafeAt(Q, b, v)``
    and c1 - 1 and w those of ShowsSafeAt's existentials."""
    acceptors = s.vote.shape[0]
    if not is_quorum(q, acceptors) or max_bal(s, a) > b or not did_not_vote_at(s, a, b):
        return False
    for other in range(acceptors):
        if other != a:
            for u in range(s.vote.shape[2]):
                if s.vote[other, b, u] and u != v:
                    return False
    if not shows_safe_at(s, q, b, v, c1 - 1, w):
        return False
    t.vote[a, b, v] = 1
    t.max_bal[a] = b + 1
    return True


@njit(cache=True)
def none_other_choosable_at(s, b, v):
    acceptors = s.vote.shape[0]
    for q in range(1 << acceptors):
        if not is_quorum(q, acceptors):
            continue
        ok = True
        for a in range(acceptors):
            if q >> a & 1 and not (s.vote[a, b, v] or (max_bal(s, a) > b and did_not_vote_at(s, a, b))):
                ok = False
        if ok:
            return True
    return False


@njit(cache=True)
def inv(s):
    """Inv: VotesSafe (every vote is for a value safe at its ballot) and OneValuePerBallot."""
    acceptors, ballots, values = s.vote.shape[0], s.vote.shape[1], s.vote.shape[2]
    for a in range(acceptors):
        for b in range(ballots):
            for v in range(values):
                if s.vote[a, b, v]:
                    for c in range(b):
                        if not none_other_choosable_at(s, c, v):
                            return False
                    for a2 in range(acceptors):
                        for w in range(values):
                            if s.vote[a2, b, w] and w != v:
                                return False
    return True


@dataclass(frozen=True)
class PaxosVotingParams:
    acceptors: int = param(3, "acceptors (MCAcceptor = {a1, a2, a3})", minimum=1, maximum=4)
    values: int = param(2, "values (MCValue = {v1, v2})", minimum=1, maximum=3)
    ballots: int = param(2, "ballots 0..ballots-1 (MCBallot = 0..1)", minimum=1, maximum=4)


class PaxosVoting(Spec):
    name = "paxos_voting"
    summary = "Lamport's Voting algorithm under Paxos (TLA+ Examples' MCVoting)"
    Params = PaxosVotingParams
    check_deadlock = False  # MCVoting.cfg: CHECK_DEADLOCK FALSE
    examples = ({},)
    symmetric_examples = examples

    def acceptor_names(self) -> tuple[str, ...]:
        return tuple(f"a{i + 1}" for i in range(self.params.acceptors))

    def value_names(self) -> tuple[str, ...]:
        return tuple(f"v{i + 1}" for i in range(self.params.values))

    def subset_names(self) -> tuple[str, ...]:
        names = self.acceptor_names()
        return tuple("{" + ",".join(names[i] for i in range(len(names)) if m >> i & 1) + "}"
                     for m in range(1 << len(names)))

    def fields(self):
        p = self.params
        acceptors = self.acceptor_names()
        return [Bool("vote", (p.acceptors, p.ballots, p.values), index_labels=acceptors,
                     doc="<<b, v>> \\in votes[a]"),
                Int("max_bal", p.ballots, (p.acceptors,), index_labels=acceptors, doc="maxBal[a] + 1")]

    def initial_states(self):
        yield {}

    def actions(self):
        a = Param("a", self.params.acceptors, self.acceptor_names())
        b = Param("b", self.params.ballots)
        v = Param("v", self.params.values, self.value_names())
        # TLC computes one successor per witness of each existential in an action (VoteFor's
        # \\E Q, ShowsSafeAt's \\E c and, when c # -1, its \\E a \\in Q) and counts each in its
        # states generated: so do these parameters, one action instance per witness
        q = Param("Q", 1 << self.params.acceptors, self.subset_names())
        c = Param("c", self.params.ballots + 1, tuple(str(i) for i in range(-1, self.params.ballots)))
        w = Param("w", self.params.acceptors + 1, self.acceptor_names() + ("none",))
        return [Action("IncreaseMaxBal", increase_max_bal, params=(a, b)),
                Action("VoteFor", vote_for, params=(a, b, v, q, c, w))]

    def invariants(self):
        return [Invariant("Inv", inv, inv.__doc__)]

    def symmetry(self):
        """``Permutations(MCAcceptor) \\cup Permutations(MCValue)``."""
        return [Symmetry(self.acceptor_names(), (Permuted("vote", axes=(0,)), Permuted("max_bal", axes=(0,)))),
                Symmetry(self.value_names(), (Permuted("vote", axes=(2,)),))]
