"""Where a check's wall seconds go, on each thread: the CLI run with timers wrapped around the
engine's steps.

Usage (any ``kraftcheck check`` options)::

    python bench/wall_phases.py --brokers 3 --min-isr 2 --continue --threads 2 -q

At exit it prints, on stderr: when the imports ended and the exploration started and ended; per
step of the engine on the main thread, its calls, wall seconds without and with the steps inside
it, and thread CPU without them; per hand-off to the threads (``run_parts`` and ``run_taking``,
named by the function that calls them), its wall seconds, the CPU and the wall of its parts
summed over the threads, how long the calling thread waited after its own parts ("mainwait")
and the time between the first and the last thread's end ("spread"); and how many successors
met the visited set. The part of the exploration outside every hand-off runs on one thread.
``PPT=N`` sets ``compiled.PARTS_PER_THREAD``, ``UNPACKED_MB=N`` ``engine.UNPACKED_BYTES_PER_CHUNK``.
"""
import atexit
import collections
import sys
import threading
import time

T_START = time.perf_counter()
C_START = time.process_time()

import kraftcheck.checker.kernels.threads as threads_mod  # noqa: E402

stats = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # name -> calls, wall exclusive, wall inclusive
stack = []  # (name, start, child_wall) on the main thread
parts_stats = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0, 0.0])
# name -> calls, wall, sum part cpu, sum part wall, main idle (after its part, waiting), spread (last end - first end)
main_thread = threading.main_thread()


def region(name, fn):
    def wrapped(*a, **k):
        if threading.current_thread() is not main_thread:
            return fn(*a, **k)
        t = time.perf_counter()
        stack.append([name, t, 0.0, time.thread_time(), 0.0])
        try:
            return fn(*a, **k)
        finally:
            n, t0, child, c0, childc = stack.pop()
            w = time.perf_counter() - t0
            c = time.thread_time() - c0
            s = stats[name]
            s[0] += 1
            s[1] += w - child
            s[2] += w
            s[3] += c - childc
            if stack:
                stack[-1][2] += w
                stack[-1][4] += c
    wrapped.__wrapped__ = fn
    return wrapped


orig_run_parts = threads_mod.run_parts


def run_parts(fn, parts):
    caller = sys._getframe(1).f_code.co_name
    name = f"run_parts[{caller}]"
    ends = [0.0] * max(parts, 1)
    cpus = [0.0] * max(parts, 1)
    walls = [0.0] * max(parts, 1)

    def part(j):
        t = time.perf_counter()
        c = time.thread_time()
        try:
            fn(j)
        finally:
            cpus[j] = time.thread_time() - c
            ends[j] = time.perf_counter()
            walls[j] = ends[j] - t

    t = time.perf_counter()
    region(name, lambda: orig_run_parts(part, parts))()
    tally(name, time.perf_counter() - t, cpus, walls, ends)


def tally(name, wall, cpus, walls, ends):
    """Add one hand-off to ``parts_stats[name]``: its wall, its threads' CPU and wall, how long the
    calling thread (``ends[0]``) waited for the last, and the spread of the threads' ends (0:
    a thread that took no part)."""
    p = parts_stats[name]
    p[0] += 1
    p[1] += wall
    p[2] += sum(cpus)
    p[3] += sum(walls)
    ran = [e for e in ends if e]
    if len(ran) > 1:
        p[4] += max(ran) - ends[0] if ends[0] else 0.0
        p[5] += max(ran) - min(ran)


orig_run_taking = getattr(threads_mod, "run_taking", None)


def run_taking(fn, parts, threads=None):
    caller = sys._getframe(1).f_code.co_name
    name = f"run_taking[{caller}]"
    nslots = max(1, min(parts, threads_mod.thread_count(), threads if threads is not None else parts))
    ends = [0.0] * nslots
    cpus = [0.0] * nslots
    walls = [0.0] * nslots

    def part(j, slot):
        t = time.perf_counter()
        c = time.thread_time()
        try:
            fn(j, slot)
        finally:
            cpus[slot] += time.thread_time() - c
            ends[slot] = time.perf_counter()
            walls[slot] += ends[slot] - t

    t = time.perf_counter()
    region(name, lambda: orig_run_taking(part, parts, threads))()
    tally(name, time.perf_counter() - t, cpus, walls, ends)


