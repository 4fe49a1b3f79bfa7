"""Symmetry reduction (``--symmetry``): states are replaced by a canonical member of their orbit
under the spec's declared permutations before they enter the visited set.

A spec declares its symmetry (``Spec.symmetry()``): one set of interchangeable values, or several
(TLC's ``Permutations(A) \\cup Permutations(V)``), each naming its values and how each field
moves when they are permuted. The group is the product of the sets' permutation groups: a state's
orbit is everything reached by permuting every set at once. ``Canonicaliser`` checks the
declaration against the fields' own metadata, turns it into tables (for every permutation: which
element goes where, how values map) and canonicalises states with them: in plain Python
(``canonical_flat``, the twin the tests compare the kernel with, brute force over every
permutation of the group: n0! x n1! x ...) and with the compiled kernel
``kernels.canonical.canonicalize_rows`` over a successor buffer, which finds the same state while
trying far fewer permutations on far fewer elements (``KernelTables``). The canonical form is the
lexicographically smallest flat state of the orbit.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, Optional, Sequence

import numpy as np

from kraftcheck.checker.errors import SpecError, UsageError
from kraftcheck.checker.kernels.canonical import PLACE_BITS, PLACE_WORD, canonicalize_rows
from kraftcheck.checker.kernels.hashing import fingerprint_reference
from kraftcheck.checker.kernels.threads import run_parts, split, thread_count
from kraftcheck.checker.layout import Layout
from kraftcheck.checker.model import spec_call
from kraftcheck.checker.spec import Permuted, Spec, Symmetry

MAX_PERMUTATIONS = 5040  # brute force: 7!, one set of 7 values or sets whose factorials multiply to at most this
# rows remembered with their canonical forms, per worker thread (a successor is often met again soon)
MEMO_SLOTS = 1 << 12
MEMBER_TABLE, SUBSET_TABLE = 0, 1  # set s's value maps are tables 2s (members) and 2s + 1 (subsets)


def as_symmetry_sets(sym: Symmetry | Sequence[Symmetry], owner: str = "the spec") -> tuple[Symmetry, ...]:
    """A declaration as a tuple of symmetry sets: one ``Symmetry``, or several (TLC's
    ``Permutations(A) \\cup Permutations(V)``), whose permutations combine into their product group."""
    sets = (sym,) if isinstance(sym, Symmetry) else tuple(sym) if isinstance(sym, (list, tuple)) else None
    if not sets or not all(isinstance(s, Symmetry) for s in sets):
        raise SpecError(f"{owner}'s symmetry() must return a Symmetry or a non-empty list of them, not {sym!r}")
    return sets


def declared_symmetry(spec: Spec) -> tuple[Symmetry, ...]:
    """The spec's symmetry sets, or a UsageError saying it has none (a spec may refuse with its own).
    What its ``symmetry()`` raises is said as for the spec's other declaring methods, a refused
    declaration with the spec's line (``model.spec_call``)."""
    sym = spec_call(spec, "symmetry")
    if sym is None:
        raise UsageError(f"spec {spec.name} declares no symmetry (Spec.symmetry), so --symmetry cannot be used")
    return as_symmetry_sets(sym, f"spec {spec.name}")


