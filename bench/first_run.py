"""First-run times of the README's default check: kernel cache empty (cold) and compiled (warm).

Each measurement is the wall time of a fresh ``kraftcheck check --brokers 3 --min-isr 2`` process,
as a user waits for it. Cold: an empty ``KRAFTCHECK_CACHE_DIR`` and an empty ``NUMBA_CACHE_DIR``
(so the engine's own generic kernels and numba's cache of the spec functions are cold too).
Warm: after ``--compile now`` has built every kernel. Also the time ``--compile now`` takes cold,
which is what a run waited before kernels compiled in the background.

    .venv/bin/python bench/first_run.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# states the default check explores up to its first violation (docs/findings.md); 1,437 before
# the model had the metadata publish window
DEFAULT_CHECK_STATES = 487
CHECK = [sys.executable, "-m", "kraftcheck", "check", "--brokers", "3", "--min-isr", "2", "--quiet"]


def timed(args: list[str], env: dict[str, str], cwd: str) -> tuple[float, dict]:
    report = os.path.join(cwd, "report.json")
    start = time.perf_counter()
    done = subprocess.run(args + ["--json", report, "--trace-dir", os.path.join(cwd, "traces")], env=env, cwd=cwd,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr}")
    with open(report) as f:
        return wall, json.load(f)


def one_round() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, KRAFTCHECK_CACHE_DIR=os.path.join(tmp, "kernels"),
                   NUMBA_CACHE_DIR=os.path.join(tmp, "numba"))
        cold, report = timed(CHECK, env, tmp)
        assert report["distinct_states"] == DEFAULT_CHECK_STATES and report["result"] == "violated", report
        compile_now, _ = timed(CHECK + ["--compile", "now"], env, tmp)
        warm, report = timed(CHECK, env, tmp)
        assert report["interpreted_states"] == 0 and report["distinct_states"] == DEFAULT_CHECK_STATES
    return {"cold": cold, "compile_now_cold_kernels": compile_now, "warm": warm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rounds = [one_round() for _ in range(args.repeat)]
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        print(f"{key:28s} median {statistics.median(values):6.2f} s   runs: "
              + ", ".join(f"{v:.2f}" for v in values))


if __name__ == "__main__":
    main()
