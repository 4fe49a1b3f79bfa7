"""Benchmark: issue 9's sizes on one machine (levels on disk, compact visited set, fingerprints).

Each configuration runs as its own ``kraftcheck check ... --continue --json -`` process after a
warm-up run that compiles or loads its kernels; a configuration with levels on disk gets a fresh
``--checkpoint`` directory under ``--scratch`` (removed afterwards). Prints one Markdown table:
result, counts, exploration wall time, the process's peak RSS, and peak RSS per distinct state
(the whole process: interpreter, numba, visited set, buffers), then the checks that the exact and
fingerprint runs of one space agree on every verdict and shortest-trace length, the time of
levels on disk against levels in memory, and symmetry reduction against the unreduced
``--election any`` space (same verdicts and lengths, fewer states: orbits). Each run's JSON report
is also written to ``--scratch``.

    .venv/bin/python bench/scale.py                    # every configuration below
    .venv/bin/python bench/scale.py --only default     # the configurations whose name has 'default'
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

RECORDS_2 = ["--brokers", "3", "--min-isr", "2", "--records", "2"]
DEFAULT = ["--brokers", "3", "--min-isr", "2"]
FOUR_BROKERS = ["--brokers", "4", "--min-isr", "3", "--election", "any", "--symmetry"]
# (name, check arguments, levels on disk)
CONFIGS = [
    ("default, in memory", DEFAULT, False),
    ("default, levels on disk", DEFAULT, True),
    ("records 2, exact, levels on disk", RECORDS_2, True),
    ("records 2, fingerprints, levels on disk", RECORDS_2 + ["--fingerprints"], True),
    ("election any", DEFAULT + ["--election", "any"], False),
    ("election any, symmetry", DEFAULT + ["--election", "any", "--symmetry"], False),
    # about 600 M states: exact in about one word a state (--compact), where the packed set would need 18 GB
    ("two fences and two ISR shrinks, exact (compact), levels on disk",
     DEFAULT + ["--fences", "2", "--isr-shrinks", "2", "--compact"], True),
    # about 0.5 G orbits of 32 bytes each: exact would not fit in 16 GB, fingerprints do
    ("four brokers, election any, symmetry, fingerprints, levels on disk", FOUR_BROKERS + ["--fingerprints"], True),
]


def run(args: list[str], on_disk: bool, scratch: Path) -> dict:
    base = [sys.executable, "-m", "kraftcheck", "check", *args, "--quiet",
            "--trace-dir", str(scratch / "traces")]
    warm = subprocess.run(base + ["--max-states", "1", "--compile", "now"], capture_output=True, text=True)
    if warm.returncode not in (0, 1, 3):
        sys.exit(f"warm-up failed ({warm.returncode}):\n{warm.stderr}")
    work = Path(tempfile.mkdtemp(prefix="kraftcheck-scale-", dir=scratch)) if on_disk else None
    cmd = base + ["--continue", "--json", "-"] + (["--checkpoint", str(work)] if work else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    if out.returncode not in (0, 1, 3):
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    report = json.loads(out.stdout)
    # kept beside the checkpoints: a long run's figures must survive a crash of this script
    (scratch / ("scale" + "".join("_" + a.strip("-") for a in args) + ".json")).write_text(out.stdout)
    report["command"] = "kraftcheck check " + " ".join(args) + " --continue" + (" --checkpoint DIR" if work else "")
    return report


def verdicts(report: dict) -> dict[str, int]:
    return {v["invariant"]: v["depth"] for v in report["violations"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the configurations whose name contains this")
    parser.add_argument("--scratch", default=tempfile.gettempdir(), help="where checkpoint directories go")
    opts = parser.parse_args()
    scratch = Path(opts.scratch)
    reports = {}
    print("| configuration | command | result | distinct | generated | depth | wall s | peak RSS | "
          "bytes / distinct state |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, args, on_disk in CONFIGS:
        if opts.only and opts.only not in name:
            continue
        r = reports[name] = run(args, on_disk, scratch)
        print(f"| {name} | `{r['command']}` | {r['result']} | {r['distinct_states']:,} | "
              f"{r['states_generated']:,} | {r['depth']} | {r['elapsed_s']:.1f} | "
              f"{r['peak_rss_bytes'] / 2**30:.2f} GiB | {r['peak_rss_bytes'] / max(1, r['distinct_states']):.1f} |",
              flush=True)
    print()
    for a, b in (("records 2, exact, levels on disk", "records 2, fingerprints, levels on disk"),
                 ("default, in memory", "default, levels on disk"),
                 ("election any", "election any, symmetry")):
        if a in reports and b in reports:
            same_counts = reports[a]["distinct_states"] == reports[b]["distinct_states"]
            same = verdicts(reports[a]) == verdicts(reports[b])
            print(f"- {a} / {b}: same verdicts and shortest-trace lengths: {same}; same counts: {same_counts} "
                  f"({len(verdicts(reports[a]))} checks violated); time ratio "
                  f"{reports[b]['elapsed_s'] / reports[a]['elapsed_s']:.2f}")
    for name, r in reports.items():
        if r.get("collision_probability"):
            p = r["collision_probability"]
            print(f"- {name}: collision probability optimistic {p['optimistic']:.2e}, "
                  f"from the fingerprints {p['from_fingerprints']:.2e}")


if __name__ == "__main__":
    main()
