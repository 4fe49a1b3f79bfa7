"""Which Kafka method(s) each action of the Kafka spec stands for, per preset, at the commit read.

``CODE_PATHS[action][preset]`` is a tuple of ``(file, method, commit)``: ``file`` the path in the
Kafka repository, ``method`` ``Class.method``, ``commit`` the full hash of the tree read (Apache's
commits as carried by the snapshot of confluentinc/kafka, with their upstream hashes). Under
``kip-966`` an action stands for the KIP's text: ``file`` is ``"KIP-966"``, ``method`` the KIP's
section, ``commit`` the version of the KIP page read (``shared/seeds``); where the KIP says nothing
(most broker steps), the kip-966 model keeps the broker's code and the entries are Kafka's at
``APACHE_TRUNK`` (docs/model.md section 2a). Every action of every preset has an entry
(tests/test_kafka_action_code.py); ``PRESET_COMMITS`` says which tree each preset was read from
(docs/model.md sections 2a, 2b, 2f).

The table is built from ``STEPS`` (per action, the Kafka methods and the presets each applies to)
and ``SOURCES`` (per class, the file that defines it at each commit: files moved between releases,
for instance the broker's ``AlterPartitionManager`` from ``core/`` to ``server/``). Each method was
checked to occur in its file at its commit in the snapshot (a script over ``git grep``; bench/RESULTS.md,
"Each action's Kafka code").
"""

from __future__ import annotations

APACHE_TRUNK = "1eb7644349cb07139d6a3c1ad1986979647cac99"  # apache/kafka trunk, 2024-10-25

# the release branch (or trunk) each preset's code was read from; kafka-3.5 is metadata version
# 3.5's paths, read on the 3.5 branch
PRESET_COMMITS = {
    "kafka-3.5": "23f9fc24ccf01119d91839bd467de2aa60df715e",
    "kafka-4.0": "c6f1e72e14db28ef0ec2ab1590e0e23bc8487794",
    "kafka-4.1": "dc255832aa1feaa31e1c2593e17c887343f2c2f5",
    "kafka-4.2": "d26e85231a8f8be3d2d7f4607c47bac9918c7952",
    "kafka-4.3": "0157ac7cf2c652628443b270b9801dd44b4b0154",
    "kafka-4.x": "06d492d81361d053700c7cd6a932d7f361ea8309",  # master: Apache trunk merged to 2026-08-22
}
KIP_966 = "KIP-966"
KIP_966_VERSION = "seeds/000_d28580ea0a7dd36d"  # the KIP page as read
KIP_903_VERSION = "seeds/002_f59a4ceb43d2a577"