def check_declaration(layout: Layout, sym: Symmetry | Sequence[Symmetry]) -> list[dict[str, Permuted]]:
    """Every declared field exists and fits its role, and every field whose metadata speaks of a
    set's values (indexed by them, a set of them, an enum of them) is declared accordingly; across
    sets, no value belongs to two, no axis moves with two and no field holds values of two.
    Returns, per symmetry set, field name -> declaration."""
    sets = as_symmetry_sets(sym)
    sizes = [s.size for s in sets]
    if any(n < 1 for n in sizes) or math.prod(math.factorial(n) for n in sizes) > MAX_PERMUTATIONS:
        if len(sets) == 1:
            raise SpecError(f"symmetry over {sizes[0]} values: between 1 and 7 values are supported")
        raise SpecError(f"symmetry over sets of {' x '.join(map(str, sizes))} values: every set needs a value and "
                        f"the product of their factorials (the permutations tried) must be at most {MAX_PERMUTATIONS}")
    owner: dict[str, str] = {}
    for s in sets:
        if len(set(s.labels)) != len(s.labels):
            raise SpecError(f"symmetry: the set {', '.join(s.labels)} names a value twice")
        for label in s.labels:
            if label in owner:
                raise SpecError(f"symmetry: value {label} is in two symmetry sets ({owner[label]} and "
                                f"{', '.join(s.labels)}): each value belongs to one set")
            owner[label] = ", ".join(s.labels)
    declared = [check_one_set(layout, s) for s in sets]
    axes_of: dict[tuple[str, int], str] = {}
    values_of: dict[str, str] = {}
    for s, d in zip(sets, declared):
        for name, p in d.items():
            for a in p.axes:
                if (name, a) in axes_of:
                    raise SpecError(f"symmetry: axis {a} of field {name} moves with two sets ({axes_of[name, a]} "
                                    f"and {', '.join(s.labels)}): declare it in one")
                axes_of[name, a] = ", ".join(s.labels)
            if p.holds != "other":
                if name in values_of:
                    raise SpecError(f"symmetry: field {name} holds values of two sets ({values_of[name]} and "
                                    f"{', '.join(s.labels)}): declare what it holds in one")
                values_of[name] = ", ".join(s.labels)
    for d in declared:
        for name, p in d.items():
            if p.unless is not None and p.unless[0] in values_of:
                raise SpecError(f"symmetry: field {name}: its unless field {p.unless[0]} must not be permuted")
    return declared


def check_one_set(layout: Layout, sym: Symmetry) -> dict[str, Permuted]:
    """``check_declaration`` for one symmetry set: field name -> declaration."""
    n = sym.size
    fields = {f.name: f for f in layout.fields}
    declared: dict[str, Permuted] = {}
    for d in sym.fields:
        f = fields.get(d.field)
        if f is None:
            raise SpecError(f"symmetry names field {d.field!r}, which the spec does not have "
                            f"(fields: {', '.join(fields)})")
        if d.field in declared:
            raise SpecError(f"symmetry declares field {d.field} twice")
        for a in d.axes:
            if not 0 <= a < len(f.shape) or f.shape[a] != n:
                raise SpecError(f"symmetry: field {f.name} has no axis {a} of size {n}")
        if d.holds == "subset" and f.domain != 2 ** n:
            raise SpecError(f"symmetry: field {f.name} holds subsets of {n} values, so its domain must be {2 ** n}")
        if d.holds == "member" and f.const is None and f.domain < n:
            raise SpecError(f"symmetry: field {f.name} holds members of {n} values but its domain is {f.domain}")
        # the kernel maps and compares packed values, which are value - lo (layout.py)
        if d.holds != "other" and f.lo:
            raise SpecError(f"symmetry: field {f.name} holds a permuted {d.holds} but its values start at {f.lo}; "
                            "a field that names the values must start at 0")
        if d.unless is not None:
            g = fields.get(d.unless[0])
            if g is None or g.shape:
                raise SpecError(f"symmetry: field {f.name}: unless needs a scalar field, not {d.unless[0]!r}")
            if g.lo:
                raise SpecError(f"symmetry: field {f.name}: unless needs a field whose values start at 0, "
                                f"not {g.name} (from {g.lo})")
            if f.shape:
                raise SpecError(f"symmetry: field {f.name}: unless applies to scalar fields only")
        # a constant is the same in every state: it can name a value only as a filler that never moves
        always_filler = d.unless is not None and fields[d.unless[0]].const == d.unless[1]
        if f.const is not None and d.holds != "other" and not always_filler:
            raise SpecError(f"symmetry: field {f.name} is a constant and cannot hold a permuted {d.holds}")
        declared[d.field] = d
    for f in layout.fields:
        d = declared.get(f.name, Permuted(f.name))
        if f.index_labels == sym.labels and 0 not in d.axes:
            raise SpecError(f"symmetry: field {f.name} is indexed by {', '.join(sym.labels)} but not declared "
                            f"with axes=(0, ...)")
        if f.kind == "set" and f.labels == sym.labels and d.holds != "subset":
            raise SpecError(f"symmetry: field {f.name} is a set of {', '.join(sym.labels)} but not declared "
                            f"holds='subset'")
        if f.kind == "enum" and f.labels and f.labels[:n] == sym.labels and d.holds != "member":
            raise SpecError(f"symmetry: field {f.name} names {', '.join(sym.labels)} but is not declared "
                            f"holds='member'")
    return declared


