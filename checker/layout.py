"""State encoding derived from a spec's fields.

Three forms of one state:

* *flat*: a tuple of Python ints, one per field element in declaration order (constants included);
  hashable, used by the reference explorer and by traces;
* *structured*: a numpy structured value that compiled actions read and write by field name: a
  state's (``s``) of int32 elements (``ELEMENT``), a successor's (``t``) of int64 elements
  (``SUCCESSOR_ELEMENT``);
* *packed*: ``nwords`` uint64 words, each element in ``bits`` bits, at most 63 bits per word so a
  word of all ones never occurs (the visited set uses it to mark an empty slot).

The flat and structured forms hold every value as the spec writes it (-1 is -1); only the packed
form holds an element as its distance from the field's smallest value (``Field.lo``), so that a
field of ``-1..2`` takes two bits.
"""

from __future__ import annotations

import operator
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from kraftcheck.checker.errors import SpecError, defined_at
from kraftcheck.checker.spec import Field

WORD_BITS = 63

# A state's element: every domain fits it (``spec.Field``), and states are read far more than
# written (each action's kernel passes over a chunk's unpacked states), so it stays narrow.
ELEMENT = np.int32
# A successor's element, which actions write: wider than any domain, so that a value an action
# computes past the int32 range reaches the domain check as computed rather than wrapped into the
# domain (the interpreted tier, which writes Python ints, refuses it, and so must this). Source
# states stay int32: every action's kernel streams a chunk of them from memory, and at int64 that
# traffic doubles (bench/RESULTS.md, "State rows of int64 elements: successors only").
SUCCESSOR_ELEMENT = np.int64


@dataclass(frozen=True)
class Element:
    """One integer of the state: where it lives in the structured state and in the packed words."""

    field: Field
    flat: int  # position in the flat tuple and in a structured state's view as an array
    bits: int
    word: int
    shift: int


def _structured_dtype(fields: list[Field], element: type) -> np.dtype:
    return np.dtype([(f.name, element, f.shape) if f.shape else (f.name, element) for f in fields])


def _filled(dtype: np.dtype, element: type, flat: tuple[int, ...]) -> np.recarray:
    """One structured state of ``dtype`` holding ``flat``."""
    structured = np.zeros(1, dtype).view(np.recarray)
    structured.view(element)[:] = flat
    return structured


