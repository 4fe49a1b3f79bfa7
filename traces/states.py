"""States as a person reads them, and back: the readable form stored in trace files.

A trace node holds each non-constant field under its own name. Values are shown the way the spec
declares them (enum labels, set members as lists, booleans, integers as written: -1 is -1); an
axis with labels (``index_labels`` for the first, ``axis_labels`` for any) becomes a mapping from
those labels (``{"rm1": "prepared", ...}``), an axis without stays a list. Decoding is strict and
never evaluates anything: every error names the field element (``rm_state[rm2]``) so a tampered
file is pinned to the exact value.

Fingerprints identify a state across runs and machines: the first 8 bytes of BLAKE2b over the flat
state (every element, constants included, in declaration order) as signed 64-bit little-endian
integers, written as 16 hex digits.
"""

from __future__ import annotations

import hashlib
import itertools
import struct
from typing import Any, Mapping, Sequence

from kraftcheck.checker.layout import Layout
from kraftcheck.checker.spec import Field


class DecodeError(ValueError):
    """A readable value that does not fit its field; ``element`` names the value."""

    def __init__(self, element: str, reason: str) -> None:
        super().__init__(f"{element}: {reason}")
        self.element = element
        self.reason = reason


def fingerprint(flat: Sequence[int]) -> str:
    """The stable fingerprint of a flat state (see the module docstring)."""
    digest = hashlib.blake2b(struct.pack(f"<{len(flat)}q", *flat), digest_size=8)
    return digest.hexdigest()


def state_fields(layout: Layout) -> list[Field]:
    """The fields a trace holds: every field but the constants (they are the run's settings)."""
    return [f for f in layout.fields if f.const is None]


def element_name(field: Field, index: Sequence[int]) -> str:
    """``rm_state[rm2]``, ``log[b1][0]``, ``votes[a1][0][v2]``: each axis by its label when it
    has them, else by number."""
    return field.name + "".join(f"[{field.position_label(axis, i)}]" for axis, i in enumerate(index))


def element_names(field: Field) -> list[str]:
    """The names of a field's elements in flat order."""
    if not field.shape:
        return [field.name]
    return [element_name(field, idx) for idx in itertools.product(*(range(n) for n in field.shape))]


def lane_selector(element: str) -> tuple[str, str]:
    """(``field[label]``, ``field``): the two selectors an element can be assigned to a lane by."""
    field = element.split("[", 1)[0]
    rest = element[len(field):]
    first = rest[: rest.index("]") + 1] if rest else ""
    return field + first, field


# ----------------------------------------------------------------------------------------------
# flat -> readable


def readable_state(layout: Layout, flat: Sequence[int]) -> dict[str, Any]:
    """The readable form of a flat state (constants left out)."""
    out: dict[str, Any] = {}
    for f in state_fields(layout):
        items = [f.show_value(v) for v in flat[layout.field_slices[f.name]]]
        out[f.name] = _nest(f, items)
    return out


def _nest(f: Field, items: list[Any]) -> Any:
    if not f.shape:
        return items[0]

    axes = f.axis_labels or (None,) * len(f.shape)

    def build(depth: int, flat_items: list[Any]) -> Any:
        n = f.shape[depth]
        step = len(flat_items) // n
        parts = [flat_items[i] if depth + 1 == len(f.shape) else build(depth + 1, flat_items[i * step:(i + 1) * step])
                 for i in range(n)]
        return dict(zip(axes[depth], parts)) if axes[depth] else parts

    return build(0, items)


def readable_elements(fields: Sequence[Mapping[str, Any]], state: Mapping[str, Any]) -> dict[str, Any]:
    """Element name -> shown value, from a readable state and the trace's field descriptions
    (``graph.graph["fields"]``); needs no spec, so pictures and tables work from the file alone."""
    out: dict[str, Any] = {}
    for f in fields:
        name, shape = f["name"], tuple(f["shape"])
        axes = description_axis_labels(f)
        value = state.get(name)

        def walk(path: str, v: Any, depth: int) -> None:
            if depth == len(shape):
                out[path] = v
                return
            labels = axes[depth]
            if labels:
                for lab in labels:
                    walk(f"{path}[{lab}]", v.get(lab) if isinstance(v, Mapping) else None, depth + 1)
            else:
                seq = v if isinstance(v, list) else [None] * shape[depth]
                for i, item in enumerate(seq):
                    walk(f"{path}[{i}]", item, depth + 1)

        walk(name, value, 0)
    return out


def field_description(f: Field) -> dict[str, Any]:
    """How a trace file describes one field, so it can be read without the spec's code.

    ``lo`` (the smallest value) is written only when it is not 0, ``axis_labels`` only when an
    axis after the first has labels, ``axis_names`` only when the spec names the axes: a field
    that has none of them is described as before they existed, and a file without them reads as
    it always did."""
    out = {"name": f.name, "kind": f.kind, "shape": list(f.shape), "domain": f.domain,
           "labels": list(f.labels) if f.labels else None,
           "index_labels": list(f.index_labels) if f.index_labels else None, "doc": f.doc}
    if f.lo:
        out["lo"] = f.lo
    if f.axis_labels and any(f.axis_labels[1:]):
        out["axis_labels"] = [list(a) if a else None for a in f.axis_labels]
    if f.axis_names:
        out["axis_names"] = list(f.axis_names)
    return out


