"""Time to the first violation of each invariant under ``--simulate``, uniform and swarm, on the
Kafka model at 3, 4 and 5 brokers (min ISR 2, 3, 3; default bounds): the median over seeds.

Each run is a fresh ``kraftcheck check --simulate --continue --time-limit T --seed S`` process
(kernels compiled beforehand by a ``--compile now --max-states 1`` run, so only simulating is
timed); the times are the report's ``simulation.found_after_s`` (seconds of simulation before a
check's first violation was found; the depth probe before it is not counted, it takes well
under a second compiled). A check not found within T counts as "> T" and the median is taken
over the seeds with ">" where more than half are missing. Seeds and modes alternate.

    .venv/bin/python bench/simulation.py [--seeds 3] [--time-limit 30] [--brokers 3 4 5] [--extra '--election any']
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

SETTINGS = {3: 2, 4: 3, 5: 3}  # brokers -> min ISR


def run(args: list[str], cwd: str) -> dict:
    report = os.path.join(cwd, "report.json")
    done = subprocess.run([sys.executable, "-m", "kraftcheck", "check", *args, "--json", report, "--quiet",
                           "--trace-dir", os.path.join(cwd, "traces")], cwd=cwd, capture_output=True, text=True)
    if done.returncode not in (0, 1, 3):
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr}")
    with open(report) as f:
        return json.load(f)


def median_time(times: list[float | None], limit: float) -> str:
    found = sorted(t for t in times if t is not None)
    if len(found) * 2 <= len(times):
        return f"> {limit:g} s ({len(found)}/{len(times)})"
    padded = found + [float("inf")] * (len(times) - len(found))
    m = statistics.median(padded)
    return f"{m:.2f} s" + ("" if len(found) == len(times) else f" ({len(found)}/{len(times)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--brokers", type=int, nargs="+", default=[3, 4, 5])
    ap.add_argument("--extra", default="", help="more options for every check, e.g. '--election any'")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as cwd:
        for brokers in a.brokers:
            base = ["--brokers", str(brokers), "--min-isr", str(SETTINGS[brokers]), *a.extra.split()]
            run(base + ["--compile", "now", "--max-states", "1"], cwd)  # compiled before timing
            times: dict[str, dict[str, list]] = {"uniform": {}, "swarm": {}}
            stats: dict[str, list] = {"uniform": [], "swarm": []}
            checks: list[str] = []
            for seed in range(1, a.seeds + 1):
                for mode in ("uniform", "swarm"):
                    extra = ["--swarm"] if mode == "swarm" else []
                    r = run(base + ["--simulate", "--continue", "--time-limit", str(a.time_limit), "--seed",
                                    str(seed), *extra], cwd)
                    checks = r["checked"]
                    sim = r["simulation"]
                    stats[mode].append((sim["behaviours"], sim["states"], r["states_generated"], r["elapsed_s"]))
                    for check in checks:
                        times[mode].setdefault(check, []).append(sim["found_after_s"].get(check))
            print(f"\n## {brokers} brokers, min ISR {SETTINGS[brokers]}, default bounds {a.extra} "
                  f"({a.seeds} seeds, --time-limit {a.time_limit:g})\n")
            for mode in ("uniform", "swarm"):
                b, s, g, e = (sum(x[k] for x in stats[mode]) for k in range(4))
                print(f"- {mode}: {s / e:,.0f} states/s in behaviours, {g / e:,.0f} generated and checked/s, "
                      f"{b / e:,.0f} behaviours/s")
            print("\n| invariant | uniform | swarm |\n| --- | --- | --- |")
            never = [c for c in checks if not any(t is not None for m in times for t in times[m][c])]
            for check in [c for c in checks if c not in never]:
                print(f"| {check} | {median_time(times['uniform'][check], a.time_limit)} | "
                      f"{median_time(times['swarm'][check], a.time_limit)} |")
            print(f"\nnever found by any run: {', '.join(never) or '-'}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
