"""Which fields of the successor an action can write: a static reading of its Python source.

The action kernels pack every successor, and most of an action's successor is its source state
unchanged (Two-Phase Commit's ``RMRcvAbortMsg`` sets one resource manager's state of thirteen
fields). Knowing what an action writes, a kernel packs only that over the source's packed words
and restores only that before the next instance; this module says what can be written, or that
it cannot tell (then the kernel packs and restores everything, as before).

The reading is conservative: a use of the successor it does not recognise makes it give up.
Recognised, in the action's own body and in the module-level helpers it hands ``t`` to (read the
same way, a few calls deep; a function or lambda defined in a body makes it give up):

* ``t.f = ...``, ``t.f += ...`` (also as a tuple target): field ``f`` is written, all of it;
* ``t.f[p] = ...``, ``t.f[p] += ...`` with ``p`` an action parameter the body never assigns and
  ``f`` one-dimensional: element ``p`` of ``f`` is written;
* ``t.f[...] = ...`` otherwise (an expression index, ``t.f[a][b]``): all of ``f``;
* ``t.f[i]`` read, ``f`` one-dimensional and ``i`` surely one integer (a literal, a parameter the
  body never assigns, a ``for i in range(...)`` variable, arithmetic on those), and ``t.g`` read,
  ``g`` scalar: not a write (the value read is an integer);
* ``t.f[x]`` read where it is at once compared or computed with (``t.f[b] == 2``,
  ``t.f[b] + 1``, a test), whatever ``x``: not a write (nothing keeps the value to write through);
* ``t.f`` read otherwise (an array handed to a call, aliased, ``len(t.f)``): all of ``f``, since
  what receives the array may write it;
* ``h(..., t, ...)``, ``t`` bare and positional, ``h`` a function of the module (not a name the
  body binds, a parameter or a variable, which may hold another function): what ``h`` writes
  through that parameter, an element counting as its whole field.

Anything else that names ``t`` (handing it by keyword or to something not a module's function,
reassigning it, an attribute that is not a field) means unknown. ``tests/test_writes.py`` checks the claims against what every
action of every spec actually writes on reachable states.
"""

from __future__ import annotations

import ast
import functools
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
    shapes = tuple((f.name, f.shape) for f in fields)
    key = (getattr(fn, "py_func", fn), tuple(param_counts))
    helpers = _HELPERS.setdefault(shapes, {})
    if key not in helpers:
        helpers[key] = _use(fn, fields, param_counts, 1, (), helpers)
    found = helpers[key]
    if found is None:
        return None
    whole, elements = found
    out: list[Write] = []
    for f in fields:
        if f.name in whole:
            out.append(Write(f.name))
        else:
            out += [Write(f.name, j) for name, j in sorted(elements) if name == f.name]
    return tuple(out)


def source_view_fields(fn: Callable, fields: Sequence[Field],
                       param_counts: Optional[Sequence[int]]) -> Optional[tuple[str, ...]]:
    """The fields of its source state ``s`` that ``fn(s, t, *params)`` (an action, or with no
    parameters a transition property; ``param_counts`` None: any function of ``s`` first, read as
    a helper, an invariant's or a constraint's) could write, read as this module reads ``t``: those it
    hands out as a view (aliased, kept, handed to a call), in the order of ``fields``; None if the
    reading cannot tell. A sure write to ``s`` is refused when the model is built
    (``source_writes``); a write through a view that reading does not follow is what a compiled
    kernel must look for, and only in these fields: an action that reads ``s`` only by scalars and
    elements it computes with at once gives ``()``, and its kernels compare nothing."""
    helpers = _HELPERS.setdefault(tuple((f.name, f.shape) for f in fields), {})
    found = _use(fn, fields, param_counts, 0, (), helpers)
    if found is None:
        return None
    whole, elements = found
    named = whole | {name for name, _ in elements}
    return tuple(f.name for f in fields if f.name in named)


# Where a value read from ``t`` is consumed at once (a comparison, arithmetic, the test of an
# ``if`` or ``while``): a view read there is not kept, so nothing is written through it. Not
# ``and``/``or`` or ``x if c else y``, which give back an operand itself.
_CONSUMING = (ast.Compare, ast.BinOp, ast.UnaryOp, ast.If, ast.While)

# What each action and each helper handed ``t`` writes, per set of fields (their names and shapes
# decide it): a model's actions share most helpers, and the kernels' sources are generated anew
# for every model built.
_HELPERS: dict = {}

# How many calls deep a helper handed ``t`` is read; past it the reading gives up.
HELPER_DEPTH = 12


