"""The distribution: a built wheel installs beside anything, every package folder is shipped, and
the layers import bottom-up (checker <- invariants <- specs <- traces <- the rest of kraftcheck).

The repository keeps its top-level folders (checker/, specs/, invariants/, traces/) but installs
them as subpackages of ``kraftcheck`` (pyproject.toml's ``package-dir``), so the only top-level
name the wheel takes is its own.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# repository folder -> the package it installs as
PACKAGE_DIRS = {
    "kraftcheck": "kraftcheck",
    "checker": "kraftcheck.checker",
    "specs": "kraftcheck.specs",
    "invariants": "kraftcheck.invariants",
    "traces": "kraftcheck.traces",
}
# folders of scripts that are not installed, but whose imports must use the new names too
SCRIPT_DIRS = ("tests", "bench")
OLD_TOP_LEVEL_NAMES = {"checker", "specs", "invariants", "traces"}

# The layers, bottom up: a module may import its own package and the packages of the layers below,
# never one above (up) nor another package of its own layer (sideways). The invariants sit below
# the Kafka spec that lists them (invariants/__init__.py says why); traces read specs (replay).
LAYERS = (
    ("kraftcheck.checker",),
    ("kraftcheck.invariants",),
    ("kraftcheck.specs",),
    ("kraftcheck.traces",),
    ("kraftcheck",),  # everything else: the API, the analyses' runner, the pipeline, cli, ci, sweep, spark
)
# within the top layer, and third-party packages a layer must not need
FORBIDDEN = {
    "kraftcheck.checker": ("pyspark",),
    "kraftcheck.spark": ("kraftcheck.cli", "kraftcheck.api", "kraftcheck.sweep"),
    "kraftcheck.sweep": ("kraftcheck.cli", "pyspark"),
}

SOURCE_FILES = ("pyproject.toml", "README.md")
SUBPROCESS_TIMEOUT = 900  # seconds: installing numba and friends on a cold pip cache is slow


# -- the wheel ----------------------------------------------------------------------------------

def _copy_sources(destination: Path) -> Path:
    """The files a build reads, copied out of the repository so the build leaves no build/ or
    egg-info behind in it."""
    destination.mkdir()
    for name in SOURCE_FILES:
        shutil.copy2(ROOT / name, destination / name)
    for folder in PACKAGE_DIRS:
        shutil.copytree(ROOT / folder, destination / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    return destination


def _run(args: list, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=SUBPROCESS_TIMEOUT)
    assert out.returncode == 0, f"{' '.join(map(str, args))} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    return out


def _clean_env(**extra: str) -> dict:
    """The environment minus anything that would let the fresh venv see this repository."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel of this repository, built with the project's own pip."""
    work = tmp_path_factory.mktemp("wheel")
    source = _copy_sources(work / "src")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", work / "dist",
          source], cwd=work)
    (built,) = (work / "dist").glob("kraftcheck-*.whl")
    return built


def test_wheel_takes_no_top_level_name_but_its_own(wheel):
    from kraftcheck.checker import __version__

    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"kraftcheck", f"kraftcheck-{__version__}.dist-info"}
    shipped = {str(Path(n).parent) for n in names if n.endswith("/__init__.py")}
    assert shipped == {package.replace(".", "/") for package in _pyproject_packages()}
    assert "kraftcheck/specs/die_hard.py" in names and "kraftcheck/cli/main.py" in names


