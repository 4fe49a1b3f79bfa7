"""Known flaws (PROTOCOL.md table) at 3 brokers, min ISR 2: each switch or preset shows a violation
of the expected kind (exact invariant, shortest counterexample length pinned), and the same bounds
with the safeguard on hold. Min ISR changes are off (``min_isr_changes=0``) except for the min ISR
policy row, because with them docs/findings.md F1 violates the durability invariants under every
policy and would mask the row under test.

Every run uses the compiled engine (each option set compiles its kernels once, then numba's cache).
"""

from __future__ import annotations

import pytest

from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Invariant
from kraftcheck.invariants.durability import acked_writes_held
from kraftcheck.specs.kafka.params import KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication

pytestmark = pytest.mark.slow

NO_MIN_ISR_CHANGE = dict(min_isr_changes=0)


def run(check=None, spec=KafkaReplication, **kw):
    m = Model(spec(KafkaParams(**kw)), check=check)
    return Engine().explore(m, Options())


def shortest(name, spec=KafkaReplication, **kw):
    """The shortest counterexample of ``name`` (BFS: the first one found is a shortest one)."""
    r = run(check=[name], spec=spec, **kw)
    assert r.status == "violated", f"{name} not violated with {kw}"
    assert [v.check for v in r.violations] == [name]
    return r.violations[0]


def holds(**kw):
    r = run(**kw)
    assert r.status == "holds", [(v.check, v.depth) for v in r.violations]
    return r


# (row of the table, switches, bounds, invariant that must fail, shortest counterexample length).
# Since a shrink may remove both followers at once: no strict min ISR 7 -> 6, HWM from maximal ISR
# 11 -> 9, min ISR change keeps ELR 5 -> 4 (each trace now starts with ProposeIsrShrink(out=b2+b3)).
FLAWS = [
    ("kafka-3.5: last replica standing, 1 lossy shutdown", dict(protocol="kafka-3.5"), dict(NO_MIN_ISR_CHANGE),
     "acked_writes_survive", 12),
    ("no strict min ISR, no lossy shutdown", dict(no_strict_min_isr=True), dict(NO_MIN_ISR_CHANGE, lossy_shutdowns=0),
     "elr_members_hold_committed_log", 6),
    ("HWM from maximal ISR, no lossy shutdown", dict(hwm_from_maximal_isr=True),
     dict(NO_MIN_ISR_CHANGE, lossy_shutdowns=0), "elr_members_hold_committed_log", 9),
    ("unclean shutdown keeps ELR, 1 lossy shutdown", dict(keep_unclean_in_elr=True), dict(NO_MIN_ISR_CHANGE),
     "leader_holds_committed_log", 12),
    ("no broker-epoch check, 1 lossy shutdown", dict(no_broker_epoch_check=True), dict(NO_MIN_ISR_CHANGE),
     "isr_members_hold_committed_log", 13),
    ("strategy Aggressive, fencing alone", dict(recovery="aggressive"),
     dict(NO_MIN_ISR_CHANGE, lossy_shutdowns=0, fences=2), "acked_writes_survive", 13),
    ("unclean election, fencing alone", dict(protocol="kafka-4.x", unclean_election=True),
     dict(NO_MIN_ISR_CHANGE, lossy_shutdowns=0, fences=2), "acked_writes_survive", 10),
    ("min ISR change keeps ELR", dict(min_isr_policy="keep-elr"), dict(lossy_shutdowns=0), "elr_only_below_min_isr", 4),
]


@pytest.mark.parametrize("row, switches, bounds, name, length", FLAWS, ids=[r for r, *_ in FLAWS])
def test_flaw_is_found(row, switches, bounds, name, length):
    assert shortest(name, **switches, **bounds).depth == length


@pytest.mark.parametrize("bounds", [
    dict(NO_MIN_ISR_CHANGE, lossy_shutdowns=0),               # no-strict, maximal rows
    dict(NO_MIN_ISR_CHANGE, lossy_shutdowns=0, fences=2),     # Aggressive row
], ids=str)
def test_kip_966_holds_with_the_safeguards_on(bounds):
    holds(**bounds)


@pytest.mark.parametrize("switches", [{}, dict(recovery="none")], ids=["kip-966", "kip-966 recovery none"])
def test_the_gate_holds_the_safeguards_at_these_bounds_with_min_isr_minus_one_lossy_shutdowns(switches):
    """The kafka-3.5, keep-unclean and no-epoch rows' bounds with the safeguards on (Balanced or
    None recovery): this project's gate (kraftcheck.toml, run by test_ci.py) checks that exactly
    these models hold, with their counts; here, that it still gates them."""
    from pathlib import Path

    from kraftcheck.ci.manifest import load
    gated = [check for check in load(Path(__file__).parents[1] / "kraftcheck.toml").checks
             if not check.violates and not check.invariants and check.spec == "kafka"
             and KafkaParams(**check.params) == KafkaParams(**NO_MIN_ISR_CHANGE, **switches)]
    assert gated and all(check.counts for check in gated), [check.name for check in gated]