_C = "metadata/src/main/java/org/apache/kafka/controller/"
_S = "core/src/main/scala/kafka/server/"
# class -> ((first commit of a layout in preset order, file), ...): the file that defines the
# class, from the preset whose commit is named on; "*" for every commit
SOURCES = {
    "ReplicationControlManager": (("*", _C + "ReplicationControlManager.java"),),
    "PartitionChangeBuilder": (("*", _C + "PartitionChangeBuilder.java"),),
    "PartitionReassignmentReplicas": (("*", _C + "PartitionReassignmentReplicas.java"),),
    "PartitionReassignmentRevert": (("*", _C + "PartitionReassignmentRevert.java"),),
    "ClusterControlManager": (("*", _C + "ClusterControlManager.java"),),
    "BrokerHeartbeatManager": (("*", _C + "BrokerHeartbeatManager.java"),),
    "ConfigurationControlManager": (("*", _C + "ConfigurationControlManager.java"),),
    "QuorumController": (("*", _C + "QuorumController.java"),),
    "Partition": (("*", "core/src/main/scala/kafka/cluster/Partition.scala"),),
    "Replica": (("*", "core/src/main/scala/kafka/cluster/Replica.scala"),
                ("kafka-4.1", "server/src/main/java/org/apache/kafka/server/replica/Replica.java")),
    "ReplicaState": (("kafka-4.1", "server/src/main/java/org/apache/kafka/server/replica/ReplicaState.java"),),
    "ReplicaManager": (("*", _S + "ReplicaManager.scala"),),
    "AbstractFetcherThread": (("*", _S + "AbstractFetcherThread.scala"),),
    "BrokerMetadataPublisher": (("*", _S + "metadata/BrokerMetadataPublisher.scala"),),
    "DynamicConfigPublisher": (("*", _S + "metadata/DynamicConfigPublisher.scala"),),
    "BrokerServer": (("*", _S + "BrokerServer.scala"),),
    "LogManager": (("*", "core/src/main/scala/kafka/log/LogManager.scala"),
                   ("kafka-4.x", "storage/src/main/java/org/apache/kafka/storage/internals/log/LogManager.java")),
    "LogLoader": (("kafka-3.5", "core/src/main/scala/kafka/log/LogLoader.scala"),
                  ("kafka-4.0", "storage/src/main/java/org/apache/kafka/storage/internals/log/LogLoader.java")),
    "DelayedProduce": (("*", _S + "DelayedProduce.scala"),
                       ("kafka-4.3", "server/src/main/java/org/apache/kafka/server/purgatory/DelayedProduce.java")),
    "DefaultAlterPartitionManager": (
        ("*", _S + "AlterPartitionManager.scala"),
        ("kafka-4.x", "server/src/main/java/org/apache/kafka/server/partition/DefaultAlterPartitionManager.java")),
    "BrokerToControllerRequestThread": (("*", _S + "BrokerToControllerChannelManager.scala"),),  # 3.5's name
    "NodeToControllerRequestThread": (
        ("*", _S + "NodeToControllerChannelManager.scala"),
        ("kafka-4.3", "server/src/main/java/org/apache/kafka/server/NodeToControllerRequestThread.java")),
    "BrokerLifecycleManager": (("*", _S + "BrokerLifecycleManager.scala"),
                               ("kafka-4.3", "server/src/main/java/org/apache/kafka/server/BrokerLifecycleManager.java")),
}

KAFKA = tuple(PRESET_COMMITS)
WITH_ELR = ("kafka-4.1", "kafka-4.2", "kafka-4.3", "kafka-4.x")
NO_ELR = ("kafka-3.5", "kafka-4.0")

# The KIP's sections (shared/seeds/000_*): the headings of its "Proposed Changes"
HWM = "Additional High Watermark advancement requirement"  # the strict min ISR rule and the ELR's rules 1-6
ELECTION = "Leader election"
DETECTION = "Detection of an unclean shutdown"
RECOVERY = "Unclean recovery"
URM = "Unclean Recovery Manager(URM)"  # item 1: reassignment completes or is cancelled only at min ISR