class PermutationTables:
    """The product group of the symmetry sets' permutation groups, as tables. Permutation p (the
    identity first) permutes every set at once: ``perms[p]`` is set 0's permutation of 0..n0-1,
    then set 1's, and so on. ``src[p, j]`` is the flat element that p moves to element j;
    ``value_table[j]`` says how element j's value maps (-1: it does not; else ``value_map[p,
    value_table[j], v]``, for set s table 2s the members, values past the set kept, and 2s + 1
    the subsets as bitmasks) unless it is a filler: element ``guard_elem[j]`` holds
    ``guard_value[j]``."""

    def __init__(self, layout: Layout, sym: Symmetry | Sequence[Symmetry]) -> None:
        sets = as_symmetry_sets(sym)
        declared = check_declaration(layout, sets)
        self.sizes = tuple(s.size for s in sets)
        per_set = [list(itertools.permutations(range(n))) for n in self.sizes]
        products = list(itertools.product(*per_set))  # identity x identity x ... first
        self.perms = np.array([sum(parts, ()) for parts in products], np.int64)
        nperms, size = len(products), layout.size
        self.src = np.empty((nperms, size), np.int64)
        self.value_table = np.full(size, -1, np.int64)
        self.guard_elem = np.full(size, -1, np.int64)
        self.guard_value = np.zeros(size, np.int64)
        for f in layout.fields:
            start = layout.field_slices[f.name].start
            moves = [(k, d[f.name]) for k, d in enumerate(declared) if f.name in d]
            for k, d in moves:
                if d.holds != "other":
                    self.value_table[start:start + f.size] = 2 * k + (SUBSET_TABLE if d.holds == "subset"
                                                                      else MEMBER_TABLE)
                    if d.unless is not None:
                        self.guard_elem[start] = layout.field_slices[d.unless[0]].start
                        self.guard_value[start] = d.unless[1]
            for p, parts in enumerate(products):
                inverses = [np.argsort(perm) for perm in parts]
                for offset, index in enumerate(np.ndindex(*f.shape) if f.shape else [()]):
                    source = list(index)
                    for k, d in moves:
                        for a in d.axes:
                            source[a] = int(inverses[k][index[a]])  # element i of the image is element p^-1(i)
                    self.src[p, start + offset] = start + (int(np.ravel_multi_index(source, f.shape))
                                                           if f.shape else 0)
        width = max(1 << n for n in self.sizes)
        self.value_map = np.empty((nperms, 2 * len(sets), width), np.int64)
        for p, parts in enumerate(products):
            for k, perm in enumerate(parts):
                n = self.sizes[k]
                self.value_map[p, 2 * k + MEMBER_TABLE] = [perm[v] if v < n else v for v in range(width)]
                self.value_map[p, 2 * k + SUBSET_TABLE] = [
                    sum(1 << perm[i] for i in range(n) if m >> i & 1) if m < 1 << n else m for m in range(width)]

    def image(self, flat: tuple[int, ...], p: int) -> tuple[int, ...]:
        """The state that permutation p maps ``flat`` to (plain Python)."""
        out = []
        width = self.value_map.shape[2]
        for j in range(len(flat)):
            v = flat[self.src[p, j]]
            t = self.value_table[j]
            g = self.guard_elem[j]
            if t >= 0 and not (g >= 0 and flat[g] == self.guard_value[j]) and v < width:
                v = int(self.value_map[p, t, v])
            out.append(int(v))
        return tuple(out)


