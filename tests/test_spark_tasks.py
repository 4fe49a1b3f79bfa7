"""The Spark engine's expand and deduplication steps (``kraftcheck.spark.tasks``, ``transitions``) on
their own, without Spark. Deduplication: the visited runs are searched by fingerprint and
confirmed by comparing the states, so states whose fingerprints collide are still told apart
exactly, and merged into a few runs sorted by (fingerprint, words). Fingerprints are forced to
collide here (a few values for many states), which real 64-bit fingerprints almost never do.
Expansion: the distinct-successor path leaves deduplication what the every-row path does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftcheck.spark import tasks, transitions, workdir


def _colliding(words: np.ndarray) -> np.ndarray:
    return (words[:, 0] % np.uint64(3)).astype(np.uint64)  # three fingerprints for every state


def _plan(root: str, level: int) -> tasks.LevelPlan:
    return tasks.LevelPlan(root=root, run="r", level=level, part_counts=(1,), level_start=0, splits=(0, 1),
                           nwords=2, nlabels=4, cache_dir=None)


rows = st.lists(st.tuples(st.integers(0, 20), st.integers(0, 3)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(old_levels=st.lists(rows, min_size=0, max_size=3), candidates=rows, collide=st.booleans(),
       keys_in_order=st.booleans())
def test_new_states_are_exactly_those_in_no_run_even_when_fingerprints_collide(tmp_path_factory, old_levels,
                                                                                candidates, collide, keys_in_order):
    """With forced collisions (deduplication then sorts the words too) and with real fingerprints
    (by fingerprint alone, the smallest key of each group of equal ones kept); keys rising or
    falling along the candidates."""
    with pytest.MonkeyPatch.context() as patch:
        if collide:
            patch.setattr(tasks, "fingerprints", _colliding)
        _check_new_exact(str(tmp_path_factory.mktemp("work")), old_levels, candidates, keys_in_order)


def _check_new_exact(root, old_levels, candidates, keys_in_order=False):
    visited: set[tuple[int, int]] = set()
    for level, level_rows in enumerate(old_levels):
        fresh = sorted({r for r in level_rows} - visited)
        visited |= set(fresh)
        words, fps = tasks.exact_run(np.array(fresh, np.uint64).reshape(-1, 2))
        tasks.add_run(root, 0, level, fps, words)
        _check_runs(root, level, visited)
    words = np.array(candidates, np.uint64).reshape(-1, 2)
    keys = np.arange(words.shape[0], dtype=np.int64)
    if not keys_in_order:
        keys = keys[::-1].copy()  # later rows have smaller keys
    new_words, new_keys, new_fps = tasks._new_exact(_plan(root, len(old_levels) - 1), 0, words, keys)
    got = [tuple(int(x) for x in r) for r in new_words]
    assert sorted(got) == sorted(set(candidates) - visited) and len(got) == len(set(got))
    for r, k in zip(got, new_keys):  # the smallest key among a state's candidates is kept
        assert k == min(keys[i] for i, c in enumerate(candidates) if c == r)
    assert np.array_equal(new_fps, tasks.fingerprints(new_words))
    order = [(int(f),) + r for f, r in zip(new_fps, got)]
    assert order == sorted(order)  # the next run is sorted by (fingerprint, words)


def _check_runs(root: str, through: int, visited: set) -> None:
    """The runs covering levels 0..through hold every visited state once, each run sorted by
    (fingerprint, words) with its fingerprints beside it."""
    held = []
    for run in workdir.visited_runs(root, 0, through):
        fps, words = tasks.open_run(root, 0, run, 2)
        rows = [tuple(int(x) for x in r) for r in words]
        assert np.array_equal(fps, tasks.fingerprints(np.asarray(words))), "a run's .fps file does not match its states"
        keyed = [(int(f),) + r for f, r in zip(fps, rows)]
        assert keyed == sorted(keyed), "a run is not sorted by (fingerprint, words)"
        held += rows
    assert sorted(held) == sorted(visited)


def test_runs_are_merged_so_a_bucket_keeps_few_of_them_whatever_the_depth(tmp_path):
    """Forty levels of one state each, then a level of many: one run a level would be 41 runs to
    search; merged, a bucket keeps a few of decreasing size. The runs a merge replaced stay until
    removed (``stale_runs``): a task run again reads them."""
    root = str(tmp_path)
    for level in range(40):
        words, fps = tasks.exact_run(np.array([[level, 0]], np.uint64))
        tasks.add_run(root, 0, level, fps, words)
        for run in workdir.stale_runs(root, 0, level):
            workdir.remove_run(root, 0, run)
    runs = workdir.visited_runs(root, 0, 39)
    sizes = [workdir.run_size(root, 0, run) for run in runs]
    assert sum(sizes) == 40 and len(runs) <= 6 and sizes == sorted(sizes, reverse=True), sizes
    words, fps = tasks.exact_run(np.array([[1000 + i, 1] for i in range(100)], np.uint64))
    tasks.add_run(root, 0, 40, fps, words)
    assert workdir.visited_runs(root, 0, 40) == [(0, 40)]  # the large level took every run in
    assert workdir.stale_runs(root, 0, 40) == runs
    assert workdir.visited_runs(root, 0, 39) == runs  # what a re-run task of level 40 reads


def test_a_run_and_its_fingerprints_are_written_side_by_side(tmp_path):
    words = np.array([[5, 1], [2, 0], [9, 9]], np.uint64)
    run_words, run_fps = tasks.exact_run(words)
    tasks.add_run(str(tmp_path), 2, 0, run_fps, run_words)
    (run,) = workdir.visited_runs(str(tmp_path), 2, 0)
    assert run == (0, 0)
    fps, run = tasks.open_run(str(tmp_path), 2, run, 2)
    assert sorted(map(tuple, run.tolist())) == sorted(map(tuple, words.tolist()))
    assert np.array_equal(fps, np.sort(fps)) and np.array_equal(fps, tasks.fingerprints(np.asarray(run)))
    assert workdir.visited_runs(str(tmp_path), 2, -1) == []  # a level's own run is not "before" it


def _kernels(model):
    from kraftcheck.checker.compile import compile_in_process
    from kraftcheck.checker.explore.compiled import Kernels, kernel_shapes
    return Kernels(model, compile_in_process(kernel_shapes(model)))


def _first_keys(chunks, frontier, lo, nlabels):
    """State (as a tuple) -> the smallest key among the chunks' candidates, self-loops left out;
    and the candidates' count."""
    first, count = {}, 0
    for chunk in chunks:
        count += chunk.keys.size
        for row, key in zip(chunk.words, chunk.keys):
            state = tuple(int(x) for x in row)
            if state != tuple(int(x) for x in frontier[int(key) // nlabels - lo]):
                first[state] = min(first.get(state, key), key)
    return first, count


# an unconstrained model with a deadlock (Counters at top can only Stay: a self-loop), die_hard
# (checked for deadlocks, has none), a Kafka model whose transition properties are violated:
# what the first violations found on the every-row path must include
DISTINCT_CASES = [("constraint_specs:Counters", {}, {"deadlock"}), ("die_hard", {}, set()),
                  ("kafka", {"brokers": 2, "min_isr": 1, "new_leader_publish_window": True, "lossy_shutdowns": 0,
                             "isr_shrinks": 0}, {"property"})]


@pytest.mark.parametrize("name,params,found", DISTINCT_CASES, ids=[n for n, _, _ in DISTINCT_CASES])
def test_distinct_candidates_keep_each_states_smallest_key_whatever_the_chunks(tmp_path, name, params, found):
    """The expand task's distinct-successor path (no self-loop, each state once a chunk) leaves
    ``deduplicate`` the same smallest key for every state as the path with every transition a
    candidate, and counts the same transitions, first property violations and first deadlock,
    on every level of a model and for chunks of any size; whole-level chunks send fewer
    candidates."""
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.result import Options
    from kraftcheck.checker.model import Model
    from kraftcheck.specs import spec_class
    cls = spec_class(name)
    model = Model(cls(cls.Params(**params)), constraints=[])
    assert not model.constrained
    result = Engine(compile="now").explore(model, Options(keep_going=True, checkpoint_dir=str(tmp_path / "local")))
    kernels, nw, nl = _kernels(model), model.layout.nwords, len(model.labels)
    start, hits, fewer = 0, set(), False
    for level in range(result.depth):
        frontier = np.fromfile(tmp_path / "local" / f"level-{level:04d}.words", np.uint64).reshape(-1, nw)
        n = frontier.shape[0]
        plan = tasks.LevelPlan(root=str(tmp_path / f"spark-{level}"), run=f"test-{name}", level=level,
                               part_counts=(n,), level_start=start, splits=(start, start + n), nwords=nw, nlabels=nl,
                               cache_dir=None)
        every = list(transitions.every_row_chunks(plan, kernels, frontier, start))
        want, every_count = _first_keys(every, frontier, start, nl)
        for chunk_states in (1, 3, n):
            distinct = list(transitions.distinct_chunks(plan, kernels, frontier, start, chunk_states))
            got, count = _first_keys(distinct, frontier, start, nl)
            assert got == want, (level, chunk_states)
            assert not any(np.all(c.words == frontier[c.keys // nl - start], axis=1).any() for c in distinct)
            assert np.array_equal(sum(c.fired for c in distinct), sum(c.fired for c in every)), level
            assert np.array_equal(_earliest_of(distinct, "prop_first"), _earliest_of(every, "prop_first")), level
            assert _first_stuck(distinct) == _first_stuck(every), level
            fewer |= count < every_count
        if (_earliest_of(every, "prop_first") != tasks.NO_HIT).any():
            hits.add("property")
        if _first_stuck(every) != tasks.NO_HIT:
            hits.add("deadlock")
        start += n
    assert fewer  # the point: self-loops and repeats stay in the expand task
    assert hits == found


def _earliest_of(chunks, field):
    """Per check, the smallest key of ``field`` over the chunks (NO_HIT: none)."""
    out = np.full(len(getattr(chunks[0], field)), tasks.NO_HIT, np.int64)
    for chunk in chunks:
        transitions.earliest(out, getattr(chunk, field))
    return out


def _first_stuck(chunks):
    return next((c.stuck for c in chunks if c.stuck != tasks.NO_HIT), tasks.NO_HIT)


def test_a_tasks_kernels_run_the_threads_its_plan_gives(monkeypatch):
    """The driver puts the cores Spark gives a task (``spark.task.cpus``) in the level's plan; the
    executor's environment (``KRAFTCHECK_THREADS``) does not set them."""
    from kraftcheck.checker.model import Model
    from kraftcheck.specs import spec_class
    monkeypatch.setenv("KRAFTCHECK_THREADS", "3")
    monkeypatch.setattr(tasks, "_kernels", {})
    cls = spec_class("die_hard")
    recipe = tasks.ModelRecipe.of(Model(cls(cls.Params())))
    for threads in (1, 2):
        plan = tasks.LevelPlan(root="", run=recipe.identity, level=0, part_counts=(1,), level_start=0,
                               splits=(0, 1), nwords=1, nlabels=1, cache_dir=None, threads=threads)
        assert tasks.worker_kernels(plan, recipe).threads == threads


def test_an_executor_whose_spec_code_is_not_the_drivers_refuses_the_run(tmp_path, monkeypatch):
    """An executor imports the spec from its own files (and a Python worker Spark reuses keeps
    what an earlier run imported): a spec saved during the run, or another version installed on a
    worker, had it explore another spec than the driver's, in silence. The recipe carries the
    driver's spec code; an executor whose code differs raises the spec's error (exit 2)."""
    import dataclasses
    from pathlib import Path
    from kraftcheck.checker.errors import SpecError
    from kraftcheck.checker.explore.spec_code import spec_code
    from kraftcheck.checker.model import Model
    from kraftcheck.specs import spec_class
    path = tmp_path / "recipe_spec.py"
    path.write_text((Path(__file__).parents[1] / "specs" / "die_hard.py").read_text()
                    .replace('name = "die_hard"', 'name = "recipe_jugs"'))
    cls = spec_class(f"{path}:DieHard")
    model = Model(cls(cls.Params()))
    recipe = tasks.ModelRecipe.of(model)
    assert dict(recipe.code) == spec_code(model) and recipe.code
    assert recipe.build().spec.name == model.spec.name  # the same code: built
    (module, digest), *rest = recipe.code
    other = dataclasses.replace(recipe, code=((module, "0" * 64), *rest))
    with pytest.raises(SpecError, match=f"not the driver's: module {module} differs.*no verdict"):
        other.build()
    # a module of the driver's that this executor did not import runs no code here (a test's conftest)
    assert dataclasses.replace(recipe, code=(*recipe.code, ("recipe_helper_nowhere", "0" * 64))).build()


def test_a_worker_that_kept_an_earlier_runs_kernels_checks_the_spec_code_too(monkeypatch):
    """A Python worker Spark reuses keeps the kernels of its recent models, by the recipe's
    identity (spec, parameters, checks), which said nothing of the spec's code: a run after the
    spec was saved and imported again on the driver (a notebook's context, reused) took the
    earlier code's kernels from the worker without building the model, so the code was never
    compared, and the run explored the earlier spec. A recipe of other code is another model."""
    import dataclasses
    from kraftcheck.checker.errors import SpecError
    from kraftcheck.checker.model import Model
    from kraftcheck.specs import spec_class
    monkeypatch.setattr(tasks, "_kernels", {})
    cls = spec_class("die_hard")
    recipe = tasks.ModelRecipe.of(Model(cls(cls.Params())))
    (module, _), *rest = recipe.code
    other = dataclasses.replace(recipe, code=((module, "0" * 64), *rest))
    for r in (recipe, other):
        plan = tasks.LevelPlan(root="", run=r.identity, level=0, part_counts=(1,), level_start=0,
                               splits=(0, 1), nwords=1, nlabels=1, cache_dir=None)
        if r is recipe:
            tasks.worker_kernels(plan, r)
        else:
            with pytest.raises(SpecError, match=f"not the driver's: module {module} differs"):
                tasks.worker_kernels(plan, r)


def test_a_spec_file_saved_since_the_driver_imported_it_is_shipped_as_imported(tmp_path):
    """The driver ships a spec loaded from a file to the executors as a copy: the file as it was
    then, saved since the driver imported it or not, so the executors refused the run (their code
    not the driver's). The copy is the text the driver imported."""
    from pathlib import Path
    from kraftcheck.spark.explorer import ship_spec_files
    from kraftcheck.specs import spec_class
    text = (Path(__file__).parents[1] / "specs" / "die_hard.py").read_text().replace(
        'name = "die_hard"', 'name = "shipped_jugs"')
    path = tmp_path / "shipped_jugs.py"
    path.write_text(text)
    cls = spec_class(f"{path}:DieHard")
    path.write_text(text.replace("def ", "def  "))  # saved since: another text

    class Context:  # what ship_spec_files asks of a SparkContext
        def __init__(self):
            self.files = []

        def addPyFile(self, name):
            self.files.append(name)

    context = Context()
    shipped = ship_spec_files(context, cls)
    assert (shipped / f"{cls.__module__}.py").read_text() == text
    assert str(shipped / f"{cls.__module__}.py") in context.files
