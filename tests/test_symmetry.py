"""Symmetry reduction (--symmetry) and the election it needs (--election any), with one symmetry
set (the brokers, the resource managers) and with two (tests/symmetry_specs.py's acceptors and
values, the TLA+ Examples' SimpleAllocator's clients and resources: the product group).

The reduced search must count exactly the orbits of the unreduced reachable states (computed here
by brute force, with the reference explorer's own canonicalisation, and for two sets with
permutations written in the tests from what each field means), keep every verdict and every
shortest counterexample length, and write concrete traces that replay step by step.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from counterexample_support import assert_counterexample_replays

from kraftcheck.checker.errors import SpecError, UsageError
from kraftcheck.checker.explore.concrete import check_in_stricter_variant, replays_on
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.reference import ReferenceExplorer, orbit_representative
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.analyses.state_graph import build_graph
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Permuted, Symmetry
from kraftcheck.checker.symmetry import Canonicaliser, PermutationTables, canonicaliser_for
from kraftcheck.specs.kafka.params import KafkaParams
from kraftcheck.specs.kafka.spec import KafkaReplication

# small enough to run in seconds, interpreted
NO_FAULTS = dict(brokers=3, min_isr=2, lossy_shutdowns=0, fences=0, isr_shrinks=0, min_isr_changes=1,
                 election="any")
ONE_FENCE = dict(NO_FAULTS, fences=1, min_isr_changes=0)
# the delayed fetch response names two brokers, fillers while none is in flight
STALE_FETCH = dict(NO_FAULTS, min_isr=1, accept_stale_fetch_responses=True, min_isr_changes=0)
# violates three checks (a min ISR change in flight, F1), at 4,481 orbits
VIOLATING = dict(NO_FAULTS, isr_shrinks=1)


def kafka(**kw) -> Model:
    return Model(KafkaReplication(KafkaParams(**kw)))


_REACHABLE: dict = {}


def reachable(m: Model) -> tuple[tuple[int, ...], ...]:
    """Every reachable state of ``m``, unreduced (the compiled graph builder on the bytecode tier,
    which test_bytecode holds to the Python tier row by row, and is 6-14 times faster on these
    Kafka models; on the Python tier for a spec it cannot translate): built once per spec and
    parameters, since several tests enumerate the same model."""
    key = (type(m.spec), m.spec.params)
    if key not in _REACHABLE:
        from kraftcheck.checker.bytecode import Untranslatable
        from kraftcheck.checker.explore.bytecode_tier import BytecodeKernels
        from kraftcheck.checker.explore.interpreted import InterpretedKernels
        try:
            kernels = BytecodeKernels(m)
        except Untranslatable:
            kernels = InterpretedKernels(m)
        graph = build_graph(m, kernels=kernels)
        _REACHABLE[key] = tuple(m.layout.unpack(row.tolist()) for row in graph.states)
    return _REACHABLE[key]


def successors_of(m: Model, s: tuple[int, ...]) -> set[tuple[int, ...]]:
    """Every successor of ``s`` (each action instance stepped once)."""
    return {t for t in (m.step(s, lab) for lab in range(len(m.labels))) if t is not None}


def steps_in_bytecode(m: Model, states: list[tuple[int, ...]]) -> list[dict[int, tuple[int, ...]]]:
    """For each of ``states``, its successor by each enabled label (in label order), computed on
    the bytecode tier in batches."""
    from kraftcheck.checker.codegen import NO_LABEL
    from kraftcheck.checker.explore.bytecode_tier import BytecodeKernels
    kernels, n = BytecodeKernels(m), len(m.labels)
    found = []
    for lo in range(0, len(states), 256):
        batch = kernels.pack(states[lo:lo + 256])
        out = kernels.successors(batch)
        for i in range(batch.shape[0]):
            found.append({label: m.layout.unpack(out.words[i * n + label].tolist()) for label in range(n)
                          if out.labels[i * n + label] != NO_LABEL})
    return found


def successors_in_bytecode(m: Model, states: list[tuple[int, ...]]) -> list[set[tuple[int, ...]]]:
    """``successors_of`` each of ``states``, computed on the bytecode tier in batches."""
    return [set(steps.values()) for steps in steps_in_bytecode(m, states)]


def summary(r):
    return (r.status, r.initial_states, r.distinct_states, r.states_generated, r.depth, r.coverage(),
            [(v.check, v.kind, v.depth) for v in r.violations])


# -- the election

def test_ordered_election_is_the_default_and_keeps_kafkas_labels():
    ordered, chosen = kafka(**dict(NO_FAULTS, election="ordered")), kafka(**NO_FAULTS)
    assert KafkaParams().election == "ordered"
    assert [str(lab) for lab in ordered.labels if lab.name == "Unfence"] == ["Unfence(b=b1)", "Unfence(b=b2)",
                                                                              "Unfence(b=b3)"]
    assert "Unfence(b=b2, leader=b3)" in [str(lab) for lab in chosen.labels]


def test_any_election_may_pick_any_isr_member_and_ordered_only_the_first():
    m = kafka(**dict(NO_FAULTS, fences=1))
    start = m.initial[0]  # b1 leads, every broker in the ISR
    elected = {}
    for lab in range(len(m.labels)):
        label = m.labels[lab]
        if label.name == "Fence" and label.values[0] == 0:
            after = m.step(start, lab)
            if after is not None:
                elected[label.values[1]] = m.layout.values(after)["c_leader"]
    assert elected == {1: 1, 2: 2}  # b2 or b3, never b1 (fenced) nor no leader
    ordered = kafka(**dict(NO_FAULTS, fences=1, election="ordered"))
    after = ordered.step(start, ordered.label_for("Fence", (0,)))
    assert ordered.layout.values(after)["c_leader"] == 1
    # the election ordered Kafka would not make is not one of its behaviours
    b3 = m.step(start, m.label_for("Fence", (0, 2)))
    assert replays_on(ordered, [start, b3]) == 1
    assert replays_on(ordered, [start, m.step(start, m.label_for("Fence", (0, 1)))]) is None


def test_preferred_elections_are_refused_under_any_election():
    with pytest.raises(UsageError, match="assignment order"):
        KafkaReplication(KafkaParams(election="any", preferred_elections=1))


# -- the declaration and the canonical form

def test_symmetry_is_refused_for_the_ordered_election_and_for_specs_without_one():
    with pytest.raises(UsageError, match="needs --election any: Kafka elects the first acceptable replica"):
        Engine(compile="never").explore(kafka(**dict(NO_FAULTS, election="ordered")), Options(symmetry=True))
    from kraftcheck.specs import spec_class
    mutex = spec_class("mutex")
    with pytest.raises(UsageError, match="declares no symmetry"):
        ReferenceExplorer().explore(Model(mutex(mutex.Params())), Options(symmetry=True))


def test_a_declaration_that_forgets_a_per_broker_field_is_refused():
    spec = KafkaReplication(KafkaParams(**NO_FAULTS))
    sym = spec.symmetry()
    forgetful = Symmetry(sym.labels, tuple(d for d in sym.fields if d.field != "hwm"))
    with pytest.raises(SpecError, match="field hwm is indexed by b1, b2, b3"):
        Canonicaliser(Model(spec).layout, forgetful)
    wrong = Symmetry(sym.labels, tuple(Permuted(d.field, d.axes) if d.field == "c_isr" else d for d in sym.fields))
    with pytest.raises(SpecError, match="c_isr is a set of b1, b2, b3"):
        Canonicaliser(Model(spec).layout, wrong)


@pytest.fixture(scope="module")
def violating_states():
    m = kafka(**VIOLATING)
    return m, reachable(m)


def test_compiled_canonical_form_agrees_with_its_python_twin_and_the_reference(violating_states):
    m, states = violating_states
    canon = canonicaliser_for(m)
    tables = canon.tables
    rng = random.Random(7)
    sample = rng.sample(states, 300)
    sample += [tables.image(s, rng.randrange(canon.permutations)) for s in sample]
    words = np.array([m.layout.pack(s) for s in sample], np.uint64)
    got, hashes = canon.canonical_words(words)
    twin = [canon.canonical_flat(s) for s in sample]
    representative = orbit_representative(m)
    assert [m.layout.unpack(row.tolist()) for row in got] == twin
    assert twin == [representative(s) for s in sample]
    from kraftcheck.checker.kernels.hashing import fingerprints
    assert (hashes == fingerprints(got)).all()
    # a canonical form is a member of its orbit, the same for every member, and some differ from
    # their state (else the test proves nothing)
    assert all(c in {tables.image(s, p) for p in range(canon.permutations)} for s, c in zip(sample, twin))
    assert all(canon.canonical_flat(tables.image(s, 3)) == c for s, c in zip(sample, twin))
    assert sum(c != s for s, c in zip(sample, twin)) > 100


def random_walk_states(m: Model, count: int, seed: int, length: int = 24) -> list[tuple[int, ...]]:
    """``count`` states met on random walks of ``m`` from its initial states (plain Python)."""
    rng = random.Random(seed)
    found: list[tuple[int, ...]] = []
    while len(found) < count:
        s = rng.choice(m.initial)
        for _ in range(length):
            enabled = [t for t in (m.step(s, label) for label in rng.sample(range(len(m.labels)), min(40, len(m.labels))))
                       if t is not None]
            if not enabled:
                break
            s = rng.choice(enabled)
            found.append(s)
    return found[:count]


@pytest.mark.parametrize("which", ["kafka, 4 brokers", "two-phase, 5 resource managers"])
def test_canonical_kernel_agrees_with_its_python_twin_over_24_and_120_permutations(which):
    """Four brokers (24 permutations) and 120 permutations (the kernel's candidate masks take two
    words): the kernel's search gives the twin's smallest image, also from a random member of
    each orbit, so that the best candidate changes along the way, and again from its memo."""
    if which.startswith("kafka"):
        m = kafka(**dict(NO_FAULTS, brokers=4, min_isr=3, fences=1, isr_shrinks=1))
    else:
        from kraftcheck.specs import spec_class
        two_phase = spec_class("two_phase")
        m = Model(two_phase(two_phase.Params(rm=5)))
    canon = canonicaliser_for(m)
    rng = random.Random(11)
    sample = random_walk_states(m, 80, seed=5)
    sample += [canon.tables.image(s, rng.randrange(1, canon.permutations)) for s in sample]
    words = np.array([m.layout.pack(s) for s in sample], np.uint64)
    got, hashes = canon.canonical_words(words)
    twin = [canon.canonical_flat(s) for s in sample]
    assert [m.layout.unpack(row.tolist()) for row in got] == twin
    from kraftcheck.checker.kernels.hashing import fingerprints
    assert (hashes == fingerprints(got)).all()
    assert sum(c != s for s, c in zip(sample, twin)) > len(sample) // 4
    # the same rows again (in another order) find their canonical forms in the kernel's memo
    again, rehashed = canon.canonical_words(words[::-1])
    assert (again == got[::-1]).all() and (rehashed == hashes[::-1]).all()


def test_canonicalised_distinct_successors_keep_each_state_once_with_its_smallest_row(violating_states):
    """The distinct-successor path under --symmetry: a part's distinct successors, canonicalised
    on the part's own scratch (``canonicalize_part``), may repeat; ``keep_first_dense`` keeps each
    canonical state once, in the order first met, with the smallest candidate row of its copies."""
    from kraftcheck.checker.kernels.successor_rows import keep_first_dense, seen_table_size
    m, states = violating_states
    canon = canonicaliser_for(m)
    rng = random.Random(3)
    sample = rng.sample(states, 200)
    sample += [canon.tables.image(s, rng.randrange(1, canon.permutations)) for s in sample]
    sample = list(dict.fromkeys(sample))  # distinct, as the kernels leave them
    rng.shuffle(sample)
    plo = 5  # a part's dense arrays start anywhere
    n = plo + len(sample)
    words = np.zeros((n, m.layout.nwords), np.uint64)
    words[plo:] = [m.layout.pack(s) for s in sample]
    hashes = np.zeros(n, np.uint64)
    rows = np.zeros(n, np.int64)
    rows[plo:] = rng.sample(range(10 * n), len(sample))
    expected: dict[tuple[int, ...], int] = {}
    for s, r in zip(sample, rows[plo:].tolist()):
        c = canon.canonical_flat(s)
        expected[c] = min(r, expected.get(c, r))
    canon.reserve(2)
    canon.canonicalize_part(1, words, hashes, np.arange(n, dtype=np.int64), plo, n)
    seen = np.zeros(seen_table_size(len(sample)), np.int64)
    end = keep_first_dense(words, hashes, rows, plo, n, seen, 1)
    got = {m.layout.unpack(words[p].tolist()): int(rows[p]) for p in range(plo, end)}
    assert end - plo == len(got) == len(expected) < len(sample)
    assert got == expected
    assert [m.layout.unpack(words[p].tolist()) for p in range(plo, end)] == list(expected)  # order first met
    from kraftcheck.checker.kernels.hashing import fingerprints
    assert (hashes[plo:end] == fingerprints(words[plo:end])).all()


def test_every_invariant_and_property_is_permutation_invariant(violating_states):
    m, states = violating_states
    tables = PermutationTables(m.layout, m.spec.symmetry())
    rng = random.Random(11)
    verdicts = set()
    sample = rng.sample(states, 400)
    # each sampled state's steps on the bytecode tier in one batch (stepping every action in Python
    # was most of this test's time); the first ten states' stepped in Python too, which must agree
    steps = steps_in_bytecode(m, sample)
    for s, by_label in zip(sample[:10], steps):
        assert by_label == {lab: m.step(s, lab) for lab in m.enabled_labels(s)}, s
    for s, by_label in zip(sample, steps):
        expected = m.violated_invariants(s)
        verdicts.update(expected)
        for p in range(1, tables.perms.shape[0]):
            assert m.violated_invariants(tables.image(s, p)) == expected, (s, p)
        for lab in list(by_label)[:6]:
            t = by_label[lab]
            expected_props = m.violated_properties(s, t)
            verdicts.update(expected_props)
            for p in range(1, tables.perms.shape[0]):
                assert m.violated_properties(tables.image(s, p), tables.image(t, p)) == expected_props
    assert {"leader_maximal_isr_covers_electable", "elr_members_hold_committed_log"} <= verdicts


@pytest.mark.parametrize("kw", [VIOLATING, STALE_FETCH, dict(ONE_FENCE, protocol="kafka-4.x", unclean_election=True)],
                         ids=["violating", "stale-fetch", "unclean-election"])
def test_every_transition_maps_to_a_transition_under_every_permutation(kw):
    """The claim itself, checked directly: the successors of p(s) are the images of s's. The
    successors of the sampled states and of their images are computed in one batch on the bytecode
    tier (several times faster than stepping each action in Python), and those of the first
    states and their images also by stepping the spec's actions in Python, which must agree."""
    m = kafka(**kw)
    tables = PermutationTables(m.layout, m.spec.symmetry())
    rng = random.Random(5)
    states = reachable(m)
    sample = rng.sample(states, min(150, len(states)))
    perms = range(1, tables.perms.shape[0])
    images = [tables.image(s, p) for s in sample for p in perms]
    successors = dict(zip(sample + images, successors_in_bytecode(m, sample + images)))
    for s in sample[:10] + images[:10 * len(perms)]:
        assert successors[s] == successors_of(m, s), s
    for s in sample:
        for p in perms:
            assert successors[tables.image(s, p)] == {tables.image(t, p) for t in successors[s]}, (s, p)


