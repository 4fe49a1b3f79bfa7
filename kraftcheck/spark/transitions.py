"""A Spark expansion's transitions, chunk by chunk: a range of a level's states through the
compiled kernels, as candidates for deduplication (packed words, fingerprints, keys
``parent * nlabels + label``, the parent counted from a number the caller gives) with what the
expansion counts and checks of them (``tasks.expand_states``).

Two paths, as the local engine's: every transition a candidate (``every_row_chunks``), which a
model with state or action constraints needs since each successor is checked against them; or
only each chunk's distinct successors (``distinct_chunks``), which sends a fraction of the
candidates through the shuffle and leaves deduplication the same smallest key of every state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Optional

import numpy as np

from kraftcheck.checker.errors import SpecRaised
from kraftcheck.checker.explore.constraints import outside_constraints
from kraftcheck.spark import workdir

if TYPE_CHECKING:
    from kraftcheck.spark.tasks import LevelPlan

CANDIDATES_PER_CHUNK = 1 << 20  # successor rows computed at a time on the every-row path
NO_HIT = -1  # "not violated" in a per-check array of minimal keys
ROOMS_KEPT = 8  # models whose distinct-path buffers a worker keeps (as tasks.KERNELS_KEPT their kernels)


class RaisedOnSuccessor(Exception):
    """A spec's ``error`` on the successor by ``label`` of row ``row`` of the states expanded (a
    check of the successor raised: the state raised on is one step past the batch's)."""

    def __init__(self, error: SpecRaised, row: int, label: int) -> None:
        super().__init__(error, row, label)
        self.error, self.row, self.label = error, row, label


def read_frontier(plan: "LevelPlan", lo: int, hi: int) -> np.ndarray:
    """Packed states with global indices lo..hi of the level being expanded, from its part files."""
    pieces = []
    start = plan.level_start
    for part, count in enumerate(plan.part_counts):
        a, b = max(lo, start), min(hi, start + count)
        if a < b:
            path = workdir.part_path(plan.root, plan.level, part, "words")
            pieces.append(workdir.load_slice(path, np.uint64, a - start, b - start, plan.nwords))
        start += count
    if not pieces:
        return np.empty((0, plan.nwords), np.uint64)
    return np.concatenate(pieces)


