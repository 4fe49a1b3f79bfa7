"""A spec's functions translated to bytecode for the interpreter compiled once per installation.

As Python (``explore.interpreted``), the first tier of a run whose kernels are not compiled yet
is slower than TLC (bench/RESULTS.md, "A first tier in bytecode"). This module reads
each action, invariant, constraint and transition property from its Python source (``ast``) and
translates it, with every ``@njit`` helper it calls inlined, into a program of
``kernels.bytecode``'s instructions over the unpacked state (space 0) and successor (space 1).
Translating takes milliseconds and compiles nothing; the interpreter is compiled once per
installation.

What translates is what a spec's functions are made of (docs/writing-a-spec.md, "Action
functions"): integers and booleans, fields read (``s.f``, ``s.g[i, j]``, ``s.g[i][j]``) and
written (``t.f = ...``, ``t.g[i] += ...``), ``len`` and ``.shape`` of array fields, the operators,
``min``/``max``/``abs``, ``if``/``while``/``for ... in range(...)`` with ``break`` and ``continue``,
helpers (inlined, with their defaults and keyword arguments, returning a value, a tuple of values
or nothing), module-level integer constants, and ``raise``/``assert`` (which leave the state to
Python). Anything else (a slice, numpy's methods, a float, a recursive helper) raises
``Untranslatable`` naming it, and the run explores with the Python tier instead; at run time a
program stops (``FAILED``) wherever Python's integers would behave otherwise, and the tier redoes
that state in Python. So the answer is always the Python tier's (``tests/test_bytecode.py``).
"""

from __future__ import annotations

import ast
import inspect
import operator
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from kraftcheck.checker.action_returns import always_returns, returns_none
from kraftcheck.checker.kernels import bytecode as vm
from kraftcheck.checker.layout import Layout


class Untranslatable(Exception):
    """A function of the spec uses something the bytecode does not have (the message says what
    and where); the Python tier runs it instead."""


@dataclass(frozen=True)
class Const:
    value: int
    maybe_bool: bool = field(default=False, compare=False)  # see Translator.bool_names


@dataclass(frozen=True)
class Reg:
    r: int
    maybe_bool: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class StateRef:
    """``s`` (space 0) or ``t`` (space 1) as a whole."""
    space: int


@dataclass(frozen=True)
class ArrayRef:
    """An array field, or a part of one left after some indices: its first element's flat
    position (a constant or a register), the axes left and their strides."""
    space: int
    field: Any
    offset: Union[Const, Reg]
    shape: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True)
class TupleValue:
    items: tuple


class _NoneValue:
    pass


NONE = _NoneValue()
Value = Union[Const, Reg, StateRef, ArrayRef, TupleValue, _NoneValue]

_BINARY = {ast.Add: (vm.ADD, operator.add), ast.Sub: (vm.SUB, operator.sub), ast.Mult: (vm.MUL, operator.mul),
           ast.FloorDiv: (vm.FLOORDIV, operator.floordiv), ast.Mod: (vm.MOD, operator.mod),
           ast.LShift: (vm.LSHIFT, operator.lshift), ast.RShift: (vm.RSHIFT, operator.rshift),
           ast.BitAnd: (vm.BITAND, operator.and_), ast.BitOr: (vm.BITOR, operator.or_),
           ast.BitXor: (vm.BITXOR, operator.xor), ast.Pow: (vm.POW, operator.pow)}
_COMPARE = {ast.Eq: (vm.EQ, operator.eq), ast.NotEq: (vm.NE, operator.ne), ast.Lt: (vm.LT, operator.lt),
            ast.LtE: (vm.LE, operator.le), ast.Gt: (vm.GT, operator.gt), ast.GtE: (vm.GE, operator.ge)}
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class Label:
    """A place in the code that jumps go to, placed once."""

    def __init__(self) -> None:
        self.pc: Optional[int] = None


class Assembler:
    """The code of every program of a model, in one array (jumps are absolute)."""

    def __init__(self) -> None:
        self.code: list[list[Any]] = []
        self.tables: list[int] = []  # memory space 2: the integer arrays of module globals
        self._table_at: dict[int, tuple[Any, int]] = {}
        self.nregs = 0
        self._next = 0

    def start_program(self) -> int:
        self._next = 0  # programs run one at a time: each reuses the registers from 0
        return len(self.code)

    def reg(self) -> Reg:
        r = Reg(self._next)
        self._next += 1
        self.nregs = max(self.nregs, self._next)
        return r

    def emit(self, op: int, a: Any = 0, b: Any = 0, c: Any = 0) -> None:
        self.code.append([op, a, b, c])

    def place(self, label: Label) -> None:
        label.pc = len(self.code)

    def table(self, array: np.ndarray) -> int:
        """Where a global integer array starts in space 2 (appended once)."""
        known = self._table_at.get(id(array))
        if known is None or known[0] is not array:
            known = (array, len(self.tables))
            self.tables.extend(int(x) for x in array.reshape(-1))
            self._table_at[id(array)] = known
        return known[1]

    def array(self) -> np.ndarray:
        out = np.zeros((max(1, len(self.code)), 4), np.int64)
        out[:, 0] = vm.FAIL
        for i, ins in enumerate(self.code):
            out[i] = [x.pc if isinstance(x, Label) else x for x in ins]
        return out


@dataclass
class _Function:
    """A Python function's parsed body and what the translation needs to know of it."""
    fn: Callable
    tree: ast.FunctionDef
    assigned: dict[str, int]  # how many times each name is bound in the body
    may_return_none: bool
    bool_names: Optional[set] = None  # the locals that may hold a bool (``_bool_names``)
    return_bools: Optional[tuple] = None  # per place of what it returns (one, or a tuple's), may it be a bool