def test_the_ordered_election_breaks_the_claim_that_the_any_election_keeps():
    """Why --symmetry needs --election any: swapping b2 and b3 maps the initial state to itself,
    but fencing the leader b1 elects b2 and never b3 under Kafka's order."""
    sym = KafkaReplication(KafkaParams(**dict(NO_FAULTS, fences=1))).symmetry()
    for election, symmetric in (("ordered", False), ("any", True)):
        m = kafka(**dict(NO_FAULTS, fences=1, election=election))
        tables = PermutationTables(m.layout, sym)
        swap = [tuple(p) for p in tables.perms].index((0, 2, 1))
        s = m.initial[0]
        assert tables.image(s, swap) == s
        successors = {m.step(s, lab) for lab in m.enabled_labels(s)}
        assert ({tables.image(t, swap) for t in successors} == successors) is symmetric


# -- the reduced search

@pytest.mark.parametrize("kw", [NO_FAULTS, ONE_FENCE, STALE_FETCH], ids=["no-faults", "one-fence", "stale-fetch"])
def test_reduced_counts_are_the_orbits_and_engine_and_reference_agree(kw):
    m = kafka(**kw)
    states = reachable(m)
    # the orbits by the compiled canonical form (held to the reference's representative by
    # test_compiled_canonical_form_agrees_with_its_python_twin_and_the_reference), against the
    # reference explorer's search, which canonicalises with the representative: 0.1 s, not 4.6 s,
    # for one-fence's 4,248 states
    canonical, _ = canonicaliser_for(m).canonical_words(np.array([m.layout.pack(s) for s in states], np.uint64))
    orbits = {tuple(row) for row in canonical.tolist()}
    # the reduced search is held to the orbits of every reachable state, counted above: the reference
    # need not also decide the declaration, a whole expansion per permutation of every state (two
    # minutes of this test)
    reference = ReferenceExplorer(decide_symmetry=False).explore(m, Options(keep_going=True, symmetry=True))
    assert reference.distinct_states == len(orbits) < len(states)
    for engine in (Engine(compile="never"), Engine(compile="never", chunk_candidates=64, shard_bits=1)):
        assert summary(engine.explore(m, Options(keep_going=True, symmetry=True))) == summary(reference)


