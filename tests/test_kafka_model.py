"""The Kafka model: parameters, exact state counts at tiny bounds, engine/reference agreement,
the "last replica standing" scenario step by step, and invariant semantics on hand-made states."""

from __future__ import annotations

import pytest

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.specs import DEFAULT_SPEC, spec_class
from kraftcheck.specs.kafka import KafkaParams, KafkaReplication

QUIET = dict(lossy_shutdowns=0, fences=0, isr_shrinks=0, min_isr_changes=0)


def model(**kw) -> Model:
    return Model(KafkaReplication(KafkaParams(**kw)))


def test_registered_as_default_spec():
    assert DEFAULT_SPEC == "kafka"
    assert spec_class("kafka") is KafkaReplication


@pytest.mark.parametrize("kw, words", [
    (dict(min_isr=4), "above --brokers"),
    (dict(protocol="kafka-4.x", recovery="balanced"), "kip-966 preset only"),
    (dict(unclean_election=True), "kafka presets"),
    (dict(protocol="kafka-3.5", keep_unclean_in_elr=True), "needs ELR"),
    (dict(recovery="aggressive", balanced_replies=1), "--recovery balanced only"),
    (dict(no_strict_min_isr=True, hwm_from_maximal_isr=True), "pick one"),
    (dict(recovery="sometimes"), "choose one of"),
    (dict(brokers=6), "out of range"),
])
def test_contradictory_options_are_rejected(kw, words):
    with pytest.raises(UsageError, match=words):
        KafkaReplication(KafkaParams(**kw))


def test_defaults_are_accepted_and_pack_into_few_words():
    m = model()
    assert m.layout.nwords <= 3


def explore(m: Model, max_states=None):
    return ReferenceExplorer().explore(m, Options(max_states=max_states, keep_going=True))


def test_exact_counts_without_faults():
    r = explore(model(**QUIET))
    assert (r.status, r.distinct_states, r.states_generated, r.depth) == ("holds", 44, 71, 9)


def test_exact_counts_with_one_isr_shrink():
    from kraftcheck.checker.explore.engine import Engine
    r = Engine().explore(model(**{**QUIET, "isr_shrinks": 1}), Options(keep_going=True))
    assert (r.status, r.distinct_states, r.states_generated, r.depth) == ("holds", 678, 1820, 14)


def test_two_records_without_faults():
    from kraftcheck.checker.explore.engine import Engine
    r = Engine().explore(model(records=2, **QUIET), Options(keep_going=True))
    assert r.status == "holds"
    assert r.distinct_states > 44


def test_a_lossy_shutdown_loses_nothing_acknowledged_under_kip_966():
    from kraftcheck.checker.explore.engine import Engine
    r = Engine().explore(model(**{**QUIET, "lossy_shutdowns": 1}), Options(keep_going=True))
    assert (r.status, r.distinct_states, r.states_generated, r.depth) == ("holds", 4762, 13432, 21)


def test_engine_and_reference_agree_at_tiny_bounds():
    from kraftcheck.checker.explore.engine import Engine
    m = model(**{**QUIET, "min_isr_changes": 1})
    a = ReferenceExplorer().explore(m, Options(keep_going=True))
    b = Engine().explore(m, Options(keep_going=True))
    assert (a.status, a.distinct_states, a.states_generated, a.depth) == \
           (b.status, b.distinct_states, b.states_generated, b.depth)
    assert a.distinct_states == 220
    assert a.coverage() == b.coverage()


def run_steps(m: Model, steps):
    """Replay ``steps`` (action name, parameter values) from the initial state; each must be enabled."""
    state = m.initial[0]
    for name, values in steps:
        nxt = m.step(state, m.label_for(name, values))
        assert nxt is not None, f"{name}{values} is not enabled"
        state = nxt
    return state


