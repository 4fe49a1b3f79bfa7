"""The spec's code, as a checkpoint records it: a SHA-256 of the source file of every module the
spec is made of, so that a resume under edited code (an action's guard, an invariant) is refused
instead of continuing a run whose finished levels another spec produced.

Which modules: those of the spec's class and its bases, and of its actions', invariants',
transition properties' and constraints' functions, then every module their source files import
(read from the files, so an import inside a function counts too), transitively. Python's own
modules, installed packages (other than the spec's own, for a spec installed as a plugin) and
kraftcheck's checker are not the spec's (the kraftcheck version in the identity covers the
checker). For a bundled spec such as kafka this is its package's files and the invariants it
uses; for a spec file, the file and the files beside it that it imports.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
import sysconfig
import types
from pathlib import Path
from typing import Any, Optional

from kraftcheck.checker.imported_source import imported_digest
from kraftcheck.checker.model import Model

CHECKER_PACKAGE = "kraftcheck.checker"
_PATHS = sysconfig.get_paths()
# where Python's own modules live, and installed packages: not the spec's code (unless the spec is
# itself an installed package's, a plugin: then that package's modules are)
_PYTHON = tuple({Path(p).resolve() for key in ("stdlib", "platstdlib") if (p := _PATHS.get(key))})
_INSTALLED = _PYTHON + tuple({Path(p).resolve() for key in ("purelib", "platlib") if (p := _PATHS.get(key))})


def spec_code(model: Model) -> dict[str, str]:
    """{module name: SHA-256 of its source file} of every module of ``model``'s spec, sorted."""
    seeds = [c.__module__ for c in type(model.spec).__mro__]
    for item in (model.actions + model.spec_invariants + model.spec_properties + model.spec_constraints
                 + model.spec_action_constraints):
        seeds.append(_module_of(item.fn))
    files = _spec_files([name for name in seeds if name])
    # as imported: the code in memory, which a file saved since no longer is
    return {name: imported_digest(str(files[name])).hex() for name in sorted(files)}


def source_file(module_name: str) -> Optional[Path]:
    """The source file of a module of the spec (None if there is none)."""
    return _module_file(module_name)


def _spec_files(seeds: list[str]) -> dict[str, Path]:
    files: dict[str, Path] = {}
    spec_packages = {name.partition(".")[0] for name in seeds}
    pending = list(seeds)
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _module_file(name)
        if path is None or not _is_spec_code(name, path, spec_packages):
            continue
        files[name] = path
        pending.extend(_imported_names(name, path))
    return files


def _imported_names(module: str, path: Path) -> list[str]:
    """The names of the modules ``path``'s import statements may import, wherever they stand (an
    import inside a function too: it is read, not run), so the modules found do not depend on
    what happened to be imported already. ``from a import b`` gives ``a`` and ``a.b`` (``b`` may
    be a module)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    names = []
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (SyntaxError, ValueError):  # edited since it was imported: its digest says so
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 > len(parts):
                    continue
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([base] if base else []))
            if base:
                names.append(base)
            names += [f"{base}.{alias.name}" if base else alias.name for alias in node.names if alias.name != "*"]
    return names


def _module_file(name: str) -> Optional[Path]:
    """The source file of module ``name`` (None if there is none, or no such module)."""
    module = sys.modules.get(name)
    if module is not None:
        return _source(module)
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):  # not a module (a name imported from one)
        return None
    if found is None or not found.has_location or not found.origin or not found.origin.endswith(".py"):
        return None
    return Path(found.origin).resolve()


def _module_of(value: Any) -> Optional[str]:
    """The module that defines a function, class or numba dispatcher (None for other values)."""
    value = getattr(value, "py_func", value)  # a numba dispatcher's Python function
    if isinstance(value, (types.FunctionType, type)):
        module = getattr(value, "__module__", None)
        return module if isinstance(module, str) else None
    return None


def _source(module: types.ModuleType) -> Optional[Path]:
    try:
        path = inspect.getsourcefile(module)
    except TypeError:  # a built-in module
        return None
    return Path(path).resolve() if path else None


def _is_spec_code(name: str, path: Path, spec_packages: set[str]) -> bool:
    if name == CHECKER_PACKAGE or name.startswith(CHECKER_PACKAGE + "."):
        return False
    outside = _PYTHON if name.partition(".")[0] in spec_packages else _INSTALLED
    return not any(path.is_relative_to(root) for root in outside)
