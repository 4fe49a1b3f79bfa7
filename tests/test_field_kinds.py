"""The field kinds' signatures and the mistakes they refuse (docs/writing-a-spec.md, "Reference:
field kinds and helpers"): ``Int(name, maximum)`` as before, ``Int(name, lo, hi)``, labels per
axis, negative constants, and what symmetry refuses of a field that does not start at 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftcheck.checker.errors import SpecError
from kraftcheck.checker.layout import Layout
from kraftcheck.checker.spec import Bool, Const, Enum, Field, Int, Permuted, Set, Symmetry
from kraftcheck.checker.symmetry import PermutationTables


def test_int_with_a_maximum_is_the_field_it_always_was():
    assert Int("x", 5) == Field("x", 6, (), "int")
    assert Int("x", 5, (2, 3)) == Int("x", 5, shape=(2, 3)) == Field("x", 6, (2, 3), "int")
    assert Int("x", 5).lo == 0 and Int("x", 5).bits == 3


def test_int_with_bounds_holds_negative_values_in_as_few_bits():
    f = Int("max_bal", -1, 2, (3,))
    assert (f.lo, f.hi, f.domain, f.bits, f.shape) == (-1, 2, 4, 2, (3,))
    assert Int("max_bal", -1, 2, shape=(3,)) == f
    assert Int("only", -5, -5).bits == 0


@pytest.mark.parametrize("make, message", [
    (lambda: Int("x", 3, 1), r"Int\('x', 3, 1\) is empty"),
    (lambda: Int("x", -1, (2,)), r"Int\('x', -1\) holds 0\.\.-1, which is empty; for values from -1 up write "
                                 r"Int\('x', -1, hi\)"),
    (lambda: Int("x", 1.5), "bounds must be integers"),
    (lambda: Int("x", 0, True), "bounds must be integers"),
    (lambda: Int("x", 3, (2,), shape=(2,)), "given a second shape"),
    (lambda: Int("x", -2**31 - 1, -2**31 + 5), r"values -2147483649\.\.-2147483643 exceed the int32 range"),
    (lambda: Field("x", 2, (), "bool", lo=-1), "only an Int field"),
    (lambda: Bool("x", (2, 2), axis_labels=(("a", "b"),)), "one entry per axis"),
    (lambda: Bool("x", (2, 2), axis_labels=(None, ("a", "b", "c"))), r"axis_labels\[1\] must name every position"),
    (lambda: Bool("x", (2, 2), axis_labels=(None, ("a", "a"))), "repeats a label"),
    (lambda: Bool("x", (2, 2), index_labels=("a", "b"), axis_labels=(("c", "d"), None)), "give the first axis"),
    (lambda: Bool("x", (), index_labels=("a",)), "index_labels must name every position"),
    (lambda: Bool("x", (2, 2), axis_names=("row",)), "axis_names must give each of its 2 axes its own name"),
    (lambda: Bool("x", (2, 2), axis_names=("row", "row")), "axis_names must give each"),
    (lambda: Bool("x", (2, 2), axis_names=("row", "a b")), "axis_names must give each"),
    # a mistake of one character each, once an internal error or a field other than meant
    (lambda: Bool("x", 3), r"field x: shape must be a tuple of axis lengths, got 3: write \(3,\)"),
    (lambda: Enum("x", ("a", "b"), 2.0), r"field x: shape must be a tuple of axis lengths, got 2\.0"),
    (lambda: Enum("x", ("idle")), r"field x: Enum's labels is the string 'idle', which would be read as the names "
                                  r"'i', 'd', 'l', 'e'; give a tuple of names: \('idle',\) for one"),
    (lambda: Set("x", ("b1")), r"field x: Set's members is the string 'b1'"),
    (lambda: Bool("x", (2,), index_labels="ab"), r"field x: index_labels is the string 'ab'"),
    (lambda: Const("x", 2.5), r"field x: a Const holds an integer, got 2\.5 \(a float\)"),
    (lambda: Const("x", "fast"), r"field x: a Const holds an integer, got 'fast' \(a str\)"),
])
def test_a_malformed_field_is_refused_with_what_is_wrong(make, message):
    with pytest.raises(SpecError, match=message):
        make()


@pytest.mark.parametrize("values, message", [
    ({"c": [0.5, 0]}, r"field c: an initial state gives it \[0\.5, 0\], which is not made of integers: give "
                      r"integers in the shape \(2,\)"),
    ({"c": [0, 1.0]}, r"field c: .* not made of integers"),
    ({"c": ["a", 0]}, r"field c: an initial state gives it \['a', 0\], which is not made of integers"),
    ({"x": 1.5}, r"field x: an initial state gives it 1\.5, which is not an integer: give an int"),
    ({"e": "busy"}, r"field e: an initial state gives it 'busy', which is not an integer \(an Enum's value is the "
                    r"index of its label: 'busy' is 1\)"),
])
def test_an_initial_value_that_is_no_integer_is_refused(values, message):
    """0.5 was cut to 0 by numpy's conversion (the run explored from another state than the spec
    wrote and answered); a string, an Enum's label among them, was an internal error (ValueError)."""
    layout = Layout([Int("c", 2, (2,)), Int("x", 3), Enum("e", ("idle", "busy"))])
    with pytest.raises(SpecError, match=message):
        layout.flat_from_values(values)


