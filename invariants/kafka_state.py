"""The Kafka state as the properties read it: the broker-state and HWM-rule codes, bit helpers, and
who acts as leader and with which ISR.

The invariants sit below the spec that lists them (``specs/kafka/spec.py`` imports
``kraftcheck.invariants``; nothing here imports ``kraftcheck.specs``): a property is written
against the state, not against the actions that build it. So what both the properties and the
spec's actions read lives here, and ``specs/kafka/state.py`` builds the rest of the layout on it.

Every helper here is a numba function usable interpreted on plain Python objects.
"""

from __future__ import annotations

from numba import njit

# broker process state
RUNNING, OFFLINE_CLEAN, OFFLINE_UNCLEAN = 0, 1, 2
BROKER_STATES = ("running", "offline_clean", "offline_unclean")

# the HWM rule a preset or switch selects, held in the Const field k_hwm_rule
HWM_STRICT, HWM_MAXIMAL, HWM_ANY = 0, 1, 2
HWM_RULES = ("strict", "maximal", "any")


@njit(cache=True)
def popcount(x):
    """Number of members of a bitmask set."""
    n = 0
    while x:
        x &= x - 1
        n += 1
    return n


@njit(cache=True)
def records_below(s, log, offset):
    """The records of ``log`` at offsets below ``offset`` (a lossy shutdown keeps such a prefix).

    A record only ever sits at the offset it was written at (``rec_offset``), in every log."""
    out = 0
    for r in range(len(s.rec_offset)):
        if log >> r & 1 and s.rec_offset[r] < offset:
            out |= 1 << r
    return out


@njit(cache=True)
def acting_leader(s, b):
    """``b`` is running and its metadata view says it leads (possibly a stale, zombie view)."""
    return s.b_state[b] == RUNNING and s.v_leader[b] == b


@njit(cache=True)
def maximal_isr(s, b):
    """The leader's committed ISR plus the members of its pending AlterPartition."""
    isr = s.v_isr[b]
    if s.ap_live and s.ap_from == b:
        isr |= s.ap_isr
    return isr


@njit(cache=True)
def hwm_may_advance(s, b):
    """The min-ISR condition for advancing the HWM (PROTOCOL rule 1, or the switch that breaks it)."""
    if s.k_hwm_rule == HWM_ANY:
        return True
    if s.k_hwm_rule == HWM_MAXIMAL:
        return popcount(maximal_isr(s, b)) >= s.v_min_isr[b]
    return popcount(s.v_isr[b]) >= s.v_min_isr[b]
