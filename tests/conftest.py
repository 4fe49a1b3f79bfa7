"""Shared fixtures: the explorers every conformance test runs against."""

from __future__ import annotations

import os

import pytest

# A run that ends before its background compile leaves it to finish by default; the tests' runs
# stop theirs, so that no test leaves a process behind (test_compile_tiers tests the default).
os.environ["KRAFTCHECK_KEEP_COMPILING"] = "0"
# The tests' short runs of models compiled nowhere else stay in their first tier to their end
# rather than wait, after its budget (1-1.5 s by default), for a compile their end would stop.
os.environ.setdefault("KRAFTCHECK_INTERPRET_S", "60")
# Under pytest-xdist every core already runs a test: a compile takes one process, not one per core.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("KRAFTCHECK_COMPILE_PROCESSES", "1")

from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options


class FingerprintEngine(Engine):
    """The engine with TLC's fingerprint set (``--fingerprints``): on these small specs no two
    states share a fingerprint, so every count must be the exact engine's."""

    def explore(self, model, options=Options(), progress=lambda p: None):
        import dataclasses
        result = super().explore(model, dataclasses.replace(options, fingerprints=True), progress)
        assert result.fingerprints and result.collision_probability is not None
        return result


class DiskLevelsEngine(Engine):
    """The engine with its levels on disk (``--checkpoint DIR``): words, parents and labels
    streamed to files and read back, frontier pages dropped as they are expanded; every count,
    verdict and trace must be the in-memory engine's."""

    def explore(self, model, options=Options(), progress=lambda p: None):
        import dataclasses
        import shutil
        import tempfile
        directory = tempfile.mkdtemp(prefix="kraftcheck-levels-")
        try:
            return super().explore(model, dataclasses.replace(options, checkpoint_dir=directory), progress)
        finally:
            shutil.rmtree(directory, ignore_errors=True)


class TableLayoutEngine(Engine):
    """The engine with every layout packed by its table (``codegen.uses_layout_table``), as the
    Kafka model's is: the small specs then run through the expand kernel of large layouts and
    each action's ``fire`` function (``kernels.table_expand``), on both of the engine's paths."""

    def explore(self, model, options=Options(), progress=lambda p: None):
        from kraftcheck.checker import codegen
        before = codegen.INLINE_PACK_MAX_ELEMENTS
        codegen.INLINE_PACK_MAX_ELEMENTS = -1
        try:
            return super().explore(model, options, progress)
        finally:
            codegen.INLINE_PACK_MAX_ELEMENTS = before


SPARK_MASTER = "local[2]"
SPARK_PARTITIONS = 2  # hash buckets and tasks per level: few, since a task costs more than these levels


@pytest.fixture(scope="session")
def spark_context():
    """One SparkContext on local[2] for the whole session, stopped (Java process included) at its
    end, whatever happened."""
    from kraftcheck.spark.session import start_context, stop_context
    sc = start_context(SPARK_MASTER)
    # the conformance suite's specs of constraints and deadlocks and of two symmetry sets,
    # importable on the executors
    for module in ("constraint_specs.py", "symmetry_specs.py"):
        sc.addPyFile(os.path.join(os.path.dirname(__file__), module))
    try:
        yield sc
    finally:
        stop_context(sc)


# Every backend must pass the conformance suite; a new engine adds itself here. An entry that is
# a fixture's name gets that fixture's value as its argument.
EXPLORERS = {
    "engine": lambda: Engine(),
    "engine-small-chunks": lambda: Engine(chunk_candidates=64, shard_bits=1),
    "engine-interpreted": lambda: Engine(compile="never"),  # the first tier in Python
    "engine-bytecode": lambda: Engine(compile="bytecode"),  # the first tier, used while kernels compile
    "engine-fingerprints": lambda: FingerprintEngine(),
    "engine-levels-on-disk": lambda: DiskLevelsEngine(),
    "engine-table-layouts": lambda: TableLayoutEngine(),
    "reference": lambda: ReferenceExplorer(),
    "spark": ("spark_context", lambda sc: _spark_explorer(sc)),
}


def _spark_explorer(sc):
    from kraftcheck.spark import SparkExplorer
    return SparkExplorer(sc, partitions=SPARK_PARTITIONS)


@pytest.fixture(params=[pytest.param(name, marks=pytest.mark.spark) if name == "spark" else name
                        for name in sorted(EXPLORERS)])
def explorer(request):
    entry = EXPLORERS[request.param]
    if isinstance(entry, tuple):
        fixture, make = entry
        return make(request.getfixturevalue(fixture))
    return entry()


