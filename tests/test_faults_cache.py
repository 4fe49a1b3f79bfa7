"""Faults in the kernel cache, done on purpose (issue 46): a generated kernel changed or cut short,
numba's files cut short, without their digest or swapped between kernels, a spec file loaded by
path and then imported as a module, a spec's helper edited in another file, a cache that cannot
be written or is a file, and the background compiles runs leave behind (one per cache, one per
kernel key, ``kraftcheck cache status`` and ``clear``).

die_hard's kernels, compiled once in the suite's cache (``warm_die_hard``), serve every test that
needs compiled kernels, from a cache of this module's own.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraftcheck.checker import codegen, detached, numba_cache
from kraftcheck.checker.codegen import KernelCacheUnusable
from kraftcheck.checker.compile import is_compiled
from kraftcheck.checker.explore.engine import Engine, kernel_shapes
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.cli.main import cli
from kraftcheck.specs import SPEC_FILE_MODULE_PREFIX, spec_class

DIE_HARD = Path(__file__).parents[1] / "specs" / "die_hard.py"


def _model(name="die_hard", **params):
    cls = spec_class(name)
    return Model(cls(cls.Params(**params)))


def _counts(r):
    return (r.status, r.distinct_states, r.states_generated, r.depth, r.coverage(),
            [(v.check, [s.label for s in v.steps]) for v in r.violations])


def _forget_kernel_modules():
    """Make the next run import the generated modules from their files again, as a new process would."""
    for name in [n for n in sys.modules if n.startswith("kc_")]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def warm_die_hard(tmp_path_factory):
    """A kernel cache of its own with die_hard's kernels compiled, and the counts of a run on it.
    The kernels are compiled in the suite's cache, where the other tests' runs of die_hard find
    them too, and copied: a cold compile of their own would be one more of the same model."""
    result = Engine(compile="now").explore(_model(), Options(keep_going=True))
    shared = Path(kernel_shapes(_model()).module_path)
    line = next(x for x in shared.read_text().splitlines() if x.startswith("GENERATED = "))
    cache = tmp_path_factory.mktemp("kernel-cache")
    (cache / "kernels" / "__pycache__").mkdir(parents=True)
    for module in [shared.stem, *ast.literal_eval(line[len("GENERATED = "):])]:
        for path in [*shared.parent.glob(f"{module}.py*"), *(shared.parent / "__pycache__").glob(f"{module}.*")]:
            shutil.copy2(path, cache / "kernels" / path.relative_to(shared.parent))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KRAFTCHECK_CACHE_DIR", str(cache))
        assert is_compiled(kernel_shapes(_model())), "every file of the model's kernels copied"
    return cache, _counts(result)


@pytest.fixture
def warm(warm_die_hard, monkeypatch):
    cache, expected = warm_die_hard
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(cache))
    monkeypatch.setenv("KRAFTCHECK_COMPILE_PROCESSES", "1")  # no helper processes for what is cached
    return cache, expected


def _action_module(name: str) -> Path:
    """The file of the die_hard model's kernel of action ``name``."""
    model_path = Path(kernel_shapes(_model()).module_path)
    line = next(x for x in model_path.read_text().splitlines() if x.startswith("GENERATED = "))
    (module,) = [m for m in ast.literal_eval(line[len("GENERATED = "):]) if f"_action_{name}_" in m]
    return model_path.parent / f"{module}.py"


@pytest.mark.parametrize("damage", ["changed", "truncated"])
def test_a_damaged_kernel_is_found_and_compiled_again(warm, capsys, damage):
    """One changed byte made FillBig's kernel fire on no state: "holds" with wrong counts; a file
    cut short was a SyntaxError on every run. Either is now rewritten, said so, and the counts
    are those of the undamaged cache."""
    cache, expected = warm
    path = _action_module("FillBig")
    text = path.read_text()
    damaged = text.replace("range(lo, hi)", "range(lo, lo)") if damage == "changed" else text[: len(text) // 2]
    assert damaged != text
    path.write_text(damaged)
    _forget_kernel_modules()
    result = Engine(compile="now").explore(_model(), Options(keep_going=True))
    assert f"kernel cache: {path} was damaged; recompiling it" in capsys.readouterr().err
    assert path.read_text() == text
    assert _counts(result) == expected


def _numba_files(cache: Path, action: str, ext: str) -> Path:
    """numba's index (``nbi``) or compiled code (``nbc``) of the expand kernel of action ``action``."""
    (path,) = (cache / "kernels" / "__pycache__").glob(f"{_action_module(action).stem}.expand-*.{ext}")
    return path


_MISMATCH = "does not match what was compiled into it; recompiling it"


@pytest.mark.parametrize("damage", ["index cut short", "compiled code without its digest",
                                    "a folder for its index", "a folder for its compiled code"])
def test_a_damaged_or_old_numba_file_is_compiled_again(warm, capsys, damage):
    """numba unpickled its index as it found it: one cut short raised on every run. A file
    written before numba's files carried their digest (numba_cache) is compiled again too. A
    folder where a file should be (a file that cannot be read as well) was numba's traceback,
    said as kraftcheck's bug."""
    cache, expected = warm
    path = _numba_files(cache, "EmptyBig", "nbi" if "index" in damage else "nbc")
    content = path.read_bytes()
    if damage.startswith("a folder"):
        path.unlink()
        (path / "inside").mkdir(parents=True)
    else:
        path.write_bytes(content[:20] if damage == "index cut short" else content[:-numba_cache._TRAILER_SIZE])
    _forget_kernel_modules()
    result = Engine(compile="now").explore(_model(), Options(keep_going=True))
    assert f"kernel cache: {path} {_MISMATCH}" in capsys.readouterr().err
    assert _counts(result) == expected and numba_cache._MARK in path.read_bytes()


def test_a_numba_that_keeps_its_cache_otherwise_fails_at_import():
    """The digest hooks numba's cache file class; a numba whose class no longer has what they hook
    would write and read its files unchecked, so it is refused, naming what changed."""
    class Changed:
        def _save_index(self, overloads):
            self._write(self._index_path, overloads)

    with pytest.raises(ImportError, match=r"numba .*'s cache files: numba.core.caching has changed "
                                          r"\(its index written through _open_for_write; its compiled"):
        numba_cache._check_numba_internals(Changed)
    with pytest.raises(ImportError, match="has no IndexDataCacheFile"):
        numba_cache._check_numba_internals(None)


def test_compiled_code_swapped_between_kernels_is_compiled_again(warm, capsys, tmp_path, monkeypatch):
    """FillSmall's compiled code copied over FillBig's (and back) was loaded as FillBig's: exit 1
    with wrong counts and a longer counterexample, in silence. Each file now carries a digest of
    its name and content: both are said, compiled again, and the counts are the untampered ones."""
    warm_cache, expected = warm
    cache = tmp_path / "copy"
    shutil.copytree(warm_cache, cache)
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(cache))
    small, big = _numba_files(cache, "FillSmall", "nbc"), _numba_files(cache, "FillBig", "nbc")
    small_code, big_code = small.read_bytes(), big.read_bytes()
    small.write_bytes(big_code)
    big.write_bytes(small_code)
    _forget_kernel_modules()
    result = Engine(compile="now").explore(_model(), Options(keep_going=True))
    err = capsys.readouterr().err
    assert f"kernel cache: {small} {_MISMATCH}" in err and f"kernel cache: {big} {_MISMATCH}" in err
    assert _counts(result) == expected
    _forget_kernel_modules()
    assert _counts(Engine(compile="now").explore(_model(), Options(keep_going=True))) == expected
    assert _MISMATCH not in capsys.readouterr().err, "what was compiled again is taken as it is"


