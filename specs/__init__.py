"""The models kraftcheck can check, and how a spec is found from what a user names.

A spec is named in one of four ways:

* a registered name of this package (``kafka``, ``two_phase``, ...: ``REGISTRY``);
* a name another installed package registers in the ``kraftcheck.specs`` entry-point group
  (``my_protocol = "my_package.my_module:MyProtocol"`` in its ``pyproject.toml``);
* ``path/to/file.py:ClassName``: a spec file of your own, not installed anywhere;
* ``package.module:ClassName``: an importable module.

Modules are imported only when used, so listing specs stays fast and a broken spec cannot stop
the others from loading. A spec that fails to load is reported as one line naming the file and
line where it failed.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import sys
import traceback
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from kraftcheck.checker.errors import UsageError
# SPEC_FILE_MODULE_PREFIX: the start of the module name a spec file is imported under (kraftcheck.spark uses it)
from kraftcheck.checker.file_modules import SPEC_FILE_MODULE_PREFIX, file_module_name  # noqa: F401
from kraftcheck.checker.files import not_a_file
from kraftcheck.checker.spec import Spec

REGISTRY: dict[str, str] = {
    "two_phase": "kraftcheck.specs.two_phase:TwoPhase",
    "two_phase_eager_commit": "kraftcheck.specs.two_phase_eager_commit:TwoPhaseEagerCommit",
    "die_hard": "kraftcheck.specs.die_hard:DieHard",
    "mutex": "kraftcheck.specs.mutex:Mutex",
    "kafka": "kraftcheck.specs.kafka.spec:KafkaReplication",
}

DEFAULT_SPEC = "kafka"
ENTRY_POINT_GROUP = "kraftcheck.specs"

# class -> the reference it was loaded by, so a trace can name how to load it again
_references: dict[type, str] = {}


def plugin_specs() -> dict[str, EntryPoint]:
    """Specs registered by installed packages, by name (a name of this package's own wins)."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in REGISTRY}


def spec_names() -> list[str]:
    """Every spec that can be named by a plain name: this package's, then installed plugins'."""
    return list(REGISTRY) + sorted(plugin_specs())


def spec_class(ref: str, names_only: bool = False) -> type[Spec]:
    """The Spec subclass ``ref`` names: a registered name, a plugin name, ``file.py:Class`` or
    ``module:Class``. Raises UsageError with one clear line when it cannot be loaded.

    ``names_only`` accepts registered and plugin names only, never a file or module to import:
    for names read from files (traces), which must not make kraftcheck run code they name.
    """
    if not isinstance(ref, str) or not ref:
        raise UsageError("a spec is named by a registered name, file.py:Class or module:Class")
    if ref in REGISTRY:
        module, name = REGISTRY[ref].split(":")
        return _remember(_checked(getattr(importlib.import_module(module), name), ref), ref)
    plugins = plugin_specs()
    if ref in plugins:
        return _remember(_from_entry_point(plugins[ref]), ref)
    where, sep, name = ref.rpartition(":")
    if names_only or not sep or not where or not name:
        choices = ", ".join(spec_names())
        raise UsageError(f"unknown spec {ref!r}; choose one of: {choices} (or give file.py:Class or "
                         "module:Class)")
    if reference_file(ref) is not None:
        path = Path(where).expanduser().resolve()
        cls = _checked(_class_in(_load_file(path), name, str(path)), ref)
        return _remember(_own_name(cls, ref, plugins), f"{path}:{name}")
    return _remember(_own_name(_checked(_class_in(_import(where), name, where), ref), ref, plugins), ref)


def reference_file(ref: object) -> str | None:
    """The file a ``file.py:Class`` reference names, as given (None for a name, a module:Class or
    anything else)."""
    if not isinstance(ref, str):
        return None
    where, sep, name = ref.rpartition(":")
    return where if sep and where and name and (where.endswith(".py") or "/" in where or "\\" in where) else None


def source_file(spec: object) -> str | None:
    """The file a spec's code is read from, for refusing an output over it: a ``file.py:Class``
    reference's file; the module file of a ``module:Class`` reference, a registered or a plugin's
    name (found on ``sys.path``, not run; only the packages above it are imported, as loading the
    spec would); a class's or instance's own file. None when none is found (loading the spec
    then says why)."""
    if not isinstance(spec, str):
        try:
            return inspect.getsourcefile(spec if isinstance(spec, type) else type(spec))
        except TypeError:  # a built-in: no file
            return None
    if reference_file(spec) is not None:
        return reference_file(spec)
    plugins = {} if spec in REGISTRY else plugin_specs()
    module = REGISTRY[spec].split(":")[0] if spec in REGISTRY else plugins[spec].module if spec in plugins \
        else spec.rpartition(":")[0]
    try:
        found = importlib.util.find_spec(module) if module else None
    except Exception:  # noqa: BLE001 - a package above it that fails to import, or no module name: loading says so
        return None
    return found.origin if found is not None and found.has_location else None


def checked_spec_class(cls: object) -> type[Spec]:
    """``cls`` if it is a usable spec class given directly (from Python): a Spec subclass with a
    name and Params, whose name is not another registered or installed spec's."""
    ref = getattr(cls, "__qualname__", repr(cls))
    return _own_name(_checked(cls, ref), ref, plugin_specs())


def spec_reference(cls: type) -> str | None:
    """How ``cls`` was loaded (a name, ``/abs/file.py:Class`` or ``module:Class``), if by ``spec_class``."""
    return _references.get(cls)


def _remember(cls: type[Spec], ref: str) -> type[Spec]:
    _references.setdefault(cls, ref)
    return cls


def _checked(obj: object, ref: str) -> type[Spec]:
    if not (isinstance(obj, type) and issubclass(obj, Spec)):
        what = f"class {obj.__name__}" if isinstance(obj, type) else f"{type(obj).__name__} {obj!r:.60}"
        raise UsageError(f"{_defined_at(obj)}{ref} is not a spec: expected a subclass of kraftcheck.Spec, "
                         f"got {what}")
    for attribute in ("name", "Params"):
        if not hasattr(obj, attribute):
            raise UsageError(f"{_defined_at(obj)}spec {ref} does not set the class attribute {attribute!r}; "
                             "see docs/writing-a-spec.md")
    if not (isinstance(obj.Params, type) and dataclasses.is_dataclass(obj.Params)):  # read as one from here on
        raise UsageError(f"{_defined_at(obj)}spec {ref}: Params must be a dataclass class, @dataclass(frozen=True) "
                         f"with its fields declared by param(...), got {obj.Params!r:.60}; see docs/writing-a-spec.md")
    return obj


def _defined_at(obj: object) -> str:
    """``file:line: `` where a class or function is defined, or "" when Python cannot tell."""
    try:
        return f"{inspect.getsourcefile(obj)}:{inspect.getsourcelines(obj)[1]}: "
    except (TypeError, OSError):
        return ""


def _own_name(cls: type[Spec], ref: str, plugins: dict[str, EntryPoint]) -> type[Spec]:
    """``cls`` unless it claims the name of a different registered or installed spec: its traces,
    which keep only the name, would then be replayed against that other spec."""
    if cls.name in REGISTRY:
        module, name = REGISTRY[cls.name].split(":")
        other = getattr(importlib.import_module(module), name)
    elif cls.name in plugins:
        other = _from_entry_point(plugins[cls.name])
    else:
        return cls
    if other is not cls:
        raise UsageError(f"{_defined_at(cls)}spec {ref} is named {cls.name!r}, the name of the spec "
                         f"{_registered_as(cls.name, plugins)}; give the class its own name (name = \"...\") "
                         "so that its traces are told apart")
    return cls


def _registered_as(name: str, plugins: dict[str, EntryPoint]) -> str:
    return REGISTRY[name] if name in REGISTRY else f"{plugins[name].value} (installed)"


def _class_in(module: object, name: str, where: str) -> object:
    if not hasattr(module, name):
        found = sorted(k for k, v in vars(module).items()
                       if isinstance(v, type) and issubclass(v, Spec) and v is not Spec)
        hint = f"; it defines: {', '.join(found)}" if found else "; it defines no Spec subclass"
        raise UsageError(f"{where} has no class {name!r}{hint}")
    return getattr(module, name)


def _from_entry_point(ep: EntryPoint) -> type[Spec]:
    try:
        obj = ep.load()
    except Exception as e:  # noqa: BLE001 - whatever a plugin raises, say where
        raise UsageError(f"spec {ep.name} (entry point {ep.value}) failed to load: {_where(e)}") from None
    cls = _checked(obj, f"{ep.name} ({ep.value})")
    if cls.name != ep.name:
        # a trace keeps cls.name, and is replayed by looking that name up
        raise UsageError(f"{_defined_at(cls)}spec {ep.name} (entry point {ep.value}) is named {cls.name!r}: "
                         f"register it under its own name ({cls.name} = \"{ep.value}\") so that its traces "
                         "can be replayed")
    return cls


def _import(module: str) -> object:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            raise UsageError(f"cannot import module {module!r} ({e}); give an importable module or "
                             "a file path such as specs/my_spec.py:MySpec") from None
        raise UsageError(f"module {module} failed to load: {_where(e)}") from None
    except Exception as e:  # noqa: BLE001
        raise UsageError(f"module {module} failed to load: {_where(e)}") from None


def _load_file(path: Path) -> object:
    """Import a spec file under a name derived from its absolute path (``file_modules``: stable
    between runs, so compiled kernels that import its functions are found in numba's cache, and
    found again by a process that imports the same file as a module of its own name)."""
    kind = not_a_file(path)
    if kind:
        raise UsageError(f"spec file {path} is {kind}, not a file; name the spec's Python file")
    if not path.is_file():
        raise UsageError(f"spec file {path} does not exist")
    module_name = file_module_name(path)
    if module_name in sys.modules:
        return sys.modules[module_name]
    # a spec file may import modules beside it, as a script would
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        del sys.modules[module_name]
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise UsageError(f"spec file failed to load: {_where(e, path)}") from None
    return module


def _where(e: BaseException, path: Path | None = None) -> str:
    """``file:line: Error: message`` of an exception, at the deepest frame in ``path`` if given
    (else the deepest frame), so the user sees their own line rather than a traceback."""
    if isinstance(e, SyntaxError) and e.filename:
        return f"{e.filename}:{e.lineno}: SyntaxError: {e.msg}"
    frames = traceback.extract_tb(e.__traceback__)
    mine = [f for f in frames if path is not None and Path(f.filename) == path] or frames
    location = f"{mine[-1].filename}:{mine[-1].lineno}: " if mine else ""
    return f"{location}{type(e).__name__}: {e}"