def patch():
    import kraftcheck.checker.explore.chunks as chunks
    import kraftcheck.checker.explore.compiled as compiled
    import kraftcheck.checker.explore.engine as engine
    import kraftcheck.checker.explore.levels as levels
    import kraftcheck.checker.kernels.visited as visited
    import kraftcheck.checker.explore.violations as violations
    for m in list(sys.modules.values()):
        if getattr(m, "run_parts", None) is orig_run_parts and m is not threads_mod:
            m.run_parts = run_parts
        if orig_run_taking and getattr(m, "run_taking", None) is orig_run_taking and m is not threads_mod:
            m.run_taking = run_taking
    engine.Engine._explore = mark_explore(engine.Engine._explore)
    for cls, names in ((engine.Engine, ["_explore"]),
                       (engine._Run, ["explore", "_expand_level", "_check_new", "_report", "finish", "__init__",
                                      "_level_finished", "_limits_hit"]),
                       (chunks.ChunkExpansion, ["distinct_chunk"]),
                       (compiled.Kernels, ["distinct_successors", "violations"]),
                       (visited.VisitedSet, ["insert_bucketed"]),
                       (levels.MemoryLevels, ["add", "finish_level"]),
                       (violations.Violations, ["of_invariants"])):
        for n in names:
            setattr(cls, n, region(f"{cls.__name__}.{n}", getattr(cls, n)))
    chunks.close_gaps = region("close_gaps", chunks.close_gaps)
    inner = visited.VisitedSet.insert_bucketed

    def counted(self, words, hashes, order, offsets, is_new):
        marks["inserted"] = marks.get("inserted", 0) + int((offsets[:, -1] - offsets[:, 0]).sum())
        return inner(self, words, hashes, order, offsets, is_new)
    visited.VisitedSet.insert_bucketed = counted


def report():
    total = time.perf_counter() - T_START
    out = sys.stderr
    print(f"\n== process wall {total:.2f} s, process cpu {time.process_time() - C_START:.2f} s", file=out)
    print(f"{'region':45s} {'calls':>7s} {'excl s':>8s} {'incl s':>8s} {'exclcpu':>8s}", file=out)
    for name, (c, ex, inc, cpu) in sorted(stats.items(), key=lambda kv: -kv[1][2]):
        print(f"{name:45s} {c:7d} {ex:8.3f} {inc:8.3f} {cpu:8.3f}", file=out)
    print(f"{'run_parts':45s} {'calls':>7s} {'wall':>8s} {'partcpu':>8s} {'partwall':>8s} {'mainwait':>8s} {'spread':>8s}",
          file=out)
    for name, (c, w, cpu, pw, idle, spread) in sorted(parts_stats.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:45s} {c:7d} {w:8.3f} {cpu:8.3f} {pw:8.3f} {idle:8.3f} {spread:8.3f}", file=out)


marks = {}


def mark_explore(fn):
    def wrapped(*a, **k):
        marks["explore_start"] = time.perf_counter() - T_START
        try:
            return fn(*a, **k)
        finally:
            marks["explore_end"] = time.perf_counter() - T_START
    return wrapped


def report_marks():
    total = time.perf_counter() - T_START
    print(f"== marks: imports {marks.get('imports', 0):.2f}, _explore from {marks.get('explore_start', 0):.2f} "
          f"to {marks.get('explore_end', 0):.2f}, exit at {total:.2f} (after the exploration: "
          f"{total - marks.get('explore_end', 0):.2f} s); rows met the visited set: {marks.get('inserted', 0):,}",
          file=sys.stderr)


atexit.register(report)
atexit.register(report_marks)

if __name__ == "__main__":
    import kraftcheck.checker.explore.engine  # noqa: F401
    import kraftcheck.checker.explore.violations  # noqa: F401
    patch()
    import os
    if os.environ.get("PPT"):
        import kraftcheck.checker.explore.compiled as compiled
        compiled.PARTS_PER_THREAD = int(os.environ["PPT"])
    if os.environ.get("UNPACKED_MB"):
        kraftcheck.checker.explore.engine.UNPACKED_BYTES_PER_CHUNK = int(os.environ["UNPACKED_MB"]) << 20
    from kraftcheck.cli.main import main
    sys.argv = ["kraftcheck", "check"] + sys.argv[1:]
    marks["imports"] = time.perf_counter() - T_START
    print(f"== imports done at {time.perf_counter() - T_START:.2f} s", file=sys.stderr)
    try:
        main()
    except SystemExit:
        pass
