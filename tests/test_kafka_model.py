"""The Kafka model: parameters, exact state counts at tiny bounds, engine/reference agreement,
the "last replica standing" scenario step by step, and invariant semantics on hand-made states."""

from __future__ import annotations

import pytest

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.specs import DEFAULT_SPEC, spec_class
from kraftcheck.specs.kafka.params import KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication

QUIET = dict(lossy_shutdowns=0, fences=0, isr_shrinks=0, min_isr_changes=0)


def model(**kw) -> Model:
    return Model(KafkaReplication(KafkaParams(**kw)))


def test_registered_as_default_spec():
    assert DEFAULT_SPEC == "kafka"
    assert spec_class("kafka") is KafkaReplication


@pytest.mark.parametrize("kw, words", [
    (dict(protocol="kafka-4.0", keep_unclean_in_elr=True), "which kafka-4.0 does not have"),
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
    # 990 since a shrink may remove both lagging followers at once (678 when it removed one)
    assert (r.status, r.distinct_states, r.states_generated, r.depth) == ("holds", 990, 2735, 14)


def test_a_shrink_removes_every_lagging_follower_it_names_in_one_alter_partition():
    """Partition.maybeShrinkIsr sends one AlterPartition without every out-of-sync follower."""
    m = model(**{**QUIET, "isr_shrinks": 1})
    both = 0b110 - 1  # the set {b2, b3}
    shrink = next(a for a in m.spec.actions() if a.name == "ProposeIsrShrink")
    assert shrink.params[1].labels[both] == "b2+b3"
    state = run_steps(m, [("Produce", (0, 0)), ("ProposeIsrShrink", (0, both)), ("HandleAlterPartition", ()),
                          ("ReceiveAlterPartitionResponse", ())])
    v = shown(m, state)
    assert v["c_isr"] == ["b1"] and v["c_elr"] == ["b2", "b3"] and v["v_isr"][0] == ["b1"]
    assert v["isr_shrinks_used"] == 1


def test_a_caught_up_follower_is_never_out_of_sync():
    m = model(**{**QUIET, "isr_shrinks": 1})
    state = run_steps(m, [("Fetch", (1,))])  # b2 fetched at the leader's log end offset
    assert m.step(state, m.label_for("ProposeIsrShrink", (0, 0b010 - 1))) is None
    assert m.step(state, m.label_for("ProposeIsrShrink", (0, 0b110 - 1))) is None
    assert m.step(state, m.label_for("ProposeIsrShrink", (0, 0b100 - 1))) is not None


def test_min_isr_above_the_replication_factor_is_in_force_as_the_replication_factor():
    """getTopicEffectiveMinIsr and Partition.effectiveMinIsr: min(configured, replication factor)."""
    v = shown(model(min_isr=5), model(min_isr=5).initial[0])
    assert v["c_min_isr"] == 3 and v["v_min_isr"][0] == 3 and v["fewest_min_isr"] == 3
    r = explore(model(min_isr=5, **QUIET))
    assert (r.status, r.distinct_states) == ("holds", explore(model(min_isr=3, **QUIET)).distinct_states)


def test_kafka_4_0_is_kafka_3_5_with_the_strict_hwm_rule_no_epoch_bump_on_shrinks_and_fencing_in_the_hwm_wait():
    """docs/model.md 2f and 2g: the strict HWM rule, no epoch bump on a shrink, and the caught-up
    HWM rule's fencing check (KAFKA-15021, 3.6)."""
    from kraftcheck.specs.kafka.params import switches
    p40, p35 = switches(KafkaParams(protocol="kafka-4.0")), switches(KafkaParams(protocol="kafka-3.5"))
    assert {k for k in p40 if p40[k] != p35[k]} == {"k_hwm_rule", "k_epoch_bump_on_shrink", "k_hwm_wait_checks_fencing"}
    assert p40["k_elr"] == 0 and p40["k_hwm_rule"] == switches(KafkaParams())["k_hwm_rule"]
    assert p35["k_epoch_bump_on_shrink"] == 1 and p40["k_epoch_bump_on_shrink"] == 0
    assert (p35["k_hwm_wait_checks_fencing"], p40["k_hwm_wait_checks_fencing"]) == (0, 1)


def test_each_release_after_4_0_differs_from_the_one_before_as_docs_model_2f_says():
    """4.1 turns ELR on for new clusters; 4.2 reads as 4.1; 4.3 completes a reassignment once the
    adding replicas are in the ISR (KAFKA-19975); the newest trunk read (kafka-4.x) is 4.3."""
    from kraftcheck.specs.kafka.params import switches
    names = ("kafka-4.0", "kafka-4.1", "kafka-4.2", "kafka-4.3", "kafka-4.x")
    p40, p41, p42, p43, p4x = (switches(KafkaParams(protocol=name)) for name in names)
    assert {k for k in p41 if p41[k] != p40[k]} == {"k_elr", "k_unclean_detect", "k_fallback", "k_min_isr_policy", "k_last_leader"}
    assert p42 == p41
    assert {k: (p42[k], p43[k]) for k in p43 if p43[k] != p42[k]} == {"k_complete_on_adding": (0, 1)}
    assert p4x == p43


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
    # 438,846 and 1,065,526 when a shrink removed one follower at a time
    (dict(lossy_shutdowns=0), (562_141, 29)),
    (dict(fences=0), (1_345_814, 31)),
], ids=["fence-and-shrink", "lossy-and-shrink"])
def test_two_records_hold_under_kip_966(bounds, counts):
    from kraftcheck.checker.explore.engine import Engine
    r = Engine().explore(model(records=2, min_isr_changes=0, **bounds), Options())
    assert r.status == "holds" and r.exhaustive
    assert (r.distinct_states, r.depth) == counts


