"""Generate and load the compiled kernels specialised to one model.

For each model (spec + parameters + selected checks) the engine writes small Python modules into
the kernel cache: one for the layout (unrolled pack and unpack), one for the invariants, one per
action (a kernel that calls every instance of the action; for a large layout, only a ``fire``
function that one expand kernel shared by every spec calls: ``kernels.table_expand``), and one
that gathers them. They are
real files so numba's on-disk cache (``cache=True``) survives between runs; each is named by a
digest of its own text and of every source file it depends on, so editing a spec gives new
modules instead of a stale cache hit, and presets that share a layout and an action share its
compiled kernel. A module found in the cache is used only if its text is the one generated now
(a changed or truncated file is rewritten, and said so on stderr); a cache that cannot be written
is used only when it already holds everything the run needs (``kernel_cache_problem``).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Callable

import numba
import numpy as np

from kraftcheck.checker import __version__, numba_cache
from kraftcheck.checker import debug_kernels
from kraftcheck.checker.errors import SpecError, UsageError
from kraftcheck.checker.files import atomic_write
from kraftcheck.checker.imported_source import imported_digest
from kraftcheck.checker.kernels import layout_table
from kraftcheck.checker.kernels.successor_rows import TALLY_FIRED, keep_first_lines, self_loop_lines
from kraftcheck.checker.kernels.table_expand import UNEXPECTED_WRITE
from kraftcheck.checker.layout import Layout
from kraftcheck.checker.model import MAX_LABELS, Model, python_function
from kraftcheck.checker.writes import Write, action_writes, may_decline_after_touching, source_view_fields

# numba's cache files cut short are compiled again, not a traceback on every run
numba_cache.tolerate_damage()

NO_LABEL = MAX_LABELS  # marks an output row whose action instance is disabled
# Layouts of at most this many elements get pack and unpack as unrolled code, inlined into every
# action kernel; larger ones read a table at run time (``kernels.layout_table``), so that their
# kernels depend on the structured state's fields only and every configuration of a spec with
# the same fields shares them.
INLINE_PACK_MAX_ELEMENTS = 32
# The states a large layout's generic kernel runs every action on before the next batch
# (``table_expand_source``): their rows and their twin (36 KB for the Kafka model) stay in the
# first-level cache while the 18 actions run; 8 and 32 measured the same.
TABLE_EXPAND_BATCH_STATES = 16

KERNEL_DEPENDENCIES = ("kernels/hashing.py", "kernels/successor_rows.py", "kernels/rows.py",
                       "kernels/layout_table.py", "kernels/addresses.py")


def uses_layout_table(layout: Layout) -> bool:
    """Whether ``layout``'s kernels pack by a table read at run time rather than unrolled code:
    always for a large layout; a small one has both forms (``write_kernel_module``'s ``table``),
    the unrolled one faster to run, the table one faster to compile."""
    return len(layout.elements) > INLINE_PACK_MAX_ELEMENTS


def layout_values(layout: Layout, table: bool | None = None) -> np.ndarray:
    """The int32 array every kernel of ``layout`` takes as ``cv``: the constants' values for an
    unrolled layout, the whole table (``layout_table.table``) for a table one (``table``, by
    default ``uses_layout_table``)."""
    if uses_layout_table(layout) if table is None else table:
        return layout_table.table(layout)
    return np.array([value for _, value in layout.consts] or [0], np.int32)


def cache_dir() -> Path:
    """Where generated kernels and numba's cache of them live (``KRAFTCHECK_CACHE_DIR`` overrides)."""
    return Path(debug_kernels.cache_root()) / debug_kernels.kernels_dir_name()  # the debug mode's: its own


def _import_path(fn: Callable, what: str) -> tuple[str, str]:
    """Module and name under which a spec function can be imported by the generated module."""
    py = python_function(fn)
    module, name = py.__module__, py.__qualname__
    mod = sys.modules.get(module)
    if mod is None or "." in name or getattr(mod, name, None) is not fn:
        raise SpecError(f"{what}: its function {name} must be a module-level @njit function")
    return module, name


def _unpack_lines(layout: Layout) -> list[str]:
    lines = [f"    w{k} = words[row, {k}]" for k in range(layout.nwords)]
    for e in layout.elements:
        if e.field.const is not None:
            continue
        lo = e.field.lo
        if e.bits == 0:
            lines.append(f"    f[{e.flat}] = {lo}")
        elif lo:  # the word holds the distance from the field's smallest value
            lines.append(f"    f[{e.flat}] = int32((w{e.word} >> uint64({e.shift})) & uint64({(1 << e.bits) - 1})) "
                         f"+ int32({lo})")
        else:
            lines.append(f"    f[{e.flat}] = int32((w{e.word} >> uint64({e.shift})) & uint64({(1 << e.bits) - 1}))")
    return lines


def _stored(e, value: str) -> str:
    """``value`` (an expression) as element ``e`` is packed: its distance from the field's
    smallest value, as uint64. The text for a field from 0 is what it always was."""
    lo = e.field.lo
    return f"uint64({value})" if not lo else f"uint64({value} - {lo})" if lo > 0 else f"uint64({value} + {-lo})"


def _domain_check(e, value: str, const_index: dict[int, int]) -> str:
    """The test that ``value`` (an expression) may be element ``e``: its constant, or in its
    domain. Both packers use it, so a value one refuses the other refuses too."""
    if e.field.const is not None:
        return f"({value} == cv[{const_index[e.flat]}])"
    return f"({value} >= {e.field.lo}) & ({value} < {e.field.lo + e.field.domain})"


def _pack_lines(layout: Layout) -> list[str]:
    """Pack ``f`` into ``words[row]`` and its fingerprint into ``hashes[row]``; a value outside
    its domain returns False instead. The fingerprint is chained over the packed words while they
    are still in registers (``fingerprint_step``, as ``fingerprint_row`` chains it): reading them
    back from ``words`` in a loop of run-time length is measurably slower in the action kernels,
    whose hot path this is.

    Written with every name assigned once: numba's SSA reconstruction is superlinear in the number
    of redefinitions of one variable, as a packer that reassigned ``v`` and ``w0`` per element did
    for the Kafka layout (bench/RESULTS.md, "Figures behind the code's design").
    """
    checks, terms = [], {k: [] for k in range(layout.nwords)}
    const_index = {flat: j for j, (flat, _) in enumerate(layout.consts)}
    for e in layout.elements:
        checks.append(_domain_check(e, f"f[{e.flat}]", const_index))
        if e.field.const is not None:
            continue
        if e.bits:
            terms[e.word].append(f"({_stored(e, f'f[{e.flat}]')} << uint64({e.shift}))")
    lines = []
    groups = [checks[i:i + 16] for i in range(0, len(checks), 16)]
    for g, group in enumerate(groups):
        lines.append(f"    ok{g} = " + " & ".join(group))
    lines.append(f"    if not ({' & '.join(f'ok{g}' for g in range(len(groups)))}):")
    lines.append("        return False")
    for k in range(layout.nwords):
        lines.append(f"    w{k} = " + (" | ".join(terms[k]) if terms[k] else "uint64(0)"))
        lines.append(f"    words[row, {k}] = w{k}")
    lines.append("    h0 = uint64(GOLDEN)")
    lines += [f"    h{k + 1} = fingerprint_step(h{k}, w{k})" for k in range(layout.nwords)]
    lines.append(f"    hashes[row] = h{layout.nwords}")
    lines.append("    return True")
    return lines


def _dtype_descr(dtype: np.dtype) -> list:
    """A structured state's numpy description (``layout.dtype`` or ``layout.successor_dtype``),
    as literals the generated module can hold."""
    kinds = [dtype[name] for name in dtype.names]
    return [(name, k.base.str, k.shape) if k.shape else (name, k.str) for name, k in zip(dtype.names, kinds)]


def _element_writes(layout: Layout, writes: tuple[Write, ...]) -> tuple[list, list]:
    """``writes`` as what the kernel packs: (elements written whatever the parameters, in layout
    order; (field's first element, parameter number) of the elements indexed by a parameter).
    An indexed write is kept as such only when the field's elements sit in one word evenly spaced
    (its shift is then computed from the parameter); otherwise the whole field is packed."""
    static, indexed = [], []
    for w in writes:
        span = layout.field_slices[w.field]
        elems = layout.elements[span]
        evenly = all(e.word == elems[0].word and e.shift == elems[0].shift + k * e.bits for k, e in enumerate(elems))
        if w.param is not None and evenly and elems[0].bits and elems[0].field.const is None:
            indexed.append((elems[0], w.param))
        else:
            static += elems
    return static, indexed


def _written_pack_lines(layout: Layout, writes: tuple[Write, ...], at: str, source: str) -> list[str]:
    """Lines that pack the successor ``tf`` of the source state ``sources[source]`` into
    ``pack_words[at]`` and ``pack_hashes[at]`` when an action writes only ``writes``: the source's
    packed words with the written elements replaced. ``pk_ok`` says whether every written value is
    in its domain (the others are the source's, which are); ``self_loop``, on the distinct path
    (``dense``), whether the successor is its source. Nothing is written unless it is valid and,
    on that path, not a self-loop."""
    static, indexed = _element_writes(layout, writes)
    const_index = {flat: j for j, (flat, _) in enumerate(layout.consts)}
    lines, checks = [], []
    current = {}  # word -> the name holding its value so far (each name assigned once)

    def word(k: int) -> str:
        if k not in current:
            current[k] = f"pk_w{k}_0"
            lines.append(f"pk_w{k}_0 = sources[{source}, {k}]")
        return current[k]

    step = 0
    for e in static:
        checks.append(_domain_check(e, f"tf[{e.flat}]", const_index))
        if e.bits:
            step += 1
            keep = ~(((1 << e.bits) - 1) << e.shift) & 0xFFFFFFFFFFFFFFFF
            lines.append(f"pk_w{e.word}_{step} = ({word(e.word)} & uint64({keep})) | "
                         f"({_stored(e, f'tf[{e.flat}]')} << uint64({e.shift}))")
            current[e.word] = f"pk_w{e.word}_{step}"
    for e, j in indexed:
        step += 1
        lines.append(f"pk_v{step} = tf[{e.flat} + p{j}]")
        lines.append(f"pk_s{step} = uint64({e.shift} + {e.bits} * p{j})")
        checks.append(_domain_check(e, f"pk_v{step}", const_index))
        lines.append(f"pk_w{e.word}_{step} = ({word(e.word)} & ~(uint64({(1 << e.bits) - 1}) << pk_s{step})) | "
                     f"({_stored(e, f'pk_v{step}')} << pk_s{step})")
        current[e.word] = f"pk_w{e.word}_{step}"
    lines.append("pk_ok = " + (" & ".join(checks) if checks else "True"))
    # Only the words written to can differ from the source's: a self-loop is found here, before
    # it is hashed or stored (two thirds of Two-Phase's RMRcvAbortMsg successors are).
    same = [f"({current[k]} == sources[{source}, {k}])" for k in sorted(current)]
    lines.append("self_loop = " + " & ".join(["dense"] + same))
    lines.append("if pk_ok and not self_loop:")
    lines.append(f"    pk_h0 = uint64(GOLDEN)")
    for k in range(layout.nwords):
        w = current.get(k, f"sources[{source}, {k}]")
        lines.append(f"    pack_words[{at}, {k}] = {w}")
        lines.append(f"    pk_h{k + 1} = fingerprint_step(pk_h{k}, {w})")
    lines.append(f"    pack_hashes[{at}] = pk_h{layout.nwords}")
    return lines


def _written_indices(layout: Layout, writes: tuple[Write, ...]) -> list[str]:
    """The indices, into an unpacked state, of the elements ``_element_writes`` says an action
    that writes only ``writes`` may write: literals, or a field's first element plus ``p{j}``."""
    static, indexed = _element_writes(layout, writes)
    return [f"{e.flat}" for e in static] + [f"{e.flat} + p{j}" for e, j in indexed]


def _written_restore_lines(layout: Layout, writes: tuple[Write, ...]) -> list[str]:
    """Lines that make ``tf`` a copy of ``sf`` again after an action that writes only ``writes``."""
    return [f"tf[{k}] = sf[{k}]" for k in _written_indices(layout, writes)] or ["pass"]


# Past this many elements an action may write, a kernel compares the whole successor after an
# instance that does not fire (one vectorised loop) rather than element by element.
DECLINED_COMPARE_MAX_ELEMENTS = 32


def declined_dirty_expr(model: Model, ai: int, succ: str, source: str) -> str | None:
    """An expression that is true when an instance of action ``ai`` that returned False left its
    successor (the int64 row ``succ``) other than its source (``source``): a spec's bug
    (``errors.wrote_and_declined``), which the interpreted tiers refuse; left unchecked, the next
    instance would start from the written successor. None when the action's source shows it cannot
    decline after touching ``t`` (``writes.may_decline_after_touching``: most actions, the
    Kafka model's included, test their guards first), so that most kernels pay nothing. Only
    the elements the action may write are compared when ``writes.action_writes`` can tell and
    they are few, else the whole successor."""
    action = model.actions[ai]
    if not may_decline_after_touching(action.fn):
        return None
    writes = action_writes(action.fn, model.layout.fields, [p.count for p in action.params])
    if writes is None:
        return f"not same_values({source}, {succ})"
    indices = _written_indices(model.layout, writes)
    if not indices:
        return None
    if len(indices) > DECLINED_COMPARE_MAX_ELEMENTS:
        return f"not same_values({source}, {succ})"
    return " | ".join(f"({succ}[{k}] != {source}[{k}])" for k in indices)


def kernel_writes(model: Model, ai: int, table: bool = False) -> tuple[Write, ...] | None:
    """What action ``ai``'s kernel may treat as all it writes (``writes.action_writes``), or None
    to pack and restore the whole state: also when a transition property could write ``t``."""
    action = model.actions[ai]
    fields = model.layout.fields
    if table:  # packing written elements needs their shifts in the text
        return None
    for p in model.kernel_properties:
        if action_writes(p.fn, fields, []) != ():
            return None
    return action_writes(action.fn, fields, [p.count for p in action.params])


def packing_fire(model: Model, ai: int) -> tuple[list[int], list[tuple[int, int]]] | None:
    """For the ``fire`` kernel of action ``ai`` of a large layout, when it notes only what each
    successor changed (``_packing_fire_kernel``): the elements the action may write whatever its parameters
    (flat indices), and those it writes at a parameter ((the field's first element, parameter
    number)), as ``writes.action_writes`` reads them. None when the reading cannot tell, or when a
    transition property could write ``t``: then the generic kernel packs whole successors."""
    layout = model.layout
    action = model.actions[ai]
    writes = action_writes(action.fn, layout.fields, [p.count for p in action.params])
    if writes is None or any(action_writes(p.fn, layout.fields, []) != () for p in model.kernel_properties):
        return None
    static, indexed = [], []
    for w in writes:  # by flat index only: where an element sits in the words is the table's
        span = layout.field_slices[w.field]
        if w.param is None:
            static += range(span.start, span.stop)
        else:
            indexed.append((span.start, w.param))
    return static, indexed


def _selected_bits_lines(select: str, prefix: str, n: int, indent: str = "    ") -> list[str]:
    """Lines that give each of the spec's ``n`` checks the bit it sets in a violation mask:
    ``{prefix}k`` is ``1 << (selected checks before k)`` if check k is selected in the run-time
    mask ``select``, else 0 (it is then not evaluated). Bits follow the selected checks' order, as
    ``Model.invariants`` and ``Model.properties`` list them."""
    lines = [f"{indent}{prefix}sel = uint64({select})", f"{indent}{prefix}count0 = uint64(0)"]
    for k in range(n):
        on = f"(({prefix}sel >> uint64({k})) & uint64(1))"
        lines.append(f"{indent}{prefix}{k} = (uint64(1) << {prefix}count{k}) if {on} else uint64(0)")
        lines.append(f"{indent}{prefix}count{k + 1} = {prefix}count{k} + {on}")
    return lines


def _action_kernel(model: Model, ai: int, name: str, props: list[str], writes: tuple[Write, ...] | None) -> list[str]:
    """The kernel of action ``ai``: every instance of it on the unpacked states ``flat[lo:hi]``.

    Kernels are kept apart (rather than one loop over all actions) because LLVM's compile time and
    memory grow much faster than linearly with the size of one function: a fused kernel for the
    Kafka model did not compile in minutes. Each sits in a module of its own whose text does not
    depend on the model's other actions: where its labels start (``base``), the labels per state
    (``stride``) and its places in the tally (``fired_at``, ``properties_at``) are arguments, and
    it compiles in every transition property of the spec and evaluates those ``select`` names (a
    mask in the spec's order), so every preset and every selection of checks that includes the
    action shares its compilation. Instance p of state i owns
    candidate row ``i * stride + base + p``. Every kernel adds the instances that fired to
    ``tally[fired_at]`` (``successor_rows.TALLY_*``). Then:

    - ``dense`` False: every row is written, its successor's words and fingerprint to row ``row``
      of ``out_words`` and ``out_hash``, its label (NO_LABEL where the instance is disabled) and
      property mask to ``out_label`` and ``out_prop``;
    - ``dense`` True: a successor is packed into a small ring, and only first occurrences are
      kept, with their smallest candidate row, in the part's repeat table ``seen``: a self-loop
      is dropped at once (``successor_rows.self_loop_lines``), any other successor requests its
      table line and meets the table (``successor_rows.keep_first_lines``) once ``PENDING - 1``
      more have been queued, when the line has come; the ring is emptied at the end. Labels are not written, and
      each transition property's first violating row goes to ``tally[properties_at + k]``. Before
      a state whose instances could take the table past what it may hold (``tally[TALLY_LIMIT]``,
      counting the successors still in the ring), the kernel stops and says where
      (``tally[TALLY_STOPPED]``): the caller grows the table and calls it again from there.
    """
    action = model.actions[ai]
    instances = 1
    for p in action.params:
        instances *= p.count
    lines = [
        "@njit(cache=True, nogil=True)",
        "def expand(flat, lo, hi, scratch, out_words, out_hash, out_label, out_prop, err, cv, dense, sources,",
        "           source_offset, seen, seen_mask, generation, tally, stride, base, fired_at, properties_at, select):",
        f'    """{action.name}: every instance on the unpacked states flat[lo:hi]."""',
        *_selected_bits_lines("select", "pb", len(props)),
        # the state as int64 (row 0), so that the spec computes on int64 values as in Python: on the
        # chunk's int32 row numpy's arithmetic of a whole array field (s.c * s.c) wraps at 2**31
        "    s = as_successor_structured(scratch)[0]",
        "    wide = scratch[0]",
        "    t = as_successor_structured(scratch)[1]",
        "    tf = scratch[1]",
        *_ring_lines(str(instances)),
        "        sf = flat[i]",
        "        restore(sf, wide)",
        "        restore(sf, tf)",
    ]
    loops, indent, params, flat_expr = _instance_loops(action)
    lines += loops
    lines.append(f"{indent}label = base + {flat_expr}")
    lines.append(f"{indent}row = i * stride + label")
    lines.append(f"{indent}if {name}({', '.join(['s', 't'] + params)}):")
    body = indent + "    "
    if writes is None:  # what the action writes is not known (``kernel_writes``): pack it all
        lines += [
            f"{body}fired += 1",
            f"{body}if not pack(tf, pack_words, pack_hashes, (pushed % PENDING) if dense else row, cv):",
        ]
    else:
        lines += [f"{body}fired += 1", f"{body}pk_at = (pushed % PENDING) if dense else row"]
        lines += [body + line for line in _written_pack_lines(model.layout, writes, "pk_at", "source_offset + i")]
        lines.append(f"{body}if not pk_ok:")
    lines += _placed_successor_lines(body, writes is None)
    if props:  # only when some are selected: out_prop has a row per candidate only then
        lines.append(f"{body}if pbsel:")
        lines.append(f"{body}    m = uint64(0)")
        for k, q in enumerate(props):
            lines.append(f"{body}    if pb{k} and not {q}(s, t):\n{body}        m |= pb{k}")
        lines += [
            f"{body}    if not dense:",
            f"{body}        out_prop[row] = m",
            f"{body}    elif m:",
            f"{body}        note_property_rows(tally, properties_at, m, row)",
        ]
    if writes is None:
        lines.append(f"{body}restore(sf, tf)")
    else:
        lines += [body + line for line in _written_restore_lines(model.layout, writes)]
    dirty = declined_dirty_expr(model, ai, "tf", "sf")
    if dirty is None:
        lines += [f"{indent}elif not dense:", f"{indent}    out_label[row] = NO_LABEL"]
    else:  # an instance that wrote t and declined: the engine re-runs it to say so (_raise_domain_error)
        lines += [f"{indent}else:",
                  f"{indent}    if not dense:",
                  f"{indent}        out_label[row] = NO_LABEL",
                  f"{indent}    if {dirty}:",
                  f"{indent}        err[0] = i",
                  f"{indent}        err[1] = label",
                  f"{indent}        restore(sf, tf)"]
    return lines + _unexpected_write_lines(model.layout.size, source_check_indices(model, ai)) + _ring_end_lines()


def source_check_indices(model: Model, ai: int) -> list[int]:
    """The elements of ``s`` that action ``ai``'s kernel of a small layout compares with the state
    once its instances ran on it: those of the fields the action, or a transition property run in
    the kernel, could write through a view (``writes.source_view_fields``), every element when a
    reading cannot tell; none for an action that only reads (most: their kernels pay nothing)."""
    action = model.actions[ai]
    return _viewed_elements(model.layout, [(action.fn, [p.count for p in action.params])] +
                            [(p.fn, []) for p in model.kernel_properties])


def _viewed_elements(layout: Layout, calls: list) -> list[int]:
    """The elements of the fields of ``s`` that any of ``calls`` (function, its parameters' counts or
    None: ``writes.source_view_fields``) hands out as a view; every element if a reading cannot tell."""
    names: set[str] = set()
    for fn, counts in calls:
        found = source_view_fields(fn, layout.fields, counts)
        if found is None:
            return list(range(layout.size))
        names |= set(found)
    return [k for f in layout.fields if f.name in names for k in range(layout.size)[layout.field_slices[f.name]]]


def _unexpected_write_lines(size: int, indices: list[int]) -> list[str]:
    """After every instance of the action ran on state ``i``: ``s`` (``wide``, the state widened
    to int64) holds the state again unless an instance wrote it through a view (``cells = s.f;
    cells += 1``), which the model's build does not refuse and a later instance would read. The
    elements ``indices`` (``source_check_indices``) are compared; a change stops the kernel and is
    said as the table form's kernel says it (``UNEXPECTED_WRITE``), the changed value copied into
    the chunk's row, where ``compiled._raise_domain_error`` sees the state changed."""
    if not indices:
        return []
    return [
        "        unequal = int64(0)",
        *[f"        unequal |= wide[{k}] ^ int64(sf[{k}])" for k in indices],
        "        if unequal != 0:",
        f"            for x in range({size}):",
        "                if wide[x] != sf[x]:",
        "                    sf[x] = wide[x]",
        "                    err[0] = i",
        f"                    err[1] = {UNEXPECTED_WRITE} - x",
        "                    break",
        "            break",
    ]


def _ring_probe_lines(indent: str, position: str) -> list[str]:
    """The ring's successor at ``position`` meets the repeat table (``keep_first_lines``)."""
    return [indent + line for line in keep_first_lines(
        "ring_words", "ring_hashes", position, f"ring_rows[{position}]", "seen", "seen_mask", "generation",
        "kept")] + [f"{indent}nd += kept"]


def _ring_lines(instances: str) -> list[str]:
    """An expand kernel's set-up, and its loop's head over the states ``flat[lo:hi]``: it stops
    before a state whose ``instances`` successors could take the repeat table past its limit, and
    once a kernel before it on this part has found an error (the first one found is the one said:
    a later kernel would meet a state an unexpected write changed)."""
    return _ring_setup_lines() + [
        "    for i in range(lo, hi):",
        "        if err[0] >= 0:",
        "            break",
        # queued successors may all enter the table: counting them keeps it within its limit
        f"        if dense and nd + (pushed - probed) + {instances} > limit:",
        "            tally[TALLY_STOPPED] = i",
        "            break",
    ]


def _ring_setup_lines() -> list[str]:
    """An expand kernel's set-up: its tally's counts, the ring of successors waiting to meet the
    repeat table, and where ``pack`` writes on either path."""
    return [
        "    nd = tally[TALLY_KEPT]",
        "    limit = tally[TALLY_LIMIT]",
        "    ring_words = np.empty((PENDING, out_words.shape[1]), np.uint64)",
        "    ring_hashes = np.empty(PENDING, np.uint64)",
        "    ring_rows = np.empty(PENDING, np.int64)",
        "    pack_words = ring_words if dense else out_words",
        "    pack_hashes = ring_hashes if dense else out_hash",
        "    pushed = 0  # successors queued in the ring",
        # the deadlock check on the distinct path (_placed_successor_lines); err has a third
        # element only there
        "    mark_moves = dense and err.shape[0] > 2 and err[2] == 1",
        "    probed = 0  # of those, the ones that met the table",
        "    fired = 0",
    ]


def _placed_successor_lines(body: str, check_self_loop: bool, source: str = "i") -> list[str]:
    """After ``pack`` (whose failure is the ``if`` these lines continue): on the distinct path
    (``dense``) queue the successor in the ring unless it is a self-loop (found here when
    ``check_self_loop``, else by the packer) and probe the table with the one queued ``PENDING -
    1`` before; else label its row. ``source``: the source state's index in the chunk.

    On the distinct path, where no row is labelled, when the run checks for deadlocks
    (``mark_moves``: ``err[2]`` is 1) a successor that is not a self-loop also sets the label of
    its source's first row (``source * stride``) to 0: the state has a way out. The engine fills
    those labels with NO_LABEL before the kernels run and reads them after. A run that does not
    check pays a predictable branch, no store."""
    return [
        f"{body}    err[0] = {source}",
        f"{body}    err[1] = label",
        f"{body}elif dense:",
        f"{body}    q = pushed % PENDING",
        *([f"{body}    {line}" for line in self_loop_lines("ring_words", "q", "sources", f"source_offset + {source}",
                                                          "self_loop")] if check_self_loop else []),
        f"{body}    if not self_loop:",
        f"{body}        if mark_moves:",
        f"{body}            out_label[{source} * stride] = 0",
        f"{body}        prefetch_row(seen, int64(ring_hashes[q] >> uint64(32)) & seen_mask)",
        f"{body}        ring_rows[q] = row",
        f"{body}        pushed += 1",
        f"{body}        if pushed - probed == PENDING:",
        f"{body}            o = probed % PENDING",
        *_ring_probe_lines(body + "            ", "o"),
        f"{body}            probed += 1",
        f"{body}else:",
        f"{body}    out_label[row] = label",
    ]


def _ring_end_lines() -> list[str]:
    """An expand kernel's end: the successors left in the ring meet the table; the tally."""
    return [
        "    for k in range(probed, pushed):",
        "        o = k % PENDING",
        *_ring_probe_lines("        ", "o"),
        "    tally[TALLY_KEPT] = nd",
        "    tally[fired_at] += fired",
    ]


def table_expand_source() -> str:
    """The one expand kernel of every large layout (``kernels.table_expand``): like an action's
    expand kernel (``_action_kernel``), but for all actions at once, each running its instances in
    its ``fire`` kernel, called through its address (``fires[a]``) on a batch of states at a time
    (a call through a function pointer per state and action cost the Kafka model a third of its
    time). The batch's states are widened once into the ``twin``, int64 rows in which every
    action's ``fire`` builds its successors and restores them (``_packing_fire_kernel``), so a state
    is copied once, not once per action, and stays in the caches while every action runs on it.
    ``fire`` leaves the successors that fired in rows of ``succ`` with their labels, sources and
    property masks, and they are packed by the layout's table. A batch never takes the repeat
    table past its limit: it holds no more states than the table has room for all instances of
    every action."""
    return "\n".join(_header("The expand kernel of every large layout") + [
        "import numpy as np",
        "from numba import carray, int64, njit, uint64",
        "",
        "from kraftcheck.checker.kernels.addresses import as_voidptr, keep_alive",
        "from kraftcheck.checker.kernels.hashing import GOLDEN, fingerprint_step",
        "from kraftcheck.checker.kernels.layout_table import pack, table_columns",
        "from kraftcheck.checker.kernels.prefetch import prefetch_row",
        "from kraftcheck.checker.kernels.successor_rows import (PENDING, TALLY_KEPT, TALLY_LIMIT, TALLY_STOPPED,",
        "                                                      note_property_rows)",
        "from kraftcheck.checker.kernels.table_expand import UNEXPECTED_WRITE, call_fire",
        "",
        f"NO_LABEL = {NO_LABEL}",
        f"BATCH_STATES = {TABLE_EXPAND_BATCH_STATES}",
        "",
        "",
        "@njit(cache=True, nogil=True)",
        "def expand(fires, instances, packs, bases, fired_ats, flat, lo, hi, out_words, out_hash, out_label, out_prop,",
        "           err, cv, dense, sources, source_offset, seen, seen_mask, generation, tally, stride,",
        "           properties_at, select):",
        '    """Every instance of every action (``fires[a]``, with ``instances[a]`` instances from label',
        '    ``bases[a]``, its transitions counted at ``tally[fired_ats[a]]``) on the unpacked states',
        '    flat[lo:hi]; ``packs[a]``: its ``fire`` leaves the elements each successor changed',
        '    (``codegen._packing_fire_kernel``)."""',
        "    nactions = fires.shape[0]",
        "    total = 0",
        "    most = 1",
        "    for a in range(nactions):",
        "        total += instances[a]",
        "        most = max(most, instances[a])",
        "    size = flat.shape[1]",
        # a fire that notes what its successors changed writes (element, value) pairs: rows twice as wide
        "    succ_owner = np.empty((BATCH_STATES * most + 1, 2 * size), np.int64)",
        "    succ_labels = np.empty(BATCH_STATES * most, np.int64)",
        "    succ_sources = np.empty(BATCH_STATES * most, np.int64)",
        "    succ_props = np.zeros(BATCH_STATES * most, np.uint64)",
        "    succ_changes = np.zeros(BATCH_STATES * most, np.int64)",
        "    twin_owner = np.empty((BATCH_STATES, size), np.int64)",
        # the batch's states as int64 rows the actions read (``s``): a spec computes on int64 values,
        # as in Python, where numpy's arithmetic on the int32 rows would wrap at 2**31 (s.c * s.c)
        "    source_owner = np.empty((BATCH_STATES, size), np.int64)",
        # fire and pack reach these through addresses (no reference counting: kernels.addresses)
        "    succ_at = uint64(succ_owner.ctypes.data)",
        "    succ = carray(as_voidptr(succ_at), succ_owner.shape, np.int64)",
        "    labels_at = uint64(succ_labels.ctypes.data)",
        "    sources_at = uint64(succ_sources.ctypes.data)",
        "    props_at = uint64(succ_props.ctypes.data)",
        "    changes_at = uint64(succ_changes.ctypes.data)",
        "    twin_at = uint64(twin_owner.ctypes.data)",
        "    source_at = uint64(source_owner.ctypes.data)",
        "    flat_at = uint64(flat.ctypes.data)",
        "    flat_stride = uint64(flat.strides[0])",
        "    col_lo, col_span, col_shift, col_mask, col_word = table_columns(cv)",
        "    nwords = sources.shape[1]",
        *_ring_setup_lines(),
        "    failed = False",
        "    i = lo",
        "    while i < hi and not failed:",
        "        j = min(hi, i + BATCH_STATES)",
        "        if dense:",
        # queued successors may all enter the table: counting them keeps it within its limit
        "            room = limit - nd - (pushed - probed)",
        "            if room < total:",
        "                tally[TALLY_STOPPED] = i",
        "                break",
        "            j = min(j, i + room // max(total, 1))",
        "        else:",
        "            for q in range(i, j):",
        "                for a in range(nactions):",
        "                    for r in range(q * stride + bases[a], q * stride + bases[a] + instances[a]):",
        "                        out_label[r] = NO_LABEL",
        # the batch's rows lie one after another in both: one loop, which LLVM vectorises
        "        batch_flat = carray(as_voidptr(flat_at + uint64(i) * flat_stride), (j - i) * size, np.int32)",
        "        batch_twin = carray(as_voidptr(twin_at), (j - i) * size, np.int64)",
        "        batch_source = carray(as_voidptr(source_at), (j - i) * size, np.int64)",
        "        for x in range((j - i) * size):",
        "            batch_twin[x] = batch_flat[x]",
        "            batch_source[x] = batch_flat[x]",
        "        for a in range(nactions):",
        "            n = call_fire(fires[a], source_at, uint64(8 * size), j - i, succ_at, labels_at,",
        "                          sources_at, props_at, bases[a], select, changes_at, twin_at)",
        "            if n < 0:  # an instance wrote its successor and declined (codegen._fire_kernel)",
        "                err[0] = i + succ_sources[0]",
        "                err[1] = succ_labels[0]",
        "                failed = True",
        "                break",
        "            fired += n",
        "            tally[fired_ats[a]] += n",
        "            for k in range(n):",
        "                label = succ_labels[k]",
        "                source = i + succ_sources[k]",
        "                row = source * stride + label",
        "                at = (pushed % PENDING) if dense else row",
        # the elements a fire noted, packed over the source's words: layout_table.pack_changes,
        # written out here because a call that takes arrays counts references on each
        "                if packs[a]:",
        "                    for w in range(nwords):",
        "                        pack_words[at, w] = sources[source_offset + source, w]",
        "                    bad = False",
        "                    for c in range(succ_changes[k]):",
        "                        e = uint64(succ[k, 2 * c])",
        "                        d = uint64(succ[k, 2 * c + 1] - cv[col_lo + e])",
        "                        bits = uint64(cv[col_mask + e])",
        "                        shift = uint64(cv[col_shift + e])",
        "                        wd = cv[col_word + e]",
        "                        pack_words[at, wd] = (pack_words[at, wd] & ~(bits << shift)) | ((d & bits) << shift)",
        "                        bad = bad | (d >= uint64(cv[col_span + e]))",
        "                    ok = not bad",
        "                    if ok:",
        "                        h = uint64(GOLDEN)",
        "                        for w in range(nwords):",
        "                            h = fingerprint_step(h, pack_words[at, w])",
        "                        pack_hashes[at] = h",
        "                else:",
        "                    ok = pack(succ[k, :size], pack_words, pack_hashes, at, cv)",
        "                if not ok:",
        *_placed_successor_lines("                ", True, "source"),
        # only when some are selected: out_prop has a row per candidate only then
        "                if select:",
        "                    m = succ_props[k]",
        "                    if not dense:",
        "                        out_prop[row] = m",
        "                    elif m:",
        "                        note_property_rows(tally, properties_at, m, row)",
        # every fire restores what it writes: a twin left unequal to its state was written where
        # the reading of the action's writes did not expect (its successors lack that write)
        "        if not failed:",
        "            unequal = int64(0)",
        "            for x in range((j - i) * size):",
        "                f = int64(batch_flat[x])",
        "                unequal |= (batch_twin[x] ^ f) | (batch_source[x] ^ f)",
        "            if unequal != 0:",
        "                for x in range((j - i) * size):",
        "                    if batch_twin[x] != batch_flat[x] or batch_source[x] != batch_flat[x]:",
        # the spec wrote s: the chunk's row shows it, as the caller reads a write to s
        # (compiled._raise_domain_error)
        "                        if batch_source[x] != batch_flat[x]:",
        "                            batch_flat[x] = batch_source[x]",
        "                        err[0] = i + x // size",
        "                        err[1] = UNEXPECTED_WRITE - x % size",
        "                        failed = True",
        "                        break",
        "        i = j",
        "    for k in range(probed, pushed):",
        "        o = k % PENDING",
        *_ring_probe_lines("        ", "o"),
        "    tally[TALLY_KEPT] = nd",
        "    keep_alive(succ_owner)",
        "    keep_alive(succ_changes)",
        "    keep_alive(succ_labels)",
        "    keep_alive(succ_sources)",
        "    keep_alive(succ_props)",
        "    keep_alive(twin_owner)",
        "    keep_alive(source_owner)",
    ]) + "\n"


def _instance_loops(action) -> tuple[list[str], str, list[str], str]:
    """The nested loops over ``action``'s parameters (``p0``, ``p1``, ...) inside a kernel's loop
    over states: their lines, the indent inside them, the parameters' names and the expression of
    the instance's number."""
    lines, indent = [], "        "
    for j, p in enumerate(action.params):
        lines.append(f"{indent}for p{j} in range({p.count}):")
        indent += "    "
    flat_expr = "0"
    for j, p in enumerate(action.params):
        flat_expr = f"({flat_expr}) * {p.count} + p{j}" if j else "p0"
    return lines, indent, [f"p{j}" for j in range(len(action.params))], flat_expr


def _fire_instance_lines(action, name: str, props: list[str]) -> tuple[list[str], str, str, str]:
    """A ``fire`` kernel's loop over the instances of ``action`` on state ``j``, down to what runs
    when one fires: its label and its state's place noted, and the mask of the selected
    transition properties it violates. Returns the lines, the indent of the ``if`` that calls the
    action, that of its body, and the expression of the instance's number."""
    lines, indent, params, flat_expr = _instance_loops(action)
    lines.append(f"{indent}if {name}({', '.join(['s', 't'] + params)}):")
    body = indent + "    "
    lines += [f"{body}labels[n] = base + {flat_expr}", f"{body}sources[n] = j"]
    if props:
        lines += [f"{body}m = uint64(0)"]
        lines += [f"{body}if pb{k} and not {q}(s, t):\n{body}    m |= pb{k}" for k, q in enumerate(props)]
        lines.append(f"{body}props[n] = m")
    return lines, indent, body, flat_expr


def _fire_kernel(model: Model, ai: int, name: str, props: list[str]) -> list[str]:
    """The ``fire`` kernel of action ``ai`` of a large layout (``kernels.table_expand``): every
    instance of it on ``count`` states, the first at address ``states_at``, the next
    ``state_stride`` bytes further. Each instance that fires leaves its successor in the next row
    of ``succ``, its label (``base`` + its instance) in ``labels``, its state's place in the batch
    in ``sources`` and the mask of the selected transition properties it violates in ``props``.
    The successor is built in place, in the first ``SIZE`` elements of the next row (rows are
    ``2 * SIZE`` wide, as the other form's; a copy of the source until an instance fires: an
    action that does not fire leaves ``t`` as it was); every array is reached through an address
    (``kernels.addresses``), so a view costs no reference count. The batch's twin (``twin_at``)
    is the other form's. Returns how many fired."""
    action = model.actions[ai]
    instances = 1
    for p in action.params:
        instances *= p.count
    lines = [
        # compiled by kernels.table_expand, as a C callback (numba.cfunc)
        "def fire(states_at, state_stride, count, succ_at, labels_at, sources_at, props_at, base, select, changes_at,",
        "         twin_at):",
        f'    """{action.name}: every instance on a batch of states; the successors into succ_at\'s rows."""',
        *_selected_bits_lines("select", "pb", len(props)),
        f"    rows = max(count * {instances}, 1)",
        "    succ = carray(as_voidptr(succ_at), (rows + 1, 2 * SIZE), np.int64)  # the generic kernel's rows",
        "    labels = carray(as_voidptr(labels_at), rows, np.int64)",
        "    sources = carray(as_voidptr(sources_at), rows, np.int64)",
        "    props = carray(as_voidptr(props_at), rows, np.uint64)",
        "    row_bytes = uint64(16 * SIZE)",
        "    n = 0",
        "    t = carray(as_voidptr(succ_at), 1, SUCCESSOR_DTYPE)[0]",
        "    for j in range(count):",
        "        sf_at = states_at + uint64(j) * state_stride",
        "        sf = carray(as_voidptr(sf_at), SIZE, np.int64)",
        "        s = carray(as_voidptr(sf_at), 1, SUCCESSOR_DTYPE)[0]",
        "        restore(sf, succ[n])",
    ]
    instance_lines, indent, body, flat_expr = _fire_instance_lines(action, name, props)
    lines += instance_lines
    lines += [f"{body}n += 1", f"{body}restore(sf, succ[n])",
              f"{body}t = carray(as_voidptr(succ_at + uint64(n) * row_bytes), 1, SUCCESSOR_DTYPE)[0]"]
    dirty = declined_dirty_expr(model, ai, "succ[n]", "sf")
    if dirty is not None:  # an instance that wrote t and declined: say which (the caller re-runs it)
        lines.append(f"{indent}elif {dirty}:")
        lines += [f"{body}labels[0] = base + {flat_expr}", f"{body}sources[0] = j", f"{body}return -1"]
    lines.append("    return n")
    return lines


def _runs(indices: list[int]) -> list[tuple[int, int]]:
    """Sorted distinct ``indices`` as runs of consecutive ones: (first, end) each."""
    out: list[tuple[int, int]] = []
    for k in sorted(set(indices)):
        if out and out[-1][1] == k:
            out[-1] = (out[-1][0], k + 1)
        else:
            out.append((k, k + 1))
    return out


def _runs_constant(name: str, indices: list[int]) -> str:
    runs = _runs(indices)
    return f"{name} = np.array({[list(r) for r in runs]!r}, np.int64).reshape({len(runs)}, 2)"


def _packing_fire_kernel(model: Model, ai: int, name: str, props: list[str],
                         elements: tuple[list[int], list[tuple[int, int]]]) -> list[str]:
    """The ``fire`` kernel of action ``ai`` when what it writes is known (``packing_fire``). The
    other form (``_fire_kernel``) leaves each successor whole (180 elements for the Kafka model)
    for the generic kernel to pack whole, where an action writes a few. This one copies each
    source into one scratch successor, and for each instance that fires leaves in row ``n`` of
    ``succ`` only the written elements (``WRITTEN``, and an element a parameter indexes) whose
    value changed, as (element, value) pairs, and their number in ``changes[n]``; the generic
    kernel packs them over the source's packed words (``layout_table.pack_changes``), compiled
    once for every spec; its rows are twice the state's elements wide, so every element fits.

    The successor is built in the batch's row of the twin (``twin_at``: the batch's states as int64
    rows, which the generic kernel widens once for all actions), and its written elements are
    restored from the source after each instance that fires, so the next action finds the twin
    equal to the states again and no action copies a state whole. The generic kernel checks that
    once every action has run: an element written but not read as written (``checker/writes.py``)
    leaves the twin unequal, and so does a spec that writes its source state ``s``. The check is
    partial: a later action that names the element restores it (and its own successors may have
    taken the stale value before), so the reading must stay sound; ``tests/test_writes.py``
    checks it against what every shipped action writes."""
    action = model.actions[ai]
    static, indexed = elements
    instances = 1
    for p in action.params:
        instances *= p.count

    def note(index: str, indent: str) -> list[str]:
        """Lines that note element ``index`` if its value changed."""
        return [f"{indent}if tf[{index}] != sf[{index}]:",
                f"{indent}    out[changed + changed] = {index}",
                f"{indent}    out[changed + changed + 1] = tf[{index}]",
                f"{indent}    changed += 1"]

    lines = [
        _runs_constant("WRITTEN", static),
        "",
        "",
        # compiled by kernels.table_expand, as a C callback (numba.cfunc)
        "def fire(states_at, state_stride, count, succ_at, labels_at, sources_at, props_at, base, select, changes_at,",
        "         twin_at):",
        f'    """{action.name}: every instance on a batch of states; what each successor changed into succ_at\'s rows."""',
        *_selected_bits_lines("select", "pb", len(props)),
        f"    rows = max(count * {instances}, 1)",
        "    labels = carray(as_voidptr(labels_at), rows, np.int64)",
        "    sources = carray(as_voidptr(sources_at), rows, np.int64)",
        "    props = carray(as_voidptr(props_at), rows, np.uint64)",
        "    changes = carray(as_voidptr(changes_at), rows, np.int64)",
        "    row_bytes = uint64(16 * SIZE)  # rows of 2 * SIZE: room for a pair per element",
        "    n = 0",
        "    for j in range(count):",
        "        sf_at = states_at + uint64(j) * state_stride",
        "        sf = carray(as_voidptr(sf_at), SIZE, np.int64)",
        "        s = carray(as_voidptr(sf_at), 1, SUCCESSOR_DTYPE)[0]",
        "        t_at = twin_at + uint64(j) * uint64(8 * SIZE)",
        "        tf = carray(as_voidptr(t_at), SIZE, np.int64)",
        "        t = carray(as_voidptr(t_at), 1, SUCCESSOR_DTYPE)[0]",
    ]
    instance_lines, indent, body, flat_expr = _fire_instance_lines(action, name, props)
    lines += instance_lines
    lines += [
        f"{body}out = carray(as_voidptr(succ_at + uint64(n) * row_bytes), 2 * SIZE, np.int64)",
        f"{body}changed = 0",
        f"{body}for r in range(WRITTEN.shape[0]):",
        f"{body}    for k in range(WRITTEN[r, 0], WRITTEN[r, 1]):",
        *note("k", body + "        "),
        *[line for first, j in indexed for line in note(f"{first} + p{j}", body)],
        f"{body}changes[n] = changed",
        f"{body}for r in range(WRITTEN.shape[0]):",
        f"{body}    k = uint64(WRITTEN[r, 0])",
        f"{body}    while k < uint64(WRITTEN[r, 1]):",
        f"{body}        tf[k] = sf[k]",
        f"{body}        k += uint64(1)",
        *[f"{body}tf[{first} + p{j}] = sf[{first} + p{j}]" for first, j in indexed],
        f"{body}n += 1",
    ]
    dirty = declined_dirty_expr(model, ai, "tf", "sf")
    if dirty is not None:  # an instance that wrote t and declined: say which (the caller re-runs it)
        lines.append(f"{indent}elif {dirty}:")
        lines += [f"{body}labels[0] = base + {flat_expr}", f"{body}sources[0] = j", f"{body}return -1"]
    lines.append("    return n")
    return lines


class _Imports:
    """The ``from M import f as alias`` lines of one generated module, for spec functions."""

    def __init__(self) -> None:
        self.by_module: dict[str, list[str]] = {}
        self.checked: list[tuple[str, str]] = []

    def alias(self, fn: Callable, what: str, local: str) -> str:
        module, name = _import_path(fn, what)
        self.by_module.setdefault(module, []).append(f"{name} as {local}")
        self.checked.append((local, what))
        return local

    def lines(self) -> list[str]:
        """The imports; with numba disabled (``NUMBA_DISABLE_JIT=1``) the functions run as Python,
        where nothing types their returns, so each value is checked as the Python tiers check it
        (``action_returns.bool_checked``): a tuple would otherwise fire an action by its truth."""
        return [f"from {m} import {', '.join(sorted(set(ns)))}" for m, ns in sorted(self.by_module.items())] + [
            "from numba import config as _numba_config",
            "",
            "if _numba_config.DISABLE_JIT:",
            "    from kraftcheck.checker.action_returns import bool_checked",
            *[f"    {local} = bool_checked({what!r}, {local})" for local, what in self.checked],
        ]


def _header(what: str) -> list[str]:
    return [f'"""{what}, generated by kraftcheck {__version__}. Do not edit."""', ""]


def _uses_layout(layout_module: str, helpers: tuple[str, ...]) -> list[str]:
    """Lines binding the layout module's ``helpers`` in a module that compiles them in."""
    return [
        "from kraftcheck.checker.codegen import generated_module",
        "",
        f'_layout = generated_module("{layout_module}", __file__)',
        *[f"{h} = _layout.{h}" for h in helpers],
    ]


def _as_structured_lines() -> list[str]:
    """``as_successor_structured``: int64 rows (a state widened from the chunk's int32 rows, or a
    successor) seen as structured states (SUCCESSOR_DTYPE), which the spec's functions read and
    write by field name."""
    return [
        "if config.DISABLE_JIT:",
        "    def as_successor_structured(rows):",
        "        return rows.view(SUCCESSOR_DTYPE)[:, 0].view(np.recarray)",
        "else:",
        '    @njit(cache=True, inline="always")',
        "    def as_successor_structured(rows):",
        '        """The int64 rows ``rows`` (one successor a row) as structured successors with the fields\' names."""',
        "        return rows.view(SUCCESSOR_DTYPE)[:, 0]",
    ]


def _table_layout_source(model: Model) -> str:
    """The layout module of a large layout (``uses_layout_table``): the structured-state types,
    and the table-driven pack and unpack of ``kernels.layout_table``. Its text depends on the fields'
    names and shapes only, so every configuration with the same fields shares it and every
    kernel that compiles it in."""
    layout = model.layout
    out = _header(f"Table layout kernels of spec {model.spec.name}") + [
        "import numpy as np",
        "from numba import config, njit",
        "",
        "from kraftcheck.checker.kernels.layout_table import (pack, pack_rows, restore, set_consts, unpack,",
        "                                                    unpack_range, unpack_rows)",
        "",
        f"SUCCESSOR_DTYPE = np.dtype({_dtype_descr(layout.successor_dtype)!r})",
        "",
        "",
        *_as_structured_lines(),
        "",
    ]
    return "\n".join(out)


def _layout_source(model: Model, table: bool) -> str:
    """The module of one layout: structured-state types, pack and unpack, and the batch kernels
    built on them."""
    layout = model.layout
    if table:
        return _table_layout_source(model)
    # Constant fields (protocol switches, capacities) are read from ``cv`` at run time rather than
    # written into the code, so one compiled module serves every preset with the same layout.
    consts = [f"    f[{flat}] = cv[{j}]" for j, (flat, _) in enumerate(layout.consts)] or ["    pass"]
    # Inlining the packer into every action kernel is faster at run time but costs compile time
    # in proportion to the layout; large layouts call it instead.
    pack_inline = ', inline="always"' if len(layout.elements) <= INLINE_PACK_MAX_ELEMENTS else ""
    out = _header(f"Layout kernels of spec {model.spec.name}") + [
        "import numpy as np",
        "from numba import config, int32, njit, uint64",
        "",
        "from kraftcheck.checker.kernels.hashing import GOLDEN, fingerprint_step",
        "",
        f"NWORDS = {layout.nwords}",
        f"SIZE = {layout.size}",
        # Kernels take the unpacked states as int32 rows, widen one to an int64 row and see it as a
        # structured state here: a structured array argument costs numba's dispatcher a type built
        # from its dtype on every call (16 us for the Kafka model's, times 18 kernels a chunk), an
        # int32 array next to nothing.
        f"SUCCESSOR_DTYPE = np.dtype({_dtype_descr(layout.successor_dtype)!r})",
        "",
        "",
        *_as_structured_lines(),
        "",
        "",
        '@njit(cache=True, inline="always")',
        "def unpack(words, row, f, cv):",
        *_unpack_lines(layout),
        "",
        "",
        f"@njit(cache=True{pack_inline})",
        "def pack(f, words, hashes, row, cv):",
        *_pack_lines(layout),
        "",
        "",
        "@njit(cache=True)",
        "def set_consts(f, cv):",
        *consts,
        "",
        "",
        '@njit(cache=True, inline="always")',
        "def restore(src, dst):",
        "    for k in range(SIZE):",
        "        dst[k] = src[k]",
        "",
        "",
        "@njit(cache=True)",
        "def pack_rows(flat_rows, words, cv):",
        "    hashes = np.empty(flat_rows.shape[0], np.uint64)",
        "    for r in range(flat_rows.shape[0]):",
        "        if not pack(flat_rows[r], words, hashes, r, cv):",
        "            return r",
        "    return -1",
        "",
        "",
        "@njit(cache=True)",
        "def unpack_rows(words, flat_rows, cv):",
        "    for r in range(words.shape[0]):",
        "        set_consts(flat_rows[r], cv)",
        "        unpack(words, r, flat_rows[r], cv)",
        "",
        "",
        "@njit(cache=True, nogil=True)",
        "def unpack_range(words, lo, hi, offset, flat, cv):",
        '    """Unpack words[lo:hi] into the int32 rows flat[offset:] of the chunk\'s states."""',
        "    for j in range(hi - lo):",
        "        unpack(words, lo + j, flat[offset + j], cv)",
        "",
    ]
    return "\n".join(out)


def _action_source(model: Model, ai: int, layout_module: str, table: bool) -> str:
    """The module of one action's kernel (with the model's transition properties)."""
    imports = _Imports()
    action = model.actions[ai]
    name = imports.alias(action.fn, f"action {action.name}", "action")
    props = [imports.alias(p.fn, f"{'transition property' if k < len(model.spec_properties) else 'action constraint'} "
                                 f"{p.name}", f"property{k}") for k, p in enumerate(model.kernel_properties)]
    if table:
        noted = packing_fire(model, ai)
        kernel = (_packing_fire_kernel(model, ai, name, props, noted) if noted is not None
                  else ["", "", *_fire_kernel(model, ai, name, props)])
        return "\n".join(_header(f"The fire kernel of action {action.name} of spec {model.spec.name}") + [
            "import numpy as np",
            "from numba import carray, uint64",
            "",
            "from kraftcheck.checker.kernels.addresses import as_voidptr",
            "from kraftcheck.checker.kernels.inlining import inlined",
            "from kraftcheck.checker.kernels.rows import same_values",
            *imports.lines(),
            *_uses_layout(layout_module, ("SUCCESSOR_DTYPE", "restore")),
            "SIZE = SUCCESSOR_DTYPE.itemsize // 8",
            f"{name} = inlined({name})  # compiled only inside fire (kernels.inlining)",
            *kernel,
            "",
        ])
    writes = kernel_writes(model, ai, table)
    out = _header(f"The kernel of action {action.name} of spec {model.spec.name}") + [
        "import numpy as np",
        "from numba import int64, njit, uint64",
        "",
        "from kraftcheck.checker.kernels.prefetch import prefetch_row",
        "from kraftcheck.checker.kernels.rows import same_values",
        "from kraftcheck.checker.kernels.successor_rows import (PENDING, TALLY_KEPT, TALLY_LIMIT, TALLY_STOPPED,",
        "                                                      note_property_rows)",
        *(["from kraftcheck.checker.kernels.hashing import GOLDEN, fingerprint_step"]
          if writes is not None else []),
        "from kraftcheck.checker.kernels.inlining import inlined",
        *imports.lines(),
        *_uses_layout(layout_module, ("as_successor_structured", "pack", "restore")),
        f"{name} = inlined({name})  # compiled only inside expand (kernels.inlining)",
        "",
        f"NO_LABEL = {NO_LABEL}",
        "",
        "",
        *_action_kernel(model, ai, name, props, writes),
        "",
    ]
    return "\n".join(out)


def _invariants_source(model: Model, layout_module: str) -> str:
    """The module of the kernel that evaluates the invariants: every invariant of the spec is
    compiled in, those ``select`` names (a mask in the spec's order) are evaluated, so runs that
    check different selections share it."""
    imports = _Imports()
    names = [imports.alias(inv.fn, f"{'invariant' if k < len(model.spec_invariants) else 'constraint'} {inv.name}",
                           f"invariant{k}") for k, inv in enumerate(model.kernel_invariants)]
    checks = [f"            if ib{k} and not {n}(s):\n                m |= ib{k}" for k, n in enumerate(names)]
    viewed = invariant_check_indices(model)
    out = _header(f"The invariants kernel of spec {model.spec.name}") + [
        "from numba import njit, uint64",
        "",
        *imports.lines(),
        *_uses_layout(layout_module, ("as_successor_structured", "set_consts", "unpack")),
        "",
        "",
        "@njit(cache=True, nogil=True)",
        "def check(words, lo, hi, offset, scratch, out_mask, cv, select):",
        '    """Bitmask of violated invariants of words[lo:hi] into out_mask[offset:] (``scratch``: an int64',
        '    row, so that the checks compute on int64 values, as in Python)."""',
        *_selected_bits_lines("select", "ib", len(names)),
        "    s = as_successor_structured(scratch)[0]",
        "    sf = scratch[0]",
        "    kept = scratch[1]",
        "    set_consts(sf, cv)",
        "    for j in range(hi - lo):",
        "        unpack(words, lo + j, sf, cv)",
        *[f"        kept[{k}] = sf[{k}]" for k in viewed],
        "        if True:",
        "            m = uint64(0)",
        *checks,
        "            out_mask[offset + j] = m",
        # a check that wrote s through a view changed what the checks after it read: the caller
        # runs the checks as Python on these states, where s is read-only, and says which raised
        *([f"        if {' | '.join(f'(sf[{k}] != kept[{k}])' for k in viewed)}:",
           "            raise RuntimeError('a check of the spec wrote its state s')"] if viewed else []),
        "",
    ]
    return "\n".join(out)


def invariant_check_indices(model: Model) -> list[int]:
    """The elements of ``s`` the invariants kernel compares with the state once every check ran
    on it: those of the fields an invariant or a state constraint could write through a view
    (``writes.source_view_fields``, read as a helper's: one parameter), every element when the
    reading cannot tell; none when every check only reads."""
    return _viewed_elements(model.layout, [(inv.fn, None) for inv in model.kernel_invariants])


def _expanders_line(model: Model, action_modules: list[str], table_module: str | None) -> str:
    """``EXPANDERS``: each action's expand kernel, or, for a large layout, the one expand kernel
    with the action's ``fire`` kernel (``kernels.table_expand``)."""
    if table_module is None:
        return "EXPANDERS = (" + "".join(f'generated_module("{m}", __file__).expand, ' for m in action_modules) + ")"
    instances = [int(np.prod([p.count for p in a.params], dtype=np.int64)) for a in model.actions]
    packs = [packing_fire(model, ai) is not None for ai in range(len(model.actions))]
    return ("EXPANDERS = (" + "".join(f'TableExpander(_table_expand, generated_module("{m}", __file__).fire, {n}, {p}), '
                                      for m, n, p in zip(action_modules, instances, packs)) + ")")


def _model_source(model: Model, layout_module: str, invariants_module: str, action_modules: list[str],
                  table_module: str | None) -> str:
    """The module that gathers a model's kernels (and compiles nothing itself)."""
    args = [(len(model.labels), model.action_base[ai], TALLY_FIRED + ai, TALLY_FIRED + len(model.actions),
             model.kernel_property_select) for ai in range(len(model.actions))]
    table = [] if table_module is None else [
        "from kraftcheck.checker.kernels.table_expand import TableExpander",
        f'_table_expand = generated_module("{table_module}", __file__).expand',
    ]
    out = _header(f"The kernels of spec {model.spec.name}") + [
        "from kraftcheck.checker.codegen import generated_module",
        "",
        f"GENERATED = {tuple([layout_module, invariants_module, *action_modules])!r}",
        f'_layout = generated_module("{layout_module}", __file__)',
        "pack_rows, unpack_rows, unpack_range = _layout.pack_rows, _layout.unpack_rows, _layout.unpack_range",
        f'check = generated_module("{invariants_module}", __file__).check',
        "# which of the spec's invariants this model checks (bit k: the spec's invariant k)",
        f"INVARIANT_SELECT = {model.kernel_invariant_select}",
        "# whether the kernels pack by the layout's table (codegen.layout_values: what they take as cv)",
        f"LAYOUT_TABLE = {table_module is not None}",
        "# one kernel per action, and the arguments that place it in the model: (stride, base, fired_at,",
        "# properties_at, select: which of the spec's transition properties it checks)",
        *table,
        _expanders_line(model, action_modules, table_module),
        f"EXPANDER_ARGS = {tuple(args)!r}",
        "",
    ]
    return "\n".join(out)


def _dependency_files(model: Model) -> set[Path]:
    """Every source file the generated module compiles in."""
    return source_files([a.fn for a in model.actions] + [x.fn for x in model.invariants + model.properties
                                                         + model.constraints + model.action_constraints],
                        [Path(__file__).parent / dep for dep in KERNEL_DEPENDENCIES])


def _dependency_digest(model: Model) -> str:
    """Digest of every source file the generated module compiles in, as this process imported it."""
    return _files_digest(_dependency_files(model))


def model_sources(model: Model) -> dict[str, str]:
    """{path: SHA-256, hex} of every source file ``model``'s kernels compile in, as this process
    imported it (``imported_source``): what a background compile checks its own imports against."""
    return {str(f): imported_digest(str(f)).hex() for f in sorted(_dependency_files(model))}


def source_files(functions: list[Callable], extra_files: list[Path]) -> set[Path]:
    """The source files of the spec's ``functions``, every module of their packages (spec
    functions call helpers from other modules of their package), the modules they reach
    (``numba_cache.reachable_files``: helpers of a spec file that is no package's) and
    ``extra_files``."""
    files = set(extra_files)
    for fn in functions:
        files.add(Path(inspect.getsourcefile(python_function(fn))))
        files.update(Path(f) for f in numba_cache.reachable_files(python_function(fn)) or ())
    for f in list(files):
        if (f.parent / "__init__.py").exists() and f.parent.name not in ("kernels",):
            files.update(f.parent.glob("*.py"))
    return files


def sources_digest(functions: list[Callable], extra_files: list[Path]) -> str:
    """Digest of ``source_files(functions, extra_files)``, each as this process imported it."""
    return _files_digest(source_files(functions, extra_files))


def _files_digest(files: set[Path]) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(str(f.name).encode())
        h.update(imported_digest(str(f)))
    return h.hexdigest()


def _module_name(model: Model, kind: str, source: str, dependencies: str) -> str:
    """A generated module's name: a digest of its text, of every source file it compiles in, and of
    the kraftcheck and numba versions, so a cached compilation is never used for other code."""
    salt = source + dependencies + __version__ + numba.__version__
    digest = hashlib.sha256(salt.encode()).hexdigest()[:20]
    safe = "".join(c if c.isalnum() else "_" for c in f"{model.spec.name}_{kind}")
    return f"kc_{safe}_{digest}"


def _generic_module_name(kind: str, source: str) -> str:
    """The name of a generated module that no spec's code enters (compiled once per
    installation): a digest of its text, the engine's kernels it compiles in, and the versions."""
    h = hashlib.sha256((source + __version__ + numba.__version__).encode())
    for dep in sorted(KERNEL_DEPENDENCIES + ("kernels/prefetch.py", "kernels/table_expand.py")):
        h.update((Path(__file__).parent / dep).read_bytes())
    return f"kc_{kind}_{h.hexdigest()[:20]}"


class KernelCacheUnusable(UsageError):
    """The kernel cache cannot be written and does not hold what the run needs (exit 2)."""

    def __init__(self, directory: Path, why: str) -> None:
        super().__init__(f"the kernel cache {directory} is not writable ({why}): point KRAFTCHECK_CACHE_DIR at a "
                         "writable directory (a cache that cannot be written is used only when it already holds "
                         "the compiled kernels of the run)")


_cache_problems: dict[Path, str | None] = {}  # directory -> why it cannot be written (None: it can)


def kernel_cache_problem(directory: Path | None = None) -> str | None:
    """Why the kernel cache ``directory`` (default ``cache_dir()``) cannot be written, None if it
    can (created if absent): probed once per process, as numba probes its own cache folders."""
    directory = cache_dir() if directory is None else Path(directory)
    if directory not in _cache_problems:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=directory).close()
            why = None
        except OSError as e:
            why = e.strerror or str(e)
            if isinstance(e, (FileExistsError, NotADirectoryError)):
                why = f"{why}: a file stands where a folder of it should be"
        _cache_problems[directory] = why
    return _cache_problems[directory]