def axis_named_elements(fields: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Element name -> how a trace table shows it, for the fields whose description names their
    axes (``axis_names``): ``votes[a1][0][v2]`` -> ``votes[acceptor=a1, ballot=0, value=v2]``.
    Only for reading: lanes, exports and files keep the element names."""
    out: dict[str, str] = {}
    for f in fields:
        names = f.get("axis_names")
        if not names:
            continue
        axes = description_axis_labels(f)
        for index in itertools.product(*(range(n) for n in f["shape"])):
            shown = [str(axes[k][i]) if axes[k] else str(i) for k, i in enumerate(index)]
            element = f["name"] + "".join(f"[{x}]" for x in shown)
            out[element] = f["name"] + "[" + ", ".join(f"{n}={x}" for n, x in zip(names, shown)) + "]"
    return out


def description_axis_labels(f: Mapping[str, Any]) -> list[Any]:
    """Each axis's labels (or None) from a trace file's field description, old or new."""
    shape = f["shape"]
    axes = f.get("axis_labels")
    if axes is None:
        axes = [f.get("index_labels")] + [None] * (len(shape) - 1) if shape else []
    return list(axes)


# ----------------------------------------------------------------------------------------------
# readable -> flat


def flat_from_readable(layout: Layout, state: Any) -> tuple[int, ...]:
    """The flat state a readable one stands for; raises DecodeError naming the bad element."""
    if not isinstance(state, Mapping):
        raise DecodeError("state", f"expected a mapping of field names to values, got {type(state).__name__}")
    fields = state_fields(layout)
    known = {f.name for f in fields}
    for name in state:
        if name not in known:
            raise DecodeError(str(name), "no such field in this spec")
    out: list[int] = []
    for f in layout.fields:
        if f.const is not None:
            out.extend([f.const] * f.size)
            continue
        if f.name not in state:
            raise DecodeError(f.name, "missing")
        out.extend(_decode_field(f, state[f.name]))
    return tuple(out)


def _decode_field(f: Field, value: Any) -> list[int]:
    out: list[int] = []

    def walk(v: Any, index: tuple[int, ...]) -> None:
        depth = len(index)
        if depth == len(f.shape):
            out.append(decode_value(f, v, element_name(f, index) if f.shape else f.name))
            return
        where = element_name(f, index)
        n = f.shape[depth]
        labels = f.axis_labels[depth] if f.axis_labels else None
        if labels:
            if not isinstance(v, Mapping):
                raise DecodeError(where, f"expected a mapping keyed by {', '.join(labels)}")
            extra = [k for k in v if k not in labels]
            if extra:
                raise DecodeError(where, f"unknown position {extra[0]!r}; expected {', '.join(labels)}")
            for i, label in enumerate(labels):
                if label not in v:
                    raise DecodeError(f"{where}[{label}]", "missing")
                walk(v[label], index + (i,))
        else:
            if not isinstance(v, list) or len(v) != n:
                raise DecodeError(where, f"expected a list of {n} values, got {_describe(v)}")
            for i, item in enumerate(v):
                walk(item, index + (i,))

    walk(value, ())
    return out


def decode_value(f: Field, v: Any, where: str) -> int:
    """One shown element back to its integer."""
    if f.kind == "bool":
        if not isinstance(v, bool):
            raise DecodeError(where, f"expected true or false, got {_describe(v)}")
        return int(v)
    if f.kind == "enum" and f.labels is not None:
        if not isinstance(v, str) or v not in f.labels:
            raise DecodeError(where, f"{_describe(v)} is not one of {', '.join(f.labels)}")
        return f.labels.index(v)
    if f.kind == "set":
        names = f.labels or tuple(str(i) for i in range(f.domain.bit_length()))
        if not isinstance(v, list) or not all(isinstance(m, str) for m in v):
            raise DecodeError(where, f"expected a list of members of {{{', '.join(names)}}}, got {_describe(v)}")
        mask = 0
        for m in v:
            if m not in names:
                raise DecodeError(where, f"{m!r} is not a member; members are {', '.join(names)}")
            bit = 1 << names.index(m)
            if mask & bit:
                raise DecodeError(where, f"member {m!r} is listed twice")
            mask |= bit
        if mask >= f.domain:
            raise DecodeError(where, f"set {v} is outside the field's domain")
        return mask
    if not isinstance(v, int) or isinstance(v, bool):
        raise DecodeError(where, f"expected an integer, got {_describe(v)}")
    if not f.lo <= v <= f.hi:
        raise DecodeError(where, f"{v} is outside {f.lo}..{f.hi}")
    return v


def _describe(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


# ----------------------------------------------------------------------------------------------
# showing values compactly


def format_value(v: Any) -> str:
    """A shown value as short text: sets as {a,b}, lists as [..], mappings as a=..; None as -."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{k}={format_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        if all(isinstance(x, str) for x in v):
            return "{" + ",".join(v) + "}"
        return "[" + ",".join(format_value(x) for x in v) + "]"
    return str(v)


def format_element(kind: str, v: Any) -> str:
    """Like format_value, but knows that a set field's empty list is the empty set."""
    if kind == "set" and isinstance(v, list):
        return "{" + ",".join(map(str, v)) + "}"
    if kind == "list" and isinstance(v, list):  # an ordered list (a log, a replica list in a spec's terms)
        return "[" + ", ".join(map(str, v)) + "]"
    return format_value(v)
