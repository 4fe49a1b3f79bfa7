"""The first tier's speed per state against TLC's (issue 29 item 3), alternated in one run.

What runs before a model's kernels are compiled: the bytecode tier (``Engine(compile="bytecode")``:
the spec's functions translated, run by the interpreter compiled once per installation) and the
Python tier (``Engine(compile="never")``, for a spec the bytecode does not translate), exploring
the whole model in this process (the interpreter loaded before the clock starts, as the engine
does); against TLC with one worker (``-workers 1``), whole process, JVM start and parsing
included (which favours kraftcheck by about a second). Rates are distinct states per second of
each side's time. The Python tier runs only on models it finishes within ``--python-limit``
seconds (it is 20-40x slower); TLC needs a ``tla2tools.jar`` and the TLA+ Examples (see
``bench/first_result_tlc.py``).

    .venv/bin/python bench/first_tier.py --tla2tools /path/tla2tools.jar --examples /path/Examples \\
        [--runs 2] [--model rm=6 --model "ewd840 N=6" ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from first_result_tlc import EWD840_SPEC, medians, tlc_folder
from versus_tlc import run_tlc_model

MODELS = {"rm=6": ("two_phase", 6), "rm=7": ("two_phase", 7), "ewd840 N=6": ("ewd840", 6),
          "ewd840 N=7": ("ewd840", 7)}


def explore(kind: str, n: int, mode: str, time_limit: float | None = None) -> tuple[float, int, str]:
    """Seconds of exploring the whole model with the engine's ``mode`` tier, its distinct states, status."""
    from kraftcheck import api
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.result import Options
    from kraftcheck.checker.model import Model
    spec = api.make_spec("two_phase", {"rm": n}) if kind == "two_phase" else api.make_spec(EWD840_SPEC, {"n": n})
    engine = Engine(compile=mode)
    t0 = time.perf_counter()
    r = engine.explore(Model(spec), Options(keep_going=True, time_limit=time_limit))
    return time.perf_counter() - t0, r.distinct_states, r.status


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tla2tools", required=True, help="path of TLC's tla2tools.jar")
    ap.add_argument("--examples", required=True, help="a checkout of the TLA+ Examples repository")
    ap.add_argument("--runs", type=int, default=2, help="runs of each side per model")
    ap.add_argument("--python-limit", type=float, default=20.0, help="seconds the Python tier may take per model")
    ap.add_argument("--model", action="append", choices=sorted(MODELS), help="only this model (repeatable)")
    opts = ap.parse_args()
    explore("two_phase", 1, "bytecode")  # load the interpreter and the engine's kernels, untimed
    rows = []
    for name in opts.model or list(MODELS):
        kind, n = MODELS[name]
        walls: dict[str, list[float]] = {"bytecode": [], "python": [], "TLC": []}
        distinct = set()
        python_rate = None
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "tlc"
            folder.mkdir()
            config, module = tlc_folder(opts.examples, folder, kind, n)
            for i in range(opts.runs):
                for side in ("bytecode", "TLC", "python"):
                    if side == "TLC":
                        wall, (d, _, _) = run_tlc_model(opts.tla2tools, folder, config, module, workers=1)
                    elif side == "python":
                        if i:  # once: it is far slower, and only its rate is wanted
                            continue
                        wall, d, status = explore(kind, n, "never", opts.python_limit)
                        python_rate = d / wall
                        print(f"{name}: python {wall:.2f} s, {d:,} distinct ({status})", flush=True)
                        continue
                    else:
                        wall, d, _ = explore(kind, n, "bytecode")
                    walls[side].append(wall)
                    distinct.add(d)
                    print(f"{name} run {i + 1}: {side} {wall:.2f} s, {d:,} distinct", flush=True)
            if len(distinct) != 1:
                sys.exit(f"{name}: the bytecode tier and TLC find different distinct states: {distinct}")
        rows.append((name, distinct.pop(), walls, python_rate))
    print(f"\nload: {os.getloadavg()}")
    print("| model | distinct states | bytecode tier s (runs) | TLC -workers 1 s (runs) | bytecode distinct/s | "
          "TLC distinct/s | Python tier distinct/s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, d, walls, python_rate in rows:
        med, cell = medians(walls)
        print(f"| {name} | {d:,} | {cell['bytecode']} | {cell['TLC']} | {d / med['bytecode']:,.0f} | "
              f"{d / med['TLC']:,.0f} | {python_rate:,.0f} |")


if __name__ == "__main__":
    main()
