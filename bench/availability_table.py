"""The availability and liveness table of docs/findings.md: every preset and recovery strategy of the
Kafka model, at default bounds and with one more lossy shutdown (``--lossy-shutdowns 2``, the
KIP's bound at min ISR 2; without fencing, to fit memory), through ``kraftcheck check --liveness`` for each and ``--availability``
once per preset (it covers the preset's variants).

Prints one Markdown row per configuration (can it get stuck, the shortest path into a stuck state,
each liveness verdict with its lasso) and keeps the trace files in ``--trace-dir`` for reading.

    .venv/bin/python bench/availability_table.py [--trace-dir DIR] [--bounds 0,1] [-- extra check options]
"""

from __future__ import annotations

import json
import subprocess
import sys

CONFIGS = [
    ["--protocol", "kip-966", "--recovery", "none"],
    ["--protocol", "kip-966", "--recovery", "balanced"],
    ["--protocol", "kip-966", "--recovery", "aggressive"],
    ["--protocol", "kafka-4.x"],
    ["--protocol", "kafka-4.x", "--unclean-election"],
    ["--protocol", "kafka-4.0"],
    ["--protocol", "kafka-4.0", "--unclean-election"],
    ["--protocol", "kafka-3.5"],
    ["--protocol", "kafka-3.5", "--unclean-election"],
]
# with one more lossy shutdown (the KIP's bound) the presets with ELR, without fencing: the space
# with --fences 1 as well passes 100 million states and does not fit the recorded graph in 24 GiB
BOUNDS = [([], CONFIGS), (["--lossy-shutdowns", "2", "--fences", "0"], CONFIGS[:5])]


def run(args: list[str], trace_dir: str) -> dict:
    cmd = [sys.executable, "-m", "kraftcheck", "check", "--brokers", "3", "--min-isr", "2", *args,
           "--quiet", "--trace-dir", trace_dir, "--json", "-"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout)


def own_variant(variants: list[dict], params: dict) -> dict:
    """The availability variant with the run's own settings (a variant's params spell out the
    setting it varies, e.g. recovery="balanced" where the run has its default, None)."""
    for v in variants:
        if all(params.get(k) == x or (params.get(k) is None and k == "recovery" and x == "balanced")
               for k, x in v["params"].items()):
            return v
    raise SystemExit(f"no availability variant has the settings {params}")


def main() -> None:
    trace_dir = sys.argv[sys.argv.index("--trace-dir") + 1] if "--trace-dir" in sys.argv else "availability-traces"
    extra = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
    chosen = [int(i) for i in sys.argv[sys.argv.index("--bounds") + 1].split(",")] if "--bounds" in sys.argv \
        else range(len(BOUNDS))
    print("| options | states | stuck states | stuck sinks | shortest stuck path | partition_regains_leader "
          "| acked_write_becomes_readable | safety |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for bounds, configs in [BOUNDS[i] for i in chosen]:
        variants: list[dict] = []
        for config in configs:
            r = run(config + bounds + extra + ["--liveness"], trace_dir)
            if not any(v["params"]["protocol"] == r["params"]["protocol"] for v in variants):
                # one --availability run covers every variant of a preset (each recovery strategy,
                # unclean election off and on)
                variants += run(config + bounds + extra + ["--availability"], trace_dir)["availability"]["variants"]
            v = own_variant(variants, r["params"])
            path = " -> ".join(v["example"]["steps"]) if "example" in v else "-"
            cells = []
            for p in r["liveness"]["properties"]:
                cell = p["verdict"]
                if "lasso" in p:
                    lasso = p["lasso"]
                    cell += f" ({len(lasso['prefix'])} steps, " + \
                        ("then stutters" if lasso["stutter"] else f"cycle of {len(lasso['cycle'])}") + ")"
                cells.append(cell)
            safety = r["result"] + (f": {', '.join(x['invariant'] for x in r['violations'])}" if r["violations"] else "")
            print(f"| `{' '.join(config + bounds + extra)}` | {v['states']:,} | {v['stuck_states']:,} | "
                  f"{v['stuck_sink_components']:,} | {path} | {' | '.join(cells)} | {safety} |", flush=True)
            for p in r["liveness"]["properties"]:
                if "trace_file" in p:
                    print(f"<!-- {p['property']}: {p['trace_file']} -->", flush=True)
            if "trace_file" in v:
                print(f"<!-- stuck: {v['trace_file']} -->", flush=True)


if __name__ == "__main__":
    main()
