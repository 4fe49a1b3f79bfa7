"""A run's tiers: the kernels it starts with, and its switch to the compiled ones.

``--compile now`` compiles the kernels before the run. ``background`` (the default), when they
are not in the cache: a separate process compiles them while the run explores with the first
tier (the bytecode tier, ``bytecode_tier.py``, or for a spec whose functions do not translate the
Python one, ``interpreted.py``) for at most ``interpret_budget()`` seconds, then waits for them;
the run takes each compiled form between two chunks once it is ready (``Tiers``). A run that ends
first gives its answer only once numba is known to accept the spec's functions
(``confirm_spec_compiles``; an acceptance is kept: ``TypingVerdicts``), and compiled kernels
explore only once numba's typing has said that every function returns a bool (``type_spec_once``,
``confirm_spec_compiles``). ``never`` and ``bytecode`` keep one tier throughout (tests).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numba

from kraftcheck.checker.bytecode import Untranslatable
from kraftcheck.checker.codegen import kernel_cache_problem, uses_layout_table
from kraftcheck.checker.compile import (BackgroundCompile, KernelShapes, SourcesChanged, compile_error, compile_in_process,
                                        is_compiled, typed_marker_path)
from kraftcheck.checker.errors import KraftcheckError, SpecError, UsageError
from kraftcheck.checker.explore.bytecode_tier import BytecodeKernels, InterpreterCompile
from kraftcheck.checker.explore.compiled import Kernels, kernel_shapes
from kraftcheck.checker.explore.interpreted import InterpretedKernels
from kraftcheck.checker.explore.observer import RunObserver
from kraftcheck.checker.explore.result import Progress, ProgressFn, Result
from kraftcheck.checker.explore.run_limits import Clock
from kraftcheck.checker.stop import raise_if_stop_requested
from kraftcheck.checker.files import atomic_write
from kraftcheck.checker.imported_source import changed_since_import
from kraftcheck.checker.model import Model
from kraftcheck.checker.typing_check import check_calls, check_spec_types, kernel_calls, typing_keys

# "never": the Python tier throughout; "bytecode": the bytecode tier throughout (both for tests)
COMPILE_MODES = ("now", "background", "never", "bytecode")
# Seconds of the first tier before the run waits for its compile (``KRAFTCHECK_INTERPRET_S`` sets
# either): exploring takes a core the compile would use, and what it finds it finds early. The
# bytecode tier runs 20-40x faster than the Python one, so it gets longer (bench/RESULTS.md).
INTERPRET_BUDGET_S = 1.0
BYTECODE_BUDGET_S = 1.5


class TypingVerdicts:
    """The calls of spec functions numba's type inference accepted (``typing_check``: typed, and
    returning a bool), so that a later run need not type them again. A verdict is kept per call,
    under its ``typing_keys`` digest: of the sources the function reaches, of its argument types
    (the fields' names and shapes, not their ranges: the configurations of a spec that differ in
    their bounds only share it, and a configuration with an action more types that action alone)
    and of the kraftcheck and numba versions. A file in the kernel cache (``typed_marker_path``)
    tells later processes, if it says the return type was checked (``TYPED_MARKER_TEXT``); in
    this process the key tells, whatever kernel cache the file went to (a run with a fresh cache:
    tests). A refusal is never kept. A new instance knows what a new process knows: the files."""

    def __init__(self) -> None:
        self.keys: set[str] = set()

    def untyped(self, model: Model, shapes: KernelShapes) -> list[tuple[str, tuple]]:
        """``model``'s calls (``kernel_calls``) that no verdict accepts yet, each with its key."""
        return [(key, call) for key, call in zip(typing_keys(model), kernel_calls(model))
                if not self._known(key, shapes)]

    def accepted(self, model: Model, shapes: KernelShapes) -> bool:
        return not self.untyped(model, shapes)

    def _known(self, key: str, shapes: KernelShapes) -> bool:
        if key in self.keys:
            return True
        try:
            known = typed_marker_path(shapes, key).read_text() == TYPED_MARKER_TEXT
        except (OSError, UnicodeDecodeError):
            return False
        if known:
            self.keys.add(key)
        return known

    def remember(self, calls: list[tuple[str, tuple]], shapes: KernelShapes) -> None:
        """``calls`` (as ``untyped`` gives them) were typed and accepted."""
        keys = [key for key, _ in calls]
        self.keys.update(keys)
        # a kernel cache that cannot be written is used only as it is (when it holds the run's
        # kernels): nothing is written there, and a later process types the calls again
        if kernel_cache_problem(Path(shapes.module_path).parent) is None:
            for key in keys:
                try:
                    atomic_write(typed_marker_path(shapes, key), TYPED_MARKER_TEXT)
                except OSError:
                    pass