def test_compiled_engine_agrees_with_the_reference_under_symmetry():
    m = kafka(**NO_FAULTS)
    expected = ReferenceExplorer().explore(m, Options(keep_going=True, symmetry=True))
    for options in (Options(keep_going=True, symmetry=True), Options(keep_going=True, symmetry=True,
                                                                     fingerprints=True)):
        assert summary(Engine(compile="now").explore(m, options)) == summary(expected)


@pytest.fixture(scope="module")
def violating_runs():
    m = kafka(**VIOLATING)
    # the unreduced run, the verdicts' and lengths' truth, on the bytecode tier (several times faster);
    # the reduced runs on the Python tier, whose canonical forms are the ones computed in Python
    full = Engine(compile="bytecode").explore(m, Options(keep_going=True))
    reduced = Engine(compile="never").explore(m, Options(keep_going=True, symmetry=True))
    return m, full, reduced


def test_symmetry_keeps_every_verdict_and_shortest_counterexample_length(violating_runs):
    m, full, reduced = violating_runs
    assert reduced.distinct_states < full.distinct_states
    assert full.status == reduced.status == "violated"
    assert sorted((v.check, v.depth) for v in full.violations) == sorted((v.check, v.depth) for v in reduced.violations)
    assert len(full.violations) == 3


