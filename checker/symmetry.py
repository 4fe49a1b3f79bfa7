"""Symmetry reduction (``--symmetry``): states are replaced by a canonical member of their orbit
under the spec's declared permutations before they enter the visited set.

A spec declares its symmetry (``Spec.symmetry()``: the permuted values and how each field moves);
``Canonicaliser`` checks the declaration against the fields' own metadata, turns it into tables
(for every permutation: which element goes where, how values map) and canonicalises states with
them: in plain Python (``canonical_flat``, the twin the tests compare the kernel with) and with the
compiled kernel ``kernels.canonical.canonicalize_rows`` over a successor buffer. The canonical form
is the lexicographically smallest flat state of the orbit, brute force over all n! permutations.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, Optional

import numpy as np

from kraftcheck.checker.errors import SpecError, UsageError
from kraftcheck.checker.kernels.canonical import MEMBER, OTHER, SUBSET, canonicalize_rows
from kraftcheck.checker.kernels.hashing import fingerprint_reference
from kraftcheck.checker.kernels.threads import run_parts, split, thread_count
from kraftcheck.checker.layout import Layout
from kraftcheck.checker.spec import Permuted, Spec, Symmetry

MAX_PERMUTATIONS = 5040  # brute force: 7 values at most
KINDS = {"other": OTHER, "member": MEMBER, "subset": SUBSET}


def declared_symmetry(spec: Spec) -> Symmetry:
    """The spec's symmetry, or a UsageError saying it has none (a spec may refuse with its own)."""
    sym = spec.symmetry()
    if sym is None:
        raise UsageError(f"spec {spec.name} declares no symmetry (Spec.symmetry), so --symmetry cannot be used")
    return sym


def check_declaration(layout: Layout, sym: Symmetry) -> dict[str, Permuted]:
    """Every declared field exists and fits its role, and every field whose metadata speaks of the
    permuted values (indexed by them, a set of them, an enum of them) is declared accordingly.
    Returns field name -> declaration."""
    n = sym.size
    if n < 1 or math.factorial(n) > MAX_PERMUTATIONS:
        raise SpecError(f"symmetry over {n} values: between 1 and 7 values are supported")
    fields = {f.name: f for f in layout.fields}
    declared: dict[str, Permuted] = {}
    for d in sym.fields:
        f = fields.get(d.field)
        if f is None:
            raise SpecError(f"symmetry names field {d.field!r}, which the spec does not have")
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
    for name, d in declared.items():
        if d.unless is not None and d.unless[0] in declared and declared[d.unless[0]].holds != "other":
            raise SpecError(f"symmetry: field {name}: its unless field {d.unless[0]} must not be permuted")
    return declared


class PermutationTables:
    """For every permutation p of 0..n-1 (the identity first): ``src[p, j]``, the flat element that
    p moves to element j; per element its ``kind`` and guard; ``member_map[p, v] = p(v)`` and
    ``subset_map[p, m]``, the image of bitmask m."""

    def __init__(self, layout: Layout, sym: Symmetry) -> None:
        declared = check_declaration(layout, sym)
        n = sym.size
        self.n = n
        self.perms = np.array(list(itertools.permutations(range(n))), np.int64)
        nperms, size = self.perms.shape[0], layout.size
        self.src = np.empty((nperms, size), np.int64)
        self.kind = np.zeros(size, np.int64)
        self.guard_elem = np.full(size, -1, np.int64)
        self.guard_value = np.zeros(size, np.int64)
        for f in layout.fields:
            d = declared.get(f.name, Permuted(f.name))
            start = layout.field_slices[f.name].start
            self.kind[start:start + f.size] = KINDS[d.holds]
            if d.unless is not None:
                self.guard_elem[start] = layout.field_slices[d.unless[0]].start
                self.guard_value[start] = d.unless[1]
            for p, perm in enumerate(self.perms):
                inverse = np.argsort(perm)
                for offset, index in enumerate(np.ndindex(*f.shape) if f.shape else [()]):
                    source = list(index)
                    for a in d.axes:
                        source[a] = int(inverse[index[a]])  # element i of the image is element p^-1(i)
                    self.src[p, start + offset] = start + (int(np.ravel_multi_index(source, f.shape))
                                                           if f.shape else 0)
        self.member_map = self.perms.copy()
        self.subset_map = np.zeros((nperms, 1 << n), np.int64)
        for p, perm in enumerate(self.perms):
            for m in range(1 << n):
                self.subset_map[p, m] = sum(1 << int(perm[i]) for i in range(n) if m >> i & 1)

    def image(self, flat: tuple[int, ...], p: int) -> tuple[int, ...]:
        """The state that permutation p maps ``flat`` to (plain Python)."""
        out = []
        for j in range(len(flat)):
            v = flat[self.src[p, j]]
            kd = self.kind[j]
            g = self.guard_elem[j]
            if kd != OTHER and not (g >= 0 and flat[g] == self.guard_value[j]):
                if kd == MEMBER:
                    v = int(self.member_map[p, v]) if v < self.n else v
                else:
                    v = int(self.subset_map[p, v])
            out.append(int(v))
        return tuple(out)


class Canonicaliser:
    """Canonical forms of a model's states under its spec's symmetry; see the module docstring."""

    def __init__(self, layout: Layout, sym: Symmetry) -> None:
        self.layout = layout
        self.symmetry = sym
        self.tables = PermutationTables(layout, sym)
        self.size = layout.size
        self.elem_word = np.array([e.word for e in layout.elements], np.int64)
        self.elem_shift = np.array([e.shift for e in layout.elements], np.int64)
        self.elem_mask = np.array([(1 << e.bits) - 1 for e in layout.elements], np.int64)
        self.elem_const = np.array([e.field.const if e.field.const is not None else -1 for e in layout.elements],
                                   np.int64)
        moved = (self.tables.src != np.arange(self.size)).any(axis=0) | (self.tables.kind != OTHER)
        self.varying = np.flatnonzero(moved & (self.elem_const < 0)).astype(np.int64)
        self.threads = thread_count()
        self._scratch = [np.zeros((3, self.size), np.int64) for _ in range(self.threads)]

    @property
    def permutations(self) -> int:
        return self.tables.perms.shape[0]

    # -- plain Python: the twin of the kernel
    def canonical_flat(self, flat: tuple[int, ...]) -> tuple[int, ...]:
        """The lexicographically smallest image of ``flat`` under every permutation."""
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
        t = self.tables
        parts = split(0, nrows, self.threads if nrows >= 1024 else 1)

        def part(j: int) -> None:
            a, b = parts[j]
            scratch = self._scratch[j]
            canonicalize_rows(words, hashes, rows, a, b, self.elem_word, self.elem_shift, self.elem_mask,
                              self.elem_const, t.src, t.kind, t.guard_elem, t.guard_value, t.member_map,
                              t.subset_map, self.size, self.varying, scratch[0], scratch[1], scratch[2])

        run_parts(part, len(parts))

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

