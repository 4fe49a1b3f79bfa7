"""The engine's two tiers: interpreted exploration while the kernels compile in the background,
then the compiled kernels; and the compile that makes every later call a cache hit."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
import time

import pytest

from kraftcheck.checker.compile import compile_kernels, is_compiled, marker_path
from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.explore.engine import Engine, Kernels, kernel_shapes
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class


def _model(name, **params):
    cls = spec_class(name)
    return Model(cls(cls.Params(**params)))


def _counts(r):
    return (r.status, r.distinct_states, r.states_generated, r.depth, r.coverage(),
            [(v.check, v.depth, [s.label for s in v.steps]) for v in r.violations])


@pytest.fixture
def fresh_kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path))
    return tmp_path


class Watch(RunObserver):
    """Notes the forms a run switched to (with the states found before each) and keeps the
    finished run, for its paths."""

    def __init__(self):
        self.switches, self.run = [], None

    def tier_switched(self, form, distinct):
        self.switches.append((form, distinct))

    def run_finished(self, result, run):
        self.run = run


class SwitchAfterLevel(Watch):
    """Once level ``level`` is finished, waits (on the background compile, not a clock) until the
    kernels are compiled, so that the run takes them before its next chunk. ``started``: the
    background compiles started so far."""

    def __init__(self, shapes, level, started):
        super().__init__()
        self.shapes, self.level, self.started = shapes, level, started

    def level_finished(self, depth, distinct, generated):
        if depth == self.level:
            (worker,) = self.started
            _wait_while_it_works(lambda: is_compiled(self.shapes), worker.process.pid, "the background compile")


def test_background_compile_switches_tiers_mid_run_with_identical_results(fresh_kernel_cache, monkeypatch):
    """A run that explores its first levels in bytecode, then (the observer waiting at level 8
    for the background compile to end) compiled: counts are TLC's, coverage and verdict the same
    as a run compiled from the start, and so is the path kept to every state (states are
    numbered alike by both tiers): its parent links and labels, sampled on every level."""
    from kraftcheck.checker.explore import tiers

    started = []

    class Hurried(tiers.BackgroundCompile):  # at the default priority from the start: the run waits for it
        def __init__(self, forms):
            super().__init__(forms)
            started.append(self)
            self.hurry()

    monkeypatch.setattr(tiers, "BackgroundCompile", Hurried)
    monkeypatch.setenv("KRAFTCHECK_INTERPRET_S", "600")  # the observer decides when the run switches
    model = _model("two_phase", rm=7)
    shapes = kernel_shapes(model)
    assert not is_compiled(shapes)
    background, now = SwitchAfterLevel(shapes, 8, started), Watch()
    result = Engine(compile="background").explore(model, Options(keep_going=True), observer=background)
    assert (result.distinct_states, result.states_generated, result.depth) == (296448, 2744706, 23)
    expected = Engine(compile="now").explore(_model("two_phase", rm=7), Options(keep_going=True), observer=now)
    assert _counts(result) == _counts(expected)
    assert background.switches and background.switches[-1][0] == shapes.module_name
    assert 0 < background.switches[0][1] < result.distinct_states, "the run should have switched tiers mid-run"
    background, now = background.run, now.run
    starts = background.level_starts + [result.distinct_states]
    sample = [i for lo, hi in zip(starts, starts[1:]) for i in range(lo, hi, max(1, (hi - lo) // 40))]
    assert [background.trace(i) for i in sample] == [now.trace(i) for i in sample]
    assert result.compiled_in_background
    assert 0 < result.interpreted_states < result.distinct_states, "the run should have switched tiers"
    assert result.compile_s > 0
    assert is_compiled(kernel_shapes(model, table=True)), "a small layout's table form compiles first"


class ScriptedCompile:
    """Stands in for ``BackgroundCompile``: its forms become ready at the engine's ``ready_at``-th
    question (each compiled here when it does), so the switches happen at known chunks."""

    def __init__(self, forms, ready_at=(3, 6)):
        self.forms, self.shapes, self.ready_at = list(forms), list(forms)[-1], ready_at
        self.asked, self.ready, self.status, self.elapsed = 0, {}, "scripted", 0.0
        self.finished_s, self.left_running = None, False

    def ready_form(self):
        from kraftcheck.checker.compile import compile_in_process
        self.asked += 1
        for shapes, at in zip(self.forms, self.ready_at):
            if self.asked >= at and shapes.module_name not in self.ready:
                compile_in_process(shapes, processes=1)
                self.ready[shapes.module_name] = float(self.asked)
        ready = [shapes for shapes in self.forms if shapes.module_name in self.ready]
        return ready[-1] if ready else None

    def failed(self):
        return False

    def hurry(self):
        pass

    def stop(self, keep=None):
        pass


def test_a_small_layout_explores_interpreted_then_table_form_then_unrolled_with_identical_results(
        fresh_kernel_cache, monkeypatch):
    """The background compile of a small layout gives its table form first and its unrolled form
    after: the run takes each between two chunks (both pack a state into the same words, so the
    visited set and the levels carry over), and counts, coverage, violations and every sampled
    path are those of a run compiled from the start."""
    from kraftcheck.checker.explore import tiers
    monkeypatch.setenv("KRAFTCHECK_INTERPRET_S", "600")  # the script decides when forms are ready
    scripts = []
    monkeypatch.setattr(tiers, "BackgroundCompile", lambda forms: scripts.append(ScriptedCompile(forms)) or scripts[-1])
    model = _model("two_phase", rm=5)
    background, now = Watch(), Watch()
    result = Engine(compile="background").explore(model, Options(keep_going=True), observer=background)
    table, unrolled = kernel_shapes(model, table=True).module_name, kernel_shapes(model).module_name
    assert [f.module_name for f in scripts[0].forms] == [table, unrolled]
    assert [form for form, _ in background.switches] == [table, unrolled]
    assert background.switches[-1][1] < result.distinct_states, "the unrolled form should explore some chunks too"
    expected = Engine(compile="now").explore(_model("two_phase", rm=5), Options(keep_going=True), observer=now)
    assert _counts(result) == _counts(expected)
    assert result.interpreted_states > 0 and result.compile_s == float(scripts[0].ready_at[1])
    background, now = background.run, now.run
    starts = background.level_starts + [result.distinct_states]
    sample = [i for lo, hi in zip(starts, starts[1:]) for i in range(lo, hi, max(1, (hi - lo) // 20))]
    assert [background.trace(i) for i in sample] == [now.trace(i) for i in sample]


def test_a_small_layout_whose_table_form_is_compiled_starts_with_it(fresh_kernel_cache, monkeypatch):
    from kraftcheck.checker.compile import compile_in_process
    from kraftcheck.checker.explore import tiers
    scripts = []
    monkeypatch.setattr(tiers, "BackgroundCompile", lambda forms: scripts.append(ScriptedCompile(
        [forms] if not isinstance(forms, list) else forms, ready_at=(10**9,))) or scripts[-1])
    model = _model("two_phase", rm=3)
    compile_in_process(kernel_shapes(model, table=True), processes=1)
    result = Engine(compile="background").explore(model, Options(keep_going=True))
    assert [f.module_name for f in scripts[0].forms] == [kernel_shapes(model).module_name]
    assert result.interpreted_states == 0 and result.compiled_in_background
    assert _counts(result) == _counts(Engine(compile="now").explore(_model("two_phase", rm=3), Options(keep_going=True)))


def test_after_its_time_the_interpreted_tier_waits_for_the_compile(fresh_kernel_cache, monkeypatch):
    """With ``KRAFTCHECK_INTERPRET_S=0`` the run interprets nothing past the initial states: it
    waits for the first form of the kernels (a real background compile here)."""
    monkeypatch.setenv("KRAFTCHECK_INTERPRET_S", "0")
    result = Engine(compile="background").explore(_model("two_phase", rm=4), Options(keep_going=True))
    assert result.compiled_in_background and result.interpreted_states == 0 and result.compile_s > 0
    assert _counts(result) == _counts(Engine(compile="now").explore(_model("two_phase", rm=4), Options(keep_going=True)))


@pytest.mark.parametrize("value", ["soon", "-1"])
def test_a_bad_interpreting_time_is_refused_before_any_compile(fresh_kernel_cache, monkeypatch, value):
    from kraftcheck.checker.errors import UsageError
    monkeypatch.setenv("KRAFTCHECK_INTERPRET_S", value)
    with pytest.raises(UsageError, match="KRAFTCHECK_INTERPRET_S must be a number of seconds"):
        Engine(compile="background").explore(_model("die_hard"), Options())
    assert not list(fresh_kernel_cache.iterdir()), "nothing should have been written or compiled"


def test_both_forms_of_a_small_layout_pack_a_state_into_the_same_words(fresh_kernel_cache):
    import numpy as np
    from kraftcheck.checker.codegen import layout_values, load_kernels
    model = _model("two_phase", rm=3)
    states, seen = list(model.initial), set(model.initial)  # every reachable state, breadth-first
    for flat in states:
        for label in model.enabled_labels(flat):
            nxt = model.step(flat, label)
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                states.append(nxt)
    assert len(states) == 288
    rows = np.array(states, np.int64)
    words = {}
    for table in (False, True):
        module = load_kernels(model, table)
        out = np.zeros((len(states), model.layout.nwords), np.uint64)
        assert module.pack_rows(rows, out, layout_values(model.layout, table)) == -1
        words[table] = out
    assert words[False].tolist() == words[True].tolist() == [list(model.layout.pack(s)) for s in states]


def test_a_run_that_ends_first_stops_the_compile_and_leaves_no_process(fresh_kernel_cache):
    model = _model("two_phase_eager_commit", rm=3)
    result = Engine(compile="background").explore(model, Options())
    assert result.compiled_in_background and result.compile_s is None
    assert result.interpreted_states > 0
    assert not is_compiled(kernel_shapes(model))
    ps = subprocess.run(["ps", "-eo", "ppid,args"], capture_output=True, text=True).stdout
    mine = [line for line in ps.splitlines()
            if "kraftcheck.checker.compile" in line and line.split()[0] == str(os.getpid())]
    assert mine == []


def test_a_compile_the_run_outlived_finishes_alone_for_the_next_run(fresh_kernel_cache, monkeypatch):
    """By default (``KRAFTCHECK_KEEP_COMPILING`` unset; the tests' conftest sets it to 0) a run
    that ends before its background compile leaves it running in a session of its own; it
    finishes, marks the module compiled and exits 0, and the next run explores compiled from the
    start."""
    from kraftcheck.checker.explore import tiers
    started = []

    class Recorded(tiers.BackgroundCompile):
        def __init__(self, shapes):
            super().__init__(shapes)
            started.append(self)

    monkeypatch.setattr(tiers, "BackgroundCompile", Recorded)
    monkeypatch.delenv("KRAFTCHECK_KEEP_COMPILING")
    model = _model("two_phase_eager_commit", rm=3)
    try:
        result = Engine(compile="background").explore(model, Options())
        assert result.compiled_in_background and result.compile_s is None and result.compile_continues
        (worker,) = started
        assert worker.process.poll() is None, "the compile should still run after the run ended"
        assert os.getsid(worker.process.pid) != os.getsid(0), "the compile should run in a session of its own"
        worker.hurry()  # its lowest priority is another test's: on a loaded machine it would wait for hours
        _wait_while_it_works(lambda: worker.process.poll() is not None, worker.process.pid, "the detached compile")
        assert worker.process.returncode == 0
    finally:  # whatever failed, no compile, helper or scratch folder is left
        for left in started:
            left.stop(keep=False)
    assert is_compiled(kernel_shapes(model))
    again = Engine(compile="background").explore(_model("two_phase_eager_commit", rm=3), Options())
    assert not again.compiled_in_background and again.interpreted_states == 0
    assert _counts(again) == _counts(result)


# What a compile of these tests' kernels costs on an idle machine is ~20 CPU seconds (a cold
# two_phase, worker and helper together): thirty times that is a compile spinning, not a slow one.
COMPILE_CPU_BOUND_S = 600.0
# A compile that got no CPU time at all for this long is stuck (a loaded machine slows it; even at
# nice 19 it gets some CPU every second).
STUCK_S = 120.0


def _wait_while_it_works(done, pid: int, what: str) -> None:
    """Wait until ``done()``, however long a loaded machine makes it, as long as process ``pid``
    and its children keep using CPU time: the bounds are on the CPU the compile spends, which load
    does not change, not on the wall clock, which it does."""
    import psutil
    used, since = -1.0, time.monotonic()
    while not done():
        try:
            process = psutil.Process(pid)
            times = process.cpu_times()
            now = sum(times[:4]) + sum(sum(c.cpu_times()[:2]) for c in process.children(recursive=True))
        except psutil.Error:  # it has ended: done() says so now, or never will
            assert done(), f"{what} ended before it was done"
            return
        assert now < COMPILE_CPU_BOUND_S, f"{what} has used {now:.0f} CPU seconds and goes on"
        if now > used:
            used, since = now, time.monotonic()
        assert time.monotonic() - since < STUCK_S, f"{what} has used no CPU time for {STUCK_S:.0f} s"
        time.sleep(0.1)


def test_a_compiled_cache_is_used_at_once(fresh_kernel_cache):
    model = _model("die_hard")
    Engine(compile="now").explore(model, Options())
    assert is_compiled(kernel_shapes(model))
    result = Engine(compile="background").explore(_model("die_hard"), Options())
    assert not result.compiled_in_background and result.interpreted_states == 0


def test_the_warm_up_compiles_exactly_the_signatures_the_engine_calls(fresh_kernel_cache):
    """If the warm-up's argument types differed from the engine's, the engine would compile a
    second time during the run (slow), and the 'compiled' marker would lie."""
    model = _model("two_phase", rm=3)
    kernels = Kernels(model)
    compile_kernels(kernels.module, kernel_shapes(model))
    dispatchers = [kernels.module.pack_rows, kernels.module.unpack_rows, kernels.module.unpack_range,
                   kernels.module.check, *kernels.module.EXPANDERS]
    before = [len(d.signatures) for d in dispatchers]
    assert before == [1] * len(dispatchers)
    Engine().explore(model, Options(keep_going=True))
    assert [len(d.signatures) for d in dispatchers] == before


def _compile_worker_report(model, processes: int) -> list[str]:
    """What a compile worker of ``model`` prints, run with ``processes`` compile processes."""
    import json
    shapes = kernel_shapes(model)
    job = {"shapes": json.loads(shapes.to_json()), "sys_path": sys.path, "modules": {}}
    out = subprocess.run([sys.executable, "-m", "kraftcheck.checker.compile"], input=json.dumps(job),
                         capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, KRAFTCHECK_COMPILE_PROCESSES=str(processes)))
    assert out.returncode == 0, out.stderr
    assert marker_path(shapes.module_path).exists()
    return out.stdout.splitlines()


def test_the_compile_worker_reports_each_kernel(fresh_kernel_cache):
    model = _model("die_hard", small=2, big=7)
    lines = _compile_worker_report(model, processes=1)
    assert lines[-1] == f"compiled {kernel_shapes(model).module_name}"
    assert [line.split(": ", 1)[1] for line in lines[:-1]] == \
        ["engine kernels: distinct path", "invariants", "engine kernels: row passes", "pack", "unpack", "unpack_range",
         *[a.name for a in model.actions]]


def test_a_worker_with_helpers_reports_each_kernel_once(fresh_kernel_cache):
    """With helpers, the worker reports the kernels it compiles as it takes them and the helpers'
    as it loads them: every kernel once, in whatever order they were taken."""
    model = _model("die_hard", small=2, big=7)
    lines = _compile_worker_report(model, processes=3)
    assert lines[-1] == f"compiled {kernel_shapes(model).module_name}"
    names = [line.split(": ", 1)[1] for line in lines[:-1]]
    assert sorted(names) == sorted(["engine kernels: distinct path", "invariants", "engine kernels: row passes", "pack", "unpack", "unpack_range",
                                   *[a.name for a in model.actions]])


def test_progress_says_what_is_compiling():
    from kraftcheck.checker.explore.result import Progress
    from kraftcheck.cli.terminal import progress_line

    assert progress_line(Progress(0, 0, 0, 0, 3.0, compiling="kernel 4/21: Fetch")) == \
        "compiling kernels: kernel 4/21: Fetch  3.0s"
    both = progress_line(Progress(5, 1496, 2907, 1158, 11.5, compiling="5/21: Fetch, 12 s"))
    first, *counts = both.split("\n")
    assert first == "compiling kernels in the background: 5/21: Fetch, 12 s"
    assert counts[0].startswith("interpreting meanwhile:")
    assert counts[-1].startswith("depth 5  distinct 1,496") or "meanwhile: depth 5  distinct 1,496" in counts[0]
    assert "\n" not in progress_line(Progress(5, 1496, 2907, 1158, 11.5))


def test_a_marker_without_numba_cache_is_not_trusted(fresh_kernel_cache, monkeypatch, tmp_path):
    """The marker says the kernels were compiled; if numba's cache has been moved or emptied
    since (NUMBA_CACHE_DIR), the kernels are not compiled and the engine must know it."""
    model = _model("die_hard", small=3, big=8)
    Engine(compile="now").explore(model, Options())
    shapes = kernel_shapes(model)
    assert is_compiled(shapes)
    module = __import__("sys").modules[shapes.module_name]
    index = module.EXPANDERS[0]._cache._cache_file._index_path
    os.unlink(index)
    assert not is_compiled(shapes)


def test_presets_with_one_layout_share_the_kernels_of_their_common_actions(fresh_kernel_cache):
    """An action's kernel module does not depend on the model's other actions, so a preset that
    adds or swaps actions (here the electing variants of --election any) reuses, and does not
    compile again, the kernel of every action it keeps; a layout change gives new modules."""
    import ast
    from kraftcheck.api import make_spec
    from kraftcheck.checker.codegen import write_kernel_module

    def generated(params):
        model = Model(make_spec("kafka", params))
        _, path = write_kernel_module(model)
        line = next(line for line in path.read_text().splitlines() if line.startswith("GENERATED = "))
        names = ast.literal_eval(line[len("GENERATED = "):])
        return model, names[0], dict(zip([a.name for a in model.actions], names[2:]))

    default, layout, kernels = generated({"brokers": 3, "min_isr": 2})
    electing, electing_layout, electing_kernels = generated({"brokers": 3, "min_isr": 2, "election": "any"})
    assert electing_layout == layout
    same_function = {a.name for a in default.actions for b in electing.actions if a.name == b.name and a.fn is b.fn}
    assert 0 < len(same_function) < len(default.actions)
    for name, module in kernels.items():
        assert (electing_kernels.get(name) == module) == (name in same_function), name
    _, two_brokers_layout, two_brokers_kernels = generated({"brokers": 2, "min_isr": 1})
    assert two_brokers_layout != layout and not set(two_brokers_kernels.values()) & set(kernels.values())


def test_kernels_compiled_by_several_processes_explore_as_those_compiled_by_one(fresh_kernel_cache, monkeypatch):
    """``compile_in_process`` with helpers: every kernel ends up compiled and loaded here, the
    helpers have exited, and the run counts what a run compiled by one process counts."""
    from kraftcheck.checker.compile import compile_in_process
    monkeypatch.setenv("KRAFTCHECK_COMPILE_PROCESSES", "1")
    one = Engine(compile="now").explore(_model("two_phase", rm=4), Options(keep_going=True))
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(fresh_kernel_cache / "together"))
    model = _model("two_phase", rm=4)
    shapes = kernel_shapes(model)
    before = set(_children())
    compile_in_process(shapes, processes=3)
    assert set(_children()) - before == set(), "a compile helper outlived the compile"
    assert is_compiled(shapes)
    together = Engine(compile="background").explore(model, Options(keep_going=True))
    assert not together.compiled_in_background
    assert _counts(together) == _counts(one)


def _children() -> list[int]:
    import psutil
    return [p.pid for p in psutil.Process().children(recursive=True)]


def test_claims_give_each_kernel_to_one_process(tmp_path):
    from kraftcheck.checker.compile import _Claims
    first, second = _Claims(str(tmp_path)), _Claims(str(tmp_path))
    granted = [(first(i), second(i)) for i in range(5)] + [(second(i), first(i)) for i in range(5, 9)]
    assert granted == [(True, False)] * 9


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_compile_process_count_is_refused_with_what_to_pass(monkeypatch, value):
    from kraftcheck.checker.compile import compile_processes
    from kraftcheck.checker.errors import SpecError
    monkeypatch.setenv("KRAFTCHECK_COMPILE_PROCESSES", value)
    with pytest.raises(SpecError, match="KRAFTCHECK_COMPILE_PROCESSES must be a whole number of at least 1"):
        compile_processes()


def test_a_folder_named_kraftcheck_where_a_run_starts_does_not_stand_in_for_the_package(tmp_path):
    """The compile processes start as ``python -c`` without the working directory on their path
    (``compile.worker_command``): with ``python -m`` a ``kraftcheck`` folder there was taken for
    the package, and a spec file's ``from kraftcheck import ...`` failed in the compile."""
    import json
    import shutil
    from pathlib import Path
    (tmp_path / "kraftcheck").mkdir()
    shutil.copy(Path(__file__).parents[1] / "bench" / "specs" / "ewd840.py", tmp_path / "ewd840.py")
    env = dict(os.environ, KRAFTCHECK_CACHE_DIR=str(tmp_path / "cache"), KRAFTCHECK_INTERPRET_S="0",
               KRAFTCHECK_COMPILE_PROCESSES="2")
    out = subprocess.run([str(Path(sys.executable).parent / "kraftcheck"), "check", "--spec", "ewd840.py:EWD840",
                          "--param", "n=2", "--json", "-", "--quiet"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report["interpreted_states"] == 0 and report["compile_s"] > 0


def test_the_first_tier_is_bytecode_and_says_so_when_it_is_python(fresh_kernel_cache, monkeypatch):
    """A run whose kernels are not compiled explores in bytecode; a spec the bytecode does not
    translate (numpy's methods) explores in Python, and the result says why, naming the line."""
    import odd_specs
    monkeypatch.setenv("KRAFTCHECK_KEEP_COMPILING", "0")
    result = Engine(compile="background").explore(_model("two_phase", rm=3), Options(keep_going=True))
    assert result.first_tier == "bytecode" and result.first_tier_python_because is None
    assert result.interpreted_states == result.distinct_states == 288
    result = Engine(compile="background").explore(Model(odd_specs.Tally(odd_specs.TallyParams())), Options())
    assert result.first_tier == "python"
    assert re.search(r"odd_specs\.py:\d+ \(bump\): a call of a method", result.first_tier_python_because)


def _group_gone(pgid: int, within_s: float) -> bool:
    """Whether process group ``pgid`` is empty within ``within_s`` (killed helpers are reaped by
    init, not at once)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_stopped_compile_leaves_no_claims_folder(fresh_kernel_cache, monkeypatch, tmp_path):
    """A run that ends before its background compile, with KRAFTCHECK_KEEP_COMPILING=0, stops it:
    the compile and its helpers end at once, and the folder where they claim kernels goes
    (before, every such stop left a kraftcheck-compile-* folder in $TMPDIR; then a SIGTERM took
    up to 5 s while numba finished a kernel in LLVM)."""
    from kraftcheck.checker.compile import BackgroundCompile
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    monkeypatch.setenv("KRAFTCHECK_COMPILE_PROCESSES", "2")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))  # the worker's: seconds to compile, not loads
    builder = BackgroundCompile(kernel_shapes(_model("two_phase", rm=6)))
    try:
        builder.hurry()  # at the lowest priority a loaded machine would keep it from starting for long
        def claiming():
            return [c for c in fresh_kernel_cache.glob("kernels/*.claims") if any(c.iterdir())]

        _wait_while_it_works(lambda: claiming() or builder.process.poll() is not None, builder.process.pid,
                             "the compile")
        assert claiming(), "the compile ended before it could be stopped"
        builder.stop(keep=False)
        assert builder.process.returncode == -signal.SIGKILL  # killed, not waited for
        assert list(scratch.glob("kraftcheck-compile-*")) == []
        assert list(fresh_kernel_cache.glob("kernels/*.claims")) == []
        assert _group_gone(builder.process.pid, within_s=5), "a helper of the stopped compile runs on"
    finally:
        if builder.process.poll() is None:
            builder.process.kill()
            builder.process.wait()


def test_a_claims_folder_a_killed_compile_left_is_in_the_cache_and_goes_with_the_next_compile(
        fresh_kernel_cache, monkeypatch, tmp_path):
    """A process killed while it compiled with helpers (SIGKILL, the OOM killer: no finally runs)
    left its claims folder in $TMPDIR for good (kraftcheck-compile-* folders with files 0, 1, ...
    piled up in /tmp). The folder is now beside the module in the kernel cache, where the next
    compile of the module, holding its lock, removes it."""
    from kraftcheck.checker import compile as compile_module
    from kraftcheck.checker.compile import claims_path, compile_in_process
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    (tmp_path / "tmp").mkdir()
    compiled = []
    monkeypatch.setattr(compile_module, "compile_kernels", lambda module, shapes, *a, **k: compiled.append(shapes))
    shapes = kernel_shapes(_model("die_hard"))
    left = claims_path(shapes.module_path)
    assert left.parent == Path(shapes.module_path).parent  # in the kernel cache
    left.mkdir(parents=True)
    for i in range(3):  # what a killed compile leaves: the kernels it and its helpers had claimed
        (left / str(i)).touch()
    compile_in_process(shapes, processes=1)  # the compile itself is not this test's: it is skipped
    assert compiled == [shapes] and not left.exists() and list((tmp_path / "tmp").iterdir()) == []


def test_the_interpreter_helper_compiles_what_the_bytecode_tier_loads(tmp_path):
    """An installation's first run compiles the interpreter in a helper process
    (``InterpreterCompile``) into numba's cache, for the argument types the bytecode tier hands
    it (``kernels.bytecode.warm_up``): in this process, after warm_up, every spec's bytecode
    kernels (actions with and without parameters, properties, checks) use its one signature, so
    the run loads what the helper compiled and compiles nothing itself."""
    from kraftcheck.checker.explore.bytecode_tier import BytecodeKernels, InterpreterCompile
    from kraftcheck.checker.kernels import bytecode as vm
    cache = tmp_path / "numba"
    old = os.environ.get("NUMBA_CACHE_DIR")
    os.environ["NUMBA_CACHE_DIR"] = str(cache)  # the helper's environment: this process's
    try:
        helper = InterpreterCompile()
    finally:
        os.environ.pop("NUMBA_CACHE_DIR") if old is None else os.environ.__setitem__("NUMBA_CACHE_DIR", old)
    helper.wait()
    assert helper.process.returncode == 0
    names = {p.name.split("-")[0] for p in cache.rglob("*.nbi")}
    assert "bytecode.evaluate" in names
    vm.warm_up()
    for name, params in [("two_phase", {"rm": 3}), ("die_hard", {}), ("kafka", {})]:
        BytecodeKernels(_model(name, **params))
    assert len(vm.evaluate.signatures) == 1


def test_a_run_takes_over_the_helper_started_before_its_model(monkeypatch):
    """The command line starts the interpreter's helper before building the model; the run's
    engine takes that one over rather than starting another, and starts none once cached."""
    from kraftcheck.checker.explore import bytecode_tier

    started = []

    class Helper:
        def __init__(self):
            started.append(self)

        def stop(self):
            pass

    monkeypatch.setattr(bytecode_tier, "InterpreterCompile", Helper)
    monkeypatch.setattr(bytecode_tier.vm, "cached", lambda: False)
    bytecode_tier.interpreter_compile().stop()  # one started early and not taken over yet (else a new one): gone
    started.clear()
    try:
        bytecode_tier.start_interpreter_compile()
        bytecode_tier.start_interpreter_compile()  # one is enough
        assert len(started) == 1
        assert bytecode_tier.interpreter_compile() is started[0]
        assert bytecode_tier.interpreter_compile() is not started[0] and len(started) == 2  # a later run: its own
        monkeypatch.setattr(bytecode_tier.vm, "cached", lambda: True)
        assert bytecode_tier.interpreter_compile() is None
    finally:
        monkeypatch.setattr(bytecode_tier.vm, "cached", lambda: False)
        bytecode_tier.interpreter_compile()  # none of this test's left for a later run, whatever happened


def test_a_background_compile_runs_at_the_lowest_priority(fresh_kernel_cache, monkeypatch, tmp_path):
    """The run that started it (its first tier, the interpreter's compile on a first run) comes
    first: the compile's scheduling group (its session's, where Linux groups by session) is at
    nice 19, else the process itself; once the run waits for it, its group is back at 0."""
    from kraftcheck.checker.compile import BackgroundCompile
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    builder = BackgroundCompile(kernel_shapes(_model("two_phase", rm=4)))
    try:
        group = Path(f"/proc/{builder.process.pid}/autogroup")
        if group.exists():
            deadline = time.monotonic() + 2  # a write refused within 100 ms of another is retried
            while group.read_text().split()[-1] != "19" and time.monotonic() < deadline:
                time.sleep(0.05)
            assert group.read_text().split()[-1] == "19"
            builder.hurry()
            deadline = time.monotonic() + 2
            while group.read_text().split()[-1] != "0" and time.monotonic() < deadline:
                time.sleep(0.05)
            assert group.read_text().split()[-1] == "0"
        else:
            assert os.getpriority(os.PRIO_PROCESS, 0) < 19, "a compile inherits the tests' own nice 19"
            assert os.getpriority(os.PRIO_PROCESS, builder.process.pid) == 19
    finally:
        builder.stop(keep=False)


def test_a_group_priority_refused_every_time_falls_back_to_the_process(monkeypatch):
    """Linux refuses an autogroup write within 100 ms of another (EAGAIN); a compile whose every
    retry is refused still gives way, at its own nice 19."""
    import errno
    from kraftcheck.checker import compile as compile_module

    def refused(path, mode="r"):
        raise OSError(errno.EAGAIN, "refused", path)

    monkeypatch.setattr(compile_module, "open", refused, raising=False)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert compile_module.give_way(child.pid)  # the group exists, so it is retried
        deadline = time.monotonic() + 5
        while os.getpriority(os.PRIO_PROCESS, child.pid) != 19 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.getpriority(os.PRIO_PROCESS, child.pid) == 19
    finally:
        child.kill()
        child.wait()


def test_a_retried_group_priority_does_not_undo_a_later_hurry(monkeypatch):
    """``give_way``'s write refused (EAGAIN) is retried 0.11 s later; a ``hurry`` that got through
    meanwhile stays: the retry writes the nice last asked for, 0, not 19."""
    import errno
    from kraftcheck.checker import compile as compile_module
    written = []

    class Group:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, text):
            written.append(text)

    pid = 2 ** 22 + 1  # no such process: only the writes are looked at

    def refused_once(path, mode="r"):
        if path != f"/proc/{pid}/autogroup":  # another test's retry, still on its thread: not this test's
            return open(path, mode)
        if not written and not refused_once.done:
            refused_once.done = True
            raise OSError(errno.EAGAIN, "refused", path)
        return Group()

    refused_once.done = False
    monkeypatch.setattr(compile_module, "open", refused_once, raising=False)
    assert compile_module.give_way(pid)  # refused: retried on a thread
    compile_module._set_group_nice(pid, 0)  # the run waits for it (hurry)
    deadline = time.monotonic() + 2
    while len(written) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert written == ["0", "0"]


def test_a_failed_compile_is_said_on_a_first_run_before_exploring(fresh_kernel_cache, monkeypatch):
    """On an installation's first run numba types the spec before the run explores, while the
    interpreter compiles; a background compile that has failed by then is said as such (it
    once met a run without its clock: AttributeError)."""
    from kraftcheck.checker.explore import engine, tiers

    class Helper:
        def wait(self):
            pass

        def stop(self):
            pass

    class Failed:
        left_running = False
        status = "failed"
        elapsed = 0.0

        def __init__(self, forms):
            self.shapes = forms[-1] if isinstance(forms, list) else forms

        def ready_form(self):
            return None

        def failed(self):
            return True

        def error_text(self):
            return "the worker's own error"

        def hurry(self):
            pass

        def stop(self, keep=None):
            pass

    monkeypatch.setattr(engine, "interpreter_compile", Helper)
    monkeypatch.setattr(tiers, "BackgroundCompile", Failed)
    monkeypatch.setattr(tiers, "compile_in_process", lambda shapes, processes=None: None)  # numba accepts it
    with pytest.raises(SpecError, match="compiling the kernels failed in the background: the worker's own error"):
        Engine(compile="background").explore(_model("two_phase", rm=2), Options())


def test_a_kernel_of_kraftcheck_s_own_that_numba_refuses_is_its_bug_not_the_spec_s(fresh_kernel_cache, monkeypatch):
    """A line numba refuses in a module kraftcheck generated, or in one of its checker package's
    kernels, is kraftcheck's bug (KraftcheckBug, exit 2, asking for a report), not the spec's: the
    spec wording would send the user after a bug in their spec. A spec's own line numba refuses
    keeps the spec's wording. Each action kernel is generated here with one more line (its module
    name, a digest of its text, is new and lands in this test's cache only)."""
    import odd_specs

    from kraftcheck.checker import codegen
    from kraftcheck.checker.errors import KraftcheckBug
    generated = codegen._action_kernel
    added = []

    def with_a_line_added(*args, **kwargs):
        lines = generated(*args, **kwargs)
        start = next(i for i, line in enumerate(lines) if line.startswith("def expand"))
        body = next(i for i in range(start, len(lines)) if lines[i].endswith("):")) + 1  # past the signature
        return lines[:body] + added + lines[body:]

    monkeypatch.setattr(codegen, "_action_kernel", with_a_line_added)
    added[:] = ['    refused = "a" + 1']  # in the generated module's own text
    said = (r"^kraftcheck's own kernel code failed to compile at \S*/kc_die_hard_action_\w+\.py:\d+ \(a kernel "
            r"module kraftcheck generated\), compiling the kernels of spec die_hard: No implementation of function "
            r".*; this is a bug of kraftcheck's, not of the spec \(no verdict\): please report it")
    with pytest.raises(KraftcheckBug, match=said):
        Engine(compile="now").explore(_model("die_hard"), Options())
    # a row function of kraftcheck's own (kernels.rows, which action kernels import), handed integers
    added[:] = ["    refused = same_values(3, 4)"]
    with pytest.raises(KraftcheckBug, match=r"^kraftcheck's own kernel code failed to compile at \S*/checker/kernels/"
                                            r"rows\.py:\d+ \(a module of kraftcheck's\), compiling the kernels of "
                                            r"spec die_hard: Unknown attribute 'shape'"):
        Engine(compile="now").explore(_model("die_hard"), Options())
    added[:] = []
    line = next(i for i, text in enumerate(open(odd_specs.__file__), 1) if 's.marked + "1"' in text)
    with pytest.raises(SpecError, match=r"^the kernels of spec adds_a_string failed to compile at \S*odd_specs\.py:%d: "
                                        r".*a spec's functions keep to what both tiers run" % line):
        Engine(compile="now").explore(Model(odd_specs.AddsAString(odd_specs.GridParams(1))), Options())
