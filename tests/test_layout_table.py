"""The table-driven pack and unpack (``kernels.layout_table``) against the layout's plain-Python
reference (``Layout.pack``, ``Layout.unpack``), and what sharing kernels across configurations
means for the generated modules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftcheck.checker.codegen import layout_values, uses_layout_table, write_kernel_module
from kraftcheck.checker.kernels import layout_table
from kraftcheck.checker.kernels.hashing import fingerprint_reference
from kraftcheck.checker.layout import ELEMENT, SUCCESSOR_ELEMENT, Layout
from kraftcheck.checker.model import Model
from kraftcheck.checker.spec import Bool, Const, Enum, Int
from kraftcheck.specs.kafka.spec import KafkaReplication as KafkaSpec


def _odd_layout() -> Layout:
    """Over 32 elements, with constants, one-value domains, and fields that spill across words."""
    return Layout([
        Int("counter", 5, shape=(7,)),
        Const("switch", 3),
        Int("wide", 2**20, shape=(5,)),
        Int("only_zero", 0, shape=(2,)),  # a domain of one value: no bits
        Bool("flags", shape=(9,)),
        Enum("phase", ["a", "b", "c"], shape=(4,)),
        Const("capacity", 70000),
        Int("tail", 100, shape=(6,)),
    ])


def _negative_layout() -> Layout:
    """Over 32 elements whose values start below (or above) 0: packed as value - lo."""
    return Layout([
        Int("ballot", -1, 5, shape=(9,)),
        Const("floor", -3),
        Int("offset", 3, 10, shape=(8,)),
        Int("only_minus_one", -1, -1, shape=(2,)),  # a domain of one value: no bits
        Int("deep", -2**20, 2**20, shape=(5,)),
        Bool("flags", shape=(9,)),
    ])


_ODD, _NEGATIVE = _odd_layout(), _negative_layout()


def _random_flats(layout: Layout, rng: np.random.Generator, n: int) -> list[tuple[int, ...]]:
    out = []
    for _ in range(n):
        out.append(tuple(e.field.const if e.field.const is not None
                         else e.field.lo + int(rng.integers(0, e.field.domain)) for e in layout.elements))
    return out


def _pack_with_table(layout: Layout, flats: list[tuple[int, ...]]) -> tuple[int, np.ndarray, np.ndarray]:
    rows = np.array(flats, SUCCESSOR_ELEMENT).reshape(len(flats), layout.size)
    words = np.zeros((len(flats), layout.nwords), np.uint64)
    bad = layout_table.pack_rows(rows, words, layout_table.table(layout))
    return bad, words, rows


@pytest.mark.parametrize("layout", [_odd_layout(), _negative_layout(), Model(KafkaSpec()).layout],
                         ids=["odd", "negative", "kafka"])
def test_table_pack_and_unpack_match_the_reference(layout):
    assert uses_layout_table(layout)
    flats = _random_flats(layout, np.random.default_rng(11), 300)
    bad, words, _ = _pack_with_table(layout, flats)
    assert bad == -1
    assert [tuple(int(w) for w in row) for row in words] == [layout.pack(f) for f in flats]
    back = np.zeros((len(flats), layout.size), ELEMENT)
    layout_table.unpack_rows(words, back, layout_table.table(layout))
    assert [tuple(int(x) for x in r) for r in back] == flats
    out = np.zeros((len(flats) + 3, layout.size), ELEMENT)
    layout_table.unpack_range(words, 5, 25, 3, out, layout_table.table(layout))
    assert [tuple(int(x) for x in r) for r in out[3:23]] == flats[5:25]


def test_table_pack_fingerprints_as_the_reference():
    layout = _odd_layout()
    flats = _random_flats(layout, np.random.default_rng(3), 50)
    rows = np.array(flats, SUCCESSOR_ELEMENT)
    words = np.zeros((len(flats), layout.nwords), np.uint64)
    hashes = np.zeros(len(flats), np.uint64)
    table = layout_table.table(layout)
    for r in range(len(flats)):
        assert layout_table.pack(rows[r], words, hashes, r, table)
    assert hashes.tolist() == [fingerprint_reference(layout.pack(f)) for f in flats]


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_table_pack_refuses_exactly_what_the_reference_refuses(data):
    """A value outside its domain, or a constant changed, is refused at the first row that has it."""
    layout = data.draw(st.sampled_from([_ODD, _NEGATIVE]))
    flats = _random_flats(layout, np.random.default_rng(data.draw(st.integers(0, 1000))), 5)
    row = data.draw(st.integers(0, 4))
    element = data.draw(st.sampled_from(layout.elements))
    near = (st.integers(element.field.lo - 3, element.field.hi + 3) if element.field.const is None
            else st.integers(element.field.const - 2, element.field.const + 2))
    # and values a 32-bit element would have wrapped into the domain (2^32 + lo is lo in 32 bits)
    wide = st.sampled_from([2**32 + element.field.lo, 2**31, -2**31 - 1, 2**40 + 1, -2**40])
    value = data.draw(st.one_of(near, wide))
    changed = list(flats[row])
    changed[element.flat] = value
    flats[row] = tuple(changed)
    try:
        layout.check_domains(flats[row])
        expected = -1
    except Exception:
        expected = row
    bad, _, _ = _pack_with_table(layout, flats)
    assert bad == expected


@given(st.data())
@settings(max_examples=80, deadline=None)
def test_packing_one_element_over_a_states_words_gives_the_references_words(data):
    """``pack_element``, with which a ``fire`` kernel packs only what its action wrote: the source's
    words with one element replaced are the reference's words of the changed state, and a value
    outside the element's domain (or a constant changed) is flagged, as ``pack`` refuses it."""
    layout = data.draw(st.sampled_from([_ODD, _NEGATIVE]))
    flat = list(_random_flats(layout, np.random.default_rng(data.draw(st.integers(0, 1000))), 1)[0])
    element = data.draw(st.sampled_from(layout.elements))
    near = (st.integers(element.field.lo - 3, element.field.hi + 3) if element.field.const is None
            else st.integers(element.field.const - 2, element.field.const + 2))
    value = data.draw(st.one_of(near, st.sampled_from([2**32 + element.field.lo, 2**31, -2**40])))
    words = np.array([layout.pack(tuple(flat))], np.uint64)
    bad = layout_table.pack_element(words, 0, value, element.flat, layout_table.table(layout))
    flat[element.flat] = value
    try:
        layout.check_domains(tuple(flat))
    except Exception:
        assert bad == 1
        return
    assert bad == 0
    assert tuple(int(w) for w in words[0]) == layout.pack(tuple(flat))