def test_kafka_4x_without_unclean_election_holds_with_fencing_alone():
    """The unclean-election row's safeguard: kafka-4.x's last-known-leader fallback instead."""
    holds(protocol="kafka-4.x", **NO_MIN_ISR_CHANGE, lossy_shutdowns=0, fences=2)


def test_kip_min_isr_policy_keeps_elr_below_min_isr():
    r = run(check=["elr_only_below_min_isr"], lossy_shutdowns=0)
    assert r.status == "holds"


def test_keep_elr_policy_then_loses_committed_data_and_the_kip_policy_does_not():
    """"min ISR change keeps ELR ... then data loss": after lowering min ISR to 1 the leader advances
    the HWM past a stale ELR member. The same steps under the kip policy clear the ELR at the change.
    With F3's publish window closed (--fix-config-before-topic), since F3's 8-state path to the same
    invariant (a min ISR *increase*) would otherwise be the shortest."""
    v = shortest("elr_members_hold_committed_log", min_isr_policy="keep-elr", lossy_shutdowns=0,
                 fix_config_before_topic=True)
    assert v.depth == 7
    m_keep = Model(KafkaReplication(KafkaParams(min_isr_policy="keep-elr", lossy_shutdowns=0,
                                                fix_config_before_topic=True)))
    names = [str(m_keep.labels[s.label]) for s in v.steps[1:]]
    assert "ChangeMinIsr(value=1)" in names
    m_kip = Model(KafkaReplication(KafkaParams(lossy_shutdowns=0, fix_config_before_topic=True)))
    state = m_kip.initial[0]
    for step in v.steps[1:]:
        nxt = m_kip.step(state, step.label)
        if nxt is None:  # a step the kip policy disables (HWM advance with the ELR gone is still fine)
            break
        assert m_kip.violated_invariants(nxt) == [], str(m_kip.labels[step.label])
        state = nxt
    assert m_kip.layout.show(state)["c_elr"] == []


class KafkaWithUnconditionalAckedCheck(KafkaReplication):
    """The model plus ``acked_writes_held``: acked_writes_survive without its claim condition
    (which, with minISR lossy shutdowns, is not claimed at all)."""

    def invariants(self):
        return super().invariants() + [Invariant("acked_writes_held", acked_writes_held, acked_writes_held.__doc__)]


@pytest.mark.parametrize("recovery, length", [("balanced", 14), ("aggressive", 14)])
def test_kip_966_loses_an_acknowledged_write_with_min_isr_lossy_shutdowns(recovery, length):
    v = shortest("acked_writes_held", spec=KafkaWithUnconditionalAckedCheck, recovery=recovery,
                 lossy_shutdowns=2, isr_shrinks=0, **NO_MIN_ISR_CHANGE)
    assert v.depth == length


def test_strategy_none_loses_availability_not_the_write_with_min_isr_lossy_shutdowns():
    """docs/findings.md F2: with strategy None every broker that lost data is dropped from ISR and ELR
    at registration and no other path elects it, so the partition stays leaderless instead."""
    r = run(check=["acked_writes_held"], spec=KafkaWithUnconditionalAckedCheck, recovery="none",
            lossy_shutdowns=2, isr_shrinks=0, **NO_MIN_ISR_CHANGE)
    assert r.status == "holds"


def test_every_action_fires_at_default_bounds():
    """Coverage over the whole default-bounds state space (``kraftcheck check --continue``): every
    action fires, the exact counts are those of docs/model.md, and the violations are the F1/F1a
    ones of docs/findings.md, one shortest counterexample per check."""
    m = Model(KafkaReplication(KafkaParams()))
    r = Engine().explore(m, Options(keep_going=True))
    assert r.exhaustive
    # 14,187,187 / 64,899,661 before shrinks removed several followers at once and leaders had the
    # metadata publish window (topic delta before config delta); 17,261,316 with the first only
    assert (r.distinct_states, r.states_generated, r.depth) == (21_783_230, 100_074_871, 38)
    assert r.never_fired() == []
    assert [(v.check, v.depth) for v in r.violations] == [
        ("leader_maximal_isr_covers_electable", 4), ("elr_members_hold_committed_log", 8),
        ("hwm_advances_only_with_min_isr", 8), ("isr_members_hold_committed_log", 12),
        ("leader_holds_committed_log", 12), ("acked_writes_survive", 12), ("reads_are_repeatable", 13)]


def test_expansion_without_the_hwm_guard_fails_with_two_records_too():
    """--records 2 on a flaw row: the same shortest counterexample length as with one record."""
    v = shortest("isr_members_hold_committed_log", no_expansion_hwm_guard=True, records=2, lossy_shutdowns=0,
                 **NO_MIN_ISR_CHANGE)
    assert v.depth == 11