def test_an_initial_value_for_a_const_other_than_its_own_is_refused():
    """A Const holds its declared value in every state: an initial state that gave it another was
    taken with the declared value in silence, so the run explored other states than the spec wrote
    (an author who sets a capacity in initial_states() checked the capacity of fields())."""
    layout = Layout([Int("x", 3), Const("cap", 2)])
    assert layout.flat_from_values({"x": 1, "cap": 2}) == (1, 2)
    with pytest.raises(SpecError, match=r"field cap is a Const, 2 in every state; an initial state gives it 3: "
                                        r"leave it out of initial_states\(\) or change the Const in fields\(\)"):
        layout.flat_from_values({"x": 1, "cap": 3})


def test_an_initial_value_of_ragged_nested_lists_is_refused_naming_the_field():
    """numpy's conversion of [1, [0]] raised ValueError: an internal error instead of the spec's."""
    layout = Layout([Int("c", 2, (2,))])
    with pytest.raises(SpecError, match=r"field c: an initial state gives it \[1, \[0\]\], which is not made of "
                                        r"integers: give integers in the shape \(2,\)"):
        layout.flat_from_values({"c": [1, [0]]})


def test_initial_values_of_any_integer_type_are_taken():
    import numpy as np
    layout = Layout([Int("c", 2, (2,)), Int("x", 3), Enum("e", ("idle", "busy"))])
    assert layout.flat_from_values({"c": (np.int64(1), True), "x": np.int32(3), "e": np.uint8(1)}) == (1, 1, 3, 1)
    assert layout.flat_from_values({"c": np.array([2, 0], np.uint8)}) == (2, 0, 0, 0)
    with pytest.raises(SpecError, match=r"field c\[0\] = 1180591620717411303424 is outside its domain 0\.\.2"):
        layout.flat_from_values({"c": [2**70, 0]})


WIDE_SPEC = '''
from dataclasses import dataclass
from kraftcheck.checker.spec import Int, Spec


def far(lo):
    return Int("x", lo, lo + 5)


class Wide(Spec):
    name = "wide"

    @dataclass(frozen=True)
    class Params:
        lo: int = 2**31 - 2

    def fields(self):
        return [far(self.params.lo)]

    def initial_states(self):
        return [{"x": self.params.lo}]

    def actions(self):
        return []
'''


@pytest.mark.parametrize("lo", [2**31 - 2, -2**31 - 1])
def test_a_field_past_the_int32_range_is_refused_at_the_spec_s_line(tmp_path, lo):
    """The refusal named the field and its values but not where the spec declared it, as the
    spec's other errors do: a field built by a helper (here far()) was hard to find."""
    from kraftcheck.checker.model import Model
    from kraftcheck.specs import spec_class
    (tmp_path / "wide_spec.py").write_text(WIDE_SPEC)
    cls = spec_class(f"{tmp_path / 'wide_spec.py'}:Wide")
    with pytest.raises(SpecError) as refused:
        Model(cls(cls.Params(lo=lo)))
    assert str(refused.value) == f"field x: values {lo}..{lo + 5} exceed the int32 range " \
        f"(declared at {tmp_path / 'wide_spec.py'}:7)"


