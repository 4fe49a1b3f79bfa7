"""What the executors run for one BFS level: plain functions over numpy batches (no pyspark here).

A level is expanded, deduplicated and ordered; ``explorer.py`` runs the last two as one Spark job
of two stages, and the expansion of the level's new states inside the ordering task that writes
them, so a level costs two stages, not three. The candidates of an expansion cross from one job
to the next through files in the work dir (``workdir.candidate_path``), not through Spark:

1. expansion (``expand_states``): a range of a level's states through the compiled kernels, chunk
   by chunk, keeping each chunk's distinct successors (``Kernels.distinct_successors``, as the
   local engine does: no self-loop, each state once with its smallest key) unless a state or
   action constraint needs every row; each becomes a candidate (packed words, and its key
   ``index * nlabels + label`` with ``index`` counted from the range's first state: the position
   of that transition in the local engine's order, once the driver knows where the range
   starts). The candidates are written grouped by the hash bucket of their fingerprint; coverage
   and the first violations among the range's transitions go to the driver as one small summary.
   It runs inside ``order`` (task t expands the part it has just written), in ``expand`` (a
   whole level split evenly into P ranges: after a resume) or on the driver (the initial states).
2. ``deduplicate`` (bucket b): reads its slice of every range's candidate file and makes the keys
   global; among equal candidates keeps the smallest key (the local engine's first occurrence),
   drops those in the bucket's visited runs (a few sorted runs, searched with the candidates
   sorted the same way), adds the rest to the bucket's runs (``add_run``: a run of their own,
   merged with the smaller runs before it), and sends each new state to the task whose range of
   parents holds its parent.
3. ``order`` (task t): sort the new states by key, which is exactly the local engine's order;
   write them as part t of the new level; check invariants; expand them (step 1) unless the run
   will not need it; return counters only.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional

import numpy as np

from kraftcheck.checker.errors import KernelsDisagree, SpecError, SpecRaised
from kraftcheck.checker.explore.kernel_audit import KernelAudit
from kraftcheck.checker.kernels.hashing import fingerprints
from kraftcheck.checker.kernels.visited import MAX_FINGERPRINT
from kraftcheck.spark import workdir
from kraftcheck.spark.transitions import (NO_HIT, RaisedOnSuccessor, distinct_chunks, earliest, every_row_chunks,
                                           first_hits, read_frontier, transitions)

# a level's run is merged with the run before it while that one holds at most MERGE_RATIO times
# as many states: a bucket then has a few runs of decreasing size (about log2 of its states at
# most, in practice two to four), so a level searches a few runs however deep the search is, and
# each state is rewritten a few times over the whole run
MERGE_RATIO = 2


@dataclass(frozen=True)
class LevelPlan:
    """What every task of one level needs to know (small: shipped with each task)."""

    root: str                      # the work dir
    run: str                       # the model's identity, for the per-worker kernel cache
    level: int                     # the level being expanded (its successors form level + 1)
    part_counts: tuple[int, ...]   # states in each file of the level being expanded
    level_start: int               # global index of that level's first state
    splits: tuple[int, ...]        # P + 1 global indices: order task t takes the new states whose
                                   # parent is in splits[t] .. splits[t+1] (and ``expand`` task t
                                   # expands that range)
    nwords: int
    nlabels: int
    cache_dir: Optional[str]       # KRAFTCHECK_CACHE_DIR for the executors, if the driver has one
    fingerprints: bool = False     # --fingerprints: the visited runs hold fingerprints, not states
    firsts: tuple[int, ...] = ()   # P + 1 global indices: the level's candidate file t holds the
                                   # transitions of states firsts[t] .. firsts[t+1] (none if empty)
    expand_next: bool = False      # order tasks expand the new level's states (the run goes on)
    threads: int = 1               # the kernels' threads in a task: the cores Spark gives it (spark.task.cpus)

    @property
    def partitions(self) -> int:
        return len(self.splits) - 1

    @property
    def kernels_key(self) -> str:
        """What a worker keeps the run's kernels (and their buffers) by: the model and the threads."""
        return f"{self.run}:{self.threads}"