def _write(directory: Path, name: str, source: str) -> Path:
    """Write the module ``name`` unless the cache holds it with exactly this text: a file that
    differs (changed, truncated) was damaged, and is written again; its compiled forms are then
    compiled again (numba keys them by the file's content), and every marker saying a model's
    kernels are compiled goes, so no run trusts one without checking (``compile.is_compiled``)."""
    path = directory / f"{name}.py"
    expected = source.encode()
    try:
        present: bytes | None = path.read_bytes()
    except FileNotFoundError:
        present = None
    except OSError:
        present = b""  # a folder, unreadable: damaged all the same
    if present == expected:
        return path
    problem = kernel_cache_problem(directory)
    if problem is not None:
        raise KernelCacheUnusable(directory, f"{problem}; {path.name} is {'missing' if present is None else 'damaged'}")
    if present is not None:
        print(f"kernel cache: {path} was damaged; recompiling it", file=sys.stderr, flush=True)
        _forget_compiled(directory)
        if path.is_dir():
            shutil.rmtree(path)
    atomic_write(path, source)
    return path


def _forget_compiled(directory: Path) -> None:
    """Remove the markers that say a model's kernels are compiled: any of them may gather the
    module found damaged. The spec's typing verdicts (``compile.typed_marker_path``) stay: they
    are of the spec's own sources, which no damaged kernel module changes."""
    for marker in directory.glob("*.py.compiled"):
        try:
            marker.unlink()
        except FileNotFoundError:
            pass


