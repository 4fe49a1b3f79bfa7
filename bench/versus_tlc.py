"""Benchmark: the engine against TLC on Two-Phase Commit, alternated in one run.

The machine is noisy (its speed drifts by a factor of 1.5 within minutes), so TLC and the engine
run alternately, engine first and last (engine, TLC, engine, TLC, ..., engine), and the ratio of
their medians is reported. Both must print the same counts (TLC's summary lines are parsed), or
the script stops.

TLC is not part of kraftcheck and is not installed by it: give the path of a ``tla2tools.jar``
and a folder holding Lamport's ``TwoPhase.tla`` and ``TCommit.tla`` (the TLA+ Examples
repository, specifications/transaction_commit). The script writes its own model file
``TwoPhase<rm>.cfg`` into a temporary copy of that folder (RM a set of model values, INIT TPInit,
NEXT TPNext, INVARIANT TPTypeOK) and runs ``java -XX:+UseParallelGC -cp JAR tlc2.TLC -workers 2``
there; the wall time is TLC's own process, JVM start and parsing included (a second or two of
several minutes). The engine's time is its exploration (``elapsed_s``; compile excluded, loaded
from numba's cache after a warm-up run), in its own ``kraftcheck check`` process.

    .venv/bin/python bench/versus_tlc.py --tla2tools /path/tla2tools.jar --specs /path/transaction_commit \\
        [--rm 9] [--tlc-runs 2]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from versus import run  # bench/versus.py: one ``kraftcheck check --json`` process, warmed up if asked

SUMMARY = re.compile(r"([\d,]+) states generated, ([\d,]+) distinct states found, 0 states left on queue")
DEPTH = re.compile(r"depth of the complete state graph search is (\d+)")


def run_engine(rm: int, warm: bool) -> tuple[float, tuple[int, int, int]]:
    r = run(sys.executable, ["--spec", "two_phase", "--param", f"rm={rm}"], warm)
    return r["elapsed_s"], (r["distinct_states"], r["states_generated"], r["depth"])


def two_phase_folder(specs: str, folder: Path, rm: int) -> str:
    """Copy Lamport's TwoPhase.tla and TCommit.tla from ``specs`` into ``folder``, write the model
    file for ``rm`` resource managers there, and return its name."""
    for name in ("TwoPhase.tla", "TCommit.tla"):
        shutil.copy(Path(specs) / name, folder / name)
    rms = ", ".join(f"r{i}" for i in range(1, rm + 1))
    (folder / f"TwoPhase{rm}.cfg").write_text(
        f"CONSTANT RM = {{{rms}}}\nINIT TPInit\nNEXT TPNext\nINVARIANT TPTypeOK\n")
    return f"TwoPhase{rm}.cfg"


def run_tlc_model(jar: str, folder: Path, config: str, module: str, workers: int = 2
                  ) -> tuple[float, tuple[int, int, int]]:
    """One TLC process (``workers`` worker threads) on ``module`` with ``config`` in ``folder``:
    its wall time and (distinct, generated, depth) from its summary lines."""
    states = folder / "states"
    shutil.rmtree(states, ignore_errors=True)  # TLC's fingerprint and queue files of the last run
    cmd = ["java", "-XX:+UseParallelGC", "-cp", jar, "tlc2.TLC", "-workers", str(workers), "-config", config, module]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=folder)
    wall = time.perf_counter() - t0
    summary, depth = SUMMARY.search(out.stdout), DEPTH.search(out.stdout)
    if out.returncode != 0 or not summary or not depth:
        sys.exit(f"TLC failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-2000:]}")
    generated, distinct = (int(x.replace(",", "")) for x in summary.groups())
    return wall, (distinct, generated, int(depth.group(1)))


def run_tlc(jar: str, folder: Path, rm: int) -> tuple[float, tuple[int, int, int]]:
    return run_tlc_model(jar, folder, f"TwoPhase{rm}.cfg", "TwoPhase")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tla2tools", required=True, help="path of TLC's tla2tools.jar")
    ap.add_argument("--specs", required=True, help="folder with TwoPhase.tla and TCommit.tla")
    ap.add_argument("--rm", type=int, default=9)
    ap.add_argument("--tlc-runs", type=int, default=2, help="TLC runs (the engine runs one more)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        two_phase_folder(args.specs, folder, args.rm)
        walls: dict[str, list[float]] = {"engine": [], "TLC": []}
        counts = set()
        for i in range(2 * args.tlc_runs + 1):
            who = "engine" if i % 2 == 0 else "TLC"
            wall, c = run_engine(args.rm, warm=i == 0) if who == "engine" else \
                run_tlc(args.tla2tools, folder, args.rm)
            walls[who].append(wall)
            counts.add(c)
            print(f"run {i + 1}: {who} {wall:.2f} s, counts {c}", flush=True)
            if len(counts) != 1:
                sys.exit(f"the engine and TLC count differently: {counts}")
    distinct, generated, depth = counts.pop()
    e, t = statistics.median(walls["engine"]), statistics.median(walls["TLC"])
    print(f"\nTwo-Phase Commit rm={args.rm}: {distinct:,} distinct, {generated:,} generated, depth {depth}")
    print("| checker | runs (wall s) | median wall s |")
    print("| --- | --- | --- |")
    for who, m in (("kraftcheck engine", e), ("TLC, 2 workers", t)):
        runs = ", ".join(f"{w:.1f}" for w in walls["engine" if who.startswith("kraft") else "TLC"])
        print(f"| {who} | {runs} | {m:.2f} |")
    print(f"\nTLC / engine: {t / e:.1f}x")


if __name__ == "__main__":
    main()