# --replay-known-changes (docs/findings.md F5) at F5's bounds: one fence, one shrink, no min ISR
# change, no lossy shutdown. Without the switch the space holds; with it the replay of a shrink
# drops the expansion sent meanwhile and an acknowledged write is lost; either fix closes that.
F5_BOUNDS = dict(min_isr_changes=0, lossy_shutdowns=0)
F5_LOSS = {"leader_maximal_isr_covers_electable": 8, "isr_members_hold_committed_log": 11,
           "leader_holds_committed_log": 12, "acked_writes_survive": 12, "reads_are_repeatable": 13}


@pytest.mark.parametrize("switches, counts, violated", [
    (dict(), (46_579, 164_464, 24), {}),
    # fewer: the states between a response (or a leader's publish) and its HWM advance are gone
    (dict(hwm_under_partition_lock=True), (45_859, 162_146, 23), {}),
    (dict(replay_known_changes=True), (173_376, 701_071, 29), F5_LOSS),
    (dict(replay_known_changes=True, fix_ignore_replayed_change=True), (107_095, 421_182, 24), {}),
    (dict(replay_known_changes=True, fix_await_metadata=True), (71_234, 260_162, 26), {}),
], ids=["atomic", "atomic-hwm-under-lock", "replay", "replay-fix-ignore", "replay-fix-await"])
def test_replay_of_a_known_change_and_its_fixes(switches, counts, violated):
    from kraftcheck.checker.explore.engine import Engine
    r = Engine().explore(model(**F5_BOUNDS, **switches), Options(keep_going=True))
    assert r.exhaustive
    assert (r.distinct_states, r.states_generated, r.depth) == counts
    assert {v.check: v.depth for v in r.violations} == violated


@pytest.mark.parametrize("under_lock", [False, True], ids=["separate-step", "under-lock"])
def test_hwm_under_partition_lock_advances_with_the_alter_partition_response(under_lock):
    """handleAlterPartitionUpdate ends with maybeIncrementLeaderHW: with the switch, installing
    the shrink's ISR {b1,b2} advances the HWM over b2's log end in the same step; without it the
    advance is a later AdvanceHighWatermark step."""
    m = model(**F5_BOUNDS, hwm_under_partition_lock=under_lock)
    out_b3 = 0b100 - 1
    state = run_steps(m, [("Produce", (0, 1)), ("Fetch", (1,)), ("Fetch", (1,)), ("ProposeIsrShrink", (0, out_b3)),
                          ("HandleAlterPartition", ())])
    assert shown(m, state)["hwm"][0] == 0  # b3, in the ISR until now, has not fetched
    state = run_steps_from(m, state, [("ReceiveAlterPartitionResponse", ())])
    v = shown(m, state)
    assert v["v_isr"][0] == ["b1", "b2"]
    assert v["hwm"][0] == (1 if under_lock else 0)
    advance = m.step(state, m.label_for("AdvanceHighWatermark", (0,)))
    assert (advance is None) == under_lock  # nothing left to advance once it happened under the lock
    if not under_lock:
        assert shown(m, advance)["hwm"][0] == 1


@pytest.mark.parametrize("under_lock", [False, True], ids=["separate-step", "under-lock"])
def test_hwm_under_partition_lock_advances_with_a_topic_delta_not_a_config_delta(under_lock):
    """makeLeader ends with maybeIncrementLeaderHW, and only a topic delta reaches it: b1's publish
    of b3's fence (ISR {b1,b2}) advances the HWM with the switch; a publish of a min ISR change
    alone (DynamicConfigPublisher) never does."""
    m = model(**F5_BOUNDS, hwm_under_partition_lock=under_lock)
    state = run_steps(m, [("Produce", (0, 0)), ("Fetch", (1,)), ("Fetch", (1,)), ("Fence", (2,)),
                          ("SyncMetadata", (0,))])
    v = shown(m, state)
    assert v["v_isr"][0] == ["b1", "b2"] and v["hwm"][0] == (1 if under_lock else 0)
    # kafka-4.0: no ELR, and (unlike kafka-3.5's metadata version) the shrink keeps the leader
    # epoch, so the publish of the min ISR change below is a config delta alone
    m = model(protocol="kafka-4.0", hwm_under_partition_lock=under_lock)
    only_b1 = 0b110 - 1  # the shrink removes b2 and b3
    state = run_steps(m, [("ProposeIsrShrink", (0, only_b1)), ("HandleAlterPartition", ()),
                          ("ReceiveAlterPartitionResponse", ()), ("Produce", (0, 0)), ("ChangeMinIsr", (0,)),
                          ("SyncMetadata", (0,))])
    v = shown(m, state)
    assert v["v_isr"][0] == ["b1"] and v["v_min_isr"][0] == 1
    assert v["hwm"][0] == 0  # the config-only publish did not run makeLeader
    assert m.step(state, m.label_for("AdvanceHighWatermark", (0,))) is not None