# what a typing marker says: numba's version, and that the return types were checked
TYPED_MARKER_TEXT = f"numba {numba.__version__}; every function returns a bool\n"


# this process's: every run asks it
TYPING_VERDICTS = TypingVerdicts()


def type_spec_once(model: Model, shapes: KernelShapes, progress: Optional[ProgressFn] = None, t0: float = 0.0) \
        -> None:
    """Before compiled kernels (``shapes``' or another form of them) explore: numba's type
    inference of the spec's functions (``typing_check``), unless a run of this spec version and
    fields did it (``TYPING_VERDICTS``). Its refusal is raised as ``--compile now`` gives it
    (``compile_error``), a function whose return type is not boolean as a SpecError: a compiled
    kernel reads such a value its own way (``action_returns``). Nothing is typed when numba is
    disabled (the kernels then run the functions as Python)."""
    untyped = [] if numba.config.DISABLE_JIT else TYPING_VERDICTS.untyped(model, shapes)
    if not untyped:
        return
    if progress is not None:
        progress(Progress(0, 0, 0, 0, time.perf_counter() - t0, compiling="numba types the spec's functions"))
    try:
        check_calls([call for _, call in untyped])
    except numba.core.errors.NumbaError as e:
        raise compile_error(model.spec.name, e) from None
    TYPING_VERDICTS.remember(untyped, shapes)


def start_kernels(model: Model, mode: str, interpreter: Optional[InterpreterCompile], progress: ProgressFn,
                  t0: float) -> tuple[Any, Optional[BackgroundCompile], Optional[InterpreterCompile]]:
    """The kernels a run in compile ``mode`` starts with, the background compile if any, and
    ``interpreter`` if those kernels are the bytecode tier's, which then need
    ``Tiers.load_interpreter()`` once it is done (else it is stopped)."""
    builder: Optional[BackgroundCompile] = None
    if mode == "never":
        kernels: Any = InterpretedKernels(model)
    elif mode == "bytecode":
        kernels = first_tier_kernels(model)
    else:
        shapes = kernel_shapes(model)
        if mode != "now" and not is_compiled(shapes):
            kernels, builder = _first_tier(model, shapes, load_interpreter=interpreter is None)
        else:
            kernels = compile_now(model, shapes, progress, t0)
    if interpreter is not None and not isinstance(kernels, BytecodeKernels):
        interpreter.stop()
        interpreter = None
    return kernels, builder, interpreter


def _first_tier(model: Model, shapes: KernelShapes, load_interpreter: bool = True) -> tuple[Any, BackgroundCompile]:
    """The kernels to start with while ``shapes``' compile in the background: interpreted, or for
    a small layout whose table form (``codegen.write_kernel_module``: a few seconds to compile,
    about half as fast to run) is compiled already, that form. A small layout's background
    compile does its table form first, so that the run can take it meanwhile. Without
    ``load_interpreter`` (an installation's first run, whose helper compiles it), the bytecode
    tier's kernels are returned before their interpreter is loaded."""
    if uses_layout_table(model.layout):
        builder = BackgroundCompile(shapes)
    else:
        quick = kernel_shapes(model, table=True)
        if is_compiled(quick):
            type_spec_once(model, shapes)
            return Kernels(model, compile_in_process(quick)), BackgroundCompile(shapes)
        builder = BackgroundCompile([quick, shapes])
    try:
        return first_tier_kernels(model, load=load_interpreter), builder
    except BaseException:  # the caller never gets the builder to stop
        builder.stop()
        raise


def compile_now(model: Model, shapes: KernelShapes, progress: ProgressFn, t0: float) -> Kernels:
    """The compiled kernels, compiled in this process (each kernel's start told to ``progress``),
    once numba's typing has accepted the spec's functions (``type_spec_once``: before the compile,
    so that a refusal comes first)."""
    type_spec_once(model, shapes, progress, t0)

    def on_kernel(i: int, n: int, what: str) -> None:
        progress(Progress(0, 0, 0, 0, time.perf_counter() - t0, compiling=f"kernel {i + 1}/{n}: {what}"))

    try:
        module = compile_in_process(shapes, on_kernel)
    except numba.core.errors.NumbaError as e:
        raise compile_error(model.spec.name, e) from None
    except KeyError:
        raise_missing_field(model)
        raise
    return Kernels(model, module)


