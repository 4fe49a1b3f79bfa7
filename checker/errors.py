"""Exceptions that carry a message meant for the user, not a traceback."""

from __future__ import annotations

from typing import Any, Optional


class KraftcheckError(Exception):
    """Base of every error kraftcheck reports to a user as one clear line."""


class UsageError(KraftcheckError):
    """Bad input from the user: unknown spec, bad parameter, contradictory options (exit 2)."""


class OverBudget(UsageError):
    """An analysis after the exploration would go past a limit the run was given (``option``:
    ``--max-memory`` or ``--max-states``): the run is incomplete (exit 3), as an exploration
    stopped by that limit, not in error."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


class SpecError(KraftcheckError):
    """A spec broke its contract: a value outside its field's domain, a malformed layout."""


class KraftcheckBug(KraftcheckError):
    """A bug of kraftcheck's own that can be said in one line (a kernel of its own that numba
    refuses): no verdict (exit 2), and not a SpecError, which would send the user to the spec."""


class KernelsDisagree(KraftcheckError):
    """The compiled kernels computed otherwise than the spec's functions run as Python, on a state
    the run audited (``explore.kernel_audit``): no verdict (exit 2), since the counts rest on them."""

    def __init__(self, spec: str, index: int | None, what: str, state: dict, cache: str,
                 kernels_file: str | None = None) -> None:
        super().__init__(spec, index, what)
        self.spec, self.index, self.what, self.state, self.cache = spec, index, what, state, cache
        self.kernels_file = kernels_file

    def __str__(self) -> str:
        on = "a state" if self.index is None else f"state {self.index}"
        return (f"the compiled kernels of spec {self.spec} disagree with its functions run as Python on {on}: "
                f"{self.what}; no verdict. Either the kernel cache ({self.cache}) or numba's "
                f"cache of the spec's functions (the *.nbi and *.nbc files in __pycache__ beside them) keeps "
                f"code compiled otherwise (run `kraftcheck cache clear`, remove those files and check again), or a "
                f"function of the spec computes otherwise under numba (an integer past int64 wraps there: keep "
                f"values within int64; an np.empty read before it is written holds other bytes there), or gives "
                f"another answer from one call to the next (random numbers, the clock), or this is a bug of "
                f"kraftcheck's: please report it with the spec. "
                f"The state: {self.state}" + (f"; the kernels: {self.kernels_file}" if self.kernels_file else ""))


# What Python raises on code numba compiles and runs (``s["name"]`` on the Python tier's states, a
# method its objects lack): the first tier's limit, not the spec's error on a state. Everything
# else a spec's function raises (ZeroDivisionError, IndexError, AssertionError, OverflowError, an
# exception of its own) is the spec's error on that state: numba's code raises it too, or computes
# on regardless (an index out of range is not checked), so no tier has an answer to give.
PYTHON_ONLY_ERRORS = (TypeError, AttributeError)


class SpecRaised(SpecError):
    """A spec's function raised on a state: the spec's error, whatever tier ran it (exit 2, no
    verdict). ``function`` says which ("action FillBig", "invariant Safe", "fields()"), ``error``
    what it raised, ``file``/``line`` the spec's line; ``at`` the state's row in the batch the
    tier was handed, ``state`` its fields as shown and ``path`` the steps (action, fields) from an
    initial state to it, where the explorer can rebuild them (``place``). ``python_only``: Python
    raised what numba's compiled code would not meet (``PYTHON_ONLY_ERRORS``): the engine's first
    tier then leaves the state to the compiled kernels."""

    def __init__(self, function: str, error: str, file: str | None = None, line: int | None = None,
                 python_only: bool = False, at: int | None = None, state: dict | None = None,
                 path: list | None = None) -> None:
        super().__init__(function, error)
        self.function, self.error, self.file, self.line = function, error, file, line
        self.python_only, self.at, self.state, self.path = python_only, at, state, path

    def place(self, state: dict | None, path: list | None = None) -> "SpecRaised":
        """Say which state it raised on (its fields as shown) and the steps to it: a list of
        (action text or None for an initial state, fields as shown)."""
        self.state, self.path = state, path
        return self

    def __str__(self) -> str:
        at = f" at {self.file}:{self.line}" if self.file else ""
        if self.python_only:
            advice = ("a spec's functions keep to what both tiers run, interpreted and compiled (integers, fields, "
                      "min/max, loops, @njit helpers: docs/writing-a-spec.md, 'Action functions'): fix that line")
        else:
            advice = ("a spec's error stops the run, with no verdict: fix that line (docs/writing-a-spec.md, "
                      "'Errors in a spec')")
        lines = [f"{self.function} raised {self.error}{at}; {advice}"]
        if self.path:
            lines.append("  on the last state of this path from an initial state:")
            for k, (action, fields) in enumerate(self.path, 1):
                lines.append(f"    {k}. {action or 'initial state'}: {_fields_text(fields)}")
        elif self.state is not None:
            lines.append(f"  on the state: {_fields_text(self.state)}")
        return "\n".join(lines)


def spec_raised(function: str, error: BaseException, at: int | None = None, compiled_too: bool = True) -> SpecRaised:
    """``function`` of a spec, run as Python, raised ``error``: the spec's line is the innermost
    frame of its traceback outside numpy and kraftcheck's own checker (which called it).
    ``compiled_too`` False: a function only Python runs (the spec's parameters, ``fields()``...),
    whose TypeError or AttributeError is its own error, not a tier's limit."""
    import os
    import traceback
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith(here) and f"{os.sep}numpy{os.sep}" not in f.filename]
    file, line = (frames[-1].filename, frames[-1].lineno) if frames else (None, None)
    # a name the state does not have is no field on any tier (numba's record has none either):
    # the spec's error at once, not the first tier's limit to wait out for the compiled kernels
    missing_field = isinstance(error, AttributeError) and type(getattr(error, "obj", None)).__name__ == "State"
    return SpecRaised(function, f"{type(error).__name__}: {error}", file, line,
                      python_only=compiled_too and isinstance(error, PYTHON_ONLY_ERRORS) and not missing_field,
                      at=at)


def _fields_text(fields: dict) -> str:
    return ", ".join(f"{name}={value}" for name, value in fields.items())


def _place(fn: Any) -> Optional[str]:
    """``FILE:LINE`` of ``fn``'s definition (a numba dispatcher's too); None for a callable
    without Python code."""
    code = getattr(getattr(fn, "py_func", fn), "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else None


def defined_at(fn: Any) -> str:
    """``FILE:LINE`` of ``fn``'s definition (a numba dispatcher's too), or ``(no source)``."""
    return _place(fn) or "(no source)"


def wrote_and_declined(action: str, function: Any = None) -> SpecError:
    """The one error every tier gives for an action that changed its successor ``t`` and then
    returned False: the compiled kernels would otherwise start the next instance from the written
    successor, a silently wrong answer, where the interpreted ones refuse. ``function``, the
    action's function, puts its file and line first (the tiers cannot tell which write it was)."""
    place = _place(function)
    where = f"{place}: " if place else ""
    return SpecError(f"{where}action {action} changed the successor but returned False: an action that does not fire "
                     "must leave t as it found it; test its guard before writing t")