@given(st.data())
@settings(max_examples=40, deadline=None)
def test_packing_what_a_fire_kernel_noted_gives_the_references_words_and_fingerprint(data):
    """``pack_changes``: a successor a ``fire`` kernel left as (element, value) pairs, packed over
    its source's words, is the reference's packing of the changed state; out of a domain, refused."""
    layout = data.draw(st.sampled_from([_ODD, _NEGATIVE]))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    source, target = _random_flats(layout, rng, 2)
    changed = [e.flat for e in layout.elements if source[e.flat] != target[e.flat]]
    flat = list(source)
    succ = np.zeros((2, layout.size), np.int64)
    for c, k in enumerate(changed[: layout.size // 2]):
        succ[1, 2 * c], succ[1, 2 * c + 1] = k, target[k]
        flat[k] = target[k]
    n = min(len(changed), layout.size // 2)
    spoil = data.draw(st.booleans()) and n > 0
    if spoil:  # the last pair's value one past its element's domain (a constant: changed)
        e = layout.elements[int(succ[1, 2 * (n - 1)])]
        succ[1, 2 * (n - 1) + 1] = (e.field.hi + 1) if e.field.const is None else e.field.const + 1
    sources = np.array([layout.pack(source)], np.uint64)
    words, hashes = np.zeros((3, layout.nwords), np.uint64), np.zeros(3, np.uint64)
    ok = layout_table.pack_changes(succ, 1, n, sources, 0, words, hashes, 2, layout_table.table(layout))
    assert ok == (not spoil)
    if ok:
        assert tuple(int(w) for w in words[2]) == layout.pack(tuple(flat))
        assert int(hashes[2]) == fingerprint_reference(layout.pack(tuple(flat)))
    else:
        assert hashes[2] == 0


@pytest.mark.parametrize("layout", [_odd_layout(), _negative_layout()], ids=["odd", "negative"])
def test_set_consts_writes_constants_and_one_value_elements(layout):
    f = np.full(layout.size, 99, ELEMENT)
    layout_table.set_consts(f, layout_table.table(layout))
    for e in layout.elements:
        if e.field.const is not None:
            assert f[e.flat] == e.field.const
        elif e.bits == 0:
            assert f[e.flat] == e.field.lo
        else:
            assert f[e.flat] == 99


def test_layout_values_are_the_constants_of_a_small_layout_and_the_table_of_a_large_one():
    small = Layout([Int("x", 3), Const("c", 5), Bool("b")])
    assert not uses_layout_table(small)
    assert layout_values(small).tolist() == [5]
    large = _odd_layout()
    assert layout_values(large).tolist() == layout_table.table(large).tolist()


def test_configurations_with_the_same_fields_share_every_kernel_module():
    """Other fault bounds and another preset change domains and constants, not fields: the Kafka
    model's generated modules are then the same files, so the second configuration compiles
    nothing; so does a run that selects some of the checks. Another preset shares at least the
    layout module (and every action it keeps unchanged).
    Another number of brokers changes the fields' shapes, hence every module."""
    def modules(check=None, **params):
        name, path = write_kernel_module(Model(KafkaSpec(KafkaSpec.Params(**params)), check=check))
        text = path.read_text()
        return {line.split('"')[1] for line in text.splitlines() if line.startswith("_layout = ")} | {
            m for m in text.split("GENERATED = ")[1].splitlines()[0].strip("()").replace("'", "").split(", ") if m}

    default = modules()
    assert modules(fences=2) == default
    # a run that checks some invariants and no transition property (--invariant) compiles them
    # all in and evaluates the selected ones: the same modules again
    assert modules(check=["acked_writes_survive"]) == default
    assert modules(check=["hwm_advances_only_with_min_isr"], fences=2) == default
    layout_of = {m for m in default if "_layout_" in m}
    assert layout_of == {m for m in modules(protocol="kafka-4.x") if "_layout_" in m}
    assert not (modules(brokers=4, min_isr=2) & default)


@pytest.mark.parametrize("layout", [_odd_layout(), _negative_layout(), Model(KafkaSpec()).layout],
                         ids=["odd", "negative", "kafka"])
def test_packing_many_states_at_once_gives_the_references_words(layout):
    """``Layout.pack_many`` (by columns, for the initial states) against ``Layout.pack``."""
    flats = _random_flats(layout, np.random.default_rng(5), 200)
    assert [tuple(int(w) for w in row) for row in layout.pack_many(flats)] == [layout.pack(f) for f in flats]
    assert layout.pack_many([]).shape == (0, layout.nwords)


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_packing_many_states_refuses_the_first_bad_state_as_the_reference_does(data):
    """A state outside its domains (far outside: past int64 too) raises ``pack``'s error of the
    first such state."""
    layout = data.draw(st.sampled_from([_ODD, _NEGATIVE]))
    flats = _random_flats(layout, np.random.default_rng(data.draw(st.integers(0, 1000))), 6)
    for row in sorted(set(data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=2)))):
        element = data.draw(st.sampled_from(layout.elements))
        value = data.draw(st.one_of(st.integers(element.field.lo - 3, element.field.hi + 3),
                                    st.sampled_from([2**32 + element.field.lo, -2**40, 2**70])))
        changed = list(flats[row])
        changed[element.flat] = value
        flats[row] = tuple(changed)
    expected = None
    for flat in flats:
        try:
            layout.pack(flat)
        except Exception as e:  # noqa: BLE001 - whatever the reference raises, pack_many must
            expected = e
            break
    if expected is None:
        assert [tuple(int(w) for w in row) for row in layout.pack_many(flats)] == [layout.pack(f) for f in flats]
    else:
        with pytest.raises(type(expected)) as raised:
            layout.pack_many(flats)
        assert str(raised.value) == str(expected)


def test_the_warm_up_compiles_the_table_expand_kernel_for_the_arguments_the_engine_gives(monkeypatch):
    """A large layout's actions run as one call of the generic kernel (``TableExpansion``): if the
    warm-up typed it otherwise than the engine calls it, a run would compile it again, slowly and
    after the compiled marker said it was done."""
    from kraftcheck.checker import codegen
    from kraftcheck.checker.compile import compile_kernels
    from kraftcheck.checker.explore.compiled import Kernels, kernel_shapes
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.result import Options
    from kraftcheck.specs.two_phase import TwoPhase

    monkeypatch.setattr(codegen, "INLINE_PACK_MAX_ELEMENTS", -1)  # every layout packs by its table
    model = Model(TwoPhase(TwoPhase.Params(rm=3)))
    kernels = Kernels(model)
    assert kernels.module.LAYOUT_TABLE
    compile_kernels(kernels.module, kernel_shapes(model))
    kernel = kernels.module.EXPANDERS[0].kernel
    assert len(kernel.signatures) == 1
    Engine(compile="now").explore(model, Options(keep_going=True))  # both paths: the distinct one, then rows
    Engine(compile="now").explore(model, Options(keep_going=True, keep_graph=True))
    assert len(kernel.signatures) == 1


def _summary(result):
    return (result.status, result.distinct_states, result.states_generated, result.depth, result.coverage(),
            [(v.check, v.kind, v.depth) for v in result.violations])


@pytest.mark.parametrize("cls,params", [("WideMixed", {}), ("WideOne", {})], ids=["mixed", "one-action"])
def test_large_layout_kernels_agree_with_the_reference(cls, params):
    """The table form's kernels (every action on a batch of states, fires noting what they
    changed beside one packing whole rows and one action of no instances; a spec of one action)
    count and find what the reference explorer does."""
    import large_layout_specs

    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.reference import ReferenceExplorer
    from kraftcheck.checker.explore.result import Options

    spec_class = getattr(large_layout_specs, cls)
    model = Model(spec_class(spec_class.Params(**params)))
    assert uses_layout_table(model.layout)
    got = Engine(compile="now").explore(model, Options(keep_going=True))
    assert got.interpreted_states == 0 and got.distinct_states > 40
    assert _summary(got) == _summary(ReferenceExplorer().explore(model, Options(keep_going=True)))


@pytest.mark.parametrize("deadlock", [True, False], ids=["deadlock", "no-deadlock-check"])
def test_a_spec_of_no_action_instances_has_its_initial_states_only(deadlock):
    """No action instance: the candidate rows per state are 0, which the chunk kernels cannot
    index by; the engine gives what the reference explorer does (a deadlock at the first initial
    state, or the initial states holding). The engine takes such a frontier before any chunk
    kernel, whatever the layout (the small layout's kernels failed the same way): one layout is
    tried, the table form, whose kernels the other tests here have compiled already."""
    import large_layout_specs

    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.reference import ReferenceExplorer
    from kraftcheck.checker.explore.result import Options

    model = Model(large_layout_specs.WideStill(large_layout_specs.WideStill.Params()))
    assert len(model.labels) == 0 and uses_layout_table(model.layout)
    model.check_deadlock = deadlock
    got = Engine(compile="now").explore(model, Options(keep_going=True))
    want = ReferenceExplorer().explore(model, Options(keep_going=True))
    assert _summary(got) == _summary(want) and got.distinct_states == 1
    assert [v.check for v in got.violations] == (["deadlock"] if deadlock else [])


def test_an_action_writing_its_source_state_through_a_view_stops_the_compiled_run(monkeypatch):
    """The static reading sees an assignment to ``s`` and a write through a view bound to a name
    (Model refuses both) but not through a view kept in a tuple. The kernel audit runs the spec's
    Python on the first states the compiled kernels expand, where ``s`` is read-only: the spec's
    error, at its line. On a state the audit does not sample, the kernels' twin check sees the
    state changed under them. No verdict either way."""
    from large_layout_specs import WritesItsSourceThroughAView

    from kraftcheck.checker.errors import SpecError
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.explore.kernel_audit import KernelAudit
    from kraftcheck.checker.explore.result import Options

    model = Model(WritesItsSourceThroughAView(WritesItsSourceThroughAView.Params()))
    with pytest.raises(SpecError, match=r"^action Inc\(i=\d+\) raised ValueError: assignment destination is "
                                        r"read-only at .*large_layout_specs\.py:\d+") as raised:
        Engine(compile="now").explore(model, Options(keep_going=True))
    assert "on the last state of this path from an initial state:\n    1. initial state: x=[0" in str(raised.value)
    monkeypatch.setattr(KernelAudit, "chunk", lambda self, *args, **kwargs: None)  # no state sampled
    with pytest.raises(SpecError, match=r"wrote x\[7\] of its source state s \(from 0 to 1\)"):
        Engine(compile="now").explore(model, Options(keep_going=True))


def test_the_generic_expand_module_is_named_anew_when_an_engine_file_it_compiles_in_changes(monkeypatch):
    """numba's cache knows only the generated file: an edit of a kernel module the generic kernel
    imports must give it another name, or the old compiled code would be loaded."""
    from pathlib import Path

    from kraftcheck.checker import codegen

    text = codegen.table_expand_source()
    before = codegen._generic_module_name("table_expand", text)
    read = Path.read_bytes
    for imported in ("table_expand.py", "layout_table.py", "successor_rows.py", "addresses.py", "prefetch.py",
                     "hashing.py"):
        assert f"kernels.{imported[:-3]} import" in text
        monkeypatch.setattr(Path, "read_bytes",
                            lambda p, imported=imported: read(p) + (b"\n# edited\n" if p.name == imported else b""))
        assert codegen._generic_module_name("table_expand", text) != before, imported