def raise_missing_field(model: Model) -> None:
    """numba's record typing raises a bare KeyError for a field the state lacks; its typing check
    (``check_spec_types``) turns it into numba's refusal of the spec's line: raise that."""
    try:
        check_spec_types(model)
    except numba.core.errors.NumbaError as e:
        raise compile_error(model.spec.name, e) from None


def first_tier_kernels(model: Model, load: bool = True) -> Any:
    """The bytecode tier (its interpreter loaded unless ``load`` is False), or the Python tier
    for a spec whose functions do not translate."""
    try:
        return BytecodeKernels(model, load=load)
    except Untranslatable as e:
        kernels = InterpretedKernels(model)
        kernels.why_python = str(e)
        return kernels


def interpret_budget(bytecode: bool = False) -> float:
    """``KRAFTCHECK_INTERPRET_S``, else INTERPRET_BUDGET_S (BYTECODE_BUDGET_S for the bytecode
    tier): seconds of the first tier before a run waits for its background compile."""
    text = os.environ.get("KRAFTCHECK_INTERPRET_S", "").strip()
    try:
        budget = float(text) if text else (BYTECODE_BUDGET_S if bytecode else INTERPRET_BUDGET_S)
    except ValueError:
        budget = -1.0
    if not budget >= 0:  # nan too, which no elapsed time would ever pass
        raise UsageError(f"KRAFTCHECK_INTERPRET_S must be a number of seconds of at least 0, not {text!r}")
    return budget


