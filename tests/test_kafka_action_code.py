"""Every action of the Kafka spec, under every preset, names the Kafka code (or, under kip-966,
the KIP's section) it stands for: specs/kafka/code_paths.py."""

from __future__ import annotations

import re

import pytest

from kraftcheck.specs.kafka.code_paths import (APACHE_TRUNK, CODE_PATHS, KIP_966, KIP_ONLY, PRESET_COMMITS,
                                               code_paths)
from kraftcheck.specs.kafka.params import PROTOCOLS, WITHOUT_ELR, KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication


def every_action(preset: str) -> set[str]:
    """The actions of ``preset`` with every optional one switched on (two specs: the publish
    window and a reassignment need options that exclude nothing else here)."""
    common = dict(protocol=preset, brokers=3, clean_shutdowns=1, lossless_shutdowns=1, controlled_shutdown_in_two_steps=True,
                  preferred_elections=1, controller_failovers=1, accept_stale_fetch_responses=True,
                  replay_known_changes=True)
    if preset.startswith("kafka"):
        common["unclean_election"] = True
    names = set()
    for extra in ({"replication_factor": 2, "reassignments": 1}, {"min_isr_changes": 1}):
        names |= {a.name for a in KafkaReplication(KafkaParams(**common, **extra)).actions()}
    return names


def test_every_preset_has_a_commit():
    assert set(PROTOCOLS) - {"kip-966"} <= set(PRESET_COMMITS)
    assert all(re.fullmatch(r"[0-9a-f]{40}", c) for c in (*PRESET_COMMITS.values(), APACHE_TRUNK))


@pytest.mark.parametrize("preset", PROTOCOLS)
def test_every_action_names_its_kafka_code(preset):
    actions = every_action(preset)
    assert actions <= set(CODE_PATHS), f"actions without a row: {sorted(actions - set(CODE_PATHS))}"
    for action in actions:
        entries = code_paths(action, preset)
        assert entries, f"{action} under {preset} names no Kafka code"
        for file, method, commit in entries:
            assert re.fullmatch(r"\w+\.\w+", method) or file.startswith("KIP-"), (action, method)
            if file == KIP_966:
                assert preset == "kip-966"
            elif not file.startswith("KIP-"):
                assert file.endswith((".java", ".scala")), (action, file)
                assert commit == (APACHE_TRUNK if preset == "kip-966" else PRESET_COMMITS[preset]), (action, commit)
    if preset != "kip-966":
        # Kafka has no unclean recovery manager, and a Kafka leader marks recovery itself
        assert not actions & set(KIP_ONLY)
        assert all(preset not in CODE_PATHS[a] for a in KIP_ONLY)


def test_the_table_names_no_action_the_spec_lacks():
    assert set(CODE_PATHS) == set().union(*(every_action(p) for p in PROTOCOLS))


def test_presets_without_elr_cite_no_elr_code():
    for preset in WITHOUT_ELR:
        methods = {m for row in CODE_PATHS.values() for _, m, _ in row.get(preset, ())}
        assert not {m for m in methods if "Elr" in m}, preset
