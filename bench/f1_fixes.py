"""Which candidate fix closes F1? Every fix switch and every pair, at the default bounds.

Each configuration is one ``kraftcheck check --brokers 3 --min-isr 2 --continue`` run (the whole
state space, the shortest counterexample of every check that fails), so the table shows both the
verdict and what survives each fix. The durability checks (``acked_writes_survive`` and the
``*_hold_committed_log`` family) are F1's data loss; ``hwm_advances_only_with_min_isr`` is the
strict rule as KIP-966 states it, which config lag alone (F1a) breaks.

    .venv/bin/python bench/f1_fixes.py [--print-traces] [--only NAME ...] [extra check options, e.g. --records 2]

``--only NAME`` (repeatable) runs only the configurations of that name (as in the table's first
column, e.g. ``--only "await metadata"``); the default is all of them. ``--scratch DIR`` keeps
each run's levels on disk in a fresh ``--checkpoint`` directory under DIR (removed afterwards) and
its JSON report beside it: the ``--records 2`` spaces do not fit in memory with their levels.

With ``--replay-known-changes`` among the extra options (docs/findings.md F5) the F5 fix
``--fix-ignore-replayed-change`` joins the fixes, and the configurations are: no fix, every fix
alone, and the F5 fix with each F1 fix and with each pair of F1 fixes. Prints a Markdown table (for docs/findings.md) and, with ``--print-traces``, the action sequence
of every shortest counterexample. Trace files go to /tmp/kraftcheck-f1-fixes/<configuration>_<its options>/.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
BASE = ["--brokers", "3", "--min-isr", "2", "--continue", "--compile", "now"]
FIXES = {
    "epoch bump": "--fix-epoch-bump-on-min-isr-change",
    "await metadata": "--fix-await-metadata",
    "config first": "--fix-config-before-topic",
    "min ISR in partition state": "--fix-min-isr-in-partition-state",
}
DATA_LOSS = ("acked_writes_survive", "leader_holds_committed_log", "isr_members_hold_committed_log",
             "elr_members_hold_committed_log", "reads_are_repeatable")


F5_FIX = ("ignore replayed change", "--fix-ignore-replayed-change")


def configurations(replay: bool = False) -> list[tuple[str, list[str]]]:
    if replay:
        name, flag = F5_FIX
        return ([("no fix", [])] + [(n, [f]) for n, f in FIXES.items()] + [(name, [flag])]
                + [(f"{name} + {n}", [flag, f]) for n, f in FIXES.items()]
                + [(f"{name} + {a} + {b}", [flag, FIXES[a], FIXES[b]])
                   for a, b in itertools.combinations(FIXES, 2)])
    out = [("no fix", [])]
    out += [(name, [flag]) for name, flag in FIXES.items()]
    out += [(f"{a} + {b}", [FIXES[a], FIXES[b]]) for a, b in itertools.combinations(FIXES, 2)]
    return out


def run(name: str, args: list[str], scratch: Optional[Path] = None) -> dict:
    # the extra check options name the files too: runs with other options do not overwrite them
    slug = name.replace(" ", "_").replace("+", "and") + "_".join([""] + [a.strip("-") for a in args])
    trace_dir = Path("/tmp/kraftcheck-f1-fixes") / slug
    cmd = [sys.executable, "-m", "kraftcheck", "check", *BASE, *args, "--json", "-", "--quiet",
           "--trace-dir", str(trace_dir)]
    work = Path(tempfile.mkdtemp(prefix="f1-fixes-", dir=scratch)) if scratch else None
    if work is not None:
        cmd += ["--checkpoint", str(work)]
    start = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    if out.returncode not in (0, 1) or not out.stdout.strip():
        sys.exit(f"{' '.join(cmd)} exited {out.returncode} without a report:\n{out.stderr}")
    if scratch is not None:
        (scratch / f"f1-fixes-{slug}.json").write_text(out.stdout)
    report = json.loads(out.stdout)
    report["wall_s"] = time.perf_counter() - start
    return report


def cell(report: dict, checks: tuple[str, ...]) -> str:
    hits = [v for v in report["violations"] if v["invariant"] in checks]
    if not hits:
        return "holds"
    shortest = min(v["depth"] for v in hits)
    return f"violated ({len(hits)}, shortest {shortest})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print-traces", action="store_true", help="print every shortest counterexample")
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="run this configuration only")
    parser.add_argument("--scratch", type=Path, help="levels on disk in fresh checkpoint directories here")
    opts, extra = parser.parse_known_args()  # the rest are check options, e.g. --records 2
    print_traces, only, scratch = opts.print_traces, opts.only, opts.scratch
    chosen = configurations(replay="--replay-known-changes" in extra)
    unknown = set(only) - {name for name, _ in chosen}
    if unknown:
        sys.exit(f"--only: no configuration named {', '.join(sorted(unknown))}; "
                 f"the names are: {', '.join(name for name, _ in chosen)}")
    rows = []
    for name, args in chosen:
        if only and name not in only:
            continue
        report = run(name, args + extra, scratch)
        rows.append((name, args, report))
        print(f"{name}: {report['result']} {report['distinct_states']:,} states, depth {report['depth']}, "
              f"{report['wall_s']:.0f} s", file=sys.stderr)
    print("| fixes | F1's data loss | `hwm_advances_only_with_min_isr` | `leader_maximal_isr_covers_electable` "
          "| other checks | distinct states | depth |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, args, r in rows:
        others = tuple({v["invariant"] for v in r["violations"]} - set(DATA_LOSS)
                       - {"hwm_advances_only_with_min_isr", "leader_maximal_isr_covers_electable"})
        print(f"| {name} | {cell(r, DATA_LOSS)} | {cell(r, ('hwm_advances_only_with_min_isr',))} "
              f"| {cell(r, ('leader_maximal_isr_covers_electable',))} "
              f"| {', '.join(f'`{o}`' for o in sorted(others)) or 'none'} "
              f"| {r['distinct_states']:,} | {r['depth']} |")
    if print_traces:
        for name, args, r in rows:
            print(f"\n### {name} ({' '.join(args) or 'no switch'})")
            for v in r["violations"]:
                print(f"- `{v['invariant']}` ({v['depth']}): {', '.join(v['actions'])}")


if __name__ == "__main__":
    main()
