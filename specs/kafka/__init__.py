"""Kafka's replication protocol under KRaft: KIP-966 ELR, strict min ISR, KIP-903, faults, recovery.

One partition on brokers ``b1..bN`` (all replicas). The modules:

* ``spec``        the spec class ``KafkaReplication``: fields, initial states, actions, checks;
* ``state``       field layout, value codes, bit helpers;
* ``params``      the options (``kraftcheck check`` flags) and the presets they select;
* ``controller``  ISR/ELR rule, leader election, AlterPartition handling, fencing, min ISR changes;
* ``broker``      metadata propagation, produce, fetch, HWM, AlterPartition proposals and responses;
* ``faults``      unclean (lossy / lossless) and controlled shutdowns, restart and registration;
* ``recovery``    KIP-966 unclean recovery (GetReplicaLogInfo replies, election);
* ``presentation`` trace lanes and the ``--availability`` predicate;
* ``liveness`` the liveness properties (``--liveness``) and the fairness they assume;

and ``invariants/`` holds the properties checked. The invariants sit below the spec: ``spec``
lists them, and they read the state through ``invariants/kafka_state.py`` (codes and helpers that
``state`` and ``broker`` build on too), never through this package. ``docs/model.md`` describes
every variable and action precisely.
"""