def test_first_violation_under_symmetry_agrees_between_chunk_sizes_and_has_the_shortest_length(violating_runs):
    m, full, _ = violating_runs
    first = Engine(compile="never").explore(m, Options(symmetry=True))
    small = Engine(compile="never", chunk_candidates=64, shard_bits=1).explore(m, Options(symmetry=True))
    assert summary(first) == summary(small)
    assert [v.depth for v in first.violations] == [min(v.depth for v in full.violations)]


def test_decanonicalised_counterexamples_replay_on_the_concrete_model(violating_runs, tmp_path):
    m, _, reduced = violating_runs
    from kraftcheck import traces
    from kraftcheck.traces.files import load
    from kraftcheck.traces.replay import replay
    check_in_stricter_variant(m, reduced.violations)
    for v in reduced.violations:
        assert_counterexample_replays(m, v)
        assert v.stricter_variant["variant"] == "Kafka's ordered election"
        assert v.stricter_variant["replays"] == (v.stricter_variant["step"] is None)
        path = traces.write_counterexample(m, v, {"symmetry": True}, tmp_path)
        assert replay(load(path)).ok
        recorded = json.loads(path.read_text())["graph"]["violation"]["stricter_variant"]
        assert recorded["replays"] == v.stricter_variant["replays"]


def test_reference_and_engine_stop_at_the_same_first_violation_with_concrete_traces():
    m = kafka(**VIOLATING)
    reference = ReferenceExplorer().explore(m, Options(symmetry=True))
    engine = Engine(compile="never").explore(m, Options(symmetry=True))
    assert summary(engine) == summary(reference)
    (v,) = reference.violations
    assert v.kind == "invariant"
    assert_counterexample_replays(m, v)


# -- the command line

def run(*args):
    from kraftcheck.cli.main import cli
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_cli_symmetry_needs_the_any_election_one_line_exit_2():
    result = run("check", "--brokers", "3", "--fences", "0", "--symmetry", "--max-states", "10")
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--symmetry needs --election any" in lines[0]


