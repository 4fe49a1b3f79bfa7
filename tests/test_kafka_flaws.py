"""Known flaws (PROTOCOL.md table) at 3 brokers, min ISR 2: each switch or preset shows a violation
of the expected kind, and the same bounds with the safeguard on hold.

These runs use the compiled engine (each option set compiles its own kernel the first time).
"""

from __future__ import annotations

import pytest

from checker.explore.result import Options
from checker.model import Model
from specs.kafka import KafkaParams, KafkaReplication

pytestmark = pytest.mark.slow


def run(check=None, **kw):
    from checker.explore.engine import Engine
    m = Model(KafkaReplication(KafkaParams(**kw)), check=check)
    return Engine().explore(m, Options())


def violated(name, **kw):
    r = run(check=[name], **kw)
    assert r.status == "violated", f"{name} not violated with {kw}"
    assert [v.check for v in r.violations] == [name]
    return r.violations[0]


# bounds of each scenario; the safeguard-on run uses the same bounds
NO_MIN_ISR_CHANGE = dict(min_isr_changes=0)
FLAWS = [
    # (switches, bounds, invariant that must fail)
    (dict(protocol="kafka-3.5"), dict(NO_MIN_ISR_CHANGE), "acked_writes_survive"),
    (dict(no_strict_min_isr=True), dict(NO_MIN_ISR_CHANGE, lossy_shutdowns=0), "elr_members_hold_committed_log"),
    (dict(hwm_from_maximal_isr=True), dict(NO_MIN_ISR_CHANGE, lossy_shutdowns=0), "elr_members_hold_committed_log"),
    (dict(keep_unclean_in_elr=True), dict(NO_MIN_ISR_CHANGE, fences=2), "leader_holds_committed_log"),
    (dict(no_broker_epoch_check=True), dict(NO_MIN_ISR_CHANGE), "isr_members_hold_committed_log"),
    (dict(recovery="aggressive"), dict(NO_MIN_ISR_CHANGE, lossy_shutdowns=0, fences=2), "acked_writes_survive"),
    (dict(protocol="kafka-4.x", unclean_election=True), dict(NO_MIN_ISR_CHANGE, lossy_shutdowns=0, fences=2),
     "acked_writes_survive"),
    (dict(min_isr_policy="keep-elr"), dict(), "elr_only_below_min_isr"),
]


@pytest.mark.parametrize("switches, bounds, name", FLAWS, ids=[n for _, _, n in FLAWS])
def test_flaw_is_found(switches, bounds, name):
    violated(name, **switches, **bounds)


SAFE_BOUNDS = sorted({tuple(sorted(b.items())) for _, b, _ in FLAWS if "min_isr_changes" in b})


@pytest.mark.parametrize("bounds", [dict(b) for b in SAFE_BOUNDS], ids=[str(dict(b)) for b in SAFE_BOUNDS])
def test_kip_966_holds_with_the_safeguards_on(bounds):
    r = run(**bounds)
    assert r.status == "holds", [(v.check, v.depth) for v in r.violations]


def test_keep_elr_policy_loses_data_after_lowering_min_isr():
    """"min ISR change keeps ELR ... then data loss": lowering min ISR keeps a stale ELR member."""
    violated("elr_members_hold_committed_log", min_isr_policy="keep-elr")


def test_kip_966_loses_an_acknowledged_write_with_min_isr_lossy_shutdowns():
    violated("acked_writes_survive", lossy_shutdowns=2, min_isr_changes=0)


@pytest.mark.parametrize("recovery", ["none", "balanced"])
def test_kip_966_holds_with_min_isr_minus_one_lossy_shutdowns(recovery):
    r = run(recovery=recovery, min_isr_changes=0)
    assert r.status == "holds", [(v.check, v.depth) for v in r.violations]


def test_every_action_fires_at_default_bounds():
    from checker.explore.engine import Engine
    m = Model(KafkaReplication(KafkaParams()))
    r = Engine().explore(m, Options(keep_going=True))
    assert r.incomplete_reason is None
    assert r.never_fired() == []