@dataclass(frozen=True)
class ModelRecipe:
    """How an executor builds the run's model: the spec class (pickled by reference, so its
    ``@njit`` functions are the module's own, as the kernel generator requires), its parameters
    and the selected checks. (A pickled Model would carry copies of the functions instead.) Small:
    it goes with every task, in the job's closure, not as a broadcast, whose pickling asks the
    driver's JVM for the broadcast's id (if the JVM has just died, PySpark prints that call's
    traceback on the terminal before the job fails)."""

    spec_class: type
    params: Any
    checks: tuple[str, ...]
    constraints: tuple[str, ...] = ()  # the state and action constraints applied
    deadlock: bool = False
    # ((module, SHA-256 of its source), ...): the spec's code as the driver imported it
    # (``spec_code``), which every executor's must be
    code: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, model: Any) -> "ModelRecipe":
        from kraftcheck.checker.explore.spec_code import spec_code
        return cls(type(model.spec), model.spec.params, tuple(model.check_names),
                   tuple(c.name for c in model.constraints + model.action_constraints), model.check_deadlock,
                   tuple(spec_code(model).items()))

    @property
    def identity(self) -> str:
        """Equal for equal models: executors keep the kernels of recent models by it. The spec's
        code is in it: kernels a worker kept from a run of other code are not this model's, and a
        model built anew has its code compared (``build``)."""
        cls = self.spec_class
        return (f"{cls.__module__}:{cls.__qualname__}:{self.params!r}:{self.checks!r}:{self.constraints!r}:"
                f"{self.deadlock!r}:{hashlib.sha256(repr(self.code).encode()).hexdigest()[:20]}")

    def build(self) -> Any:
        """The model, in an executor: refused (a SpecError, the run's exit 2) if the spec's code
        there is not the driver's. An executor imports the spec itself, from its own files, and a
        Python worker Spark reuses keeps what it imported for an earlier run: a spec saved during
        the run, or another version of it installed on a worker, had the executors explore
        another spec than the driver's, and the run count a state space of neither. The modules
        compared are those of the driver's spec code this executor imported, by content (it may
        run a shipped copy of the spec's file): one it did not import runs no code here."""
        from kraftcheck.checker.explore.spec_code import source_file
        from kraftcheck.checker.imported_source import imported_digest
        from kraftcheck.checker.model import Model
        model = Model(self.spec_class(self.params), check=list(self.checks) or None,
                      constraints=list(self.constraints), deadlock=self.deadlock)
        differ = []
        for name, digest in self.code:
            if name not in sys.modules:
                continue
            path = source_file(name)
            if path is None or imported_digest(str(path)).hex() != digest:
                differ.append(name)
        if differ:
            raise SpecError(f"the spec's code on this executor ({os.uname().nodename}, pid {os.getpid()}) is not "
                            f"the driver's: module {differ[0]}{f' and {len(differ) - 1} more' if len(differ) > 1 else ''}"
                            " differs (saved since the driver imported it, another version installed here, or an "
                            "earlier run's, kept by a Python worker Spark reuses); no verdict: give every executor the "
                            "driver's code, and run again")
        return model


class SpecErrorAt(Exception):
    """A spec's ``error`` on a state the driver can find: explored state ``index`` (``-1 - i``:
    initial state i), then the steps by ``labels`` from it (a new state known by its key, the
    successor a check raised on). A task knows the keys of its states, not always their indices."""

    def __init__(self, error: SpecError, index: int, labels: tuple[int, ...] = ()) -> None:
        super().__init__(error, index, labels)
        self.error, self.index, self.labels = error, index, labels


