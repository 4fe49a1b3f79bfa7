"""Compiled algorithms over a state graph, each beside a plain-Python reference twin.

The graph is in compressed sparse row form: the transitions of state ``v`` are
``targets[offsets[v]:offsets[v + 1]]`` with their action labels in ``labels``; states are numbered
``0..n-1``. Every algorithm takes an ``allowed`` byte mask to work on the subgraph those states
induce (liveness looks at the states where the goal does not hold). Arrays only, no Python objects:
millions of states and hundreds of millions of transitions.

The reference twins (``*_reference``) are written for reading, work on the same arrays and are
what the tests compare the kernels with (besides networkx).
"""

from __future__ import annotations

from collections import deque

import numpy as np
from numba import int64, njit


# -------------------------------------------------------------------------------------------------
# reversing a graph


@njit(cache=True)
def _fill_reverse(offsets, targets, rev_offsets, rev_sources):
    pos = rev_offsets[:-1].copy()
    for v in range(offsets.shape[0] - 1):
        for e in range(offsets[v], offsets[v + 1]):
            w = targets[e]
            rev_sources[pos[w]] = v
            pos[w] += 1


def reverse(offsets: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The transposed graph: ``(rev_offsets, rev_sources)``, predecessors of each state in order."""
    n = offsets.shape[0] - 1
    counts = np.bincount(targets, minlength=n) if targets.size else np.zeros(n, np.int64)
    rev_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=rev_offsets[1:])
    rev_sources = np.empty(targets.shape[0], np.uint32)
    _fill_reverse(offsets, targets, rev_offsets, rev_sources)
    return rev_offsets, rev_sources


# -------------------------------------------------------------------------------------------------
# reachability


@njit(cache=True)
def reach(offsets, targets, seeds, allowed, reached):
    """Mark in ``reached`` every allowed state reachable from an allowed seed (seeds included).
    Given the reversed graph, that is every state that can reach a seed. Returns how many."""
    n = offsets.shape[0] - 1
    queue = np.empty(n, np.int64)
    head = 0
    tail = 0
    for v in range(n):
        if seeds[v] and allowed[v] and not reached[v]:
            reached[v] = 1
            queue[tail] = v
            tail += 1
    while head < tail:
        v = queue[head]
        head += 1
        for e in range(offsets[v], offsets[v + 1]):
            w = targets[e]
            if allowed[w] and not reached[w]:
                reached[w] = 1
                queue[tail] = w
                tail += 1
    return tail


def reach_reference(offsets, targets, seeds, allowed) -> np.ndarray:
    n = len(offsets) - 1
    reached = np.zeros(n, np.uint8)
    queue = deque(v for v in range(n) if seeds[v] and allowed[v])
    for v in queue:
        reached[v] = 1
    while queue:
        v = queue.popleft()
        for w in targets[offsets[v]:offsets[v + 1]]:
            if allowed[w] and not reached[w]:
                reached[w] = 1
                queue.append(w)
    return reached


@njit(cache=True)
def shortest_path(offsets, targets, start, goal, allowed):
    """A shortest path inside the allowed states from ``start`` (which the caller makes sure is
    allowed) to any goal state, as the list of transition positions (``e`` with ``targets[e]`` the
    next state): empty when ``start`` is a goal, ``[-1]`` when no goal can be reached."""
    n = offsets.shape[0] - 1
    via = np.full(n, -2, np.int64)  # transition that first reached each state; -1 for the start
    queue = np.empty(n, np.int64)
    via[start] = -1
    queue[0] = start
    head, tail = 0, 1
    end = -1
    if goal[start]:
        end = start
    while head < tail and end < 0:
        v = queue[head]
        head += 1
        for e in range(offsets[v], offsets[v + 1]):
            w = targets[e]
            if allowed[w] and via[w] == -2:
                via[w] = e
                queue[tail] = w
                tail += 1
                if goal[w]:
                    end = w
                    break
    if end < 0:
        return np.full(1, -1, np.int64)
    steps = []
    v = end
    while via[v] >= 0:
        e = via[v]
        steps.append(e)
        # the source of transition e: the state whose range holds e
        lo, hi = 0, n
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if offsets[mid] <= e:
                lo = mid
            else:
                hi = mid
        v = lo
    out = np.empty(len(steps), np.int64)
    for i in range(len(steps)):
        out[i] = steps[len(steps) - 1 - i]
    return out


# -------------------------------------------------------------------------------------------------
# strongly connected components (Tarjan's algorithm with an explicit stack)


@njit(cache=True)
def strongly_connected(offsets, targets, allowed, comp):
    """Number the strongly connected components of the allowed subgraph into ``comp`` (-1 for
    states not allowed). Components come out sinks first (reverse topological order). Returns the
    number of components."""
    n = offsets.shape[0] - 1
    index = np.full(n, -1, np.int64)
    low = np.zeros(n, np.int64)
    on_stack = np.zeros(n, np.uint8)
    stack = np.empty(n, np.int64)
    frame_v = np.empty(n, np.int64)
    frame_e = np.empty(n, np.int64)
    sp = 0
    counter = 0
    ncomp = 0
    for v in range(n):
        comp[v] = -1
    for root in range(n):
        if not allowed[root] or index[root] >= 0:
            continue
        index[root] = counter
        low[root] = counter
        counter += 1
        stack[sp] = root
        sp += 1
        on_stack[root] = 1
        fp = 0
        frame_v[0] = root
        frame_e[0] = offsets[root]
        fp = 1
        while fp > 0:
            v = frame_v[fp - 1]
            e = frame_e[fp - 1]
            if e < offsets[v + 1]:
                frame_e[fp - 1] = e + 1
                w = int64(targets[e])
                if not allowed[w]:
                    continue
                if index[w] < 0:
                    index[w] = counter
                    low[w] = counter
                    counter += 1
                    stack[sp] = w
                    sp += 1
                    on_stack[w] = 1
                    frame_v[fp] = w
                    frame_e[fp] = offsets[w]
                    fp += 1
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            else:
                if low[v] == index[v]:
                    while True:
                        sp -= 1
                        w = stack[sp]
                        on_stack[w] = 0
                        comp[w] = ncomp
                        if w == v:
                            break
                    ncomp += 1
                fp -= 1
                if fp > 0:
                    u = frame_v[fp - 1]
                    if low[v] < low[u]:
                        low[u] = low[v]
    return ncomp


def strongly_connected_reference(offsets, targets, allowed) -> list[frozenset[int]]:
    """The components as sets of states, by Kosaraju's algorithm (a different method on purpose)."""
    n = len(offsets) - 1
    succ = {v: [int(w) for w in targets[offsets[v]:offsets[v + 1]] if allowed[w]] for v in range(n) if allowed[v]}
    pred: dict[int, list[int]] = {v: [] for v in succ}
    for v, ws in succ.items():
        for w in ws:
            pred[w].append(v)
    order, seen = [], set()
    for root in succ:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(succ[root]))]
        while stack:
            v, it = stack[-1]
            w = next(it, None)
            if w is None:
                stack.pop()
                order.append(v)
            elif w not in seen:
                seen.add(w)
                stack.append((w, iter(succ[w])))
    comps, assigned = [], set()
    for root in reversed(order):
        if root in assigned:
            continue
        members, todo = {root}, [root]
        assigned.add(root)
        while todo:
            v = todo.pop()
            for u in pred[v]:
                if u not in assigned:
                    assigned.add(u)
                    members.add(u)
                    todo.append(u)
        comps.append(frozenset(members))
    return comps