def _use(fn: Callable, fields: Sequence[Field], param_counts: Optional[Sequence[int]], successor_index: int,
         stack: tuple, helpers: dict) -> Optional[tuple[set, set]]:
    """(fields written whole, (field, parameter) elements written) by ``fn`` with ``t`` its
    parameter ``successor_index``; ``param_counts`` None for a helper (then no parameter is an
    action's, and an element it writes counts as its whole field). None if it cannot tell.
    ``helpers`` remembers the helpers read."""
    py = getattr(fn, "py_func", fn)
    if py in stack or len(stack) > HELPER_DEPTH:
        return None
    if param_counts is None:
        key = (py, successor_index)
        if key not in helpers:
            helpers[key] = _read_use(fn, fields, None, successor_index, stack, helpers)
        return helpers[key]
    return _read_use(fn, fields, param_counts, successor_index, stack, helpers)


def _read_use(fn: Callable, fields: Sequence[Field], param_counts: Optional[Sequence[int]], successor_index: int,
              stack: tuple, helpers: dict) -> Optional[tuple[set, set]]:
    py = getattr(fn, "py_func", fn)
    func = _flat_function(fn)
    if func is None:
        return None
    args = func.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
        return None
    if param_counts is not None and len(args.args) != 2 + len(param_counts):
        return None
    if len(args.args) <= successor_index:
        return None
    successor = args.args[successor_index].arg
    params = {a.arg: j for j, a in enumerate(args.args[2:])} if param_counts is not None else {}
    by_name = {f.name: f for f in fields}
    assigned = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    assigned |= {n.name for n in ast.walk(func) if isinstance(n, ast.ExceptHandler) and n.name}
    if successor in assigned:
        return None
    local = _local_names(func)
    integers = _range_loop_variables(func) | (set(params) - assigned)
    parents = {child: node for node in ast.walk(func) for child in ast.iter_child_nodes(node)}
    whole: set[str] = set()
    elements: set[tuple[str, int]] = set()
    for node in ast.walk(func):
        if not (isinstance(node, ast.Name) and node.id == successor):
            continue
        attr = parents.get(node)
        if isinstance(attr, ast.Call) and node in attr.args and isinstance(attr.func, ast.Name):
            # ``t`` handed on, bare and positional, to a helper of the module: read the helper
            # (a name the body binds calls what it holds, not the module's function of that name)
            helper = None if attr.func.id in local else getattr(py, "__globals__", {}).get(attr.func.id)
            if helper is None or not callable(helper):
                return None
            inner = _use(helper, fields, None, attr.args.index(node), stack + (py,), helpers)
            if inner is None:
                return None
            whole |= inner[0] | {name for name, _ in inner[1]}
            continue
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
        if isinstance(sub, ast.Subscript) and sub.value is attr and isinstance(sub.ctx, ast.Load) \
                and isinstance(parents.get(sub), _CONSUMING):
            continue  # compared or computed with at once: whatever the index, nothing can write through it
        if not one_index:
            whole.add(field.name)  # a view of it, perhaps written through
        elif isinstance(sub.ctx, ast.Load):
            continue  # an element read
        elif (isinstance(sub.slice, ast.Name) and sub.slice.id in params and sub.slice.id not in assigned
              and param_counts[params[sub.slice.id]] <= field.shape[0]):
            elements.add((field.name, params[sub.slice.id]))
        else:
            whole.add(field.name)
    return whole, elements


def _flat_function(fn: Callable) -> Optional[ast.FunctionDef]:
    """The syntax tree of ``fn`` (a numba dispatcher is read through its ``py_func``), or None if
    its source cannot be read, is not one ``def``, or defines a function, lambda or class inside:
    their parameters could shadow the outer ones, and they could be handed ``t``."""
    return _parsed(getattr(fn, "py_func", fn))


@functools.lru_cache(maxsize=None)
def _parsed(py: Callable) -> Optional[ast.FunctionDef]:
    """``_flat_function`` of a Python function, parsed once (the trees are only read)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(py)))
    except (OSError, TypeError, SyntaxError):
        return None
    func = tree.body[0] if tree.body else None
    if not isinstance(func, ast.FunctionDef):
        return None
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    if any(isinstance(n, nested) for n in ast.walk(func) if n is not func):
        return None
    return func


def _local_names(func: ast.FunctionDef) -> set[str]:
    """The names ``func`` binds, its parameters and what its body assigns: a call through one of
    them calls what it holds (numba compiles a function held in a variable or handed as an
    argument), not the module's function that may bear the same name."""
    args = func.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]
    imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(func) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    return ({a.arg for a in params} | imported
            | {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)})


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


