"""The publish window of a broker made leader (issue 30 items 1 and 3; docs/model.md section 2e).

``--new-leader-publish-window``: every broker keeps its log config's min ISR; a broker made leader
by a publish that also changes min ISR runs ``makeLeader`` (and advances the HWM) with the value
from before the publish, until the publish's config delta. Pinned counts (the switch off leaves
the space as it was), a step-by-step run through the window, and the input errors.
"""

from __future__ import annotations

import pytest

import kraftcheck
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.model import Model
from kraftcheck.specs.kafka.params import KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication

ONE_CHANGE = dict(lossy_shutdowns=0, fences=0, isr_shrinks=0, min_isr_changes=1)


def run(**params):
    result = kraftcheck.check("kafka", **params)
    return result.status, result.distinct_states, result.states_generated, result.depth


@pytest.mark.parametrize("protocol, without, with_window", [
    ("kip-966", ("holds", 220, 527, 11), ("holds", 748, 2335, 13)),
    ("kafka-4.x", ("holds", 264, 641, 11), ("holds", 792, 2449, 13)),
])
def test_one_min_isr_change(protocol, without, with_window):
    """3 brokers, min ISR 2, one min ISR change and no fault: 220 states is the count pinned before
    the switch (test_kafka_model); with it the followers' config is state too."""
    assert run(protocol=protocol, **ONE_CHANGE) == without
    assert run(protocol=protocol, new_leader_publish_window=True, **ONE_CHANGE) == with_window


def test_a_new_leader_advances_the_hwm_with_the_min_isr_it_had():
    """Fence(b1) elects b2 with ISR b2+b3; ChangeMinIsr(3); b2's publish makes it leader and, in
    the topic delta, keeps min ISR 2 (BrokerMetadataPublisher.onMetadataUpdate: applyDelta before
    the DynamicConfigPublisher), so it accepts an acks=all write and advances the HWM over an ISR of
    2 while min ISR is 3; the config delta then brings 3. Without the switch the publish installs 3
    with the leadership and the HWM cannot move."""
    for window in (False, True):
        model = Model(KafkaReplication(KafkaParams(protocol="kafka-4.x", new_leader_publish_window=window,
                                                   **dict(ONE_CHANGE, fences=1))))

        def step(flat, action, *values):
            return model.step(flat, model.label_for(action, values))

        s = step(model.initial[0], "Fence", 0)
        s = step(s, "ChangeMinIsr", 2)  # min ISR 3
        s = step(s, "SyncMetadata", 1)
        v = model.layout.values(s)
        assert v["v_leader"][1] == 1 and v["v_isr"][1] == 0b110
        if not window:
            assert v["v_min_isr"][1] == 3 and step(s, "Produce", 1, 1) is None
            continue
        assert v["v_min_isr"][1] == 2 and v["v_cfg_next"][1] == 3
        s = step(s, "Produce", 1, 1)  # acks=all
        s = step(step(s, "SyncMetadata", 2), "Fetch", 2)
        s = step(s, "Fetch", 2)
        assert "hwm_advances_only_with_min_isr" in model.violated_properties(s, step(s, "AdvanceHighWatermark", 1))
        after = model.layout.values(step(s, "ApplyConfigDelta", 1))
        assert after["v_min_isr"][1] == 3 and after["v_cfg_next"][1] == 0


@pytest.mark.parametrize("params, words", [
    (dict(new_leader_publish_window=True, min_isr_changes=0), ["--min-isr-changes 1"]),
    (dict(new_leader_publish_window=True, fix_config_before_topic=True), ["--fix-config-before-topic"]),
])
def test_bad_input_says_what_is_wrong(params, words):
    with pytest.raises(UsageError) as err:
        KafkaReplication(KafkaParams(**params)).check_params()
    for w in words:
        assert w in str(err.value)
