"""A Kafka trace in Kafka's terms: what ``kraftcheck trace show / render / export / report`` print
by default for the Kafka spec (``--model-names`` shows the model's own fields instead).

The controller's partition state as ``PartitionRegistration`` names it (replicas, isr, elr,
lastKnownElr, leader, leaderEpoch, partitionEpoch, addingReplicas, removingReplicas,
leaderRecoveryState), each broker's log, high watermark and metadata view, brokers by id, and per
step the record or request it writes (``PartitionChangeRecord`` with the fields it changes,
``AlterPartition`` request and response, ``Fetch``, ``BrokerRegistration``...).

Real epochs. The model renumbers leader epochs by rank after every step
(``state.normalize_epochs``) and holds partition epochs as "is it current" bits. Both are mapped
back by replaying the trace with the renumbering switched off: every action is run interpreted, on
a copy of its globals in which ``normalize_epochs`` does nothing and ``write_partition_record``
counts the records written. Each replayed state, renumbered, must be the recorded one (else the
stored epochs are shown, and a note says so). The leader epoch counts from the model's first
leader's (1); the partition epoch from 0 at the trace's first state, one more per
``PartitionChangeRecord``; a leader's view holds the epoch of the last record it applied.
"""

from __future__ import annotations

import importlib
import re
import types
from typing import Any, Callable, Optional, Sequence

from kraftcheck.checker.model import python_function
from kraftcheck.specs.kafka import state as kafka_state
from kraftcheck.specs.kafka.state import AP_STATES, BROKER_STATES

CONTROLLER, HISTORY = "controller", "history"
NO_LEADER = -1  # Kafka's LeaderConstants.NO_LEADER

# PartitionChangeRecord's fields (metadata/src/main/resources/common/metadata/PartitionChangeRecord.json),
# from the controller's partition state as shown here
RECORD_FIELDS = (("leader", "leader"), ("isr", "isr"), ("replicas", "replicas"),
                 ("removingReplicas", "removingReplicas"), ("addingReplicas", "addingReplicas"),
                 ("leaderRecoveryState", "leaderRecoveryState"), ("elr", "eligibleLeaderReplicas"),
                 ("lastKnownElr", "lastKnownElr"))

# the AlterPartition exchange's states, as the response's error reads
AP_RESPONSE = {"accepted": "NONE", "rejected": "INELIGIBLE_REPLICA or OPERATION_NOT_ATTEMPTED (the leader reverts)",
               "unsettled": "FENCED_LEADER_EPOCH or INVALID_UPDATE_VERSION (the leader keeps its pending ISR)",
               "awaiting_metadata": "INVALID_UPDATE_VERSION (the leader waits for its next metadata)"}


# ----------------------------------------------------------------------------------------------
# real epochs: the trace replayed without renumbering


def _keep_epochs(t) -> None:
    """``normalize_epochs`` switched off."""


def _unrenumbered(fn: Callable, counter: list, cache: dict) -> Callable:
    """The interpreted body of action ``fn`` with the epoch renumbering off and every partition
    record counted in ``counter[0]`` (helpers it calls likewise, recursively)."""
    py = getattr(fn, "py_func", None)
    if py is None:
        return fn
    if id(fn) in cache:
        return cache[id(fn)]
    env = dict(py.__globals__)
    clone = types.FunctionType(py.__code__, env, py.__name__, py.__defaults__, py.__closure__)
    cache[id(fn)] = clone
    for name in py.__code__.co_names:
        value = py.__globals__.get(name)
        if name == "normalize_epochs":
            env[name] = _keep_epochs
        elif name == "write_partition_record" and hasattr(value, "py_func"):
            inner = _unrenumbered(value, counter, cache)

            def counted(t, _inner=inner):
                counter[0] += 1
                _inner(t)
            env[name] = counted
        elif hasattr(value, "py_func"):
            env[name] = _unrenumbered(value, counter, cache)
    return clone


def _records(n: int) -> str:
    return f"{n} record" + ("" if n == 1 else "s")