def test_the_interpreters_helper_writes_numba_files_a_run_can_check(tmp_path, monkeypatch):
    """An installation's first run has a helper process compile the interpreter while it compiles
    its own kernels. The helper imports a kernel module and nothing else: its files had no digest,
    so the run took each for a damaged one, said so on every first run and compiled the
    interpreter again itself."""
    from kraftcheck.checker.explore.bytecode_tier import InterpreterCompile
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    helper = InterpreterCompile()
    helper.wait()
    assert helper.process.returncode == 0
    files = [p for p in tmp_path.rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert files and all(p.read_bytes()[-numba_cache._TRAILER_SIZE:].startswith(numba_cache._MARK) for p in files)


def test_a_warm_cache_that_cannot_be_written_is_used_as_it_is(warm, monkeypatch):
    """A read-only cache holding the run's kernels (a CI cache, say) is used without a write;
    one that lacks them is refused before any work. (Read-only is simulated: the tests run as
    root, whom file modes do not stop.)"""
    cache, expected = warm
    directory = cache / "kernels"
    Engine(compile="now").explore(_model(), Options())  # compiled, marked (a damage test may have unmarked it)
    monkeypatch.setitem(codegen._cache_problems, directory, "Read-only file system")
    before = sorted((p, p.stat().st_mtime_ns) for p in directory.rglob("*"))
    _forget_kernel_modules()
    result = Engine(compile="background").explore(_model(), Options(keep_going=True))
    assert not result.compiled_in_background and _counts(result) == expected
    module = sys.modules[kernel_shapes(_model()).module_name]
    assert type(module.check._cache._impl.locator).__name__ == "_ReadOnlyKernelCache"
    assert sorted((p, p.stat().st_mtime_ns) for p in directory.rglob("*")) == before, "nothing is written"
    with pytest.raises(KernelCacheUnusable, match="is not writable .*point KRAFTCHECK_CACHE_DIR at a writable"):
        Engine(compile="background").explore(_model(big=6), Options())
    assert sorted(p for p, _ in before) == sorted(directory.rglob("*")), "nor is anything added"


def test_a_kernel_cache_that_is_a_file_is_refused_before_any_work(tmp_path, monkeypatch):
    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(blocker))
    result = CliRunner().invoke(cli, ["check", "--spec", "die_hard", "--no-color"])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert f"the kernel cache {blocker / 'kernels'} is not writable" in message
    assert "point KRAFTCHECK_CACHE_DIR at a writable directory" in message
    assert "states generated" not in message and blocker.read_text() == "not a folder"


def test_a_spec_file_loaded_by_path_is_then_imported_as_a_module(tmp_path):
    """numba's cache of a spec file's functions remembers the module name the command line gave
    the file; a process that imports the file under its own name then found the cache and failed
    with ModuleNotFoundError: kraftcheck_spec_my_jugs_..."""
    text = DIE_HARD.read_text().replace('name = "die_hard"', 'name = "my_jugs"')
    (tmp_path / "my_jugs.py").write_text(text + "\n\n@njit(cache=True)\ndef doubled(x):\n    return 2 * x\n")
    cls = spec_class(f"{tmp_path / 'my_jugs.py'}:DieHard")
    assert cls.__module__.startswith(SPEC_FILE_MODULE_PREFIX)
    assert sys.modules[cls.__module__].doubled(21) == 42  # compiled and cached under the command line's name
    assert list((tmp_path / "__pycache__").glob("my_jugs.doubled-*.nbi"))
    code = "import sys; sys.path.insert(0, sys.argv[1]); import my_jugs; print(my_jugs.doubled(21))"
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["42"]


def test_a_source_file_is_digested_as_it_was_imported_not_as_it_is_now(tmp_path, monkeypatch):
    """numba's stamps, the kernel modules' names and a checkpoint's record of the spec's code
    read the file as it is now: a spec saved during a run changed what the run took its code in
    memory to be, and it loaded kernels compiled from the saved file. The digest of a file is now
    its module's as imported, again after a new import or a reload; a file no module was
    imported from is read as it is."""
    import hashlib
    import importlib
    from kraftcheck.checker.imported_source import changed_since_import, current_digest, imported_digest
    path = tmp_path / "edited_spec_module.py"
    path.write_text("LIMIT = 1\n")
    first = hashlib.sha256(path.read_bytes()).digest()
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("edited_spec_module")
    try:
        assert imported_digest(str(path)) == first
        recorded = {str(path): first.hex()}
        path.write_text("LIMIT = 22\n")  # another size: a new stamp, whatever the clock's resolution
        assert imported_digest(str(path)) == first, "the code in memory is still the first"
        assert numba_cache.file_digest(str(path)) == first
        assert current_digest(str(path)) == hashlib.sha256(b"LIMIT = 22\n").digest()
        assert changed_since_import(recorded) == [str(path)]
        importlib.reload(module)
        assert module.LIMIT == 22 and imported_digest(str(path)) == current_digest(str(path))
    finally:
        del sys.modules["edited_spec_module"]
    other = tmp_path / "never_imported.py"
    other.write_text("x = 1\n")
    assert imported_digest(str(other)) == current_digest(str(other))
    other.write_text("x = 22\n")
    assert imported_digest(str(other)) == hashlib.sha256(b"x = 22\n").digest()


