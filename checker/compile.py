"""Compiling a model's kernels: in this process, or in a background process while the engine
explores with the interpreted tier.

Numba compiles a kernel the first time it is called with given argument types and keeps the
result in its on-disk cache. ``compile_kernels`` calls every kernel of a generated module once,
on empty arrays of exactly the types the engine passes (``KernelShapes``), so that afterwards
every call the engine makes is a cache hit. When all of them are compiled, a marker file beside
the module says so: a later run that finds it loads the kernels at once (well under a second);
one that does not starts ``python -m kraftcheck.checker.compile`` to build them, which leaves
every kernel it finished in numba's cache even if it is stopped half way.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable, Optional

import numba
import numpy as np

from kraftcheck.checker.codegen import import_kernel_module, imported_modules
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.files import atomic_write

# Scratch records per thread are spaced so threads never share a cache line (see Kernels).
SCRATCH_BYTES = 256


@dataclass(frozen=True)
class KernelShapes:
    """Everything that decides the argument types of a model's kernels."""

    module_name: str
    module_path: str
    dtype_descr: list            # numpy's description of the state record
    size: int                    # int32 elements in a state record
    nwords: int                  # uint64 words in a packed state
    nlabels: int
    nconsts: int
    kernel_names: list           # what each of EXPANDERS computes, for progress lines

    @property
    def dtype(self) -> np.dtype:
        return np.dtype([tuple(x[:2]) + ((tuple(x[2]),) if len(x) > 2 else ()) for x in self.dtype_descr])

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "KernelShapes":
        return cls(**json.loads(text))


def marker_path(module_path: str | Path) -> Path:
    return Path(str(module_path) + ".compiled")


def is_compiled(shapes: KernelShapes) -> bool:
    """Every kernel of this module is in numba's cache: a finished compile said so, and numba's
    index files are still there (``NUMBA_CACHE_DIR`` may have been changed or emptied since)."""
    if not marker_path(shapes.module_path).exists():
        return False
    module = import_kernel_module(shapes.module_name, Path(shapes.module_path))
    try:
        kernels = [module.pack_rows, module.unpack_rows, module.unpack_range, module.check, *module.EXPANDERS]
        return all(os.path.exists(k._cache._cache_file._index_path) for k in kernels)
    except AttributeError:  # numba keeps its cache differently: trust the marker
        return True


def _mark_compiled(module_path: str | Path) -> None:
    atomic_write(marker_path(module_path), f"numba {numba.__version__}\n")


def compile_kernels(module: ModuleType, shapes: KernelShapes,
                    on_kernel: Callable[[int, int, str], None] = lambda i, n, name: None) -> None:
    """Call every kernel of ``module`` once on empty arrays of the engine's argument types, which
    compiles it (or loads it from numba's cache); ``on_kernel(i, n, what)`` before each."""
    # built as the engine builds them (C-contiguous int32 rows, scratch a slice of a larger
    # array), so the types match
    scratch = np.zeros((4, shapes.size), np.int32)[0:2]
    flat = np.zeros((1, shapes.size), np.int32)
    words = np.zeros((1, shapes.nwords), np.uint64)
    hashes = np.zeros(1, np.uint64)
    labels = np.zeros(1, np.uint16)
    props = np.zeros(1, np.uint64)
    err = np.full(2, -1, np.int64)
    cv = np.zeros(max(1, shapes.nconsts), np.int32)
    rows = np.zeros((1, shapes.size), np.int32)
    steps: list[tuple[str, Callable[[], object]]] = [
        ("pack", lambda: module.pack_rows(rows[:0], words[:0], cv)),
        ("unpack", lambda: module.unpack_rows(words[:0], rows[:0], cv)),
        ("unpack_range", lambda: module.unpack_range(words, 0, 0, 0, flat, cv)),
    ]
    table = np.zeros((1, shapes.nwords + 1), np.uint64)
    # a kernel run on no states still adds its count of transitions at its place in the tally
    tally = np.zeros((1, 1 + max([args[2] for args in module.EXPANDER_ARGS], default=0)), np.int64)[0]
    for k, (expand, args) in enumerate(zip(module.EXPANDERS, module.EXPANDER_ARGS)):
        steps.append((shapes.kernel_names[k], lambda expand=expand, args=args: expand(
            flat, 0, 0, scratch, words, hashes, labels, props, err, cv, False, words, 0, table, 0, 0, tally, *args)))
    steps.append(("invariants", lambda: module.check(words, 0, 0, 0, scratch, hashes, cv)))
    for i, (what, call) in enumerate(steps):
        on_kernel(i, len(steps), what)
        call()


