"""The compiled kernels of one model behind validated batch entry points, and the buffers they
fill: what the engine's second tier runs (``InterpretedKernels`` is the first)."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from kraftcheck.checker.codegen import layout_values, load_kernels, model_sources, write_kernel_module
from kraftcheck.checker.compile import SCRATCH_BYTES, KernelShapes
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.layout import ELEMENT, SUCCESSOR_ELEMENT
from kraftcheck.checker.kernels.successor_rows import (NO_ROW, TALLY_FIRED, TALLY_LIMIT, TALLY_STOPPED,
                                                      gather_part, reseat, seen_table_size, tally_width)
from kraftcheck.checker.kernels.table_expand import UNEXPECTED_WRITE, TableExpansion
from kraftcheck.checker.explore.spec_raised import run_guarded
from kraftcheck.checker.kernels.threads import per_thread_rows, run_taking, split, thread_count
from kraftcheck.checker.model import Model


class ChunkBuffers:
    """Arrays for the successors of up to ``states`` states, allocated once and reused per chunk
    (fresh arrays per chunk left freed-but-retained memory behind and cost page faults)."""

    def __init__(self, states: int, nlabels: int, layout, with_props: bool) -> None:
        rows = max(1, states * nlabels)
        self.states = states
        # the chunk's states unpacked once (int32 rows, seen as records by the kernels), read by
        # every action kernel
        self.flat = np.zeros((max(1, states), layout.size), ELEMENT)
        for index, value in layout.consts:
            self.flat[:, index] = value
        self.words = np.empty((rows, layout.nwords), np.uint64)
        self.hashes = np.empty(rows, np.uint64)
        self.labels = np.empty(rows, np.uint16)
        self.props = np.zeros(rows if with_props else 1, np.uint64)
        self.valid = np.empty(rows, np.int64)
        self.is_new = np.zeros(rows, np.uint8)
        # what meets the visited set (successor_rows.bucket_part): the words and hashes of the
        # rows it reads and every valid row's new mark, at their positions in ``valid``, and the
        # positions it reads bucketed by shard
        self.dense_words = np.empty((rows, layout.nwords), np.uint64)
        self.dense_hashes = np.empty(rows, np.uint64)
        self.new_mark = np.zeros(rows, np.uint8)
        self.order = np.empty(rows, np.int64)
        self.probe = np.empty(rows, np.int64)
        # the distinct-successor path (Kernels.distinct_successors): each kept successor's
        # candidate row, at its position in the dense arrays; the new ones' positions
        self.dense_rows = np.empty(rows, np.int64)
        self.new_pos = np.empty(rows, np.int64)
        self.new_rows = np.empty(rows, np.int64)
        self.new_parent = np.empty(rows, np.uint32)
        self.new_label = np.empty(rows, np.uint16)


def _thread_rows(threads: int, size: int, element: type) -> list[np.ndarray]:
    """Two rows of ``size`` elements per thread, slices of one array spaced SCRATCH_BYTES apart."""
    stride = 2 + -(-SCRATCH_BYTES // (size * np.dtype(element).itemsize))
    rows = np.zeros((stride * threads, size), element)
    return [rows[stride * j: stride * j + 2] for j in range(threads)]


# A chunk is split in this many parts a thread, which the threads take one by one as they finish
# the last (``threads.run_taking``), so a thread that is slow to start its part (the pool's worker
# waking, another process on its core) leaves it to the one that is done. More parts a thread
# would balance finer, but each part catches only its own repeats: with 4, the default Kafka check
# sent 7% more successors to the visited set and took 8% longer on two idle cores
# (bench/RESULTS.md, "Where two threads' wall seconds go").
PARTS_PER_THREAD = 1


def most_parts(threads: int) -> int:
    """The most parts a chunk is split in with ``threads`` threads (one thread: one part, as many
    repeats caught within it as can be)."""
    return threads * PARTS_PER_THREAD if threads > 1 else 1


# A part's repeat table is sized for this load at the expected number of states, and grows when
# it would pass the maximum (linear probing stays short up to about 0.75).
REPEAT_TABLE_LOAD = 0.6
REPEAT_TABLE_MAX_LOAD = 0.75


class RepeatTables:
    """Per thread, the table that finds repeats among the successors of the part it expands
    (``successor_rows.keep_first_lines``), and per part of a chunk its tally. A part uses the
    first entries of its thread's table, enough for what it is likely to keep at a load of 0.6 (so
    they stay in the caches), and grows within a chunk when that was too little; the rest of its
    pages are never touched. Each part has a generation of its own, so the entries of the parts a
    thread expanded before count as empty."""

    def __init__(self, parts: int, rows: int, nwords: int, tally_width: int) -> None:
        # a part keeps at most a successor per candidate row: twice that many entries always do
        self.most = seen_table_size(rows)
        self.tables = [np.zeros((self.most, nwords + 1), np.uint64) for _ in range(parts)]
        self.tally = per_thread_rows(parts, tally_width, np.int64)
        self.generation = 0
        self.per_state = 1.0  # distinct successors a state kept in the last part

    def next_generation(self, count: int = 1) -> int:
        """The first of ``count`` new generations (one a part of a new chunk): the tables'
        entries of earlier ones count as empty."""
        self.generation += count
        return self.generation - count + 1

    def tally_parts(self, parts: int) -> None:
        """Room in ``tally`` for ``parts`` parts."""
        if self.tally.shape[0] < parts:
            self.tally = per_thread_rows(parts, self.tally.shape[1], np.int64)

    def size_for(self, states: int) -> int:
        """Entries of the table for a part of ``states`` states: a power of two, for a quarter
        more successors than the last part kept per state at a load of REPEAT_TABLE_LOAD."""
        return min(self.most, seen_table_size(int(states * self.per_state * 1.25 / (2 * REPEAT_TABLE_LOAD)) + 16))

    def limit(self, size: int) -> int:
        """How many states a table of ``size`` entries may hold before it grows. The largest never
        has to: it has twice as many entries as a part has candidate rows."""
        return size if size == self.most else int(size * REPEAT_TABLE_MAX_LOAD)

    def grow(self, slot: int, size: int, generation: int, out: "ChunkBuffers", first: int) -> int:
        """The table of thread ``slot`` (``size`` entries) is too small for its part's next state:
        move the part's entries to the dense arrays from position ``first``, and back into four
        times the entries (at most all)."""
        table = self.tables[slot]
        kept = gather_part(table, size, generation, out.dense_words, out.dense_hashes, out.dense_rows, first)
        bigger = min(self.most, 4 * size)
        reseat(table, size, bigger - 1, generation, out.dense_words, out.dense_hashes, out.dense_rows, first,
               first + kept)
        return bigger

    def observe(self, states: int, kept: int) -> None:
        """A part of ``states`` states kept ``kept`` successors: size the next tables for that
        (neighbouring chunks are alike; a part that needs more grows its table)."""
        if states:
            self.per_state = kept / states


class Kernels:
    """The compiled kernels of one model, with validated batch entry points.

    The breadth-first engine uses them chunk by chunk; a distributed engine can call the same
    ``successors`` and ``violations`` on any batch of packed states.
    """

    compiled = True

    def __init__(self, model: Model, module=None) -> None:
        self.model = model
        self.module = module if module is not None else load_kernels(model)
        # each action's kernel with the arguments that place it in this model (codegen); a large
        # layout's actions run as one (kernels.table_expand), every action on a batch of states
        self._expanders = list(zip(self.module.EXPANDERS, self.module.EXPANDER_ARGS))
        self._expansion = (TableExpansion(self.module.EXPANDERS, self.module.EXPANDER_ARGS)
                           if self.module.LAYOUT_TABLE and self.module.EXPANDERS else None)
        self.nwords = model.layout.nwords
        self.nlabels = len(model.labels)
        # the constants' values, or the whole layout table (codegen.layout_values): every kernel's cv
        self.const_values = layout_values(model.layout, self.module.LAYOUT_TABLE)
        self.threads = thread_count()
        self.most_parts = most_parts(self.threads)
        # Per thread two scratch rows for the action kernels (row 0 the state widened, row 1 the
        # successor) and one for the invariants (a state), all of int64 so that the spec computes on
        # int64 values as in Python, far enough apart that threads never write to the same cache
        # line (false sharing halved throughput).
        self._scratch = _thread_rows(self.threads, model.layout.size, SUCCESSOR_ELEMENT)
        self._state_scratch = _thread_rows(self.threads, model.layout.size, SUCCESSOR_ELEMENT)
        self.nactions = len(model.actions)
        self.tally_width = tally_width(self.nactions, model.kernel_property_count)

    def _parts(self, lo: int, hi: int) -> list[tuple[int, int]]:
        return split(lo, hi, self.most_parts if hi - lo >= 256 else 1)

    def parts(self, n: int) -> list[tuple[int, int]]:
        """How ``successors`` and ``distinct_successors`` split ``n`` states into parts (at most
        ``most_parts``), which the threads take one by one: (first, end) per part."""
        return self._parts(0, n)

    def _check_batch(self, words: np.ndarray) -> None:
        if words.ndim != 2 or words.shape[1] != self.nwords or words.dtype != np.uint64:
            raise TypeError(f"packed states must be a 2-D uint64 array with {self.nwords} words per row")

    def pack(self, flats: list[tuple[int, ...]]) -> np.ndarray:
        # rows as actions write them: a value outside its domain is refused as it is, not wrapped
        rows = np.array(flats, dtype=SUCCESSOR_ELEMENT).reshape(len(flats), self.model.layout.size)
        words = np.zeros((len(flats), self.nwords), np.uint64)
        bad = self.module.pack_rows(rows, words, self.const_values)
        if bad >= 0:
            self.model.layout.check_domains(flats[bad])
        return words

    def step(self, flat: tuple[int, ...], label: int) -> Optional[tuple[int, ...]]:
        """The successor of ``flat`` under ``label`` (None if disabled), by the compiled action."""
        return self.model.step(flat, label)

    def unpack(self, words: np.ndarray) -> list[tuple[int, ...]]:
        self._check_batch(words)
        rows = np.zeros((words.shape[0], self.model.layout.size), ELEMENT)
        self.module.unpack_rows(words, rows, self.const_values)
        return [tuple(int(x) for x in r) for r in rows]

    def buffers(self, states: int) -> "ChunkBuffers":
        """Buffers for chunks of up to ``states`` states (rounded up to a multiple of
        ``most_parts``, so that every part has a region of the dense arrays of its own:
        ``dense_start``)."""
        states = -(-states // self.most_parts) * self.most_parts
        return ChunkBuffers(states, self.nlabels, self.model.layout, bool(self.model.kernel_property_count))

    def dense_start(self, j: int, out: "ChunkBuffers") -> int:
        """Where part j's distinct successors start in ``out``'s dense arrays: the same place
        whatever the chunk's size, so that chunks of changing sizes touch no more pages than
        the largest part keeps (at ``a * nlabels``, the regions of chunks of many sizes left
        half the buffers resident). ``out`` must come from ``buffers`` (a multiple of
        ``most_parts`` in states): a chunk of at most ``out.states`` states split in parts has
        parts of at most ``out.states // most_parts`` states, hence as many rows of their own
        (a chunk too small to split is one part, at 0)."""
        return j * (out.states // self.most_parts) * self.nlabels

    def successors(self, words: np.ndarray, lo: int = 0, hi: Optional[int] = None,
                   out: Optional["ChunkBuffers"] = None,
                   after_part: Optional[Callable[[int, int, int], None]] = None) -> "ChunkBuffers":
        """Every successor of ``words[lo:hi]``, in ``out`` (allocated if not given).

        The successor of state lo + i under label k sits at row ``i * nlabels + k``, with its
        fingerprint, its label (``NO_LABEL`` where that action instance is disabled) and, if the
        model has transition properties, the mask of those it violates. ``after_part(j, a, b)``,
        if given, runs on the thread that expanded part j (states ``lo + a .. lo + b - 1``, the
        parts of ``parts(hi - lo)``) right after it, so a pass over the part's rows needs no
        second hand-off to the threads. Parts run side by side in no set order.
        """
        self._check_batch(words)
        hi = words.shape[0] if hi is None else hi
        if not 0 <= lo <= hi <= words.shape[0]:
            raise IndexError(f"successors(): bad range {lo}..{hi} of {words.shape[0]} states")
        n = hi - lo
        out = self.buffers(n) if out is None else out
        if out.states < n:
            raise ValueError(f"successors(): buffers hold {out.states} states, asked for {n}")
        parts = self._parts(0, n)
        errs = part_errors(len(parts), 2)
        tallies = per_thread_rows(len(parts), self.tally_width, np.int64)  # counted, not read
        unused = np.zeros((1, self.nwords + 1), np.uint64)

        def expand_part(j: int, slot: int) -> None:
            a, b = parts[j]
            scratch = self._scratch[slot]
            self.module.unpack_range(words, lo + a, lo + b, a, out.flat, self.const_values)
            err = errs[j]
            if self._expansion is not None:
                self._expansion(out.flat, a, b, out.words, out.hashes, out.labels, out.props, err, self.const_values,
                                False, words, lo, unused, 0, 0, tallies[j])
            for expand, (stride, base, fired_at, properties_at, select) in self._generated():
                expand(out.flat, a, b, scratch, out.words, out.hashes, out.labels, out.props, err,
                       self.const_values, False, words, lo, unused, 0, 0, tallies[j], stride, base, fired_at,
                       properties_at, select)
            if after_part is not None:
                after_part(j, a, b)

        run_guarded(self.model, words, lo, hi, False, lambda: run_taking(expand_part, len(parts), self.threads))
        self._raise_domain_error(words, lo, first_error(errs), out)
        return out

    def distinct_successors(self, words: np.ndarray, lo: int, hi: int, out: "ChunkBuffers",
                            tables: "RepeatTables", after_part: Callable[[int, int, int, int], None],
                            mark_moves: bool = False) -> list[int]:
        """The successors of ``words[lo:hi]`` that are neither self-loops nor repeats within a part
        (of ``parts(hi - lo)``), each once, with the smallest candidate row it has (the first
        occurrence in candidate order; the same rows the engine keeps from ``successors``).

        Part j (states ``lo + a .. lo + b - 1``) writes them from position ``dense_start(j, out)`` of
        ``out.dense_words``, ``out.dense_hashes`` and ``out.dense_rows``, in no particular order;
        its counts (transitions per action, first rows violating each transition property) are in
        ``tables.tally[j]``. ``after_part(j, a, b, end)`` runs on the part's thread once its
        kernels are done (``end``: the position after its last); parts run side by side in no set
        order. Returns each part's end.

        ``mark_moves`` (the deadlock check): the kernels set ``out.labels[i * nlabels]`` to 0 for
        each state i of the chunk with a successor other than itself, and leave it otherwise.
        """
        self._check_batch(words)
        if out.states % self.most_parts:
            raise ValueError(f"distinct_successors() needs buffers from Kernels.buffers (a multiple of "
                             f"{self.most_parts} states), got {out.states}")
        if not 0 <= lo <= hi <= words.shape[0] or out.states < hi - lo:
            raise IndexError(f"distinct_successors(): bad range {lo}..{hi} of {words.shape[0]} states "
                             f"for buffers of {out.states}")
        parts = self._parts(0, hi - lo)
        errs = part_errors(len(parts), 3)
        errs[:, 2] = 1 if mark_moves else 0  # read by the kernels on this path only (codegen._ring_setup_lines)
        first_generation = tables.next_generation(len(parts))
        tables.tally_parts(len(parts))
        ends = [0] * len(parts)

        def expand_part(j: int, slot: int) -> None:
            a, b = parts[j]
            scratch, tally, table, err = self._scratch[slot], tables.tally[j], tables.tables[slot], errs[j]
            generation = first_generation + j
            first = self.dense_start(j, out)
            tally[:] = 0
            tally[TALLY_FIRED + self.nactions:] = NO_ROW
            size = tables.size_for(b - a)
            tally[TALLY_LIMIT] = tables.limit(size)
            self.module.unpack_range(words, lo + a, lo + b, a, out.flat, self.const_values)
            calls = [] if self._expansion is None else [
                lambda start, size: self._expansion(out.flat, start, b, out.dense_words, out.dense_hashes, out.labels,
                                                    out.props, err, self.const_values, True, words, lo, table,
                                                    size - 1, generation, tally)]
            calls += [lambda start, size, expand=expand, args=args: expand(
                out.flat, start, b, scratch, out.dense_words, out.dense_hashes, out.labels, out.props, err,
                self.const_values, True, words, lo, table, size - 1, generation, tally, *args)
                for expand, args in self._generated()]
            for call in calls:
                start = a
                while True:
                    tally[TALLY_STOPPED] = -1
                    call(start, size)
                    if tally[TALLY_STOPPED] < 0:
                        break
                    start = int(tally[TALLY_STOPPED])
                    size = tables.grow(slot, size, generation, out, first)
                    tally[TALLY_LIMIT] = tables.limit(size)
            kept = gather_part(table, size, generation, out.dense_words, out.dense_hashes, out.dense_rows, first)
            tables.observe(b - a, kept)
            ends[j] = first + kept
            after_part(j, a, b, ends[j])

        run_guarded(self.model, words, lo, hi, False, lambda: run_taking(expand_part, len(parts), self.threads))
        self._raise_domain_error(words, lo, first_error(errs), out)
        return ends

    def _generated(self) -> list:
        """The actions whose expand kernels are generated whole (a small layout's: all of them),
        each with its place in the model."""
        return [] if self._expansion is not None else self._expanders

    def _raise_domain_error(self, words: np.ndarray, lo: int, err: np.ndarray, out: "ChunkBuffers") -> None:
        if err[0] >= 0 and err[1] <= UNEXPECTED_WRITE:
            e = UNEXPECTED_WRITE - int(err[1])
            layout = self.model.layout
            element = next((x for x in layout.elements if x.flat == e), None)
            name = f"element {e}" if element is None else layout.element_name(element)
            was = self.unpack(words[lo + err[0]: lo + err[0] + 1])[0][e]
            if was != out.flat[err[0], e]:  # the state as unpacked no longer is: the spec wrote s
                raise SpecError(
                    f"an action of spec {self.model.spec.name} wrote {name} of its source state s "
                    f"(from {was} to {int(out.flat[err[0], e])}): an action reads s and writes "
                    f"only t; fix the action that assigns to it")
            raise RuntimeError(
                f"an action of spec {self.model.spec.name} wrote {name} of the successor of chunk state "
                f"{int(err[0])} where the reading of its writes (checker/writes.py) did not expect it, so "
                f"its compiled successors lack that write; the run stops with no verdict (report this, "
                f"with the spec)")
        if err[0] >= 0:  # re-run that step in Python for a precise message
            state = self.unpack(words[lo + err[0]: lo + err[0] + 1])[0]
            self.model.step(state, int(err[1]))
            raise SpecError(f"action {self.model.labels[err[1]]} produced a value outside its field's domain")

    def violations(self, words: np.ndarray, lo: int = 0, hi: Optional[int] = None) -> np.ndarray:
        """Bitmask of violated invariants (bit k = ``model.invariants[k]``) for ``words[lo:hi]``,
        and after them of broken state constraints (bit ``len(model.invariants) + k`` =
        ``model.constraints[k]``)."""
        self._check_batch(words)
        hi = words.shape[0] if hi is None else hi
        out = np.zeros(hi - lo, np.uint64)
        if (self.model.invariants or self.model.constraints) and hi > lo:
            parts = self._parts(lo, hi)

            def check_part(j: int, slot: int) -> None:
                a, b = parts[j]
                self.module.check(words, a, b, a - lo, self._state_scratch[slot], out, self.const_values,
                                  self.module.INVARIANT_SELECT)

            run_guarded(self.model, words, lo, hi, True, lambda: run_taking(check_part, len(parts), self.threads))
        return out


def part_errors(parts: int, width: int) -> np.ndarray:
    """A row per part for what its kernels found wrong: ``[state, label]`` (and, on the distinct
    path, the deadlock flag the kernels read), -1 while nothing is. Parts run on different
    threads, and a state and a label written by two parts into one array could pair one part's
    state with the other's label, and the error message name an action at a state where it did
    nothing wrong."""
    return np.full((max(parts, 1), width), -1, np.int64)


def first_error(errs: np.ndarray) -> np.ndarray:
    """The row of the first part whose kernels found something wrong (else the first row)."""
    found = np.flatnonzero(errs[:, 0] >= 0)
    return errs[found[0] if found.size else 0]


def kernel_shapes(model: Model, table: bool | None = None) -> KernelShapes:
    """The argument types of ``model``'s kernels, with the kernel module written to the cache
    (``table``: which form, as ``codegen.write_kernel_module``'s)."""
    name, path = write_kernel_module(model, table)
    return KernelShapes(module_name=name, module_path=str(path), dtype_descr=model.layout.dtype.descr,
                        size=model.layout.size, nwords=model.layout.nwords, nlabels=len(model.labels),
                        nconsts=len(model.layout.consts), kernel_names=[a.name for a in model.actions],
                        sources=model_sources(model))