def test_a_spec_imported_through_a_symlink_is_recorded_as_imported(tmp_path, monkeypatch):
    """The record of a spec's code (a checkpoint's, the Spark recipe's: ``spec_code``) names its
    files by their real paths, and the digests as imported were found by the path a module was
    imported from: a spec imported from a folder reached through a symbolic link (macOS's /tmp, a
    linked checkout) was recorded as the file is now, so a file saved after the import put the
    saved code in the record of the code that ran."""
    import importlib
    from kraftcheck.checker.explore.spec_code import spec_code
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    name = f"linked_spec_{os.getpid()}"
    path = real / f"{name}.py"
    path.write_text(DIE_HARD.read_text().replace('name = "die_hard"', f'name = "{name}"'))
    monkeypatch.syspath_prepend(str(tmp_path / "link"))
    module = importlib.import_module(name)
    try:
        model = Model(module.DieHard(module.DieHard.Params()))
        recorded = spec_code(model)
        path.write_text(path.read_text() + "\n# saved after the import\n")
        assert spec_code(model) == recorded
    finally:
        del sys.modules[name]


def test_a_spec_saved_during_a_run_is_not_compiled_into_it(tmp_path, monkeypatch):
    """A spec file saved while its run explored it in bytecode was imported anew by the
    background compile, whose kernels the run then took halfway through: two-phase rm=8 with
    TMAbort disabled in the file saved 2 s into the run said "holds" over 1,638,656 states and
    17,499,271 generated, neither the first file's count (1,745,408 and 18,507,778) nor the saved
    one's (65,792 and 526,338). Here the file is saved before the compile starts, so that it
    imports the saved file for certain: the kernel audit used to catch that case only because
    TMAbort is enabled in the initial state (blaming the kernel cache). The compile now checks
    the files it imports against the run's and refuses, and the run stops with exit 2, naming
    the file, rather than mix two versions of the spec."""
    from kraftcheck.checker.compile import SourcesChanged
    text = (Path(__file__).parents[1] / "specs" / "two_phase.py").read_text()
    # a name of its own: kernels no earlier test compiled, so the run compiles them in the background
    text = text.replace('name = "two_phase"', f'name = "saved_during_{os.getpid()}"')
    guard = "    if s.tm_state != TM_INIT:\n        return False\n    t.tm_state = TM_ABORTED"
    assert guard in text
    path = tmp_path / "saved_spec.py"
    path.write_text(text)
    cls = spec_class(f"{path}:TwoPhase")
    model = Model(cls(cls.Params(rm=3)))
    path.write_text(text.replace(guard, guard.replace("TM_INIT:", "TM_INIT or True:")))
    monkeypatch.setenv("KRAFTCHECK_INTERPRET_S", "0")  # the run waits for the compile at once
    monkeypatch.setenv("KRAFTCHECK_KEEP_COMPILING", "0")
    with pytest.raises(SourcesChanged, match=f"{path} changed after the run imported it.*no verdict"):
        Engine(compile="background").explore(model, Options())
    # left to go on after its run, such a compile leaves no failure for `cache status` to list: its
    # kernels are the first file's, which no run will ask for again
    from kraftcheck.checker import detached
    from kraftcheck.checker.compile import BackgroundCompile
    shapes = kernel_shapes(model)
    builder = BackgroundCompile(shapes)
    try:
        builder.stop(keep=True)
        assert builder.left_running, "the compile ended before its run could leave it"
        assert builder.process.wait(timeout=120) != 0
    finally:
        if builder.process.poll() is None:
            builder.process.kill()
            builder.process.wait()
    # (its own key: the suite's shared cache may hold other records)
    assert [f for f in detached.failures(Path(shapes.module_path).parent) if f.key == shapes.module_name] == []