class Layout:
    """Everything the engine needs to move a state between its flat, structured and packed forms."""

    def __init__(self, fields: Iterable[Field]) -> None:
        self.fields: list[Field] = list(fields)
        names = [f.name for f in self.fields]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise SpecError(f"duplicate field names: {', '.join(sorted(dupes))}")
        if not self.fields:
            raise SpecError("a spec needs at least one field")
        self.dtype = _structured_dtype(self.fields, ELEMENT)
        self.successor_dtype = _structured_dtype(self.fields, SUCCESSOR_ELEMENT)
        self.elements: list[Element] = []
        self.field_slices: dict[str, slice] = {}
        word, used, flat = 0, 0, 0
        for f in self.fields:
            start = flat
            for _ in range(f.size):
                if f.bits and used + f.bits > WORD_BITS:
                    word, used = word + 1, 0
                self.elements.append(Element(f, flat, f.bits, word, used))
                used += f.bits
                flat += 1
            self.field_slices[f.name] = slice(start, flat)
        self.size = flat
        self.nwords = word + 1
        self.state_bits = sum(e.bits for e in self.elements)
        for dtype, element in ((self.dtype, ELEMENT), (self.successor_dtype, SUCCESSOR_ELEMENT)):
            if dtype.itemsize != np.dtype(element).itemsize * self.size:  # the views below rely on it
                raise SpecError("internal: record layout is not a dense array of its elements")
        self.consts = tuple((e.flat, e.field.const) for e in self.elements if e.field.const is not None)
        # each element's allowed values as (lo, hi) (a constant's: (c, c)), for check_domains
        self._bounds = [(e.field.lo, e.field.hi) if e.field.const is None else (e.field.const, e.field.const)
                        for e in self.elements]
        # for the Python states of to_object: scalar fields (name, flat position); array fields
        # (name, start, stop, shape or None for one axis) in the buffer
        self._scalars = [(f.name, self.field_slices[f.name].start) for f in self.fields if not f.shape]
        self._arrays = [(f.name, self.field_slices[f.name].start, self.field_slices[f.name].stop,
                         f.shape if len(f.shape) > 1 else None) for f in self.fields if f.shape]
        self._scalar_getter = _getter([name for name, _ in self._scalars])
        self._array_getter = _getter([name for name, *_ in self._arrays])

    # -- flat <-> dict / object
    def flat_from_values(self, values: Mapping[str, Any]) -> tuple[int, ...]:
        """A flat state from field values (scalars or nested lists); missing fields are 0."""
        unknown = set(values) - set(self.field_slices)
        if unknown:
            raise SpecError(f"unknown field(s) in a state: {', '.join(sorted(unknown))}")
        out: list[int] = []
        for f in self.fields:
            if f.const is not None:
                # a Const holds its declared value in every state: one given another value here would
                # be explored with the declared one, from another state than the spec wrote
                if f.name in values and not (_integers(f, values[f.name]) == f.const).all():
                    raise SpecError(f"field {f.name} is a Const, {f.const} in every state; an initial state gives it "
                                    f"{values[f.name]!r}: leave it out of initial_states() or change the Const in "
                                    "fields()")
                out.extend([f.const] * f.size)
                continue
            v = values.get(f.name, 0)
            # the common forms without numpy (a model may have 100,000 initial states)
            if not f.shape and type(v) in (int, bool):
                out.append(int(v))
                continue
            if f.shape and _extend_nested(out, v, f.shape):
                continue
            arr = _integers(f, v)
            if arr.shape == () and f.shape:
                arr = np.full(f.shape, int(arr))
            if arr.shape != f.shape:
                raise SpecError(f"field {f.name}: expected shape {f.shape}, got {arr.shape}")
            out.extend(int(x) for x in arr.reshape(-1))
        self.check_domains(out)
        return tuple(out)

    def values(self, flat: tuple[int, ...]) -> dict[str, Any]:
        """Raw field values: ints for scalars, nested lists for arrays."""
        return {f.name: self._shaped(f, list(flat[self.field_slices[f.name]])) for f in self.fields}

    def columns(self, flat_rows: np.ndarray) -> dict[str, np.ndarray]:
        """A batch of states (an (n, size) integer array, one flat state per row) as columns: field
        name -> a view of shape (n,) + the field's shape. What ``Predicate.holds`` receives."""
        flat_rows = np.asarray(flat_rows).reshape(-1, self.size)
        n = flat_rows.shape[0]
        return {f.name: flat_rows[:, self.field_slices[f.name]].reshape((n,) + f.shape) for f in self.fields}

    def show(self, flat: tuple[int, ...], include_consts: bool = False) -> dict[str, Any]:
        """Field values as a person reads them (enum labels, set members, booleans)."""
        out = {}
        for f in self.fields:
            if f.const is not None and not include_consts:
                continue
            shown = [f.show_value(v) for v in flat[self.field_slices[f.name]]]
            out[f.name] = self._shaped(f, shown)
        return out

    @staticmethod
    def _shaped(f: Field, items: list[Any]) -> Any:
        if not f.shape:
            return items[0]
        arr = np.empty(len(items), dtype=object)
        arr[:] = items
        return arr.reshape(f.shape).tolist()

    def to_object(self, flat: tuple[int, ...], read_only: bool = False) -> "State":
        """A mutable Python state for the interpreted tier, the reference explorer and trace
        stepping: scalar fields as ints, array fields as numpy int64 arrays of their shape (views
        of one buffer), so that a spec's function reads and writes them as it does a compiled
        structured state's: ``s.g[i, j]``, ``s.g[i][j]``, slices, ``.shape``, numpy's array methods
        (``s.c.sum()``, ``.any()``, ``.copy()``) and operators. ``read_only``: its arrays cannot be
        written (numpy's ValueError), nor any view of them, though a copy can (``state_copier``):
        the source state ``s`` handed to a spec's function, which a write through a view of a
        field would change unseen."""
        buf = np.array(flat, np.int64)
        if read_only:
            buf.flags.writeable = False
        state = State()
        d = state.__dict__
        for name, pos in self._scalars:
            d[name] = flat[pos]
        views = tuple(buf[a:b] if shape is None else buf[a:b].reshape(shape) for _, a, b, shape in self._arrays)
        for (name, *_), view in zip(self._arrays, views):
            d[name] = view
        state._flat, state._views = buf, views
        return state

    def from_object(self, obj: Any) -> tuple[int, ...]:
        """The flat state of a Python state (``to_object``'s, or any object with the fields as
        attributes: ints, nested lists or arrays)."""
        views = getattr(obj, "_views", None)
        d = obj.__dict__
        if views is not None and all(map(operator.is_, self._array_getter(d), views)):
            out = obj._flat.tolist()  # every array field written in place, into the buffer
            for name, pos in self._scalars:
                out[pos] = int(d[name])
            return tuple(out)
        out: list[int] = []
        for f in self.fields:
            v = getattr(obj, f.name)
            if not f.shape:
                out.append(int(v))
            elif not _extend_nested(out, v, f.shape):  # nested lists of the field's shape
                out.extend(int(x) for x in np.asarray(v, dtype=np.int64).reshape(-1))
        return tuple(out)

    def unchanged(self, after: "State", before: "State") -> bool:
        """Whether ``after``, a copy of ``before`` (``state_copier``) that an action was handed,
        still holds ``before``'s values."""
        a, b = after.__dict__, before.__dict__
        if self._scalar_getter(a) != self._scalar_getter(b):
            return False
        if not all(map(operator.is_, self._array_getter(a), after._views)):
            return self.from_object(after) == self.from_object(before)
        return self._arrays == [] or bool(np.array_equal(after._flat, before._flat))

    # -- flat <-> structured
    def new_structured(self, n: int) -> np.recarray:
        return np.zeros(n, self.dtype).view(np.recarray)

    def structured_from_flat(self, flat: tuple[int, ...]) -> np.recarray:
        return _filled(self.dtype, ELEMENT, flat)

    def successor_structured_from_flat(self, flat: tuple[int, ...]) -> np.recarray:
        """``flat`` as the structured successor an action writes (``t``), of SUCCESSOR_ELEMENT."""
        return _filled(self.successor_dtype, SUCCESSOR_ELEMENT, flat)

    # -- flat <-> packed
    def check_domains(self, flat: Iterable[int], where: str = "", step: Any = None) -> None:
        """Refuse a state with a value outside its field's domain (SpecError). ``step``: the action
        instance (a ``Label``) that produced it, named with its function's file and line; both are
        put into words only on a refusal, never on the path of a state that fits."""
        flat = tuple(flat)
        for (lo, hi), v in zip(self._bounds, flat):
            if not lo <= v <= hi:
                break
        else:
            return
        defined = ""
        if step is not None:
            where = f"after {step}: "
            defined = f" (action {step.action.name} at {defined_at(step.action.fn)})"
        for e, v in zip(self.elements, flat):  # say which, and how to mend it
            f = e.field
            if f.const is not None:
                if v != f.const:
                    raise SpecError(f"{where}constant field {f.name} changed to {v} (fixed at {f.const}): a Const "
                                    f"is a per-run setting, which actions read and never write{defined}")
            elif not f.lo <= v <= f.hi:
                what = "make the action's guard keep it inside" if where else "keep the value inside it"
                raise SpecError(f"{where}field {self.element_name(e)} = {v} is outside its domain {f.lo}..{f.hi}: "
                                f"widen the field's range in fields(), or {what}{defined}")

    def element_name(self, e: Element) -> str:
        f = e.field
        if not f.shape:
            return f.name
        idx = np.unravel_index(e.flat - self.field_slices[f.name].start, f.shape)
        return f.name + "".join(f"[{f.position_label(axis, int(i))}]" for axis, i in enumerate(idx))

    def pack(self, flat: tuple[int, ...]) -> tuple[int, ...]:
        """Reference packing in plain Python (the compiled packer must agree with it)."""
        self.check_domains(flat)
        words = [0] * self.nwords
        for e, v in zip(self.elements, flat):
            if e.bits:
                words[e.word] |= v - e.field.lo << e.shift
        return tuple(words)

    def pack_many(self, flats: Sequence[tuple[int, ...]]) -> np.ndarray:
        """``pack`` of every state of ``flats`` as rows of a uint64 array, by columns: one by one
        in Python, a model's many initial states wait for it. The words are ``pack``'s,
        and a state outside its domains raises ``pack``'s error of the first such state."""
        words = np.zeros((len(flats), self.nwords), np.uint64)
        try:
            values = np.array(flats, dtype=np.int64).reshape(len(flats), self.size)
        except (OverflowError, ValueError):  # past int64, or not one int per element: as pack says it
            for r, flat in enumerate(flats):
                words[r] = self.pack(flat)
            return words
        inside = np.ones(len(flats), bool)
        for e in self.elements:
            column, f = values[:, e.flat], e.field
            inside &= (column == f.const) if f.const is not None else (column >= f.lo) & (column <= f.hi)
        if not inside.all():
            self.check_domains(flats[int(np.argmin(inside))])
        for e in self.elements:
            if e.bits:
                words[:, e.word] |= (values[:, e.flat] - e.field.lo).astype(np.uint64) << np.uint64(e.shift)
        return words

    def unpack(self, words: Iterable[int]) -> tuple[int, ...]:
        words = [int(w) for w in words]
        out = []
        for e in self.elements:
            if e.field.const is not None:
                out.append(e.field.const)
            elif e.bits:
                out.append(e.field.lo + (words[e.word] >> e.shift & ((1 << e.bits) - 1)))
            else:
                out.append(e.field.lo)
        return tuple(out)


