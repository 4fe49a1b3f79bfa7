"""A deliberately broken Two-Phase Commit: the TM commits once *any* RM has prepared.

It exists to test counterexamples: a working RM may still choose to abort after the commit, so
``tc_consistent`` fails. Shortest trace: RMPrepare, TMRcvPrepared, TMCommit, RMChooseToAbort of
another RM, RMRcvCommitMsg (6 states). Its terminal states are intended, as Two-Phase Commit's
(``check_deadlock = False``, inherited and restated): the protocol ends.
"""

from numba import njit

from kraftcheck.checker.spec import Action
from kraftcheck.specs.two_phase import TM_COMMITTED, TM_INIT, TwoPhase


@njit(cache=True)
def tm_commit_eagerly(s, t):
    if s.tm_state != TM_INIT or s.tm_prepared == 0:
        return False
    t.tm_state = TM_COMMITTED
    t.msg_commit = 1
    return True


class TwoPhaseEagerCommit(TwoPhase):
    name = "two_phase_eager_commit"
    summary = "broken Two-Phase Commit: the TM commits after the first Prepared (violates tc_consistent)"
    check_deadlock = False  # the protocol ends, as TwoPhase's

    def actions(self):
        return [Action("TMCommit", tm_commit_eagerly) if a.name == "TMCommit" else a
                for a in super().actions()]
