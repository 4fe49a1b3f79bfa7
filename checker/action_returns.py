"""Whether an action function always returns a value: a static reading of its source.

An action returns True when it fires and False when it does not. One whose body can end
without a ``return`` (or that returns None, ``return`` alone included) gives None there, which
every tier reads as False: the action silently never fires on those states, and a check can then
hold only because part of the space was never reached. The model refuses such an action when it
is built. The bytecode tier reads a function's returns the same way (``always_returns``,
``returns_none``) to know whether it may give None.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional, Sequence

from kraftcheck.checker.writes import _flat_function, source_line


def always_returns(body: Sequence[ast.stmt]) -> bool:
    """Whether every path through ``body`` ends in a ``return`` or a ``raise``."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return always_returns(last.body) and always_returns(last.orelse)
    return False


def returns_none(node: ast.AST) -> bool:
    """Whether ``node`` is a ``return`` of None: ``return`` alone or ``return None``."""
    return isinstance(node, ast.Return) and (
        node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None))


def returns_nothing(fn: Callable) -> Optional[tuple[int, str, str]]:
    """Where ``fn`` may return nothing: (line, file, how), or None if every path returns a value
    (or the source cannot be read, which says nothing)."""
    func = _flat_function(fn)
    if func is None:
        return None
    for node in ast.walk(func):
        if returns_none(node):
            return (*source_line(fn, node), "a bare return" if node.value is None else "a return of None")
    if not always_returns(func.body):
        return (*source_line(fn, func.body[-1], last=True), "its body can end without a return")
    return None