@pytest.mark.slow
def test_wheel_installs_beside_pypi_traces_and_runs_outside_the_repository(wheel, tmp_path):
    import kraftcheck
    from kraftcheck.checker import __version__

    venv = tmp_path / "venv"
    outside = tmp_path / "elsewhere"  # not the repository: nothing importable by accident
    outside.mkdir()
    env = _clean_env(KRAFTCHECK_CACHE_DIR=str(tmp_path / "kernel-cache"), NO_COLOR="1")
    _run([sys.executable, "-m", "venv", venv], cwd=outside, env=env)
    python, pip = venv / "bin" / "python", [venv / "bin" / "python", "-m", "pip", "install", "-q"]
    _run([*pip, "traces"], cwd=outside, env=env)     # the time-series library, installed first
    _run([*pip, wheel], cwd=outside, env=env)         # then kraftcheck, with its dependencies

    # `import traces` is still the time-series library, and it works
    probe = ("import json, traces\n"
             "ts = traces.TimeSeries()\n"
             "ts[0] = 1\n"
             "ts[10] = 3\n"
             "print(json.dumps({'file': traces.__file__, 'at5': ts[5], 'at12': ts[12],\n"
             "                  'share': dict(ts.distribution(start=0, end=20))}))\n")
    seen = json.loads(_run([python, "-c", probe], cwd=outside, env=env).stdout)
    assert Path(seen["file"]).is_relative_to(venv)
    assert (seen["at5"], seen["at12"]) == (1, 3)
    assert seen["share"] == {"1": 0.5, "3": 0.5}

    # kraftcheck imports from the venv and checks a spec with the counts the repository's engine gives
    where = _run([python, "-c", "import kraftcheck; print(kraftcheck.__file__)"], cwd=outside, env=env).stdout
    assert Path(where.strip()).is_relative_to(venv)
    expected = kraftcheck.check("two_phase", rm=2)
    out = _run([venv / "bin" / "kraftcheck", "check", "--spec", "two_phase", "--param", "rm=2", "--json", "-"],
               cwd=outside, env=env)
    report = json.loads(out.stdout)
    assert report["result"] == expected.status == "holds"
    assert (report["distinct_states"], report["states_generated"], report["depth"]) == (
        expected.distinct_states, expected.states_generated, expected.depth)
    assert not (outside / "kraftcheck-traces").exists()  # nothing violated, so no trace written

    version = _run([python, "-m", "kraftcheck", "--version"], cwd=outside, env=env).stdout
    assert version.split() == ["kraftcheck,", "version", __version__]


# -- pyproject lists every package --------------------------------------------------------------

def _pyproject_packages() -> list[str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: tomli, which pyproject.toml declares for it
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]


def _package_folders() -> dict[str, Path]:
    """Installed package name -> folder, for every folder with an __init__.py."""
    found = {}
    for folder, package in PACKAGE_DIRS.items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            relative = init.parent.relative_to(ROOT / folder).parts
            found[".".join((package, *relative))] = init.parent
    return found


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(_pyproject_packages())
    folders = _package_folders()
    missing = sorted(set(folders) - listed)
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"
    assert not sorted(listed - set(folders)), "pyproject lists packages with no folder"
    assert {"kraftcheck.cli", "kraftcheck.checker.explore", "kraftcheck.traces.scenarios"} <= listed


# -- layering -----------------------------------------------------------------------------------