class KernelTables:
    """``PermutationTables`` as ``kernels.canonical.canonicalize_rows`` reads them: per compared
    element (the ``varying`` ones, in flat order), where each permutation's image takes it from in
    the packed words, how its value maps and under which guard; the leading compared elements
    that stay in place (``prefix``), with the permutations ranked by the image each gives each
    value, as bit masks."""

    def __init__(self, layout: Layout, tables: PermutationTables, varying: np.ndarray) -> None:
        elements = layout.elements

        def place(j: int) -> int:
            e = elements[j]
            return (e.shift | e.word << PLACE_WORD | e.bits << PLACE_BITS) if e.bits else 0

        nperms = tables.src.shape[0]
        self.source = np.array([place(s) for j in varying for s in tables.src[:, j]], np.int64)
        self.table = tables.value_table[varying].copy()
        self.guard = np.array([place(g) if g >= 0 else -1 for g in tables.guard_elem[varying]], np.int64)
        self.guard_value = tables.guard_value[varying].copy()
        self.value_map = tables.value_map
        self.dest = np.array([place(j) for j in varying], np.int64)
        self.keep = np.full(layout.nwords, (1 << 64) - 1, np.uint64)
        for j in varying:
            e = elements[j]
            self.keep[e.word] &= np.uint64(((1 << 64) - 1) ^ (((1 << e.bits) - 1) << e.shift))
        stays = (tables.src[:, varying] == varying).all(axis=0) & (self.table >= 0)
        self.prefix = int(np.argmin(stays)) if not stays.all() else len(varying)
        nmask = (nperms + 63) // 64
        ntables, width = self.value_map.shape[1:]
        used = sorted(set(self.table[:self.prefix].tolist()))  # only the prefix's tables are read
        ranked = {t: [np.unique(self.value_map[:, t, v]) for v in range(width)] for t in used}
        self.nlevels = np.zeros((ntables, width), np.int64)
        for t in used:
            self.nlevels[t] = [len(images) for images in ranked[t]]
        self.levels = np.zeros((ntables, width, max(1, int(self.nlevels.max())), nmask), np.uint64)
        bit = np.left_shift(np.uint64(1), (np.arange(nperms) % 64).astype(np.uint64))
        word = np.arange(nperms) // 64
        for t in used:
            for v in range(width):
                for level, image in enumerate(ranked[t][v]):
                    hit = self.value_map[:, t, v] == image
                    np.bitwise_or.at(self.levels[t, v, level], word[hit], bit[hit])
        self.everyone = np.zeros(nmask, np.uint64)
        np.bitwise_or.at(self.everyone, word, bit)


