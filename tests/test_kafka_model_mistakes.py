"""A mistake in the model's own code is exit 2 with the file and line first, before any work: a
switch an action reads that switches() does not register, a field no layout declares
(specs/kafka/field_check.py); and on any spec, a field the state lacks is the spec's error at
once, on the interpreted tier and in numba's typing (checker/errors.py, checker/typing_check.py)."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

from kraftcheck.checker.errors import SpecError, spec_raised
from kraftcheck.cli.main import cli
from kraftcheck.specs.kafka.params import KafkaParams

SCRATCH = '''
from numba import njit
from kraftcheck.checker.spec import Action
from kraftcheck.specs.kafka import controller
from kraftcheck.specs.kafka.spec import KafkaReplication


@njit(cache=True)
def cancel_with_rule(s, t):
    if s.k_cancel_rule and s.c_isr == 0:  # line 10: a switch switches() does not register
        return False
    return controller.unfence(s, t, 0)


class WithRule(KafkaReplication):
    name = "with_rule"

    def actions(self):
        return super().actions() + [Action("CancelWithRule", cancel_with_rule, (), "scratch")]
'''


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    path = tmp_path / "with_rule.py"
    path.write_text(textwrap.dedent(SCRATCH))
    monkeypatch.chdir(tmp_path)
    return path


def test_an_unregistered_switch_is_refused_when_the_spec_is_built(scratch):
    import importlib.util
    spec = importlib.util.spec_from_file_location("with_rule", scratch)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SpecError) as e:
        module.WithRule(KafkaParams())
    assert str(e.value).startswith(f"{scratch}:10: cancel_with_rule reads 'k_cancel_rule'")
    assert "switches()" in str(e.value)


def test_the_check_exits_2_with_the_file_and_line_first(scratch):
    result = CliRunner().invoke(cli, ["check", "--spec", "with_rule.py:WithRule", "--param", "brokers=2"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) <= 2 and lines[-1].startswith(f"kraftcheck: error: {scratch}:10: ")


def test_the_model_as_it_is_reads_only_its_fields():
    from kraftcheck.specs.kafka.field_check import unknown_fields
    from kraftcheck.specs.kafka.spec import KafkaReplication
    spec = KafkaReplication(KafkaParams(replication_factor=2, reassignments=1, accept_stale_fetch_responses=True,
                                        replay_known_changes=True, controller_failovers=1, clean_shutdowns=1,
                                        controlled_shutdown_in_two_steps=True))
    fns = [a.fn for a in spec.actions()] + [x.fn for x in spec.invariants()] + [x.fn for x in spec.properties()]
    fields = {f.name for f in spec.fields()}
    assert unknown_fields(fns, fields) == []
    assert [u.name for u in unknown_fields(fns, fields - {"k_reassign_prune"})][:1] == ["k_reassign_prune"]


def test_a_missing_field_on_the_interpreted_tier_is_the_specs_error():
    """An AttributeError of the interpreted tier's state is a field no tier has: not left to the
    compiled kernels (which wait for a compile only to be refused)."""
    from kraftcheck.checker.layout import State
    try:
        State().k_missing
    except AttributeError as error:
        assert not spec_raised("action A", error).python_only
    assert spec_raised("action A", AttributeError("no attribute")).python_only


def missing_field_spec(tmp_path, monkeypatch):
    """A one-field spec (not Kafka) whose action reads a field it does not declare, at line 9,
    imported as module ``missing_field`` (the generated kernels import its functions by name)."""
    import importlib.util
    import sys
    path = tmp_path / "missing_field.py"
    path.write_text(textwrap.dedent('''
        from dataclasses import dataclass
        from numba import njit
        from kraftcheck.checker.spec import Action, Field, Spec


        @njit
        def step(s, t):
            if s.x >= 3 or s.y_missing:  # line 9
                return False
            t.x = s.x + 1
            return True


        @dataclass(frozen=True)
        class NoParams:
            pass


        class MissingField(Spec):
            name = "missing_field"
            Params = NoParams

            def fields(self):
                return [Field("x", 4)]

            def initial_states(self):
                yield {"x": 0}

            def actions(self):
                return [Action("Step", step)]
    '''))
    spec = importlib.util.spec_from_file_location("missing_field", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "missing_field", module)
    spec.loader.exec_module(module)
    return module.MissingField()


def test_numbas_typing_names_the_missing_field_and_its_line(tmp_path, monkeypatch):
    """numba's record typing raises KeyError, not a typing error, for a field the state lacks;
    the typing check makes it numba's refusal of that line, which the run reports as exit 2."""
    import numba

    from kraftcheck.checker.model import Model
    from kraftcheck.checker.typing_check import check_spec_types
    with pytest.raises(numba.core.errors.TypingError) as e:
        check_spec_types(Model(missing_field_spec(tmp_path, monkeypatch)))
    # numba names the file relative to the working directory
    assert "'y_missing', which is no field of the state" in str(e.value) and 'missing_field.py", line 9' in str(e.value)


def test_an_undefined_helper_is_refused_with_its_line(tmp_path):
    """A helper renamed or not imported: NameError where Python runs the line, numba's refusal
    only once it types the action; the spec says it when it is built."""
    import importlib.util
    path = tmp_path / "undefined_helper.py"
    path.write_text(textwrap.dedent(SCRATCH).replace("if s.k_cancel_rule and s.c_isr == 0:",
                                                     "if cancel_rule_applies(s):"))
    spec = importlib.util.spec_from_file_location("undefined_helper", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SpecError, match=rf"^{path}:10: cancel_with_rule calls or reads 'cancel_rule_applies', "
                                        "which its module does not define"):
        module.WithRule(KafkaParams())


def test_compiling_now_names_the_missing_field_and_its_line(tmp_path, monkeypatch):
    """--compile now meets numba's bare KeyError while it compiles the kernels (``kraftcheck check
    --spec missing_field.py:MissingField --compile now`` was an internal error): the run says the
    line, as the typing check does. The compile is stood in for by its KeyError, so the test does
    not compile."""
    import time

    from kraftcheck.checker.explore import tiers
    from kraftcheck.checker.explore.compiled import kernel_shapes
    from kraftcheck.checker.model import Model
    monkeypatch.setenv("KRAFTCHECK_CACHE_DIR", str(tmp_path / "kernels"))
    model = Model(missing_field_spec(tmp_path, monkeypatch))

    def compile_in_process(*args, **kwargs):
        raise KeyError("y_missing")  # numba's record typing, as it raises for the missing field

    monkeypatch.setattr(tiers, "compile_in_process", compile_in_process)
    with pytest.raises(SpecError, match=r"failed to compile at .*missing_field.py:9: step uses 'y_missing'"):
        tiers.compile_now(model, kernel_shapes(model), lambda progress: None, time.perf_counter())
