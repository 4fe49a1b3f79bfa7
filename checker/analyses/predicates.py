"""Evaluate a spec's ``Predicate`` on every state of the state graph, a batch at a time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterator, Sequence

import numpy as np

from kraftcheck.checker.errors import KraftcheckError, SpecError, spec_raised
from kraftcheck.checker.analyses.state_graph import CompiledGraph
from kraftcheck.checker.spec import Predicate

BATCH = 1 << 18


def flat_rows(kernels: Any, words: np.ndarray) -> np.ndarray:
    """Packed states as flat int32 rows (constants filled in). One thread: writing the rows is
    bound by memory bandwidth, and two threads measured no faster."""
    module = getattr(kernels, "module", None)
    words = np.ascontiguousarray(words)
    if module is None:
        return np.array(kernels.unpack(words), np.int32).reshape(words.shape[0], kernels.model.layout.size)
    rows = np.empty((words.shape[0], kernels.model.layout.size), np.int32)
    module.unpack_rows(words, rows, kernels.const_values)
    return rows


class WideColumns(Mapping):
    """A batch of unpacked int32 rows as the columns ``Predicate.holds`` reads, each field widened
    to int64 when first read: the predicate computes as it does on the initial states, in traces and
    in replay (``Layout.columns`` of int64 rows), where numpy arithmetic on int32 would wrap at 2**31
    (``v["b"] * v["b"]``). Only the fields a predicate reads are widened, so a batch of a wide layout
    does not double in memory."""

    def __init__(self, layout, rows: np.ndarray):
        self._layout, self._rows, self._wide = layout, rows, {}

    def __getitem__(self, name: str) -> np.ndarray:
        column = self._wide.get(name)
        if column is None:
            where = self._layout.field_slices[name]  # a KeyError for a field the spec lacks, as a dict's
            shape = next(f.shape for f in self._layout.fields if f.name == name)
            column = self._rows[:, where].astype(np.int64).reshape((self._rows.shape[0],) + shape)
            self._wide[name] = column
        return column

    def __iter__(self) -> Iterator[str]:
        return (f.name for f in self._layout.fields)

    def __len__(self) -> int:
        return len(self._layout.fields)


def evaluate(graph: CompiledGraph, kernels: Any, predicate: Predicate, batch: int = BATCH) -> np.ndarray:
    """A uint8 array: 1 where ``predicate`` holds, per state of ``graph``."""
    return evaluate_many(graph, kernels, [predicate], batch)[0]


def evaluate_many(graph: CompiledGraph, kernels: Any, predicates: Sequence[Predicate],
                  batch: int = BATCH) -> list[np.ndarray]:
    """``evaluate`` for several predicates, unpacking each batch of states once."""
    layout = graph.model.layout
    out = [np.zeros(graph.size, np.uint8) for _ in predicates]
    for lo in range(0, graph.size, batch):
        words = graph.states[lo: lo + batch]
        columns = WideColumns(layout, flat_rows(kernels, words))
        for predicate, mask in zip(predicates, out):
            try:
                value = np.asarray(predicate.holds(columns))
            except KraftcheckError:
                raise
            except Exception as e:  # noqa: BLE001 - the spec's own function raised: its error (exit 2), no verdict
                error = spec_raised(f"the predicate '{predicate.description}'", e)
                error.python_only = False  # predicates run on numpy arrays only: no other tier to leave it to
                raise error from None
            if value.shape != (words.shape[0],):
                raise SpecError(f"the predicate '{predicate.description}' returned shape {value.shape} for "
                                f"{words.shape[0]} states; it must return one boolean per state (see Predicate)")
            mask[lo: lo + words.shape[0]] = value.astype(bool)
    return out


def check_on(layout, predicate: Predicate, flats: Sequence[tuple[int, ...]]) -> None:
    """Evaluate ``predicate`` on a few states (the initial ones) before any long work, so that a
    misspelt field or a result of the wrong shape is a ``SpecError`` now, not after exploring."""
    rows = np.array(flats, np.int64).reshape(len(flats), layout.size)
    try:
        value = np.asarray(predicate.holds(layout.columns(rows)))
    except KeyError as e:
        raise SpecError(f"the predicate '{predicate.description}' reads field {e}, which the spec does not have "
                        f"(fields: {', '.join(f.name for f in layout.fields)})") from None
    except Exception as e:  # noqa: BLE001 - any failure of the spec's own function, said in one line
        raise SpecError(f"the predicate '{predicate.description}' fails on the initial states: "
                        f"{type(e).__name__}: {e}") from None
    if value.shape != (len(flats),):
        raise SpecError(f"the predicate '{predicate.description}' returned shape {value.shape} for {len(flats)} "
                        "states; it must return one boolean per state (see Predicate)")


def evaluate_one(layout, predicate: Predicate, flat: tuple[int, ...]) -> bool:
    """``predicate`` on one state (flat values), for traces and the networkx reference."""
    value = np.asarray(predicate.holds(layout.columns(np.array([flat], np.int64))))
    return bool(value.reshape(-1)[0])
