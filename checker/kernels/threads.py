"""A process-wide pool of threads that run ``nogil`` kernels side by side.

numba's ``parallel=True`` doubles compile time per model; plain ``nogil`` kernels called on
disjoint slices from Python threads scale the same on a few cores and compile once.
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

import numpy as np

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.stop import deferred

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_run_threads: Optional[int] = None  # the running check's own count (Options.threads), while it runs


ENV = "KRAFTCHECK_THREADS"  # the default when a run's options do not say


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def requested_threads() -> int | None:
    """``KRAFTCHECK_THREADS``, None if unset or empty; anything but a positive whole number is
    refused (``UsageError``), whichever entry point (CLI, Python API, a sweep) started the run."""
    env = os.environ.get(ENV, "").strip()
    if not env:
        return None
    try:
        requested = int(env)
    except ValueError:
        raise UsageError(f"{ENV}={env!r} is not a number of threads; set a positive integer or unset it") from None
    if requested <= 0:
        raise UsageError(f"{ENV}={env}: give a positive number of threads, or unset it")
    return requested


def thread_count() -> int:
    """Worker threads: the running check's own (``using_threads``), else ``KRAFTCHECK_THREADS`` if
    set (more than the CPUs is allowed: tests run several threads on one), else the usable CPU count."""
    if _run_threads is not None:
        return _run_threads
    requested = requested_threads()
    return usable_cpus() if requested is None else requested


@contextmanager
def using_threads(threads: Optional[int]) -> Iterator[None]:
    """Run the body with ``threads`` worker threads (None: ``thread_count``'s default). The
    count travels in a run's options (``Options.threads``); the explorer sets it here for the
    kernels it calls, and the previous count is back when the run ends."""
    global _run_threads
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads <= 0):
        raise UsageError(f"threads: give a positive number of threads, got {threads!r}")
    before = _run_threads
    _run_threads = threads if threads is not None else before
    try:
        yield
    finally:
        _run_threads = before


def run_parts(fn: Callable[[int], None], parts: int) -> None:
    """Call ``fn(0) .. fn(parts - 1)`` concurrently and wait for all of them; re-raise the first
    error. ``fn(0)`` runs in the calling thread, which would otherwise only wait (one hand-off to
    the pool fewer per call, and no part is left running when this returns, error or not).
    A Ctrl-C or SIGTERM meanwhile is raised once every part is done (``stop.deferred``, where the
    stop handlers are installed): raised while ``submit`` starts a worker, it would leave that
    thread out of the pool's list, never told to leave, and the exit would wait for it forever;
    raised while waiting for a part, it would leave that part running."""
    global _pool, _pool_size
    if parts <= 1:
        if parts == 1:
            fn(0)
        return
    error: BaseException | None = None
    with deferred(install_handlers=False) as held:
        if _pool is None or _pool_size < thread_count():  # a later run may ask for more threads than the first
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool_size = thread_count()
            _pool = ThreadPoolExecutor(max_workers=_pool_size, thread_name_prefix="kraftcheck")
        futures = [_pool.submit(fn, j) for j in range(1, parts)]
        try:
            fn(0)
        except BaseException as e:  # noqa: BLE001 (re-raised below, once the other parts are done)
            error = e
        for f in futures:
            try:
                f.result()
            except BaseException as e:  # noqa: BLE001
                error = error or e
    if error is not None:
        raise error
    held.raise_if_signalled()


def run_taking(fn: Callable[[int, int], None], parts: int, threads: Optional[int] = None) -> None:
    """Call ``fn(part, slot)`` for every part 0 .. parts - 1 on up to ``thread_count()`` threads
    (at most ``threads``: the scratch a caller sized when it was built, whatever the count is
    now) (``run_parts``), each taking the next part nobody has taken yet, in increasing order,
    until none is left; ``slot`` is the thread's own number (0 .. threads - 1: what it may use as
    its own scratch). With more parts than threads, a thread that is slow (its parts have more work,
    or the system ran something else on its core) takes fewer parts instead of holding the
    others at the end of the call, where one part a thread would. An error stops every thread
    at its next part and is re-raised as ``run_parts`` does."""
    slots = min(parts, thread_count(), threads if threads is not None else parts)
    if slots <= 1:
        for p in range(parts):
            fn(p, 0)
        return
    taken = itertools.count()  # next() on it is one step under the GIL: no part is taken twice
    failed: list[bool] = []

    def take(slot: int) -> None:
        while not failed:
            p = next(taken)
            if p >= parts:
                return
            try:
                fn(p, slot)
            except BaseException:
                failed.append(True)
                raise

    run_parts(take, slots)


CACHE_LINE = 64


def per_thread_rows(parts: int, n: int, dtype) -> "np.ndarray":
    """A zeroed ``(parts, n)`` array whose rows never share a cache line: each row is what one
    thread counts into. Rows packed side by side would put two threads' counters in one line,
    which would then move between the cores at every increment (false sharing)."""
    itemsize = np.dtype(dtype).itemsize
    pad = CACHE_LINE // itemsize
    stride = -(-(n + pad) // pad) * pad  # a whole number of lines, at least one line between rows
    return np.zeros((parts, stride), dtype)[:, :n]


def split(lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    """Split ``lo..hi`` into at most ``parts`` contiguous, non-empty ranges."""
    n = hi - lo
    parts = max(1, min(parts, n))
    step = -(-n // parts) if n else 0
    return [(a, min(hi, a + step)) for a in range(lo, hi, step)] if n else []
