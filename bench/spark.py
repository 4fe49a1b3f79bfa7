"""Benchmark: the same Kafka checks on the local engine and on Spark local[1] and local[2].

Each run is its own ``kraftcheck check ... --continue --json -`` process (after a warm-up that
compiles or loads the kernels), so wall times include Spark's start-up and the peak RSS of the
driver process is measured by the OS; Spark's Python workers are separate processes, whose peak
is sampled with psutil while the run goes.

    .venv/bin/python bench/spark.py                       # the recorded configurations
    .venv/bin/python bench/spark.py -- --min-isr-changes 0   # one configuration, every engine
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import psutil

BASE = ["--brokers", "3", "--min-isr", "2"]
CONFIGS = [["--min-isr-changes", "0"], []]
ENGINES = [("local engine", []), ("spark local[1]", ["--engine", "spark", "--master", "local[1]"]),
           ("spark local[2]", ["--engine", "spark", "--master", "local[2]"])]


def _children_peak(process: psutil.Process, stop: threading.Event, peak: dict) -> None:
    """The largest summed RSS of the run's descendants (the JVM and Spark's Python workers)."""
    while not stop.is_set():
        try:
            total = sum(c.memory_info().rss for c in process.children(recursive=True))
            peak["children"] = max(peak["children"], total)
        except psutil.Error:
            pass
        time.sleep(0.5)


def run(args: list[str]) -> dict:
    cmd = [sys.executable, "-m", "kraftcheck", "check", *BASE, *args, "--quiet", "--trace-dir",
           "/tmp/kraftcheck-bench-traces"]
    subprocess.run(cmd + ["--max-depth", "2", "--compile", "now"], capture_output=True)  # warm-up
    start = time.perf_counter()
    child = subprocess.Popen(cmd + ["--continue", "--json", "-"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    peak, stop = {"children": 0}, threading.Event()
    sampler = threading.Thread(target=_children_peak, args=(psutil.Process(child.pid), stop, peak))
    sampler.start()
    out, err = child.communicate()
    stop.set()
    sampler.join()
    if child.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({child.returncode}):\n{err}")
    report = json.loads(out)
    report["wall_s"] = time.perf_counter() - start
    report["children_peak_bytes"] = peak["children"]
    return report


def main() -> None:
    configs = [sys.argv[sys.argv.index("--") + 1:]] if "--" in sys.argv else CONFIGS
    print("| command | engine | result | distinct | generated | depth | wall s | driver peak RSS | workers+JVM peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for config in configs:
        for name, engine in ENGINES:
            r = run(config + engine)
            print(f"| `kraftcheck check {' '.join(BASE + config)} --continue` | {name} | {r['result']} "
                  f"| {r['distinct_states']:,} | {r['states_generated']:,} | {r['depth']} | {r['wall_s']:.1f} "
                  f"| {r['peak_rss_bytes'] / 2**30:.2f} GB | {r['children_peak_bytes'] / 2**30:.2f} GB |", flush=True)


if __name__ == "__main__":
    main()