def test_a_file_of_the_spec_package_no_module_imported_saved_during_a_run_is_not_refused(tmp_path, monkeypatch):
    """The kernels' source files include every module of the spec's package, also those nothing
    imports (the kafka spec's code_paths.py, trace_terms.py, liveness.py in a plain check). Such a
    file, saved during the run, was digested anew by the background compile, which then refused
    it as 'changed after the run imported it' (exit 2, no verdict), though neither the run nor the
    compile ever ran its code. Only what the compile imported is checked against the run's."""
    text = (Path(__file__).parents[1] / "specs" / "two_phase.py").read_text()
    text = text.replace('name = "two_phase"', f'name = "sibling_saved_{os.getpid()}"')
    package = tmp_path / f"sibling_saved_{os.getpid()}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "spec.py").write_text(text)
    unused = package / "notes.py"
    unused.write_text("NOTE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cls = spec_class(f"{package.name}.spec:TwoPhase")
    model = Model(cls(cls.Params(rm=3)))
    assert str(unused) in kernel_shapes(model).sources
    from kraftcheck.checker.explore import tiers
    started = tiers.BackgroundCompile

    def saved_first(shapes, *args, **kwargs):  # saved after the run read its files, before the compile
        unused.write_text("NOTE = 22\n")
        return started(shapes, *args, **kwargs)
    monkeypatch.setattr(tiers, "BackgroundCompile", saved_first)
    monkeypatch.setenv("KRAFTCHECK_INTERPRET_S", "0")  # the run waits for the compile at once
    monkeypatch.setenv("KRAFTCHECK_KEEP_COMPILING", "0")
    try:
        result = Engine(compile="background").explore(model, Options())
    finally:
        for name in [n for n in sys.modules if n.startswith(package.name)]:
            del sys.modules[name]
    assert (result.status, result.distinct_states, result.states_generated) == ("holds", 288, 1146)
    assert result.first_tier == "bytecode" and result.interpreted_states < result.distinct_states


def test_a_helper_of_another_folder_saved_before_the_run_is_not_compiled_into_it(tmp_path, monkeypatch):
    """A helper the spec imports from a folder of its own (a package beside the spec's folder)
    was digested at the run's first digest, not as it was imported: saved in between (a spec
    imported in a Python session, its helper then edited, then checked), it was taken for the code
    in memory, so the background compile built kernels of the saved helper without a word, and
    the kernel audit blamed the kernel cache (KernelsDisagree) on the initial state here; a change
    the audit's sample misses would be counted. The modules a spec's module refers to are
    digested as its class is defined, so the compile refuses the saved helper."""
    import importlib
    import uuid
    from kraftcheck.checker.compile import SourcesChanged
    unique = f"helper_elsewhere_{uuid.uuid4().hex[:12]}"
    (tmp_path / "specdir").mkdir()
    package = tmp_path / "libs" / f"{unique}_lib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    helper = package / "helper.py"
    helper.write_text("from numba import njit\n\n\n@njit(cache=True)\ndef abort_enabled(tm_state):\n"
                      "    return tm_state == 0\n")
    text = (Path(__file__).parents[1] / "specs" / "two_phase.py").read_text()
    text = text.replace('name = "two_phase"', f'name = "{unique}"')
    guard = "    if s.tm_state != TM_INIT:\n        return False\n    t.tm_state = TM_ABORTED"
    text = text.replace(guard, guard.replace("s.tm_state != TM_INIT", "not abort_enabled(s.tm_state)"))
    text = text.replace("from kraftcheck.checker.errors import UsageError",
                        f"from kraftcheck.checker.errors import UsageError\nfrom {package.name}.helper import abort_enabled")
    (tmp_path / "specdir" / f"{unique}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path / "libs"))
    monkeypatch.syspath_prepend(str(tmp_path / "specdir"))
    module = importlib.import_module(unique)
    helper.write_text(helper.read_text().replace("return tm_state == 0", "return False"))
    monkeypatch.setenv("KRAFTCHECK_INTERPRET_S", "0")  # the run waits for the compile at once
    monkeypatch.setenv("KRAFTCHECK_KEEP_COMPILING", "0")
    try:
        with pytest.raises(SourcesChanged, match=f"{helper} changed after the run imported it"):
            Engine(compile="background").explore(Model(module.TwoPhase(module.TwoPhase.Params(rm=3))), Options())
    finally:
        for name in [n for n in sys.modules if n.startswith(unique)]:
            del sys.modules[name]


def test_a_spec_imported_then_saved_is_explored_as_imported_in_bytecode_too(tmp_path, monkeypatch):
    """The bytecode tier translates an action from its source text, which inspect read from the
    file as it was at the run's start: a spec imported in a Python session, then edited and
    checked, was explored in bytecode as saved (TMAbort disabled: the run's kernel audit then
    blamed the kernel cache), compiled as imported. Both now run the imported code."""
    text = (Path(__file__).parents[1] / "specs" / "two_phase.py").read_text()
    text = text.replace('name = "two_phase"', f'name = "imported_then_saved_{os.getpid()}"')
    guard = "    if s.tm_state != TM_INIT:\n        return False\n    t.tm_state = TM_ABORTED"
    path = tmp_path / "imported_then_saved.py"
    path.write_text(text)
    cls = spec_class(f"{path}:TwoPhase")
    path.write_text(text.replace(guard, guard.replace("TM_INIT:", "TM_INIT or True:")))
    monkeypatch.setenv("KRAFTCHECK_KEEP_COMPILING", "0")
    result = Engine(compile="background").explore(Model(cls(cls.Params(rm=3))), Options())
    assert result.first_tier == "bytecode" and result.interpreted_states == result.distinct_states
    assert (result.status, result.distinct_states, result.states_generated) == ("holds", 288, 1146)


def test_a_file_imported_again_under_another_name_is_explored_as_imported_last(tmp_path, monkeypatch):
    """A spec file loaded by path (``spec_class("my.py:X")``), then saved, then imported as a
    module of its own name (``import my``, as file_modules allows) is two modules of one file:
    the digest and the source text inspect gives were the first module's, so a run of the second
    module's spec was translated by the bytecode tier from the file as first read (TMAbort
    enabled), not the code it checks (TMAbort disabled): here the kernel audit caught it on the
    initial state and blamed the kernel cache (KernelsDisagree, exit 2); an edit that shows only
    past the states the audit samples was counted. The latest import of a file is the one read."""
    import importlib
    import uuid
    unique = f"imported_twice_{uuid.uuid4().hex[:12]}"  # kernels no run compiled: the run starts in bytecode
    text = (Path(__file__).parents[1] / "specs" / "two_phase.py").read_text()
    text = text.replace('name = "two_phase"', f'name = "{unique}"')
    guard = "    if s.tm_state != TM_INIT:\n        return False\n    t.tm_state = TM_ABORTED"
    path = tmp_path / f"{unique}.py"
    path.write_text(text)
    spec_class(f"{path}:TwoPhase")
    path.write_text(text.replace(guard, guard.replace("TM_INIT:", "TM_INIT or True:")))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(path.stem)
    try:
        cls = module.TwoPhase
        monkeypatch.setenv("KRAFTCHECK_KEEP_COMPILING", "0")
        result = Engine(compile="background").explore(Model(cls(cls.Params(rm=3))), Options())
    finally:
        del sys.modules[path.stem]
    assert result.first_tier == "bytecode" and result.interpreted_states == result.distinct_states
    assert "TMAbort" in result.never_fired()
    assert result.distinct_states < 288


def _sleeper() -> subprocess.Popen:
    """A process in a session of its own, as a background compile is."""
    return subprocess.Popen(["sleep", "300"], start_new_session=True)


def _ended(process: subprocess.Popen) -> bool:
    return process.wait(timeout=30) == -signal.SIGKILL


def test_detached_compiles_one_per_key_and_one_per_cache(tmp_path):
    first, same_key, other = _sleeper(), _sleeper(), _sleeper()
    try:
        assert detached.leave(tmp_path, first.pid, "kc_a_model_1", "the kernels of spec a") == first.pid
        assert detached.leave(tmp_path, same_key.pid, "kc_a_model_1", "the kernels of spec a") == first.pid
        assert _ended(same_key), "a second compile of one key is stopped, the first goes on"
        assert [e.pid for e in detached.running(tmp_path)] == [first.pid]
        assert detached.leave(tmp_path, other.pid, "kc_b_model_2", "the kernels of spec b") == other.pid
        assert _ended(first), "the newest request wins"
        assert [e.pid for e in detached.running(tmp_path)] == [other.pid]
    finally:
        for p in (first, same_key, other):
            if p.poll() is None:
                p.kill()
                p.wait()



def test_a_detached_compile_killed_by_someone_else_has_its_scratch_removed_with_its_entry(tmp_path):
    """A detached compile that ended without its finally (the OOM killer, kill -9) left its
    scratch folder: the next leave or cache clear saw its entry dead and dropped the entry only."""
    for drop in (lambda: detached.leave(tmp_path, later.pid, "kc_b_model_2", "the kernels of spec b"),
                 lambda: detached.stop_all(tmp_path)):
        killed, later = _sleeper(), _sleeper()
        scratch = Path(tempfile.mkdtemp(prefix=detached.SCRATCH_PREFIX, dir=tmp_path))
        (scratch / detached.SCRATCH_PREFIX).mkdir()  # a folder in it, as a worker's temporary files make
        try:
            assert detached.leave(tmp_path, killed.pid, "kc_a_model_1", "the kernels of spec a",
                                  str(scratch)) == killed.pid
            killed.kill()
            killed.wait()
            drop()
            assert not scratch.exists()
        finally:
            for p in (killed, later):
                if p.poll() is None:
                    p.kill()
                    p.wait()


def test_a_compile_the_register_cannot_take_is_not_left_and_nothing_raises(tmp_path):
    """A register that cannot be written (a full disk as the run ends; here a file where its
    folder goes) leaves nothing running: the caller stops the compile, and no OSError on the run's
    way out costs it its verdict."""
    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    sleeper = _sleeper()
    try:
        assert detached.leave(blocker, sleeper.pid, "kc_a_model_1", "the kernels of spec a") is None
        assert detached.running(blocker) == []
    finally:
        sleeper.kill()
        sleeper.wait()

def test_a_detached_compile_that_fails_is_told_by_cache_status_and_by_the_next_compile(
        tmp_path, monkeypatch, capsys):
    """A background compile its run left (the run ended first) and that then failed (a full
    kernel cache disk, its time limit, a compile error found late) had nobody to tell: each run
    of the model said the compile went on in the background for the next run, `cache status`
    listed nothing, and no run ever found the kernels compiled. Now the compile leaves why in the
    register: `cache status` lists it, and the next background compile of those kernels says it
    as it starts again. Here the failure is the compile's time limit, reached at its first kernel."""
    from kraftcheck.checker.compile import BackgroundCompile
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    monkeypatch.setenv("KRAFTCHECK_COMPILE_TIME_LIMIT", "0.001")
    shapes = kernel_shapes(_model())
    kernels = Path(shapes.module_path).parent
    builder = BackgroundCompile(shapes)
    try:
        builder.stop(keep=True)  # the run is over; the worker is still importing numba
        assert builder.left_running, "the compile ended before its run could leave it"
        assert builder.process.wait(timeout=120) == 3
    finally:
        if builder.process.poll() is None:
            builder.process.kill()
            builder.process.wait()
    [failure] = detached.failures(kernels)
    assert failure.key == shapes.module_name and "spec die_hard" in failure.what
    assert "time limit of 0.001 s (KRAFTCHECK_COMPILE_TIME_LIMIT)" in failure.why
    status = CliRunner().invoke(cli, ["cache", "status"])
    assert status.exit_code == 0, status.output
    assert "background compiles that failed after their run: 1" in status.output
    assert f"die_hard ({shapes.module_name.rsplit('_', 1)[1][:8]}) that a run left failed at" in status.output

    monkeypatch.setenv("KRAFTCHECK_COMPILE_TIME_LIMIT", "600")
    capsys.readouterr()
    again = BackgroundCompile(shapes)
    again.stop(keep=False)
    said = capsys.readouterr().err
    assert "kernel cache: the background compile of the kernels of spec die_hard" in said
    assert "time limit" in said and "compiling them again" in said
    assert detached.failures(kernels) == [], "said once, by the compile that starts again"
    assert "failed after their run" not in CliRunner().invoke(cli, ["cache", "status"]).output


def test_cache_status_and_clear(warm, tmp_path, monkeypatch):
    cache, _ = warm
    status = CliRunner().invoke(cli, ["cache", "status"])
    assert status.exit_code == 0, status.output
    assert str(cache / "kernels") in status.output
    assert "die_hard" in status.output and "background compiles left running: none" in status.output

    other = tmp_path / "other"
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(other))
    (other / "kernels").mkdir(parents=True)
    (other / "kernels" / "kc_x_model_0123456789abcdef0123.py").write_text("")
    sleeper = _sleeper()
    try:
        assert detached.leave(other / "kernels", sleeper.pid, "kc_x_model_0123456789abcdef0123",
                              "the kernels of x") == sleeper.pid
        status = CliRunner().invoke(cli, ["cache", "status"])
        assert f"pid {sleeper.pid}: the kernels of x" in status.output
        codegen.note_cache_in_use(other / "kernels")  # as a run using the cache holds it
        busy = CliRunner().invoke(cli, ["cache", "clear"])
        assert busy.exit_code == 2 and "is in use" in busy.output and (other / "kernels").is_dir()
        os.close(codegen._in_use.pop(other / "kernels"))
        cleared = CliRunner().invoke(cli, ["cache", "clear"])
        assert cleared.exit_code == 0, cleared.output
        assert "stopped 1 background compile" in cleared.output
        assert _ended(sleeper) and not (other / "kernels").exists()
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(cache))
    assert is_compiled(kernel_shapes(_model())), "the other cache is untouched"