# -------------------------------------------------------------------------------------------------
# what a component offers: a way out, actions taken inside it, actions disabled somewhere in it


@njit(cache=True)
def component_exits(offsets, targets, comp, ncomp, allowed):
    """Per component: 1 if a transition leaves it to another allowed state's component."""
    exits = np.zeros(ncomp, np.uint8)
    for v in range(offsets.shape[0] - 1):
        c = comp[v]
        if c < 0:
            continue
        for e in range(offsets[v], offsets[v + 1]):
            w = targets[e]
            if allowed[w] and comp[w] != c:
                exits[c] = 1
                break
    return exits


NO_LEAVING = np.zeros(0, np.uint64)  # no state has a successor outside the graph


@njit(cache=True)
def _leaving_at(leaving, v):
    """The fair actions enabled in ``v`` by successors the graph leaves out (outside a state or
    action constraint), or nothing when ``leaving`` is empty (no constraint)."""
    if leaving.shape[0] == 0:
        return np.uint64(0)
    return leaving[v]


@njit(cache=True)
def _component_fairness(offsets, targets, labels, label_bit, comp, ncomp, leaving):
    taken = np.zeros(ncomp, np.uint64)
    disabled = np.zeros(ncomp, np.uint64)
    for v in range(offsets.shape[0] - 1):
        c = comp[v]
        if c < 0:
            continue
        enabled = _leaving_at(leaving, v)
        for e in range(offsets[v], offsets[v + 1]):
            w = targets[e]
            if w == v:
                continue
            bit = label_bit[labels[e]]
            enabled |= bit
            if comp[w] == c:
                taken[c] |= bit
        disabled[c] |= ~enabled
    return taken, disabled


