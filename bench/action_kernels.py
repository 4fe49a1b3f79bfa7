"""The compiled action kernels alone: each action's share of one chunk, and the cost a state at
several chunk sizes, on the Kafka model's reachable states.

The engine's distinct-successor path (``Kernels.distinct_successors``) runs every action's kernel
over a chunk of unpacked states (a large layout's all in one call, a batch of states at a time);
here each runs alone on one chunk, and then all in one call, timed by the thread's CPU (the
minimum of ``--rounds``, the actions alternated), so a change to the kernels can be weighed
without the visited set, the invariants and Python around them::

    KRAFTCHECK_THREADS=1 .venv/bin/python bench/action_kernels.py [--states 12000] [--rounds 9]
        [--chunks 500,1500,12000,48000] [--param brokers=3 --param min_isr=2 ...]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.explore.compiled import Kernels, RepeatTables
from kraftcheck.checker.kernels.table_expand import TableExpansion
from kraftcheck.checker.kernels.successor_rows import TALLY_LIMIT, TALLY_STOPPED
from kraftcheck.checker.model import Model
from kraftcheck.pipeline import make_spec


def reachable(kernels: Kernels, wanted: int) -> np.ndarray:
    """The first ``wanted`` states of a breadth-first search, packed."""
    level = kernels.pack(kernels.model.initial)
    levels, total = [level], level.shape[0]
    while total < wanted and level.shape[0]:
        out = kernels.successors(level)
        rows = np.flatnonzero(out.labels[:level.shape[0] * kernels.nlabels] != NO_LABEL)
        level = np.unique(out.words[rows], axis=0)
        levels.append(level)
        total += level.shape[0]
    return np.concatenate(levels)[:wanted].copy()


def _calls(kernels: Kernels) -> list:
    """Per action, a call running it alone on a chunk: a large layout's actions through the
    generic kernel (``TableExpansion``, here of one action each; the engine runs them as one),
    a small layout's through their own expand kernels."""
    if kernels._expansion is None:
        return [lambda *a, expand=expand, args=args: expand(a[0], a[1], a[2], kernels._scratch[0], *a[3:], *args)
                for expand, args in kernels._expanders]
    return [TableExpansion([expand], [args]) for expand, args in kernels._expanders]


def time_actions(kernels: Kernels, states: np.ndarray, rounds: int, together: bool = False) -> list[float]:
    """Each action kernel's thread CPU on ``states`` (one chunk), the minimum of ``rounds``; with
    ``together``, a large layout's actions as the engine runs them, in one call (one figure)."""
    n = states.shape[0]
    out = kernels.buffers(n)
    tables = RepeatTables(1, n * kernels.nlabels, kernels.nwords, kernels.tally_width)
    kernels.module.unpack_range(states, 0, n, 0, out.flat, kernels.const_values)
    err = np.full(3, -1, np.int64)
    err[2] = 0
    calls = [kernels._expansion] if together else _calls(kernels)
    best = [float("inf")] * len(calls)
    for _ in range(rounds):
        for ai, call in enumerate(calls):
            tally = tables.tally[0]
            tally[:] = 0
            tally[TALLY_LIMIT] = tables.limit(tables.most)
            tally[TALLY_STOPPED] = -1
            start = time.thread_time()
            call(out.flat, 0, n, out.dense_words, out.dense_hashes, out.labels, out.props, err, kernels.const_values,
                 True, states, 0, tables.tables[0], tables.most - 1, tables.next_generation(), tally)
            best[ai] = min(best[ai], time.thread_time() - start)
            if tally[TALLY_STOPPED] >= 0:
                raise SystemExit("the repeat table filled up: give fewer --states")
            if err[0] >= 0:
                raise SystemExit(f"the kernels reported an error at state {err[0]} ({err[1]})")
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="kafka")
    ap.add_argument("--param", action="append", default=[], help="KEY=VALUE (default brokers=3 min_isr=2)")
    ap.add_argument("--states", type=int, default=12000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--chunks", default="500,1500,12000,48000")
    opts = ap.parse_args()
    params = {"brokers": 3, "min_isr": 2} if opts.spec == "kafka" and not opts.param else {}
    for p in opts.param:
        key, value = p.split("=", 1)
        params[key] = int(value) if value.lstrip("-").isdigit() else value
    kernels = Kernels(Model(make_spec(opts.spec, params)))
    chunks = [int(c) for c in opts.chunks.split(",") if c]
    states = reachable(kernels, max(chunks + [opts.states]))
    per_action = time_actions(kernels, states[:opts.states], opts.rounds)
    print(f"| action (instances) | ms on {opts.states:,} states |")
    print("| --- | --- |")
    for (expand, _), action, ms in zip(kernels._expanders, kernels.model.actions, per_action):
        print(f"| {action.name} ({action.instances}) | {1e3 * ms:.2f} |")
    print(f"| all, each alone | {1e3 * sum(per_action):.2f} |")
    if kernels._expansion is not None:
        print(f"| all, in one call (the engine's way) | {1e3 * time_actions(kernels, states[:opts.states], opts.rounds, True)[0]:.2f} |")
    print()
    together = kernels._expansion is not None
    for n in chunks:
        total = sum(sum(time_actions(kernels, states[a:a + n], max(1, opts.rounds // 3), together))
                    for a in range(0, states.shape[0] - n + 1, n))
        covered = (states.shape[0] // n) * n
        print(f"chunks of {n:,} states: {1e9 * total / covered:.0f} ns a state, every action")


if __name__ == "__main__":
    main()