def transitions(plan: "LevelPlan", kernels: Any, words: np.ndarray, lo: int) -> Iterator[tuple[Any, ...]]:
    """Per chunk of the states ``words``, numbered from ``lo`` on: the successors' words, hashes,
    keys and property masks; which of them lie outside the state or action constraints, with
    their invariant masks (TLC checks the invariants on them too); and the key
    ``state * nlabels + nlabels - 1`` of the chunk's first deadlocked state (no successor but
    itself; NO_HIT if none or not checked)."""
    from kraftcheck.checker.codegen import NO_LABEL
    from kraftcheck.checker.kernels.deadlock import first_stuck
    model = kernels.model
    nl = plan.nlabels
    chunk = max(1, CANDIDATES_PER_CHUNK // nl)
    buf = kernels.buffers(min(chunk, max(1, words.shape[0])))
    for a in range(0, words.shape[0], chunk):
        b = min(words.shape[0], a + chunk)
        kernels.successors(words, a, b, buf)
        valid = np.flatnonzero(buf.labels[: (b - a) * nl] != NO_LABEL)
        keys = (lo + a) * nl + valid.astype(np.int64)  # row i * nl + label of state lo + a + i
        props = buf.props[valid] if model.properties else None
        stuck = NO_HIT
        if model.check_deadlock:
            i = first_stuck(buf.words, buf.labels, words, a, 0, b - a, nl, NO_LABEL)
            stuck = NO_HIT if i < 0 else (lo + a + i) * nl + nl - 1
        outside = np.zeros(valid.shape[0], bool)
        masks = np.zeros(valid.shape[0], np.uint64)
        if model.constrained:
            if model.constraints or model.invariants:
                try:
                    masks = kernels.violations(np.ascontiguousarray(buf.words[valid]))
                except SpecRaised as e:  # on the successor in candidate row valid[e.at] of the chunk
                    if e.at is None:
                        raise
                    row = int(valid[e.at])
                    raise RaisedOnSuccessor(e, a + row // nl, row % nl) from None
            outside = outside_constraints(model, masks, buf.props[valid] if model.action_constraints else None)
        yield buf.words[valid], buf.hashes[valid], keys, props, outside, masks, stuck


def first_hits(masks: np.ndarray, keys: np.ndarray, nchecks: int, into: np.ndarray) -> None:
    """For each check k not hit yet in ``into``, the first key whose mask has bit k."""
    bad = np.flatnonzero(masks)
    for k in range(nchecks):
        if into[k] != NO_HIT or not bad.size:
            continue
        hits = bad[(masks[bad] >> np.uint64(k)) & np.uint64(1) == 1]
        if hits.size:
            into[k] = keys[hits[0]]


@dataclass
class Chunk:
    """What ``expand`` needs of one chunk's transitions: its candidates (words, fingerprints, keys),
    transitions per action, the smallest key violating each transition property and, among
    successors outside the state or action constraints (not candidates), each invariant (NO_HIT:
    none), and the key ``state * nlabels + nlabels - 1`` of its first deadlocked state (NO_HIT if
    none or not checked)."""

    words: np.ndarray
    hashes: np.ndarray
    keys: np.ndarray
    fired: np.ndarray
    prop_first: np.ndarray
    outside_first: np.ndarray
    stuck: int


def every_row_chunks(plan: "LevelPlan", kernels: Any, words: np.ndarray, lo: int) -> Iterator[Chunk]:
    """The chunks of the states ``words`` (numbered from ``lo`` on) with every transition a
    candidate, except those leaving the constraints: what a constrained model needs (checked one
    by one, as the local engine's candidate-row path does)."""
    model = kernels.model
    label_action = np.array(model.label_action, np.int64)
    for words, hashes, keys, props, outside, masks, stuck in transitions(plan, kernels, words, lo):
        fired = np.bincount(label_action[keys % plan.nlabels], minlength=len(model.actions))
        prop_first = np.full(len(model.properties), NO_HIT, np.int64)
        if props is not None:
            first_hits(props, keys, len(model.properties), prop_first)
        outside_first = np.full(len(model.invariants), NO_HIT, np.int64)
        if outside.any():  # counted and checked, but not candidates: they are not kept
            first_hits(masks[outside], keys[outside], len(model.invariants), outside_first)
            words, hashes, keys = words[~outside], hashes[~outside], keys[~outside]
        yield Chunk(words, hashes, keys, fired, prop_first, outside_first, stuck)


_rooms: dict[str, tuple[Any, Any]] = {}  # model identity -> (buffers, repeat tables), per worker


# At most this many bytes of unpacked states a task's chunk: the local engine's chunks of 32 MiB
# reserve about four times the address space (0.72 against 0.19 GiB for the default Kafka model's
# buffers and repeat table), a worker keeps up to ROOMS_KEPT of them, and an executor may run under
# an address-space cap (spark.executor.pyspark.memory); nothing measured says larger chunks help
# Spark's tasks, which fill every chunk whole.
TASK_UNPACKED_BYTES_PER_CHUNK = 8 << 20


def _distinct_room(plan: "LevelPlan", kernels: Any, states: Optional[int] = None) -> tuple[Any, Any]:
    """The chunk buffers and repeat tables of the distinct-successor path for chunks of
    ``states`` states; by default the local engine's number of candidate rows
    (DISTINCT_CANDIDATES_PER_CHUNK), at most TASK_UNPACKED_BYTES_PER_CHUNK of unpacked states,
    allocated once per worker and model (their pages are touched only as far as a chunk uses them)."""
    from kraftcheck.checker.explore.compiled import RepeatTables

    def new_room(states: int) -> tuple[Any, Any]:
        buf = kernels.buffers(states)
        return buf, RepeatTables(kernels.threads, buf.valid.shape[0], kernels.nwords, kernels.tally_width)

    if states is not None:  # a size of the caller's (tests): not kept
        return new_room(states)
    room = _rooms.get(plan.kernels_key)
    if room is None:
        from kraftcheck.checker.explore.engine import DISTINCT_CANDIDATES_PER_CHUNK
        room = new_room(max(1, min(DISTINCT_CANDIDATES_PER_CHUNK // plan.nlabels,
                                   TASK_UNPACKED_BYTES_PER_CHUNK // (4 * kernels.model.layout.size))))
        if len(_rooms) >= ROOMS_KEPT:
            _rooms.pop(next(iter(_rooms)))
        _rooms[plan.kernels_key] = room
    return room


def _no_op(*_: Any) -> None:
    pass


def distinct_chunks(plan: "LevelPlan", kernels: Any, words: np.ndarray, lo: int,
                    chunk_states: Optional[int] = None) -> Iterator[Chunk]:
    """The chunks of the states ``words`` (numbered from ``lo`` on) with only their distinct
    successors as candidates: the kernels drop self-loops (never new) and keep each successor
    once per part of a chunk, with its smallest candidate row (``Kernels.distinct_successors``,
    the local engine's path), so the smallest key of each state is among the candidates and
    ``deduplicate`` keeps the same one; the kernels still count every transition and find each
    property's first violating row, and mark the states with a successor other than themselves
    (the deadlock check).
    ``chunk_states``: states per chunk (at most; default ``_distinct_room``'s)."""
    from kraftcheck.checker.codegen import NO_LABEL
    from kraftcheck.checker.kernels.successor_rows import NO_ROW, TALLY_FIRED
    model = kernels.model
    nl, nactions = plan.nlabels, len(model.actions)
    buf, tables = _distinct_room(plan, kernels, chunk_states)
    step = chunk_states or buf.states
    for a in range(0, words.shape[0], step):
        b = min(words.shape[0], a + step)
        if model.check_deadlock:  # the kernels set a state's first label to 0 once it moves
            buf.labels[: (b - a) * nl: nl] = NO_LABEL
        ends = kernels.distinct_successors(words, a, b, buf, tables, _no_op, mark_moves=model.check_deadlock)
        spans = [slice(kernels.dense_start(j, buf), end) for j, end in enumerate(ends)]
        rows = np.concatenate([buf.dense_rows[s] for s in spans])  # candidate rows from state a
        tally = tables.tally[: len(ends)]
        fired = tally[:, TALLY_FIRED: TALLY_FIRED + nactions].sum(axis=0)
        firsts = tally[:, TALLY_FIRED + nactions: TALLY_FIRED + nactions + len(model.properties)].min(axis=0)
        prop_first = np.where(firsts == NO_ROW, NO_HIT, (lo + a) * nl + firsts)
        stuck = NO_HIT
        if model.check_deadlock:
            still = np.flatnonzero(buf.labels[: (b - a) * nl: nl] == NO_LABEL)
            stuck = NO_HIT if not still.size else (lo + a + int(still[0])) * nl + nl - 1
        yield Chunk(np.concatenate([buf.dense_words[s] for s in spans]),
                    np.concatenate([buf.dense_hashes[s] for s in spans]), (lo + a) * nl + rows,
                    fired.astype(np.int64), prop_first.astype(np.int64),
                    np.full(len(model.invariants), NO_HIT, np.int64), stuck)


def earliest(into: np.ndarray, found: np.ndarray) -> None:
    """Per check, the smaller of two first keys (NO_HIT: none)."""
    better = (found != NO_HIT) & ((into == NO_HIT) | (found < into))
    into[better] = found[better]
