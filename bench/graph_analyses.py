"""Benchmark: ``--liveness`` and ``--availability`` against the exploration alone, on the Kafka model.

For each space, three ``kraftcheck check`` processes (after a warm-up that compiles or loads the
kernels): the exploration alone (``--continue``, every state), then ``--liveness`` and then
``--availability`` (both explore every state too, recording the graph as they go). The extra cost
of an analysis is the exploration's extra time for recording plus the analysis's own time (both
in the JSON); a variant with other settings records its graph in a pass of its own. Each
process's peak RSS comes from the OS (``wait4``). The target of issue 13: the analysis costs at
most the exploration's own time again (extra / exploration <= 1).

    .venv/bin/python bench/graph_analyses.py                       # the recorded configurations
    .venv/bin/python bench/graph_analyses.py -- --min-isr-changes 0   # one configuration
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

BASE = ["--brokers", "3", "--min-isr", "2"]
CONFIGS = [["--min-isr-changes", "0"], []]
TRACES = "/tmp/kraftcheck-bench-traces"


def run(args: list[str]) -> dict:
    cmd = [sys.executable, "-m", "kraftcheck", "check", *BASE, *args, "--quiet", "--trace-dir", TRACES]
    start = time.perf_counter()
    child = subprocess.Popen(cmd + ["--json", "-"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = child.stdout.read()
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({child.returncode}):\n{err}")
    report = json.loads(out)
    report["wall_s"] = time.perf_counter() - start
    report["peak_bytes"] = usage.ru_maxrss * 1024
    report["exit"] = child.returncode
    return report


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def main() -> None:
    configs = [sys.argv[sys.argv.index("--") + 1:]] if "--" in sys.argv else CONFIGS
    print("| space | run | states | transitions | exploring s | recording s | analysing s | extra / exploration "
          "| graph | peak RSS | verdicts |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for config in configs:
        subprocess.run([sys.executable, "-m", "kraftcheck", "check", *BASE, *config, "--max-depth", "2",
                        "--compile", "now", "--quiet", "--trace-dir", TRACES], capture_output=True)  # warm-up
        space = f"`{' '.join(BASE + config)}`"
        explore = run(config + ["--continue"])
        base_s = explore["elapsed_s"]
        print(f"| {space} | `--continue` (exploration alone) | {explore['distinct_states']:,} | "
              f"{explore['states_generated'] - explore['initial_states']:,} | {base_s:.1f} | - | - | - | - | "
              f"{gib(explore['peak_bytes'])} | {explore['result']} |", flush=True)
        report = run(config + ["--liveness"])
        live = report["liveness"]
        # the engine records the graph while it explores: the recording costs the difference
        recording = report["elapsed_s"] - base_s
        extra = recording + live["analysis_seconds"]
        verdicts = ", ".join(f"{p['property']}: {p['verdict']}" for p in live["properties"])
        print(f"| same | `--liveness` (both properties) | {live['states']:,} | {live['transitions']:,} | "
              f"{report['elapsed_s']:.1f} | {recording:+.1f} (in the exploration) | {live['analysis_seconds']:.1f} | "
              f"{extra / base_s:.2f}x | {gib(live['graph_bytes'])} | {gib(report['peak_bytes'])} | {verdicts} |",
              flush=True)
        report = run(config + ["--availability"])
        for v in report["availability"]["variants"]:
            own = v["recorded_by"] == "the check's exploration"
            recording = report["elapsed_s"] - base_s if own else v["build_seconds"]
            where = "(in the exploration)" if own else "(a pass of its own)"
            print(f"| same | `--availability`: {v['variant']} | {v['states']:,} | {v['transitions']:,} | "
                  f"{report['elapsed_s']:.1f} | {recording:+.1f} {where} | {v['analysis_seconds']:.1f} | "
                  f"{(recording + v['analysis_seconds']) / base_s:.2f}x | {gib(v['graph_bytes'])} | "
                  f"{gib(report['peak_bytes'])} (whole run) | {v['verdict']} |", flush=True)


if __name__ == "__main__":
    main()