def write_kernel_module(model: Model, table: bool | None = None) -> tuple[str, Path]:
    """Write (if new) the kernel modules for ``model`` into the kernel cache: (name, path) of the
    one that gathers them. ``table``: the form that packs by the layout's table (a shared expand
    kernel, a small ``fire`` per action: quick to compile) rather than unrolled code; by default
    (None) ``uses_layout_table``, and a large layout has no other form.

    A model's kernels live in several modules: one for its layout (pack, unpack), one for its
    invariants, one per action, each named by a digest of its own text (``_module_name``). Presets
    of a spec that share a layout and an action share that action's module, and so its numba
    compilation: a new preset compiles only the kernels no other one had.
    """
    if table is None:
        table = uses_layout_table(model.layout)
    elif not table and uses_layout_table(model.layout):
        raise ValueError(f"a layout of {len(model.layout.elements)} elements packs by its table only")
    dependencies = _dependency_digest(model)
    directory = cache_dir()
    problem = kernel_cache_problem(directory)
    if problem is not None and not directory.is_dir():
        raise KernelCacheUnusable(directory, problem)
    if problem is None:
        note_cache_in_use(directory)
    else:  # every module is there (else _write refuses): numba reads their compiled forms where they are
        numba_cache.read_only(directory)

    def write(kind: str, source: str) -> str:
        name = _module_name(model, kind, source, dependencies)
        _write(directory, name, source)
        return name

    layout_module = write("layout", _layout_source(model, table))
    invariants_module = write("invariants", _invariants_source(model, layout_module))
    action_modules = [write(f"action_{a.name}", _action_source(model, ai, layout_module, table))
                      for ai, a in enumerate(model.actions)]
    table_module = None
    if table:
        text = table_expand_source()
        table_module = _generic_module_name("table_expand", text)
        _write(directory, table_module, text)
    source = _model_source(model, layout_module, invariants_module, action_modules, table_module)
    name = _module_name(model, "model", source, dependencies)
    return name, _write(directory, name, source)