# action -> ((Class.method, presets it applies to), ...) and the KIP's sections for kip-966 (empty:
# the KIP says nothing, the kip-966 model keeps Kafka's broker code at APACHE_TRUNK)
STEPS: dict[str, tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[str, ...]]] = {
    "SyncMetadata": ((("BrokerMetadataPublisher.onMetadataUpdate", KAFKA), ("ReplicaManager.applyDelta", KAFKA),
                      ("Partition.makeLeader", KAFKA), ("Partition.makeFollower", KAFKA)), ()),
    "ApplyConfigDelta": ((("DynamicConfigPublisher.onMetadataUpdate", KAFKA),), ()),
    "Produce": ((("ReplicaManager.appendRecords", KAFKA), ("Partition.appendRecordsToLeader", KAFKA)), (HWM,)),
    "Fetch": ((("ReplicaManager.fetchMessages", KAFKA), ("Partition.updateFollowerFetchState", KAFKA),
               ("AbstractFetcherThread.processFetchRequest", KAFKA)), ()),
    "DelayFetchResponse": ((("ReplicaManager.fetchMessages", KAFKA), ("Partition.updateFollowerFetchState", KAFKA)),
                           ()),
    "ReceiveFetchResponse": ((("AbstractFetcherThread.processFetchRequest", KAFKA),), ()),
    "AdvanceHighWatermark": ((("Partition.maybeIncrementLeaderHW", KAFKA),
                              ("Partition.checkEnoughReplicasReachOffset", KAFKA),
                              ("DelayedProduce.tryComplete", KAFKA)), (HWM,)),
    "ProposeIsrExpand": ((("Partition.maybeExpandIsr", KAFKA), ("Partition.prepareIsrExpand", KAFKA),
                          ("Partition.submitAlterPartition", KAFKA)), ()),
    "ProposeIsrShrink": ((("Partition.maybeShrinkIsr", KAFKA), ("Partition.prepareIsrShrink", KAFKA),
                          ("Partition.submitAlterPartition", KAFKA)), ()),
    "LagTimeout": ((("Partition.maybeIncrementLeaderHW", KAFKA), ("Replica.isCaughtUp", NO_ELR),
                    ("ReplicaState.isCaughtUp", WITH_ELR)), ()),
    "HandleAlterPartition": ((("ReplicationControlManager.alterPartition", KAFKA),
                              ("ReplicationControlManager.validateAlterPartitionData", KAFKA),
                              ("PartitionChangeBuilder.build", KAFKA),
                              ("PartitionChangeBuilder.completeReassignmentIfNeeded", KAFKA),
                              ("PartitionChangeBuilder.maybePopulateTargetElr", WITH_ELR),
                              ("PartitionChangeBuilder.triggerLeaderEpochBumpIfNeeded", ("kafka-3.5",)),
                              ("PartitionChangeBuilder.tryElection", KAFKA)), (HWM, ELECTION)),
    "HandleAlterPartitionThenFailOver": ((("QuorumController.alterPartition", KAFKA),
                                          ("ReplicationControlManager.alterPartition", KAFKA),
                                          ("BrokerToControllerRequestThread.handleResponse", ("kafka-3.5",)),
                                          ("NodeToControllerRequestThread.handleResponse", KAFKA[1:]),
                                          ("ReplicationControlManager.validateAlterPartitionData", KAFKA)), ()),
    "ReceiveAlterPartitionResponse": ((("Partition.handleAlterPartitionUpdate", KAFKA),
                                       ("Partition.handleAlterPartitionError", KAFKA),
                                       ("DefaultAlterPartitionManager.sendRequest", KAFKA)), ()),
    "Fence": ((("ReplicationControlManager.handleBrokerFenced", KAFKA),
               ("ReplicationControlManager.generateLeaderAndIsrUpdates", KAFKA),
               ("PartitionChangeBuilder.maybePopulateTargetElr", WITH_ELR),
               ("PartitionChangeBuilder.tryElection", KAFKA)), (HWM, ELECTION)),
    "SessionTimeout": ((("ReplicationControlManager.maybeFenceOneStaleBroker", KAFKA),
                        ("ReplicationControlManager.handleBrokerFenced", KAFKA),
                        ("ReplicationControlManager.generateLeaderAndIsrUpdates", KAFKA),
                        ("PartitionChangeBuilder.maybePopulateTargetElr", WITH_ELR)), (HWM, ELECTION)),
    "Unfence": ((("ReplicationControlManager.handleBrokerUnfenced", KAFKA),
                 ("ReplicationControlManager.generateLeaderAndIsrUpdates", KAFKA),
                 ("PartitionChangeBuilder.electAnyLeader", KAFKA)), (ELECTION,)),
    "Restart": ((("ClusterControlManager.registerBroker", KAFKA),
                 ("ReplicationControlManager.handleBrokerFenced", ("kafka-3.5",)),
                 ("ReplicationControlManager.handleBrokerShutdown", KAFKA[1:]),
                 ("ReplicationControlManager.generateLeaderAndIsrUpdates", KAFKA),
                 ("LogManager.loadLogs", KAFKA)), (DETECTION,)),
    "LossyShutdown": ((("LogLoader.recoverLog", KAFKA),), ()),
    "LosslessShutdown": ((("LogManager.loadLogs", KAFKA),), ()),
    "CleanShutdown": ((("BrokerServer.shutdown", KAFKA), ("BrokerLifecycleManager.beginControlledShutdown", KAFKA),
                       ("BrokerHeartbeatManager.calculateNextBrokerState", KAFKA),
                       ("ReplicationControlManager.handleBrokerFenced", KAFKA)), (HWM,)),
    "BeginControlledShutdown": ((("BrokerHeartbeatManager.calculateNextBrokerState", KAFKA),
                                 ("ReplicationControlManager.handleBrokerInControlledShutdown", KAFKA),
                                 ("ReplicationControlManager.generateLeaderAndIsrUpdates", KAFKA),
                                 ("PartitionChangeBuilder.maybePopulateTargetElr", WITH_ELR)), (HWM,)),
    "CompleteControlledShutdown": ((("BrokerHeartbeatManager.calculateNextBrokerState", KAFKA),
                                    ("BrokerHeartbeatManager.lowestActiveOffset", KAFKA),
                                    ("ReplicationControlManager.handleBrokerFenced", KAFKA),
                                    ("BrokerServer.shutdown", KAFKA)), (HWM,)),
    "ChangeMinIsr": ((("ConfigurationControlManager.incrementalAlterConfigs", KAFKA),
                      ("ConfigurationControlManager.createClearElrRecordsAsNeeded", WITH_ELR),
                      ("ReplicationControlManager.replayClearTopicElrs", WITH_ELR),
                      ("ReplicationControlManager.removeTopicElrs", WITH_ELR)), (HWM,)),
    "PreferredElection": ((("ReplicationControlManager.maybeBalancePartitionLeaders", KAFKA),
                           ("PartitionChangeBuilder.electPreferredLeader", KAFKA)), ()),
    "Reassign": ((("ReplicationControlManager.alterPartitionReassignments", KAFKA),
                  ("ReplicationControlManager.changePartitionReassignment", KAFKA),
                  ("PartitionChangeBuilder.build", KAFKA)), (HWM, URM)),
    "CancelReassignment": ((("ReplicationControlManager.cancelPartitionReassignment", KAFKA),
                            ("PartitionReassignmentRevert.PartitionReassignmentRevert", KAFKA),
                            ("PartitionChangeBuilder.build", KAFKA),
                            ("PartitionChangeBuilder.maybePopulateTargetElr", WITH_ELR),
                            ("PartitionChangeBuilder.tryElection", KAFKA)), (URM,)),
    "ProposeRecovered": ((), (RECOVERY,)),
    "RecoveryReply": ((), (RECOVERY, URM)),
    "RecoveryElect": ((), (RECOVERY, URM)),
}