def component_fairness(offsets, targets, labels, label_bit, comp, ncomp, leaving=NO_LEAVING):
    """Per component, two bitmasks over the fair actions (bit k = fair action k, from each label's
    ``label_bit``): ``taken``, those with a transition between two different states of the
    component; ``disabled``, those with no transition to a different state from some state of
    it. A transition back to its own state is stuttering: it neither takes nor enables an action.
    ``leaving`` (per state, or empty): the fair actions whose successors the graph leaves out,
    which enable them there all the same (``CompiledGraph.leaving_bits``)."""
    return _component_fairness(offsets, targets, labels, label_bit, comp, ncomp, leaving)


def component_fairness_reference(offsets, targets, labels, label_bit, members: frozenset[int],
                                 leaving=NO_LEAVING) -> tuple[int, int]:
    """(taken, disabled) of one component given as a set of states."""
    taken, disabled = 0, 0
    for v in members:
        enabled = int(leaving[v]) if len(leaving) else 0
        for e in range(offsets[v], offsets[v + 1]):
            w = int(targets[e])
            if w == v:
                continue
            enabled |= int(label_bit[labels[e]])
            if w in members:
                taken |= int(label_bit[labels[e]])
        disabled |= ~enabled & 0xFFFFFFFFFFFFFFFF
    return taken, disabled


@njit(cache=True)
def _enabled_bits(offsets, targets, labels, label_bit, leaving):
    n = offsets.shape[0] - 1
    out = np.zeros(n, np.uint64)
    for v in range(n):
        enabled = _leaving_at(leaving, v)
        for e in range(offsets[v], offsets[v + 1]):
            if targets[e] != v:
                enabled |= label_bit[labels[e]]
        out[v] = enabled
    return out


def enabled_bits(offsets, targets, labels, label_bit, leaving=NO_LEAVING):
    """Per state, the fair actions enabled there (bit k = fair action k): those with a transition
    to a different state, or a successor the graph leaves out (``leaving``). Strong fairness needs
    it state by state (``checker.analyses.liveness``)."""
    return _enabled_bits(offsets, targets, labels, label_bit, leaving)


def enabled_bits_reference(offsets, targets, labels, label_bit, leaving=NO_LEAVING) -> list[int]:
    return [int(np.bitwise_or.reduce([label_bit[labels[e]] for e in range(offsets[v], offsets[v + 1])
                                      if targets[e] != v] or [np.uint64(0)])) | (int(leaving[v]) if len(leaving) else 0)
            for v in range(len(offsets) - 1)]


@njit(cache=True)
def renumber(comp, number):
    """In place: each state's component ``c`` becomes ``number[c]`` (states outside any, -1, stay
    -1). The liveness analysis keeps only the fair components this way, without a second array."""
    for v in range(comp.shape[0]):
        if comp[v] >= 0:
            comp[v] = number[comp[v]]


def renumber_reference(comp, number) -> np.ndarray:
    return np.array([number[c] if c >= 0 else -1 for c in comp], np.int64)


@njit(cache=True)
def _quiet_states(offsets, targets, labels, label_bit, comp, c, mask, out, leaving):
    count = 0
    for v in range(offsets.shape[0] - 1):
        if comp[v] != c:
            continue
        enabled = _leaving_at(leaving, v)
        for e in range(offsets[v], offsets[v + 1]):
            if targets[e] != v:
                enabled |= label_bit[labels[e]]
        if enabled & mask == 0:
            out[v] = 1
            count += 1
    return count


def quiet_states(offsets, targets, labels, label_bit, comp, c, mask, out, leaving=NO_LEAVING):
    """Mark in ``out`` the states of component ``c`` where no action of ``mask`` can change the
    state (all of them disabled there, ``leaving`` counted as in ``enabled_bits``). Returns how many."""
    return _quiet_states(offsets, targets, labels, label_bit, comp, c, mask, out, leaving)


@njit(cache=True)
def transition_inside(offsets, targets, labels, label_bit, comp, c, bit):
    """A transition between two different states of component ``c`` by an action of ``bit``; -1 if none."""
    for v in range(offsets.shape[0] - 1):
        if comp[v] != c:
            continue
        for e in range(offsets[v], offsets[v + 1]):
            w = targets[e]
            if w != v and comp[w] == c and label_bit[labels[e]] & bit:
                return e
    return -1
