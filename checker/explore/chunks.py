"""Expanding one chunk of a level: its successors, the visited set, and the new states in order.

A chunk is split in parts (``kernels.parts``: ``compiled.PARTS_PER_THREAD`` a thread, which the
threads take one by one).
Two paths:

- every candidate row (``ChunkExpansion.successors`` then ``collect_new``): the kernels write
  every successor of every state; per part, on the part's own thread, its valid rows are
  gathered, canonicalised (``--symmetry``) and, unless they go to the graph builder or some are
  outside a state or action constraint, bucketed by shard for the visited set; then the visited
  set marks first occurrences and a pass per part keeps the new states, in (source state, label)
  order, with a parent and a label each.
- distinct successors only (``distinct_chunk``, the compiled kernels' fastest path, taken when
  nothing needs every row: neither the graph builder nor a constraint): each part keeps only its
  distinct successors (under ``--symmetry`` canonicalised on the part's thread, and the repeats
  that makes left out), and the new states are collected from them in the same order.

Both give the same new states, counts and first violations: the choice changes only speed.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.errors import SpecRaised
from kraftcheck.checker.explore.bytecode_tier import BytecodeKernels
from kraftcheck.checker.explore.compiled import RepeatTables, most_parts
from kraftcheck.checker.explore.constraints import outside_constraints
from kraftcheck.checker.explore.tiers import Tiers
from kraftcheck.checker.explore.violations import Violations
from kraftcheck.checker.kernels.deadlock import first_stuck
from kraftcheck.checker.kernels.successor_rows import (NO_ROW, TALLY_FIRED, bucket_dense_part, bucket_part,
                                                      collect_dense_part, collect_part, keep_first_dense,
                                                      seen_table_size, tally_width, valid_rows_part)
from kraftcheck.checker.kernels.threads import per_thread_rows, run_taking, thread_count
from kraftcheck.checker.model import DEADLOCK, Model


def every_row_needed(model: Model) -> bool:
    """Whether the engine needs every successor row of a chunk, not only the distinct ones: a
    state or action constraint leaves some out of the search (the candidate-row path). (The
    deadlock check works on either path.)"""
    return model.constrained


def close_gaps(columns: tuple[np.ndarray, ...], starts: list[int], counts: list[int]) -> list[tuple[int, int]]:
    """Parts wrote ``counts[j]`` rows each from ``starts[j]`` of every column; move them down so
    they lie one after another from row 0, in part order. Returns each part's (start, count) there."""
    spans, n = [], 0
    for start, count in zip(starts, counts):
        if start != n:
            for column in columns:
                column[n: n + count] = column[start: start + count]
        spans.append((n, count))
        n += count
    return spans


