"""Benchmark: Two-Phase Commit on the engine (rm=9 by default) and on the reference explorer.

Each run is a separate ``kraftcheck check`` process, so its peak RSS is its own. Prints, for each:
distinct and generated states per second, exploration wall time (compile excluded), peak RSS and
bytes of peak memory per distinct state, then the engine/reference speed ratio.

    .venv/bin/python bench/two_phase.py [--engine-rm 9] [--reference-rm 5] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

TLC = {3: (288, 1146, 11), 5: (8832, 58146, 17), 7: (296448, 2744706, 23), 9: (10340352, 123558402, 29)}


def run(engine: str, rm: int, threads: int | None) -> dict:
    cmd = [sys.executable, "-m", "kraftcheck", "check", "--spec", "two_phase", "--param", f"rm={rm}",
           "--engine", engine, "--json", "-", "--quiet"]
    if threads:
        cmd += ["--threads", str(threads)]
    # Compile (or load the cached kernels) once first so that the measured run is warm.
    subprocess.run(cmd[:-1] + ["--max-states", "1", "--compile", "now"], capture_output=True)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    report = json.loads(out.stdout)
    counts = (report["distinct_states"], report["states_generated"], report["depth"])
    if rm in TLC and counts != TLC[rm]:
        sys.exit(f"rm={rm}: counts {counts} differ from TLC's {TLC[rm]}")
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine-rm", type=int, default=9)
    ap.add_argument("--reference-rm", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    rows = [("engine", args.engine_rm, run("engine", args.engine_rm, args.threads)),
            ("reference", args.reference_rm, run("reference", args.reference_rm, None))]
    print(f"{'explorer':<10} {'rm':>3} {'distinct':>12} {'generated':>13} {'wall s':>8} {'compile s':>9} "
          f"{'distinct/s':>12} {'generated/s':>13} {'peak RSS MB':>11} {'B/distinct':>10}")
    for name, rm, r in rows:
        wall = r["elapsed_s"]
        print(f"{name:<10} {rm:>3} {r['distinct_states']:>12,} {r['states_generated']:>13,} {wall:>8.2f} "
              f"{r['compile_s']:>9.2f} {r['distinct_states'] / wall:>12,.0f} {r['states_generated'] / wall:>13,.0f} "
              f"{r['peak_rss_bytes'] / 2**20:>11,.0f} {r['peak_rss_bytes'] / r['distinct_states']:>10,.1f}")
    e, ref = rows[0][2], rows[1][2]
    ratio = (e["distinct_states"] / e["elapsed_s"]) / (ref["distinct_states"] / ref["elapsed_s"])
    print(f"engine distinct states/s = {ratio:,.0f} x reference")


if __name__ == "__main__":
    main()
