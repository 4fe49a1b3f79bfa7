"""Benchmark: the Kafka model at the sizes the README promises.

Runs each configuration as its own ``kraftcheck check ... --continue`` process (after one warm-up
run that compiles or loads the kernels) and prints distinct states, states generated, depth,
exploration wall time (compile excluded), distinct states per second and peak RSS.

    .venv/bin/python bench/kafka.py                      # the recorded configurations
    .venv/bin/python bench/kafka.py -- --brokers 3 --min-isr 2 --records 2
"""

from __future__ import annotations

import json
import subprocess
import sys

CONFIGS = [
    ["--brokers", "3", "--min-isr", "2"],
    ["--brokers", "3", "--min-isr", "2", "--min-isr-changes", "0"],
    ["--brokers", "3", "--min-isr", "2", "--min-isr-changes", "0", "--records", "2"],
    ["--brokers", "3", "--min-isr", "2", "--min-isr-changes", "0", "--accept-stale-fetch-responses"],
    # four brokers does not fit in 24 GiB at default bounds: bounded so the benchmark ends
    ["--brokers", "4", "--min-isr", "3", "--time-limit", "150"],
]


def run(args: list[str]) -> dict:
    base = [sys.executable, "-m", "kraftcheck", "check", *args, "--quiet",
            "--trace-dir", "/tmp/kraftcheck-bench-traces"]
    subprocess.run(base + ["--max-states", "1", "--compile", "now"], capture_output=True)  # compile, or load the kernels
    cmd = base + ["--continue", "--json", "-"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1, 3):
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout)


def main() -> None:
    configs = [sys.argv[sys.argv.index("--") + 1:]] if "--" in sys.argv else CONFIGS
    print(f"{'configuration':<92} {'result':<9} {'distinct':>12} {'generated':>13} {'depth':>5} "
          f"{'wall s':>7} {'compile s':>9} {'distinct/s':>11} {'peak MB':>8}")
    for args in configs:
        r = run(args)
        print(f"{' '.join(args) + ' --continue':<92} {r['result']:<9} {r['distinct_states']:>12,} "
              f"{r['states_generated']:>13,} {r['depth']:>5} {r['elapsed_s']:>7.1f} {r['compile_s']:>9.1f} "
              f"{r['states_per_s']:>11,.0f} {r['peak_rss_bytes'] / 2**20:>8,.0f}")
        for v in r["violations"]:
            print(f"    violated {v['invariant']} (counterexample {v['depth']} states)")


if __name__ == "__main__":
    main()