def test_cache_status_and_clear_know_the_debug_modes_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KRAFTCHECK_DEBUG_KERNELS", raising=False)
    caches = [tmp_path / name for name in ("kernels", "kernels-debug", "numba-debug")]
    for cache in caches:
        cache.mkdir()
        (cache / "kept.nbi").write_text("cached")
    status = CliRunner().invoke(cli, ["cache", "status"])
    assert status.exit_code == 0, status.output
    assert f"beside it      {caches[1]}: the debug mode's kernels" in status.output
    assert f"beside it      {caches[2]}: the debug mode's numba cache" in status.output
    monkeypatch.setenv("KRAFTCHECK_DEBUG_KERNELS", "1")
    assert f"beside it      {caches[0]}: the kernels" in CliRunner().invoke(cli, ["cache", "status"]).output
    monkeypatch.delenv("KRAFTCHECK_DEBUG_KERNELS")
    codegen.note_cache_in_use(caches[1])  # as a debug run using the cache holds it
    try:
        busy = CliRunner().invoke(cli, ["cache", "clear"])
        assert busy.exit_code == 2 and "is in use" in busy.output and all(c.is_dir() for c in caches), busy.output
    finally:
        os.close(codegen._in_use.pop(caches[1]))
    cleared = CliRunner().invoke(cli, ["cache", "clear"])
    assert cleared.exit_code == 0 and not any(c.exists() for c in caches), cleared.output


