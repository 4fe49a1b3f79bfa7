"""Where a transition's time goes: one check run under ``perf``, its samples split by compiled kernel.

``perf`` cannot name the machine code numba compiles at run time, so this script runs the check
in its own process, and at its end writes ``/tmp/perf-<pid>.map`` (perf's map of JIT code) with
the address of every function numba compiled or loaded from its cache; ``perf report`` then
names the samples. A kernel's inlined helpers count as the kernel.

Usage (the default Kafka check with ``--continue`` on one thread; any ``kraftcheck check``
options after ``--``)::

    python bench/transition_profile.py [--freq 999] [--out DIR] -- --brokers 3 --min-isr 2 --continue

It prints the samples per kernel, grouped into the phases of a transition (see ``PHASES``), and
per transition in nanoseconds (the run's user CPU spread over its transitions by sample share).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Which phase a kernel's samples belong to, by the kernel's (qualified) name; first match wins.
PHASES = [
    ("fire: the actions (restore/copy of the source into the successor, the action, properties)",
     r"\bfire\b|cfunc|_fire"),
    ("expand: the shared table-form expand kernel (pack + fingerprint + ring + repeat table)",
     r"table_expand|\.expand\b|expand"),
    ("visited set: insert/probe", r"visited|insert|probe|fpset|state_index"),
    ("bucket / collect (dedup within a part, new rows)", r"bucket_part|collect_part|valid_rows_part|successor_rows"),
    ("invariants", r"invariant|check_states|violat"),
    ("unpack of the chunk's source states", r"unpack"),
    ("symmetry", r"canonical|symmetr"),
]


def _child(args: list[str], map_path: str) -> int:
    """Run ``kraftcheck check args`` here; then write the perf map of numba's functions."""
    from kraftcheck.cli.group import cli  # noqa: PLC0415 (only in the profiled process)

    code = 0
    try:
        code = cli.main(["check", *args], prog_name="kraftcheck", standalone_mode=False)
    except SystemExit as stop:
        code = stop.code or 0
    except BaseException as err:  # the map is still wanted
        print(f"check ended with {err!r}", file=sys.stderr)
        code = 3
    _write_map(map_path.format(pid=os.getpid()))
    return int(code) if isinstance(code, int) else 1


def _write_map(map_path: str) -> None:
    import numba  # noqa: PLC0415
    from numba.core.registry import CPUDispatcher  # noqa: PLC0415

    starts: dict[int, str] = {}
    seen_libs = set()

    def add_library(lib, label):
        if id(lib) in seen_libs:
            return
        seen_libs.add(id(lib))
        try:
            names = [fn.name for fn in lib.get_defined_functions()]
        except Exception:  # a library unserialised from object code has no module to list
            names = []
        for name in names:
            try:
                addr = lib.get_pointer_to_function(name)
            except Exception:
                continue
            if addr:
                starts.setdefault(addr, f"{label}::{_short(name)}")

    for mod in list(sys.modules.values()):
        for obj in list(getattr(mod, "__dict__", {}).values()):
            if isinstance(obj, CPUDispatcher):
                label = f"{obj.py_func.__module__}.{obj.py_func.__qualname__}"
                for cres in obj.overloads.values():
                    lib = cres.library
                    add_library(lib, label)
                    try:
                        addr = lib.get_pointer_to_function(cres.fndesc.llvm_func_name)
                        if addr:
                            starts[addr] = label
                    except Exception:
                        pass
            elif type(obj).__name__ == "CFunc" and hasattr(obj, "address"):
                label = f"{getattr(obj, '__module__', mod.__name__)}.cfunc.{obj.__name__}"
                starts[obj.address] = label
                add_library(obj._library, label)
    # also the cfuncs held by the table-form expanders (they are not module globals)
    for obj in _all_cfuncs():
        label = f"cfunc.{obj._pyfunc.__module__}.{obj.__name__}"
        starts[obj.address] = label
        add_library(obj._library, label)
    for obj in _all_dispatchers():  # those held elsewhere than in a module's globals
        label = f"{obj.py_func.__module__}.{obj.py_func.__qualname__}"
        for cres in obj.overloads.values():
            add_library(cres.library, label)
            try:
                addr = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
                if addr:
                    starts.setdefault(addr, label)
            except Exception:
                pass
    import gc  # noqa: PLC0415
    from numba.core.codegen import CodeLibrary  # noqa: PLC0415
    for lib in [o for o in gc.get_objects() if isinstance(o, CodeLibrary)]:
        add_library(lib, lib.name)  # every other compiled library: helpers not inlined, linked ones
    addrs = sorted(starts)
    with open(map_path, "w") as out:
        for k, a in enumerate(addrs):
            end = addrs[k + 1] if k + 1 < len(addrs) else a + 65536
            size = min(end - a, 1 << 20)
            out.write(f"{a:x} {size:x} {starts[a]}\n")
    print(f"perf map: {len(addrs)} functions -> {map_path}", file=sys.stderr)


