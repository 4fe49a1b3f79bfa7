"""Two processes and a critical section: Peterson's algorithm against a test-and-set lock.

The textbook liveness example, with a known answer, for ``kraftcheck check --liveness``:

* both algorithms are safe (``mutual_exclusion``);
* under weak fairness of each process's steps after it starts trying, Peterson's algorithm is
  starvation-free: a process that tries eventually enters (``p1_trying_leads_to_p1_critical``);
* the test-and-set lock is not: the other process can win the lock every time it is free, and a
  lasso counterexample shows process 1 waiting forever while process 2 goes round;
* under *strong* fairness of entering (``strong=True``), the test-and-set lock is starvation-free
  too: the lock is free infinitely often, so process 1's Enter is enabled infinitely often and
  must be taken (TLA+'s ``SF(Enter(p))``);
* without fairness both fail, by stuttering: a process that may stop forever just stops.

The non-critical section is not fair (a process may stay out for good), as in Lamport's and
Peterson's own statements of the problem. Weak fairness is per process (``Enter(*)``: each
instance of the action is weakly fair on its own, TLA+'s ``\\A p: WF(Enter(p))``).

Deadlock is checked (TLC's default): the processes go round for ever, and a state in which
neither could move would be a bug of the algorithm (neither has one).
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck.checker.spec import (SF, Action, Bool, Const, Enum, Int, Invariant, Liveness, Param, Predicate,
                                     Spec, param)

IDLE, FLAG_SET, WAITING, CRITICAL = range(4)
PC_LABELS = ("idle", "flag_set", "waiting", "critical")
PETERSON, TEST_AND_SET = range(2)
ALGORITHMS = ("peterson", "test_and_set")


@njit(cache=True)
def try_to_enter(s, t, p):
    """Leave the non-critical section: Peterson raises the process's flag; test-and-set just waits."""
    if s.pc[p] != IDLE:
        return False
    if s.algorithm == PETERSON:
        t.flag[p] = True
        t.pc[p] = FLAG_SET
    else:
        t.pc[p] = WAITING
    return True


@njit(cache=True)
def give_way(s, t, p):
    """Peterson: hand the turn to the other process."""
    if s.pc[p] != FLAG_SET:
        return False
    t.turn = 1 - p
    t.pc[p] = WAITING
    return True


@njit(cache=True)
def enter(s, t, p):
    """Peterson: enter when the other is not interested or it is our turn. Test-and-set: take the
    lock when it is free."""
    if s.pc[p] != WAITING:
        return False
    if s.algorithm == PETERSON:
        if s.flag[1 - p] and s.turn != p:
            return False
    else:
        if s.lock:
            return False
        t.lock = True
    t.pc[p] = CRITICAL
    return True


@njit(cache=True)
def leave(s, t, p):
    """Leave the critical section."""
    if s.pc[p] != CRITICAL:
        return False
    t.flag[p] = False
    t.lock = False
    t.pc[p] = IDLE
    return True


@njit(cache=True)
def mutual_exclusion(s):
    """At most one process is in its critical section."""
    return not (s.pc[0] == CRITICAL and s.pc[1] == CRITICAL)


@dataclass(frozen=True)
class MutexParams:
    algorithm: str = param("peterson", "the mutual-exclusion algorithm", choices=ALGORITHMS)
    fair: bool = param(True, "declare weak fairness of each process's steps after it starts trying")
    strong: bool = param(False, "declare Enter strongly fair (per process) instead: test-and-set is then "
                                "starvation-free too")


class Mutex(Spec):
    name = "mutex"
    summary = "Peterson's algorithm and a test-and-set lock (the textbook liveness example)"
    Params = MutexParams
    examples = ({}, {"algorithm": "test_and_set"}, {"fair": False})
    check_deadlock = True  # the processes go round for ever

    def fields(self):
        procs = ("p1", "p2")
        return [
            Enum("pc", PC_LABELS, (2,), index_labels=procs, doc="where each process is"),
            Bool("flag", (2,), index_labels=procs, doc="Peterson: the process wants to enter"),
            Int("turn", 1, doc="Peterson: the process that yields when both want to enter (0 = p1)"),
            Bool("lock", doc="test-and-set: the lock is held"),
            Const("algorithm", ALGORITHMS.index(self.params.algorithm), kind="enum", labels=ALGORITHMS),
        ]

    def initial_states(self):
        yield {}

    def actions(self):
        p = Param("p", 2, ("p1", "p2"))
        peterson = self.params.algorithm == "peterson"
        return [
            Action("Try", try_to_enter, (p,)),
            *([Action("GiveWay", give_way, (p,))] if peterson else []),
            Action("Enter", enter, (p,)),
            Action("Leave", leave, (p,)),
        ]

    def invariants(self):
        return [Invariant("mutual_exclusion", mutual_exclusion, mutual_exclusion.__doc__)]

    def availability(self):
        # deadlock freedom in the strong sense: from anywhere, some process can still get in
        return Predicate("a process is in its critical section", lambda v: (v["pc"] == CRITICAL).any(axis=1))

    def liveness(self):
        steps = ("GiveWay(*)", "Enter(*)", "Leave(*)") if self.params.algorithm == "peterson" else \
            ("Enter(*)", "Leave(*)")
        if self.params.strong:
            steps = tuple(SF(s) if s == "Enter(*)" else s for s in steps)
        fair = steps if self.params.fair else ()
        trying = Predicate("p1 is trying", lambda v: (v["pc"][:, 0] == FLAG_SET) | (v["pc"][:, 0] == WAITING))
        critical = Predicate("p1 is in its critical section", lambda v: v["pc"][:, 0] == CRITICAL)
        return [Liveness("p1_trying_leads_to_p1_critical", critical, after=trying, fair=fair,
                         doc="starvation freedom: a process that tries to enter eventually does")]
