"""Voting (bench/specs/voting.py) with one more invariant, ``nothing_chosen``, that fails as soon
as a quorum votes: a counterexample whose states show a field of three labelled axes and a field
that holds -1 (tests/test_tla_examples_voting.py)."""

from __future__ import annotations

from pathlib import Path

from numba import njit

from kraftcheck.checker.spec import Invariant
from kraftcheck.specs import spec_class

ROOT = Path(__file__).resolve().parents[1]
VOTING = f"{ROOT}/bench/specs/voting.py:Voting"
Voting = spec_class(VOTING)


@njit(cache=True)
def nothing_chosen(s):
    """chosen = {}: no quorum has voted for one value in one ballot (false once one has)."""
    n, ballots, values = s.votes.shape[0], s.votes.shape[1], s.votes.shape[2]
    for b in range(ballots):
        for v in range(values):
            count = 0
            for a in range(n):
                if s.votes[a, b, v]:
                    count += 1
            if count >= s.quorum_size:
                return False
    return True


class VotingWithChosen(Voting):
    name = "voting_with_chosen"

    def invariants(self):
        return super().invariants() + [Invariant("nothing_chosen", nothing_chosen, nothing_chosen.__doc__)]


class VotingWithChosenRecords(VotingWithChosen):
    """The same, its ``votes`` naming its axes: trace tables show its elements with their axes named."""

    name = "voting_with_chosen_records"

    def fields(self):
        import dataclasses
        return [dataclasses.replace(f, axis_names=("acceptor", "ballot", "value")) if f.name == "votes" else f
                for f in super().fields()]