class Canonicaliser:
    """Canonical forms of a model's states under its spec's symmetry; see the module docstring."""

    def __init__(self, layout: Layout, sym: Symmetry | Sequence[Symmetry]) -> None:
        self.layout = layout
        self.symmetry = as_symmetry_sets(sym)
        self.tables = PermutationTables(layout, sym)
        self.size = layout.size
        constant = np.array([e.field.const is not None for e in layout.elements], bool)
        moved = (self.tables.src != np.arange(self.size)).any(axis=0) | (self.tables.value_table >= 0)
        # the elements some permutation may change, in flat order: the others are equal in every
        # image, so comparing images on these alone orders them as on all elements
        self.varying = np.flatnonzero(moved & ~constant).astype(np.int64)
        self.kernel = KernelTables(layout, self.tables, self.varying)
        self.threads = thread_count()
        # scratch and memo per part: part j of a call uses set j, so parts may run side by side
        self._scratch: list[tuple[np.ndarray, ...]] = []
        self._memo: list[tuple[np.ndarray, ...]] = []
        self.reserve(self.threads)

    def reserve(self, parts: int) -> None:
        """Scratch and memo for ``parts`` parts at once (``canonicalize_part`` with j < parts).
        Call it before the parts start: it is not safe while they run."""
        nmask, ncompared, nwords = self.kernel.everyone.shape[0], self.varying.shape[0], self.layout.nwords
        while len(self._scratch) < parts:
            self._scratch.append((np.zeros(nmask, np.uint64), np.zeros(ncompared, np.int64),
                                  np.zeros(ncompared + 1, np.int64), np.zeros(nwords, np.uint64)))
            self._memo.append((np.zeros(MEMO_SLOTS, np.uint64), np.zeros(MEMO_SLOTS, np.bool_),
                               np.zeros((MEMO_SLOTS, 2 * nwords), np.uint64), np.zeros(MEMO_SLOTS, np.uint64)))

    @property
    def permutations(self) -> int:
        return self.tables.perms.shape[0]

    # -- plain Python: the twin of the kernel
    def canonical_flat(self, flat: tuple[int, ...]) -> tuple[int, ...]:
        """The lexicographically smallest image of ``flat`` under every permutation of the group."""
        return min(self.tables.image(tuple(flat), p) for p in range(self.permutations))

    def canonicalize_interpreted(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int) -> None:
        """``canonicalize`` in plain Python (the engine's interpreted tier)."""
        for r in rows[:nrows]:
            packed = self.layout.pack(self.canonical_flat(self.layout.unpack(words[r].tolist())))
            words[r] = packed
            hashes[r] = fingerprint_reference(packed)

    # -- compiled
    def canonicalize(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int) -> None:
        """Replace ``words[rows[k]]`` (k < nrows) by their canonical forms and ``hashes`` by their
        fingerprints, in place, with the compiled kernel on the worker threads."""
        if words.ndim != 2 or words.dtype != np.uint64 or words.shape[1] != self.layout.nwords:
            raise TypeError(f"packed states must be a 2-D uint64 array with {self.layout.nwords} words per row")
        if hashes.dtype != np.uint64 or rows.dtype != np.int64 or not 0 <= nrows <= rows.shape[0]:
            raise TypeError("canonicalize(): hashes must be uint64, rows int64 with at least nrows entries")
        if nrows and (rows[:nrows].min() < 0 or rows[:nrows].max() >= min(words.shape[0], hashes.shape[0])):
            raise IndexError("canonicalize(): a row number is outside the buffer")
        if nrows == 0:
            return
        parts = split(0, nrows, self.threads if nrows >= 1024 else 1)
        self.reserve(len(parts))
        run_parts(lambda j: self.canonicalize_part(j, words, hashes, rows, *parts[j]), len(parts))

    def canonicalize_part(self, j: int, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, lo: int,
                          hi: int) -> None:
        """Replace ``words[rows[k]]`` (lo <= k < hi) by their canonical forms and ``hashes`` by their
        fingerprints, in place, on the calling thread, with part j's scratch and memo (``reserve``):
        a pass the engine runs on each part's own thread right after it is expanded. The arguments
        are the caller's to get right (``canonicalize`` checks them)."""
        t = self.kernel
        canonicalize_rows(words, hashes, rows, lo, hi, t.source, t.table, t.guard, t.guard_value, t.value_map,
                          t.dest, t.keep, t.prefix, t.levels, t.nlevels, t.everyone, *self._scratch[j],
                          *self._memo[j])

    def canonical_words(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Canonical copies of a batch of packed states and their fingerprints (compiled)."""
        out = np.ascontiguousarray(words).copy()
        hashes = np.empty(out.shape[0], np.uint64)
        self.canonicalize(out, hashes, np.arange(out.shape[0], dtype=np.int64), out.shape[0])
        return out, hashes


def canonicaliser_for(model) -> Canonicaliser:
    """The model's canonicaliser (built once per model), or the spec's refusal."""
    cached: Optional[Canonicaliser] = getattr(model, "_canonicaliser", None)
    if cached is None:
        cached = Canonicaliser(model.layout, declared_symmetry(model.spec))
        model._canonicaliser = cached
    return cached


def canonical_step(step: Callable, canonical: Callable) -> Callable:
    """``step`` followed by ``canonical`` (None stays None): a step of the quotient model."""
    def quotient_step(flat, label):
        succ = step(flat, label)
        return None if succ is None else canonical(succ)
    return quotient_step