def test_axis_labels_and_index_labels_agree():
    votes = Bool("votes", (2, 2, 3), axis_labels=(("a1", "a2"), None, ("v1", "v2", "v3")))
    assert votes.index_labels == ("a1", "a2")
    assert [votes.position_label(1, 1), votes.position_label(2, 2)] == ["1", "v3"]
    # index_labels alone is the first entry of axis_labels, as it always meant
    assert Bool("b", (2, 2), index_labels=("a1", "a2")).axis_labels == (("a1", "a2"), None)
    assert Bool("b", (2, 2), axis_labels=(None, None)).axis_labels is None
    layout = Layout([votes])
    assert layout.element_name(layout.elements[5]) == "votes[a1][1][v3]"


@pytest.mark.parametrize("make, message", [
    (lambda: Permuted("c", axes=0), r"symmetry: field c: axes must be a tuple of the axes the values index, got 0: "
                                    r"write axes=\(0,\)"),
    (lambda: Symmetry(("a", "b"), Permuted("c", axes=(0,))), r"symmetry: fields must be a tuple of Permuted, one per "
                                                            r"field that moves, .*got Permuted\(field='c'"),
    (lambda: Symmetry(("a", "b"), (Permuted("c", axes=(0,)), "d")), r"symmetry: fields must be a tuple of Permuted"),
    (lambda: Symmetry("ab", (Permuted("c", axes=(0,)),)), r"symmetry: labels is the string 'ab'"),
])
def test_a_malformed_symmetry_is_refused_where_it_is_declared(make, message):
    """axes=0 for (0,), one Permuted for a tuple of them, a field's name among them: each was an
    internal error once --symmetry read the declaration (TypeError, AttributeError); labels "ab"
    permuted the values a and b where one label was meant."""
    with pytest.raises(SpecError, match=message):
        make()
    assert Symmetry(["a", "b"], [Permuted("c", axes=[0])]) == Symmetry(("a", "b"), (Permuted("c", axes=(0,)),))


def test_a_malformed_symmetry_is_said_with_the_specs_line_by_the_command_line(tmp_path):
    """symmetry() is read as the spec's other declaring methods are: the refusal names its line."""
    from click.testing import CliRunner

    from kraftcheck.cli.main import cli
    spec = tmp_path / "bad_symmetry.py"
    spec.write_text("import sys\n"
                    f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
                    "from kraftcheck import Permuted, Symmetry\n"
                    "from symmetry_specs import DEEP_DATA, DeepAsymmetry\n\n\n"
                    "class BadSymmetry(DeepAsymmetry):\n"
                    "    def symmetry(self):\n"
                    "        return Symmetry(DEEP_DATA, (Permuted('x', axes=0),))\n")
    result = CliRunner().invoke(cli, ["check", "--spec", f"{spec}:BadSymmetry", "--symmetry"])
    assert result.exit_code == 2
    assert f"axes must be a tuple of the axes the values index, got 0: write axes=(0,) (declared at {spec}:9)" \
        in result.stderr, result.stderr


def test_a_shape_given_as_a_list_or_of_numpy_integers_is_a_tuple_of_ints():
    import numpy as np
    assert Bool("x", [2, np.int64(3)]).shape == (2, 3) and type(Bool("x", [np.int64(3)]).shape[0]) is int
    assert Const("x", True).const == 1 and Const("x", np.int64(4)).const == 4


def test_a_negative_constant_is_a_field_of_one_value():
    floor = Const("floor", -2)
    assert (floor.const, floor.lo, floor.bits) == (-2, -2, 0)
    layout = Layout([floor, Int("x", -2, 1)])
    assert layout.pack((-2, -2)) == (0,) and layout.unpack((3,)) == (-2, 1)
    with pytest.raises(SpecError, match=r"field x = 2 is outside its domain -2\.\.1"):
        layout.pack((-2, 2))


