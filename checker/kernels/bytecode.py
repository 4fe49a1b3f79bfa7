"""The bytecode interpreter: a spec's functions run, compiled once per installation, on no compile of theirs.

A spec's actions, invariants and properties translated by ``checker.bytecode`` into programs of
this instruction set run here, over unpacked states (int64 rows: ``src`` the state, ``dst`` the
successor an action writes). Nothing here depends on the spec: these kernels compile once per
installation (numba's cache) and every spec's first run uses them at once, instead of
interpreting the spec's functions in Python (``explore.interpreted``) while its own kernels
compile. The readable reference is the spec's own Python, run by ``InterpretedKernels``; the
tests compare the two on every state of every shipped spec (``tests/test_bytecode.py``).

An instruction is four int64s, ``op a b c``; registers are int64. Memory ``space`` 0 is the state
``src``, 1 the successor ``dst``, 2 ``tables``: the integer arrays of the spec's module globals
(numba freezes those into its code). Whatever Python would do differently from int64 arithmetic (an
overflow, a shift past 63 bits, a division by zero, an index out of range) stops the program
with ``FAILED`` (checked before the operation: LLVM may assume that signed arithmetic does not
overflow, and fold a check made after it): the caller then redoes the work in Python, which gives Python's answer or error.
"""

from __future__ import annotations

import os

import numpy as np
from numba import njit

from kraftcheck.checker.kernels.layout_table import pack, unpack

# opcodes: what each does to the registers ``r``
CONST = 0      # r[a] = b
MOV = 1        # r[a] = r[b]
LOAD = 2       # r[a] = space b [r[c]]
LOADK = 3      # r[a] = space b [c]
STORE = 4      # dst[r[a]] = r[b]
STOREK = 5     # dst[a] = r[b]
INDEX = 6      # r[a] = r[b] as a Python index into c elements (negative from the end); FAILED if outside
JMP = 7        # go to a
JZ = 8         # go to b if r[a] == 0
JNZ = 9        # go to b if r[a] != 0
RET = 10       # return r[a]
NOT = 11       # r[a] = r[b] == 0
NEG = 12       # r[a] = -r[b]
INVERT = 13    # r[a] = ~r[b]
ABS = 14       # r[a] = abs(r[b])
BOOL = 15      # r[a] = r[b] != 0
ADD = 16       # r[a] = r[b] + r[c], and so on for the binary operators below
SUB = 17
MUL = 18
FLOORDIV = 19
MOD = 20
LSHIFT = 21
RSHIFT = 22
BITAND = 23
BITOR = 24
BITXOR = 25
EQ = 26
NE = 27
LT = 28
LE = 29
GT = 30
GE = 31
MIN = 32
MAX = 33
POW = 34
FAIL = 35      # stop: FAILED (a path the translation cannot take)

# what ``run`` returns beside its value
DONE = 0
FAILED = 1

# what the batch kernels say in their status
OK = 0
STOPPED = 1  # a program FAILED, or an action wrote and declined, or a successor left its domain

SMALL = np.int64(1 << 31)
LARGEST = np.int64((1 << 63) - 1)
SMALLEST = np.int64(-(1 << 63))