def test_cli_reports_orbits(tmp_path):
    out = tmp_path / "r.json"
    result = run("check", "--brokers", "3", "--min-isr", "2", "--lossy-shutdowns", "0", "--fences", "0",
                 "--isr-shrinks", "0", "--min-isr-changes", "1", "--election", "any", "--symmetry",
                 "--engine", "reference", "--json", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["symmetry"] is True and report["options"]["symmetry"] is True
    m = kafka(**NO_FAULTS)
    assert report["distinct_states"] == len(set(map(orbit_representative(m), reachable(m))))


def test_cli_says_whether_a_counterexample_replays_under_the_ordered_election(tmp_path):
    out = tmp_path / "r.json"
    result = run("check", "--brokers", "3", "--min-isr", "2", "--lossy-shutdowns", "0", "--fences", "0",
                 "--isr-shrinks", "1", "--min-isr-changes", "1", "--election", "any", "--symmetry",
                 "--engine", "reference", "--json", str(out), "--trace-dir", str(tmp_path / "t"))
    assert result.exit_code == 1, result.output
    (v,) = json.loads(out.read_text())["violations"]
    graph = json.loads(open(v["trace_file"]).read())["graph"]
    assert graph["violation"]["stricter_variant"] == v["stricter_variant"]
    replayed = run("trace", "replay", v["trace_file"])
    assert replayed.exit_code == 0, replayed.output
    from kraftcheck.traces.files import load
    from kraftcheck.traces.replay import replay
    states = replay(load(v["trace_file"])).states
    ordered = kafka(**dict(VIOLATING, election="ordered"))
    assert v["stricter_variant"]["replays"] == (replays_on(ordered, states) is None)
    assert v["stricter_variant"]["note"].split(":")[0] in " ".join(result.output.split())


def test_two_phase_commit_reduces_to_the_orbits_of_its_resource_managers():
    """A second spec, symmetric in every resource manager: the design is not Kafka's."""
    from kraftcheck.specs import spec_class
    two_phase = spec_class("two_phase")
    m = Model(two_phase(two_phase.Params(rm=4)))
    states = reachable(m)
    orbits = set(map(orbit_representative(m), states))
    reduced = Engine(compile="never").explore(m, Options(keep_going=True, symmetry=True))
    assert reduced.distinct_states == len(orbits) < len(states)
    with pytest.raises(UsageError, match="at most rm=7"):
        Engine(compile="never").explore(Model(two_phase(two_phase.Params(rm=8))), Options(symmetry=True))


def test_a_symmetric_checkpoint_resumes_to_the_same_end_and_only_under_symmetry(tmp_path):
    from kraftcheck.specs import spec_class
    eager = spec_class("two_phase_eager_commit")

    def model():
        return Model(eager(eager.Params(rm=4)))

    reduced = Options(keep_going=True, symmetry=True)
    full = Engine().explore(model(), reduced)
    stopped = Engine().explore(model(), dataclasses.replace(reduced, max_depth=4, checkpoint_dir=str(tmp_path)))
    assert stopped.status == "incomplete"
    with pytest.raises(UsageError):
        Engine().explore(model(), Options(keep_going=True, checkpoint_dir=str(tmp_path), resume=True))
    resumed = Engine().explore(model(), dataclasses.replace(reduced, checkpoint_dir=str(tmp_path), resume=True))
    assert summary(resumed) == summary(full) and resumed.violations
    m = model()
    for v in resumed.violations:
        for before, after in zip(v.steps, v.steps[1:]):
            assert m.step(before.state, after.label) == after.state


# -- several symmetry sets: the product group

ALLOCATOR = f"{Path(__file__).resolve().parents[1]}/bench/specs/simple_allocator.py:SimpleAllocator"
VOTING = "symmetry_specs:Voting"
# the TLA+ Examples' MCVoting, the worked translation of docs/writing-a-spec.md
TLA_VOTING = f"{Path(__file__).resolve().parents[1]}/bench/specs/voting.py:Voting"


def spec_model(ref: str, **kw) -> Model:
    from kraftcheck.specs import spec_class
    cls = spec_class(ref)
    return Model(cls(cls.Params(**kw)))


def map_bits(mask: int, perm: tuple[int, ...]) -> int:
    return sum(1 << perm[i] for i in range(len(perm)) if mask >> i & 1)


def permute_voting(m: Model, flat, acceptors: tuple[int, ...], values: tuple[int, ...]):
    """Acceptor a becomes acceptors[a] and value v becomes values[v], written from what each field
    means (not from the spec's declaration)."""
    s = m.layout.values(flat)
    nv = len(values)
    vote = [[0] * nv for _ in acceptors]
    voted = [0] * len(acceptors)
    for a, pa in enumerate(acceptors):
        voted[pa] = values[s["voted"][a]] if s["voted"][a] < nv else s["voted"][a]
        for v, pv in enumerate(values):
            vote[pa][pv] = s["vote"][a][v]
    last = acceptors[s["last_voter"]] if s["votes_cast"] else s["last_voter"]
    return m.layout.flat_from_values(dict(s, vote=vote, voted=voted, proposed=map_bits(s["proposed"], values),
                                          chosen=map_bits(s["chosen"], values), last_voter=last))


def permute_allocator(m: Model, flat, clients: tuple[int, ...], resources: tuple[int, ...]):
    """Client c becomes clients[c] and resource r becomes resources[r]."""
    s = m.layout.values(flat)
    out = {"unsat": [0] * len(clients), "alloc": [0] * len(clients)}
    for name in out:
        for c, pc in enumerate(clients):
            out[name][pc] = map_bits(s[name][c], resources)
    return m.layout.flat_from_values(dict(s, **out))


def permute_tla_voting(m: Model, flat, acceptors: tuple[int, ...], values: tuple[int, ...]):
    """Acceptor a becomes acceptors[a] and value v becomes values[v]; ballots stay."""
    s = m.layout.values(flat)
    votes = [[[0] * len(values) for _ in row] for row in s["votes"]]
    max_bal = [0] * len(acceptors)
    for a, pa in enumerate(acceptors):
        max_bal[pa] = s["max_bal"][a]
        for b, row in enumerate(s["votes"][a]):
            for v, pv in enumerate(values):
                votes[pa][b][pv] = row[v]
    return m.layout.flat_from_values(dict(s, votes=votes, max_bal=max_bal))


TWO_SETS = [  # (spec, params, the hand-written permutation, the parameters sizing the two sets, (states, orbits))
    (VOTING, {}, permute_voting, ("acceptors", "values"), (136, 18)),
    (VOTING, {"revote": True}, permute_voting, ("acceptors", "values"), (934, 95)),
    (VOTING, {"values": 3}, permute_voting, ("acceptors", "values"), (566, 30)),
    (ALLOCATOR, {}, permute_allocator, ("clients", "resources"), (400, 50)),
    (TLA_VOTING, {}, permute_tla_voting, ("acceptors", "values"), (599, 77)),
    pytest.param(ALLOCATOR, {"clients": 3, "resources": 3}, permute_allocator, ("clients", "resources"), (8000, 309),
                 marks=pytest.mark.slow),  # 36 permutations of 8,000 states: a minute and a half
]


def orbits_by_brute_force(m: Model, permute, sizes: tuple[int, int]) -> tuple[int, int, int, int]:
    """(states, orbits under the product group, orbits under the first set's permutations alone,
    under the second's alone), from the unreduced reachable states and ``permute``."""
    import itertools
    states = reachable(m)
    first = list(itertools.permutations(range(sizes[0])))
    second = list(itertools.permutations(range(sizes[1])))
    identity = (first[0], second[0])

    def orbits(group):
        # each orbit computed once, from the first of its states met: the orbits of a group
        # partition the states, so a state already in one starts no other
        counted, seen = 0, set()
        for s in states:
            if s not in seen:
                counted += 1
                seen.update(permute(m, s, p, q) for p, q in group)
        return counted

    return (len(states), orbits(list(itertools.product(first, second))),
            orbits([(p, identity[1]) for p in first]), orbits([(identity[0], q) for q in second]))


@pytest.mark.parametrize("ref,kw,permute,sizes,counts", TWO_SETS,
                         ids=["voting", "voting-revote", "voting-3-values", "allocator", "tla-voting",
                              "allocator-3x3"])
def test_two_symmetry_sets_count_the_orbits_of_their_product_group(ref, kw, permute, sizes, counts):
    """--symmetry with two sets counts exactly the orbits of the unreduced reachable states under
    the product group (brute force with a permutation written here from the fields' meaning), fewer
    than either set alone would leave; every explorer agrees, and verdicts and shortest
    counterexample lengths are the unreduced run's, with concrete counterexamples."""
    m = spec_model(ref, **kw)
    sizes = tuple(getattr(m.spec.params, name) for name in sizes)
    states, orbits, first_only, second_only = orbits_by_brute_force(m, permute, sizes)
    assert (states, orbits) == counts
    assert orbits < min(first_only, second_only) <= max(first_only, second_only) < states
    full = ReferenceExplorer().explore(spec_model(ref, **kw), Options(keep_going=True))
    # the orbits counted by brute force decide the declaration here (and the test below maps every
    # transition to its image): the reference need not expand each state under every permutation
    reduced = ReferenceExplorer(decide_symmetry=False).explore(spec_model(ref, **kw),
                                                               Options(keep_going=True, symmetry=True))
    assert full.distinct_states == states and reduced.distinct_states == orbits
    assert full.status == reduced.status and full.depth >= reduced.depth
    assert sorted((v.check, v.depth) for v in full.violations) == sorted((v.check, v.depth) for v in reduced.violations)
    for engine in (Engine(compile="never"), Engine(compile="never", chunk_candidates=64, shard_bits=1), Engine()):
        got = engine.explore(spec_model(ref, **kw), Options(keep_going=True, symmetry=True))
        assert summary(got) == summary(reduced)
        for v in got.violations + reduced.violations:  # de-canonicalised: concrete traces that replay
            assert_counterexample_replays(m, v)


@pytest.mark.parametrize("ref,kw,permute,sizes,counts", TWO_SETS[:4], ids=["voting", "voting-revote", "voting-3-values",
                                                                             "allocator"])
def test_two_symmetry_sets_map_every_transition_and_verdict_to_its_image(ref, kw, permute, sizes, counts):
    """The claim the two specs make, checked directly on every reachable state: under every pair
    of permutations the successors of p(s) are the images of s's, and the verdicts are s's; and the
    declaration's tables permute states as the hand-written permutation does."""
    import itertools
    m = spec_model(ref, **kw)
    sizes = tuple(getattr(m.spec.params, name) for name in sizes)
    tables = PermutationTables(m.layout, m.spec.symmetry())
    group = list(itertools.product(itertools.permutations(range(sizes[0])), itertools.permutations(range(sizes[1]))))
    assert [tuple(p) for p in tables.perms] == [p + q for p, q in group]
    # each state's successors and verdicts computed once: an orbit's members are each other's
    # images, so a state is met as an image once per member of its orbit and permutation
    successors, verdicts = {}, {}

    def successors_once(x):
        if x not in successors:
            successors[x] = successors_of(m, x)
        return successors[x]

    def verdicts_once(x):
        if x not in verdicts:
            verdicts[x] = m.violated_invariants(x)
        return verdicts[x]

    moved = 0
    for s in reachable(m):
        for k, (p, q) in enumerate(group):
            image = permute(m, s, p, q)
            moved += image != s
            assert tables.image(s, k) == image, (s, p, q)
            assert successors_once(image) == {permute(m, t, p, q) for t in successors_once(s)}, (s, p, q)
            assert verdicts_once(image) == verdicts_once(s)
    assert moved > 0


@pytest.mark.parametrize("ref,kw", [(VOTING, {"revote": True}), (ALLOCATOR, {"clients": 3, "resources": 3})])
def test_two_set_canonical_kernel_agrees_with_its_python_twin_and_the_reference(ref, kw):
    m = spec_model(ref, **kw)
    canon = canonicaliser_for(m)
    states = reachable(m)
    rng = random.Random(3)
    sample = rng.sample(states, min(400, len(states)))
    sample += [canon.tables.image(s, rng.randrange(canon.permutations)) for s in sample]
    got, hashes = canon.canonical_words(np.array([m.layout.pack(s) for s in sample], np.uint64))
    twin = [canon.canonical_flat(s) for s in sample]
    assert [m.layout.unpack(row.tolist()) for row in got] == twin
    assert twin == list(map(orbit_representative(m), sample))
    from kraftcheck.checker.kernels.hashing import fingerprints
    assert (hashes == fingerprints(got)).all()
    assert sum(c != s for s, c in zip(sample, twin)) > len(sample) // 4


def test_simple_allocator_under_symmetry_gives_tlcs_counts():
    r"""The TLA+ Examples' SimpleAllocator (specifications/allocator, Stephan Merz), INIT Init NEXT
    Next, INVARIANTS TypeInvariant ResourceMutex, and SYMMETRY Symmetry (``Permutations(Clients)
    \cup Permutations(Resources)``) or not, as TLC 2.20 (tla2tools.jar rev 96056d9, -workers 1)
    reports it:

        Clients = {c1,c2,c3}, Resources = {r1,r2}:
            1633 states generated, 400 distinct states found, 0 states left on queue.
            The depth of the complete state graph search is 6.
          with SYMMETRY Symmetry:
            226 states generated, 50 distinct states found, 0 states left on queue.
            The depth of the complete state graph search is 6.
        Clients = {c1,c2}, Resources = {r1,r2,r3}:
            2331 states generated, 512 distinct states found ...; depth 5
          with SYMMETRY: 347 states generated, 65 distinct states found ...; depth 5
        Clients = {c1,c2,c3}, Resources = {r1,r2,r3}:
            45697 states generated, 8000 distinct states found ...; depth 7
          with SYMMETRY: 1976 states generated, 309 distinct states found ...; depth 7

    TLC keeps a state unless another with the smallest fingerprint among the images under its
    symmetry permutations was seen, not a canonical form as kraftcheck does, so its reduced counts
    need not be the orbit counts; here they are: 50, 65 and 309 are the orbits of the product group
    (test_two_symmetry_sets_count_the_orbits_of_their_product_group), whereas the eleven
    permutations of the union alone, not composed (one set permuted at a time), leave 1,652
    classes at 3 x 3. States generated agree too: every member of an orbit has as many successors
    as any other, so the sum over the explored states does not depend on which member is kept."""
    tlc = {(3, 2): ((1, 1633, 400, 6), (1, 226, 50, 6)),
           (2, 3): ((1, 2331, 512, 5), (1, 347, 65, 5)),
           (3, 3): ((1, 45697, 8000, 7), (1, 1976, 309, 7))}
    for (clients, resources), (full, reduced) in tlc.items():
        for symmetry, expected in ((False, full), (True, reduced)):
            r = Engine().explore(spec_model(ALLOCATOR, clients=clients, resources=resources),
                                 Options(symmetry=symmetry))
            assert r.status == "holds"
            assert (r.initial_states, r.states_generated, r.distinct_states, r.depth) == expected


def test_tla_voting_under_symmetry_gives_tlcs_counts():
    r"""The TLA+ Examples' MCVoting (bench/specs/voting.py, whose unreduced counts,
    3,124 generated and 599 distinct, tests/test_tla_examples_voting.py pins) with SYMMETRY
    MCSymmetry (``Permutations(MCAcceptor) \cup Permutations(MCValue)``), as TLC 2.20 (rev 96056d9,
    -workers 1) reports it on MCVoting.cfg without its PROPERTY line (Voting.tla cut from ``C ==
    INSTANCE Consensus`` on, TLAPS.tla from the tlaplus repository's test models beside it):

        451 states generated, 77 distinct states found, 0 states left on queue.
        The depth of the complete state graph search is 11.

    (also the Examples' manifest.json: 77 distinct, 451 total, depth 11). States generated agree
    because the spec makes each witness of VoteFor's existentials (the quorum, ShowsSafeAt's
    ballot c and acceptor) an action parameter, as TLC computes one successor per witness. 77 is
    the number of orbits of the product group
    (test_two_symmetry_sets_count_the_orbits_of_their_product_group[tla-voting])."""
    r = Engine().explore(spec_model(TLA_VOTING), Options(symmetry=True))
    assert r.status == "holds"
    assert (r.initial_states, r.states_generated, r.distinct_states, r.depth) == (1, 451, 77, 11)


def test_union_alone_would_not_reduce_the_allocator_to_tlcs_count():
    """The figure quoted above: the permutations of one set at a time (the union of the two groups,
    not their product) leave 1,652 classes of the 8,000 states at 3 clients x 3 resources, not 309."""
    m = spec_model(ALLOCATOR, clients=3, resources=3)
    tables = PermutationTables(m.layout, m.spec.symmetry())
    union = [k for k, p in enumerate(tables.perms.tolist()) if p[:3] == [0, 1, 2] or p[3:] == [0, 1, 2]]
    states = reachable(m)
    assert len(union) == 11 and len(states) == 8000
    assert len({min(tables.image(s, k) for k in union) for s in states}) == 1652
    assert len({min(tables.image(s, k) for k in range(tables.perms.shape[0])) for s in states}) == 309


# -- declarations of several sets that cannot be right

WRONG_DECLARATIONS = [
    (lambda a, v: [a, Symmetry(v.labels, v.fields + (Permuted("no_such_field", axes=(0,)),))],
     "symmetry names field 'no_such_field', which the spec does not have"),
    (lambda a, v: [a, Symmetry(v.labels, v.fields + (Permuted("last_voter", holds="member"),))],
     "field last_voter holds values of two sets"),
    (lambda a, v: [a, Symmetry(v.labels, v.fields + (Permuted("vote", axes=(0,)),))],
     "symmetry declares field vote twice"),
    (lambda a, v: [a, Symmetry(v.labels, tuple(d if d.field != "vote" else Permuted("vote", axes=(0,))
                                                for d in v.fields))],
     "field vote has no axis 0 of size 2"),
    (lambda a, v: [a, Symmetry(("a1", "v2"), v.fields)], "value a1 is in two symmetry sets"),
    (lambda a, v: [a, Symmetry(("v1", "v1"), v.fields)], "the set v1, v1 names a value twice"),
    (lambda a, v: [a, Symmetry(v.labels, tuple(d for d in v.fields if d.field != "proposed"))],
     "field proposed is a set of v1, v2 but not declared holds='subset'"),
    (lambda a, v: [Symmetry(a.labels, tuple(d for d in a.fields if d.field != "voted")), v],
     "field voted is indexed by a1, a2, a3 but not declared with axes=(0, ...)"),
    (lambda a, v: [a, v, Symmetry(tuple(f"x{i}" for i in range(6)), ())], "the product of their factorials"),
    (lambda a, v: [a, "values"], "must return a Symmetry or a non-empty list of them"),
    (lambda a, v: [], "must return a Symmetry or a non-empty list of them"),
]


@pytest.mark.parametrize("change,message", WRONG_DECLARATIONS, ids=[m[:40] for _, m in WRONG_DECLARATIONS])
def test_a_wrong_two_set_declaration_is_refused_before_exploring(change, message):
    m = spec_model(VOTING)
    acceptors, values = m.spec.symmetry()
    m.spec.symmetry = lambda: change(acceptors, values)
    with pytest.raises(SpecError, match=re.escape(message)):
        Engine(compile="never").explore(m, Options(symmetry=True, max_states=1))
    with pytest.raises(SpecError, match=re.escape(message)):
        ReferenceExplorer().explore(m, Options(symmetry=True, max_states=1))


def test_an_axis_that_moves_with_two_sets_is_refused():
    """With as many acceptors as values, an axis of ``vote`` can be declared in either set, not both."""
    m = spec_model(VOTING, acceptors=2, values=2)
    acceptors, values = m.spec.symmetry()
    both = Symmetry(values.labels, tuple(Permuted("vote", axes=(0, 1)) if d.field == "vote" else d
                                         for d in values.fields))
    with pytest.raises(SpecError, match="axis 0 of field vote moves with two sets"):
        Canonicaliser(m.layout, [acceptors, both])


def test_cli_refuses_a_symmetry_set_naming_a_missing_field_in_one_line_exit_2(tmp_path):
    spec = tmp_path / "bad_voting.py"
    spec.write_text(textwrap.dedent(f'''\
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from kraftcheck import Permuted, Symmetry
        from symmetry_specs import Voting


        class BadVoting(Voting):
            name = "bad_voting"

            def symmetry(self):
                acceptors, values = super().symmetry()
                return [acceptors, Symmetry(values.labels, values.fields + (Permuted("ballot", axes=(0,)),))]
        '''))
    out = tmp_path / "report.json"
    result = run("check", "--spec", f"{spec}:BadVoting", "--symmetry", "--json", str(out))
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "symmetry names field 'ballot', which the spec does not have (fields: vote, voted, " \
        "proposed, chosen, last_voter, votes_cast" in lines[0], lines
    assert not out.exists()
