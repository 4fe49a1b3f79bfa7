"""A stop request (Ctrl-C, SIGTERM) that lands in the kernels' thread pool still ends the process."""

import os
import subprocess
import sys

# the child: Ctrl-C while run_parts' submit starts the pool's worker; it must still exit, at once
# (faulthandler prints every thread's stack and exits if it does not within 60 s)
INTERRUPTED_WHILE_A_WORKER_STARTS = """
import faulthandler, signal, threading
faulthandler.dump_traceback_later(60, exit=True)
signal.signal(signal.SIGINT, signal.SIG_DFL)  # a suite run as a background job starts its children with SIGINT ignored
from kraftcheck.checker.stop import install_stop_handlers
from kraftcheck.checker.kernels.threads import run_parts
install_stop_handlers()
start = threading.Thread.start
def start_then_signal(self):
    start(self)
    signal.raise_signal(signal.SIGINT)
threading.Thread.start = start_then_signal
done = []
try:
    run_parts(done.append, 2)
except KeyboardInterrupt:
    print("interrupted once the parts were done:", sorted(done))
threading.Thread.start = start
"""


def test_an_interrupt_while_the_pool_starts_a_worker_is_raised_after_the_parts_and_the_process_exits():
    """A KeyboardInterrupt raised inside ``submit`` while it waits for a new worker to start
    left that worker out of the pool's list: nothing told it to leave, and the interpreter's
    exit joined it forever (a run that said "interrupted" and never exited). ``run_parts``
    holds the signal back until every part is done and then raises it."""
    child = subprocess.run([sys.executable, "-c", INTERRUPTED_WHILE_A_WORKER_STARTS], capture_output=True,
                           text=True, timeout=120, env={**os.environ, "KRAFTCHECK_THREADS": "2"})
    assert child.returncode == 0, child.stderr
    assert "interrupted once the parts were done: [0, 1]" in child.stdout, child.stdout + child.stderr


def test_parts_taken_by_threads_use_no_slot_past_the_scratch_sized_for_them():
    """``run_taking`` numbers each thread's slot below ``threads`` (what the caller sized its
    scratch for when it was built), though the run's thread count has grown since, and every part
    runs once."""
    import threading

    from kraftcheck.checker.kernels.threads import run_taking, using_threads
    seen, lock = [], threading.Lock()

    def part(j: int, slot: int) -> None:
        with lock:
            seen.append((j, slot))

    with using_threads(4):
        run_taking(part, 12, threads=2)
    assert sorted(j for j, _ in seen) == list(range(12))
    assert {slot for _, slot in seen} <= {0, 1}
