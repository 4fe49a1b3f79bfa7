"""Dense state numbers: a hash table from packed states to ids ``0, 1, 2, ...`` in first-seen order.

The visited set (``visited.py``) only answers "seen before?"; recording the state graph needs the
*number* of every successor, old or new. Here the states themselves sit in one array, in id order
(row ``i`` is state ``i``), and the open-addressing table holds only a 32-bit id per slot: 4 bytes
a slot at a load of at most one half, so 8 to 16 bytes a state beside the packed words.

Ids are given serially, in input order, so they are the breadth-first numbers the engine gives
(first occurrences in (source state, label) order) whatever the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint32, uint64

from kraftcheck.checker.kernels.hashing import fingerprint_row
from kraftcheck.checker.kernels.rows import same_row
from kraftcheck.checker.kernels.visited import restore_from

NO_ID = np.uint32(0xFFFFFFFF)
_NO_MARKS = np.zeros(0, np.uint8)
MAX_STATES = 0xFFFFFFFF - 1  # ids are uint32; the all-ones id marks an empty slot


@njit(cache=True)
def index_rows(table, states, nstates, words, hashes, rows, nrows, ids, parent, parent_label, first, stride, labels,
               is_new):
    """Give ``words[rows[:nrows]]`` their ids (into ``ids[row]``); a state not seen before gets the
    next id, its words are appended to ``states``, its parent (``first + row // stride``) and
    label recorded and ``is_new[row]`` set (when ``is_new`` is not empty; the caller zeroes it).
    Returns the new number of states. The caller leaves room for ``nrows`` more."""
    mark = is_new.shape[0] > 0
    mask = uint64(table.shape[0] - 1)
    nw = words.shape[1]
    for j in range(nrows):
        r = rows[j]
        slot = hashes[r] & mask
        while True:
            sid = table[slot]
            if sid == NO_ID:
                for k in range(nw):
                    states[nstates, k] = words[r, k]
                table[slot] = uint32(nstates)
                ids[r] = nstates
                parent[nstates] = first + r // stride
                parent_label[nstates] = labels[r]
                if mark:
                    is_new[r] = 1
                nstates += 1
                break
            if same_row(states, sid, words, r):
                ids[r] = sid
                break
            slot = (slot + uint64(1)) & mask
    return nstates


@njit(cache=True)
def _rebuild(table, states, nstates):
    mask = uint64(table.shape[0] - 1)
    for i in range(nstates):
        slot = fingerprint_row(states, i) & mask
        while table[slot] != NO_ID:
            slot = (slot + uint64(1)) & mask
        table[slot] = uint32(i)


class StateIndex:
    """Python face of the table: growth, validation, and the states by id."""

    def __init__(self, nwords: int, capacity: int = 1 << 12) -> None:
        if not 1 <= nwords <= 64:
            raise ValueError("a packed state has 1 to 64 words")
        self.nwords = nwords
        self.count = 0
        self.states = np.empty((capacity, nwords), np.uint64)
        self.parent = np.empty(capacity, np.int64)
        self.parent_label = np.empty(capacity, np.uint16)
        self.table = np.full(_table_size(capacity), NO_ID, np.uint32)

    def __len__(self) -> int:
        return self.count

    @property
    def nbytes(self) -> int:
        return self.states.nbytes + self.parent.nbytes + self.parent_label.nbytes + self.table.nbytes

    def insert(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int | None = None,
               is_new: np.ndarray | None = None) -> np.ndarray:
        """Number ``words[rows[:nrows]]`` as states without a parent (initial states); a uint8
        array over ``words``' rows, 1 on first occurrences (``is_new`` reused if given)."""
        nrows = rows.shape[0] if nrows is None else nrows
        if is_new is None:
            is_new = np.zeros(words.shape[0], np.uint8)
        before = self.count
        ids = np.empty(words.shape[0], np.int64)
        self.add(words, hashes, rows, nrows, ids, 0, 1 << 62, np.zeros(words.shape[0], np.uint16), is_new)
        self.parent[before: self.count] = -1
        return is_new

    def restore(self, words: np.ndarray) -> None:
        """Number every state of ``words`` (a level of a checkpoint) as ``insert`` does."""
        restore_from(self, words)

    def reserve(self, more: int) -> None:
        """Make room for ``more`` new states (arrays double; the table keeps its load under 1/2)."""
        need = self.count + more
        if need > MAX_STATES:
            raise OverflowError(f"more than {MAX_STATES} states do not fit 32-bit state ids")
        if need > self.states.shape[0]:
            cap = max(need, 2 * self.states.shape[0])
            self.states = _grown(self.states, cap, self.count)
            self.parent = _grown(self.parent, cap, self.count)
            self.parent_label = _grown(self.parent_label, cap, self.count)
        if 2 * need > self.table.shape[0]:
            self.table = np.full(_table_size(need), NO_ID, np.uint32)
            _rebuild(self.table, self.states, self.count)

    def add(self, words: np.ndarray, hashes: np.ndarray, rows: np.ndarray, nrows: int, ids: np.ndarray,
            first: int, stride: int, labels: np.ndarray, is_new: np.ndarray | None = None) -> int:
        """Number ``words[rows[:nrows]]`` (see ``index_rows``); returns how many were new. With
        ``is_new`` (uint8 over ``words``' rows), first occurrences are marked there, zeroed first."""
        if words.ndim != 2 or words.shape[1] != self.nwords or words.dtype != np.uint64:
            raise TypeError(f"add() needs a 2-D uint64 array with {self.nwords} words per row")
        if rows.dtype != np.int64 or ids.dtype != np.int64 or hashes.dtype != np.uint64:
            raise TypeError("add() needs int64 rows and ids and uint64 fingerprints")
        if is_new is None:
            is_new = _NO_MARKS
        else:
            if is_new.dtype != np.uint8 or is_new.shape[0] < words.shape[0]:
                raise TypeError("add() needs is_new as a uint8 array with one entry per row of words")
            is_new[: words.shape[0]] = 0
        self.reserve(nrows)
        before = self.count
        self.count = index_rows(self.table, self.states, self.count, words, hashes, rows, nrows, ids,
                                self.parent, self.parent_label, first, stride, labels, is_new)
        return self.count - before

    def trim(self) -> None:
        """Drop the spare capacity (after the last state was added)."""
        self.states = self.states[: self.count].copy()
        self.parent = self.parent[: self.count].copy()
        self.parent_label = self.parent_label[: self.count].copy()


def _table_size(states: int) -> int:
    size = 16
    while size < 2 * states:
        size *= 2
    return size


def _grown(a: np.ndarray, cap: int, used: int) -> np.ndarray:
    out = np.empty((cap,) + a.shape[1:], a.dtype)
    out[:used] = a[:used]
    return out
