"""Whether numba accepts a spec's functions, without compiling them: numba's type inference of
every function the kernels call, with the argument types the kernels pass.

A run that ends while the engine still interprets (``--compile background``) has run the spec's
functions as Python, which accepts code numba refuses (a list built in an action, a str, a
Python-only builtin). Its answer may be given only once the spec is known to compile, as
``--compile now`` would find: this check types every action, invariant, transition property and
constraint of the spec (every one the kernels compile in, selected or not) on the structured
state the kernels hand them, and the ``@njit`` helpers they call, and raises numba's own typing
error for the first it refuses. It lowers and optimises nothing, so it takes a fraction of what
compiling the same functions takes (bench/RESULTS.md, "The answer waits for numba's typing").

The types it infers are also the one place where the compiled kernels' reading of what each of
these functions returns is known: one whose return type is not boolean (a tuple, a string, an
integer) is refused (``action_returns``), before the compiled kernels give any answer.

Calls to the spec's own ``@njit`` helpers are typed the same way (their return type inferred, no
code generated); numba's own library functions (``@overload`` implementations of numpy and
builtins) are resolved as numba always does, which may compile them.
"""

from __future__ import annotations

import contextlib
import dis
import hashlib
import threading
from typing import Any, Callable, Iterator

import numba
from numba.core import compiler, typed_passes, typing
from numba.core.compiler_lock import global_compiler_lock
from numba.core.compiler_machinery import FunctionPass, register_pass
from numba.core.dispatcher import Dispatcher
from numba.core.registry import cpu_target

from kraftcheck.checker import __version__, numba_cache
from kraftcheck.checker.action_returns import no_bool_error
from kraftcheck.checker.codegen import sources_digest
from kraftcheck.checker.errors import defined_at
from kraftcheck.checker.layout import Layout
from kraftcheck.checker.model import Model, python_function

# dispatchers of these packages are numba's own (overloads it implements in Python): resolved as
# numba resolves them
_LIBRARIES = ("numba", "numpy")


@register_pass(mutates_CFG=False, analysis_only=True)
class _StopAfterTyping(FunctionPass):
    """The last pass: hand back the inferred return type instead of lowering anything."""

    _name = "kraftcheck_stop_after_typing"

    def __init__(self) -> None:
        FunctionPass.__init__(self)

    def run_pass(self, state) -> bool:
        raise compiler._EarlyPipelineCompletion(state.return_type)


class _TypingPipeline(compiler.CompilerBase):
    """numba's nopython front end (bytecode to IR, its rewrites) and type inference, nothing after."""

    def define_pipelines(self):
        pm = compiler.DefaultPassBuilder.define_untyped_pipeline(self.state)
        pm.add_pass(typed_passes.NopythonTypeInference, "nopython frontend")
        pm.add_pass(_StopAfterTyping, "stop after typing")
        pm.finalize()
        return [pm]


class _Typer:
    """Infers return types of the spec's dispatchers, each (function, argument types) once."""

    def __init__(self) -> None:
        self.known: dict[tuple[int, tuple], Any] = {}
        self.typing: set[tuple[int, tuple]] = set()  # being typed: a recursive helper is left to numba
        self.flags = compiler.Flags()
        self.flags.nrt = True

    def return_type(self, dispatcher: Dispatcher, args: tuple) -> Any:
        key = (id(dispatcher), args)
        if key not in self.known:
            ctx = cpu_target
            self.typing.add(key)
            try:  # as compiling: a recursive call in it is then typed as numba types one (RecursiveCall)
                with dispatcher._compiling_counter:
                    self.known[key] = compiler.compile_extra(ctx.typing_context, ctx.target_context, dispatcher.py_func,
                                                             args, None, self.flags, {}, library=None,
                                                             pipeline_class=_TypingPipeline)
            except KeyError as e:  # numba's record typing raises it, not a TypingError, for a name the state lacks
                raise _no_such_field(dispatcher.py_func, e.args[0] if e.args else "?") from None
            finally:
                self.typing.discard(key)
        return self.known[key]


def _no_such_field(py: Callable[..., Any], name: str) -> numba.core.errors.TypingError:
    """numba's refusal of ``py`` for reading or writing ``name``, which is no field of the state,
    at the first line of ``py`` that names it."""
    line = next((ins.positions.lineno for ins in dis.get_instructions(py)
                 if ins.opname in ("LOAD_ATTR", "STORE_ATTR") and ins.argval == name and ins.positions
                 and ins.positions.lineno), py.__code__.co_firstlineno)
    return numba.core.errors.TypingError(f"{py.__name__} uses {name!r}, which is no field of the state",
                                         loc=numba.core.ir.Loc(py.__code__.co_filename, line))