def may_decline_after_touching(fn: Callable, successor_index: int = 1, _depth: int = 0) -> bool:
    """Whether the action function ``fn(s, t, ...)`` could return something other than True after
    it has touched its successor ``t`` (its parameter number ``successor_index``). False only when
    its source shows that no path does: then an instance that declines has written nothing, and
    the kernels need not compare its successor with its source (``codegen.declined_dirty_expr``).
    The guide asks for exactly this shape (test the guard, then write), and most actions have it.

    The reading follows the body's paths statement by statement, remembering whether ``t`` has
    been mentioned (any mention counts as a touch). A ``return`` of anything but the constant
    True after a mention, or running off the end of the body after one, may decline after
    touching. Two uses of a module-level helper ``h`` of which the same holds (read the same
    way, a few calls deep) do not count as touching where it cannot have written: ``return h(...,
    t, ...)``, and a guard ``if [a or] not h(..., t, ...): return ...`` (h returned False, so it
    wrote nothing; past the guard it may have). Conservative: a loop, ``with`` or ``try`` that
    mentions ``t`` and holds a ``return``, a source that cannot be read, a nested function: it
    may."""
    func = _flat_function(fn)
    if func is None or len(func.args.args) <= successor_index or func.args.vararg:
        return True
    py = getattr(fn, "py_func", fn)  # its module's globals name the helpers it calls
    successor = func.args.args[successor_index].arg
    local = _local_names(func)

    def mentions(node: ast.AST) -> int:
        return sum(isinstance(n, ast.Name) and n.id == successor for n in ast.walk(node))

    def safe_call(node: ast.AST) -> bool:
        """``h(..., t, ...)``: t once, bare, positional; ``h`` cannot decline after touching it."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords):
            return False
        at = [k for k, a in enumerate(node.args) if isinstance(a, ast.Name) and a.id == successor]
        if len(at) != 1 or mentions(node) != 1 or _depth >= 4 or node.func.id in local:
            return False
        helper = getattr(py, "__globals__", {}).get(node.func.id)
        return helper is not None and not may_decline_after_touching(helper, at[0], _depth + 1)

    def guard_of_a_safe_call(test: ast.AST) -> bool:
        """``not h(...t...)`` or ``a or ... or not h(...t...)``, t nowhere else: the branch runs
        only where h was not called or returned False, so where it wrote nothing."""
        last = test.values[-1] if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else test
        if not (isinstance(last, ast.UnaryOp) and isinstance(last.op, ast.Not) and safe_call(last.operand)):
            return False
        return mentions(test) == 1

    class MayDecline(Exception):
        pass

    def run(body: list, touched: bool) -> tuple[bool, bool]:
        """Follow ``body`` from a state where ``t`` is (``touched``) or is not mentioned yet:
        (touched after it, whether every path through it returns)."""
        for stmt in body:
            if isinstance(stmt, ast.Return):
                value = stmt.value
                declines = not (isinstance(value, ast.Constant) and value.value is True)
                if declines and (touched or (value is not None and mentions(value) and not safe_call(value))):
                    raise MayDecline
                return True, True
            if isinstance(stmt, ast.If):
                if guard_of_a_safe_call(stmt.test):
                    into_body, into_else = touched, True
                else:
                    into_body = into_else = touched or bool(mentions(stmt.test))
                after_body, body_returns = run(stmt.body, into_body)
                after_else, else_returns = run(stmt.orelse, into_else)
                if body_returns and else_returns:
                    return True, True
                touched = (after_body and not body_returns) or (after_else and not else_returns)
                continue
            returns_inside = any(isinstance(n, ast.Return) for n in ast.walk(stmt))
            if returns_inside and (touched or mentions(stmt)):
                raise MayDecline  # a loop's next turn, a with or try: not followed, so it may
            if returns_inside:  # t not mentioned on any path through it: it returns untouched
                continue
            touched = touched or bool(mentions(stmt))
        return touched, False

    try:
        touched, returns = run(func.body, False)
    except MayDecline:
        return True
    return touched and not returns  # run off the end (None) after touching t


def source_line(fn: Callable, node: ast.AST, last: bool = False) -> tuple[int, str]:
    """The line (its last with ``last``) of ``node`` of ``fn``'s tree (``_flat_function``) in its
    file, and the file: the tree is parsed from the source that starts at the function's first
    line (its decorator's), which the code object knows."""
    code = getattr(fn, "py_func", fn).__code__
    line = (node.end_lineno or node.lineno) if last else node.lineno
    return code.co_firstlineno + line - 1, code.co_filename


# numpy's array methods that change the array they are called on
_IN_PLACE = ("fill", "sort", "partition", "put", "itemset", "resize")


def source_writes(fn: Callable, source_index: int = 0, _depth: int = 0,
                  _view_of: Optional[str] = None) -> Optional[tuple[str, int, str]]:
    """The first assignment to a field of ``fn``'s source state (its parameter ``source_index``,
    ``s``), in its own body or a module helper it hands ``s`` to bare (by position or keyword):
    (field, line, file), or None. Only what is surely such a write counts (``s.f = ...``,
    ``s.f[...] = ...``, ``s.f += ...``, also as a tuple target, and a field changed in place by
    one of numpy's methods, ``s.f.fill(0)``, ``np.copyto(s.f, ...)``, ``out=s.f``), also through a
    view of a field named in the body (``cells = s.f`` or ``row = s.f[i]``, then ``cells[k] = ...``
    or ``row.fill(0)``) or handed to a module helper that writes its parameter: the kernels read
    each source state from the level's packed words, while the first tiers hand an action the
    state itself, so a spec that writes ``s`` would be explored differently by each. A view that
    leaves the body otherwise (returned, stored, handed to a function not of the module), or a
    name also bound to something else (``x = x.copy()``; the reading does not follow the order of
    the statements), is not followed: only a sure write is refused. ``_view_of``: the parameter is a view of that field of the state, not the state."""
    py = getattr(fn, "py_func", fn)
    func = _flat_function(fn)
    if func is None or _depth > HELPER_DEPTH or len(func.args.args) <= source_index:
        return None
    local = _local_names(func)
    # the names that hold the state ("") or a view of one of its fields (the field's name)
    source = func.args.args[source_index].arg
    held = {source: _view_of or ""}

    def view_of(expr: ast.expr) -> Optional[str]:
        """The field ``expr`` is a view of (an element of it, maybe), "" for the state itself."""
        subscripted = False
        while isinstance(expr, ast.Subscript):
            expr, subscripted = expr.value, True
        if isinstance(expr, ast.Name) and expr.id in held:
            return None if subscripted and held[expr.id] == "" else held[expr.id]
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and held.get(expr.value.id) == "":
            return expr.attr
        return None

    # every binding of each name in the body: the value of ``name = value``, None for any other
    # (a loop's or a tuple's target, an import); ``cells += 1`` leaves an array bound as it was
    parents = {child: node for node in ast.walk(func) for child in ast.iter_child_nodes(node)}
    bindings: dict[str, list[Optional[ast.expr]]] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            parent = parents.get(node)
            if isinstance(parent, ast.AugAssign):
                continue
            whole = isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.targets[0] is node
            bindings.setdefault(node.id, []).append(parent.value if whole else None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                bindings.setdefault((a.asname or a.name).split(".")[0], []).append(None)
    if source in bindings:  # the parameter bound again in the body: it may no longer be the state or its view
        return None
    growing = True
    while growing:  # names bound only to views of one field, or to views of those, until no more are found
        growing = False
        for name, values in bindings.items():
            if name in held:
                continue
            fields = {view_of(v) if v is not None else None for v in values}
            if len(fields) == 1 and None not in fields:
                held[name] = fields.pop()
                growing = True

    def field_of(target: ast.expr, changed_whole: bool) -> Optional[str]:
        """The field a write to ``target`` changes: a subscript of a field or view, a field, or
        (``changed_whole``: changed in place) a view itself."""
        if isinstance(target, ast.Subscript) or changed_whole:
            field = view_of(target)
            return field or None
        if isinstance(target, ast.Attribute):
            return view_of(target) or None
        return None  # a name bound again: no write

    for node in ast.walk(func):
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = [(t, False) for t in node.targets]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            # ``cells += 1`` changes a view in place, but a name bound to ``s.n`` holds a number: a
            # name alone is not read as a write (the fields' shapes are not known here)
            targets = [(node.target, False)]
        if isinstance(node, ast.Call):  # an array changed in place: s.f.fill(0), np.copyto(s.f, ...), out=s.f
            changed = [node.func.value] if isinstance(node.func, ast.Attribute) and node.func.attr in _IN_PLACE else []
            if isinstance(node.func, ast.Attribute) and node.func.attr == "copyto" and node.args:
                changed.append(node.args[0])
            changed += [kw.value for kw in node.keywords if kw.arg == "out"]
            targets += [(t, True) for t in changed]
        for target, whole in targets:
            for part in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]):
                name = field_of(part, whole)
                if name is not None:
                    return (name, *source_line(fn, node))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in local:
            helper = getattr(py, "__globals__", {}).get(node.func.id)
            if not callable(helper) or getattr(helper, "py_func", helper) is py:
                continue
            handed = [(k, view_of(arg)) for k, arg in enumerate(node.args)]
            tree = _flat_function(helper) if node.keywords else None
            names = [a.arg for a in tree.args.args] if tree is not None else []
            handed += [(names.index(kw.arg), view_of(kw.value)) for kw in node.keywords if kw.arg in names]
            for k, field in handed:
                if field is None:
                    continue
                found = source_writes(helper, k, _depth + 1, field or None)
                if found is not None:
                    return found
    return None