@njit(cache=True, nogil=True)
def run(code, pc, regs, src, dst, tables):
    """Run the program starting at ``pc``: (DONE, its value) or (FAILED, 0)."""
    while True:
        op = code[pc, 0]
        a = code[pc, 1]
        b = code[pc, 2]
        c = code[pc, 3]
        pc += 1
        if op == LOADK:
            regs[a] = src[c] if b == 0 else (dst[c] if b == 1 else tables[c])
        elif op == JZ:
            if regs[a] == 0:
                pc = b
        elif op == CONST:
            regs[a] = b
        elif op == EQ:
            regs[a] = regs[b] == regs[c]
        elif op == JNZ:
            if regs[a] != 0:
                pc = b
        elif op == STOREK:
            dst[a] = regs[b]
        elif op == RET:
            return DONE, regs[a]
        elif op == JMP:
            pc = a
        elif op == MOV:
            regs[a] = regs[b]
        elif op == INDEX:
            i = regs[b]
            if i < 0:
                i += c
            if i < 0 or i >= c:
                return FAILED, 0
            regs[a] = i
        elif op == LOAD:
            regs[a] = src[regs[c]] if b == 0 else (dst[regs[c]] if b == 1 else tables[regs[c]])
        elif op == STORE:
            dst[regs[a]] = regs[b]
        elif op == NE:
            regs[a] = regs[b] != regs[c]
        elif op == LT:
            regs[a] = regs[b] < regs[c]
        elif op == LE:
            regs[a] = regs[b] <= regs[c]
        elif op == GT:
            regs[a] = regs[b] > regs[c]
        elif op == GE:
            regs[a] = regs[b] >= regs[c]
        elif op == NOT:
            regs[a] = regs[b] == 0
        elif op == BOOL:
            regs[a] = regs[b] != 0
        elif op == BITAND:
            regs[a] = regs[b] & regs[c]
        elif op == BITOR:
            regs[a] = regs[b] | regs[c]
        elif op == BITXOR:
            regs[a] = regs[b] ^ regs[c]
        elif op == RSHIFT:
            x, k = regs[b], regs[c]
            if k < 0:
                return FAILED, 0
            regs[a] = x >> k if k < 63 else (0 if x >= 0 else -1)
        elif op == LSHIFT:
            x, k = regs[b], regs[c]
            if k < 0 or k > 62:
                return FAILED, 0
            if x > (LARGEST >> k) or x < (SMALLEST >> k):  # Python's integers would not overflow
                return FAILED, 0
            regs[a] = x << k
        elif op == ADD:
            x, y = regs[b], regs[c]
            if (y > 0 and x > LARGEST - y) or (y < 0 and x < SMALLEST - y):
                return FAILED, 0
            regs[a] = x + y
        elif op == SUB:
            x, y = regs[b], regs[c]
            if (y < 0 and x > LARGEST + y) or (y > 0 and x < SMALLEST + y):
                return FAILED, 0
            regs[a] = x - y
        elif op == MUL:
            x, y = regs[b], regs[c]
            # checked before multiplying: LLVM may assume a signed product does not overflow
            if not (-SMALL < x < SMALL and -SMALL < y < SMALL) and x != 0 and y != 0:
                if x == SMALLEST or y == SMALLEST:
                    if x != 1 and y != 1:
                        return FAILED, 0
                elif abs(y) > LARGEST // abs(x):
                    return FAILED, 0
            regs[a] = x * y
        elif op == FLOORDIV or op == MOD:
            x, y = regs[b], regs[c]
            if y == 0 or (y == -1 and x == SMALLEST):  # Python raises; the minimum would overflow
                return FAILED, 0
            q = x // y
            r = x - q * y
            if r != 0 and (r < 0) != (y < 0):
                q -= 1  # floor, as Python's, had the division truncated
                r += y
            regs[a] = q if op == FLOORDIV else r
        elif op == MIN:
            regs[a] = min(regs[b], regs[c])
        elif op == MAX:
            regs[a] = max(regs[b], regs[c])
        elif op == NEG:
            if regs[b] == SMALLEST:
                return FAILED, 0
            regs[a] = -regs[b]
        elif op == INVERT:
            regs[a] = ~regs[b]
        elif op == ABS:
            if regs[b] == SMALLEST:
                return FAILED, 0
            regs[a] = abs(regs[b])
        elif op == POW:
            x, k = regs[b], regs[c]
            if k < 0 or x == SMALLEST:
                return FAILED, 0
            if x == 0 or x == 1:
                regs[a] = 1 if k == 0 else x
            elif x == -1:
                regs[a] = 1 if k % 2 == 0 else -1
            elif k > 63:  # |x| >= 2: past 64 bits
                return FAILED, 0
            else:
                z = np.int64(1)
                for _ in range(k):
                    if abs(z) > LARGEST // abs(x):
                        return FAILED, 0
                    z *= x
                regs[a] = z
        else:  # FAIL, or an opcode this kernel does not know
            return FAILED, 0


@njit(cache=True, nogil=True)
def _false_checks(code, starts, regs, src, dst, tables):
    """(DONE, bit k set where the program at ``starts[k]`` is false), or (FAILED, 0)."""
    mask = np.uint64(0)
    for k in range(starts.shape[0]):
        status, holds = run(code, starts[k], regs, src, dst, tables)
        if status != DONE:
            return FAILED, mask
        if holds == 0:
            mask |= np.uint64(1) << np.uint64(k)
    return DONE, mask


