"""Memory for the visited set's shard tables that grows in place.

A shard grows by moving its entries into a larger table. A table allocated afresh takes pages the
process has never touched: the kernel zeroes each one at its first touch (and in a virtual machine
the host may have to back it first), while the old table's pages go back to the system. A shard
that doubles from small touches about twice its final bytes over a run, and one that grows by 1.15
at a time (a set past 1 GiB) about seven times. Here a table of MAPPED_FROM_BYTES or more lives in
an anonymous private mapping several times its size: a growth takes more of the mapping, whose
pages stay where they are, and only the added ones are new; past the mapping's end ``mremap``
enlarges it (Python's ``mmap.resize``), keeping its contents. The entries are then rehashed
where they are (``visited.rehash_in_place``), or copied aside first by a caller whose table has
no in-place rehash. Smaller tables are numpy arrays: a mapping each would spend the system's
limit on mappings, and their pages are few.

A mapping cannot be resized while an array still views it: ``grow`` then raises ``BufferError``
rather than leave the view pointing at memory given back. A caller holds no view of a shard's
table across its growth.
"""

from __future__ import annotations

import mmap

import numpy as np

MAPPED_FROM_BYTES = 1 << 21  # a table this large or larger lives in a mapping of its own
# A mapping holds this many times its table: room for two doublings or nine growths by 1.15
# before it must be enlarged (and may move). Pages never touched cost no memory.
RESERVE_FACTOR = 4


def _mapping(nbytes: int) -> mmap.mmap:
    """An anonymous private mapping of ``nbytes``, on huge pages where the system allows: a
    visited-set probe is a random access, and huge pages spare it most TLB misses (numpy asks
    the same for its large arrays)."""
    try:
        area = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, OverflowError) as err:  # more than the system will map, or than an address holds
        raise MemoryError(f"could not map {nbytes:,} bytes for the visited set: {err}") from err
    _huge_pages(area)
    return area


def _huge_pages(area: mmap.mmap) -> None:
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            area.madvise(mmap.MADV_HUGEPAGE)
        except OSError:  # a kernel without transparent huge pages refused a hint, nothing more
            pass


class ShardTable:
    """One shard's table, ``array``: ``rows`` x ``width`` uint64 slots, each ``fill`` at first,
    which ``grow`` enlarges."""

    def __init__(self, rows: int, width: int, fill: np.uint64) -> None:
        if rows < 1 or width < 1:
            raise ValueError(f"a shard table has at least one row and one column, not {rows} x {width}")
        self.width = width
        self.fill = np.uint64(fill)
        self._area: mmap.mmap | None = None
        self.array = self._new(rows)

    @property
    def mapped(self) -> bool:
        """Whether the table lives in a mapping (``grow`` then enlarges it and returns None)."""
        return self._area is not None

    def _bytes(self, rows: int) -> int:
        return rows * self.width * 8

    def _new(self, rows: int) -> np.ndarray:
        """A table of ``rows`` rows, every slot ``fill``: a numpy array if small, else the start
        of a new mapping."""
        if self._bytes(rows) < MAPPED_FROM_BYTES:
            return np.full((rows, self.width), self.fill, np.uint64)
        self._area = _mapping(RESERVE_FACTOR * self._bytes(rows))
        return self._filled_view(rows)

    def _view(self, rows: int) -> np.ndarray:
        return np.frombuffer(self._area, np.uint64, rows * self.width).reshape(rows, self.width)

    def _filled_view(self, rows: int) -> np.ndarray:
        array = self._view(rows)
        array.fill(self.fill)
        return array

    def grow(self, rows: int, keep: bool) -> np.ndarray | None:
        """Enlarge the table to ``rows`` rows. A small table, or one that moves into a mapping
        now, becomes a new array, every slot ``fill``, and the old one is returned: the caller
        rehashes its entries into ``array``. Otherwise the mapping grows, and None is returned:
        with ``keep`` the first rows hold the entries as they were, for the caller to rehash in
        place (``visited.rehash_in_place``), and the added rows are ``fill``; without, every
        slot is ``fill`` (the caller has copied the entries aside)."""
        old_rows = self.array.shape[0]
        if rows <= old_rows:
            raise ValueError(f"a shard table grows: {rows} rows is not more than its {old_rows}")
        if self._area is None:
            old, self.array = self.array, self._new(rows)
            return old
        if self._bytes(rows) > len(self._area):
            self.array = None  # the mapping's only view here: it cannot be resized while one is left
            try:
                self._area.resize(RESERVE_FACTOR * self._bytes(rows))  # mremap: the pages keep their contents
            except BaseException as err:
                self.array = self._view(old_rows)
                if isinstance(err, (OSError, OverflowError)):
                    raise MemoryError(f"could not grow a shard of the visited set to {self._bytes(rows):,} bytes: "
                                      f"{err}") from err
                raise  # BufferError: a view of the table is held elsewhere
            _huge_pages(self._area)
        self.array = self._view(rows)
        self.array[old_rows if keep else 0:].fill(self.fill)
        return None
