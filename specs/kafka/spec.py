"""The Kafka replication spec: ``KafkaReplication`` assembles the fields (``state``), the
initial state, the actions (``controller``, ``broker``, ``faults``, ``recovery``), the checks
(``invariants/``), symmetry, liveness and the trace presentation for one ``KafkaParams``.

Terminal states are intended (``check_deadlock = False``, TLC's ``CHECK_DEADLOCK FALSE``): the
workload (``--records``) and every fault are bounded, so once every record is produced and
replicated and the fault budgets are spent, no action is enabled (with 2 brokers and no faults:
Produce, three Fetches and a high-watermark advance, 6 states). That quiescence is the model's
end, not a flaw; a partition that can never serve again is what ``--availability`` looks for.
"""

from __future__ import annotations

import dataclasses

from kraftcheck.checker.errors import SpecError, UsageError
from kraftcheck.checker.spec import Action, Invariant, Param, Permuted, Spec, Symmetry, TransitionProperty
from kraftcheck.invariants import kafka_invariants, kafka_properties
from kraftcheck.specs.kafka import broker, controller, faults, presentation, recovery
from kraftcheck.specs.kafka.field_check import describe, unknown_fields
from kraftcheck.specs.kafka.params import (BOUNDS, KafkaParams, check, effective_min_isr, has_replica_sets,
                                           replication_factor, switches)
from kraftcheck.specs.kafka.state import FALLBACK_UNCLEAN, RECOVERY_OFF, build_fields, max_leader_epoch, publish_window, subset_labels


