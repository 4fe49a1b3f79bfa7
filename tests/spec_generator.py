"""Random small specs from a seed, for the differential fuzzer of the explorers.

``generate(seed)`` returns the source text of one spec module (class ``Fuzz``) and ``write(seed,
folder)`` writes it as ``fuzz_<seed>.py``, loadable as ``fuzz_<seed>.py:Fuzz``. The spec uses only
what docs/writing-a-spec.md documents: Int (ranges from a negative lo too), Bool, Enum, Set and
Const fields, scalars and arrays of one or two axes, and fields tens of bits wide that make a state
take two words; actions with parameters; guards and writes from a small grammar (comparisons,
arithmetic kept in its field's domain by a clamp, a wrap or a guard, bit operations on sets,
loops over an axis, module-level @njit helpers); invariants that may fail, and sometimes a state
constraint, an action constraint, a transition property.

Every spec is built around n interchangeable processes: arrays whose first axis is a process, a
set of processes and a leader naming one. Half the seeds use only what treats the processes
alike (a process's own elements, sums and counts over all of them, membership) and declare the
symmetry; the others also index by number and use a process as a value, and declare none.
The product of the fields' domains is kept small, so that the pure-Python reference explorer
finishes in seconds.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

MAX_PRODUCT = 20_000  # the product of every field's domain: a bound on the reachable states

PRELUDE = '''"""A generated spec (tests/spec_generator.py, seed {seed}{mode})."""

from dataclasses import dataclass

from numba import njit

from kraftcheck import (Action, ActionConstraint, Bool, Const, Constraint, Enum, Int, Invariant, Param, Permuted,
                        Set, Spec, Symmetry, TransitionProperty, param)


@njit(cache=True)
def popcount(x):
    count = 0
    while x > 0:
        count += x & 1
        x >>= 1
    return count


@njit(cache=True)
def total(cells):
    result = 0
    for i in range(len(cells)):
        result += cells[i]
    return result


@njit(cache=True)
def count_equal(cells, value):
    result = 0
    for c in cells:
        if c == value:
            result += 1
    return result


@njit(cache=True)
def largest(cells):
    result = cells[0]
    i = 1
    while i < cells.shape[0]:
        if cells[i] > result:
            result = cells[i]
        i += 1
    return result


@njit(cache=True)
def clamp(value, lo, hi):
    return min(max(value, lo), hi)


@njit(cache=True)
def split(a, b=3):
    if b == 0:
        return a, 0
    return a // b, a % b


@njit(cache=True)
def all_at_most(cells, bound):
    for i in range(cells.shape[0]):
        if cells[i] > bound:
            return False
    return True
'''


class _Field:
    """One generated field: its declaration and what the grammar may do with it."""

    def __init__(self, name, kind, lo, hi, shape, per_process, decl, members=0, holds_process=False):
        self.name, self.kind, self.lo, self.hi, self.shape = name, kind, lo, hi, shape
        self.per_process = per_process  # the first axis is the processes'
        self.decl = decl
        self.members = members  # a Set's member count
        self.holds_process = holds_process  # the leader: a process or none (n)

    @property
    def size(self):
        return self.hi - self.lo + 1

    def elements(self):
        count = 1
        for k in self.shape:
            count *= k
        return count


class _Generator:
    def __init__(self, seed: int):
        self.seed = seed
        self.r = random.Random(seed)
        self.symmetric = self.r.random() < 0.5
        self.n = self.r.choice((2, 2, 3))
        self.k = self.r.choice((2, 3))  # the length of the other axes
        self.fields: list[_Field] = []
        self.consts: list[tuple[str, int]] = []
        self.functions: list[str] = []
        self.counter = 0
        # wide fields (tens of bits, so that a state takes several words) come from a stream of
        # their own, so that adding them left every other choice of a seed as it was
        self.w = random.Random(f"wide {seed}")
        self.wide: list[tuple[_Field, int, int]] = []  # the field, its step M and its count of values J

    # fields

    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def product(self, extra=None):
        total = 1
        for f in self.fields + ([extra] if extra else []):
            total *= f.size ** f.elements()
        return total

    def make_fields(self):
        procs = tuple(f"p{i + 1}" for i in range(self.n))
        others = tuple(f"c{i}" for i in range(self.k))
        wanted = self.r.randint(4, 7)
        candidates = ["int", "int", "bool", "enum", "set", "proc_int", "proc_int", "proc_bool", "proc_enum",
                      "proc_set", "proc_matrix", "pair_bool", "global_array", "process_set", "leader"]
        tries = 0
        while len([f for f in self.fields]) < wanted and tries < 60:
            tries += 1
            f = self.make_field(self.r.choice(candidates), procs, others)
            if f is not None and self.product(f) <= MAX_PRODUCT:
                self.fields.append(f)
        if not any(f.per_process for f in self.fields):
            self.fields.append(_Field("ready", "bool", 0, 1, (self.n,), True,
                                      f'Bool("ready", ({self.n},), index_labels={procs!r})'))
        for _ in range(self.r.randint(0, 2)):
            self.consts.append((self.fresh("k"), self.r.randint(-2, 3)))
        self.make_wide_fields(procs)

    def make_wide_fields(self, procs):
        """Fields of 20 to 31 bits holding a few values lo + M * j, j < J: with the others they
        fill more than one 63-bit word, and their values are far from 0."""
        w = self.w
        for i in range(w.choice((0, 1, 1, 2))):
            per_process = w.random() < 0.5 and self.product() * 2 ** self.n <= 4 * MAX_PRODUCT
            count = 2 if per_process else 4
            while True:  # a field's values stay within int32 (checker/spec.py refuses others)
                step = w.choice((2 ** w.randint(18, 30), 3 ** w.randint(12, 19), 1000003 * w.randint(1, 999)))
                lo = w.choice((0, -(2 ** w.randint(20, 31)), -w.randint(1, 2 * 10 ** 9)))
                hi = lo + step * (count - 1) + w.randint(0, 5)
                if hi < 2 ** 31 and hi - lo < 2 ** 31 - 1:
                    break
            name = f"wide{i}"
            if per_process:
                f = _Field(name, "int", lo, hi, (self.n,), True,
                           f'Int("{name}", {lo}, {hi}, ({self.n},), index_labels={procs!r})')
            else:
                f = _Field(name, "int", lo, hi, (), False, f'Int("{name}", {lo}, {hi})')
            self.wide.append((f, step, count))

    def wide_actions(self):
        """An action per wide field, and an invariant that holds: the field keeps to its steps."""
        w = self.w
        actions = []
        for i, (f, step, count) in enumerate(self.wide):
            name, upper = f.name, f.name.upper()
            params = "(Param(\"p\", {0}, self.procs), )".format(self.n) if f.shape else "()"
            element = f"{name}[p]" if f.shape else name
            small = [g for g in self.fields
                     if g.shape == () and g.kind in ("int", "bool", "enum") and not g.holds_process]
            guard = ""
            if small and w.random() < 0.6:
                g = w.choice(small)
                guard = f"    if j == (s.{g.name} % {count}):\n        return False\n"
            writes = f"    t.{element} = LO_{upper} + STEP_{upper} * ((j + {w.randint(1, count - 1)}) % {count})\n"
            if small and w.random() < 0.4:
                g = w.choice(small)
                writes += f"    t.{g.name} = clamp(s.{g.name} + j % 2, {g.lo}, {g.hi})\n"
            self.functions.append(
                f"LO_{upper} = {f.lo}\nSTEP_{upper} = {step}\n\n\n"
                f"@njit(cache=True)\ndef move_{name}(s, t{', p' if f.shape else ''}):\n"
                f"    j = (s.{element} - LO_{upper}) // STEP_{upper}\n{guard}{writes}    return True\n")
            actions.append(f'Action("Move{i}", move_{name}, {params})')
            cells = f"s.{name}[i]" if f.shape else f"s.{name}"
            loop = f"    for i in range({self.n}):\n    " if f.shape else ""
            self.functions.append(
                f"@njit(cache=True)\ndef {name}_in_steps(s):\n{loop}    if ({cells} - LO_{upper}) % STEP_{upper} "
                f"!= 0:\n{'    ' if f.shape else ''}        return False\n    return True\n")
        return actions

    def int_range(self):
        if self.r.random() < 0.4:
            lo = self.r.randint(-3, -1)
            return lo, lo + self.r.randint(1, 4)
        return 0, self.r.randint(1, 4)

    def make_field(self, kind, procs, others):
        r, n, k = self.r, self.n, self.k
        if kind == "int":
            lo, hi = self.int_range()
            name = self.fresh("x")
            decl = f'Int("{name}", {hi})' if lo == 0 and r.random() < 0.5 else f'Int("{name}", {lo}, {hi})'
            return _Field(name, "int", lo, hi, (), False, decl)
        if kind == "bool":
            name = self.fresh("b")
            return _Field(name, "bool", 0, 1, (), False, f'Bool("{name}")')
        if kind == "enum":
            name, count = self.fresh("e"), r.randint(2, 4)
            labels = tuple(f"s{i}" for i in range(count))
            return _Field(name, "enum", 0, count - 1, (), False, f'Enum("{name}", {labels!r})')
        if kind == "set":
            name, count = self.fresh("m"), r.randint(2, 3)
            members = tuple(f"v{i}" for i in range(count))
            return _Field(name, "set", 0, (1 << count) - 1, (), False, f'Set("{name}", {members!r})', members=count)
        if kind == "global_array":
            lo, hi = self.int_range()
            name = self.fresh("g")
            return _Field(name, "int", lo, hi, (k,), False,
                          f'Int("{name}", {lo}, {hi}, ({k},), index_labels={others!r})')
        if kind == "proc_int":
            lo, hi = self.int_range()
            hi = min(hi, lo + 3)
            name = self.fresh("a")
            return _Field(name, "int", lo, hi, (n,), True, f'Int("{name}", {lo}, {hi}, ({n},), index_labels={procs!r})')
        if kind == "proc_bool":
            name = self.fresh("f")
            return _Field(name, "bool", 0, 1, (n,), True, f'Bool("{name}", ({n},), index_labels={procs!r})')
        if kind == "proc_enum":
            name, count = self.fresh("st"), r.randint(2, 3)
            labels = tuple(f"q{i}" for i in range(count))
            return _Field(name, "enum", 0, count - 1, (n,), True,
                          f'Enum("{name}", {labels!r}, ({n},), index_labels={procs!r})')
        if kind == "proc_set":
            name = self.fresh("ms")
            members = ("u0", "u1")
            return _Field(name, "set", 0, 3, (n,), True,
                          f'Set("{name}", {members!r}, ({n},), index_labels={procs!r})', members=2)
        if kind == "proc_matrix":
            name, hi = self.fresh("w"), r.randint(1, 2)
            form = r.choice(("Int", "axis"))
            if form == "Int":
                decl = f'Int("{name}", {hi}, ({n}, {k}), index_labels={procs!r})'
            else:
                decl = f'Int("{name}", 0, {hi}, ({n}, {k}), axis_labels=({procs!r}, {others!r}))'
            return _Field(name, "int", 0, hi, (n, k), True, decl)
        if kind == "pair_bool":
            name = self.fresh("link")
            return _Field(name, "bool", 0, 1, (n, n), True,
                          f'Bool("{name}", ({n}, {n}), axis_labels=({procs!r}, {procs!r}))')
        if kind == "process_set":
            if any(f.kind == "process_set" for f in self.fields):
                return None
            return _Field("members", "process_set", 0, (1 << n) - 1, (), False,
                          f'Set("members", {procs!r})', members=n)
        if kind == "leader":
            if any(f.holds_process for f in self.fields):
                return None
            return _Field("leader", "enum", 0, n, (), False, f'Enum("leader", {procs + ("none",)!r})',
                          holds_process=True)
        raise AssertionError(kind)

    # expressions: (text, lo, hi) with a bound on the value, so that products stay small

    def scalar_fields(self):
        return [f for f in self.fields if f.shape == () and not f.holds_process]

    def int_expr(self, ctx, depth=0):
        """An integer expression over ``s`` in the context ``ctx`` (process and value parameters)."""
        r = self.r
        choices = ["literal", "field", "field", "field", "const", "aggregate"]
        if ctx["values"]:
            choices.append("value")
        if ctx["procs"] and not self.symmetric:
            choices.append("proc_value")
        if depth < 2:
            choices += ["binary", "binary", "minmax", "divmod", "ternary", "abs"]
        pick = r.choice(choices)
        if pick == "literal":
            return str(r.randint(-3, 3))
        if pick == "const" and self.consts:
            return f"s.{r.choice(self.consts)[0]}"
        if pick == "value":
            return r.choice(ctx["values"])
        if pick == "proc_value":
            return r.choice(ctx["procs"])
        if pick == "aggregate":
            return self.aggregate(ctx)
        if pick == "binary":
            op = r.choice(("+", "-", "+", "-", "*"))
            return f"({self.int_expr(ctx, depth + 1)} {op} {self.int_expr(ctx, depth + 2 if op == '*' else depth + 1)})"
        if pick == "minmax":
            return f"{r.choice(('min', 'max'))}({self.int_expr(ctx, depth + 1)}, {self.int_expr(ctx, depth + 1)})"
        if pick == "divmod":
            divisor = r.choice((2, 3, -2, -3))
            a = self.int_expr(ctx, depth + 1)
            form = r.randint(0, 3)
            if form == 0:
                return f"({a} // {divisor})"
            if form == 1:
                return f"({a} % {divisor})"
            if form == 2:
                d = self.int_expr(ctx, depth + 2)
                return f"(({a}) // ({d}) if ({d}) != 0 else 0)"
            return f"split({a}, {divisor})[{r.randint(0, 1)}]"
        if pick == "ternary":
            return f"({self.int_expr(ctx, depth + 1)} if {self.bool_expr(ctx, depth + 1)} else " \
                   f"{self.int_expr(ctx, depth + 1)})"
        if pick == "abs":
            return f"abs({self.int_expr(ctx, depth + 1)})"
        return self.field_read(ctx)

    def aggregate(self, ctx):
        r = self.r
        arrays = [f for f in self.fields if f.per_process and len(f.shape) == 1]
        sets = [f for f in self.fields if f.kind in ("set", "process_set") and f.shape == ()]
        options = []
        if arrays:
            options += ["total", "count", "largest", "method"]
        if sets:
            options.append("popcount")
        if not options:
            return str(r.randint(0, 2))
        pick = r.choice(options)
        if pick == "popcount":
            return f"popcount(s.{r.choice(sets).name})"
        f = r.choice(arrays)
        if pick == "total":
            return f"total(s.{f.name})"
        if pick == "count":
            return f"count_equal(s.{f.name}, {r.randint(f.lo, f.hi)})"
        if pick == "largest":
            return f"largest(s.{f.name})"
        return f"int(s.{f.name}.{r.choice(('sum', 'max', 'min'))}())"

    def index(self, ctx, length, of_processes):
        """An index of an axis: a process parameter, or (without symmetry) a number or a wrapped value."""
        r = self.r
        if of_processes:
            if ctx["procs"] and (self.symmetric or r.random() < 0.6):
                return r.choice(ctx["procs"])
            if self.symmetric:
                return None
        elif ctx["values"] and r.random() < 0.5:
            return f"{r.choice(ctx['values'])} % {length}"
        if r.random() < 0.2 and not self.symmetric:
            return f"({self.int_expr(ctx, 2)}) % {length}"
        return str(r.randrange(length))

    def field_read(self, ctx):
        r = self.r
        # a set of processes as a number is no symmetric value: it is read by membership and count
        readable = [f for f in self.fields if not f.holds_process and not (self.symmetric and f.kind == "process_set")]
        if not readable:
            return str(r.randint(0, 2))
        f = r.choice(readable)
        if f.shape == ():
            return f"s.{f.name}"
        first = self.index(ctx, f.shape[0], f.per_process)
        if first is None:
            return self.aggregate(ctx)
        if len(f.shape) == 1:
            return f"s.{f.name}[{first}]"
        second = self.index(ctx, f.shape[1], f.name.startswith("link"))
        if second is None:
            return self.aggregate(ctx)
        if r.random() < 0.5:
            return f"s.{f.name}[{first}, {second}]"
        return f"s.{f.name}[{first}][{second}]"

    def bool_expr(self, ctx, depth=0):
        r = self.r
        pick = r.choice(["compare", "compare", "compare", "member", "flag", "leader", "combine", "not"]
                        if depth < 2 else ["compare", "member", "flag"])
        if pick == "member":
            sets = [f for f in self.fields if f.kind == "process_set"]
            if sets and ctx["procs"]:
                return f"(s.members >> {r.choice(ctx['procs'])} & 1) == 1"
            other = [f for f in self.fields if f.kind == "set" and f.shape == ()]
            if other:
                f = r.choice(other)
                return f"(s.{f.name} & {1 << r.randrange(f.members)}) != 0"
        if pick == "flag":
            flags = [f for f in self.fields if f.kind == "bool"]
            if flags:
                read = self.field_read_of(r.choice(flags), ctx)
                if read is not None:
                    return f"{read} != 0" if r.random() < 0.5 else f"{read} == 0"
        if pick == "leader" and any(f.holds_process for f in self.fields):
            if ctx["procs"] and r.random() < 0.7:
                return f"s.leader {r.choice(('==', '!='))} {r.choice(ctx['procs'])}"
            return f"s.leader {r.choice(('==', '!='))} {self.n}"
        if pick == "combine":
            return f"({self.bool_expr(ctx, depth + 1)} {r.choice(('and', 'or'))} {self.bool_expr(ctx, depth + 1)})"
        if pick == "not":
            return f"not ({self.bool_expr(ctx, depth + 1)})"
        op = r.choice(("==", "!=", "<", "<=", ">", ">="))
        return f"{self.int_expr(ctx, 1)} {op} {self.int_expr(ctx, 1)}"

    def field_read_of(self, f, ctx):
        if f.shape == ():
            return f"s.{f.name}"
        first = self.index(ctx, f.shape[0], f.per_process)
        if first is None:
            return None
        if len(f.shape) == 1:
            return f"s.{f.name}[{first}]"
        second = self.index(ctx, f.shape[1], f.name.startswith("link"))
        return None if second is None else f"s.{f.name}[{first}, {second}]"

    # actions

    def in_domain(self, value, f, local, guards):
        """``value`` brought into ``f``'s domain: clamped, wrapped, or the action disabled outside it."""
        form = self.r.randint(0, 2)
        if form == 0:
            return f"clamp({value}, {f.lo}, {f.hi})" if self.r.random() < 0.5 else \
                f"min(max({value}, {f.lo}), {f.hi})"
        if form == 1:
            return f"{f.lo} + ({value} - {f.lo}) % {f.size}"
        guards.append(f"    {local} = {value}\n    if {local} < {f.lo} or {local} > {f.hi}:\n        return False\n")
        return local

    def target(self, ctx):
        """An element of ``t`` to write, and its field, or None."""
        r = self.r
        f = r.choice(self.fields)
        if f.holds_process:
            if ctx["procs"] and r.random() < 0.7:
                return "t.leader", f, r.choice(ctx["procs"])
            return "t.leader", f, str(self.n)
        if f.kind == "process_set":
            if not ctx["procs"]:
                return None
            p = r.choice(ctx["procs"])
            op = r.choice((f"s.members | (1 << {p})", f"s.members & ~(1 << {p})", f"s.members ^ (1 << {p})"))
            return "t.members", f, op
        if f.shape == ():
            return f"t.{f.name}", f, None
        first = self.index(ctx, f.shape[0], f.per_process)
        if first is None:
            return None
        if len(f.shape) == 1:
            return f"t.{f.name}[{first}]", f, None
        second = self.index(ctx, f.shape[1], f.name.startswith("link"))
        if second is None:
            return None
        return (f"t.{f.name}[{first}, {second}]" if r.random() < 0.5 else f"t.{f.name}[{first}][{second}]"), f, None

    def write_value(self, f, ctx, local, guards, element):
        r = self.r
        if f.kind == "bool" and r.random() < 0.5:
            return r.choice((self.bool_expr(ctx, 1), f"1 - {element.replace('t.', 's.', 1)}", "True", "False"))
        if f.kind == "set" and r.random() < 0.6:
            bit = 1 << r.randrange(f.members)
            source = element.replace("t.", "s.", 1)
            return r.choice((f"{source} | {bit}", f"{source} & ~{bit}", f"{source} ^ {bit}"))
        step = r.choice(("+ 1", "- 1", "+ 1", f"+ {self.int_expr(ctx, 1)}"))
        value = f"{element.replace('t.', 's.', 1)} {step}" if r.random() < 0.7 else self.int_expr(ctx)
        return self.in_domain(value, f, local, guards)

    def loop_write(self):
        """A write of every process's element of one array by the same rule."""
        r = self.r
        arrays = [f for f in self.fields if f.per_process and len(f.shape) == 1]
        if not arrays:
            return ""
        f = r.choice(arrays)
        scalars = [g for g in self.scalar_fields() if g.kind != "process_set"]
        extra = f" + s.{r.choice(scalars).name}" if scalars and r.random() < 0.5 else ""
        value = f"s.{f.name}[i] {r.choice(('+', '-'))} 1{extra}"
        cond = f"s.{f.name}[i] {r.choice(('<', '>', '!='))} {r.randint(f.lo, f.hi)}"
        value = f"{f.lo} + ({value} - {f.lo}) % {f.size}" if r.random() < 0.5 else f"clamp({value}, {f.lo}, {f.hi})"
        loop = r.choice((f"for i in range(len(s.{f.name}))", f"for i in range(s.{f.name}.shape[0])",
                         f"for i in range({self.n})"))
        return f"    {loop}:\n        if {cond}:\n            t.{f.name}[i] = {value}\n"

    def action(self, index):
        r = self.r
        params, ctx = [], {"procs": [], "values": []}
        for _ in range(r.choice((0, 1, 1, 1, 2))):
            if r.random() < 0.7 and len(ctx["procs"]) < 2:
                name = "p" if not ctx["procs"] else "q"
                ctx["procs"].append(name)
                params.append((name, self.n, "procs"))
            elif not ctx["values"]:
                count = r.randint(2, 3)
                ctx["values"].append("v")
                params.append(("v", count, None))
        name = f"act{index}"
        lines = [f"@njit(cache=True)\ndef {name}(s, t{''.join(', ' + p for p, _, _ in params)}):\n"]
        if len(ctx["procs"]) == 2 and r.random() < 0.6:
            lines.append("    if p == q:\n        return False\n")
        if r.random() < 0.7:
            lines.append(f"    if not ({self.bool_expr(ctx, r.randint(1, 2))}):\n        return False\n")
        guards, writes, written = [], [], set()
        for j in range(r.randint(1, 3)):
            target = self.target(ctx)
            if target is None:
                continue
            element, f, fixed = target
            key = element.replace("][", ", ")
            if key in written:
                continue
            written.add(key)
            value = fixed if fixed is not None else self.write_value(f, ctx, f"w{j}", guards, element)
            writes.append(f"    {element} = {value}\n")
        if r.random() < 0.25:
            writes.append(self.loop_write())
        if not writes:
            writes.append(self.loop_write() or "")
        body = "".join(lines + guards + writes) + "    return True\n"
        self.functions.append(body)
        labels = [f"Param(\"{p}\", {count}, self.procs)" if kind else f"Param(\"{p}\", {count})"
                  for p, count, kind in params]
        return f'Action("Act{index}", {name}, ({"".join(x + ", " for x in labels)}))'

    # checks

    def state_function(self, name, kind):
        ctx = {"procs": [], "values": []}
        r = self.r
        if kind == "loop" and any(f.per_process and len(f.shape) == 1 for f in self.fields):
            f = r.choice([f for f in self.fields if f.per_process and len(f.shape) == 1])
            bound = r.randint(f.lo, f.hi)
            body = r.choice((f"    return all_at_most(s.{f.name}, {bound})\n",
                             f"    for i in range({self.n}):\n        if s.{f.name}[i] == {bound}:\n"
                             f"            return False\n    return True\n"))
        elif kind == "rare":  # a conjunction that few states meet: an invariant that often holds
            body = f"    return not ({self.bool_expr(ctx, 1)} and {self.bool_expr(ctx, 1)})\n"
        else:
            body = f"    return {self.bool_expr(ctx)}\n"
        self.functions.append(f"@njit(cache=True)\ndef {name}(s):\n{body}")

    def transition_function(self, name):
        r = self.r
        scalars = [f for f in self.scalar_fields() if f.kind in ("int", "enum", "bool")]
        aggregate = self.aggregate({"procs": [], "values": []})
        if scalars and r.random() < 0.6:
            f = r.choice(scalars)
            body = r.choice((f"t.{f.name} >= s.{f.name}", f"abs(t.{f.name} - s.{f.name}) <= 1",
                             f"t.{f.name} == s.{f.name} or t.{f.name} != {r.randint(f.lo, f.hi)}"))
        else:
            body = f"{aggregate.replace('s.', 't.')} >= {aggregate} - {r.randint(0, 1)}"
        self.functions.append(f"@njit(cache=True)\ndef {name}(s, t):\n    return {body}\n")

    # the whole module

    def initial_states(self):
        states = []
        for _ in range(self.r.choice((1, 1, 2, 3))):
            values = {}
            for f in self.fields:
                if self.r.random() < 0.5:
                    continue
                if f.shape == ():
                    values[f.name] = self.r.randint(f.lo, f.hi)
                elif len(f.shape) == 1:
                    values[f.name] = [self.r.randint(f.lo, f.hi) for _ in range(f.shape[0])]
                else:
                    values[f.name] = [[self.r.randint(f.lo, f.hi) for _ in range(f.shape[1])]
                                      for _ in range(f.shape[0])]
            for f in self.fields:  # "missing fields are 0": only where 0 is in the domain
                if f.name not in values and not (f.lo <= 0 <= f.hi):
                    values[f.name] = f.lo if f.shape == () else \
                        ([f.lo] * f.shape[0] if len(f.shape) == 1 else [[f.lo] * f.shape[1]] * f.shape[0])
            for f, step, count in self.wide:  # from their own stream, as everything of theirs
                if f.shape:
                    values[f.name] = [f.lo + step * self.w.randrange(count) for _ in range(self.n)]
                else:
                    values[f.name] = f.lo + step * self.w.randrange(count)
            if values not in states:
                states.append(values)
        return states

    def symmetry_decl(self):
        moved = []
        for f in self.fields:
            if f.holds_process:
                moved.append('Permuted("leader", holds="member")')
            elif f.kind == "process_set":
                moved.append('Permuted("members", holds="subset")')
            elif f.per_process:
                axes = "(0, 1)" if f.name.startswith("link") else "(0,)"
                moved.append(f'Permuted("{f.name}", axes={axes})')
        moved += [f'Permuted("{f.name}", axes=(0,))' for f, _, _ in self.wide if f.shape]
        return f"Symmetry(self.procs, ({''.join(m + ', ' for m in moved)}))"

    def source(self) -> str:
        r = self.r
        self.make_fields()
        actions = [self.action(i) for i in range(r.randint(3, 6))]
        invariants = []
        for i in range(r.randint(1, 2)):
            self.state_function(f"inv{i}", r.choice(("expr", "rare", "rare", "loop")))
            invariants.append(f'Invariant("Inv{i}", inv{i})')
        actions += self.wide_actions()
        invariants += [f'Invariant("{f.name}_in_steps", {f.name}_in_steps)' for f, _, _ in self.wide]
        extra = ""
        if r.random() < 0.35:
            self.state_function("within", "expr")
            extra += '\n    def constraints(self):\n        return [Constraint("Within", within)]\n'
        if r.random() < 0.3:
            body = r.choice(["t.{0} >= s.{0}", "t.{0} != s.{0} or {1}"])
            scalars = [f for f in self.scalar_fields() if f.kind in ("int", "enum")]
            if scalars:
                f = r.choice(scalars)
                cond = self.bool_expr({"procs": [], "values": []}, 1)
                self.functions.append(f"@njit(cache=True)\ndef allowed(s, t):\n    return "
                                      f"{body.format(f.name, cond)}\n")
                extra += ('\n    def action_constraints(self):\n'
                          '        return [ActionConstraint("Allowed", allowed)]\n')
        if r.random() < 0.35:
            self.transition_function("step_ok")
            extra += '\n    def properties(self):\n        return [TransitionProperty("StepOk", step_ok)]\n'
        if self.symmetric:
            extra += f"\n    def symmetry(self):\n        return {self.symmetry_decl()}\n"
        decls = [f.decl for f in self.fields + [f for f, _, _ in self.wide]]
        decls += [f'Const("{name}", {value})' for name, value in self.consts]
        procs = tuple(f"p{i + 1}" for i in range(self.n))
        mode = ", symmetric" if self.symmetric else ""
        text = PRELUDE.format(seed=self.seed, mode=mode)
        text += "\n\n" + "\n\n".join(self.functions)
        deadlock = r.random() < 0.3
        text += f'''

@dataclass(frozen=True)
class FuzzParams:
    scale: int = param(1, "unused: every generated spec has one parameter", minimum=1, maximum=1)


class Fuzz(Spec):
    name = "fuzz_{self.seed}"
    summary = "a generated spec"
    Params = FuzzParams
    examples = ({{}},)
    check_deadlock = {deadlock}
    procs = {procs!r}

    def fields(self):
        return [
{"".join(f"            {d},{chr(10)}" for d in decls)}        ]

    def initial_states(self):
{"".join(f"        yield {state!r}{chr(10)}" for state in self.initial_states())}
    def actions(self):
        return [
{"".join(f"            {a},{chr(10)}" for a in actions)}        ]

    def invariants(self):
        return [{", ".join(invariants)}]
{extra}'''
        return text


def generate(seed: int) -> str:
    """The source text of the spec of ``seed``: the same text for the same seed."""
    return _Generator(seed).source()


def is_symmetric(seed: int) -> bool:
    """Whether the spec of ``seed`` declares a symmetry."""
    return _Generator(seed).symmetric


def write(seed: int, folder) -> str:
    """Writes the spec of ``seed`` into ``folder``; returns its reference, ``<file>:Fuzz``. A file
    that already holds the text is left as it is, so that its compiled kernels stay cached."""
    path = Path(folder) / f"fuzz_{seed}.py"
    text = generate(seed)
    if not path.is_file() or path.read_text() != text:
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(text)
        os.replace(partial, path)
    return f"{path}:Fuzz"
