"""Time to first result, cold, whole process: kraftcheck against TLC on the same models, alternated.

What a user waits for the first time they check a model: the wall time of one whole
``kraftcheck check`` process against one whole TLC process (JVM start and parsing included), for
Two-Phase Commit rm=7 and rm=9 and EWD840 with N=7 (``bench/specs/ewd840.py``, a spec file of a
user's, against ``EWD840.tla``). The sides alternate (kraftcheck, TLC, kraftcheck, TLC, ...) on
this noisy machine and medians are compared. Both must find the same distinct states (TLC's
summary line ``N states generated, M distinct states found`` is parsed), or the script stops.

kraftcheck "cold": every run gets fresh, empty ``KRAFTCHECK_CACHE_DIR`` and ``NUMBA_CACHE_DIR``
and the default ``--compile background`` (the interpreted tier explores while the kernels
compile). "installed" (with ``--installed``): ``NUMBA_CACHE_DIR`` is shared and primed once per
model (the engine's generic kernels, the first tier's interpreter and the spec's functions cached,
as after a first use of the installation), only ``KRAFTCHECK_CACHE_DIR`` fresh, so the model's own kernels still compile.
Every kraftcheck run sets ``KRAFTCHECK_KEEP_COMPILING=0`` so that no background compile outlives
it into the next run: a run that ends before its compile stops the compile (and a user's next
run would have found more of it cached).

TLC is not part of kraftcheck: give a ``tla2tools.jar`` and the TLA+ Examples repository
(``specifications/transaction_commit`` for ``TwoPhase.tla``/``TCommit.tla``, set up as
``bench/versus_tlc.py`` does, and ``specifications/ewd840`` for ``EWD840.tla``; the model files
are written into a temporary copy). TLC runs as ``java -XX:+UseParallelGC -cp JAR tlc2.TLC
-workers 2``.

    .venv/bin/python bench/first_result_tlc.py --tla2tools /path/tla2tools.jar \\
        --examples /path/tlaplus-Examples [--runs 2] [--installed] [--model rm=9 ...] \\
        [--baseline /other/checkout/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from versus_tlc import run_tlc_model, two_phase_folder

EWD840_SPEC = str(Path(__file__).resolve().parent / "specs" / "ewd840.py") + ":EWD840"
MODELS = {"rm=7": ("two_phase", 7), "rm=9": ("two_phase", 9), "ewd840 N=7": ("ewd840", 7)}


def tlc_folder(examples: str, folder: Path, kind: str, n: int) -> tuple[str, str]:
    """Set ``folder`` up for TLC: the model's .tla files and a model file; (config, module)."""
    if kind == "two_phase":
        return two_phase_folder(str(Path(examples) / "specifications" / "transaction_commit"), folder, n), "TwoPhase"
    for name in ("EWD840.tla", "SyncTerminationDetection.tla"):  # EWD840 instantiates the second
        shutil.copy(Path(examples) / "specifications" / "ewd840" / name, folder / name)
    (folder / f"EWD840_{n}.cfg").write_text(  # the safety part of the Examples' EWD840.cfg
        f"CONSTANT N = {n}\nINIT Init\nNEXT Next\nINVARIANT TypeOK\nINVARIANT TerminationDetection\n"
        "INVARIANT Inv\nCHECK_DEADLOCK FALSE\n")
    return f"EWD840_{n}.cfg", "EWD840"


def kraftcheck_args(kind: str, n: int) -> list[str]:
    if kind == "two_phase":
        return ["--spec", "two_phase", "--param", f"rm={n}"]
    return ["--spec", EWD840_SPEC, "--param", f"n={n}"]


