"""Benchmark: this checkout's engine against another checkout's, on the same checks, in one run.

The machine is noisy, so the two are run alternately (this, other, this, other...) and compared
by their medians: a ratio measured this way is what a change did, a single wall time is not.
Every run is its own ``kraftcheck check ... --json -`` process after a warm-up that compiles or
loads its kernels; counts must be identical between the two, or the script stops.

    git worktree add --detach ../baseline <commit>
    (cd ../baseline && python3 -m venv .venv && .venv/bin/pip install -q -e .)
    .venv/bin/python bench/versus.py --baseline ../baseline/.venv/bin/python [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

CHECKS = {
    "two_phase rm=9": ["--spec", "two_phase", "--param", "rm=9"],
    "kafka default --continue": ["--brokers", "3", "--min-isr", "2", "--continue"],
}


def run(python: str, args: list[str], warm: bool) -> dict:
    base = [python, "-m", "kraftcheck", "check", *args, "--quiet", "--trace-dir", "/tmp/kraftcheck-versus-traces"]
    # run outside both checkouts: ``python -m`` puts the working directory first on sys.path, and
    # a checkout's own kraftcheck/ there would shadow the other interpreter's installed one
    where = tempfile.gettempdir()
    if warm:
        subprocess.run(base + ["--max-states", "1", "--compile", "now"], capture_output=True, cwd=where)
    out = subprocess.run(base + ["--json", "-"], capture_output=True, text=True, cwd=where)
    if out.returncode not in (0, 1) or not out.stdout.strip():
        sys.exit(f"{' '.join(base)} failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the other checkout's Python (its venv's bin/python)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check", action="append", choices=sorted(CHECKS),
                        help="run only this check (repeatable; default: all)")
    opts = parser.parse_args()
    pythons = {"this": sys.executable, "baseline": opts.baseline}
    print("| check | engine | distinct | median wall s (runs) | median peak RSS | wall / baseline |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, args in CHECKS.items():
        if opts.check and name not in opts.check:
            continue
        walls: dict[str, list[float]] = {k: [] for k in pythons}
        rss: dict[str, list[int]] = {k: [] for k in pythons}
        counts = set()
        for i in range(opts.repeat):
            for who, python in pythons.items():
                r = run(python, args, warm=i == 0)
                walls[who].append(r["elapsed_s"])
                rss[who].append(r["peak_rss_bytes"])
                counts.add((r["distinct_states"], r["states_generated"], r["depth"]))
        if len(counts) != 1:
            sys.exit(f"{name}: the two engines count differently: {counts}")
        distinct = counts.pop()[0]
        base_wall = statistics.median(walls["baseline"])
        for who in pythons:
            wall = statistics.median(walls[who])
            runs = ", ".join(f"{w:.1f}" for w in walls[who])
            print(f"| {name} | {who} | {distinct:,} | {wall:.2f} ({runs}) | "
                  f"{statistics.median(rss[who]) / 2**30:.2f} GiB | {wall / base_wall:.2f} |", flush=True)


if __name__ == "__main__":
    main()