_parsed: dict[int, _Function] = {}


def _python(fn: Callable) -> Callable:
    return getattr(fn, "py_func", fn)


def _where(fn: Callable, node: Optional[ast.AST] = None) -> str:
    code = fn.__code__
    line = code.co_firstlineno + (node.lineno - 1 if node is not None and hasattr(node, "lineno") else 0)
    return f"{code.co_filename}:{line} ({fn.__name__})"


def _parse(fn: Callable) -> _Function:
    py = _python(fn)
    key = id(py)
    if key in _parsed and _parsed[key].fn is py:
        return _parsed[key]
    if not inspect.isfunction(py):
        raise Untranslatable(f"{fn!r} is not a Python function")
    if py.__code__.co_freevars:
        raise Untranslatable(f"{_where(py)} is a closure")
    try:
        source = textwrap.dedent(inspect.getsource(py))
    except (OSError, TypeError) as e:
        raise Untranslatable(f"{py.__name__}: no source ({e})") from None
    module = ast.parse(source)
    tree = module.body[0]
    if not isinstance(tree, ast.FunctionDef):
        raise Untranslatable(f"{_where(py)} is not a def")
    args = tree.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        raise Untranslatable(f"{_where(py)} takes *args, **kwargs or keyword-only arguments")
    assigned: dict[str, int] = {}
    none = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned[node.id] = assigned.get(node.id, 0) + 1
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            assigned[node.target.id] = assigned.get(node.target.id, 0) + 1
        elif isinstance(node, (ast.FunctionDef, ast.Lambda, ast.ClassDef)) and node is not tree:
            raise Untranslatable(f"{_where(py, node)} defines a function or class inside")
        elif returns_none(node):
            none = True
    parsed = _Function(py, tree, assigned, none or not always_returns(tree.body))
    _parsed[key] = parsed
    return parsed


# Bools. Python's bool and numpy's (a comparison of array elements, np.int64, gives np.bool_)
# compute alike with integers, but not with each other: np.True_ + np.True_ is True (a logical
# or), np.True_ + True too, ~np.True_ is False, -np.True_ raises. The bytecode holds a bool as 0
# or 1, so an operation whose two operands may both be bools (or a unary minus or ~ of one) does
# not translate. What may be a bool is read from the source, conservatively: comparisons, not,
# bool(), True and False, and what passes one on (and/or, if-else, min/max/abs, & | ^ of two, a
# local assigned one, a helper that may return one).
_BOOL_PASSING = (ast.BitAnd, ast.BitOr, ast.BitXor)
_INTEGER_BUILTINS = ("len", "int", "range")
_bools_pending: set = set()  # helpers whose returns are being read (recursion: assume a bool)