_patch_lock = threading.Lock()


@contextlib.contextmanager
def _typing_only(typer: _Typer) -> Iterator[None]:
    """While inside, a call from typed code to a dispatcher of the spec's is typed by ``typer``
    (no compile) rather than compiled, as numba's ``Dispatcher.get_call_template`` would."""
    original = Dispatcher.get_call_template

    def get_call_template(self, args, kws):
        module = getattr(self.py_func, "__module__", "") or ""
        pysig, folded = self._compiler.fold_argument_types(args, kws)
        if module.split(".")[0] in _LIBRARIES or (id(self), tuple(folded)) in typer.typing:
            return original(self, args, kws)
        args = folded
        sig = typing.signature(typer.return_type(self, tuple(args)), *args)
        template = typing.make_concrete_template(f"CallTemplate({self.py_func.__name__})",
                                                 key=self.py_func.__name__, signatures=[sig])
        return template, pysig, args, {}

    with _patch_lock, global_compiler_lock:
        Dispatcher.get_call_template = get_call_template
        try:
            yield
        finally:
            Dispatcher.get_call_template = original


def state_type(layout: Layout):
    """numba's type of the structured state the kernels hand the spec's functions: int64 elements,
    as the successor's (codegen's SUCCESSOR_DTYPE), so that a spec computes on int64 values as in
    Python (the chunk's int32 rows are widened before a function reads them)."""
    return numba.from_dtype(layout.successor_dtype)


def successor_type(layout: Layout):
    """numba's type of the structured successor an action writes (codegen's SUCCESSOR_DTYPE)."""
    return numba.from_dtype(layout.successor_dtype)


def kernel_calls(model: Model) -> list[tuple[str, Callable[..., Any], tuple]]:
    """(what, function, argument types) of every call of a spec function the kernels compile in:
    each action on (state, successor, its parameters as int64 loop variables), every invariant
    and state constraint on a state, every transition property and action constraint on a step."""
    state, succ = state_type(model.layout), successor_type(model.layout)
    calls = [(f"action {a.name}", a.fn, (state, succ) + (numba.types.int64,) * len(a.params)) for a in model.actions]
    calls += [(f"invariant {x.name}", x.fn, (state,)) for x in model.spec_invariants]
    calls += [(f"constraint {x.name}", x.fn, (state,)) for x in model.spec_constraints]
    calls += [(f"transition property {x.name}", x.fn, (state, succ)) for x in model.spec_properties]
    calls += [(f"action constraint {x.name}", x.fn, (state, succ)) for x in model.spec_action_constraints]
    return calls


def typing_keys(model: Model) -> list[str]:
    """Per call ``kernel_calls(model)`` gives, in its order, a digest of everything typing it
    reads: the sources the function reaches (as its numba cache entries cover them:
    ``numba_cache.reachable_sources_digest``; for a function whose sources are not tracked, its
    package's: ``codegen.sources_digest``), what it is, its argument types (the structured
    state's field names and shapes, not the fields' ranges: configurations of a spec that differ
    in their bounds only share each verdict, and one with an action more types that action alone),
    this module's source, and the kraftcheck and numba versions."""
    versions = f"kraftcheck {__version__}; numba {numba.__version__}\n".encode()
    this_module = numba_cache.file_digest(__file__)
    keys = []
    for what, fn, args in kernel_calls(model):
        py = python_function(fn)
        sources = numba_cache.reachable_sources_digest(py) or sources_digest([fn], [])
        h = hashlib.sha256(versions + this_module + sources.encode())
        h.update(f"{what}; {py.__module__}.{py.__qualname__}; {args}\n".encode())
        keys.append(h.hexdigest())
    return keys


def check_spec_types(model: Model) -> None:
    """Type every function of ``model``'s spec that its kernels call (``check_calls``)."""
    check_calls(kernel_calls(model))


def check_calls(calls: list[tuple[str, Callable[..., Any], tuple]]) -> None:
    """Type each of ``calls`` (as ``kernel_calls`` gives them); raise numba's error
    (``numba.core.errors.NumbaError``) for the first that numba refuses, a SpecError for the
    first whose return type is not boolean. Nothing is compiled."""
    if numba.config.DISABLE_JIT:  # everything runs as Python then
        return
    typer = _Typer()
    with _typing_only(typer):
        for what, fn, args in calls:
            returned = typer.return_type(fn, args)
            if not isinstance(returned, numba.types.Boolean):
                raise no_bool_error(what, f"returns a value numba types as {returned} (defined at {defined_at(fn)})")
