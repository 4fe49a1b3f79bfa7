"""Specs from outside the package, tried as a user would through the command line: a spec file
(``--spec path/to/file.py:Class``), a module on the path (``--spec package.module:Class``), a
plugin registered through the ``kraftcheck.specs`` entry-point group, and broken ones of each.

The spec used throughout is small enough to count by hand: two counters ``c[a]``, ``c[b]``,
each ``0..limit``, starting at 0, and one action ``Inc(counter)`` that adds 1 to a counter below
``limit``. So with ``limit = L``:

* distinct states: every pair of values, ``(L + 1) ** 2``;
* states generated (TLC: the initial state plus every successor computed): ``Inc(a)`` is enabled
  wherever ``c[a] < L``, that is in ``L * (L + 1)`` states, and the same for ``Inc(b)``:
  ``1 + 2 * L * (L + 1)``;
* depth (BFS levels, the initial one counted): the farthest state ``(L, L)`` is ``2 * L`` steps
  away: ``2 * L + 1``;
* invariant ``total_below_cap`` (``c[a] + c[b] < cap``) first fails after ``cap`` steps, so its
  shortest counterexample has ``cap + 1`` states (when ``cap <= 2 * L``).

``(L, L)`` has no successor: the spec declares that end intended (``check_deadlock = False``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraftcheck.cli.main import cli

SPEC_SOURCE = '''\
"""Two bounded counters: a spec small enough to count its states by hand."""

from dataclasses import dataclass

from numba import njit

from kraftcheck import Action, Const, Int, Invariant, Param, Spec, param


@njit(cache=True)
def inc(s, t, counter):
    if s.c[counter] >= s.limit:
        return False
    t.c[counter] = s.c[counter] + 1
    return True


@njit(cache=True)
def total_below_cap(s):
    """The counters add up to less than cap."""
    return s.c[0] + s.c[1] < s.cap


@dataclass(frozen=True)
class CountersParams:
    limit: int = param(2, "highest value of each counter", minimum=1, maximum=10)
    cap: int = param(100, "the sum the counters must stay below", minimum=1, maximum=100)


class Counters(Spec):
    name = "counters"
    summary = "two bounded counters (an external spec for tests)"
    Params = CountersParams
    check_deadlock = False  # both counters at limit is where they end

    def fields(self):
        p = self.params
        return [Int("c", p.limit, (2,), index_labels=("a", "b")), Const("limit", p.limit),
                Const("cap", p.cap)]

    def initial_states(self):
        yield {"c": [0, 0]}

    def actions(self):
        return [Action("Inc", inc, params=(Param("counter", 2, ("a", "b")),))]

    def invariants(self):
        return [Invariant("total_below_cap", total_below_cap, total_below_cap.__doc__)]


class NotASpec:
    """A class that is not a Spec subclass."""
'''


def by_hand(limit: int) -> dict:
    """The counts of the Counters spec worked out in the module docstring."""
    return {"distinct_states": (limit + 1) ** 2, "states_generated": 1 + 2 * limit * (limit + 1),
            "depth": 2 * limit + 1}


def counts(report: dict) -> dict:
    return {k: report[k] for k in ("distinct_states", "states_generated", "depth")}


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory):
    """Kernels of these throw-away specs go to a temporary cache, not the user's."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("kernels")
        mp.setenv("KRAFTCHECK_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory, kernel_cache) -> Path:
    path = tmp_path_factory.mktemp("my_specs") / "counters_spec.py"
    path.write_text(SPEC_SOURCE)
    return path


# -- file.py:Class ------------------------------------------------------------------------------

@pytest.mark.parametrize("limit", [1, 3])
def test_spec_file_counts_match_the_hand_count_and_the_reference_explorer(spec_file, limit):
    ref = f"{spec_file}:Counters"
    engine = run("check", "--spec", ref, "--param", f"limit={limit}", "--json", "-")
    assert engine.exit_code == 0, engine.output
    reference = run("check", "--spec", ref, "--param", f"limit={limit}", "--engine", "reference", "--json", "-")
    assert reference.exit_code == 0, reference.output
    report = json.loads(engine.stdout)
    assert report["result"] == "holds" and report["spec"] == "counters"
    assert counts(report) == counts(json.loads(reference.stdout)) == by_hand(limit)


def test_spec_file_violation_has_the_hand_counted_shortest_trace(spec_file, tmp_path):
    result = run("check", "--spec", f"{spec_file}:Counters", "--param", "cap=3", "--trace-dir", str(tmp_path),
                 "--json", "-")
    assert result.exit_code == 1
    (violation,) = json.loads(result.stdout)["violations"]
    assert violation["invariant"] == "total_below_cap" and violation["depth"] == 3 + 1
    assert Path(violation["trace_file"]).parent == tmp_path


def test_a_spec_file_whose_defaults_its_params_refuse_runs_with_parameters_it_takes(tmp_path):
    """EvenJugs refuses its default big jug (5): a check with big=6 was kraftcheck's internal
    error, its headline comparing the options with defaults that Params() raised on."""
    ref = f"{Path(__file__).with_name('even_jugs.py')}:EvenJugs"
    result = run("check", "--spec", ref, "--param", "big=6", "--trace-dir", str(tmp_path), "--no-color")
    assert result.exit_code == 0, result.output
    assert "even_jugs (small=3, big=6): all invariants hold" in result.output


def test_spec_file_by_relative_path(spec_file, monkeypatch):
    monkeypatch.chdir(spec_file.parent.parent)
    result = run("check", "--spec", f"{spec_file.parent.name}/{spec_file.name}:Counters", "--json", "-")
    assert result.exit_code == 0, result.output
    assert counts(json.loads(result.stdout)) == by_hand(2)


# -- package.module:Class -----------------------------------------------------------------------

@pytest.fixture
def package_on_path(tmp_path, monkeypatch, kernel_cache):
    """A package ``team_specs`` holding the spec, on sys.path; forgotten again afterwards."""
    package = tmp_path / "team_specs"
    package.mkdir()
    (package / "__init__.py").write_text('"""Specs of a team that does not touch kraftcheck."""\n')
    (package / "counters.py").write_text(SPEC_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [m for m in sys.modules if m == "team_specs" or m.startswith("team_specs.")]:
        del sys.modules[name]


def test_spec_from_an_importable_module(package_on_path):
    result = run("check", "--spec", "team_specs.counters:Counters", "--param", "limit=2", "--json", "-")
    assert result.exit_code == 0, result.output
    assert counts(json.loads(result.stdout)) == by_hand(2)


# -- an installed plugin (entry point) ----------------------------------------------------------

PLUGIN_SOURCE = SPEC_SOURCE.replace('name = "counters"', 'name = "my_spec"')


def _install_plugin(site: Path, module_source: str = PLUGIN_SOURCE) -> None:
    """What ``pip install`` of a package registering ``my_spec`` leaves on the path: the package,
    and a dist-info directory whose entry_points.txt names the spec class."""
    (site / "my_pkg").mkdir(parents=True)
    (site / "my_pkg" / "__init__.py").write_text("")
    (site / "my_pkg" / "mod.py").write_text(module_source)
    dist_info = site / "my_pkg-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-pkg\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text("[kraftcheck.specs]\nmy_spec = my_pkg.mod:Counters\n")


def _kraftcheck(args: list[str], cwd: Path, pythonpath: Path, kernel_cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(pythonpath), KRAFTCHECK_CACHE_DIR=str(kernel_cache), NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "kraftcheck", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_entry_point_plugin_is_listed_and_checked(tmp_path, kernel_cache):
    site = tmp_path / "site"
    _install_plugin(site)
    listed = _kraftcheck(["specs", "--no-color"], tmp_path, site, kernel_cache)
    assert listed.returncode == 0, listed.stderr
    assert "my_spec: two bounded counters (an external spec for tests)" in listed.stdout
    assert "highest value of each counter" in listed.stdout

    checked = _kraftcheck(["check", "--spec", "my_spec", "--param", "limit=2", "--json", "-"], tmp_path, site,
                          kernel_cache)
    assert checked.returncode == 0, checked.stderr
    assert counts(json.loads(checked.stdout)) == by_hand(2)


def test_trace_of_a_plugin_spec_replays_by_its_name(tmp_path, kernel_cache):
    site = tmp_path / "site"
    _install_plugin(site)
    checked = _kraftcheck(["check", "--spec", "my_spec", "--param", "cap=2", "--trace-dir", str(tmp_path / "t")],
                          tmp_path, site, kernel_cache)
    assert checked.returncode == 1, checked.stderr
    (trace,) = (tmp_path / "t").glob("my_spec.total_below_cap.*.json")
    replayed = _kraftcheck(["trace", "replay", str(trace), "--quiet"], tmp_path, site, kernel_cache)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "valid: 3 states (2 actions)" in replayed.stdout


def test_plugin_registered_under_another_name_than_its_own_is_refused(tmp_path, kernel_cache):
    site = tmp_path / "site"
    _install_plugin(site, SPEC_SOURCE)  # the class calls itself "counters", the entry point "my_spec"
    checked = _kraftcheck(["check", "--spec", "my_spec"], tmp_path, site, kernel_cache)
    assert checked.returncode == 2
    (line,) = checked.stderr.splitlines()
    assert "spec my_spec (entry point my_pkg.mod:Counters) is named 'counters'" in line
    assert 'counters = "my_pkg.mod:Counters"' in line and str(site / "my_pkg" / "mod.py") in line


def test_plugins_are_not_seen_without_being_installed(tmp_path, kernel_cache):
    listed = _kraftcheck(["specs", "--no-color"], tmp_path, tmp_path, kernel_cache)
    assert listed.returncode == 0 and "my_spec" not in listed.stdout and "two_phase" in listed.stdout


def test_broken_plugin_names_its_file_and_line(tmp_path, kernel_cache):
    site = tmp_path / "site"
    _install_plugin(site, "import os\nraise ImportError('needs the corp VPN')\n")
    checked = _kraftcheck(["check", "--spec", "my_spec"], tmp_path, site, kernel_cache)
    assert checked.returncode == 2
    (line,) = checked.stderr.splitlines()
    assert f"{site / 'my_pkg' / 'mod.py'}:2: ImportError: needs the corp VPN" in line
    assert "my_spec" in line and "Traceback" not in checked.stderr


def test_a_broken_plugin_does_not_hide_the_other_specs(tmp_path, kernel_cache):
    site = tmp_path / "site"
    _install_plugin(site)  # my_spec, working
    # a second installed package whose spec, listed before my_spec, fails to import
    (site / "bad_pkg").mkdir()
    (site / "bad_pkg" / "__init__.py").write_text("raise ImportError('needs the corp VPN')\n")
    (site / "bad_pkg-0.1.dist-info").mkdir()
    (site / "bad_pkg-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-pkg\nVersion: 0.1\n")
    (site / "bad_pkg-0.1.dist-info" / "entry_points.txt").write_text("[kraftcheck.specs]\nabc_spec = bad_pkg:Spec\n")
    listed = _kraftcheck(["specs", "--no-color"], tmp_path, site, kernel_cache)
    assert listed.returncode == 2
    assert "my_spec: two bounded counters" in listed.stdout  # listed after the broken one
    (line,) = listed.stderr.splitlines()
    assert "abc_spec" in line and "needs the corp VPN" in line


# -- broken specs: one line, the file and line, exit 2 --------------------------------------------

BROKEN = {
    "syntax_error": ("x = 1\ndef broken(:\n    pass\n", "Counters", 2, "SyntaxError"),
    "raises_at_import": ("import math\n\nraise RuntimeError('no such cluster')\n", "Counters", 3,
                         "RuntimeError: no such cluster"),
    "missing_class": (SPEC_SOURCE, "Countres", None, "has no class 'Countres'; it defines: Counters"),
    "not_a_spec": (SPEC_SOURCE, "NotASpec", SPEC_SOURCE.splitlines().index("class NotASpec:") + 1,
                   "NotASpec is not a spec: expected a subclass of kraftcheck.Spec, got class NotASpec"),
    # Params a plain class (no @dataclass): an internal error (dataclasses.fields' TypeError) as the
    # command line read its parameters
    "params_not_a_dataclass": (SPEC_SOURCE + "\n\nclass PlainParams:\n    n = 2\n\n\nclass PlainCounters(Counters):\n"
                               "    Params = PlainParams\n", "PlainCounters",
                               (SPEC_SOURCE + "\n\nclass PlainParams:\n    n = 2\n\n\n").count("\n") + 1,
                               "PlainCounters: Params must be a dataclass class, @dataclass(frozen=True) with its "
                               "fields declared by param(...), got <class"),
}


def _one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_spec_file_is_one_line_naming_file_and_line(case, tmp_path, kernel_cache):
    source, class_name, line, message = BROKEN[case]
    path = tmp_path / f"{case}.py"
    path.write_text(source)
    error = _one_error_line(run("check", "--spec", f"{path}:{class_name}"))
    assert message in error
    assert str(path) in error
    if line is not None:
        assert f"{path}:{line}:" in error


def test_broken_module_is_one_line_naming_file_and_line(tmp_path, monkeypatch):
    package = tmp_path / "half_done"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "spec.py").write_text("from dataclasses import dataclass\n\nundefined_name + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    error = _one_error_line(run("check", "--spec", "half_done.spec:Counters"))
    assert f"{package / 'spec.py'}:3: NameError" in error
    for name in ("half_done", "half_done.spec"):
        sys.modules.pop(name, None)


def test_external_spec_may_not_take_a_registered_name(tmp_path):
    path = tmp_path / "my_die_hard.py"
    path.write_text(SPEC_SOURCE.replace('name = "counters"', 'name = "die_hard"'))
    error = _one_error_line(run("check", "--spec", f"{path}:Counters"))
    line = SPEC_SOURCE.splitlines().index("class Counters(Spec):") + 1
    assert f"{path}:{line}:" in error
    assert "is named 'die_hard', the name of the spec kraftcheck.specs.die_hard:DieHard" in error


def test_registered_spec_by_its_module_reference_is_itself():
    by_module = run("check", "--spec", "kraftcheck.specs.two_phase:TwoPhase", "--param", "rm=2", "--json", "-")
    by_name = run("check", "--spec", "two_phase", "--param", "rm=2", "--json", "-")
    assert by_module.exit_code == by_name.exit_code == 0
    assert counts(json.loads(by_module.stdout)) == counts(json.loads(by_name.stdout))


@pytest.mark.parametrize("ref,message", [
    ("no_such_module_anywhere:Spec", "cannot import module 'no_such_module_anywhere'"),
    ("missing/dir/spec.py:Spec", "does not exist"),
    ("kraftcheck.specs.die_hard:NoSuchClass", "has no class 'NoSuchClass'; it defines: DieHard"),
])
def test_unloadable_reference_is_one_clear_line(ref, message):
    assert message in _one_error_line(run("check", "--spec", ref))


# -- traces of an external spec -----------------------------------------------------------------

@pytest.fixture(scope="module")
def counters_trace(spec_file, tmp_path_factory) -> Path:
    """The shortest counterexample of total_below_cap (cap=3), written by ``kraftcheck check``."""
    directory = tmp_path_factory.mktemp("traces")
    result = run("check", "--spec", f"{spec_file}:Counters", "--param", "cap=3", "--trace-dir", str(directory))
    assert result.exit_code == 1, result.output
    (path,) = directory.glob("counters.total_below_cap.*.json")
    return path


def test_trace_keeps_the_spec_name_and_replay_never_imports_it(counters_trace):
    data = json.loads(counters_trace.read_text())
    assert data["graph"]["spec"] == "counters"
    result = run("trace", "replay", str(counters_trace))
    assert result.exit_code == 2
    error = _one_error_line(result)
    assert "unknown spec 'counters'" in error and "--spec file.py:Class" in error


def test_replay_of_an_external_spec_trace_with_spec_given(counters_trace, spec_file):
    result = run("trace", "replay", str(counters_trace), "--spec", f"{spec_file}:Counters", "--no-color")
    assert result.exit_code == 0, result.output
    said = " ".join(result.stdout.split())  # the console wraps lines at its width
    assert "valid: 4 states (3 actions)" in said and "total_below_cap violated at step 3" in said
    compiled = run("trace", "replay", str(counters_trace), "--spec", f"{spec_file}:Counters", "--compiled",
                   "--quiet")
    assert compiled.exit_code == 0, compiled.output


def test_replay_with_the_wrong_spec_is_refused(counters_trace):
    error = _one_error_line(run("trace", "replay", str(counters_trace), "--spec", "die_hard"))
    assert "the trace is of spec 'counters', but the spec given is 'die_hard'" in error


def test_replay_with_an_unloadable_spec_is_one_line(counters_trace, tmp_path):
    error = _one_error_line(run("trace", "replay", str(counters_trace), "--spec", f"{tmp_path}/nope.py:Counters"))
    assert "does not exist" in error


def test_replay_still_finds_a_bad_step_of_an_external_spec_trace(counters_trace, spec_file, tmp_path):
    data = json.loads(counters_trace.read_text())
    data["edges"][1]["params"] = {"counter": "a" if data["edges"][1]["params"]["counter"] == "b" else "b"}
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    result = run("trace", "replay", str(edited), "--spec", f"{spec_file}:Counters", "--quiet")
    assert result.exit_code == 1 and "NOT A VALID TRACE" in result.stdout and "step 2" in result.stdout


def test_show_export_and_render_need_no_spec(counters_trace, tmp_path):
    shown = run("trace", "show", str(counters_trace), "--no-color", "--width", "100")
    assert shown.exit_code == 0 and "Inc" in shown.stdout
    exported = run("trace", "export", str(counters_trace), "--format", "json")
    assert exported.exit_code == 0 and json.loads(exported.stdout)["graph"]["spec"] == "counters"
    picture = tmp_path / "trace.svg"
    rendered = run("trace", "render", str(counters_trace), "-o", str(picture))
    assert rendered.exit_code == 0 and picture.stat().st_size > 0


def test_replay_from_python_takes_the_class_or_a_reference(counters_trace, spec_file):
    import kraftcheck

    graph = kraftcheck.load_trace(counters_trace)
    assert not kraftcheck.replay_trace(graph).ok
    cls = kraftcheck.spec_class(f"{spec_file}:Counters")
    assert kraftcheck.replay_trace(graph, spec=cls).ok
    report = kraftcheck.replay_trace(graph, spec=f"{spec_file}:Counters")
    assert report.ok and report.violation["check"] == "total_below_cap"