class KafkaReplication(Spec):
    name = "kafka"
    summary = "Kafka replication under KRaft: KIP-966 ELR, strict min ISR, KIP-903, faults, unclean recovery"
    Params = KafkaParams
    main_lane = "controller"
    check_deadlock = False  # a bounded workload ends in quiescence: see the module's docstring
    # conformance (tests/test_conformance.py): tiny bounds, a few hundred states each
    examples = (
        {"brokers": 2, "lossy_shutdowns": 0, "fences": 0, "isr_shrinks": 0, "min_isr_changes": 0},
        {"lossy_shutdowns": 0, "fences": 0, "isr_shrinks": 0, "min_isr_changes": 1},
        {"brokers": 2, "min_isr": 1, "protocol": "kafka-3.5", "lossy_shutdowns": 1, "fences": 0, "isr_shrinks": 0,
         "min_isr_changes": 0},
        {"brokers": 2, "min_isr": 1, "accept_stale_fetch_responses": True, "lossy_shutdowns": 0, "isr_shrinks": 0,
         "min_isr_changes": 0},
        {"brokers": 2, "min_isr": 1, "replay_known_changes": True, "lossy_shutdowns": 0, "fences": 0,
         "min_isr_changes": 0},
        # replica sets and a reassignment (completion moving the leader, cancellation, a removed
        # replica's deletion): 466 states
        {"brokers": 2, "replication_factor": 1, "min_isr": 1, "reassignments": 1, "protocol": "kafka-4.x",
         "lossy_shutdowns": 0, "fences": 0, "isr_shrinks": 0, "min_isr_changes": 0},
        # docs/model.md 2c-2e: a lost AlterPartition response (240 states, the kip-966 revert), a
        # controlled shutdown in two steps (1,146), a new leader's publish window (99)
        {"brokers": 2, "min_isr": 1, "controller_failovers": 1, "lossy_shutdowns": 0, "fences": 0,
         "min_isr_changes": 0},
        {"brokers": 2, "clean_shutdowns": 1, "controlled_shutdown_in_two_steps": True, "lossy_shutdowns": 0,
         "fences": 0, "isr_shrinks": 0, "min_isr_changes": 0},
        {"brokers": 2, "min_isr": 1, "new_leader_publish_window": True, "lossy_shutdowns": 0, "isr_shrinks": 0},
    )

    # --symmetry conformance: a min ISR change, the delayed fetch response's broker fields, and the
    # replay's leader-by-follower fields
    symmetric_examples = (
        {"lossy_shutdowns": 0, "fences": 0, "isr_shrinks": 0, "min_isr_changes": 1, "election": "any"},
        {"min_isr": 1, "accept_stale_fetch_responses": True, "lossy_shutdowns": 0, "fences": 0, "isr_shrinks": 0,
         "min_isr_changes": 0, "election": "any"},
        {"brokers": 2, "min_isr": 1, "replay_known_changes": True, "lossy_shutdowns": 0, "fences": 0,
         "min_isr_changes": 0, "election": "any"},
        # the replica set is state: permuted with the brokers
        {"brokers": 2, "replication_factor": 1, "min_isr": 1, "reassignments": 1, "lossy_shutdowns": 0,
         "fences": 0, "isr_shrinks": 0, "min_isr_changes": 0, "election": "any"},
    )

    def check_params(self) -> None:
        check(self.params)
        # a model mistake (a switch not registered, a misspelt field) is said before any work
        fields = {f.name for f in self.fields()}
        functions = [a.fn for a in self.actions()] + [x.fn for x in self.invariants()] + \
                    [x.fn for x in self.properties()]
        unknown = unknown_fields(functions, fields)
        if unknown:
            raise SpecError(describe(unknown[0]))

    def options(self) -> dict:
        """As every spec's, with the HWM rule that --replay-known-changes brings shown as in force
        (reports and trace files would otherwise say hwm_under_partition_lock=false of a model
        that has it)."""
        out = super().options()
        if self.params.replay_known_changes:
            out["hwm_under_partition_lock"] = True
        return out

    # -- derived sizes
    @property
    def n(self) -> int:
        return self.params.brokers

    def shutdowns(self) -> int:
        p = self.params
        return p.lossy_shutdowns + p.lossless_shutdowns + p.clean_shutdowns

    def broker_names(self) -> tuple[str, ...]:
        return tuple(f"b{i + 1}" for i in range(self.n))

    def fields(self):
        p = self.params
        consts = switches(p)
        bounds = {name: getattr(p, name) for name in BOUNDS}
        shrink_bumps = p.isr_shrinks if consts["k_epoch_bump_on_shrink"] else 0
        return build_fields(self.n, p.records, max_leader_epoch(p.fences, self.shutdowns(), p.preferred_elections,
                                                                shrink_bumps, p.reassignments),
                            max(1, self.shutdowns()), consts, bounds)

    def initial_states(self):
        n, p = self.n, self.params
        min_isr = effective_min_isr(p)
        rf = replication_factor(p)
        replicas = (1 << rf) - 1  # b1..bR; every broker by default
        leader_view_isr = [replicas] + [0] * (n - 1)
        yield {
            "c_isr": replicas, "c_leader": 0, "c_last_leader": n, "c_epoch": 1, "c_min_isr": min_isr,
            # a broker that is not a replica has no view of the partition (no leader, epoch 0)
            "b_state": [0] * n, "v_leader": [0] * rf + [n] * (n - rf), "v_epoch": [1] * rf + [0] * (n - rf),
            "v_isr": leader_view_isr, "v_min_isr": [min_isr] + [0] * (n - 1),
            "v_pe_ok": [1] + [0] * (n - 1),
            "fewest_min_isr": min_isr,
            **({"c_replicas": replicas} if has_replica_sets(p) else {}),
            **({"c_part_min_isr": min_isr} if p.fix_min_isr_in_partition_state else {}),
            # every replica but the leader b1 keeps its log config's min ISR
            **({"f_cfg_min_isr": [0] + [min_isr] * (rf - 1) + [0] * (n - rf)} if p.new_leader_publish_window else {}),
            # Replica.resetReplicaState at b1's election: its ISR followers caught up just now
            **({"f_caught": [[0] + [1] * (rf - 1) + [0] * (n - rf)] + [[0] * n] * (n - 1)}
               if p.replay_known_changes else {}),
        }

    def actions(self):
        p = self.params
        b = Param("b", self.n, self.broker_names())
        f = Param("f", self.n, self.broker_names())
        acks = Param("acks", 2, ("1", "all"))
        # --election any: every action that elects names the leader it leaves (n: none), one
        # instance per acceptable choice; Kafka's ordered election has no such parameter
        any_leader = p.election == "any"
        leader = (Param("leader", self.n + 1, self.broker_names() + ("none",)),) if any_leader else ()

        def electing(name, ordered, chooser, params):
            fn = chooser if any_leader else ordered
            return Action(name, fn, params + leader, ordered.__doc__)

        acts = [
            Action("SyncMetadata", broker.sync_metadata, (b,), broker.sync_metadata.__doc__),
            *([Action("ApplyConfigDelta", broker.apply_config_delta, (b,), broker.apply_config_delta.__doc__)]
              if publish_window(switches(p), {name: getattr(p, name) for name in BOUNDS}) else []),
            Action("Produce", broker.produce, (b, acks), broker.produce.__doc__),
            Action("Fetch", broker.fetch, (f,), broker.fetch.__doc__),
            Action("AdvanceHighWatermark", broker.advance_hwm, (b,), broker.advance_hwm.__doc__),
            Action("ProposeIsrExpand", broker.propose_expand, (b, f), broker.propose_expand.__doc__),
            electing("HandleAlterPartition", controller.handle_alter_partition,
                     controller.handle_alter_partition_electing, ()),
            Action("ReceiveAlterPartitionResponse", broker.receive_alter_partition_response, (),
                   broker.receive_alter_partition_response.__doc__),
            electing("Unfence", controller.unfence, controller.unfence_electing, (b,)),
            electing("SessionTimeout", controller.session_timeout, controller.session_timeout_electing, (b,)),
            electing("Restart", faults.restart, faults.restart_electing, (b,)),
        ]
        if p.isr_shrinks:
            out = Param("out", (1 << self.n) - 1, subset_labels(self.broker_names()))
            acts.append(Action("ProposeIsrShrink", broker.propose_shrink, (b, out), broker.propose_shrink.__doc__))
        if p.fences:
            acts.append(electing("Fence", controller.fence, controller.fence_electing, (b,)))
        if p.lossy_shutdowns:
            keep = Param("keep", p.records)
            acts.append(Action("LossyShutdown", faults.lossy_shutdown, (b, keep), faults.lossy_shutdown.__doc__))
        if p.lossless_shutdowns:
            acts.append(Action("LosslessShutdown", faults.lossless_shutdown, (b,), faults.lossless_shutdown.__doc__))
        if p.clean_shutdowns:
            acts.append(electing("CleanShutdown", faults.clean_shutdown, faults.clean_shutdown_electing, (b,)))
        if p.controlled_shutdown_in_two_steps:
            acts.append(electing("BeginControlledShutdown", faults.begin_controlled_shutdown,
                                 faults.begin_controlled_shutdown_electing, (b,)))
            acts.append(electing("CompleteControlledShutdown", faults.complete_controlled_shutdown,
                                 faults.complete_controlled_shutdown_electing, (b,)))
        if p.min_isr_changes:
            value = Param("value", self.n, tuple(str(v + 1) for v in range(self.n)))
            acts.append(Action("ChangeMinIsr", controller.change_min_isr, (value,), controller.change_min_isr.__doc__))
        if p.preferred_elections:
            acts.append(Action("PreferredElection", controller.preferred_election, (),
                               controller.preferred_election.__doc__))
        if p.reassignments:
            target = Param("target", (1 << self.n) - 1, subset_labels(self.broker_names()))
            acts.append(electing("Reassign", controller.reassign, controller.reassign_electing, (target,)))
            acts.append(electing("CancelReassignment", controller.cancel_reassignment,
                                 controller.cancel_reassignment_electing, ()))
        if p.controller_failovers:
            acts.append(electing("HandleAlterPartitionThenFailOver", controller.handle_alter_partition_then_fail_over,
                                 controller.handle_alter_partition_then_fail_over_electing, ()))
        if p.replay_known_changes:
            acts.append(Action("LagTimeout", broker.lag_timeout, (b, f), broker.lag_timeout.__doc__))
        if p.accept_stale_fetch_responses:
            acts.append(Action("DelayFetchResponse", broker.delay_fetch_response, (f,),
                               broker.delay_fetch_response.__doc__))
            acts.append(Action("ReceiveFetchResponse", broker.receive_fetch_response, (),
                               broker.receive_fetch_response.__doc__))
        sw = switches(p)
        if sw["k_recovery"] != RECOVERY_OFF:
            acts.append(Action("RecoveryReply", recovery.recovery_reply, (b,), recovery.recovery_reply.__doc__))
            acts.append(electing("RecoveryElect", recovery.recovery_elect, recovery.recovery_elect_electing, ()))
        # Kafka's leader marks recovery done itself (Partition.makeLeader): no separate step
        if (sw["k_recovery"] != RECOVERY_OFF or sw["k_fallback"] == FALLBACK_UNCLEAN) and not sw["k_leader_marks_recovered"]:
            acts.append(Action("ProposeRecovered", broker.propose_recovered, (b,), broker.propose_recovered.__doc__))
        return acts

    def invariants(self):
        return [Invariant(fn.__name__, fn, fn.__doc__) for fn in kafka_invariants()]

    # -- symmetry (--symmetry) and the ordered election a counterexample is replayed on
    def symmetry(self):
        """Brokers are interchangeable once the controller may elect any acceptable replica: every
        per-broker field moves with its broker, sets and broker references map through the
        permutation. ``ap_from`` and the delayed fetch response's brokers are 0 while nothing is
        in flight: fillers then, not brokers."""
        if self.params.election != "any":
            raise UsageError("--symmetry needs --election any: Kafka elects the first acceptable replica in "
                             "assignment order, so permuting brokers is not a symmetry of the ordered model")
        per_broker = ("rep_epoch", "rep_leo", "b_state", "log", "hwm", "v_epoch", "v_min_isr", "v_pe_ok",
                      "v_recovering", "eso", "v_cfg_next", "v_ahead", "f_cfg_min_isr")
        subsets = ("c_isr", "c_elr", "c_lkelr", "c_fenced", "rec_replied", "ap_isr", "ap_stale", "isr_stale")
        if has_replica_sets(self.params):
            # the replica set is state, permuted like the ISR: a permutation maps the initial
            # replica set b1..bR to another, and reassignment targets are any R brokers
            subsets += ("c_replicas", "c_adding", "c_removing")
        per_broker_subsets = ("v_isr",)
        if switches(self.params)["k_expand_checks_fencing"]:
            per_broker_subsets += ("v_inactive",)
        else:
            per_broker += ("v_inactive",)  # one value (no bits), still indexed by broker
        if self.params.controlled_shutdown_in_two_steps:
            subsets += ("c_shutting_down",)
            per_broker_subsets += ("c_cs_waiting",)
        else:
            per_broker += ("c_cs_waiting",)  # one value (no bits), still indexed by broker
        return Symmetry(self.broker_names(), (
            *(Permuted(name, axes=(0,)) for name in per_broker),
            *(Permuted(name, axes=(0, 1)) for name in ("v_gen_age", "f_leo", "f_gen_age", "f_caught")),
            Permuted("v_leader", axes=(0,), holds="member"),
            *(Permuted(name, axes=(0,), holds="subset") for name in per_broker_subsets),
            *(Permuted(name, holds="subset") for name in subsets),
            Permuted("c_leader", holds="member"),
            Permuted("c_last_leader", holds="member"),
            Permuted("ap_from", holds="member", unless=("ap_state", 0)),
            Permuted("fr_follower", holds="member", unless=("fr_epoch", 0)),
            Permuted("fr_leader", holds="member", unless=("fr_epoch", 0)),
        ))

    def stricter_variant(self):
        if self.params.election != "any":
            return None
        return "Kafka's ordered election", KafkaReplication(dataclasses.replace(self.params, election="ordered"))

    # -- traces (specs/kafka/presentation.py)
    def lanes(self):
        return presentation.lanes(self)

    def action_lanes(self, action, params):
        return presentation.action_lanes(action, params)

    def trace_terms(self, model, steps):
        from kraftcheck.specs.kafka.trace_terms import trace_terms
        return trace_terms(self, model, steps)

    def availability(self):
        return presentation.availability(self)

    def smaller_model_hint(self) -> str:
        bounds = ", ".join("--" + bound.replace("_", "-") for bound in BOUNDS)
        return f"give fewer brokers or records (--brokers, --records) or lower fault bounds ({bounds})"

    def availability_variants(self):
        return presentation.availability_variants(self)

    def liveness(self):
        from kraftcheck.specs.kafka.liveness import kafka_liveness
        return kafka_liveness(self, {a.name for a in self.actions()})

    def properties(self):
        return [TransitionProperty(fn.__name__, fn, fn.__doc__) for fn in kafka_properties()]