class Tiers:
    """The kernels a run explores with (and their chunk buffers), and the switch from the first
    tier to the compiled kernels while ``builder`` compiles them in the background.

    ``announce(compiling, meanwhile)`` sends a progress snapshot of the run saying so;
    ``report()`` one at the run's usual pace (while waiting); ``states_found()`` is the run's
    distinct count so far (for the observer)."""

    def __init__(self, model: Model, kernels: Any, builder: Optional[BackgroundCompile], chunk_states: int,
                 result: Result, announce: Callable[[Optional[str], str], None], report: Callable[[], None],
                 states_found: Callable[[], int], observer: Optional[RunObserver] = None) -> None:
        self.model, self.kernels, self.builder, self.result = model, kernels, builder, result
        self.chunk_states = chunk_states
        self.buffers = kernels.buffers(chunk_states)
        self.announce, self.report, self.states_found, self.observer = announce, report, states_found, observer
        # whether numba's verdict on the spec's functions is known (its refusal raised): the
        # kernels were compiled before the run, after numba typed the spec's functions
        # (``type_spec_once``), or it interprets throughout (compile "never"); else the typing
        # check (typing_check) tells, before any compiled form is taken, or the background
        # compile's failure
        self.spec_checked = builder is None or kernels.compiled
        self.interpret_budget = interpret_budget(isinstance(kernels, BytecodeKernels)) if builder is not None else 0.0
        self.waiting = False  # the first tier's time is up: waiting for the compile
        self.clock: Optional[Clock] = None  # the run's, set by the run when it starts its clock

    @property
    def compiling(self) -> Optional[str]:
        """What the background compile is doing, for a progress line (None: nothing compiles)."""
        return f"{self.builder.status}, {self.builder.elapsed:.0f} s" if self.builder else None

    @property
    def meanwhile(self) -> str:
        """What explores while the compile runs, for a progress line."""
        return "table form" if self.kernels.compiled else "waiting" if self.waiting else "interpreting"

    def load_interpreter(self, helper: InterpreterCompile) -> None:
        """An installation's first run, before it explores: numba types the spec's functions
        (needed before the answer anyway) while ``helper`` compiles the interpreter, which the
        bytecode tier then loads from numba's cache."""
        self.confirm_spec_compiles(meanwhile="numba types the spec's functions while the interpreter compiles")
        helper.wait()
        self.kernels.load_interpreter()

    def fall_back_to_compiled(self) -> bool:
        """The spec's code raised what only Python raises (``SpecRaised.python_only``: an error
        of the interpreted tier's, or of the spec's: numba refuses it too). Raise numba's error if
        numba refuses the spec; otherwise wait for the compiled kernels (past the run's time
        limit: the answer must not depend on the tier), take them and say True: the caller redoes
        its work with them. False when there are none to wait for (compiled already, or compile
        "never")."""
        if self.kernels.compiled or self.builder is None:
            return False
        self.confirm_spec_compiles()
        self.switch_when_compiled(wait=True)
        return True

    def confirm_spec_compiles(self, meanwhile: str = "explored; numba types the spec's functions before the answer") \
            -> None:
        """Before a run that interpreted gives its answer, and before it takes a compiled form:
        raise the compile error that ``--compile now`` would raise (``compile_error``) if numba
        refuses the spec's functions, and the SpecError of one whose return type is not boolean
        (which a compiled form, compiled or not, does not say): numba's type inference of the
        spec's functions, without compiling them (``typing_check``), or the background compile's
        failure."""
        if self.spec_checked:
            return
        builder = self.builder
        if builder.failed() and builder.ready_form() is None:  # else a form compiled: numba accepts the functions
            self._raise_compile_failure()
        untyped = TYPING_VERDICTS.untyped(self.model, builder.shapes)
        if not untyped:  # earlier runs typed every call
            self.spec_checked = True
            return
        self.announce(f"{builder.status}, {builder.elapsed:.0f} s", meanwhile)
        if self.observer is not None:
            self.observer.typing_spec()
        self.spec_checked = True  # the verdict, whatever it is, is asked for once
        try:
            check_calls([call for _, call in untyped])
        except numba.core.errors.NumbaError as e:
            raise compile_error(self.model.spec.name, e) from None
        except KraftcheckError:  # a function whose return type is not boolean
            raise
        except Exception:  # noqa: BLE001 - the check itself failed (numba's internals moved): the compile decides
            self.switch_when_compiled(wait=True)
        else:
            TYPING_VERDICTS.remember(untyped, builder.shapes)

    def switch_when_compiled(self, wait: bool = False) -> None:
        """Take each form of the compiled kernels once the background compile has it (between
        chunks, so nothing a chunk computed depends on which tier computed it); once the first
        tier's time is up, or with ``wait``, wait for the first form."""
        builder = self.builder
        if builder is None:
            return
        if not self.kernels.compiled and (wait or self.clock.elapsed >= self.interpret_budget):
            # typed while the compile goes on
            self.confirm_spec_compiles(meanwhile="numba types the spec's functions while the kernels compile")
            self._wait_for_compile(past_time_limit=wait)
        ready = builder.ready_form()
        using = getattr(self.kernels.module, "__name__", None) if self.kernels.compiled else None
        if ready is not None and ready.module_name != using:
            # compiled kernels explore only a spec whose functions numba has typed: the return
            # types are known there, not from a compile that succeeded (typing_check)
            self.confirm_spec_compiles()
            # both forms pack states into the same words, so the visited set and the levels
            # carry over from one to the other
            self.kernels = Kernels(self.model, compile_in_process(ready))  # loads from numba's cache
            # the compiled kernels' own buffers: the distinct-successor path places each part in
            # a region of them (Kernels.dense_start) that the interpreted tier's do not have
            self.buffers = self.kernels.buffers(self.chunk_states)
            self.result.compile_s = builder.ready.get(ready.module_name, builder.finished_s)
            if ready is builder.shapes:
                self.builder = None
            if self.observer is not None:
                self.observer.tier_switched(ready.module_name, self.states_found())
        elif builder.failed():
            self._raise_compile_failure()

    def _raise_compile_failure(self) -> None:
        """The background compile failed: raise its error, numba's own (it names the spec's line)
        from a compile here."""
        builder = self.builder
        changed = changed_since_import(builder.shapes.sources)
        if changed:  # the compile imported the file as saved since, and refused it
            raise SourcesChanged(changed)
        self.spec_checked = True  # the error raised here is numba's verdict
        try:
            compile_in_process(builder.shapes, processes=1)
        except numba.core.errors.NumbaError as e:
            raise compile_error(self.model.spec.name, e) from None
        except KeyError:
            raise_missing_field(self.model)
            raise
        raise SpecError(f"compiling the kernels failed in the background: {builder.error_text()[-2000:]}")

    def _wait_for_compile(self, past_time_limit: bool = False) -> None:
        """Leave the cores to the background compile until it has a form ready, fails, or the
        run's time limit passes (unless ``past_time_limit``)."""
        builder = self.builder
        builder.hurry()  # the run needs it now: no longer below everything else on the machine
        if self.observer is not None:
            self.observer.waiting_for_compile()
        self.waiting = True
        try:
            while builder.ready_form() is None and not builder.failed() and \
                    (past_time_limit or not self.clock.expired()):
                time.sleep(0.05)
                raise_if_stop_requested()
                self.report()
        finally:
            self.waiting = False