def test_replay_switches_are_refused_where_they_mean_nothing():
    with pytest.raises(UsageError, match="add --replay-known-changes"):
        model(fix_ignore_replayed_change=True)
    # without the switch the new fields take no bits and the action does not exist
    m = model()
    assert "LagTimeout" not in [a.name for a in m.spec.actions()]
    assert {f.name: f.domain for f in m.layout.fields if f.name in ("v_ahead", "f_caught")} == {
        "v_ahead": 1, "f_caught": 1}


def test_lag_timeout_lets_the_hwm_pass_a_caught_up_follower_outside_the_isr():
    """maybeIncrementLeaderHW's shouldWaitForReplicaToJoinIsr: b2, caught up and then removed from
    b1's ISR by the controller (its fence), holds the HWM back until its lag time runs out."""
    m = model(replay_known_changes=True, **F5_BOUNDS, fences=1)
    state = run_steps(m, [("Fetch", (1,)), ("Fetch", (2,)), ("Produce", (0, 0)), ("Fetch", (2,)), ("Fetch", (2,)),
                          ("Fence", (1,)), ("SyncMetadata", (0,))])
    v = shown(m, state)
    assert v["v_isr"][0] == ["b1", "b3"] and v["f_caught"][0] == [False, True, True]
    assert m.step(state, m.label_for("AdvanceHighWatermark", (0,))) is None  # b2 (log end 0) is waited for
    state = run_steps_from(m, state, [("LagTimeout", (0, 1)), ("AdvanceHighWatermark", (0,))])
    v = shown(m, state)
    assert v["f_caught"][0] == [False, False, True] and v["hwm"][0] == 1
    assert m.step(state, m.label_for("LagTimeout", (0, 2))) is None  # b3 is in the ISR


def test_preferred_leader_election_moves_leadership_back_to_the_first_replica():
    """auto.leader.rebalance.enable: once b1 is an unfenced ISR member again, the controller
    makes it leader (PartitionChangeBuilder.electPreferredLeader), bumping the leader epoch."""
    m = model(**{**QUIET, "fences": 1, "preferred_elections": 1})
    state = run_steps(m, [("Fence", (0,)), ("Unfence", (0,)), ("SyncMetadata", (0,)), ("SyncMetadata", (1,)),
                          ("Fetch", (0,)), ("ProposeIsrExpand", (1, 0))])
    assert m.step(state, m.label_for("PreferredElection", ())) is None  # b1 is not in the ISR yet
    state = run_steps_from(m, state, [("HandleAlterPartition", ())])
    before = shown(m, state)
    assert before["c_leader"] == "b2" and "b1" in before["c_isr"]
    state = run_steps_from(m, state, [("PreferredElection", ())])
    after = shown(m, state)
    assert after["c_leader"] == "b1" and after["c_epoch"] == before["c_epoch"] + 1
    assert after["preferred_elections_used"] == 1
    assert m.step(state, m.label_for("PreferredElection", ())) is None  # b1 leads; the bound is spent too
    assert "PreferredElection" not in [a.name for a in model().spec.actions()]  # off by default


@pytest.mark.slow
def test_f5_with_two_records_also_forks_the_committed_history():
    """docs/findings.md F5, "With two records": the same losses at the same lengths, and after
    the loss the new leader commits r2 at offset 0 while the fenced old leader still exposes the
    acknowledged r1 there (committed_logs_match, which one record cannot break)."""
    from kraftcheck.checker.explore.engine import Engine
    r = Engine().explore(model(**F5_BOUNDS, records=2, replay_known_changes=True), Options(keep_going=True))
    assert r.exhaustive
    assert (r.distinct_states, r.states_generated, r.depth) == (2_654_974, 11_621_213, 33)
    assert {v.check: v.depth for v in r.violations} == {**F5_LOSS, "committed_logs_match": 19}


def test_reports_show_the_hwm_rule_replay_known_changes_brings():
    """--replay-known-changes implies --hwm-under-partition-lock (one switch): the report says so."""
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.report import build_report
    r = Engine().explore(model(brokers=2, min_isr=1, replay_known_changes=True, lossy_shutdowns=0, fences=0,
                               min_isr_changes=0), Options(keep_going=True))
    shown = build_report(r, {}, {})["params"]
    assert shown["replay_known_changes"] is True and shown["hwm_under_partition_lock"] is True
    assert model(brokers=2).spec.options()["hwm_under_partition_lock"] is False
