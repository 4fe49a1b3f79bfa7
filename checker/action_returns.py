"""Whether an action function always returns a value: a static reading of its source.

An action returns True when it fires and False when it does not. One whose body can end
without a ``return`` (or that says a bare ``return``) gives None there, which every tier reads
as False: the action silently never fires on those states, and a check can then hold only
because part of the space was never reached. The model refuses such an action when it is built.
"""

from __future__ import annotations

import ast
import inspect
from typing import Callable, Optional

from kraftcheck.checker.writes import _flat_function


def _always_returns(body: list) -> bool:
    """Whether every path through ``body`` ends in a ``return`` or a ``raise``."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    if isinstance(last, ast.While) and isinstance(last.test, ast.Constant) and last.test.value is True:
        return not any(isinstance(n, ast.Break) for n in ast.walk(last))
    return False


def returns_nothing(fn: Callable) -> Optional[tuple[int, str, str]]:
    """Where ``fn`` may return nothing: (line, file, how), or None if every path returns a value
    (or the source cannot be read, which says nothing)."""
    func = _flat_function(fn)
    if func is None:
        return None
    py = getattr(fn, "py_func", fn)
    try:
        file, first = inspect.getsourcefile(py) or "?", inspect.getsourcelines(py)[1]
    except (OSError, TypeError):
        file, first = "?", 1
    for node in ast.walk(func):
        if isinstance(node, ast.Return) and node.value is None:
            return first + node.lineno - 1, file, "a bare return"
    if not _always_returns(func.body):
        last = func.body[-1]
        return first + getattr(last, "end_lineno", last.lineno) - 1, file, "its body can end without a return"
    return None
