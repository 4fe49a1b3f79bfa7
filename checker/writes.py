"""Which fields of the successor an action can write: a static reading of its Python source.

The action kernels pack every successor, and most of an action's successor is its source state
unchanged (Two-Phase Commit's ``RMRcvAbortMsg`` sets one resource manager's state of thirteen
fields). Knowing what an action writes, a kernel packs only that over the source's packed words
and restores only that before the next instance; this module says what can be written, or that
it cannot tell (then the kernel packs and restores everything, as before).

The reading is conservative: a use of the successor it does not recognise makes it give up.
Recognised, in the action's own body (not in functions it calls; a function or lambda defined in
the body makes it give up):

* ``t.f = ...``, ``t.f += ...`` (also as a tuple target): field ``f`` is written, all of it;
* ``t.f[p] = ...``, ``t.f[p] += ...`` with ``p`` an action parameter the body never assigns and
  ``f`` one-dimensional: element ``p`` of ``f`` is written;
* ``t.f[...] = ...`` otherwise (an expression index, ``t.f[a][b]``): all of ``f``;
* ``t.f[i]`` read, ``f`` one-dimensional and ``i`` surely one integer (a literal, a parameter the
  body never assigns, a ``for i in range(...)`` variable, arithmetic on those), and ``t.g`` read,
  ``g`` scalar: not a write (the value read is an integer);
* ``t.f`` read otherwise (an array handed to a call, aliased, ``len(t.f)``): all of ``f``, since
  what receives the array may write it.

Anything else that names ``t`` (handing ``t`` itself to a helper, reassigning it, an attribute
that is not a field) means unknown. ``tests/test_writes.py`` checks the claims against what every
action of every spec actually writes on reachable states.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from kraftcheck.checker.spec import Field


@dataclass(frozen=True)
class Write:
    """One field an action may write: all of it (``param`` None) or the element indexed by the
    action's parameter number ``param``."""

    field: str
    param: Optional[int] = None


def action_writes(fn: Callable, fields: Sequence[Field], param_counts: Sequence[int]) -> Optional[tuple[Write, ...]]:
    """The fields (or elements) the action function ``fn(s, t, *params)`` may write into ``t``, in
    the order of ``fields``; None if its source does not say (see the module docstring).
    ``param_counts``: how many values each parameter takes (an element write needs them all to
    index the field)."""
    py = getattr(fn, "py_func", fn)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(py)))
    except (OSError, TypeError, SyntaxError):
        return None
    func = tree.body[0] if tree.body else None
    if not isinstance(func, ast.FunctionDef):
        return None
    args = func.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or len(args.args) != 2 + len(param_counts):
        return None
    successor = args.args[1].arg
    params = {a.arg: j for j, a in enumerate(args.args[2:])}
    by_name = {f.name: f for f in fields}
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    if any(isinstance(n, nested) for n in ast.walk(func) if n is not func):
        return None  # its parameters could shadow the action's, and it could be handed t
    assigned = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    assigned |= {n.name for n in ast.walk(func) if isinstance(n, ast.ExceptHandler) and n.name}
    if successor in assigned:
        return None
    integers = _range_loop_variables(func) | (set(params) - assigned)
    parents = {child: node for node in ast.walk(func) for child in ast.iter_child_nodes(node)}
    whole: set[str] = set()
    elements: set[tuple[str, int]] = set()
    for node in ast.walk(func):
        if not (isinstance(node, ast.Name) and node.id == successor):
            continue
        attr = parents.get(node)
        if not (isinstance(attr, ast.Attribute) and attr.value is node and attr.attr in by_name):
            return None
        field = by_name[attr.attr]
        if not isinstance(attr.ctx, ast.Load):
            whole.add(field.name)
            continue
        if not field.shape:
            continue  # a scalar read
        sub = parents.get(attr)
        one_index = (isinstance(sub, ast.Subscript) and sub.value is attr and len(field.shape) == 1
                     and _integer_index(sub.slice, integers))
        if not one_index:
            whole.add(field.name)  # a view of it, perhaps written through
        elif isinstance(sub.ctx, ast.Load):
            continue  # an element read
        elif (isinstance(sub.slice, ast.Name) and sub.slice.id in params and sub.slice.id not in assigned
              and param_counts[params[sub.slice.id]] <= field.shape[0]):
            elements.add((field.name, params[sub.slice.id]))
        else:
            whole.add(field.name)
    out: list[Write] = []
    for f in fields:
        if f.name in whole:
            out.append(Write(f.name))
        else:
            out += [Write(f.name, j) for name, j in sorted(elements) if name == f.name]
    return tuple(out)


def _range_loop_variables(func: ast.FunctionDef) -> set[str]:
    """Names assigned only as the target of ``for name in range(...)``: integers."""
    targets = [n.target for n in ast.walk(func)
               if isinstance(n, ast.For) and isinstance(n.target, ast.Name) and isinstance(n.iter, ast.Call)
               and isinstance(n.iter.func, ast.Name) and n.iter.func.id == "range"]
    loop_targets = {id(t) for t in targets}
    other = {n.id for n in ast.walk(func)
             if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and id(n) not in loop_targets}
    return {t.id for t in targets} - other


def _integer_index(index: ast.expr, integers: set[str]) -> bool:
    """Whether a subscript's index is surely one integer (so the subscript is an element, not a
    view): an int literal, a name known to hold an integer, or arithmetic on such."""
    if isinstance(index, ast.Constant):
        return isinstance(index.value, int) and not isinstance(index.value, bool)
    if isinstance(index, ast.Name):
        return index.id in integers
    if isinstance(index, ast.UnaryOp):
        return _integer_index(index.operand, integers)
    if isinstance(index, ast.BinOp):
        return _integer_index(index.left, integers) and _integer_index(index.right, integers)
    return False