# The longest test of each module that has one of LISTED_FROM_S or more, in seconds, unmarked (a fresh
# clone, ``-n auto`` on two cores, ``--durations=60``): these modules run right after the slow tests.
# A run with -n that finds a module missing here says so at its end (``pytest_terminal_summary``).
# test_conformance, test_writes, test_faults_hostile_2, test_ci and test_constraints have the figure
# such a run said (its cold caches make a compiling test longer than a run alone finds it);
# test_two_phase, test_kafka_broker_conformance and test_faults_cache their longest test in one run
# of the module alone (-p no:xdist, nice 19, a load of about 3, warm caches), rounded up; test_spill,
# test_visited_compact, test_layout_table and test_limits the figure a fresh clone's run said (7a6fb31);
# test_faults_hostile_6 its Spark sweep's test alone (11 s, nice 5, the machine shared), rounded up.
LISTED_FROM_S = 7
LONGEST_TEST_S = {
    "test_conformance.py": 39,
    "test_symmetry.py": 25, "test_packaging.py": 23, "test_cli_layout.py": 23, "test_writes.py": 22,
    "test_graph_analyses.py": 21,
    "test_differential_specs.py": 20, "test_checkpoint.py": 19,
    "test_compile_tiers.py": 17, "test_spark.py": 14, "test_faults_checkpoint.py": 14, "test_spill.py": 14,
    "test_fairness.py": 13,
    "test_external_specs.py": 12, "test_two_phase.py": 12, "test_faults_hostile_6.py": 12,
    "test_kafka_reassignment.py": 11, "test_sweep.py": 11,
    "test_spark_faults.py": 11, "test_kafka_findings.py": 10, "test_kafka_stale_fetch.py": 10,
    "test_kafka_broker_conformance.py": 10, "test_faults_hostile_2.py": 10, "test_faults_cache.py": 10,
    "test_visited_compact.py": 10, "test_layout_table.py": 10, "test_faults_liveness_symmetry.py": 10,
    "test_fingerprints.py": 9, "test_two_tiers.py": 9, "test_kernels.py": 9, "test_simulate.py": 8,
    "test_traces_state_graph.py": 8, "test_lasso_traces.py": 8,
    "test_faults_verdicts.py": 8, "test_ci.py": 8, "test_kafka_controlled_shutdown.py": 8,
    "test_kafka_availability.py": 7, "test_faults_spec_errors.py": 7, "test_tla_examples_voting.py": 7,
    "test_constraints.py": 7, "test_limits.py": 7,
}


# What numba reads from the process's environment (again at every compile: numba.core.config's
# reload_config) and kraftcheck's own settings: a test that leaves one changed changes every test
# after it on its worker (numba's DISABLE_JIT sends every run after it to the interpreted tier).
# Such a test fails at its teardown, naming what it changed, and the value is put back.
_NUMBA_CONFIG = ("DISABLE_JIT", "BOUNDSCHECK", "CACHE_DIR")


def _settings() -> tuple[dict, dict]:
    from numba.core import config
    config.reload_config()  # what the next compile would see
    env = {k: v for k, v in os.environ.items() if k.startswith(("NUMBA_", "KRAFTCHECK_"))}
    return env, {k: getattr(config, k) for k in _NUMBA_CONFIG}


@pytest.fixture(autouse=True)
def settings_left_as_found():
    env_before, config_before = _settings()
    yield
    env_after, config_after = _settings()
    changed = [f"${k}: {env_before.get(k)!r} -> {env_after.get(k)!r}" for k in sorted(set(env_before) | set(env_after))
               if env_before.get(k) != env_after.get(k)]
    changed += [f"numba.config.{k}: {config_before[k]!r} -> {config_after[k]!r}" for k in _NUMBA_CONFIG
                if config_before[k] != config_after[k]]
    if changed:
        for k in set(env_before) | set(env_after):
            if k not in env_before:
                os.environ.pop(k, None)
            else:
                os.environ[k] = env_before[k]
        from numba.core import config
        config.reload_config()
        for k, v in config_before.items():
            setattr(config, k, v)
        pytest.fail("this test left the process's settings changed for the tests after it: " + "; ".join(changed),
                    pytrace=False)


def pytest_collection_modifyitems(config, items):
    """The tests marked slow (a minute or more each) run first, then the modules with the longest
    other tests, longest first: with ``-n auto --dist worksteal`` the first worker starts at the
    head of the list and the second at its middle, and each, once idle, takes the other's last
    pending tests, so a long test left near either end would keep the suite waiting while the
    other worker has nothing left. A module's tests stay together and in their order, so that its
    module-scoped fixtures are built once."""
    def cost(item):
        slow = item.get_closest_marker("slow") is not None
        return (not slow, -LONGEST_TEST_S.get(item.path.name, 0))
    items.sort(key=cost)  # stable: the order within a module kept


_longest_call_s: dict[str, float] = {}  # module -> its longest unmarked test this run, in seconds


def pytest_runtest_logreport(report):
    if report.when == "call" and "slow" not in report.keywords:
        module = os.path.basename(report.location[0])
        _longest_call_s[module] = max(_longest_call_s.get(module, 0.0), report.duration)


def pytest_terminal_summary(terminalreporter):
    """Name the modules whose longest test took LISTED_FROM_S or more and that LONGEST_TEST_S lacks:
    unlisted, such a module may run last and keep the suite waiting. Said only where the order
    matters (``-n``), and not failed: a loaded machine makes any test slow."""
    if not terminalreporter.config.getoption("numprocesses", None):
        return
    missing = {m: s for m, s in _longest_call_s.items() if s >= LISTED_FROM_S and m not in LONGEST_TEST_S}
    if missing:
        terminalreporter.write_line(
            f"tests/conftest.py's LONGEST_TEST_S lacks modules with a test of {LISTED_FROM_S} s or more here (add "
            "each with its longest test on a fresh clone, -n auto): "
            + ", ".join(f"{m} ({s:.0f} s)" for m, s in sorted(missing.items(), key=lambda x: -x[1])))