def compile_in_process(shapes: KernelShapes,
                       on_kernel: Callable[[int, int, str], None] = lambda i, n, name: None) -> ModuleType:
    """Import and compile a kernel module here; mark it compiled.

    Processes compiling the same module (parallel checks of one model's switches share it) take
    turns: the first compiles, the others then find every kernel in numba's cache.
    """
    module = import_kernel_module(shapes.module_name, Path(shapes.module_path))
    with _compile_lock(shapes.module_path):
        compile_kernels(module, shapes, on_kernel)
        if not marker_path(shapes.module_path).exists():
            _mark_compiled(shapes.module_path)
    return module


@contextlib.contextmanager
def _compile_lock(module_path: str | Path):
    try:
        import fcntl
    except ImportError:  # not POSIX: concurrent compiles only duplicate work
        yield
        return
    with open(str(module_path) + ".lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


class BackgroundCompile:
    """A ``python -m kraftcheck.checker.compile`` process building one model's kernels."""

    def __init__(self, shapes: KernelShapes) -> None:
        self.shapes = shapes
        self.started = time.perf_counter()
        self.finished_s: Optional[float] = None
        self.status = "starting"
        self._stderr = tempfile.TemporaryFile()
        env = dict(os.environ)
        # the worker imports the same spec modules by the same names, file-loaded ones included
        job = {"shapes": json.loads(shapes.to_json()), "sys_path": sys.path,
               "modules": {name: getattr(sys.modules.get(name), "__file__", None)
                           for name in imported_modules(Path(shapes.module_path))}}
        self.process = subprocess.Popen([sys.executable, "-m", "kraftcheck.checker.compile"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                        env=env, text=True)
        self.process.stdin.write(json.dumps(job))
        self.process.stdin.close()
        self._reader = threading.Thread(target=self._read, daemon=True, name="kraftcheck-compile")
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            line = line.strip()
            if line.startswith("compiling "):
                self.status = line[len("compiling "):]
        self.process.wait()
        if self.process.returncode == 0:
            self.finished_s = time.perf_counter() - self.started

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def done(self) -> bool:
        """Finished successfully: every kernel is in numba's cache."""
        return self.finished_s is not None

    def failed(self) -> bool:
        return self.process.poll() not in (None, 0) and not self._reader.is_alive()

    def error_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace").strip()

    def stop(self) -> None:
        """End the worker if it still runs (what it compiled so far stays cached)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=5)
        self._stderr.close()


def _worker() -> int:
    """The background process: read a job on stdin, compile, report each kernel on stdout."""
    job = json.loads(sys.stdin.read())
    sys.path[:] = job["sys_path"]
    for name, file in job["modules"].items():
        if name in sys.modules:
            continue
        if importlib.util.find_spec(name) is None and file:  # a spec loaded from a file by path
            spec = importlib.util.spec_from_file_location(name, file)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
    shapes = KernelShapes(**job["shapes"])

    def say(i: int, n: int, what: str) -> None:
        print(f"compiling {i + 1}/{n}: {what}", flush=True)

    compile_in_process(shapes, say)
    print("compiled", flush=True)
    return 0


def compile_error(model_name: str, error: BaseException) -> SpecError:
    """A compile failure as one message (numba's own text says which line of the spec)."""
    text = str(error).strip()
    return SpecError(f"the kernels of spec {model_name} failed to compile: {text}")


if __name__ == "__main__":
    sys.exit(_worker())
