"""What a spec's functions return: a bool, on every path.

An action returns True when it fires and False when it does not; an invariant, a transition
property and a constraint return whether they hold. One whose body can end without a ``return``
(or that returns None, ``return`` alone included) gives None there, which every tier reads as
False: an action silently never fires on those states, a constraint leaves them out, and a check
can then hold only because part of the space was never reached. Any other value that is not a
bool (a tuple, a string) is read by its truth in Python and by whatever numba makes of it in the
compiled kernels, which need not agree. An integer's truth happens to be read alike by every
tier, but nothing tells a flag of 0 or 1 from a count returned by mistake (numba types both as an
integer), and every shipped and test spec returns bools: so an integer is refused too, with the
fix said (``x != 0``, ``bool(x)``). Python's bool and numpy's (an array element compared) are
bools. Every such function is held to one:

- the model refuses, when it is built, a function that may return nothing (``returns_nothing``)
  or returns a literal that is no bool (``returns_no_bool``: ``return (1, 2)``, ``"yes"``, ``1``);
- the tiers that run the functions as Python check each value (``not_a_bool``, after an identity
  test against True and False that costs next to nothing; ``bool_checked``);
- numba's typing of the functions (``typing_check``) refuses one whose return type is not
  boolean, before compiled kernels explore or a run gives its answer.

The bytecode tier reads a function's returns the same way (``always_returns``, ``returns_none``)
to know whether it may give None.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Optional, Sequence

import numpy as np

from kraftcheck.checker.errors import SpecError, defined_at
from kraftcheck.checker.writes import _flat_function, source_line

# what a spec's function may return: Python's bool and numpy's (a comparison of array elements)
BOOL_TYPES = (bool, np.bool_)
_LITERAL_KINDS = {int: "an integer", float: "a number", complex: "a number", str: "a string", bytes: "bytes"}
# literals that are surely no bool, as a return value (``returns_no_bool``), and what they are
_NO_BOOL_NODES = ((ast.Tuple, "a tuple"), (ast.List, "a list"), (ast.Dict, "a dict"), (ast.Set, "a set"),
                  (ast.ListComp, "a list"), (ast.SetComp, "a set"), (ast.DictComp, "a dict"),
                  (ast.GeneratorExp, "a generator"), (ast.JoinedStr, "a string"), (ast.Lambda, "a function"))


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


def _no_bool_literal(value: ast.expr) -> Optional[str]:
    """What the literal ``value`` is if it is surely no bool (None for a bool, or an expression
    whose value only running it tells)."""
    if isinstance(value, ast.Constant):
        if isinstance(value.value, bool) or value.value is None:  # None: returns_nothing's
            return None
        return _LITERAL_KINDS.get(type(value.value), f"a {type(value.value).__name__}")
    for kind, what in _NO_BOOL_NODES:
        if isinstance(value, kind):
            return what
    return None


def returns_no_bool(fn: Callable) -> Optional[tuple[int, str, str]]:
    """Where ``fn`` returns a literal that is no bool (a tuple, a string, a number...): (line,
    file, what it returns), or None (every literal it returns is a bool, or it returns computed
    values, which the tiers check as they run, or its source cannot be read)."""
    func = _flat_function(fn)
    if func is None:
        return None
    returns = sorted((n for n in ast.walk(func) if isinstance(n, ast.Return)), key=lambda n: n.lineno)
    for node in returns:  # the first in the source
        if node.value is not None:
            what = _no_bool_literal(node.value)
            if what is not None:
                line, file = source_line(fn, node)
                return line, file, f"return {ast.unparse(node.value)}, {what}"
    return None


def not_a_bool(value: Any, function: str, fn: Callable) -> bool:
    """``value``, which ``function`` (``fn``; "action Send", "invariant Safe"...) returned as
    Python, as a bool; unless it is one (``BOOL_TYPES``), a SpecError naming the function, its
    definition's line and what it returned. The tiers call it only for a value that is neither
    True nor False (``r is not True and r is not False``), so a Python bool costs no call."""
    if isinstance(value, BOOL_TYPES):
        return bool(value)
    raise no_bool_error(function, f"returned {_shown(value)} (defined at {defined_at(fn)})")


def bool_checked(function: str, fn: Callable) -> Callable:
    """``fn`` (``function`` of a spec, run as Python) with every value it returns checked to be a
    bool (``not_a_bool``): for the explorers that call it from many places, where one more call
    costs little beside the work of each (the reference explorer, trace stepping)."""
    def checked(*args: Any) -> Any:
        value = fn(*args)
        return value if value is True or value is False else not_a_bool(value, function, fn)
    checked.__wrapped__ = fn  # type: ignore[attr-defined]
    return checked


def no_bool_error(function: str, what: str) -> SpecError:
    """The one error for ``function`` ("action Send", "invariant Safe"...) giving something other
    than a bool: ``what`` it gave, and where ("returned (1, 2), a value of type tuple (defined at
    FILE:LINE)", "returns no bool (return 'yes', a string, at FILE:LINE)")."""
    kind = "action" if function.startswith("action ") and not function.startswith("action constraint ") else ""
    return SpecError(f"{function} {what}: it must return {bool_meaning(kind)}, a bool (a comparison, "
                     f"True or False; bool(x) or x != 0 for a number): any other value each tier may read its "
                     f"own way")


def bool_meaning(kind: str) -> str:
    """What a function of ``kind`` ("action", "invariant"...) returns."""
    return "True when it fires and False when it does not" if kind == "action" else \
        "True where it holds and False where it does not"


def _shown(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text}, a value of type {type(value).__name__}"