@njit(cache=True, nogil=True)
def _same(src, dst):
    for k in range(src.shape[0]):
        if src[k] != dst[k]:
            return False
    return True


@njit(cache=True, nogil=True)
def evaluate(words, lo, hi, cv, code, tables, nregs, label_start, label_args, arg_regs, prop_start, check_start,
             out_words, out_hashes, out_labels, out_props, out_checks, no_label):
    """For each state ``words[lo + i]``: with checks (``check_start`` not empty), bit k of
    ``out_checks[i]`` set where check k's program (starting at ``check_start[k]``, reading space
    0) is false; with labels (``label_start`` not empty), every successor at row
    ``i * nlabels + label`` of the out arrays, as ``Kernels.successors`` writes them. Label L's
    program starts at ``label_start[L]``, with registers ``arg_regs[L, k]`` set to
    ``label_args[L, k]`` (its parameters' values; a register of -1 takes none); each transition
    property's program starts at ``prop_start[k]`` and reads the state (space 0) and the successor
    (space 1). One kernel for both, rather than one each: the interpreter's compile, on an
    installation's first run, is then 10% shorter (``run`` is compiled into one kernel, not two).

    Returns (OK, 0) or (STOPPED, i): state ``lo + i`` needs Python (a program failed, an action
    that declined wrote, or a successor is outside its domain); what the states before it have
    is written."""
    size = cv[0]
    nlabels = label_start.shape[0]
    src = np.zeros(size, np.int64)
    dst = np.zeros(size, np.int64)
    regs = np.zeros(max(1, nregs), np.int64)
    for i in range(hi - lo):
        unpack(words, lo + i, src, cv)
        if check_start.shape[0]:
            status, mask = _false_checks(code, check_start, regs, src, src, tables)
            if status != DONE:
                return STOPPED, i
            out_checks[i] = mask
        for k in range(size):
            dst[k] = src[k]
        for label in range(nlabels):
            row = i * nlabels + label
            for j in range(arg_regs.shape[1]):
                if arg_regs[label, j] >= 0:
                    regs[arg_regs[label, j]] = label_args[label, j]
            status, fired = run(code, label_start[label], regs, src, dst, tables)
            if status != DONE:
                return STOPPED, i
            if fired == 0:
                if not _same(src, dst):
                    return STOPPED, i
                out_labels[row] = no_label
                continue
            if not pack(dst, out_words, out_hashes, row, cv):
                return STOPPED, i
            out_labels[row] = label
            if prop_start.shape[0]:
                status, mask = _false_checks(code, prop_start, regs, src, dst, tables)
                if status != DONE:
                    return STOPPED, i
                out_props[row] = mask
            for k in range(size):
                dst[k] = src[k]
    return OK, 0


def warm_up() -> None:
    """Compile (or load from numba's cache) ``evaluate`` for the argument types
    ``explore.bytecode_tier`` hands it, on no states. An installation's first run does this in a
    helper process (``explore.bytecode_tier.InterpreterCompile``) while it compiles the
    engine's own kernels."""
    table = np.array([1, 1, 0, 1, 0, 2, 0, 1], np.int32)  # one element in one word (layout_table)
    words = np.zeros((1, 1), np.uint64)
    code = np.array([[CONST, 0, 1, 0], [RET, 0, 0, 0]], np.int64)
    one = np.zeros(1, np.int64)
    out_words, out_hashes = np.zeros((1, 1), np.uint64), np.zeros(1, np.uint64)
    evaluate(words, 0, 0, table, code, one, 1, one, one.reshape(1, 1), one.reshape(1, 1), one, one,
             out_words[0:], out_hashes[0:], np.zeros(1, np.uint16)[0:], out_hashes[0:], out_hashes[0:], 0)


def cached() -> bool:
    """Whether numba's cache holds ``evaluate`` (an installation's first run compiles it)."""
    try:
        return os.path.exists(evaluate._cache._cache_file._index_path)
    except AttributeError:  # numba keeps its cache otherwise: compile (or load) them in the run
        return True