def _module_name(path: Path) -> tuple[str, bool]:
    """(dotted name, is a package __init__) of a source file, as installed; scripts by file stem."""
    relative = path.relative_to(ROOT)
    top, *rest = relative.with_suffix("").parts
    is_package = rest[-1:] == ["__init__"]
    if is_package:
        rest = rest[:-1]
    if top in PACKAGE_DIRS:
        return ".".join((PACKAGE_DIRS[top], *rest)), is_package
    return ".".join(rest) or top, is_package


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) for every import statement in ``source``; relative imports resolved, and
    ``from P import x`` counted as importing P and P.x (x may be a submodule, or a name of
    kraftcheck's lazy API, which is counted as the module it comes from)."""
    import kraftcheck

    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[:len(parent) - (node.level - 1)]
                base = ".".join(parent + ([node.module] if node.module else []))
            found.append((node.lineno, base))
            for alias in node.names:
                if base == "kraftcheck" and alias.name in kraftcheck._API:
                    found.append((node.lineno, kraftcheck._API[alias.name].split(":")[0]))
                else:
                    found.append((node.lineno, f"{base}.{alias.name}"))
    return found


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def layer_of(name: str) -> tuple[int, str] | None:
    """(layer number, package) of an installed module, None outside kraftcheck (and for the bare
    ``kraftcheck``, which imports nothing until a name of its API is used)."""
    if name == "kraftcheck" or not _within(name, "kraftcheck"):
        return None
    for number, packages in enumerate(LAYERS):
        package = next((p for p in packages if p != "kraftcheck" and _within(name, p)), None)
        if package is not None:
            return number, package
    return len(LAYERS) - 1, "kraftcheck"


def layering_violations(source: str, path: Path) -> list[str]:
    module, is_package = _module_name(path)
    mine = layer_of(module)
    problems, refused = [], set()
    for line, name in imported_modules(source, module, is_package):
        where = f"{path.relative_to(ROOT)}:{line}"
        if name.split(".")[0] in OLD_TOP_LEVEL_NAMES:
            problems.append(f"{where} imports {name}: use kraftcheck.{name}")
        theirs = layer_of(name)
        if any(_within(name, earlier) for at, earlier in refused if at == line):
            continue  # ``from P import x``: P said already
        if mine is not None and theirs is not None and theirs[1] != mine[1] and theirs[0] >= mine[0]:
            refused.add((line, name))
            direction = "up" if theirs[0] > mine[0] else "sideways"
            problems.append(f"{where}: {mine[1]} must not import {name} ({direction}: the layers are "
                            f"{' < '.join('/'.join(layer) for layer in LAYERS)})")
        for package, forbidden in FORBIDDEN.items():
            if _within(module, package):
                problems += [f"{where}: {package} must not import {name}" for f in forbidden if _within(name, f)]
    return problems


def _python_files() -> list[Path]:
    return sorted(p for folder in (*PACKAGE_DIRS, *SCRIPT_DIRS) for p in (ROOT / folder).rglob("*.py")
                  if "__pycache__" not in p.parts)


def test_layers_import_bottom_up_and_only_the_new_names():
    files = _python_files()
    assert len(files) > 50 and ROOT / "checker" / "codegen.py" in files
    problems = [p for path in files for p in layering_violations(path.read_text(), path)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path,source,expected", [
    ("checker/model.py", "from kraftcheck.specs import spec_class", "must not import kraftcheck.specs"),
    ("checker/explore/engine.py", "from ...traces import files", "must not import kraftcheck.traces"),
    ("checker/report.py", "from kraftcheck import api", "must not import kraftcheck.api"),
    ("checker/report.py", "def f():\n    from kraftcheck import load_trace", "must not import kraftcheck.traces"),
    ("specs/kafka/__init__.py", "from ...traces.files import load", "must not import kraftcheck.traces"),
    ("invariants/hwm.py", "import kraftcheck.cli.main", "must not import kraftcheck.cli"),
    ("invariants/hwm.py", "def f():\n    from kraftcheck.specs.kafka.broker import acting_leader",
     "must not import kraftcheck.specs.kafka.broker (up"),
    ("invariants/durability.py", "from ..specs.kafka import state", "must not import kraftcheck.specs"),
    ("specs/kafka/spec.py", "from kraftcheck import analyses", "must not import kraftcheck.analyses"),
    ("traces/lasso.py", "from kraftcheck.analyses import availability_report", "must not import kraftcheck.analyses"),
    ("checker/analyses/liveness.py", "from kraftcheck.invariants import kafka_invariants",
     "must not import kraftcheck.invariants"),
    ("kraftcheck/spark/explorer.py", "from kraftcheck.cli import terminal", "must not import kraftcheck.cli"),
    ("traces/render.py", "from kraftcheck.cli import terminal", "must not import kraftcheck.cli"),
    ("tests/test_cli.py", "from traces.files import load", "use kraftcheck.traces.files"),
    ("bench/kafka.py", "import checker.codegen", "use kraftcheck.checker.codegen"),
])
def test_layering_check_catches_each_kind_of_violation(path, source, expected):
    problems = layering_violations(source, ROOT / path)
    assert any(expected in p for p in problems), problems


def test_layering_check_allows_the_layers_below():
    assert layering_violations("from kraftcheck.checker.spec import Spec\nfrom . import durability",
                               ROOT / "invariants" / "__init__.py") == []
    assert layering_violations("from kraftcheck.invariants import kafka_invariants\n"
                               "from kraftcheck.invariants.kafka_state import RUNNING",
                               ROOT / "specs" / "kafka" / "spec.py") == []
    assert layering_violations("from kraftcheck import traces\nfrom kraftcheck.checker.analyses import state_graph\n"
                               "from kraftcheck.cli.terminal import Terminal",
                               ROOT / "kraftcheck" / "analyses.py") == []
    assert layering_violations("from kraftcheck.specs import spec_class\nfrom .files import load",
                               ROOT / "traces" / "replay.py") == []
    assert layering_violations("import traces_support", ROOT / "tests" / "test_traces.py") == []


def test_layering_check_refuses_a_package_of_the_same_layer(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "LAYERS",
                        (("kraftcheck.checker",), ("kraftcheck.invariants", "kraftcheck.specs"), ("kraftcheck",)))
    problems = layering_violations("from kraftcheck.specs.kafka import state", ROOT / "invariants" / "elr.py")
    assert any("must not import kraftcheck.specs.kafka (sideways" in p for p in problems), problems
    assert layering_violations("from kraftcheck.invariants import elr", ROOT / "invariants" / "hwm.py") == []