def raised_at(error: SpecError, row: int, keys: Optional[np.ndarray], first: int, nlabels: int,
              labels: tuple[int, ...] = ()) -> SpecErrorAt:
    """``error``, raised on row ``row`` of a batch of states (then along ``labels``), placed: the
    batch's states are those of ``keys`` (new states, each reached by its key's transition) or,
    without keys, the explored states ``first``, ``first + 1``, ..."""
    if keys is None:
        return SpecErrorAt(error, first + row, labels)
    key = int(keys[row])
    return SpecErrorAt(error, key // nlabels, (key % nlabels,) + labels)


class RaisedBySpec:
    """A spec's own error in a task (or the kernels' disagreement with the spec's Python,
    ``KernelsDisagree``), sent back as the task's value: it would be raised the same on every
    attempt, so it must not fail the task (Spark would try it four times, logging each);
    the driver raises it (``error``), with the path to the state it was raised on if the task said
    where that is (``place``: ``SpecErrorAt``'s index and labels)."""

    def __init__(self, error: SpecError, place: Optional[tuple[int, tuple[int, ...]]] = None) -> None:
        self.error_class, self.args, self.attributes = type(error), error.args, dict(vars(error))
        self.place = place

    def error(self) -> SpecError:
        error = self.error_class.__new__(self.error_class)
        error.args = self.args
        vars(error).update(self.attributes)
        error.at = None  # a row of a task's batch: nothing to the driver
        return error


def spec_errors_returned(in_list: bool = False) -> Callable[[Callable], Callable]:
    """A task returning a spec's error as a ``RaisedBySpec`` (``in_list``: in a list, for a task
    that returns a list of summaries) instead of raising it."""
    def returning(task: Callable) -> Callable:
        @functools.wraps(task)
        def run(*args: Any) -> Any:
            try:
                return task(*args)
            except (SpecError, SpecErrorAt, KernelsDisagree) as e:
                raised = RaisedBySpec(e.error, (e.index, e.labels)) if isinstance(e, SpecErrorAt) else RaisedBySpec(e)
                return [raised] if in_list else raised
        return run
    return returning


_kernels: dict[str, Any] = {}  # model identity -> Kernels, per Python worker (Spark reuses workers)
# each worker's kernels checked against the spec's Python on a sample of the states they expand
_audits: "weakref.WeakKeyDictionary[Any, KernelAudit]" = weakref.WeakKeyDictionary()
KERNELS_KEPT = 8


def worker_kernels(plan: LevelPlan, recipe: "ModelRecipe") -> Any:
    """The compiled kernels of the run's model in this worker: loaded once (from numba's cache on
    disk), with the task's ``plan.threads`` threads: Spark runs as many tasks at once as an
    executor has cores, each on ``spark.task.cpus`` of them (one unless set)."""
    kernels = _kernels.get(plan.kernels_key)
    if kernels is None:
        if plan.cache_dir:
            os.environ["KRAFTCHECK_CACHE_DIR"] = plan.cache_dir
        from kraftcheck.checker.compile import compile_in_process
        from kraftcheck.checker.explore.compiled import Kernels, kernel_shapes
        from kraftcheck.checker.kernels.threads import using_threads
        model = recipe.build()
        with using_threads(plan.threads):  # the kernels split every batch into that many parts
            kernels = Kernels(model, compile_in_process(kernel_shapes(model)))
        if len(_kernels) >= KERNELS_KEPT:
            _kernels.pop(next(iter(_kernels)))
        _kernels[plan.kernels_key] = kernels
    return kernels


def clipped(hashes: np.ndarray) -> np.ndarray:
    """The fingerprints the local engine's ``FingerprintSet`` stores (all ones is its empty mark)."""
    return np.minimum(hashes, MAX_FINGERPRINT)


def bucket_of(hashes: np.ndarray, partitions: int, by_range: bool) -> np.ndarray:
    """Each candidate's hash bucket. Exact mode: bits 40.. of its hash, modulo the partitions.
    With fingerprints: the range its fingerprint falls in (bucket b holds the b-th of P equal
    slices of 0..2^64), so the buckets in order hold the fingerprints in order and the smallest
    gap between two of them is found bucket by bucket (``fingerprint_summary``)."""
    if by_range:
        return ((clipped(hashes) >> np.uint64(32)) * np.uint64(partitions)) >> np.uint64(32)
    return (hashes >> np.uint64(40)) % np.uint64(partitions)


def small_ints(values: np.ndarray, bound: int) -> np.ndarray:
    """``values`` (all below ``bound``) as 16-bit integers if they fit: numpy sorts those by radix,
    stable, in linear time (bench/RESULTS.md, "Spark: deduplication by fingerprint, a task a core for
    small levels")."""
    return values.astype(np.uint16 if bound <= 1 << 16 else np.int64)


@spec_errors_returned()
def expand(plan: LevelPlan, recipe: "ModelRecipe", task: int) -> dict:
    """Step 1 as a task of its own (after a resume): the level's states ``splits[task] ..
    splits[task + 1]``; the candidates' keys count from ``splits[task]``."""
    kernels = worker_kernels(plan, recipe)
    lo, hi = plan.splits[task], plan.splits[task + 1]
    return expand_states(plan, kernels, plan.level, task, read_frontier(plan, lo, hi), first=lo)


def expand_states(plan: LevelPlan, kernels: Any, level: int, task: int, words: np.ndarray,
                  chunk_states: Optional[int] = None, state_keys: Optional[np.ndarray] = None,
                  first: int = 0) -> dict:
    """Step 1: the transitions of the states ``words`` of level ``level`` (the range ``task`` of
    that level), keys counted from the range's first state. Writes the candidates as that
    level's candidate file ``task``, grouped by hash bucket (none if ``words`` is empty); returns
    the range's coverage and, as keys counted the same way, the first transition violating each
    property, the first successor outside the constraints violating each invariant, and its
    first deadlocked state (the key of its last label; NO_HIT: none). A spec's error on a state
    is raised placed (``SpecErrorAt``): ``words`` are the new states of ``state_keys`` or, without
    them, the explored states ``first``, ``first + 1``, ..."""
    try:
        return _expand_states(plan, kernels, level, task, words, chunk_states)
    except SpecRaised as e:
        if e.at is None:
            raise
        raise raised_at(e, e.at, state_keys, first, plan.nlabels) from None
    except RaisedOnSuccessor as e:
        raise raised_at(e.error, e.row, state_keys, first, plan.nlabels, (e.label,)) from None


def _expand_states(plan: LevelPlan, kernels: Any, level: int, task: int, words: np.ndarray,
                   chunk_states: Optional[int]) -> dict:
    model = kernels.model
    audit = _audits.get(kernels)
    if audit is None:
        audit = _audits[kernels] = KernelAudit(model)
    audit.chunk(kernels, words, 0, words.shape[0], None)
    fired = np.zeros(len(model.actions), np.int64)
    prop_min = np.full(len(model.properties), NO_HIT, np.int64)
    outside_min = np.full(len(model.invariants), NO_HIT, np.int64)  # invariants broken outside the constraints
    deadlock = NO_HIT
    words_parts, hash_parts, key_parts = [], [], []
    if model.constrained:
        chunks = every_row_chunks(plan, kernels, words, 0)
    else:
        chunks = distinct_chunks(plan, kernels, words, 0, chunk_states)
    for chunk in chunks:
        fired += chunk.fired
        earliest(prop_min, chunk.prop_first)
        earliest(outside_min, chunk.outside_first)
        if deadlock == NO_HIT:
            deadlock = chunk.stuck
        words_parts.append(chunk.words)
        hash_parts.append(chunk.hashes)
        key_parts.append(chunk.keys)
    if words.shape[0]:
        nw = plan.nwords
        cand_words = np.concatenate(words_parts) if words_parts else np.empty((0, nw), np.uint64)
        keys = np.concatenate(key_parts) if key_parts else np.empty(0, np.int64)
        hashes = np.concatenate(hash_parts) if hash_parts else np.empty(0, np.uint64)
        buckets = small_ints(bucket_of(hashes, plan.partitions, plan.fingerprints), plan.partitions)
        by_bucket = np.argsort(buckets, kind="stable")
        bounds = np.searchsorted(buckets[by_bucket], np.arange(plan.partitions + 1)).astype(np.int64)
        workdir.save(workdir.candidate_path(plan.root, level, task, "words"), cand_words[by_bucket], durable=False)
        workdir.save(workdir.candidate_path(plan.root, level, task, "keys"), keys[by_bucket], durable=False)
        workdir.save(workdir.candidate_path(plan.root, level, task, "bounds"), bounds, durable=False)
    return {"task": task, "generated": int(fired.sum()), "fired": fired.tolist(), "properties": prop_min.tolist(),
            "outside": outside_min.tolist(), "deadlock": int(deadlock)}


def read_candidates(plan: LevelPlan, bucket: int) -> tuple[np.ndarray, np.ndarray]:
    """Bucket ``bucket``'s candidates of the level being expanded, from every range's candidate
    file (only its slice of each), with global keys."""
    nw, nl = plan.nwords, plan.nlabels
    words_parts, key_parts = [], []
    for t in range(len(plan.firsts) - 1):
        if plan.firsts[t] == plan.firsts[t + 1]:
            continue  # an empty range writes no file
        bounds = workdir.load(workdir.candidate_path(plan.root, plan.level, t, "bounds"), np.int64)
        lo, hi = int(bounds[bucket]), int(bounds[bucket + 1])
        if lo == hi:
            continue
        words_parts.append(workdir.load_slice(workdir.candidate_path(plan.root, plan.level, t, "words"), np.uint64,
                                              lo, hi, nw))
        keys = workdir.load_slice(workdir.candidate_path(plan.root, plan.level, t, "keys"), np.int64, lo, hi)
        key_parts.append(keys + np.int64(plan.firsts[t] * nl))
    if not key_parts:
        return np.empty((0, nw), np.uint64), np.empty(0, np.int64)
    return np.concatenate(words_parts), np.concatenate(key_parts)


def _grouped(targets: np.ndarray, words: np.ndarray, keys: np.ndarray, partitions: int) -> list[tuple[int, tuple]]:
    """(target, ("states", words, keys)) for every target that gets any, order kept within each."""
    order = np.argsort(small_ints(targets, partitions), kind="stable")
    bounds = np.searchsorted(targets[order], np.arange(partitions + 1))
    out = []
    for p in range(partitions):
        rows = order[bounds[p]: bounds[p + 1]]
        if rows.size:
            out.append((p, ("states", words[rows], keys[rows])))
    return out


def deduplicate(plan: LevelPlan, bucket: int) -> Iterator[tuple[int, tuple]]:
    """Step 2 for hash bucket ``bucket``: the new states of the bucket, each sent to the step-3 task
    whose range of parents holds its parent, and the sizes and digests of the visited run it wrote, sent to
    task ``bucket`` (which hands it to the driver)."""
    words, keys = read_candidates(plan, bucket)
    if plan.fingerprints:
        words, keys, fps = _new_by_fingerprint(plan, bucket, words, keys)
        written = add_run(plan.root, bucket, plan.level + 1, fps)  # sorted: a run
    else:
        words, keys, fps = _new_exact(plan, bucket, words, keys)
        written = add_run(plan.root, bucket, plan.level + 1, fps, words)
    yield bucket, ("run", written)  # to the driver, through the task of part ``bucket``
    if keys.size:
        targets = np.searchsorted(np.array(plan.splits, np.int64), keys // plan.nlabels, side="right") - 1
        yield from _grouped(targets, words, keys, plan.partitions)


def exact_run(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A visited run of exact mode: the states sorted by (fingerprint, words), and their
    fingerprints (so a lookup is a search among 64-bit integers, then one row compared)."""
    fps = fingerprints(words)
    order = np.lexsort(tuple(words[:, w] for w in reversed(range(words.shape[1]))) + (fps,))
    return words[order], fps[order]


def open_run(root: str, bucket: int, run: tuple[int, int], nwords: int,
             with_words: bool = True) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """A run's fingerprints and (exact mode) states, mapped from its files: a search reads only the
    pages it touches."""
    fps = _mapped(workdir.run_path(root, bucket, *run, "fps"), np.uint64)
    words = _mapped(workdir.run_path(root, bucket, *run, "words"), np.uint64, nwords) if with_words else None
    return fps, words


def _mapped(path, dtype, nwords: int = 0) -> np.ndarray:
    if path.stat().st_size == 0:  # numpy cannot map an empty file
        return np.empty((0, nwords) if nwords else 0, dtype)
    data = np.memmap(path, dtype=dtype, mode="r")
    return data.reshape(-1, nwords) if nwords else data


def _rows_before(a_fps: np.ndarray, a_words: Optional[np.ndarray], b_fps: np.ndarray,
                 b_words: Optional[np.ndarray]) -> np.ndarray:
    """For each row of sorted run b: how many rows of sorted run a come before it in (fingerprint,
    words) order. One search of b's sorted fingerprints (numpy narrows each search by the one
    before), then, where a fingerprint of b is also in a (only when two different states share a
    64-bit fingerprint), the rows of a with that fingerprint compared one by one."""
    at = np.searchsorted(a_fps, b_fps, side="left")
    if b_words is None or not a_fps.size:
        return at
    shared = np.flatnonzero(a_fps[np.minimum(at, a_fps.size - 1)] == b_fps)
    for i in shared:
        j = int(at[i])
        while j < a_fps.size and a_fps[j] == b_fps[i] and tuple(a_words[j]) < tuple(b_words[i]):
            j += 1
        at[i] = j
    return at


def merge_runs(a_fps: np.ndarray, a_words: Optional[np.ndarray], b_fps: np.ndarray,
               b_words: Optional[np.ndarray]) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Two disjoint runs sorted by (fingerprint, words) as one, in one pass over each."""
    into = _rows_before(a_fps, a_words, b_fps, b_words) + np.arange(b_fps.size)
    from_b = np.zeros(a_fps.size + b_fps.size, bool)
    from_b[into] = True
    fps = np.empty(from_b.size, np.uint64)
    fps[from_b], fps[~from_b] = b_fps, a_fps
    if b_words is None:
        return fps, None
    words = np.empty((from_b.size, b_words.shape[1]), np.uint64)
    words[from_b], words[~from_b] = b_words, a_words
    return fps, words


def add_run(root: str, bucket: int, level: int, fps: np.ndarray, words: Optional[np.ndarray] = None) -> dict:
    """Add level ``level``'s new states of ``bucket`` (sorted by (fingerprint, words); no words
    with --fingerprints) to its visited runs: a run of their own, merged with the run before it
    while that one is at most ``MERGE_RATIO`` times larger. The runs read are left in place (the
    driver removes them once the level is committed), so a task run again reads what its first
    attempt read and writes the same file. Returns the run written: its bucket, its name and its
    files' sizes and digests (for the manifest)."""
    runs = workdir.visited_runs(root, bucket, level - 1)
    first = level
    while runs and workdir.run_size(root, bucket, runs[-1]) <= MERGE_RATIO * fps.size:
        run = runs.pop()
        old_fps, old_words = open_run(root, bucket, run, 0 if words is None else words.shape[1], words is not None)
        fps, words = merge_runs(old_fps, old_words, fps, words)
        first = run[0]
    files = {}
    if words is not None:
        files["words"] = workdir.save(workdir.run_path(root, bucket, first, level, "words"), words)
    files["fps"] = workdir.save(workdir.run_path(root, bucket, first, level, "fps"), fps)  # last: now it counts
    return {"bucket": bucket, "run": workdir.run_name(first, level), "files": files}


def _first_of_each_state(words: np.ndarray, keys: np.ndarray, fps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A bucket's candidates, each distinct state once in (fingerprint, words) order: the rows that
    hold them and the smallest key of each. Sorted by fingerprint alone, which is that order as
    long as equal fingerprints mean equal states: checked, and then any row of a group of equal
    fingerprints holds its state and the group's smallest key is the state's (one sort of 64-bit
    integers instead of one on every word and the key, several times faster: bench/RESULTS.md,
    "Spark: deduplication by fingerprint, a task a core for small levels"). Only if two different
    states share a fingerprint, which 64-bit fingerprints almost never do, are the words sorted too."""
    order = np.argsort(fps)
    sorted_fps = fps[order]
    tied = np.flatnonzero(sorted_fps[1:] == sorted_fps[:-1])  # row tied + 1 repeats row tied's fingerprint
    if tied.size and np.any(words[order[tied]] != words[order[tied + 1]]):  # different states, one fingerprint
        order = np.lexsort((keys,) + tuple(words[:, w] for w in reversed(range(words.shape[1]))) + (fps,))
        ordered = words[order]
        first = np.ones(order.size, bool)
        first[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
        return order[first], keys[order[first]]
    first = np.ones(order.size, bool)
    first[tied + 1] = False
    starts = np.flatnonzero(first)
    smallest = np.minimum.reduceat(keys[order], starts) if starts.size else keys[:0]
    return order[starts], smallest


def _new_exact(plan: LevelPlan, bucket: int, words: np.ndarray,
               keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact mode: among equal candidates the smallest key is kept (the local engine's first
    occurrence), and those already in the bucket's visited runs are dropped. Returns the new
    states, their keys and fingerprints, sorted by (fingerprint, words): the bucket's next run."""
    nw = plan.nwords
    fps = fingerprints(words)
    kept, keys = _first_of_each_state(words, keys, fps)
    words, fps = words[kept], fps[kept]
    seen = np.zeros(keys.shape[0], bool)
    for run in workdir.visited_runs(plan.root, bucket, plan.level):
        run_fps, run_words = open_run(plan.root, bucket, run, nw)
        if not run_fps.size or not fps.size:
            continue
        # the candidates are sorted by fingerprint as the run is, so numpy narrows each search by
        # the one before: about one pass over the run's pages that hold candidates
        at = np.searchsorted(run_fps, fps)
        hit = np.flatnonzero((at < run_fps.size) & ~seen)
        hit = hit[run_fps[at[hit]] == fps[hit]]
        same = np.all(run_words[at[hit]] == words[hit], axis=1)
        seen[hit[same]] = True
        for c in hit[~same]:  # a fingerprint shared by different states: look at the rest of them
            j = int(at[c]) + 1
            while j < run_fps.size and run_fps[j] == fps[c]:
                if np.array_equal(run_words[j], words[c]):
                    seen[c] = True
                    break
                j += 1
        del run_fps, run_words
    return words[~seen], keys[~seen], fps[~seen]


def _new_by_fingerprint(plan: LevelPlan, bucket: int, words: np.ndarray,
                        keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """--fingerprints: candidates with equal fingerprints are one state (the smallest key kept, as
    the local ``FingerprintSet`` keeps the first), and those whose fingerprint is in the bucket's
    visited runs are not new. Returns the new states, their keys and their sorted fingerprints."""
    fps = clipped(fingerprints(words)) if words.shape[0] else np.empty(0, np.uint64)
    order = np.lexsort((keys, fps))
    words, keys, fps = words[order], keys[order], fps[order]
    first = np.ones(fps.shape[0], bool)
    first[1:] = fps[1:] != fps[:-1]
    words, keys, fps = words[first], keys[first], fps[first]
    seen = np.zeros(fps.shape[0], bool)
    for run in workdir.visited_runs(plan.root, bucket, plan.level):
        run_fps, _ = open_run(plan.root, bucket, run, 0, with_words=False)
        if run_fps.size and fps.size:
            at = np.minimum(np.searchsorted(run_fps, fps), run_fps.size - 1)
            seen |= run_fps[at] == fps
        del run_fps
    return words[~seen], keys[~seen], fps[~seen]


def fingerprint_summary(root: str, bucket: int, through: int, partitions: int,
                        cut: Optional[tuple[int, int, int]] = None) -> dict:
    """--fingerprints, at the end of a run: bucket ``bucket``'s fingerprints of levels 0..``through``
    as their count, smallest, largest and the smallest gap between two of them (None if fewer
    than two). ``cut`` = (level, key, nlabels) for a run that stopped at its first violation in
    that level: its states with a larger key are not counted, so their fingerprints are left out."""
    runs = [open_run(root, bucket, run, 0, with_words=False)[0] for run in workdir.visited_runs(root, bucket, through)]
    fps = np.sort(np.concatenate(runs)) if runs else np.empty(0, np.uint64)
    if cut is not None and fps.size:
        fps = fps[~np.isin(fps, _past_the_cut(root, bucket, partitions, *cut))]
    if not fps.size:
        return {"bucket": bucket, "count": 0}
    gap = int(np.diff(fps).min()) if fps.size > 1 else None
    return {"bucket": bucket, "count": int(fps.size), "min": int(fps[0]), "max": int(fps[-1]), "gap": gap}


def _past_the_cut(root: str, bucket: int, partitions: int, level: int, cut: int, nlabels: int) -> np.ndarray:
    """The fingerprints, in ``bucket``, of level ``level``'s states whose key is above ``cut``."""
    pieces = []
    for words_file in sorted(workdir.level_dir(root, level).glob("part-*.words")):
        parents = workdir.load(words_file.with_suffix(".parents"), np.uint64).astype(np.int64)
        labels = workdir.load(words_file.with_suffix(".labels"), np.uint16).astype(np.int64)
        past = np.flatnonzero(parents * nlabels + labels > cut)
        if past.size:
            words = workdir.load(words_file, np.uint64, 0).reshape(parents.size, -1)
            fps = clipped(fingerprints(np.ascontiguousarray(words[past])))
            pieces.append(fps[bucket_of(fps, partitions, True) == bucket])
    return np.concatenate(pieces) if pieces else np.empty(0, np.uint64)


def order(plan: LevelPlan, recipe: "ModelRecipe", task: int, items: Iterable[tuple[int, tuple]]) -> list[dict]:
    """Step 3 for task ``task``: write its new states in the local engine's order as part ``task``
    of the new level; check their invariants; expand them (``plan.expand_next``: step 1 of the
    next level, as its range ``task``). Returns its counters, the first violating key of each
    invariant, the expansion's summary (``next``; None if not expanded), the sizes and digests of its part's
    files (``files``) and of the visited runs written by the deduplication of bucket ``task`` (``runs``)."""
    kernels = worker_kernels(plan, recipe)
    model = kernels.model
    words_parts, key_parts, runs = [], [], []
    for _, item in items:
        if item[0] == "run":
            runs.append(item[1])
        else:
            words_parts.append(item[1])
            key_parts.append(item[2])
    words = np.concatenate(words_parts) if words_parts else np.empty((0, plan.nwords), np.uint64)
    keys = np.concatenate(key_parts) if key_parts else np.empty(0, np.int64)
    by_key = np.argsort(keys)  # keys are unique (a transition's): any sort gives the one order
    words, keys = words[by_key], keys[by_key]
    labels = (keys % plan.nlabels).astype(np.uint16)
    new_level = plan.level + 1
    files = {kind: workdir.save(workdir.part_path(plan.root, new_level, task, kind), data)
             for kind, data in (("words", words), ("parents", (keys // plan.nlabels).astype(np.uint64)),
                                ("labels", labels))}
    inv_min = np.full(len(model.invariants), NO_HIT, np.int64)
    if model.invariants and keys.size:
        try:
            masks = kernels.violations(words)
        except SpecRaised as e:
            if e.at is None:
                raise
            raise raised_at(e, e.at, keys, 0, plan.nlabels) from None
        first_hits(masks, keys, len(model.invariants), inv_min)
    label_action = np.array(model.label_action, np.int64)
    expansion = expand_states(plan, kernels, new_level, task, words, state_keys=keys) if plan.expand_next else None
    return [{
        "task": task, "count": int(keys.size),
        "new": np.bincount(label_action[labels.astype(np.int64)], minlength=len(model.actions)).tolist(),
        "invariants": inv_min.tolist(), "next": expansion, "files": files, "runs": runs,
    }]


def stage_groups(partitions: int, tasks: int) -> tuple[tuple[int, ...], ...]:
    """The ``partitions`` buckets (or parts) of a level cut into ``tasks`` groups of consecutive
    ones, as even as can be: what each task of a stage handles when a small level runs fewer
    tasks than partitions (the files stay those of ``partitions`` tasks)."""
    return tuple(tuple(range(i * partitions // tasks, (i + 1) * partitions // tasks)) for i in range(tasks))


def deduplicate_buckets(plan: LevelPlan, buckets: Iterable[int]) -> Iterator[tuple[int, tuple]]:
    """Step 2 for each of ``buckets`` in one task."""
    for bucket in buckets:
        yield from deduplicate(plan, bucket)


@spec_errors_returned(in_list=True)
def order_parts(plan: LevelPlan, recipe: "ModelRecipe", parts: tuple[int, ...],
                items: Iterable[tuple[int, tuple]]) -> list[dict]:
    """Step 3 for each of ``parts`` in one task (every part is written, with no states if it got
    none), its new states told apart by the part they were sent to."""
    by_part: dict[int, list[tuple[int, tuple]]] = {t: [] for t in parts}
    for item in items:
        by_part[item[0]].append(item)
    return [summary for t in parts for summary in order(plan, recipe, t, by_part[t])]


@spec_errors_returned()
def count_until(plan: LevelPlan, recipe: "ModelRecipe", lo: int, task: int, cut: int) -> dict:
    """For a run that stops at the transition with key ``cut``: what the level's expansion range
    starting at state ``lo`` generated up to and including it, and the new states up to it in
    order task ``task``'s part (the one whose range of parents holds the cut's), as the local
    engine counts a stop."""
    kernels = worker_kernels(plan, recipe)
    model = kernels.model
    label_action = np.array(model.label_action, np.int64)
    fired = np.zeros(len(model.actions), np.int64)
    generated = 0
    for _, _, keys, *_ in transitions(plan, kernels, read_frontier(plan, lo, cut // plan.nlabels + 1), lo):
        keys = keys[keys <= cut]
        generated += keys.size
        fired += np.bincount(label_action[keys % plan.nlabels], minlength=fired.shape[0])
    new_level = plan.level + 1
    parents = workdir.load(workdir.part_path(plan.root, new_level, task, "parents"), np.uint64).astype(np.int64)
    labels = workdir.load(workdir.part_path(plan.root, new_level, task, "labels"), np.uint16).astype(np.int64)
    kept = parents * plan.nlabels + labels <= cut
    return {"generated": generated, "fired": fired.tolist(), "count": int(kept.sum()),
            "new": np.bincount(label_action[labels[kept]], minlength=len(model.actions)).tolist()}