def _extend_nested(out: list[int], v: Any, shape: tuple[int, ...]) -> bool:
    """Append the ints of ``v``, nested lists of exactly ``shape``, in row-major order, and say
    True; say False and append nothing if ``v`` is anything else (then numpy flattens it)."""
    if not isinstance(v, list) or len(v) != shape[0]:
        return False
    if len(shape) == 1:
        try:  # operator.index: an integer (Python's or numpy's, a bool), never a float cut to one
            out.extend(list(map(operator.index, v)))
        except (TypeError, ValueError):  # an item that is no integer (a list: the wrong shape; a float)
            return False
        return True
    mark = len(out)
    for item in v:
        if not _extend_nested(out, item, shape[1:]):
            del out[mark:]
            return False
    return True


def _integers(f: Field, v: Any) -> np.ndarray:
    """The value ``v`` given for field ``f`` in an initial state as an int64 array, refused
    (SpecError) unless every element is an integer: numpy's int64 conversion cut 0.5 to 0 (a run
    from another state than the spec wrote, in silence) and raised on a string."""
    try:
        arr = np.asarray(v)
    except ValueError:  # nested lists of ragged lengths ([1, [0]]): no array at all
        arr = np.asarray(None)
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64)
    if arr.dtype.kind == "O":  # integers past int64 (refused by the domain check as they are), or a mix
        try:
            return np.array([operator.index(x) for x in arr.reshape(-1)], dtype=object).reshape(arr.shape)
        except TypeError:
            pass
    label = v if isinstance(v, str) and f.labels and v in f.labels else f.labels[0] if f.labels else None
    labels = f" (an Enum's value is the index of its label: {label!r} is {f.labels.index(label)})" \
        if f.kind == "enum" and label is not None and arr.dtype.kind == "U" else ""
    raise SpecError(f"field {f.name}: an initial state gives it {v!r}, which is not "
                    f"{'an integer' if not f.shape else 'made of integers'}{labels}: give "
                    f"{'an int' if not f.shape else f'integers in the shape {f.shape}'} in initial_states()")


def _getter(names: list[str]) -> Callable[[dict], tuple]:
    """A function from a state's ``__dict__`` to the tuple of these fields' values."""
    if not names:
        return lambda d: ()
    if len(names) == 1:
        name = names[0]
        return lambda d: (d[name],)
    return operator.itemgetter(*names)


class State(types.SimpleNamespace):
    """A state as the interpreted tier hands it to a spec's function (``Layout.to_object``): its
    fields as attributes; the array fields are views of one int64 buffer, ``_flat`` (kept out of
    the attributes, as ``_views``, the views as made)."""

    __slots__ = ("_flat", "_views")


def state_copier(layout: Layout) -> Callable[[State], State]:
    """A function that copies a state of ``to_object`` (one buffer copy, new views; much faster
    than deepcopy), which the interpreted tier and trace stepping call once per action instance
    per state."""
    arrays = layout._arrays

    def copy(state: State) -> State:
        buf = state._flat.copy()
        out = State()
        d = out.__dict__
        d.update(state.__dict__)
        views = tuple(buf[a:b] if shape is None else buf[a:b].reshape(shape) for _, a, b, shape in arrays)
        for (name, *_), view in zip(arrays, views):
            d[name] = view
        out._flat, out._views = buf, views
        return out

    return copy