class ChunkExpansion:
    """What a run's chunks share: the kernels and buffers (``tiers``), the visited set (or the
    graph builder, which numbers every state), the canonicaliser under ``--symmetry``, the
    violations found, and per part of a chunk the tables its passes use.
    Each action's ``fired`` and ``new_per_action`` counts are added up in place."""

    def __init__(self, model: Model, tiers: Tiers, visited: Any, graph_builder: Any, canon: Any,
                 violations: Violations, fired: np.ndarray, new_per_action: np.ndarray, shard_bits: int) -> None:
        self.model, self.tiers, self.visited, self.graph_builder = model, tiers, visited, graph_builder
        self.canon, self.violations, self.fired, self.new_per_action = canon, violations, fired, new_per_action
        self.label_action = np.array(model.label_action, np.int64)
        self.stride = len(model.labels)  # candidate rows per source state
        self.shard_bits = shard_bits
        threads = max(1, thread_count())
        parts = most_parts(threads)
        # per part: shard offsets of its rows for the visited set, and its coverage counts
        self._offsets = per_thread_rows(parts, (1 << shard_bits) + 1, np.int64)
        # per part, the table that finds repeats within the part (bucket_part); pages untouched
        # beyond what the largest part uses are never allocated
        rows = tiers.buffers.valid.shape[0]
        self._seen = np.zeros((parts, seen_table_size(rows)), np.int64)
        self._generation = 0
        self._dense_positions = np.empty(0, np.int64)
        self._repeat_tables = RepeatTables(threads, rows, tiers.kernels.nwords,
                                           tally_width(len(model.actions), model.kernel_property_count))
        self._fired_parts = per_thread_rows(parts, len(model.actions), np.int64)
        self._new_parts = per_thread_rows(parts, len(model.actions), np.int64)

    def distinct_successors_only(self) -> bool:
        """Whether chunks take the compiled kernels' distinct-successor path: the successors that
        meet the visited set are all the engine needs, unless every transition is kept (the state
        graph) or a state or action constraint leaves some successors out (``every_row_needed``).
        Under --symmetry each part's distinct successors are canonicalised, then the repeats
        that makes are left out, before they meet the visited set."""
        return self.tiers.kernels.compiled and self.graph_builder is None and not every_row_needed(self.model)

    def _positions(self, n: int) -> np.ndarray:
        """0, 1, ..., n - 1: the row numbers of the dense arrays, for the canonicaliser."""
        if self._dense_positions.shape[0] < n:
            self._dense_positions = np.arange(n, dtype=np.int64)
        return self._dense_positions

    def canonicalize(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int) -> None:
        """Replace the given rows by their canonical forms (--symmetry): compiled (a kernel compiled
        once per installation) unless the first tier is the Python one."""
        kernels = self.tiers.kernels
        if kernels.compiled or isinstance(kernels, BytecodeKernels):
            self.canon.canonicalize(words, hashes, rows, nrows)
        else:
            self.canon.canonicalize_interpreted(words, hashes, rows, nrows)

    def successors(self, level: np.ndarray, lo: int, hi: int, first_index: int,
                   found_here: Optional[dict[str, int]] = None) -> list[tuple[int, int]]:
        """Expand ``level[lo:hi]`` and meet the visited set (or the graph builder): afterwards
        ``buffers.valid`` holds the rows computed, in candidate order, and ``buffers.new_mark[p]``
        says whether row ``valid[p]`` is the first occurrence of a state not seen before. Returns
        each part's (start, count) in ``buffers.valid``; the parts are contiguous, so the rows
        are ``valid[:sum of counts]``.

        Per part, on its thread, right after its expansion: its valid rows, their canonical forms
        (--symmetry, compiled or bytecode tier; the Python twin runs once every part is done),
        then (unless they go to the graph builder, or a constraint must see them first) its rows
        for the visited set copied to dense arrays and bucketed by shard, self-loops and repeats
        within the part left out (``kernels/successor_rows.py``).

        A state with no successor but itself is a deadlock when the model checks for it, and
        successors outside a state or action constraint (TLC: counted as generated and checked
        against the invariants, but not kept) are left out of the visited set and the graph:
        violations found so go to ``found_here``."""
        buf, stride, canon, graph_builder = self.tiers.buffers, self.stride, self.canon, self.graph_builder
        kernels = self.tiers.kernels
        filtered = self.model.constrained
        deadlock = self.model.check_deadlock and DEADLOCK not in self.violations.found
        found_here = {} if found_here is None else found_here
        parts = kernels.parts(hi - lo)
        starts = [a * stride for a, _ in parts]
        counts = [0] * len(parts)
        offsets = self._offsets[: len(parts)]
        shard_bits = self.shard_bits
        self._generation += 1
        generation = self._generation

        def bucket(j: int) -> None:
            bucket_part(buf.words, buf.hashes, buf.valid, starts[j], counts[j], level, lo, stride, shard_bits,
                        buf.dense_words, buf.dense_hashes, buf.new_mark, buf.probe, buf.order, offsets[j],
                        self._seen[j], generation)

        stuck = [-1] * len(parts)
        # the kernel canonicalises each part on its thread; the Python twin (the interpreted
        # tier) once every part is done
        canon_in_part = canon is not None and (kernels.compiled or isinstance(kernels, BytecodeKernels))
        if canon_in_part:
            canon.reserve(len(parts))

        def after_part(j: int, a: int, b: int) -> None:
            counts[j] = valid_rows_part(buf.labels, starts[j], b * stride, NO_LABEL, buf.valid)
            if deadlock:  # on the successors as computed, before any is canonicalised
                stuck[j] = first_stuck(buf.words, buf.labels, level, lo, a, b, stride, NO_LABEL)
            if canon_in_part:
                canon.canonicalize_part(j, buf.words, buf.hashes, buf.valid, starts[j], starts[j] + counts[j])
            if (canon is None or canon_in_part) and graph_builder is None and not filtered:
                bucket(j)

        kernels.successors(level, lo, hi, buf, after_part)
        if canon is not None and not canon_in_part:
            for j in range(len(parts)):
                canon.canonicalize_interpreted(buf.words, buf.hashes, buf.valid[starts[j]:], counts[j])
        stuck_at = [i for i in stuck if i >= 0]
        if stuck_at:
            i = min(stuck_at)
            self.violations.note(DEADLOCK, DEADLOCK, first_index + i, -1)
            found_here[DEADLOCK] = i * stride + stride - 1  # after every successor of the state
        outside = np.empty(0, np.int64)
        if filtered:
            rows = np.concatenate([buf.valid[start: start + count] for start, count in zip(starts, counts)])
            outside = self._leave_outside(level, lo, first_index, rows, found_here)
        if (filtered or (canon is not None and not canon_in_part)) and graph_builder is None:
            run_taking(lambda j, _: bucket(j), len(parts))
        if graph_builder is None:
            used = max(start + count for start, count in zip(starts, counts))  # positions in use
            self.visited.insert_bucketed(buf.dense_words[:used], buf.dense_hashes[:used], buf.order, offsets,
                                         buf.new_mark)
        spans = close_gaps((buf.valid, buf.new_mark), starts, counts)
        nrows = sum(counts)
        if graph_builder is not None:
            inside = buf.valid[:nrows]
            if outside.size:  # the graph is the constrained one: no transition leaves it
                inside = np.ascontiguousarray(inside[~np.isin(inside, outside)])
                graph_builder.add_leaving(buf.words, outside, level, lo, first_index, stride, buf.labels)  # fairness
            graph_builder.add_chunk(buf.words, buf.hashes, inside, inside.shape[0], buf.is_new, first_index, hi - lo,
                                    stride, buf.labels)
            buf.is_new[outside] = 0
            np.take(buf.is_new, buf.valid[:nrows], out=buf.new_mark[:nrows])
        return spans

    def _leave_outside(self, level: np.ndarray, lo: int, first_index: int, rows: np.ndarray,
                       found_here: dict[str, int]) -> np.ndarray:
        """The candidate rows (of ``rows``, increasing) whose successor breaks a state constraint
        or whose transition breaks an action constraint. Each is checked against the invariants
        (the first violating row of each goes to ``found_here``) and, unless the graph is
        built, turned into a self-loop (its source's words), which nothing counts as new and
        the visited set never meets. Returns them."""
        buf, model, stride = self.tiers.buffers, self.model, self.stride
        masks = np.zeros(rows.shape[0], np.uint64)
        if model.constraints or model.invariants:
            try:
                masks = self.tiers.kernels.violations(np.ascontiguousarray(buf.words[rows]))
            except SpecRaised as e:  # on the successor of row rows[e.at]; the run may redo the chunk
                r = None if e.at is None else int(rows[e.at])
                raise self.violations.placed(e, None if r is None else first_index + r // stride,
                                             -1 if r is None else int(buf.labels[r])) from None
        props = buf.props[rows] if model.action_constraints else None  # buf.props: a placeholder without
        where = np.flatnonzero(outside_constraints(model, masks, props))
        outside = rows[where]
        found_here.update(self.violations.outside_constraints(
            masks[where], outside, lambda r: (first_index + r // stride, int(buf.labels[r]))))
        if self.graph_builder is None and outside.size:
            buf.words[outside] = level[lo + outside // stride]
        return outside

    def collect_new(self, spans: list[tuple[int, int]], first_index: int) -> int:
        """The new states of a chunk whose rows met the visited set (``successors``): their rows,
        parents and labels into ``buffers.new_rows``, ``new_parent``, ``new_label`` (in candidate
        order); coverage counted. Returns how many."""
        buf, stride = self.tiers.buffers, self.stride
        found = [0] * len(spans)
        fired, new = self._fired_parts, self._new_parts

        def part(j: int, _: int) -> None:
            start, count = spans[j]
            found[j] = collect_part(buf.valid, start, count, stride, buf.new_mark, buf.labels, self.label_action,
                                    first_index, fired[j], new[j], buf.new_rows, buf.new_parent, buf.new_label)

        run_taking(part, len(spans))
        close_gaps((buf.new_rows, buf.new_parent, buf.new_label), [start for start, _ in spans], found)
        if len(spans):
            self.fired += fired[: len(spans)].sum(axis=0)
            self.new_per_action += new[: len(spans)].sum(axis=0)
            fired[: len(spans)] = 0
            new[: len(spans)] = 0
        return sum(found)

    def distinct_chunk(self, level: np.ndarray, lo: int, hi: int, first_index: int,
                       found_here: dict[str, int]) -> tuple[int, int, np.ndarray]:
        """Expand ``level[lo:hi]`` keeping only each part's distinct successors (no self-loop or
        repeat is ever written out; under --symmetry the part's thread then canonicalises them and
        leaves out the repeats that makes, keeping each state's smallest candidate row, as the
        candidate-row path would), meet the visited set, and collect the new states into
        ``buffers.new_rows``, ``new_parent`` and ``new_label`` in candidate order, as
        ``successors`` and ``collect_new`` do for every row. Transition properties violated here
        go to ``found_here``. Returns (transitions, new states, their words)."""
        buf, stride, shard_bits = self.tiers.buffers, self.stride, self.shard_bits
        kernels = self.tiers.kernels
        parts = kernels.parts(hi - lo)
        starts = [kernels.dense_start(j, buf) for j in range(len(parts))]  # positions in the dense arrays
        offsets = self._offsets[: len(parts)]
        tables = self._repeat_tables
        # the deadlock check: asked to (mark_moves), the kernels set the label of a state's first
        # row to 0 once it has a successor other than itself (codegen._placed_successor_lines)
        deadlock = self.model.check_deadlock and DEADLOCK not in self.violations.found
        if deadlock:
            buf.labels[: (hi - lo) * stride: stride] = NO_LABEL

        canon = self.canon
        ends = [0] * len(parts)
        if canon is not None:
            canon.reserve(len(parts))
            positions = self._positions(buf.dense_words.shape[0])
            self._generation += 1
            generation = self._generation

        def bucket(j: int, a: int, b: int, end: int) -> None:
            if canon is not None:  # the part's distinct successors, canonicalised, may repeat
                canon.canonicalize_part(j, buf.dense_words, buf.dense_hashes, positions, starts[j], end)
                end = keep_first_dense(buf.dense_words, buf.dense_hashes, buf.dense_rows, starts[j], end,
                                       self._seen[j], generation)
            ends[j] = end
            bucket_dense_part(buf.dense_hashes, starts[j], end, shard_bits, buf.new_mark, buf.order, offsets[j])

        kernels.distinct_successors(level, lo, hi, buf, tables, bucket, mark_moves=deadlock)
        if deadlock:
            stuck = np.flatnonzero(buf.labels[: (hi - lo) * stride: stride] == NO_LABEL)
            if stuck.size:
                i = int(stuck[0])
                self.violations.note(DEADLOCK, DEADLOCK, first_index + i, -1)
                found_here[DEADLOCK] = i * stride + stride - 1  # after every successor of the state
        used = max(ends)
        self.visited.insert_bucketed(buf.dense_words[:used], buf.dense_hashes[:used], buf.order, offsets,
                                     buf.new_mark)
        tally = tables.tally[: len(parts)]
        fired = tally[:, TALLY_FIRED: TALLY_FIRED + len(self.model.actions)].sum(axis=0)
        self.fired += fired
        if self.model.properties:
            firsts = tally[:, TALLY_FIRED + len(self.model.actions):].min(axis=0)
            for k, prop in enumerate(self.model.properties):
                r = int(firsts[k])
                if r != NO_ROW and prop.name not in self.violations.found:
                    self.violations.note(prop.name, "property", first_index + r // stride, r % stride)
                    found_here[prop.name] = r
        found = [0] * len(parts)
        new = self._new_parts

        def collect(j: int, _: int) -> None:
            a, b = parts[j]
            row_bits = ((b - a) * stride).bit_length()  # the part's rows, from its first
            found[j] = collect_dense_part(buf.dense_rows, starts[j], ends[j], a * stride, row_bits, buf.new_mark,
                                          stride, self.label_action, first_index, new[j], buf.probe, buf.order,
                                          buf.new_rows, buf.new_parent, buf.new_label, buf.new_pos)

        run_taking(collect, len(parts))
        close_gaps((buf.new_rows, buf.new_parent, buf.new_label, buf.new_pos), starts, found)
        self.new_per_action += new[: len(parts)].sum(axis=0)
        new[: len(parts)] = 0
        n = sum(found)
        return int(fired.sum()), n, buf.dense_words[buf.new_pos[:n]]
