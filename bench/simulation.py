"""Time to the first violation of each invariant under ``--simulate``, per strategy (uniform,
by-action, swarm), on the Kafka model at 3, 4 and 5 brokers (min ISR 2, 3, 3; default bounds):
the median over seeds.

Each run is a fresh ``kraftcheck check --simulate --continue --time-limit T --seed S`` process
(kernels compiled beforehand by a ``--compile now --max-states 1`` run, so only simulating is
timed); the times are the report's ``simulation.found_after_s`` (seconds of simulation before a
check's first violation was found; the depth probe before it is not counted, it takes well
under a second compiled), and the behaviours it took (``simulation.found_in_behaviour`` + 1: the
seed determines it, so it compares strategies on a loaded machine too). A check not found within T counts as "> T" and the median is taken
over the seeds with ">" where more than half are missing. Seeds and strategies alternate (seed 1
with each strategy, then seed 2, ...).

    .venv/bin/python bench/simulation.py [--seeds 3] [--time-limit 30] [--brokers 3 '4 --election any' 5]
        [--extra '--election any']
        [--strategies uniform swarm]

With ``--check NAME`` it prints instead one row per seed and strategy for that check: the
seconds and the behaviours to its first violation (the behaviours and the steps are what the
seed determines, whatever the machine's load), the behaviours run and the states they passed
through, e.g. the four-broker data loss on one thread:

    nice -n 10 .venv/bin/python bench/simulation.py --brokers '4 --election any' --seeds 5 --time-limit 60 \
        --extra '--threads 1' --check acked_writes_survive
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


def median_time(times: list[float | None], limit: float, unit: str = " s", fmt: str = ".2f") -> str:
    found = sorted(t for t in times if t is not None)
    if len(found) * 2 <= len(times):
        return f"> {limit:{fmt}}{unit} ({len(found)}/{len(times)})"
    padded = found + [float("inf")] * (len(times) - len(found))
    m = statistics.median(padded)
    return f"{m:{fmt}}{unit}" + ("" if len(found) == len(times) else f" ({len(found)}/{len(times)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--brokers", nargs="+", default=["3", "4", "5"],
                    help="broker counts, each optionally with its own options: 3 '4 --election any' 5")
    ap.add_argument("--extra", default="", help="more options for every check, e.g. '--election any'")
    ap.add_argument("--strategies", nargs="+", default=["uniform", "swarm"],
                    choices=["uniform", "by-action", "swarm"], help="the strategies compared (--strategy)")
    ap.add_argument("--check", help="one row per seed and strategy for this check instead of the medians")
    ap.add_argument("--only", action="store_true",
                    help="with --check: check only that invariant and stop at its first violation (--invariant "
                         "CHECK, no --continue), which spends no time on the others or after the find")
    a = ap.parse_args()
    if a.check:
        per_seed(a)
        return
    modes = a.strategies
    with tempfile.TemporaryDirectory() as cwd:
        for configuration in a.brokers:
            brokers, *own = configuration.split()
            brokers = int(brokers)
            extra = " ".join(own + a.extra.split())
            base = ["--brokers", str(brokers), "--min-isr", str(SETTINGS[brokers]), *extra.split()]
            run(base + ["--compile", "now", "--max-states", "1"], cwd)  # compiled before timing
            times: dict[str, dict[str, list]] = {m: {} for m in modes}
            behaviours: dict[str, dict[str, list]] = {m: {} for m in modes}
            stats: dict[str, list] = {m: [] for m in modes}
            checks: list[str] = []
            for seed in range(1, a.seeds + 1):
                for mode in modes:
                    r = run(base + ["--simulate", "--continue", "--time-limit", str(a.time_limit), "--seed",
                                    str(seed), "--strategy", mode], cwd)
                    checks = r["checked"]
                    sim = r["simulation"]
                    stats[mode].append((sim["behaviours"], sim["states"], r["states_generated"], r["elapsed_s"]))
                    for check in checks:
                        times[mode].setdefault(check, []).append(sim["found_after_s"].get(check))
                        b = sim["found_in_behaviour"].get(check)
                        behaviours[mode].setdefault(check, []).append(None if b is None else b + 1)
            print(f"\n## {brokers} brokers, min ISR {SETTINGS[brokers]}, default bounds {extra} "
                  f"({a.seeds} seeds, --time-limit {a.time_limit:g})\n")
            for mode in modes:
                b, s, g, e = (sum(x[k] for x in stats[mode]) for k in range(4))
                print(f"- {mode}: {s / e:,.0f} states/s in behaviours, {g / e:,.0f} generated and checked/s, "
                      f"{b / e:,.0f} behaviours/s")
            print("\n| invariant | " + " | ".join(f"{m}: s" for m in modes) + " | "
                  + " | ".join(f"{m}: behaviours" for m in modes) + " |\n| --- |" + " --- |" * 2 * len(modes))
            fewest = min(x[0] for m in modes for x in stats[m])  # behaviours of the shortest run
            never = [c for c in checks if not any(t is not None for m in times for t in times[m][c])]
            for check in [c for c in checks if c not in never]:
                print(f"| {check} | " + " | ".join(median_time(times[m][check], a.time_limit) for m in modes) + " | "
                      + " | ".join(median_time(behaviours[m][check], fewest, "", ",.0f") for m in modes) + " |")
            print(f"\nnever found by any run: {', '.join(never) or '-'}")
            sys.stdout.flush()


def per_seed(a: argparse.Namespace) -> None:
    """One row per seed and strategy for check ``a.check``, printed as each run ends."""
    with tempfile.TemporaryDirectory() as cwd:
        for configuration in a.brokers:
            brokers, *own = configuration.split()
            base = ["--brokers", brokers, "--min-isr", str(SETTINGS[int(brokers)]), *own, *a.extra.split()]
            run(base + ["--compile", "now", "--max-states", "1"], cwd)  # compiled before timing
            how = f"--invariant {a.check}" if a.only else "--continue"
            print(f"\n#### `kraftcheck check {' '.join(base)} --simulate {how} --time-limit {a.time_limit:g} "
                  f"--seed S --strategy X`: {a.check}\n")
            print("| strategy | seed | seconds to find | behaviours to find | behaviours run | states in behaviours "
                  "| trace states |\n| --- | --- | --- | --- | --- | --- | --- |")
            for mode in a.strategies:
                for seed in range(1, a.seeds + 1):
                    how = ["--invariant", a.check] if a.only else ["--continue"]
                    r = run(base + ["--simulate", *how, "--time-limit", str(a.time_limit), "--seed",
                                    str(seed), "--strategy", mode], cwd)
                    sim = r["simulation"]
                    t = sim["found_after_s"].get(a.check)
                    b = sim["found_in_behaviour"].get(a.check)
                    length = next((v["depth"] for v in r.get("violations", []) if v.get("invariant") == a.check), None)
                    print(f"| {mode} | {seed} | {'-' if t is None else f'{t:.2f}'} | "
                          f"{'-' if b is None else f'{b + 1:,}'} | {sim['behaviours']:,} | {sim['states']:,} | "
                          f"{'-' if length is None else length} |")
                    sys.stdout.flush()


if __name__ == "__main__":
    main()