def test_symmetry_refuses_a_permuted_member_that_does_not_start_at_zero():
    names = ("a1", "a2")
    layout = Layout([Int("leader", -1, 1), Enum("mode", ("on", "off")), Int("x", 3, (2,), index_labels=names)])
    with pytest.raises(SpecError, match="leader holds a permuted member but its values start at -1"):
        PermutationTables(layout, Symmetry(names, (Permuted("leader", holds="member"), Permuted("x", axes=(0,)))))
    ok = Layout([Int("bal", -1, 1, (2,), index_labels=names)])
    PermutationTables(ok, Symmetry(names, (Permuted("bal", axes=(0,)),)))  # moved, not mapped: fine


def test_shipped_specs_describe_their_fields_in_trace_files_as_before():
    """No "lo" or "axis_labels" key unless a field needs it: the trace files of every shipped spec
    are written, and read, as before field kinds had them."""
    from kraftcheck.checker.model import Model
    from kraftcheck.specs import spec_class, spec_names
    from kraftcheck.traces.states import field_description, state_fields

    for name in spec_names():
        layout = Model(spec_class(name)()).layout
        for f in state_fields(layout):
            assert set(field_description(f)) == {"name", "kind", "shape", "domain", "labels", "index_labels", "doc"}


def test_a_description_without_axis_labels_reads_its_first_axis_from_index_labels():
    from kraftcheck.traces.states import description_axis_labels, readable_elements

    old = {"name": "log", "kind": "int", "shape": [2, 2], "index_labels": ["b1", "b2"]}
    assert description_axis_labels(old) == [["b1", "b2"], None]
    assert readable_elements([old], {"log": {"b1": [1, 2], "b2": [3, 4]}}) == {
        "log[b1][0]": 1, "log[b1][1]": 2, "log[b2][0]": 3, "log[b2][1]": 4}
    new = dict(old, axis_labels=[["b1", "b2"], ["r1", "r2"]])
    assert readable_elements([new], {"log": {"b1": {"r1": 1, "r2": 2}, "b2": {"r1": 3, "r2": 4}}})["log[b2][r1]"] == 3


def test_generated_packing_of_a_field_from_zero_is_what_it_always_was():
    """The packer and unpacker text of ``Int(name, maximum)`` fields, pinned as it was before
    fields could start elsewhere (so no existing kernel, count or speed changes), beside the
    same field from -1, which packs ``value + 1`` and unpacks ``bits - 1``."""
    from kraftcheck.checker import codegen

    from_zero = Layout([Int("x", 3, (2,)), Const("c", 5)])
    assert codegen._unpack_lines(from_zero)[1:] == ["    f[0] = int32((w0 >> uint64(0)) & uint64(3))",
                                                    "    f[1] = int32((w0 >> uint64(2)) & uint64(3))"]
    assert codegen._pack_lines(from_zero)[0] == "    ok0 = (f[0] >= 0) & (f[0] < 4) & (f[1] >= 0) & (f[1] < 4) & (f[2] == cv[0])"
    assert codegen._pack_lines(from_zero)[3] == "    w0 = (uint64(f[0]) << uint64(0)) | (uint64(f[1]) << uint64(2))"
    from_minus_one = Layout([Int("x", -1, 2, (2,)), Const("c", -5)])
    assert codegen._unpack_lines(from_minus_one)[1] == "    f[0] = int32((w0 >> uint64(0)) & uint64(3)) + int32(-1)"
    assert codegen._pack_lines(from_minus_one)[0] == \
        "    ok0 = (f[0] >= -1) & (f[0] < 3) & (f[1] >= -1) & (f[1] < 3) & (f[2] == cv[0])"
    assert codegen._pack_lines(from_minus_one)[3] == \
        "    w0 = (uint64(f[0] + 1) << uint64(0)) | (uint64(f[1] + 1) << uint64(2))"