def run_kraftcheck(args: list[str], numba_cache: str | None, extra: tuple[str, ...] = (),
                   python: str = sys.executable) -> tuple[float, dict]:
    """One whole ``kraftcheck check`` process in a fresh temporary folder, with a fresh kernel
    cache (and a fresh numba cache unless one is given): its wall time and JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, KRAFTCHECK_CACHE_DIR=os.path.join(tmp, "kc-cache"),
                   NUMBA_CACHE_DIR=numba_cache or os.path.join(tmp, "numba"), KRAFTCHECK_KEEP_COMPILING="0")
        report = os.path.join(tmp, "report.json")
        cmd = [python, "-m", "kraftcheck", "check", *args, "--quiet", "--json", report,
               "--trace-dir", os.path.join(tmp, "traces"), *extra]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode != (3 if extra else 0):  # 3: incomplete, as the priming run's --max-states 1 is
            sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        with open(report) as f:
            return wall, json.load(f)


def medians(walls: dict[str, list[float]]) -> tuple[dict[str, float], dict[str, str]]:
    """Per side with runs: the median wall time, and a table cell of it with every run's time."""
    med = {k: statistics.median(v) for k, v in walls.items() if v}
    return med, {k: f"{med[k]:.2f} ({', '.join(f'{w:.2f}' for w in walls[k])})" for k in med}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tla2tools", required=True, help="path of TLC's tla2tools.jar")
    ap.add_argument("--examples", required=True, help="a checkout of the TLA+ Examples repository")
    ap.add_argument("--runs", type=int, default=2, help="runs of each side per model")
    ap.add_argument("--installed", action="store_true", help="also kraftcheck with a warm NUMBA_CACHE_DIR")
    ap.add_argument("--model", action="append", choices=sorted(MODELS), help="only this model (repeatable)")
    ap.add_argument("--baseline", metavar="PYTHON",
                    help="also run another kraftcheck installation (its venv's python), alternated with the rest")
    opts = ap.parse_args()
    rows = []
    for name in opts.model or list(MODELS):
        kind, n = MODELS[name]
        args = kraftcheck_args(kind, n)
        walls: dict[str, list[float]] = {"cold": [], "TLC": [], "installed": [], "baseline cold": [],
                                         "baseline installed": []}
        distinct, interpreted, generated = set(), [], {}
        with tempfile.TemporaryDirectory() as tmp:
            folder, numba = Path(tmp) / "tlc", os.path.join(tmp, "numba")
            base_numba = os.path.join(tmp, "numba-baseline")
            folder.mkdir()
            config, module = tlc_folder(opts.examples, folder, kind, n)
            if opts.installed:  # prime the shared numba cache, untimed; its kernel cache is thrown away
                # the second run loads (compiles, the first time) the first tier's interpreter, as
                # an installation's first run does
                for python, cache in [(sys.executable, numba)] + ([(opts.baseline, base_numba)] if opts.baseline else []):
                    run_kraftcheck(args, cache, ("--compile", "now", "--max-states", "1"), python)
                    run_kraftcheck(args, cache, ("--max-states", "1"), python)
            sides = ["cold", "TLC"] + (["installed"] if opts.installed else [])
            if opts.baseline:
                sides += ["baseline cold"] + (["baseline installed"] if opts.installed else [])
            for i in range(opts.runs):
                for side in sides:
                    if side == "TLC":
                        wall, (d, g, _) = run_tlc_model(opts.tla2tools, folder, config, module)
                    else:
                        python = opts.baseline if side.startswith("baseline") else sys.executable
                        cache = (base_numba if side.startswith("baseline") else numba) if side.endswith("installed") \
                            else None
                        wall, r = run_kraftcheck(args, cache, python=python)
                        d, g = r["distinct_states"], r["states_generated"]
                        interpreted.append(f"{side} {r.get('interpreted_states', '?'):,}")
                    walls[side].append(wall)
                    distinct.add(d)
                    generated[side if side == "TLC" else "kraftcheck"] = g
                    print(f"{name} run {i + 1}: {side} {wall:.2f} s, {d:,} distinct, {g:,} generated", flush=True)
                    if len(distinct) != 1:
                        sys.exit(f"{name}: kraftcheck and TLC find different distinct states: {distinct}")
        rows.append((name, distinct.pop(), walls, generated, interpreted))
    print(f"\nload: {os.getloadavg()}")
    print("| model | distinct states | kraftcheck cold median s (runs) | TLC median s (runs) | cold / TLC |"
          + (" kraftcheck installed median s (runs) | installed / TLC |" if opts.installed else ""))
    print("| --- | --- | --- | --- | --- |" + (" --- | --- |" if opts.installed else ""))
    for name, d, walls, generated, interpreted in rows:
        med, cell = medians(walls)
        line = f"| {name} | {d:,} | {cell['cold']} | {cell['TLC']} | {med['cold'] / med['TLC']:.2f} |"
        if opts.installed:
            line += f" {cell['installed']} | {med['installed'] / med['TLC']:.2f} |"
        print(line)
    if opts.baseline:
        print("\n| model | baseline cold median s (runs) | cold / baseline cold |"
              + (" baseline installed median s (runs) | installed / baseline installed |" if opts.installed else ""))
        print("| --- | --- | --- |" + (" --- | --- |" if opts.installed else ""))
        for name, d, walls, generated, interpreted in rows:
            med, cell = medians(walls)
            line = f"| {name} | {cell['baseline cold']} | {med['cold'] / med['baseline cold']:.2f} |"
            if opts.installed:
                line += f" {cell['baseline installed']} | {med['installed'] / med['baseline installed']:.2f} |"
            print(line)
    print()
    for name, d, walls, generated, interpreted in rows:
        print(f"{name}: states generated {generated}; interpreted states per kraftcheck run: {', '.join(interpreted)}")


if __name__ == "__main__":
    main()