_BOUNDED_SPEC = '''
"""x counts to 4; the invariant says x < bound(), a helper of another file."""
from dataclasses import dataclass

from numba import njit

from kraftcheck.checker.spec import Action, Int, Invariant, Spec
from {helpers} import bound


@njit(cache=True)
def inc(s, t):
    if s.x >= 4:
        return False
    t.x = s.x + 1
    return True


@njit(cache=True)
def below_bound(s):
    return s.x < bound()


@dataclass(frozen=True)
class BoundedParams:
    pass


class Bounded(Spec):
    name = "bounded"
    summary = "x counts to 4 below a helper's bound"
    Params = BoundedParams
    check_deadlock = False

    def fields(self):
        return [Int("x", 4)]

    def initial_states(self):
        return [{{"x": 0}}]

    def actions(self):
        return [Action("Inc", inc)]

    def invariants(self):
        return [Invariant("below_bound", below_bound)]
'''

_BOUND = "from numba import njit\n\n\n@njit(cache=True)\ndef bound():\n    return {}\n"


@pytest.mark.parametrize("layout", ["package", "file"])
def test_a_helper_edited_in_another_file_is_compiled_again(tmp_path, layout):
    """An invariant calls a helper of another file; the helper is edited between two compiled runs.
    numba keeps a function compiled as long as its own file is unchanged: the second run took the
    invariant compiled with the old helper and said 'holds' (exit 0) where the reference explorer
    says 'violated' (exit 1). Each run is a process of its own, as numba's in-memory dispatchers
    would hide its cache files."""
    folder = tmp_path / "src" / ("bounded" if layout == "package" else "")
    folder.mkdir(parents=True, exist_ok=True)
    if layout == "package":
        (folder / "__init__.py").write_text("")
        (folder / "spec.py").write_text(_BOUNDED_SPEC.format(helpers="bounded.helpers"))
        spec = "bounded.spec:Bounded"
    else:  # a spec file that is no package's, its helper beside it
        (folder / "bounded_spec.py").write_text(_BOUNDED_SPEC.format(helpers="bounded_helpers"))
        spec = f"{folder / 'bounded_spec.py'}:Bounded"
    helpers = folder / ("helpers.py" if layout == "package" else "bounded_helpers.py")
    # numba's cache of the spec's functions is beside them; the engine's kernels are the suite's
    env = {**{k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}, "PYTHONPATH": str(tmp_path / "src"),
           "KRAFTCHECK_CACHE_DIR": str(tmp_path / "cache"), "KRAFTCHECK_THREADS": "1"}

    def exit_code(*options: str) -> int:
        out = subprocess.run([sys.executable, "-m", "kraftcheck", "check", "--spec", spec, "-q", *options],
                             capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
        assert out.returncode in (0, 1), out.stdout[-2000:] + out.stderr[-2000:]
        assert "recompiling" not in out.stderr  # a stale entry after an edit is no damage
        return out.returncode

    helpers.write_text(_BOUND.format(10))
    assert exit_code("--compile", "now") == 0
    assert list((tmp_path / "src").rglob("*below_bound*.nbi"))  # the invariant's cache is on disk
    helpers.write_text(_BOUND.format(2))
    assert exit_code("--engine", "reference") == 1
    assert exit_code("--compile", "now") == 1


def test_a_spec_folder_copied_with_its_numba_cache_compiles_again(tmp_path):
    """A spec file that is no package's is imported under a name made of its path; numba's cache of
    its functions beside it remembers that name. A copy of its folder, numba's ``__pycache__``
    included (``cp -r``, a folder moved), kept sources and stamps alike: the run in the copy loaded
    the original's entries, whose code asks for the original's module, and stopped with a
    traceback (ModuleNotFoundError, 'internal error', exit 2)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "bounded_spec.py").write_text(_BOUNDED_SPEC.format(helpers="bounded_helpers"))
    (tmp_path / "a" / "bounded_helpers.py").write_text(_BOUND.format(2))
    env = {**{k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"},
           "KRAFTCHECK_CACHE_DIR": str(tmp_path / "cache"), "KRAFTCHECK_THREADS": "1"}

    def exit_code(folder: str) -> int:
        out = subprocess.run([sys.executable, "-m", "kraftcheck", "check", "--spec",
                              f"{tmp_path / folder / 'bounded_spec.py'}:Bounded", "-q", "--compile", "now"],
                             capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
        assert "Traceback" not in out.stderr and "recompiling" not in out.stderr, out.stderr[-3000:]
        return out.returncode

    assert exit_code("a") == 1
    assert list((tmp_path / "a").rglob("*below_bound*.nbi"))  # the invariant's cache is beside it
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert exit_code("b") == 1
    shutil.move(tmp_path / "a", tmp_path / "c")
    assert exit_code("c") == 1


_LIMITED_SPEC = '''
"""x counts to LIMIT, a constant numba compiles in by value; the invariant says x < 3."""
from dataclasses import dataclass

from numba import njit

from kraftcheck.checker.spec import Action, Int, Invariant, Spec
{limit}


@njit(cache=True)
def inc(s, t):
    if s.x >= LIMIT:
        return False
    t.x = s.x + 1
    return True


@njit(cache=True)
def below_3(s):
    return s.x < 3


@dataclass(frozen=True)
class LimitedParams:
    pass


class Limited(Spec):
    name = "limited"
    summary = "x counts to a constant"
    Params = LimitedParams
    check_deadlock = False

    def fields(self):
        return [Int("x", 8)]

    def initial_states(self):
        return [{{"x": 0}}]

    def actions(self):
        return [Action("Inc", inc)]

    def invariants(self):
        return [Invariant("below_3", below_3)]
'''

_LIMITS = {
    # the spec's file unchanged, its constant computed when it is imported
    "from the environment": "import os\nLIMIT = int(os.environ['LIMITED_LIMIT'])",
}


@pytest.mark.parametrize("source", _LIMITS)  # the other kinds: on the stamps, below
def test_a_constant_compiled_in_by_value_that_changed_is_compiled_again(tmp_path, source):
    """numba compiles a global a function reads in as a constant. When the constant's value changed
    and no source file the kernels' names and numba's stamps cover did, the second compiled run
    took the kernels compiled with the old value: 'holds' (exit 0, 3 states) where x reaches 3
    ('violated', exit 1), and a run in the background mode too, its compiled kernels found at
    once (and then compiled in the foreground: their marker said compiled)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "limited_spec.py").write_text(_LIMITED_SPEC.format(limit=_LIMITS[source]))
    spec = f"{tmp_path / 'src' / 'limited_spec.py'}:Limited"
    env = {**{k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}, "PYTHONPATH": str(tmp_path / "src"),
           "KRAFTCHECK_CACHE_DIR": str(tmp_path / "cache"), "KRAFTCHECK_THREADS": "1"}

    def exit_code(limit: int, *options: str) -> int:
        out = subprocess.run([sys.executable, "-m", "kraftcheck", "check", "--spec", spec, "-q", *options],
                             capture_output=True, text=True, timeout=300, cwd=tmp_path,
                             env={**env, "LIMITED_LIMIT": str(limit)})
        assert out.returncode in (0, 1), out.stdout[-2000:] + out.stderr[-2000:]
        assert "recompiling" not in out.stderr  # a stale entry after a change is no damage
        return out.returncode

    assert exit_code(2, "--compile", "now") == 0  # x stops at 2: below 3 holds
    assert exit_code(5, "--compile", "now") == 1
    # compiled kernels found for the other value are not taken; nor waited for: their marker says
    # compiled, their stamps stale, so they compile in the background as missing ones would
    assert exit_code(2, "--json", str(tmp_path / "report.json")) == 0
    assert json.loads((tmp_path / "report.json").read_text())["compiled_in_background"] is True