def _maybe_bool(node: Optional[ast.AST], names: set, fn: Callable) -> bool:
    if node is None:
        return False
    if isinstance(node, (ast.Compare,)) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
        return True
    if isinstance(node, ast.Constant):
        return isinstance(node.value, bool)
    if isinstance(node, ast.Name):
        if node.id in names:
            return True
        return isinstance(fn.__globals__.get(node.id), (bool, np.bool_))
    if isinstance(node, ast.BoolOp):
        return any(_maybe_bool(v, names, fn) for v in node.values)
    if isinstance(node, ast.IfExp):
        return _maybe_bool(node.body, names, fn) or _maybe_bool(node.orelse, names, fn)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.UAdd) and _maybe_bool(node.operand, names, fn)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, _BOOL_PASSING) and _maybe_bool(node.left, names, fn) and \
            _maybe_bool(node.right, names, fn)
    if isinstance(node, ast.Tuple):
        return any(_maybe_bool(e, names, fn) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name in _INTEGER_BUILTINS:
            return False
        if name in ("bool",):
            return True
        if name in ("min", "max", "abs"):
            return any(_maybe_bool(a, names, fn) for a in node.args)
        return any(_call_bools(node, fn, 1))
    return False


def _call_bools(node: ast.Call, fn: Callable, width: int) -> tuple:
    """Per place of what the helper call ``node`` (in ``fn``) returns, may it be a bool."""
    helper = fn.__globals__.get(node.func.id) if isinstance(node.func, ast.Name) else None
    if helper is None or not callable(helper):
        return (True,) * width
    try:
        flags = _return_bools(_parse(helper))
    except Untranslatable:
        return (True,) * width
    return flags if flags is not None and len(flags) >= width else (True,) * max(width, 1)


def _bool_names(func: "_Function") -> set:
    """The locals of ``func`` that may hold a bool: assigned one anywhere (to a fixpoint)."""
    if func.bool_names is not None:
        return func.bool_names
    names: set = set()
    while True:
        before = len(names)
        for node in ast.walk(func.tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and _maybe_bool(node.value, names, func.fn):
                        names.add(target.id)
                    elif isinstance(target, (ast.Tuple, ast.List)):
                        width = len(target.elts)
                        if isinstance(node.value, ast.Tuple) and len(node.value.elts) == width:
                            flags = [_maybe_bool(v, names, func.fn) for v in node.value.elts]
                        elif isinstance(node.value, ast.Call):
                            flags = list(_call_bools(node.value, func.fn, width))
                        else:
                            flags = [True] * width
                        for t, flag in zip(target.elts, flags):
                            if isinstance(t, ast.Name) and flag:
                                names.add(t.id)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and \
                    isinstance(node.op, _BOOL_PASSING) and _maybe_bool(node.value, names, func.fn):
                names.add(node.target.id)
        if len(names) == before:
            break
    func.bool_names = names
    return names


def _return_bools(func: "_Function") -> Optional[tuple]:
    """Per place of what ``func`` returns (a value: one place; a tuple: its places), may it be a
    bool; None while it is being read (a recursion: every place may be)."""
    if func.return_bools is not None:
        return func.return_bools
    key = id(func)
    if key in _bools_pending:
        return None
    _bools_pending.add(key)
    try:
        names = _bool_names(func)
        flags: list = []
        for n in ast.walk(func.tree):
            if not isinstance(n, ast.Return) or n.value is None:
                continue
            if isinstance(n.value, ast.Tuple):
                these = [_maybe_bool(e, names, func.fn) for e in n.value.elts]
            elif isinstance(n.value, ast.Call):
                these = list(_call_bools(n.value, func.fn, 1))
            else:
                these = [_maybe_bool(n.value, names, func.fn)]
            flags += [False] * (len(these) - len(flags))
            flags = [a or b for a, b in zip(flags, these + [True] * (len(flags) - len(these)))]
    finally:
        _bools_pending.discard(key)
    func.return_bools = tuple(flags)
    return func.return_bools


class _Frame:
    """One function being translated (inlined or not): its names and where its returns go."""

    def __init__(self, func: _Function, names: dict[str, Value], result: Optional[list[Reg]], end: Optional[Label]):
        self.func = func
        self.names = names
        self.result = result  # registers of an inlined function's value; None at the top
        self.end = end
        self.loops: list[tuple[Label, Label]] = []  # (continue, break)
        self.width: Optional[int] = None  # what its returns give: a value (0) or a tuple of width
        # the local names surely assigned on every path to here (None: no path reaches here); a
        # read of any other local would raise in Python (UnboundLocalError) and read a register
        # left by another state here, so it does not translate
        self.defined: Optional[set] = set(names)


class Translator:
    """Translates functions of one model into programs of one ``Assembler``."""

    def __init__(self, layout: Layout, asm: Assembler) -> None:
        self.layout = layout
        self.asm = asm
        self.fields = {f.name: f for f in layout.fields}
        self.writable: tuple[int, ...] = ()
        self.fold_successor_consts = True
        self.wrote_a_const = False
        self.returns_bool = False
        self.stack: list[_Frame] = []

    # -- programs
    def program(self, fn: Callable, states: Sequence[int], params: int = 0, writable: tuple[int, ...] = (),
                returns_bool: bool = False) -> tuple[int, list[int]]:
        """Translate ``fn(*states, *params)`` (states given as spaces) into a program: its start
        and the registers of its parameters. With ``returns_bool`` (a spec's action or check), a
        return of a value that is surely no bool (a number, a field) does not translate: the
        bytecode would read it as its truth, where the Python tier refuses it
        (``action_returns.not_a_bool``)."""
        self.returns_bool = returns_bool
        func = _parse(fn)
        args = [a.arg for a in func.tree.args.args]
        if len(args) != len(states) + params:
            raise Untranslatable(f"{_where(func.fn)} takes {len(args)} arguments, not {len(states) + params}")
        for fold_successor_consts in (True, False):
            start = self.asm.start_program()
            self.fold_successor_consts = fold_successor_consts
            self.wrote_a_const = False
            param_regs = self._program(func, args, states, writable)
            if not (self.wrote_a_const and fold_successor_consts):
                return start, param_regs
            # it writes a Const field of the successor (an error, unless it writes it back): the
            # successor's Const fields are read as written, not as their value
            del self.asm.code[start:]
        raise AssertionError("unreachable: the second pass returns")

    def _program(self, func: _Function, args: list[str], states: Sequence[int], writable: tuple[int, ...]
                 ) -> list[int]:
        self.writable = writable
        names: dict[str, Value] = {}
        for name, space in zip(args, states):
            if func.assigned.get(name):
                raise Untranslatable(f"{_where(func.fn)} assigns its state argument {name}")
            names[name] = StateRef(space)
        param_regs = []
        for name in args[len(states):]:
            r = self.asm.reg()
            names[name] = r
            param_regs.append(r.r)
        frame = _Frame(func, names, None, None)
        self.stack = [frame]
        self.block(func.tree.body)
        zero = self.asm.reg()
        self.asm.emit(vm.CONST, zero.r, 0)  # falling off the end returns None: false
        self.asm.emit(vm.RET, zero.r)
        return param_regs

    @property
    def frame(self) -> _Frame:
        return self.stack[-1]

    def fail(self, node: Optional[ast.AST], what: str) -> Untranslatable:
        return Untranslatable(f"{_where(self.frame.func.fn, node)}: {what}")

    # -- values
    def reg_of(self, v: Value, node: ast.AST) -> Reg:
        """``v`` in a register (constants loaded into a fresh one)."""
        if isinstance(v, Reg):
            return v
        if isinstance(v, Const):
            r = self.asm.reg()
            self.asm.emit(vm.CONST, r.r, self.int64(v, node))
            return r
        raise self.fail(node, "an array, a state, a tuple or None used as a number")

    def int64(self, v: Const, node: ast.AST) -> int:
        """A constant's value, which must fit the registers (Python's would not wrap)."""
        if not INT64_MIN <= v.value <= INT64_MAX:
            raise self.fail(node, f"the integer {v.value}, past 64 bits")
        return v.value

    def scalar(self, v: Value, node: ast.AST) -> Union[Const, Reg]:
        if isinstance(v, (Const, Reg)):
            return v
        raise self.fail(node, "an array, a state, a tuple or None used as a number")

    # -- statements
    def block(self, body: Sequence[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            raise self.fail(node, f"a {type(node).__name__} statement")
        method(node)

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant):
            return  # a docstring
        if isinstance(node.value, ast.Call):
            self.call(node.value, discard=True)
        else:
            self.expr(node.value)

    def stmt_Raise(self, node: ast.Raise) -> None:
        self.asm.emit(vm.FAIL)  # Python raises it: the tier redoes the state in Python
        self.frame.defined = None

    def define(self, name: str) -> None:
        if self.frame.defined is not None:
            self.frame.defined.add(name)

    @staticmethod
    def _meet(a: Optional[set], b: Optional[set]) -> Optional[set]:
        """The names surely assigned after two paths join."""
        if a is None:
            return None if b is None else set(b)
        return set(a) if b is None else a & b

    def stmt_Assert(self, node: ast.Assert) -> None:
        ok = Label()
        test = self.expr(node.test)
        if isinstance(test, Const):
            if not test.value:
                self.asm.emit(vm.FAIL)
                self.frame.defined = None
            return
        self.asm.emit(vm.JNZ, self.reg_of(test, node).r, ok)
        self.asm.emit(vm.FAIL)
        self.asm.place(ok)

    def stmt_Return(self, node: ast.Return) -> None:
        frame = self.frame
        value = NONE if node.value is None else self.expr(node.value)
        if frame.result is None:  # the program's own function
            if value is NONE:
                value = Const(0)
            elif self.returns_bool and isinstance(value, (Const, Reg)) and not value.maybe_bool:
                raise self.fail(node, "returns a value that is no bool")
            self.asm.emit(vm.RET, self.reg_of(value, node).r)
            frame.defined = None
            return
        if value is not NONE:
            items = value.items if isinstance(value, TupleValue) else (value,)
            if frame.width is None:  # the first return says: a value, or a tuple of how many
                frame.width = len(items) if isinstance(value, TupleValue) else 0
                frame.result.extend(self.asm.reg() for _ in items)
            elif frame.width != (len(items) if isinstance(value, TupleValue) else 0):
                raise self.fail(node, "returns values of different shapes")
            for r, item in zip(frame.result, items):
                self.move(r, item, node)
        self.asm.emit(vm.JMP, frame.end)
        frame.defined = None

    def move(self, r: Reg, value: Value, node: ast.AST) -> None:
        value = self.scalar(value, node)
        if isinstance(value, Const):
            self.asm.emit(vm.CONST, r.r, self.int64(value, node))
        elif value != r:
            self.asm.emit(vm.MOV, r.r, value.r)

    def stmt_Assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value, node)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return
        self.assign(node.target, self.expr(node.value), node)

    def assign(self, target: ast.expr, value: Value, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.bind(target.id, value, node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, TupleValue) or len(value.items) != len(target.elts):
                raise self.fail(node, "a tuple assignment of something that is not a tuple of as many values")
            # every value is read before any is assigned (``a, b = b, a``)
            held = []
            for item in value.items:
                item = self.scalar(item, node)
                if isinstance(item, Reg):
                    copy = self.asm.reg()
                    self.asm.emit(vm.MOV, copy.r, item.r)
                    item = copy
                held.append(item)
            for t, item in zip(target.elts, held):
                self.assign(t, item, node)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            space, address = self.element(target, store=True)
            self.store(space, address, self.scalar(value, node), target)
        else:
            raise self.fail(node, f"an assignment to a {type(target).__name__}")

    def bind(self, name: str, value: Value, node: ast.AST) -> None:
        frame = self.frame
        self.define(name)
        if isinstance(value, (StateRef, ArrayRef)):
            if frame.func.assigned.get(name, 0) != 1 or name in frame.names:
                raise self.fail(node, f"{name} names an array or a state and is assigned more than once")
            frame.names[name] = value
            return
        if isinstance(value, TupleValue) or value is NONE:
            raise self.fail(node, f"{name} is assigned a tuple or None")
        current = frame.names.get(name)
        if current is None and isinstance(value, Const) and frame.func.assigned.get(name, 0) == 1:
            frame.names[name] = value  # a name bound once to a constant is that constant
            return
        if not isinstance(current, Reg):
            if current is not None:
                raise self.fail(node, f"{name} is reassigned after naming an array, a state or a constant")
            current = self.asm.reg()
            frame.names[name] = current
        self.move(current, value, node)

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        op = _BINARY.get(type(node.op))
        if op is None:
            raise self.fail(node, f"the operator {type(node.op).__name__}")
        target = node.target
        if isinstance(target, ast.Name):
            current = self.lookup(target.id, target)
            if not isinstance(current, Reg):
                raise self.fail(node, f"{target.id} augmented before it holds a number")
            value = self.scalar(self.expr(node.value), node)
            self.asm.emit(op[0], current.r, current.r, self.reg_of(value, node).r)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            space, address = self.element(target, store=True)
            old = self.load(space, address)
            value = self.scalar(self.expr(node.value), node)
            new = self.binary(op, old, value, node)
            self.store(space, address, new, target)
        else:
            raise self.fail(node, f"an augmented assignment to a {type(target).__name__}")

    def stmt_If(self, node: ast.If) -> None:
        test = self.expr(node.test)
        if isinstance(test, Const):
            self.block(node.body if test.value else node.orelse)
            return
        frame = self.frame
        other, end = Label(), Label()
        self.asm.emit(vm.JZ, self.reg_of(test, node).r, other)
        before = None if frame.defined is None else set(frame.defined)
        self.block(node.body)
        after_body, frame.defined = frame.defined, before
        if node.orelse:
            self.asm.emit(vm.JMP, end)
        self.asm.place(other)
        self.block(node.orelse)
        frame.defined = self._meet(after_body, frame.defined)
        self.asm.place(end)

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.fail(node, "a while loop with an else")
        top, end = Label(), Label()
        self.asm.place(top)
        test = self.expr(node.test)
        if isinstance(test, Const):
            if not test.value:
                return
        else:
            self.asm.emit(vm.JZ, self.reg_of(test, node).r, end)
        frame = self.frame
        before = None if frame.defined is None else set(frame.defined)
        frame.loops.append((top, end))
        self.block(node.body)
        frame.loops.pop()
        frame.defined = before  # the body may not run: what it assigns is not surely assigned after
        self.asm.emit(vm.JMP, top)
        self.asm.place(end)

    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.fail(node, "a for loop with an else")
        if not isinstance(node.target, ast.Name):
            raise self.fail(node, "a for loop whose target is not one name")
        it = node.iter
        over: Optional[ArrayRef] = None
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" \
                and self.lookup(it.func.id, it) is range and not it.keywords and 1 <= len(it.args) <= 3:
            bounds = [self.scalar(self.expr(a), it) for a in it.args]
            if any(b.maybe_bool for b in bounds):
                raise self.fail(node, "a range() bound that may be a bool")
            start, stop, step = (Const(0), bounds[0], Const(1)) if len(bounds) == 1 else \
                (bounds[0], bounds[1], bounds[2] if len(bounds) == 3 else Const(1))
            if not isinstance(step, Const) or step.value == 0:
                raise self.fail(node, "a range whose step is not a nonzero constant")
        else:
            value = self.expr(it)
            if not isinstance(value, ArrayRef):
                raise self.fail(node, "a for loop over something other than range() or an array field")
            over = value
            start, stop, step = Const(0), Const(value.shape[0]), Const(1)
        counter = self.asm.reg()
        self.move(counter, start, node)
        limit = stop if isinstance(stop, Const) else self.copy(stop)  # range() reads its bounds once
        top, advance, end = Label(), Label(), Label()
        frame = self.frame
        before = None if frame.defined is None else set(frame.defined)
        self.asm.place(top)
        more = self.asm.reg()
        self.asm.emit(vm.LT if step.value > 0 else vm.GT, more.r, counter.r, self.reg_of(limit, node).r)
        self.asm.emit(vm.JZ, more.r, end)
        if over is None:
            self.bind_loop(node.target.id, counter, node)
        else:
            item = self.subscript(over, counter, node)
            if not isinstance(item, _Element):
                raise self.fail(node, "a for loop over an array of more than one axis")
            self.bind_loop(node.target.id, self.read(item), node)
        frame.loops.append((advance, end))
        self.block(node.body)
        frame.loops.pop()
        frame.defined = before  # the body may not run: its names, the loop's own included, neither
        self.asm.place(advance)
        self.asm.emit(vm.ADD, counter.r, counter.r, self.reg_of(step, node).r)
        self.asm.emit(vm.JMP, top)
        self.asm.place(end)

    def bind_loop(self, name: str, value: Value, node: ast.AST) -> None:
        frame = self.frame
        self.define(name)
        current = frame.names.get(name)
        if current is None:
            current = self.asm.reg()
            frame.names[name] = current
        elif not isinstance(current, Reg):
            raise self.fail(node, f"loop variable {name} also names an array, a state or a constant")
        self.move(current, value, node)

    def copy(self, v: Reg) -> Reg:
        r = self.asm.reg()
        self.asm.emit(vm.MOV, r.r, v.r)
        return r

    def stmt_Break(self, node: ast.Break) -> None:
        if not self.frame.loops:
            raise self.fail(node, "break outside a loop")
        self.asm.emit(vm.JMP, self.frame.loops[-1][1])
        self.frame.defined = None

    def stmt_Continue(self, node: ast.Continue) -> None:
        if not self.frame.loops:
            raise self.fail(node, "continue outside a loop")
        self.asm.emit(vm.JMP, self.frame.loops[-1][0])
        self.frame.defined = None

    # -- memory
    def element(self, node: ast.expr, store: bool = False) -> tuple[int, Union[Const, Reg]]:
        """The space and flat position of the scalar element ``node`` names."""
        v = self.raw(node)
        if not isinstance(v, _Element):
            raise self.fail(node, "an assignment to something other than a field's element")
        if store and v.space not in self.writable:
            raise self.fail(node, "a write to a state this function must not change")
        if store and v.field is not None and v.field.const is not None:
            self.wrote_a_const = True
        return v.space, v.address

    def load(self, space: int, address: Union[Const, Reg]) -> Reg:
        r = self.asm.reg()
        if isinstance(address, Const):
            self.asm.emit(vm.LOADK, r.r, space, address.value)
        else:
            self.asm.emit(vm.LOAD, r.r, space, address.r)
        return r

    def store(self, space: int, address: Union[Const, Reg], value: Union[Const, Reg], node: ast.AST) -> None:
        v = self.reg_of(value, node)
        if isinstance(address, Const):
            self.asm.emit(vm.STOREK, address.value, v.r)
        else:
            self.asm.emit(vm.STORE, address.r, v.r)

    def field_value(self, space: int, field, node: ast.AST) -> Value:
        start = self.layout.field_slices[field.name].start
        if field.shape:
            strides = tuple(int(np.prod(field.shape[k + 1:], dtype=np.int64)) for k in range(len(field.shape)))
            return ArrayRef(space, field, Const(start), tuple(field.shape), strides)
        return _Element(space, Const(start), field)

    def subscript(self, array: ArrayRef, index: Value, node: ast.AST) -> Value:
        index = self.scalar(index, node)
        if index.maybe_bool:
            raise self.fail(node, "an index that may be a bool (numpy takes it as a mask)")
        n = array.shape[0]
        if isinstance(index, Const):
            i = index.value + n if index.value < 0 else index.value
            if not 0 <= i < n:
                self.asm.emit(vm.FAIL)  # Python raises IndexError here: the state goes to Python
                i = 0
            step: Union[Const, Reg] = Const(i * array.strides[0])
        else:
            i_reg = self.asm.reg()
            self.asm.emit(vm.INDEX, i_reg.r, index.r, n)
            if array.strides[0] != 1:
                self.asm.emit(vm.MUL, i_reg.r, i_reg.r, self.reg_of(Const(array.strides[0]), node).r)
            step = i_reg
        offset = self.add(array.offset, step, node)
        if len(array.shape) == 1:
            return _Element(array.space, offset, array.field)
        return ArrayRef(array.space, array.field, offset, array.shape[1:], array.strides[1:])

    def add(self, a: Union[Const, Reg], b: Union[Const, Reg], node: ast.AST) -> Union[Const, Reg]:
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(a.value + b.value)
        r = self.asm.reg()
        self.asm.emit(vm.ADD, r.r, self.reg_of(a, node).r, self.reg_of(b, node).r)
        return r

    # -- expressions
    def expr(self, node: ast.expr) -> Value:
        value = self.raw(node)
        if isinstance(value, _Element):
            return self.read(value)
        return value

    def raw(self, node: ast.expr) -> Any:
        """``node``'s value, or the element it names before it is read (a place to write)."""
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.fail(node, f"a {type(node).__name__} expression")
        return method(node)

    def read(self, e: "_Element") -> Union[Const, Reg]:
        # a constant field of the state is its value, and so is the successor's unless the
        # function writes one (see ``program``)
        if e.field is not None and e.field.const is not None and (e.space == 0 or self.fold_successor_consts):
            return Const(int(e.field.const))
        return self.load(e.space, e.address)

    def expr_Constant(self, node: ast.Constant) -> Value:
        v = node.value
        if v is None:
            return NONE
        if isinstance(v, bool) or isinstance(v, int):
            return Const(int(v), isinstance(v, bool))
        raise self.fail(node, f"the constant {v!r}")

    def lookup(self, name: str, node: ast.AST) -> Any:
        frame = self.frame
        if frame.func.assigned.get(name) and frame.defined is not None and name not in frame.defined:
            raise self.fail(node, f"{name} may be read before it is assigned")
        if name in frame.names:
            value = frame.names[name]
            if isinstance(value, Reg) and name in _bool_names(frame.func):
                return Reg(value.r, True)
            return value
        if frame.func.assigned.get(name):
            raise self.fail(node, f"{name} read before it is assigned")
        g = frame.func.fn.__globals__
        if name in g:
            return g[name]
        builtins = g.get("__builtins__")
        table = builtins if isinstance(builtins, dict) else getattr(builtins, "__dict__", {})
        if name in table:
            return table[name]
        raise self.fail(node, f"the name {name} is not defined")

    def expr_Name(self, node: ast.Name) -> Value:
        v = self.lookup(node.id, node)
        if isinstance(v, (Const, Reg, StateRef, ArrayRef, TupleValue)):
            return v
        # Python's integers and numpy's int64 compute alike in int64 (where not, the interpreter
        # stops); numpy's narrower, unsigned and bool types wrap or compute logically: not those
        if type(v) in (bool, int) or isinstance(v, np.int64):
            return Const(int(v), type(v) is bool)
        if isinstance(v, tuple) and all(isinstance(x, (bool, int)) for x in v):
            return TupleValue(tuple(Const(int(x)) for x in v))
        if isinstance(v, np.ndarray) and v.ndim and v.size and v.dtype == np.int64:
            # numba freezes a global array into the code: so does the bytecode, in space 2
            shape = tuple(int(n) for n in v.shape)
            strides = tuple(int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape)))
            return ArrayRef(2, None, Const(self.asm.table(v)), shape, strides)
        raise self.fail(node, f"{node.id} is not a number, a state or an array")

    def expr_Attribute(self, node: ast.Attribute) -> Value:
        base = self.expr(node.value)
        if isinstance(base, StateRef):
            field = self.fields.get(node.attr)
            if field is None:
                raise self.fail(node, f"the state has no field {node.attr}")
            return self.field_value(base.space, field, node)
        if isinstance(base, ArrayRef):
            if node.attr == "shape":
                return TupleValue(tuple(Const(n) for n in base.shape))
            if node.attr == "size":
                return Const(int(np.prod(base.shape)))
            if node.attr == "ndim":
                return Const(len(base.shape))
        raise self.fail(node, f"the attribute .{node.attr}")

    def expr_Subscript(self, node: ast.Subscript) -> Value:
        base = self.expr(node.value)
        index = node.slice
        if isinstance(base, TupleValue):
            i = self.expr(index)
            if not isinstance(i, Const) or not -len(base.items) <= i.value < len(base.items):
                raise self.fail(node, "a tuple indexed by anything but a constant in range")
            return base.items[i.value]
        if not isinstance(base, ArrayRef):
            raise self.fail(node, "indexing something other than an array field or a tuple")
        indices = index.elts if isinstance(index, ast.Tuple) else [index]
        if len(indices) > len(base.shape):
            raise self.fail(node, "more indices than the array has axes")
        value: Value = base
        for i in indices:
            if isinstance(i, ast.Slice):
                raise self.fail(node, "a slice")
            if not isinstance(value, ArrayRef):
                raise self.fail(node, "more indices than the array has axes")
            value = self.subscript(value, self.expr(i), node)
        return value

    def binary(self, op: tuple, a: Union[Const, Reg], b: Union[Const, Reg], node: ast.AST) -> Union[Const, Reg]:
        code, fold = op
        comparison = code in (vm.EQ, vm.NE, vm.LT, vm.LE, vm.GT, vm.GE)
        if comparison:
            flag = True
        elif code in (vm.BITAND, vm.BITOR, vm.BITXOR):
            flag = a.maybe_bool and b.maybe_bool
        elif code in (vm.MIN, vm.MAX):
            flag = a.maybe_bool or b.maybe_bool
        else:
            if a.maybe_bool and b.maybe_bool:
                raise self.fail(node, "arithmetic on two values that may be bools (numpy's bool adds as a "
                                      "logical or): convert one with int()")
            flag = False
        if isinstance(a, Const) and isinstance(b, Const):
            try:
                if code == vm.POW and b.value < 0:
                    raise ValueError
                v = fold(a.value, b.value)
            except (ArithmeticError, ValueError):
                v = None
            if isinstance(v, int) and INT64_MIN <= v <= INT64_MAX and \
                    not (code in (vm.LSHIFT, vm.RSHIFT) and not 0 <= b.value < 63):
                return Const(int(v), flag)
        r = self.asm.reg()
        self.asm.emit(code, r.r, self.reg_of(a, node).r, self.reg_of(b, node).r)
        return Reg(r.r, flag)

    def expr_BinOp(self, node: ast.BinOp) -> Value:
        op = _BINARY.get(type(node.op))
        if op is None:
            raise self.fail(node, f"the operator {type(node.op).__name__}")
        a = self.scalar(self.expr(node.left), node)
        b = self.scalar(self.expr(node.right), node)
        return self.binary(op, a, b, node)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Value:
        v = self.scalar(self.expr(node.operand), node)
        if isinstance(node.op, ast.UAdd):
            return v
        if v.maybe_bool and isinstance(node.op, (ast.USub, ast.Invert)):
            raise self.fail(node, "- or ~ of a value that may be a bool (numpy's ~ is a logical not)")
        kinds = {ast.Not: (vm.NOT, lambda x: int(not x)), ast.USub: (vm.NEG, operator.neg),
                 ast.Invert: (vm.INVERT, operator.invert)}
        code, fold = kinds[type(node.op)]
        flag = isinstance(node.op, ast.Not)
        if isinstance(v, Const) and INT64_MIN < v.value <= INT64_MAX:
            return Const(fold(v.value), flag)
        r = self.asm.reg()
        self.asm.emit(code, r.r, self.reg_of(v, node).r)
        return Reg(r.r, flag)

    def expr_BoolOp(self, node: ast.BoolOp) -> Value:
        # Python's value: the first operand that decides (``a or b`` is a if a is true)
        is_and = isinstance(node.op, ast.And)
        result: Optional[Reg] = None
        end = Label()
        for k, operand in enumerate(node.values):
            v = self.scalar(self.expr(operand), operand)
            last = k == len(node.values) - 1
            if isinstance(v, Const) and result is None:
                if last or (bool(v.value) != is_and):
                    return v  # decides here, and nothing before it was left to run time
                continue  # passes on to the next operand
            if result is None:
                result = self.asm.reg()
            self.move(result, v, operand)
            if not last:
                self.asm.emit(vm.JZ if is_and else vm.JNZ, result.r, end)
        self.asm.place(end)
        assert result is not None
        return Reg(result.r, any(_maybe_bool(v, _bool_names(self.frame.func), self.frame.func.fn)
                                 for v in node.values))

    def expr_Compare(self, node: ast.Compare) -> Value:
        left = self.scalar(self.expr(node.left), node)
        result: Optional[Reg] = None
        end = Label()
        for k, (op, right_node) in enumerate(zip(node.ops, node.comparators)):
            kind = _COMPARE.get(type(op))
            if kind is None:
                raise self.fail(node, f"the comparison {type(op).__name__}")
            right = self.scalar(self.expr(right_node), node)
            v = self.binary(kind, left, right, node)
            if len(node.ops) == 1:
                return v
            if result is None:
                result = self.asm.reg()
            self.move(result, v, node)
            if k < len(node.ops) - 1:
                self.asm.emit(vm.JZ, result.r, end)
            left = right
        self.asm.place(end)
        assert result is not None
        return Reg(result.r, True)

    def expr_IfExp(self, node: ast.IfExp) -> Value:
        test = self.scalar(self.expr(node.test), node)
        if isinstance(test, Const):
            return self.expr(node.body if test.value else node.orelse)
        result = self.asm.reg()
        other, end = Label(), Label()
        self.asm.emit(vm.JZ, test.r, other)
        body = self.scalar(self.expr(node.body), node)
        self.move(result, body, node)
        self.asm.emit(vm.JMP, end)
        self.asm.place(other)
        orelse = self.scalar(self.expr(node.orelse), node)
        self.move(result, orelse, node)
        self.asm.place(end)
        return Reg(result.r, body.maybe_bool or orelse.maybe_bool)

    def expr_Tuple(self, node: ast.Tuple) -> Value:
        return TupleValue(tuple(self.expr(e) for e in node.elts))

    def expr_Call(self, node: ast.Call) -> Value:
        return self.call(node, discard=False)

    def call(self, node: ast.Call, discard: bool) -> Value:
        if not isinstance(node.func, ast.Name):
            raise self.fail(node, "a call of a method or an expression")
        fn = self.lookup(node.func.id, node)
        if fn in (len, min, max, abs, int, bool):
            if node.keywords:
                raise self.fail(node, f"{node.func.id}() with keywords")
            args = [self.expr(a) for a in node.args]
            return self.builtin(fn, args, node)
        if not callable(fn) or isinstance(fn, type):
            raise self.fail(node, f"a call of {node.func.id}")
        return self.inline(fn, node, discard)

    def builtin(self, fn: Callable, args: list[Value], node: ast.Call) -> Value:
        if fn is len:
            if len(args) == 1 and isinstance(args[0], ArrayRef):
                return Const(args[0].shape[0])
            if len(args) == 1 and isinstance(args[0], TupleValue):
                return Const(len(args[0].items))
            raise self.fail(node, "len() of something other than an array field or a tuple")
        if fn in (min, max):
            if len(args) == 1 and isinstance(args[0], TupleValue):
                args = list(args[0].items)
            if len(args) < 2:
                raise self.fail(node, f"{fn.__name__}() of one value or of an array")
            value = self.scalar(args[0], node)
            for other in args[1:]:
                value = self.binary((vm.MIN, min) if fn is min else (vm.MAX, max), value,
                                    self.scalar(other, node), node)
            return value
        if len(args) != 1:
            raise self.fail(node, f"{fn.__name__}() of {len(args)} values")
        v = self.scalar(args[0], node)
        if fn is int:
            return Const(v.value) if isinstance(v, Const) else Reg(v.r)
        flag = v.maybe_bool if fn is abs else True
        if isinstance(v, Const):
            return Const(abs(v.value) if fn is abs else int(bool(v.value)), flag)
        r = self.asm.reg()
        self.asm.emit(vm.ABS if fn is abs else vm.BOOL, r.r, v.r)
        return Reg(r.r, flag)

    def inline(self, fn: Callable, node: ast.Call, discard: bool) -> Value:
        func = _parse(fn)
        if any(f.func.fn is func.fn for f in self.stack):
            raise self.fail(node, f"{func.fn.__name__} calls itself")
        if len(self.stack) > 32:
            raise self.fail(node, "helpers nested more than 32 deep")
        params = [a.arg for a in func.tree.args.args]
        defaults = func.tree.args.defaults
        given: dict[str, Value] = {}
        if len(node.args) > len(params):
            raise self.fail(node, f"{func.fn.__name__}() given too many arguments")
        for name, a in zip(params, node.args):
            if isinstance(a, ast.Starred):
                raise self.fail(node, "a starred argument")
            given[name] = self.expr(a)
        for kw in node.keywords:
            if kw.arg is None or kw.arg not in params or kw.arg in given:
                raise self.fail(node, f"the keyword argument {kw.arg}")
            given[kw.arg] = self.expr(kw.value)
        first_default = len(params) - len(defaults)
        for k, name in enumerate(params):
            if name in given:
                continue
            if k < first_default:
                raise self.fail(node, f"{func.fn.__name__}() without its argument {name}")
            given[name] = self._default(func, defaults[k - first_default], node)
        names: dict[str, Value] = {}
        for name in params:
            value = given[name]
            if func.assigned.get(name):
                if not isinstance(value, (Const, Reg)):
                    raise self.fail(node, f"{func.fn.__name__} assigns its argument {name}, an array or a state")
                r = self.asm.reg()
                self.move(r, value, node)
                value = r
            names[name] = value
        if not discard and func.may_return_none:
            raise self.fail(node, f"the value of {func.fn.__name__}(), which may return None")
        result: list[Reg] = []
        end = Label()
        frame = _Frame(func, names, result, end)
        self.stack.append(frame)
        try:
            self.block(func.tree.body)
        finally:
            self.stack.pop()
        self.asm.place(end)
        if discard:
            return NONE
        if frame.width is None:
            raise self.fail(node, f"the value of {func.fn.__name__}(), which returns none")
        flags = _return_bools(func) or ()
        result = [Reg(r.r, flags[k] if k < len(flags) else True) for k, r in enumerate(result)]
        return TupleValue(tuple(result)) if frame.width else result[0]

    def _default(self, func: _Function, node: ast.expr, call: ast.AST) -> Value:
        try:
            value = ast.literal_eval(node)
        except ValueError:
            raise self.fail(call, f"a default of {func.fn.__name__} that is not a literal") from None
        if isinstance(value, (bool, int)):
            return Const(int(value))
        raise self.fail(call, f"the default {value!r} of {func.fn.__name__}")


@dataclass(frozen=True)
class _Element:
    """A scalar element of a field, before it is read (a place to write, or a value)."""
    space: int
    address: Union[Const, Reg]
    field: Any


@dataclass
class Programs:
    """Every function of a model as bytecode: the arrays ``kernels.bytecode``'s kernels take."""
    code: np.ndarray
    nregs: int
    tables: np.ndarray  # memory space 2: the global arrays the functions read
    label_start: np.ndarray  # per label, where its action's program starts
    label_args: np.ndarray  # per label, its parameters' values
    arg_regs: np.ndarray  # per label, the registers they go to (-1: none)
    property_start: np.ndarray  # transition properties, then action constraints
    check_start: np.ndarray  # invariants, then constraints


def translate(model) -> Programs:
    """The bytecode of ``model``'s actions, properties and checks; ``Untranslatable`` if a
    function uses what the bytecode does not have."""
    asm = Assembler()
    t = Translator(model.layout, asm)
    starts: dict[int, tuple[int, list[int]]] = {}
    label_start, label_args, arg_regs = [], [], []
    width = max([len(lab.values) for lab in model.labels] + [1])
    for lab in model.labels:
        key = id(lab.action)
        if key not in starts:
            starts[key] = t.program(lab.action.fn, (0, 1), len(lab.values), writable=(1,), returns_bool=True)
        start, regs = starts[key]
        label_start.append(start)
        label_args.append(list(lab.values) + [0] * (width - len(lab.values)))
        arg_regs.append(regs + [-1] * (width - len(regs)))
    props = [t.program(p.fn, (0, 1), returns_bool=True)[0] for p in model.properties + model.action_constraints]
    checks = [t.program(c.fn, (0,), returns_bool=True)[0] for c in model.invariants + model.constraints]
    return Programs(asm.array(), asm.nregs, np.array(asm.tables or [0], np.int64), np.array(label_start, np.int64),
                    np.array(label_args, np.int64).reshape(len(model.labels), width),
                    np.array(arg_regs, np.int64).reshape(len(model.labels), width),
                    np.array(props, np.int64), np.array(checks, np.int64))
