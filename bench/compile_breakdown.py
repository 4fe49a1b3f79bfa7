"""Where the seconds of a cold compile go: per kernel, per numba pass, per function, and LLVM.

Compiles one model's kernels in this process into empty caches (a fresh ``KRAFTCHECK_CACHE_DIR``
and ``NUMBA_CACHE_DIR``, removed at the end, unless either is set in the environment) and listens
to numba's compiler events: every compiler pass it runs (``numba:run_pass``, with the function it
compiles) and every call into LLVM (``numba:llvm_lock``). Times are *exclusive*: a pass that
compiles a callee (type inference of a call to another ``@njit`` function compiles it) is not
charged for the callee's passes, and a pass is not charged for its time inside LLVM.

    .venv/bin/python bench/compile_breakdown.py [--spec kafka] [--param brokers=3 ...] [--json out.json]

Prints: the wall time of each step (imports, the engine's generic kernels, writing the modules,
each generated kernel); the exclusive time of each numba pass summed over everything compiled;
LLVM's share; the functions that took longest, and how many times each was compiled.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import json
import os
import shutil
import sys
import tempfile
import time

T0 = time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="kafka")
    parser.add_argument("--param", action="append", default=[], help="KEY=VALUE (repeatable)")
    parser.add_argument("--json", help="write the breakdown here")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="kraftcheck-breakdown-")
    atexit.register(shutil.rmtree, tmp, True)  # the caches it compiled into are not kept
    os.environ.setdefault("KRAFTCHECK_CACHE_DIR", os.path.join(tmp, "kernels"))
    os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(tmp, "numba"))

    steps: list[tuple[str, float]] = []
    mark = time.perf_counter()

    def step(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        steps.append((name, now - mark))
        mark = now

    from numba.core import event

    class Exclusive(event.Listener):
        """Exclusive times of passes (by pass and by function) and of LLVM calls."""

        def __init__(self) -> None:
            self.stack: list[list] = []  # [kind, key, start, child_time]
            self.by_pass: dict[str, float] = collections.Counter()
            self.by_function: dict[str, float] = collections.Counter()
            self.compiles: dict[str, int] = collections.Counter()
            self.llvm = 0.0

        def on_start(self, ev) -> None:
            if ev.kind == "numba:run_pass":
                name = ev.data["name"]
                pss = name.split(" [")[0]
                key = (pss, f"{ev.data['module']}.{ev.data['qualname']}")
                if pss.lower().replace("_", "") == "nopythontypeinference":
                    self.compiles[key[1]] += 1
            else:
                key = ("LLVM", None)
            self.stack.append([ev.kind, key, time.perf_counter(), 0.0])

        def on_end(self, ev) -> None:
            kind, key, start, child = self.stack.pop()
            total = time.perf_counter() - start
            if self.stack:
                self.stack[-1][3] += total
            own = total - child
            if kind == "numba:llvm_lock":
                self.llvm += own
            else:
                self.by_pass[key[0]] += own
                self.by_function[key[1]] += own

    listener = Exclusive()
    event.register("numba:run_pass", listener)
    event.register("numba:llvm_lock", listener)

    import numpy as np  # noqa: F401

    from kraftcheck.checker.codegen import load_kernels
    from kraftcheck.checker.compile import compile_kernels
    from kraftcheck.checker.explore.compiled import kernel_shapes
    from kraftcheck.checker.compile import warm_up_engine_kernels
    from kraftcheck.checker.model import Model
    from kraftcheck.api import make_spec
    step("imports")

    params = {}
    for p in args.param:
        key, _, value = p.partition("=")
        params[key] = int(value) if value.lstrip("-").isdigit() else value
    model = Model(make_spec(args.spec, params))
    step("model")
    init_words = np.zeros((1, model.layout.nwords), np.uint64)
    generic_before = dict(listener.by_pass)
    warm_up_engine_kernels(model.layout.nwords)
    step("generic engine kernels")
    generic_passes = {k: v - generic_before.get(k, 0.0) for k, v in listener.by_pass.items()}
    module = load_kernels(model)
    shapes = kernel_shapes(model)
    step("write and import generated modules")
    last = [time.perf_counter()]
    names: list[str] = []

    def on_kernel(i: int, n: int, what: str) -> None:
        now = time.perf_counter()
        if names:
            steps.append((f"kernel {names[-1]}", now - last[0]))
        names.append(what)
        last[0] = now

    compile_kernels(module, shapes, on_kernel)
    steps.append((f"kernel {names[-1]}", time.perf_counter() - last[0]))
    mark = time.perf_counter()
    total = time.perf_counter() - T0

    passes_total = sum(listener.by_pass.values())
    print(f"spec {args.spec} {params or ''}: {len(model.actions)} actions, {len(model.labels)} labels, "
          f"{model.layout.nwords} words, {model.layout.size} ints a state")
    print(f"whole process {total:.1f} s; numba passes (exclusive) {passes_total:.1f} s; "
          f"LLVM calls {listener.llvm:.1f} s")
    print("\nsteps (wall s):")
    for name, s in steps:
        print(f"  {s:7.2f}  {name}")
    print("\nnumba passes, exclusive s (all compiles):")
    for name, s in sorted(listener.by_pass.items(), key=lambda x: -x[1])[:12]:
        print(f"  {s:7.2f}  {name}")
    print(f"  {listener.llvm:7.2f}  (inside LLVM)")
    print(f"\nfunctions, exclusive s of their passes, and times type-inferred (top {args.top}):")
    for name, s in sorted(listener.by_function.items(), key=lambda x: -x[1])[:args.top]:
        print(f"  {s:7.2f}  x{listener.compiles[name]:<3d} {name}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"spec": args.spec, "params": params, "total_s": total, "llvm_s": listener.llvm,
                       "steps": steps, "passes": dict(listener.by_pass), "generic_passes": generic_passes,
                       "functions": dict(listener.by_function), "compiles": dict(listener.compiles)}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
