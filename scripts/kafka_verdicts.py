"""Print the verdict table of every Kafka preset and switch at 3 brokers, min ISR 2, default bounds.

Usage: ``PYTHONPATH=. python scripts/kafka_verdicts.py [--markdown]``. Each row is one exploration
with the compiled engine, stopping at the first violation of each check (``--continue`` semantics):
the table lists every violated invariant with the length of its shortest counterexample.
"""

from __future__ import annotations

import sys
import time

from checker.explore.engine import Engine
from checker.explore.result import Options
from checker.model import Model
from specs.kafka import KafkaParams, KafkaReplication

ROWS = [
    ("--protocol kip-966 (recovery balanced)", {}),
    ("--protocol kip-966 --recovery none", dict(recovery="none")),
    ("--protocol kip-966 --recovery aggressive", dict(recovery="aggressive")),
    ("--protocol kafka-4.x", dict(protocol="kafka-4.x")),
    ("--protocol kafka-4.x --unclean-election", dict(protocol="kafka-4.x", unclean_election=True)),
    ("--protocol kafka-3.5", dict(protocol="kafka-3.5")),
    ("--protocol kafka-3.5 --unclean-election", dict(protocol="kafka-3.5", unclean_election=True)),
    ("--no-strict-min-isr", dict(no_strict_min_isr=True)),
    ("--hwm-from-maximal-isr", dict(hwm_from_maximal_isr=True)),
    ("--keep-unclean-in-elr", dict(keep_unclean_in_elr=True)),
    ("--no-broker-epoch-check", dict(no_broker_epoch_check=True)),
    ("--no-partition-epoch-check", dict(no_partition_epoch_check=True)),
    ("--min-isr-policy kafka", dict(min_isr_policy="kafka")),
    ("--min-isr-policy keep-elr", dict(min_isr_policy="keep-elr")),
    ("--balanced-replies 1", dict(balanced_replies=1)),
    ("--no-expansion-hwm-guard", dict(no_expansion_hwm_guard=True)),
    ("--no-expansion-epoch-start-guard", dict(no_expansion_epoch_start_guard=True)),
    ("--min-isr-changes 0", dict(min_isr_changes=0)),
]


def main() -> None:
    print("| options (3 brokers, min ISR 2, default bounds) | result | violated (shortest trace, states) | distinct states | seconds |")
    print("| --- | --- | --- | --- | --- |")
    for title, kw in ROWS:
        model = Model(KafkaReplication(KafkaParams(**kw)))
        t = time.perf_counter()
        r = Engine().explore(model, Options(keep_going=True))
        found = ", ".join(f"{v.check} ({v.depth})" for v in r.violations) or "-"
        print(f"| `{title}` | {r.status} | {found} | {r.distinct_states} | {r.elapsed_s:.1f} |", flush=True)
        del t


if __name__ == "__main__":
    sys.exit(main())