def replay_epochs(model, steps: Sequence[tuple[Optional[int], tuple[int, ...]]]):
    """(states with real epochs, partition records written per step, whether the replay agreed
    with the recorded states at every step)."""
    layout = model.layout
    normalize = python_function(kafka_state.normalize_epochs)
    counter, cache = [0], {}
    real = [tuple(steps[0][1])]
    records = [0]
    for label, flat in steps[1:]:
        lab = model.labels[label]
        fn = _unrenumbered(lab.action.fn, counter, cache)
        before = layout.to_object(real[-1])
        after = layout.to_object(real[-1])
        counter[0] = 0
        if not fn(before, after, *lab.values):
            return [tuple(f) for _, f in steps], [0] * len(steps), False
        check = layout.to_object(layout.from_object(after))
        normalize(check)
        if layout.from_object(check) != tuple(flat):
            return [tuple(f) for _, f in steps], [0] * len(steps), False
        real.append(layout.from_object(after))
        records.append(counter[0])
    return real, records, True


# ----------------------------------------------------------------------------------------------
# the state in Kafka's terms


def _ids(mask: int, n: int) -> list[int]:
    return [b + 1 for b in range(n) if mask >> b & 1]


def _broker(value: int, n: int) -> int:
    return int(value) + 1 if value < n else NO_LEADER