# KIP-966 motivation, "last replica standing", with b1 as the leader: b1 replicates an acks=all
# write to b2 and b3; b2 and b3 are partitioned from the controller (fenced); b1 loses its
# unflushed log in an unclean shutdown; b2 and b3 come back; b1 restarts and is elected again.
LAST_REPLICA_STANDING = [
    ("Produce", (0, 1)),
    ("Fetch", (1,)), ("Fetch", (2,)), ("Fetch", (1,)), ("Fetch", (2,)),
    ("AdvanceHighWatermark", (0,)),
    ("Fence", (1,)), ("Fence", (2,)),
    ("LossyShutdown", (0, 0)),
    ("SessionTimeout", (0,)),
    ("Unfence", (1,)), ("Unfence", (2,)),
    ("Restart", (0,)),
    ("Unfence", (0,)),
]


def shown(m, state):
    return m.layout.show(state)


def test_last_replica_standing_loses_an_acknowledged_write_under_kafka_3_5():
    m = model(protocol="kafka-3.5", fences=2, isr_shrinks=0, min_isr_changes=0)
    state = run_steps(m, LAST_REPLICA_STANDING)
    v = shown(m, state)
    assert v["acked"] == ["r1"] and v["c_leader"] == "b1" and v["log"][0] == []
    assert "acked_writes_survive" in m.violated_invariants(state)


def test_last_replica_standing_keeps_the_write_under_kip_966():
    m = model(fences=2, isr_shrinks=0, min_isr_changes=0)
    steps = LAST_REPLICA_STANDING[:-2]  # b3 (an ELR member) is elected when unfenced
    state = run_steps(m, steps)
    v = shown(m, state)
    assert v["c_leader"] == "b3" and v["c_isr"] == ["b3"] and v["log"][2] == ["r1"]
    state = run_steps_from(m, state, [("Restart", (0,)), ("Unfence", (0,))])
    v = shown(m, state)
    assert v["c_leader"] == "b3" and v["c_elr"] == [] and v["c_lkelr"] == ["b1"]  # unclean: ELR -> LastKnownELR
    assert m.violated_invariants(state) == []


def run_steps_from(m, state, steps):
    for name, values in steps:
        nxt = m.step(state, m.label_for(name, values))
        assert nxt is not None, f"{name}{values} is not enabled"
        state = nxt
    return state


# Two records: b1 writes r1 (acks=1) and b3 fetches it; b1 is fenced and b2, elected in epoch 2
# without r1, writes r2 at the same offset. b3's log has diverged; its next Fetch truncates r1
# (never committed) and the one after fetches r2.
LOG_DIVERGENCE = [
    ("Produce", (0, 0)), ("Fetch", (2,)),
    ("Fence", (0,)), ("SyncMetadata", (1,)), ("Produce", (1, 0)),
    ("SyncMetadata", (2,)),
]


def test_two_records_diverge_and_the_follower_truncates():
    m = model(records=2, isr_shrinks=0, min_isr_changes=0, lossy_shutdowns=0)
    state = run_steps(m, LOG_DIVERGENCE)
    v = shown(m, state)
    assert v["log"][2] == ["r1"] and v["log"][1] == ["r2"] and v["rec_offset"] == [0, 0]
    state = run_steps_from(m, state, [("Fetch", (2,))])
    assert shown(m, state)["log"][2] == []
    state = run_steps_from(m, state, [("Fetch", (2,))])
    v = shown(m, state)
    assert v["log"][2] == ["r2"] and v["committed"] == []
    assert m.violated_invariants(state) == []


@pytest.mark.parametrize("bounds, counts", [
    (dict(lossy_shutdowns=0), (438_846, 29)),
    (dict(fences=0), (1_065_526, 31)),
], ids=["fence-and-shrink", "lossy-and-shrink"])
def test_two_records_hold_under_kip_966(bounds, counts):
    from kraftcheck.checker.explore.engine import Engine
    r = Engine().explore(model(records=2, min_isr_changes=0, **bounds), Options())
    assert r.status == "holds" and r.exhaustive
    assert (r.distinct_states, r.depth) == counts
