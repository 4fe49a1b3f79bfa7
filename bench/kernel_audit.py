"""Benchmark: what auditing the compiled kernels against the spec's Python costs a run.

``checker/explore/kernel_audit.py`` compares the compiled kernels with the interpreted tier on the
first states each compiled kernels expand, then on one random state per chunk within ``SHARE`` of
the run's time, and replays every counterexample in Python before it is reported. For each Kafka
configuration below this runs the engine in this process (kernels compiled or loaded first, by a
warm-up run) with the audit as shipped and with it off (``share`` 0, no first states, no replay),
alternated ``--pairs`` times, and prints one Markdown table: the audited states and the audit's
own seconds (its timer), the replay's seconds, and the median wall time of each side.

    .venv/bin/python bench/kernel_audit.py
    .venv/bin/python bench/kernel_audit.py --pairs 3
"""

from __future__ import annotations

import argparse
import statistics
import time

from kraftcheck.checker.explore import engine as engine_module
from kraftcheck.checker.explore import kernel_audit
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class

CONFIGS = [  # (name, Kafka parameters, options)
    ("default, --continue", {}, Options(keep_going=True)),
    ("default, first violation", {}, Options()),
    ("election any, --continue", {"election": "any"}, Options(keep_going=True)),
]


class _Counted(kernel_audit.KernelAudit):
    made: list = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _Counted.made.append(self)


def _run(params: dict, options: Options, audit: bool) -> tuple[float, int, float, float]:
    """(wall seconds, audited states, audit seconds, replay seconds) of one run."""
    _Counted.made.clear()
    replay = [0.0]
    confirm = kernel_audit.confirm_counterexamples

    def timed_confirm(model, violations):
        t0 = time.perf_counter()
        try:
            return confirm(model, violations) if audit else None
        finally:
            replay[0] += time.perf_counter() - t0

    engine_module.KernelAudit = (lambda model: _Counted(model)) if audit else \
        (lambda model: _Counted(model, share=0.0, first_states=0))
    engine_module.confirm_counterexamples = timed_confirm
    try:
        cls = spec_class("kafka")
        model = Model(cls(cls.Params(**params)))
        t0 = time.perf_counter()
        Engine(compile="now").explore(model, options)
        wall = time.perf_counter() - t0
    finally:
        engine_module.KernelAudit = kernel_audit.KernelAudit
        engine_module.confirm_counterexamples = confirm
    made = _Counted.made[0]
    return wall, made.audited, made.spent, replay[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2, help="audited and unaudited runs alternated, each")
    args = parser.parse_args()
    print("| configuration | audited states | audit s | replay s | wall, audited (median) | wall, not audited | "
          "difference |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, params, options in CONFIGS:
        _run(params, options, True)  # compile or load the kernels
        on, off = [], []
        for _ in range(args.pairs):
            on.append(_run(params, options, True))
            off.append(_run(params, options, False))
        wall_on, wall_off = statistics.median(r[0] for r in on), statistics.median(r[0] for r in off)
        audited, spent, replay = on[-1][1], on[-1][2], on[-1][3]
        print(f"| {name} | {audited} | {spent:.3f} | {replay:.3f} | {wall_on:.2f} | {wall_off:.2f} | "
              f"{100 * (wall_on - wall_off) / wall_off:+.1f}% |", flush=True)


if __name__ == "__main__":
    main()
