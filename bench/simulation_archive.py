"""Go-Explore-style simulation, measured against the four-broker acknowledged-write loss.

An archive holds one state (and the path to it) per *cell*, a cell being the values of chosen
elements of the state (by default every scalar field: the controller's view, the AlterPartition
exchange, the ghost variables and the fault budgets; the per-broker arrays left out). Each round
picks a batch of archived states, with weight 1 / sqrt(1 + times picked) (Ecoffet et al., 2021),
and walks from each by-action (``choose_successors``) for ``--segment`` steps; every successor
generated on the way is checked against ``--check`` and, if its cell is new, archived with its
path. A walk never goes past ``--depth`` states from the initial state. With ``--with-checks``
every invariant of the spec is checked on every successor, and a cell also takes which of them
(other than ``--check``) the state violates: the shallower violations as stepping stones towards
the deeper one; with ``--violation-weight K`` a cell's pick weight is also multiplied by (1 + the
checks it violates) to the power K, so the walks go on from the states that break the most. With
``--action-set`` a cell also takes which actions (by name) its path took, a spec-independent record
of the faults that have happened; ``--fields none`` leaves the state's fields out of the cell.
Reproducible by seed (one thread; the archive's order is the rows' order); ``--max-walks`` stops
at a number of walks, which a seed fixes whatever the machine's load, where ``--time-limit`` does not.

    .venv/bin/python bench/simulation_archive.py --seed 1 --time-limit 60
    .venv/bin/python bench/simulation_archive.py --seed 2 --fields acked,committed,c_elr,log,hwm
    .venv/bin/python bench/simulation_archive.py --seed 3 --with-checks --resample \
        --fields acked,committed,c_elr,c_isr,c_leader,c_fenced,fences_used,isr_shrinks_used,lossy_shutdowns_used,min_isr_changes_used
    .venv/bin/python bench/simulation_archive.py --seed 4 --with-checks --resample --violation-weight 2 \
        --max-walks 1300000 --time-limit 900 --fields acked,committed,c_elr,c_isr,c_leader,c_fenced,...

The found state's length (states from the initial one) and the seconds, walks, archive size and
successors generated are printed; "found None" means no violation within the time limit.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.explore.compiled import kernel_shapes
from kraftcheck.checker.explore.tiers import compile_now
from kraftcheck.checker.kernels.simulation import choose_successors, warm_up
from kraftcheck.checker.kernels.successor_rows import valid_rows_part
from kraftcheck.checker.kernels.threads import using_threads
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class


def cell_elements(layout, fields: str, exclude: str, arrays: bool) -> list:
    """The elements whose values make a cell."""
    if fields == "none":
        return []
    named, left_out = set(filter(None, fields.split(","))), set(exclude.split(","))

    def wanted(e) -> bool:
        if not e.bits or e.field.const is not None:
            return False
        if named:
            return e.field.name in named
        return (arrays or not e.field.shape) and e.field.name not in left_out

    return [e for e in layout.elements if wanted(e)]


def cell_hasher(elements: list):
    """A function from packed states to a 64-bit hash of their cells' values."""
    word = np.array([e.word for e in elements], np.int64)
    shift = np.array([e.shift for e in elements], np.uint64)
    mask = np.array([(1 << e.bits) - 1 for e in elements], np.uint64)
    mults = (np.arange(1, len(elements) + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)

    def cells(words: np.ndarray) -> np.ndarray:
        values = (words[:, word] >> shift) & mask
        h = np.zeros(words.shape[0], np.uint64)
        for k in range(len(elements)):
            h = (h ^ (values[:, k] + np.uint64(k * 1000003))) * mults[k]
            h ^= h >> np.uint64(29)
        return h

    return cells


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", type=int, default=4)
    ap.add_argument("--min-isr", type=int, default=3)
    ap.add_argument("--election", default="any")
    ap.add_argument("--check", default="acked_writes_survive")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--segment", type=int, default=8, help="steps of a walk from an archived state")
    ap.add_argument("--batch", type=int, default=2048, help="walks a round")
    ap.add_argument("--depth", type=int, default=28, help="states of a path at most")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--max-walks", type=int, default=None,
                    help="stop after this many walks (what a seed fixes, whatever the machine's load)")
    ap.add_argument("--capacity", type=int, default=400_000, help="cells the archive holds at most")
    ap.add_argument("--fields", default="", help="the fields of a cell (default: the scalar fields; none: no field)")
    ap.add_argument("--exclude", default="", help="fields left out of the default cell")
    ap.add_argument("--arrays", action="store_true", help="the default cell takes array fields too")
    ap.add_argument("--with-checks", action="store_true",
                    help="every invariant of the spec is checked, and a cell also takes which of the others "
                         "than --check a state violates (violations as stepping stones)")
    ap.add_argument("--resample", action="store_true",
                    help="a cell's state is a uniform sample of the states that reached it (reservoir), "
                         "not the first")
    ap.add_argument("--violation-weight", type=float, default=0.0,
                    help="with --with-checks, a cell is picked with its weight times (1 + the checks it "
                         "violates) to this power: states that break more checks are nearer a deep violation")
    ap.add_argument("--action-set", action="store_true",
                    help="a cell also takes the set of actions (by name) its path took: a spec-independent "
                         "record of which faults have happened")
    a = ap.parse_args()
    if a.max_walks is not None and a.max_walks < 1:
        ap.error("--max-walks must be 1 or more")

    cls = spec_class("kafka")
    spec = cls(cls.Params(brokers=a.brokers, min_isr=a.min_isr, election=a.election))
    model = Model(spec) if a.with_checks else Model(spec, check=[a.check])
    names = [c.name for c in model.invariants]
    target = np.uint64(1 << names.index(a.check))
    others = np.uint64(((1 << len(names)) - 1) & ~(1 << names.index(a.check)))
    with using_threads(1):
        kernels = compile_now(model, kernel_shapes(model), lambda _: None, 0.0)
        warm_up()
        elements = cell_elements(model.layout, a.fields, a.exclude, a.arrays)
        field_cells = cell_hasher(elements)
        def cells(words: np.ndarray, broken_checks: np.ndarray) -> np.ndarray:
            return field_cells(words) ^ (broken_checks * np.uint64(0xD6E8FEB86659FD93))
        print("cell fields:", ", ".join(sorted({e.field.name for e in elements})), f"({len(elements)} elements)")
        nw, nl, depth, cap = model.layout.nwords, len(model.labels), a.depth, a.capacity
        paths = np.zeros((cap, depth, nw), np.uint64)
        path_labels = np.zeros((cap, depth), np.int64)
        length = np.zeros(cap, np.int64)
        picked = np.zeros(cap, np.int64)
        reached = np.zeros(cap, np.int64)
        acts = np.zeros(cap, np.uint64)
        broken = np.zeros(cap, np.int64)
        action_bit = np.uint64(1) << np.array(model.label_action, np.uint64)
        index: dict[int, int] = {}
        initial = kernels.pack(model.initial)
        size = 0
        initial_broken = kernels.violations(initial) & others if a.with_checks else np.zeros(len(initial), np.uint64)
        for i, c in enumerate(cells(initial, initial_broken).tolist()):
            if c not in index:
                index[c] = size
                paths[size, 0] = initial[i]
                length[size] = 1
                broken[size] = int(np.bitwise_count(initial_broken[i]))
                size += 1
        rng = np.random.default_rng(a.seed)
        batch = a.batch
        buffers = kernels.buffers(batch)
        label_action = np.array(model.label_action, np.int64)
        blocked = np.uint64(model.action_constraint_bits)
        action_on = np.ones((batch, len(model.actions)), np.uint8)
        chosen = np.zeros(batch, np.int64)
        moved = np.zeros(batch, np.uint8)
        t0 = time.perf_counter()
        walks = generated = rounds = 0
        found = None
        while time.perf_counter() - t0 < a.time_limit and found is None and (a.max_walks is None or walks < a.max_walks):
            weight = (length[:size] < depth) / np.sqrt(1 + picked[:size])
            if a.violation_weight:
                weight = weight * (1.0 + broken[:size]) ** a.violation_weight
            pick = rng.choice(size, size=batch, p=weight / weight.sum())
            np.add.at(picked, pick, 1)
            walk_paths, walk_labels, step = paths[pick].copy(), path_labels[pick].copy(), length[pick] - 1
            walk_acts = acts[pick].copy()
            cur = walk_paths[np.arange(batch), step].copy()
            alive = np.arange(batch)
            behaviours = np.arange(walks, walks + batch, dtype=np.int64)
            walks += batch
            for k in range(a.segment):
                n = alive.size
                if n == 0:
                    break
                out = kernels.successors(cur[alive], 0, n, buffers)
                rows = out.valid[: valid_rows_part(out.labels, 0, n * nl, NO_LABEL, out.valid)]
                generated += rows.size
                bad = np.flatnonzero(kernels.violations(out.words[rows]) & target)
                if bad.size:
                    found = int(step[alive[int(rows[bad[0]]) // nl]]) + 2
                    break
                choose_successors(out.labels, out.words, cur[alive], out.props, blocked, label_action, action_on, nl,
                                  0, n, NO_LABEL, np.uint64(a.seed), behaviours[alive],
                                  np.full(n, rounds * 64 + k, np.int64), True, chosen, moved)
                draws = rng.random(rows.size) if a.resample else None
                broken_checks = (kernels.violations(out.words[rows]) & others if a.with_checks
                                 else np.zeros(rows.size, np.uint64))
                row_cells = cells(out.words[rows], broken_checks)
                row_broken = np.bitwise_count(broken_checks)
                row_acts = walk_acts[alive[rows // nl]] | action_bit[rows % nl]
                if a.action_set:
                    row_cells = row_cells ^ ((row_acts + np.uint64(0x632BE59BD9B4E019)) * np.uint64(0x9E3779B97F4A7C15))
                for j, c in enumerate(row_cells.tolist()):
                    r = int(rows[j])
                    i = alive[r // nl]
                    s = int(step[i])
                    if s + 1 >= depth:
                        continue
                    at = index.get(c)
                    if at is None:
                        if size == cap:
                            continue
                        at = index[c] = size
                        size += 1
                        reached[at] = 1
                    elif draws is None:
                        continue
                    else:
                        reached[at] += 1
                        if draws[j] * reached[at] >= 1:  # keep the old one with probability 1 - 1/reached
                            continue
                    paths[at, : s + 1] = walk_paths[i, : s + 1]
                    paths[at, s + 1] = out.words[r]
                    path_labels[at, :s] = walk_labels[i, :s]
                    path_labels[at, s] = r % nl
                    length[at] = s + 2
                    acts[at] = row_acts[j]
                    broken[at] = row_broken[j]
                go = (chosen[:n] >= 0) & (step[alive] + 2 < depth)
                movers, r = alive[go], chosen[:n][go]
                step[movers] += 1
                walk_paths[movers, step[movers]] = out.words[r]
                walk_labels[movers, step[movers] - 1] = r % nl
                cur[movers] = out.words[r]
                walk_acts[movers] |= action_bit[r % nl]
                alive = movers
            rounds += 1
        print(f"seed {a.seed}: found {found} (states), {time.perf_counter() - t0:.1f} s, {walks:,} walks, "
              f"archive {size:,} cells, {generated:,} successors generated")


if __name__ == "__main__":
    main()