_STOP_AT_LIMIT = {
    # a constant of another file beside a spec file that is no package's: no function names that file
    "a constant imported by value": ("from cfg.limits import LIMIT", "s.x >= LIMIT"),
    # a jitted helper chosen when the spec is imported: numba compiles in the function a global names
    "a jitted function": ("@njit(cache=True)\ndef stop_at_2(x):\n    return x >= 2\n\n\n"
                          "@njit(cache=True)\ndef stop_at_5(x):\n    return x >= 5\n\n\n"
                          "STOP = stop_at_5 if os.environ['LIMITED_LIMIT'] == '5' else stop_at_2", "STOP(s.x)"),
    # a jitted helper a factory made: numba compiles in what its closure holds
    "a closure": ("def stop_at(limit):\n    @njit(cache=True)\n    def stop(x):\n        return x >= limit\n"
                  "    return stop\n\n\nSTOP = stop_at(int(os.environ['LIMITED_LIMIT']))", "STOP(s.x)"),
    # a class: a numpy scalar type
    "a class": ("import numpy as np\nDT = np.int8 if os.environ['LIMITED_LIMIT'] == '2' else np.int64",
                "(np.zeros(1, DT).itemsize == 1 and s.x >= 2) or s.x >= 5"),
    # an enum member's value, read through its class
    "an enum member": ("from enum import IntEnum\n\n\nclass Limit(IntEnum):\n"
                       "    L = int(os.environ['LIMITED_LIMIT'])", "s.x >= Limit.L"),
    # a module's module's attribute
    "a submodule's constant": ("import cfg.limits", "s.x >= cfg.limits.LIMIT"),
    # computed by a jitted function called as the spec is imported: its stamp is taken then, before
    # the constant and the functions that read it are defined
    "a constant computed by a jitted call at import": (
        "@njit(cache=True)\ndef ident(n):\n    return n\n\n\nLIMIT = ident(int(os.environ['LIMITED_LIMIT']))",
        "s.x >= LIMIT"),
}


