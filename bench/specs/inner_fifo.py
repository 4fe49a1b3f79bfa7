"""The FIFO buffer of *Specifying Systems* (chapter 4), as the TLA+ Examples model-check it.

Written from ``specifications/SpecifyingSystems/FIFO/InnerFIFO.tla`` (and ``Channel.tla``) of the
TLA+ Examples, with the model of ``MCInnerFIFO.tla`` / ``MCInnerFIFO.cfg``: a sender passes
messages over the handshake channel ``in`` to a buffer ``q``, which passes them on over the
channel ``out`` to a receiver. A channel is a record ``[val, rdy, ack]``: ``Send(d)`` is enabled
when ``rdy = ack`` and sets ``val`` to d and flips ``rdy``; ``Rcv`` is enabled when ``rdy # ack``
and flips ``ack``. Initially each channel's ``val`` is any message and ``ack = rdy``, and ``q`` is
empty. The actions: ``SSend(msg)`` (send msg on ``in``), ``BufRcv`` (receive on ``in``, append its
value to ``q``), ``BufSend`` (``q`` not empty: send its head on ``out``, drop it from ``q``) and
``RRcv`` (receive on ``out``).

``q`` is unbounded in the TLA+ spec; the model bounds the search with the state constraint
``qConstraint == Len(q) <= qLen`` (``Constraint`` here, TLC's ``CONSTRAINT``): a state whose queue
is one longer is generated and checked, but never expanded, so the fields hold one message more
than ``q_len_max``. ``TypeInvariant`` holds by the fields' domains but for the slots of ``q`` past
its length, which must hold 0 (so that every sequence has one encoding); that is its check here.
TLC's ``CHECK_DEADLOCK`` is left on (no state is without a successor).

With ``Message = {m1, m2, m3}`` and ``qLen = 3`` TLC reports 36 initial states, 9,660 states
generated, 3,864 distinct states and depth 11 (tests/test_constraints.py). Not registered:

    kraftcheck check --spec bench/specs/inner_fifo.py:InnerFifo
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck import Action, Bool, Const, Constraint, Enum, Int, Invariant, Param, Spec, param


@njit(cache=True)
def s_send(s, t, msg):
    """InChan!Send(msg), UNCHANGED <<out, q>>."""
    if s.in_rdy != s.in_ack:
        return False
    t.in_val = msg
    t.in_rdy = 1 - s.in_rdy
    return True


@njit(cache=True)
def buf_rcv(s, t):
    """InChan!Rcv, q' = Append(q, in.val), UNCHANGED out. (A queue already one past the
    constraint is never expanded: the guard on its length only keeps the fields in bounds.)"""
    if s.in_rdy == s.in_ack or s.q_len == len(s.q):
        return False
    t.in_ack = 1 - s.in_ack
    t.q[s.q_len] = s.in_val
    t.q_len = s.q_len + 1
    return True


@njit(cache=True)
def buf_send(s, t):
    """q # << >>, OutChan!Send(Head(q)), q' = Tail(q), UNCHANGED in."""
    if s.q_len == 0 or s.out_rdy != s.out_ack:
        return False
    t.out_val = s.q[0]
    t.out_rdy = 1 - s.out_rdy
    for k in range(s.q_len - 1):
        t.q[k] = s.q[k + 1]
    t.q[s.q_len - 1] = 0
    t.q_len = s.q_len - 1
    return True


@njit(cache=True)
def r_rcv(s, t):
    """OutChan!Rcv, UNCHANGED <<in, q>>."""
    if s.out_rdy == s.out_ack:
        return False
    t.out_ack = 1 - s.out_ack
    return True


@njit(cache=True)
def type_invariant(s):
    """TypeInvariant: in and out are channel records, q a sequence of messages (the slots of q
    past its length hold 0: one encoding per sequence)."""
    for k in range(s.q_len, len(s.q)):
        if s.q[k] != 0:
            return False
    return True


@njit(cache=True)
def q_constraint(s):
    """qConstraint == Len(q) <= qLen."""
    return s.q_len <= s.q_len_max


@dataclass(frozen=True)
class InnerFifoParams:
    messages: int = param(3, "number of messages (Message = {m1, ..., mN})", minimum=1, maximum=8)
    q_len: int = param(3, "qLen: the longest queue the search expands (CONSTRAINT qConstraint)",
                       minimum=0, maximum=6)


class InnerFifo(Spec):
    name = "inner_fifo"
    summary = "the FIFO buffer of Specifying Systems with the state constraint Len(q) <= qLen (TLA+ Examples)"
    Params = InnerFifoParams
    examples = ({"messages": 2, "q_len": 2},)
    check_deadlock = True  # TLC's default, left on in MCInnerFIFO.cfg: every state has a successor

    def fields(self):
        p = self.params
        names = tuple(f"m{k + 1}" for k in range(p.messages))
        return [
            Enum("in_val", names), Bool("in_rdy"), Bool("in_ack"),
            Enum("out_val", names), Bool("out_rdy"), Bool("out_ack"),
            Int("q_len", p.q_len + 1, doc="Len(q); one past qLen only in states outside the constraint"),
            Enum("q", names, (p.q_len + 1,), doc="q's messages, head first; 0 past its length"),
            Const("q_len_max", p.q_len),
        ]

    def initial_states(self):
        n = self.params.messages
        for in_val in range(n):
            for in_rdy in (0, 1):
                for out_val in range(n):
                    for out_rdy in (0, 1):
                        yield {"in_val": in_val, "in_rdy": in_rdy, "in_ack": in_rdy,
                               "out_val": out_val, "out_rdy": out_rdy, "out_ack": out_rdy}

    def actions(self):
        names = tuple(f"m{k + 1}" for k in range(self.params.messages))
        return [
            Action("SSend", s_send, params=(Param("msg", self.params.messages, names),)),
            Action("BufRcv", buf_rcv),
            Action("BufSend", buf_send),
            Action("RRcv", r_rcv),
        ]

    def invariants(self):
        return [Invariant("TypeInvariant", type_invariant, type_invariant.__doc__)]

    def constraints(self):
        return [Constraint("qConstraint", q_constraint, q_constraint.__doc__)]