_in_use: dict[Path, int] = {}  # kernel cache -> the descriptor of this process's shared lock on it


def note_cache_in_use(directory: Path) -> None:
    """Hold a shared lock on ``directory/.in-use`` for the rest of this process: it may import
    kernels from the cache at any time, and ``kraftcheck cache clear`` (which needs the lock to
    itself) refuses while any process holds it."""
    if directory in _in_use:
        return
    for other in list(_in_use):  # a process uses one cache at a time: one descriptor, not one per cache
        os.close(_in_use.pop(other))
    try:
        import fcntl
        fd = os.open(directory / IN_USE_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except (ImportError, OSError):  # not POSIX, or not writable: nothing can clear it under us either
        return
    fcntl.flock(fd, fcntl.LOCK_SH)
    _in_use[directory] = fd


IN_USE_FILE = ".in-use"


def generated_module(name: str, beside: str) -> ModuleType:
    """Import (once per process) the generated module ``name`` from the directory of the file
    ``beside``: how generated modules import one another."""
    return import_kernel_module(name, Path(beside).parent / f"{name}.py")


def import_kernel_module(name: str, path: Path) -> ModuleType:
    """Import a written kernel module (once per process)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_kernels(model: Model, table: bool | None = None) -> ModuleType:
    """Write (if new) and import the kernel module for ``model`` (``table``: its form, as
    ``write_kernel_module``'s)."""
    return import_kernel_module(*write_kernel_module(model, table))


def imported_modules(path: Path) -> list[str]:
    """The modules a kernel module and the generated modules it gathers import spec functions
    from (their ``from X import`` lines)."""
    path = Path(path)
    found: list[str] = []
    for line in path.read_text().splitlines():
        if line.startswith("from ") and " import " in line and not line.startswith(("from numba ", "from kraftcheck.checker.")):
            found.append(line.split()[1])
        elif line.startswith("GENERATED = "):
            for name in ast.literal_eval(line[len("GENERATED = "):]):
                found += imported_modules(path.parent / f"{name}.py")
    return list(dict.fromkeys(found))