@pytest.mark.parametrize("case", _STOP_AT_LIMIT)
def test_a_function_class_or_attribute_compiled_in_that_changed_is_compiled_again(tmp_path, monkeypatch, case):
    """numba compiles in the function a global names, a class (a numpy type), an enum member read
    through its class and the attribute of a module's module, as it does a number. When one of these
    changed with no source file, the second compiled run took the kernels compiled before: 'holds'
    (exit 0) where x reaches 3 ('violated', exit 1). The stamp numba's cache of the action is
    checked against (which a generated kernel's stamp covers too, as the end-to-end test above
    shows) now differs with the value, and is the same for the same value: the spec imported
    afresh, under the same name, for each."""
    import importlib

    from kraftcheck.checker import numba_cache

    head, stop = _STOP_AT_LIMIT[case]
    source = _LIMITED_SPEC.format(limit="import os\n\n" + head).replace("s.x >= LIMIT", stop)
    (tmp_path / "src" / "cfg").mkdir(parents=True)
    (tmp_path / "src" / "cfg" / "__init__.py").write_text("")
    (tmp_path / "src" / "cfg" / "limits.py").write_text("import os\nLIMIT = int(os.environ['LIMITED_LIMIT'])\n")
    (tmp_path / "src" / "limited_spec_of_case.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))

    def stamp(limit: int) -> str:
        for name in ("limited_spec_of_case", "cfg.limits", "cfg"):
            sys.modules.pop(name, None)
        monkeypatch.setenv("LIMITED_LIMIT", str(limit))
        importlib.invalidate_caches()
        module = importlib.import_module("limited_spec_of_case")
        return numba_cache.reachable_sources_digest(module.inc.py_func)

    try:
        two = stamp(2)
        assert stamp(5) != two
        assert stamp(2) == two
    finally:
        for name in ("limited_spec_of_case", "cfg.limits", "cfg"):
            sys.modules.pop(name, None)


def test_the_constants_of_a_module_imported_further_or_rebound_are_taken_again():
    """The constants of a module are kept once taken, for the stamp of every function that reaches
    it; a module still being imported (a jitted function it calls as it is imported has its stamp
    taken then) gets more functions and constants after: those count too, as does a global
    bound to another value."""
    import numba

    from kraftcheck.checker import numba_cache

    module: dict = {"__name__": "kc_test_partly_imported", "__file__": "/nowhere/partly.py"}
    exec("from numba import njit\n\n@njit\ndef ident(n):\n    return n\n", module)
    partial = numba_cache._module_constants(module)
    exec("LIMIT = 2\n\n@njit\ndef below(x):\n    return x < LIMIT\n", module)
    assert isinstance(module["below"], numba.core.dispatcher.Dispatcher)
    whole = numba_cache._module_constants(module)
    assert whole != partial and b"LIMIT=" in whole
    assert numba_cache._module_constants(module) == whole
    module["LIMIT"] = 5
    assert numba_cache._module_constants(module) not in (whole, partial)


_ENGINE_RUN = '''
import sys
from kraftcheck.checker import numba_cache
numba_cache.tolerate_damage()  # as importing kraftcheck.checker.kernels does
numba_cache._ENGINE = sys.argv[1]  # the folder below stands for kraftcheck's engine
sys.path.insert(0, sys.argv[1])
from fakeengine.kern.total import total
print(total(1))
'''

_ENGINE_HELPERS = {
    "njit": "from numba import njit\n\n\n@njit(cache=True)\ndef bump(x):\n    return x + {}\n",
    # what checker/kernels/prefetch.py and addresses.py are: code numba generates, not a function it compiles
    "intrinsic": ("from llvmlite import ir\nfrom numba import types\nfrom numba.extending import intrinsic\n\n\n"
                  "@intrinsic\ndef bump(typingctx, x):\n    def codegen(context, builder, signature, args):\n"
                  "        return builder.add(args[0], ir.Constant(args[0].type, {}))\n"
                  "    return types.int64(types.int64), codegen\n"),
}


@pytest.mark.parametrize("kind", _ENGINE_HELPERS)
def test_an_engine_helper_changed_in_a_checkout_is_compiled_again(tmp_path, kind):
    """A source checkout changes a helper's file of the engine, in another folder, and not its
    caller's (a pull of a commit that touched only ``rows.same_row``, say): numba kept the caller
    compiled with the old helper, as its own file is unchanged. A folder stands for the engine here
    (``numba_cache._ENGINE``); each run is a process of its own."""
    for folder in ("fakeengine", "fakeengine/kern", "fakeengine/helpers"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "fakeengine/kern/total.py").write_text(
        "from numba import njit\n\nfrom fakeengine.helpers.bump import bump\n\n\n"
        "@njit(cache=True)\ndef total(x):\n    return bump(x) + 1\n")
    helper = tmp_path / "fakeengine/helpers/bump.py"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}

    def run() -> str:
        out = subprocess.run([sys.executable, "-c", _ENGINE_RUN, str(tmp_path)],
                             capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "recompiling" not in out.stderr  # a stale entry after an edit is no damage
        return out.stdout.strip()

    helper.write_text(_ENGINE_HELPERS[kind].format(10))
    assert run() == "12"
    assert list((tmp_path / "numba").rglob("*total*.nbi"))  # the caller's cache is on disk
    helper.write_text(_ENGINE_HELPERS[kind].format(20))
    assert run() == "22"


def test_an_engine_kernel_s_stamp_covers_the_engine_files_it_reaches():
    from kraftcheck.checker import numba_cache
    from kraftcheck.checker.kernels import visited

    files = {os.path.basename(f) for f in numba_cache.reachable_files(visited.rehash.py_func, engine=True)}
    assert {"visited.py", "hashing.py", "rows.py"} <= files
    assert numba_cache.reachable_files(visited.rehash.py_func) is None  # a spec's walk stops at the engine
    stamp = visited.rehash._cache._cache_file._source_stamp
    assert stamp[1] == numba_cache.reachable_sources_digest(visited.rehash.py_func, engine=True)


def test_a_compile_the_file_size_limit_stops_names_the_file_and_what_to_do(tmp_path):
    """Under ``ulimit -f`` a first run's compile could not write numba's cache: it stopped (exit 3)
    with 'the file size limit is exceeded', naming no file and advising --checkpoint or TMPDIR for
    levels, which no level needed. Now it names the compiled file and the limit to raise; a full
    disk there is told to move the caches (``disk_full_advice``)."""
    import resource

    from kraftcheck.checker.disk_full import disk_full_advice

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (20 * 1024, resource.RLIM_INFINITY))

    env = {**os.environ, "KRAFTCHECK_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    done = subprocess.run([sys.executable, "-m", "kraftcheck", "check", "--spec", "two_phase", "--param", "rm=2",
                           "-q", "--compile", "now"], capture_output=True, text=True, timeout=600, env=env,
                          preexec_fn=small_files)
    said = " ".join(done.stderr.split())
    assert done.returncode == 3, done.stderr
    assert f"the file size limit is exceeded writing {tmp_path}/" in said and "Traceback" not in said, said
    assert "raise the file size limit (ulimit -f)" in said and "--checkpoint" not in said, said
    os.environ["KRAFTCHECK_CACHE_DIR"], before = str(tmp_path / "cache"), os.environ.get("KRAFTCHECK_CACHE_DIR")
    try:
        full = disk_full_advice(None, f"the disk is full writing {tmp_path / 'cache' / 'kernels' / 'kc_x.py'}")
        levels = disk_full_advice(None, f"the disk is full writing {tmp_path / 'levels' / 'level-0001.words'}")
    finally:
        if before is None:
            del os.environ["KRAFTCHECK_CACHE_DIR"]
        else:
            os.environ["KRAFTCHECK_CACHE_DIR"] = before
    assert "KRAFTCHECK_CACHE_DIR" in full and "TMPDIR" not in full
    assert "TMPDIR" in levels and "KRAFTCHECK_CACHE_DIR" not in levels


def test_each_kind_of_compiled_in_value_is_written_by_what_it_is():
    """Two values numba would compile in differently are written differently into the stamps:
    numbers of one type, arrays alike but for their contents or their record's fields, numpy
    dtypes and scalars, numba types, enum members, tuples, functions and classes."""
    import enum

    import numpy as np
    from numba.core import types as nb_types

    from kraftcheck.checker.compiled_in import frozen

    class Kind(enum.IntEnum):
        A = 1
        B = 2

    alike = [(1, 2), (1.0, 1.5), (True, False), ("a", "b"), (Kind.A, Kind.B),
             (np.zeros(3, np.int64), np.ones(3, np.int64)), (np.zeros(3, np.int64), np.zeros(3, np.int32)),
             (np.zeros(1, np.dtype([("a", np.int64)])), np.zeros(1, np.dtype([("b", np.int64)]))),
             (np.dtype(np.int8), np.dtype(np.int16)), (np.dtype([("a", np.int8)]), np.dtype([("b", np.int8)])),
             (np.int8(1), np.int16(1)), (nb_types.int32, nb_types.int64), ((1, (2, 3)), (1, (2, 4))),
             (np.int8, np.int64), (frozen, test_each_kind_of_compiled_in_value_is_written_by_what_it_is)]
    for one, other in alike:
        assert frozen(one) is not None and frozen(one) != frozen(other), (one, other)
        assert frozen(one) == frozen(one)
    assert frozen([1, 2]) is None and frozen({"a": 1}) is None  # numba compiles neither in
