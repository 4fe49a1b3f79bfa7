"""Lamport and Gray's Two-Phase Commit (``TwoPhase`` from *Consensus on Transaction Commit*).

The engine's conformance spec: TLC's state counts for it are known exactly, so any difference
in distinct states, states generated or depth is an engine bug. Every action follows the TLA+
text literally, including its self-loops (a message received twice), because TLC counts those
successors in "states generated".

Terminal states are intended (``check_deadlock = False``, TLC's ``CHECK_DEADLOCK FALSE``): the
protocol finishes. Once every RM has committed or aborted, what is left are messages received
again, self-loops; TLC counts those as successors and reports no deadlock, kraftcheck counts a
state whose only successor is itself as deadlocked, so without this declaration every run would
end with a deadlock at the protocol's end (rm=1: after 3 states).
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.spec import Action, Bool, Enum, Invariant, Param, Permuted, Set, Spec, Symmetry, param

WORKING, PREPARED, COMMITTED, ABORTED = range(4)
RM_STATES = ("working", "prepared", "committed", "aborted")
TM_INIT, TM_COMMITTED, TM_ABORTED = range(3)
TM_STATES = ("init", "committed", "aborted")


@njit(cache=True)
def tm_rcv_prepared(s, t, rm):
    """The TM learns that ``rm`` prepared."""
    if s.tm_state != TM_INIT or not (s.msg_prepared >> rm & 1):
        return False
    t.tm_prepared = s.tm_prepared | (1 << rm)
    return True


@njit(cache=True)
def tm_commit(s, t):
    """The TM commits once every RM has prepared."""
    if s.tm_state != TM_INIT or s.tm_prepared != (1 << len(s.rm_state)) - 1:
        return False
    t.tm_state = TM_COMMITTED
    t.msg_commit = 1
    return True


@njit(cache=True)
def tm_abort(s, t):
    """The TM spontaneously aborts."""
    if s.tm_state != TM_INIT:
        return False
    t.tm_state = TM_ABORTED
    t.msg_abort = 1
    return True


@njit(cache=True)
def rm_prepare(s, t, rm):
    if s.rm_state[rm] != WORKING:
        return False
    t.rm_state[rm] = PREPARED
    t.msg_prepared = s.msg_prepared | (1 << rm)
    return True


@njit(cache=True)
def rm_choose_to_abort(s, t, rm):
    if s.rm_state[rm] != WORKING:
        return False
    t.rm_state[rm] = ABORTED
    return True


@njit(cache=True)
def rm_rcv_commit_msg(s, t, rm):
    if not s.msg_commit:
        return False
    t.rm_state[rm] = COMMITTED
    return True


@njit(cache=True)
def rm_rcv_abort_msg(s, t, rm):
    if not s.msg_abort:
        return False
    t.rm_state[rm] = ABORTED
    return True


@njit(cache=True)
def tc_consistent(s):
    """No resource manager has committed while another has aborted."""
    committed = aborted = False
    for rm in range(len(s.rm_state)):
        committed = committed or s.rm_state[rm] == COMMITTED
        aborted = aborted or s.rm_state[rm] == ABORTED
    return not (committed and aborted)


@dataclass(frozen=True)
class TwoPhaseParams:
    rm: int = param(3, "number of resource managers", minimum=1, maximum=30)


class TwoPhase(Spec):
    name = "two_phase"
    summary = "Lamport's Two-Phase Commit (TLC's state counts reproduced exactly)"
    Params = TwoPhaseParams
    examples = ({"rm": 1}, {"rm": 2}, {"rm": 3})
    check_deadlock = False  # the protocol ends: see the module's docstring
    symmetric_examples = ({"rm": 3}, {"rm": 4})

    def rm_names(self) -> tuple[str, ...]:
        return tuple(f"rm{i + 1}" for i in range(self.params.rm))

    def fields(self):
        rms = self.rm_names()
        return [
            Enum("rm_state", RM_STATES, (self.params.rm,), index_labels=rms),
            Enum("tm_state", TM_STATES),
            Set("tm_prepared", rms, doc="RMs the TM has heard prepared from"),
            Set("msg_prepared", rms, doc="Prepared messages sent"),
            Bool("msg_commit", doc="the Commit message was sent"),
            Bool("msg_abort", doc="the Abort message was sent"),
        ]

    def initial_states(self):
        yield {}  # every RM working, TM init, no messages

    def actions(self):
        rm = Param("rm", self.params.rm, self.rm_names())
        return [
            Action("TMRcvPrepared", tm_rcv_prepared, (rm,)),
            Action("TMCommit", tm_commit),
            Action("TMAbort", tm_abort),
            Action("RMPrepare", rm_prepare, (rm,)),
            Action("RMChooseToAbort", rm_choose_to_abort, (rm,)),
            Action("RMRcvCommitMsg", rm_rcv_commit_msg, (rm,)),
            Action("RMRcvAbortMsg", rm_rcv_abort_msg, (rm,)),
        ]

    def invariants(self):
        return [Invariant("tc_consistent", tc_consistent, tc_consistent.__doc__)]

    def symmetry(self):
        """Resource managers are interchangeable (TLC's ``Permutations(RM)``)."""
        if self.params.rm > 7:
            raise UsageError(f"--symmetry tries all rm! permutations of every state: at most rm=7, not {self.params.rm}")
        return Symmetry(self.rm_names(), (Permuted("rm_state", axes=(0,)), Permuted("tm_prepared", holds="subset"),
                                          Permuted("msg_prepared", holds="subset")))