# actions only kip-966 has: Kafka's controller implements no unclean recovery, and a Kafka
# leader marks a recovering partition recovered itself (docs/model.md section 2a, row 3)
KIP_ONLY = ("ProposeRecovered", "RecoveryReply", "RecoveryElect")


def source_file(cls: str, preset: str) -> str:
    """The file defining ``cls`` at ``preset``'s commit (``SOURCES``)."""
    order = list(PRESET_COMMITS)
    path = None
    for since, file in SOURCES[cls]:
        if since == "*" or order.index(preset) >= order.index(since):
            path = file
    if path is None:
        raise KeyError(f"no file of {cls} at {preset}")
    return path


def _build() -> dict[str, dict[str, tuple[tuple[str, str, str], ...]]]:
    table: dict[str, dict[str, tuple[tuple[str, str, str], ...]]] = {}
    for action, (methods, sections) in STEPS.items():
        row: dict[str, tuple[tuple[str, str, str], ...]] = {}
        for preset, commit in PRESET_COMMITS.items():
            if action in KIP_ONLY:
                continue
            row[preset] = tuple((source_file(m.split(".")[0], preset), m, commit)
                                for m, presets in methods if preset in presets)
        kip = tuple((KIP_966, section, KIP_966_VERSION) for section in sections)
        # where the KIP says nothing, the kip-966 model keeps Kafka's broker code (docs/model.md 2a)
        # (apache trunk at 1eb7644, 2024-10, lays its files out as the 4.0 branch does)
        code = () if action in KIP_ONLY or sections else tuple(
            (source_file(m.split(".")[0], "kafka-4.0"), m, APACHE_TRUNK) for m, presets in methods
            if "kafka-4.0" in presets)
        if action in ("HandleAlterPartition", "ReceiveAlterPartitionResponse", "ProposeIsrExpand"):
            kip += (("KIP-903", "Proposed Changes", KIP_903_VERSION),)  # broker epochs in AlterPartition
        row["kip-966"] = kip + code
        table[action] = row
    return table


CODE_PATHS = _build()


def code_paths(action: str, preset: str) -> tuple[tuple[str, str, str], ...]:
    """The (file, method, commit) entries of ``action`` under ``preset`` (KeyError if none)."""
    return CODE_PATHS[action][preset]