def _all_cfuncs():
    import gc  # noqa: PLC0415
    from numba.core.ccallback import CFunc  # noqa: PLC0415
    return [o for o in gc.get_objects() if isinstance(o, CFunc)]


def _all_dispatchers():
    import gc  # noqa: PLC0415
    from numba.core.registry import CPUDispatcher  # noqa: PLC0415
    return [o for o in gc.get_objects() if isinstance(o, CPUDispatcher)]


def _short(name: str) -> str:
    # numba mangles names as _ZN<len><part>...; keep the readable parts
    parts = re.findall(r"\d+([A-Za-z_][A-Za-z0-9_]*)", name)
    return ".".join(p for p in parts if not p.startswith("_3c")) or name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--freq", type=int, default=999)
    ap.add_argument("--out", default=None, help="keep perf.data and the report here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("check_args", nargs=argparse.REMAINDER)
    ns = ap.parse_args()
    args = [a for a in ns.check_args if a != "--"]
    if ns.child:
        return _child(args, ns.child)
    if "--threads" not in args:
        args += ["--threads", "1"]
    if "--json" not in args:
        jfd, jpath = tempfile.mkstemp(suffix=".json")
        os.close(jfd)
        args += ["--json", jpath]
    else:
        jpath = args[args.index("--json") + 1]
    out = Path(ns.out or tempfile.mkdtemp(prefix="transition-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    data = out / "perf.data"
    # the child writes /tmp/perf-<its pid>.map; perf record runs it, so its pid is perf's child's
    cmd = ["perf", "record", "-F", str(ns.freq), "-o", str(data), "--",
           sys.executable, __file__, "--child", "PLACEHOLDER", "--", *args]
    # the map must be named after the profiled process's pid, known only inside it
    cmd[cmd.index("PLACEHOLDER")] = "/tmp/perf-{pid}.map"
    env = dict(os.environ, KRAFTCHECK_PERF_MAP="1")
    t0 = time.time()
    proc = subprocess.run(cmd, env=env)
    wall = time.time() - t0
    rep = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", "dso,sym", "--no-children",
                          "-q", "-g", "none", "--percent-limit", "0.05"],
                         capture_output=True, text=True)
    (out / "report.txt").write_text(rep.stdout)
    result = json.loads(Path(jpath).read_text()) if Path(jpath).stat().st_size else {}
    _summarise(rep.stdout, result, wall, out)
    return proc.returncode


def _summarise(report: str, result: dict, wall: float, out: Path) -> None:
    rows = []
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(.+?)\s+\[(.)\]\s+(.*)", line)
        if m:
            rows.append((float(m.group(1)), m.group(2).strip(), m.group(4).strip()))
    by_phase = collections.Counter()
    for pct, dso, sym in rows:
        if dso.startswith("[kernel"):
            phase = "operating system (page faults, memory)"
        elif "libpython" in dso:
            phase = "Python interpreter"
        elif not dso.startswith("[JIT]"):
            phase = f"libraries ({'libc' if 'libc' in dso else 'numpy, BLAS, others'})"
        elif sym.startswith("0x"):
            phase = "compiled code perf could not name"
        else:
            phase = "other compiled kernels"
            for name, pattern in PHASES:
                if re.search(pattern, sym):
                    phase = name
                    break
        by_phase[phase] += pct
    transitions = result.get("states_generated") or 0
    explore_s = (result.get("elapsed_s") or 0) - (result.get("compile_s") or 0)
    print(f"wall {wall:.1f} s (exploring {explore_s:.1f} s), {result.get('distinct_states', 0):,} states, "
          f"{transitions:,} transitions; report: {out / 'report.txt'}")
    if transitions:
        print(f"{1e9 * explore_s / transitions:.0f} ns a transition on one thread, exploring")
    print("top symbols:")
    for pct, dso, sym in rows[:25]:
        print(f"  {pct:6.2f}%  {sym}")
    print("by phase:")
    for phase, pct in by_phase.most_common():
        ns = f"  ~{pct / 100 * 1e9 * wall / transitions:4.0f} ns/transition" if transitions else ""
        print(f"  {pct:6.2f}%{ns}  {phase}")


if __name__ == "__main__":
    sys.exit(main())
