"""--accept-stale-fetch-responses: a delayed fetch response applied after the follower's leader
epoch changed, step by step; what it breaks (leader epochs along a log); that the default model
does not change (no bits, no actions) and that a response failing Kafka's remaining checks is
dropped."""

from __future__ import annotations

import pytest

from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Invariant
from kraftcheck.invariants.logs import leader_epochs_increase_along_logs
from kraftcheck.specs.kafka.params import KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication
from test_kafka_model import run_steps_from

BOUNDS = dict(records=3, fences=2, lossy_shutdowns=1, isr_shrinks=0, min_isr_changes=0)


class KafkaWithEpochOrder(KafkaReplication):
    """The model plus ``leader_epochs_increase_along_logs`` (not one of the model's checks)."""

    def invariants(self):
        fn = leader_epochs_increase_along_logs
        return super().invariants() + [Invariant(fn.__name__, fn, fn.__doc__)]


def model(**kw) -> Model:
    return Model(KafkaWithEpochOrder(KafkaParams(**kw)))


# b1 (leader, epoch 1) writes r1, r2; b2 has r1 and its Fetch at offset 1 is answered (with r2)
# late. b1 and b2 are fenced, b3 (ELR-less, sole ISR member) leads in epoch 2 and writes r3 at
# offset 0; b2 follows b3, truncates r1 and fetches r3. b3 crashes; b1 (ELR) leads in epoch 3;
# b2 follows b1 again and the epoch-1 response arrives: its fetch offset (1) still matches.
DELAYED = [
    ("Produce", (0, 0)), ("Fetch", (1,)), ("Produce", (0, 0)),
    ("DelayFetchResponse", (1,)),
]
EPOCH_CHANGES = [
    ("Fence", (1,)), ("Fence", (0,)),
    ("SyncMetadata", (2,)), ("Produce", (2, 0)),
    ("SyncMetadata", (1,)), ("Fetch", (1,)), ("Fetch", (1,)),
    ("Unfence", (0,)), ("LossyShutdown", (2, 0)), ("SessionTimeout", (2,)),
    ("SyncMetadata", (1,)),
]


def test_a_stale_response_appends_an_older_epoch_after_a_newer_one():
    m = model(accept_stale_fetch_responses=True, **BOUNDS)
    state = run_steps_from(m, m.initial[0], DELAYED + EPOCH_CHANGES)
    v = m.layout.show(state)
    assert v["c_leader"] == "b1" and v["v_leader"][1] == "b1" and v["fr_leader"] == 0
    assert v["v_epoch"][1] > v["fr_epoch"] > 0          # the response is from an older epoch
    assert v["log"][1] == ["r3"] and v["fr_records"] == ["r2"]
    state = run_steps_from(m, state, [("ReceiveFetchResponse", ())])
    v = m.layout.show(state)
    assert v["log"][1] == ["r2", "r3"] and v["fr_epoch"] == 0
    assert v["rec_offset"][1:] == [1, 0]                # r3 at offset 0, then r2 (epoch 1) at offset 1
    assert m.violated_invariants(state) == ["leader_epochs_increase_along_logs"]


def test_a_response_whose_fetch_offset_no_longer_matches_is_dropped():
    m = model(accept_stale_fetch_responses=True, **BOUNDS)
    state = run_steps_from(m, m.initial[0], DELAYED + EPOCH_CHANGES[:6])  # b2 truncated to the empty log
    before = m.layout.show(state)
    assert before["log"][1] == [] and before["fr_offset"] == 1
    state = run_steps_from(m, state, [("ReceiveFetchResponse", ())])
    after = m.layout.show(state)
    assert after["log"][1] == [] and after["fr_epoch"] == 0


def test_the_fetcher_waits_for_its_delayed_response():
    m = model(accept_stale_fetch_responses=True, **BOUNDS)
    state = run_steps_from(m, m.initial[0], DELAYED)
    assert m.step(state, m.label_for("Fetch", (1,))) is None        # same fetcher thread: blocked
    assert m.step(state, m.label_for("Fetch", (2,))) is not None    # another follower is not
    assert m.step(state, m.label_for("DelayFetchResponse", (2,))) is None  # one delayed at a time


def test_without_the_switch_there_is_no_delayed_response():
    m = model(**BOUNDS)
    names = {a.name for a in m.actions}
    assert not {"DelayFetchResponse", "ReceiveFetchResponse"} & names
    assert all(e.bits == 0 for e in m.layout.elements if e.field.name.startswith("fr_"))
    with pytest.raises(Exception):
        m.label_for("DelayFetchResponse", (1,))
    state = run_steps_from(m, m.initial[0], [(n, v) for n, v in DELAYED if n != "DelayFetchResponse"]
                       + [("Fetch", (1,))] + EPOCH_CHANGES)
    assert m.violated_invariants(state) == []