class KafkaTerms:
    """Translates one trace of the Kafka spec (``spec``, its ``model`` and ``steps``)."""

    def __init__(self, spec, model, steps) -> None:
        self.spec, self.model = spec, model
        self.n = spec.params.brokers
        self.layout = model.layout
        self.labels = [None if label is None else model.labels[label] for label, _ in steps]
        self.real, self.records, self.exact = replay_epochs(model, steps)
        self.objects = [self.layout.to_object(f) for f in self.real]
        self.fields = {f.name: f for f in self.layout.fields}
        self.bounds = [f.name[:-len("_used")] for f in self.layout.fields if f.name.endswith("_used") and f.const is None]
        self.rec_names = self.fields["log"].labels
        self._partition_epochs()

    def varies(self, name: str) -> bool:
        f = self.fields.get(name)
        return f is not None and f.const is None and f.domain > 1

    # -- partition epochs, counted along the trace
    def _partition_epochs(self) -> None:
        n = self.n
        pe, view, ap = 0, [0 if self.objects[0].v_pe_ok[b] else None for b in range(n)], None
        self.pe, self.view_pe, self.ap_pe = [], [], []
        for i, s in enumerate(self.objects):
            pe += self.records[i]
            lab = self.labels[i]
            for b in range(n):
                if s.v_pe_ok[b]:
                    view[b] = pe
            if s.ap_state == 0:
                ap = None
            elif s.ap_pe_ok:
                ap = pe
            elif lab is not None and lab.name.startswith("Propose"):
                ap = view[s.ap_from]
            self.pe.append(pe)
            self.view_pe.append(list(view))
            self.ap_pe.append(ap)

    # -- one step's state
    def state(self, i: int) -> dict[str, Any]:
        s, n = self.objects[i], self.n
        leader_of = [s.v_leader[b] == b for b in range(n)]
        out: dict[str, Any] = {
            "replicas": _ids(s.c_replicas, n),
            "isr": _ids(s.c_isr, n),
            "elr": _ids(s.c_elr, n),
            "lastKnownElr": _ids(s.c_lkelr, n),
            "leader": _broker(s.c_leader, n),
            "leaderEpoch": int(s.c_epoch),
            "partitionEpoch": self.pe[i],
        }
        if self.varies("c_adding") or self.varies("c_removing"):
            out["addingReplicas"] = _ids(s.c_adding, n)
            out["removingReplicas"] = _ids(s.c_removing, n)
        out["leaderRecoveryState"] = "RECOVERING" if s.c_recovering else "RECOVERED"
        out["lastKnownLeader"] = _broker(s.c_last_leader, n)
        out["min.insync.replicas"] = int(s.c_min_isr)
        if self.varies("c_part_min_isr"):
            out["partitionRecord.minIsr"] = int(s.c_part_min_isr)
        out["fencedBrokers"] = _ids(s.c_fenced, n)
        if self.varies("c_shutting_down"):
            out["controlledShutdown"] = _ids(s.c_shutting_down, n)
        out["alterPartitionInFlight"] = self._alter_partition(i)
        ids = [str(b + 1) for b in range(n)]
        per = lambda values: dict(zip(ids, values))  # noqa: E731
        out["brokerState"] = per([BROKER_STATES[s.b_state[b]] for b in range(n)])
        out["log"] = per([self._log(s, s.log[b]) for b in range(n)])
        out["highWatermark"] = per([int(s.hwm[b]) for b in range(n)])
        out["metadata.leader"] = per([_broker(s.v_leader[b], n) for b in range(n)])
        out["metadata.leaderEpoch"] = per([int(s.v_epoch[b]) for b in range(n)])
        out["metadata.partitionEpoch"] = per([self.view_pe[i][b] if leader_of[b] else None for b in range(n)])
        out["metadata.isr"] = per([_ids(s.v_isr[b], n) if leader_of[b] else None for b in range(n)])
        out["partitionState"] = per([self._partition_state(s, b) if leader_of[b] else None for b in range(n)])
        out["metadata.min.insync.replicas"] = per([int(s.v_min_isr[b]) if leader_of[b] else None for b in range(n)])
        out["followerFetchOffset"] = per([per([int(s.f_leo[b][f]) - 1 for f in range(n)]) if leader_of[b] else None
                                          for b in range(n)])
        if self.varies("v_cfg_next"):  # the config delta of a publish still to apply (0: none)
            out["metadata.pendingMinIsr"] = per([int(s.v_cfg_next[b]) or None for b in range(n)])
        if self.varies("v_recovering"):
            out["metadata.leaderRecoveryState"] = per([("RECOVERING" if s.v_recovering[b] else "RECOVERED")
                                                       if leader_of[b] else None for b in range(n)])
        if self.varies("v_ahead"):
            out["isrFromAlterPartitionResponse"] = per([bool(s.v_ahead[b]) if leader_of[b] else None
                                                        for b in range(n)])
        if self.varies("f_caught"):
            out["followerCaughtUp"] = per([_ids(sum(int(s.f_caught[b][f]) << f for f in range(n)), n)
                                           if leader_of[b] else None for b in range(n)])
        if self.varies("f_cfg_min_isr"):
            out["logConfig.min.insync.replicas"] = per([int(s.f_cfg_min_isr[b]) or None for b in range(n)])
        out["acknowledged"] = [self.rec_names[r] for r in range(len(self.rec_names)) if s.acked >> r & 1]
        out["committed"] = [self.rec_names[r] for r in range(len(self.rec_names)) if s.committed >> r & 1]
        out["faultsUsed"] = {name: int(getattr(s, name + "_used")) for name in self.bounds}
        return out

    def _partition_state(self, s, b: int) -> str:
        """A leader's ``Partition.partitionState``: committed, or pending the AlterPartition it sent.
        Its maximal ISR, over which the HWM is computed, is then the committed ISR with the
        proposed one's members added (``invariants.kafka_state.maximal_isr``): for a shrink the committed ISR itself
        (Kafka's ``PendingShrinkIsr.maximalIsr``), for an expansion the proposed one."""
        isr = _ids(s.v_isr[b], self.n)
        if s.ap_state == 0 or s.ap_from != b or not s.ap_live:
            return f"CommittedPartitionState(isr={isr})"
        proposed = _ids(s.ap_isr, self.n)
        kind = "PendingExpandIsr" if set(proposed) > set(isr) else \
            "PendingShrinkIsr" if set(proposed) < set(isr) else "PendingIsr"
        return f"{kind}(isr={isr}, maximalIsr={_ids(int(s.v_isr[b]) | int(s.ap_isr), self.n)})"

    def _log(self, s, mask: int) -> list[str]:
        entries = sorted((int(s.rec_offset[r]), self.rec_names[r], int(s.rec_epoch[r]))
                         for r in range(len(self.rec_names)) if mask >> r & 1)
        return [f"{name}@e{epoch}" for _, name, epoch in entries]

    def _alter_partition(self, i: int) -> Optional[dict[str, Any]]:
        s = self.objects[i]
        if s.ap_state == 0:
            return None
        out = {"state": AP_STATES[s.ap_state], "from": int(s.ap_from) + 1, "newIsr": _ids(s.ap_isr, self.n)}
        if s.ap_epoch:
            out["leaderEpoch"] = int(s.ap_epoch)
        out["partitionEpoch"] = self.ap_pe[i]
        if s.ap_stale:
            out["staleBrokerEpochs"] = _ids(s.ap_stale, self.n)
        if s.ap_recovered:
            out["leaderRecoveryState"] = "RECOVERED"
        return out

    # -- what each step writes or sends
    def writes(self, i: int, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
        lab = self.labels[i]
        name, p = lab.name, lab.shown_params()
        b = str(p["b"])[1:] if "b" in p else None
        f = str(p["f"])[1:] if "f" in p else None
        s0, s1 = self.objects[i - 1], self.objects[i]
        out: list[str] = []
        if name in ("Fence", "SessionTimeout"):
            out.append(f"BrokerRegistrationChangeRecord(brokerId={b}, fenced=true)")
        elif name == "Unfence":
            out.append(f"BrokerHeartbeatRequest from broker {b} -> BrokerRegistrationChangeRecord(brokerId={b}, "
                       "fenced=false)")
        elif name == "Restart":
            out.append(f"BrokerRegistrationRequest from broker {b} (a new broker epoch) -> RegisterBrokerRecord"
                       f"(brokerId={b})")
        elif name in ("CleanShutdown", "BeginControlledShutdown"):
            out.append(f"BrokerHeartbeatRequest(wantShutDown=true) from broker {b}")
        elif name == "CompleteControlledShutdown":
            out.append(f"broker {b} completes its controlled shutdown")
        elif name == "ChangeMinIsr":
            out.append(f"ConfigRecord(min.insync.replicas={p['value']})")
        elif name == "Reassign":
            out.append(f"AlterPartitionReassignmentsRequest(replicas={_ids(s1.c_replicas & ~s1.c_removing, self.n)})")
        elif name == "CancelReassignment":
            out.append("AlterPartitionReassignmentsRequest(replicas=null): cancel the reassignment")
        elif name == "PreferredElection":
            out.append("ElectLeadersRequest(electionType=PREFERRED)")
        elif name in ("ProposeIsrExpand", "ProposeIsrShrink", "ProposeRecovered"):
            ap = after["alterPartitionInFlight"] or {}
            extra = ", leaderRecoveryState=RECOVERED" if ap.get("leaderRecoveryState") else ""
            out.append(f"AlterPartitionRequest(brokerId={b}, leaderEpoch={ap.get('leaderEpoch')}, partitionEpoch="
                       f"{ap.get('partitionEpoch')}, newIsr={ap.get('newIsr')}{extra})")
        elif name.startswith("HandleAlterPartition"):
            ap = after["alterPartitionInFlight"] or {}
            state = ap.get("state")
            text = f"AlterPartitionResponse(error={AP_RESPONSE.get(state, state)}"
            if state == "accepted":
                text += f", leaderEpoch={after['leaderEpoch']}, partitionEpoch={after['partitionEpoch']}, " \
                        f"isr={after['isr']}"
            out.append(text + ")" + (" -- lost: the controller fails over" if name.endswith("FailOver") else ""))
        elif name == "ReceiveAlterPartitionResponse":
            ap = before["alterPartitionInFlight"] or {}
            out.append(f"broker {ap.get('from')} handles the AlterPartitionResponse ({ap.get('state')})")
        elif name == "Fetch":
            leader = before["metadata.leader"][f]
            out.append(f"FetchRequest(replicaId={f}, fetchOffset={len(before['log'][f])}, currentLeaderEpoch="
                       f"{before['metadata.leaderEpoch'][f]}) to leader {leader}; the response leaves broker {f} "
                       f"with {_records(len(after['log'][f]))}, highWatermark={after['highWatermark'][f]}")
        elif name == "SyncMetadata":
            pending = (after.get("metadata.pendingMinIsr") or {}).get(b)
            out.append(f"broker {b} applies the metadata log: leader {after['leader']}, leaderEpoch "
                       f"{after['leaderEpoch']}, partitionEpoch {after['partitionEpoch']}"
                       + (f"; its publish has yet to apply the config delta min.insync.replicas={pending}"
                          if pending else ""))
        elif name == "ApplyConfigDelta":
            out.append(f"broker {b} applies the config delta of its publish: min.insync.replicas="
                       f"{after['metadata.min.insync.replicas'][b]}")
        elif name == "Produce":
            new = [e for e in after["log"][b] if e not in before["log"][b]]
            out.append(f"ProduceRequest(acks={'-1' if p['acks'] == 'all' else 1}) to broker {b}: appends "
                       f"{', '.join(new)} at offset {len(before['log'][b])}")
        elif name == "AdvanceHighWatermark":
            out.append(f"leader {b} advances its highWatermark to {after['highWatermark'][b]}")
        elif name == "LossyShutdown":
            out.append(f"broker {b} stops uncleanly; its log keeps {len(after['log'][b])} of "
                       f"{_records(len(before['log'][b]))}")
        elif name == "LosslessShutdown":
            out.append(f"broker {b} stops uncleanly; its log is intact")
        elif name == "LagTimeout":
            out.append(f"leader {b}: follower {f} has not caught up within replica.lag.time.max.ms")
        elif name == "RecoveryReply":
            out.append(f"GetReplicaLogInfoResponse from broker {b}")
        elif name == "DelayFetchResponse":
            out.append(f"a FetchResponse to broker {f} is delayed")
        elif name == "ReceiveFetchResponse":
            out.append("the delayed FetchResponse arrives")
        if self.records[i]:
            changed = [f"{rec}={after[key]}" for key, rec in RECORD_FIELDS if after.get(key) != before.get(key)]
            out.append(f"PartitionChangeRecord({', '.join(changed)}) -> leaderEpoch {after['leaderEpoch']}, "
                       f"partitionEpoch {after['partitionEpoch']}")
        return out


# per-broker fields of the view: (name, doc); the axis is the broker id
PER_BROKER = {
    "brokerState": ("enum", "running, or offline with or without its clean-shutdown file"),
    "log": ("list", "the log, offset 0 first: each entry record@e<leader epoch>"),
    "highWatermark": ("int", "the broker's high watermark"),
    "metadata.leader": ("int", "the leader in the broker's metadata (-1: none)"),
    "metadata.leaderEpoch": ("int", "the leader epoch in the broker's metadata"),
    "metadata.partitionEpoch": ("int", "a leader's partition epoch (the last partition record it applied)"),
    "metadata.isr": ("list", "a leader's committed ISR, as Partition.partitionState holds it"),
    "partitionState": ("enum", "a leader's Partition.partitionState: committed, or pending an AlterPartition "
                               "(maximalIsr: the ISR the HWM is computed over)"),
    "metadata.min.insync.replicas": ("int", "the min.insync.replicas a leader's log config holds"),
    "followerFetchOffset": ("int", "a leader's view of each follower's fetch offset (-1: no Fetch this epoch)"),
    "metadata.pendingMinIsr": ("int", "the min.insync.replicas of the config delta the broker's metadata publish has "
                                      "yet to apply after its topic delta (null: none)"),
    "metadata.leaderRecoveryState": ("enum", "a leader's leaderRecoveryState"),
    "isrFromAlterPartitionResponse": ("bool", "a leader's ISR came from an AlterPartition response its metadata has "
                                              "not reached yet"),
    "followerCaughtUp": ("list", "a leader's followers that caught up less than replica.lag.time.max.ms ago"),
    "logConfig.min.insync.replicas": ("int", "a non-leader's min.insync.replicas from the last config delta it "
                                             "applied"),
}
CONTROLLER_FIELDS = {
    "replicas": ("list", "PartitionRegistration.replicas"),
    "isr": ("list", "PartitionRegistration.isr"),
    "elr": ("list", "PartitionRegistration.elr (eligible leader replicas)"),
    "lastKnownElr": ("list", "PartitionRegistration.lastKnownElr"),
    "leader": ("int", "PartitionRegistration.leader (-1: none)"),
    "leaderEpoch": ("int", "PartitionRegistration.leaderEpoch (real, not renumbered)"),
    "partitionEpoch": ("int", "PartitionRegistration.partitionEpoch, counted from 0 at the first step"),
    "addingReplicas": ("list", "PartitionRegistration.addingReplicas"),
    "removingReplicas": ("list", "PartitionRegistration.removingReplicas"),
    "leaderRecoveryState": ("enum", "PartitionRegistration.leaderRecoveryState"),
    "lastKnownLeader": ("int", "the last known leader kept for the last-known-leader election (-1: none)"),
    "min.insync.replicas": ("int", "the topic's min.insync.replicas"),
    "partitionRecord.minIsr": ("int", "the min ISR written with the last partition record "
                                      "(--fix-min-isr-in-partition-state)"),
    "fencedBrokers": ("list", "brokers the controller has fenced"),
    "controlledShutdown": ("list", "brokers in controlled shutdown"),
    "alterPartitionInFlight": ("map", "the one AlterPartition exchange in flight (null: none)"),
}
HISTORY_FIELDS = {
    "acknowledged": ("list", "acks=all records acknowledged to the producer"),
    "committed": ("list", "records that were below an acting leader's high watermark"),
    "faultsUsed": ("int", "faults (and reassignments) used so far, per bound"),
}


def code_paths_of(action: str, protocol: str) -> list[str]:
    """The Kafka methods an action stands for under a preset, from ``specs/kafka/code_paths.py``
    when the spec has that table (empty without it): a function ``code_paths(action, protocol)``
    or a mapping ``CODE_PATHS[action]`` (per preset), each entry ``(file, Class.method, commit)``
    shown as ``Class.method (File.java @ commit)``, or text."""
    try:
        table = importlib.import_module("kraftcheck.specs.kafka.code_paths")
    except ImportError:
        return []
    entry: Any = None
    if callable(getattr(table, "code_paths", None)):
        entry = table.code_paths(action, protocol)
    elif isinstance(getattr(table, "CODE_PATHS", None), dict):
        entry = table.CODE_PATHS.get(action)
        if isinstance(entry, dict):
            entry = entry.get(protocol, entry.get("default"))
    if entry is None:
        return []
    if isinstance(entry, str):
        return [entry]
    return [_code_path(e) for e in entry]


def _code_path(entry: Any) -> str:
    if isinstance(entry, (tuple, list)) and len(entry) == 3:
        file, method, commit = map(str, entry)
        return f"{method} ({file.rsplit('/', 1)[-1]} @ {commit[:12]})"
    return str(entry)


def _param(value: Any) -> Any:
    """A broker parameter by id (``b2`` -> 2, ``b1+b3`` -> [1, 3]); others as they are."""
    if isinstance(value, str) and re.fullmatch(r"b\d+(\+b\d+)*", value):
        ids = [int(x[1:]) for x in value.split("+")]
        return ids if "+" in value else ids[0]
    return value


def trace_terms(spec, model, steps) -> dict[str, Any]:
    """The hook ``Spec.trace_terms``: the trace in Kafka's terms (see traces/spec_terms.py)."""
    terms = KafkaTerms(spec, model, steps)
    states = [terms.state(i) for i in range(len(steps))]
    ids = [str(b + 1) for b in range(spec.params.brokers)]
    fields = []
    for group in (CONTROLLER_FIELDS, PER_BROKER, HISTORY_FIELDS):
        for name, (kind, doc) in group.items():
            if name not in states[0]:
                continue
            axis = ids if group is PER_BROKER else (terms.bounds if name == "faultsUsed" else None)
            d = {"name": name, "kind": kind, "shape": [len(axis)] if axis else [], "domain": 0,
                 "labels": None, "index_labels": axis or None, "doc": doc}
            if axis:
                d["axis_names"] = ["broker" if group is PER_BROKER else "bound"]
            fields.append(d)
    lanes = {CONTROLLER: list(CONTROLLER_FIELDS)}
    for b in ids:
        lanes[f"broker {b}"] = [f"{name}[{b}]" for name in PER_BROKER]
    lanes[HISTORY] = list(HISTORY_FIELDS)
    notes = []
    if not terms.exact:
        notes.append("the replay without epoch renumbering did not reproduce the trace: epochs are shown as stored")
    return {
        "terms": "kafka",
        "fields": fields,
        "lanes": lanes,
        "lane_names": {**{f"b{b}": f"broker {b}" for b in ids}, CONTROLLER: CONTROLLER, HISTORY: HISTORY},
        "states": states,
        "writes": [[]] + [terms.writes(i, states[i - 1], states[i]) for i in range(1, len(steps))],
        "params": [{}] + [{k: _param(v) for k, v in terms.labels[i].shown_params().items()}
                          for i in range(1, len(steps))],
        "code": [[]] + [code_paths_of(terms.labels[i].name, spec.params.protocol) for i in range(1, len(steps))],
        "real_epochs": terms.exact,
        "notes": notes,
    }
