"""Benchmark: the same Kafka checks on the local engine and on Spark local[1] and local[2].

Each run is its own ``kraftcheck check ... --continue --json -`` process (after a warm-up that
compiles or loads the kernels), so wall times include Spark's start-up and the peak RSS of the
driver process is measured by the OS; Spark's Python workers are separate processes, whose peak
is sampled with psutil while the run goes, as is the CPU time of the run and all its processes.
Each row ends with the load average (1, 5, 15 minutes) when the run ended, its own processes
included: on a shared machine, only runs at a similar load compare.

    .venv/bin/python bench/spark.py                       # the recorded configurations
    .venv/bin/python bench/spark.py -- --min-isr-changes 0   # one configuration, every engine
    .venv/bin/python bench/spark.py --engines local,local[2] --rounds 2 --   # the default space,
        # the local engine and Spark local[2] alternating (A B A B), with their ratio per round
    .venv/bin/python bench/spark.py --engines local,local[2] --before /tmp/old/lib --   # and Spark
        # with an older version (its packages laid out as installed) after each Spark run
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import psutil

BASE = ["--brokers", "3", "--min-isr", "2"]
CONFIGS = [["--min-isr-changes", "0"], []]
ENGINES = [("local engine", []), ("spark local[1]", ["--engine", "spark", "--master", "local[1]"]),
           ("spark local[2]", ["--engine", "spark", "--master", "local[2]"])]


def _children_peak(process: psutil.Process, stop: threading.Event, peak: dict) -> None:
    """The largest summed RSS of the run's descendants (the JVM and Spark's Python workers), and
    the CPU time of the run and its descendants as last seen (up to 0.5 s of each process's last
    moments missed): on a loaded machine, CPU seconds compare versions more steadily than wall."""
    cpu: dict[int, float] = {}
    while not stop.is_set():
        try:
            children = process.children(recursive=True)
            total = sum(c.memory_info().rss for c in children)
            peak["children"] = max(peak["children"], total)
            for p in [process, *children]:
                times = p.cpu_times()
                cpu[p.pid] = times.user + times.system
        except psutil.Error:
            pass
        peak["cpu_s"] = sum(cpu.values())
        time.sleep(0.5)


# The runs start in a directory of their own: ``python -m`` puts the current directory first on
# sys.path, so started in a checkout (whose kraftcheck/ is a package) every run, drivers and
# Spark's Python workers alike, would import the checkout's code, not the --before version's.
RUN_DIR = tempfile.gettempdir()


def run(args: list[str], pythonpath: str = "") -> dict:
    cmd = [sys.executable, "-m", "kraftcheck", "check", *BASE, *args, "--quiet", "--trace-dir",
           "/tmp/kraftcheck-bench-traces"]
    env = {**os.environ, "PYTHONPATH": pythonpath} if pythonpath else None  # another version's code
    # warm-up
    subprocess.run(cmd + ["--max-depth", "2", "--compile", "now"], capture_output=True, env=env, cwd=RUN_DIR)
    start = time.perf_counter()
    child = subprocess.Popen(cmd + ["--continue", "--json", "-"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, cwd=RUN_DIR)
    peak, stop = {"children": 0, "cpu_s": 0.0}, threading.Event()
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
    report["cpu_s"] = peak["cpu_s"]
    return report


def _shuffled(report: dict) -> str:
    """The bytes a Spark run's shuffles wrote (its JSON report's figures), or "-"."""
    written = (report.get("spark") or {}).get("shuffle_write_bytes")
    return "-" if written is None else f"{written / 2**30:.2f} GiB"


def _own_arguments() -> list[str]:
    """The arguments before ``--`` (after it: kraftcheck's own options)."""
    return sys.argv[1:sys.argv.index("--")] if "--" in sys.argv else sys.argv[1:]


def _option(name: str, default: str) -> str:
    """``--name VALUE`` among the arguments before ``--``."""
    own = _own_arguments()
    return own[own.index(name) + 1] if name in own else default


OPTIONS = ("--engines", "--rounds", "--before")  # each takes a value; kraftcheck's own options go after --


def _check_arguments() -> None:
    """``-h``/``--help`` prints the usage above; an option it does not know is refused before any
    run starts (it was taken for a kraftcheck option and ignored)."""
    own = _own_arguments()
    if "-h" in own or "--help" in own:
        print(__doc__)
        sys.exit(0)
    for i in range(0, len(own), 2):
        if own[i] not in OPTIONS or i + 1 >= len(own):
            sys.exit(f"bench/spark.py: {own[i]!r} is not one of {', '.join(OPTIONS)} with a value; "
                     "kraftcheck's own options go after --")


def main() -> None:
    _check_arguments()
    configs = [sys.argv[sys.argv.index("--") + 1:]] if "--" in sys.argv else CONFIGS
    chosen = _option("--engines", "")  # e.g. "local,local[2]": the local engine and spark local[2]
    engines = [e for e in ENGINES if not chosen or e[0].split()[-1].replace("engine", "local") in chosen.split(",")]
    rounds = int(_option("--rounds", "1"))
    # --before DIR: each Spark engine also runs the kraftcheck installed (as site-packages lays it
    # out) in DIR, right after this version's, for a before/after comparison in one run
    before = _option("--before", "")
    engines = [(name, engine, "") for name, engine in engines]
    if before:
        engines = [e for name, engine, _ in engines
                   for e in [(name, engine, "")] + ([(f"{name} (before)", engine, before)] if engine else [])]
    print("| command | engine | result | distinct | generated | depth | wall s | CPU s | driver peak RSS "
          "| workers+JVM peak RSS | shuffled | load average |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for config in configs:
        for _ in range(rounds):  # the engines one after the other, round after round (A B A B)
            walls = []
            for name, engine, pythonpath in engines:
                r = run(config + engine, pythonpath)
                walls.append(r["wall_s"])
                print(f"| `kraftcheck check {' '.join(BASE + config)} --continue` | {name} | {r['result']} "
                      f"| {r['distinct_states']:,} | {r['states_generated']:,} | {r['depth']} | {r['wall_s']:.1f} "
                      f"| {r['cpu_s']:.1f} | {r['peak_rss_bytes'] / 2**30:.2f} GB "
                      f"| {r['children_peak_bytes'] / 2**30:.2f} GB | {_shuffled(r)} "
                      f"| {' '.join(f'{x:.1f}' for x in os.getloadavg())} |", flush=True)
            if len(walls) > 1:
                print(f"|  | ratio to the first | | | | | {' / '.join(f'{w / walls[0]:.2f}' for w in walls[1:])} "
                      "| | | | | |", flush=True)


if __name__ == "__main__":
    main()
