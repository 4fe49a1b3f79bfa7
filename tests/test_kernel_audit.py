"""The compiled kernels audited against the spec's Python (checker/explore/kernel_audit.py): a
kernel that computes otherwise than the spec says stops the run with no verdict (exit 2) instead
of counting, and the audit's own cost stays within its share of the run."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import odd_specs
from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.errors import KernelsDisagree
from kraftcheck.checker.explore.compiled import Kernels
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.kernel_audit import KernelAudit
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.cli.main import cli
from kraftcheck.specs import spec_class


def _past_int64() -> Model:
    return Model(odd_specs.PastInt64(odd_specs.PastInt64.Params()))


def test_a_spec_whose_arithmetic_numba_runs_otherwise_gets_no_verdict():
    """x * 2**64 wraps to 0 in numba's int64 and not in Python: the compiled kernels reached one
    state where the spec's Python reaches four, and the run said so as its count, in silence."""
    assert ReferenceExplorer().explore(_past_int64(), Options(keep_going=True)).distinct_states == 4
    assert Engine(compile="never").explore(_past_int64(), Options(keep_going=True)).distinct_states == 4
    with pytest.raises(KernelsDisagree) as caught:
        Engine(compile="now").explore(_past_int64(), Options(keep_going=True))
    said = str(caught.value)
    assert said.startswith("the compiled kernels of spec past_int64 disagree with its functions run as Python on "
                           "state 0: the successor under StepPastInt64 differs in x (1 compiled, 2 in Python); "
                           "no verdict."), said
    assert "kraftcheck cache clear" in said and "int64" in said and "The state: {'x': 1}; the kernels: " in said


@pytest.mark.parametrize("how", [["--compile", "now"], ["--simulate", "--max-behaviours", "10"]])
def test_the_command_line_exits_2_with_one_line(how):
    result = CliRunner().invoke(cli, ["check", "--spec", f"{odd_specs.__file__}:PastInt64", *how])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("kraftcheck: error: ")]
    assert len(errors) == 1 and "disagree with its functions run as Python" in errors[0], result.output
    others = [line for line in result.output.splitlines() if line not in errors]
    assert not any("holds" in line or "violated" in line for line in others), result.output


class _Wrong:
    """Compiled kernels that compute one thing otherwise (``what``) on every state."""

    compiled = True

    def __init__(self, kernels: Kernels, what: str) -> None:
        self.kernels, self.what = kernels, what

    def buffers(self, states: int):
        return self.kernels.buffers(states)

    def successors(self, words, lo, hi, out):
        out = self.kernels.successors(words, lo, hi, out)
        enabled = int(np.flatnonzero(out.labels[: self.kernels.nlabels] != NO_LABEL)[0])
        if self.what == "disabled":
            out.labels[enabled] = NO_LABEL
        elif self.what == "word":
            out.words[enabled, 0] ^= np.uint64(1)
        elif self.what == "hash":
            out.hashes[enabled] ^= np.uint64(1)
        return out

    def violations(self, words, lo, hi):
        masks = self.kernels.violations(words, lo, hi)
        return masks ^ np.uint64(1) if self.what == "invariant" else masks


@pytest.mark.parametrize("what, said", [
    ("disabled", r"action \S+ is enabled in Python, disabled compiled"),
    ("word", r"the successor under \S+ differs in \w+ \(\d+ compiled, \d+ in Python\)"),
    ("hash", r"the fingerprint of the successor under \S+ differs"),
    ("invariant", r"the invariants and constraints violated differ \(mask 0x1 compiled, 0x0 in Python\)"),
])
def test_each_thing_the_kernels_compute_is_compared(what, said):
    cls = spec_class("die_hard")
    model = Model(cls(cls.Params()))
    kernels = _Wrong(Kernels(model), what)
    audit = KernelAudit(model)
    with pytest.raises(KernelsDisagree, match=r"on state 7: " + said):
        audit.state(kernels, kernels.kernels.pack(model.initial), 7)
    KernelAudit(model).state(kernels.kernels, kernels.kernels.pack(model.initial), 7)  # the kernels as they are agree


def test_the_first_chunk_of_each_kernels_is_audited_then_a_share_of_the_time(monkeypatch):
    from kraftcheck.checker.explore import kernel_audit
    monkeypatch.setattr(kernel_audit, "FLOOR_S", 0.0)  # the share alone
    cls = spec_class("two_phase")
    model = Model(cls(cls.Params(rm=3)))
    kernels = Kernels(model)
    level = kernels.pack(model.initial * 8)
    audit = KernelAudit(model, share=0.0)  # no time to spare past the first chunk
    audit.chunk(kernels, level, 0, 8, 0)
    assert audit.audited == 4
    audit.chunk(kernels, level, 0, 8, 8)
    assert audit.audited == 4
    audit.chunk(Kernels(model), level, 0, 8, 16)  # other kernels (a tier switch): their first chunk
    assert audit.audited == 8
    audit.share = 1.0
    audit.chunk(kernels, level, 0, 8, 24)
    assert audit.audited == 9
    monkeypatch.setattr(kernel_audit, "FLOOR_S", 60.0)  # a short --symmetry run tries its symmetry on every chunk
    audit.share = 0.0
    audit.chunk(kernels, level, 0, 8, 32)
    assert audit.audited == 9
    symmetric = KernelAudit(model, share=0.0, symmetry=True)
    for start in range(0, 24, 8):
        symmetric.chunk(kernels, level, 0, 8, start)
    assert symmetric.audited == 4 and symmetric._symmetry.tried == 24  # every state of each chunk


def test_a_counterexample_python_does_not_reproduce_is_no_verdict():
    """The engine, a simulation and Spark replay each counterexample with the spec's Python before
    they report it: a trace the compiled kernels built wrong (a step Python does not take, an
    invariant Python finds holding) is not a 'violated'."""
    import dataclasses

    from kraftcheck.checker.explore.kernel_audit import confirm_counterexamples
    from kraftcheck.checker.explore.result import Step
    cls = spec_class("die_hard")
    model = Model(cls(cls.Params()))
    (found,) = Engine(compile="now").explore(model, Options()).violations
    confirm_counterexamples(model, [found])  # as found
    steps = found.steps
    wrong_step = steps[:-1] + [Step(steps[-1].label, steps[-2].state)]
    with pytest.raises(KernelsDisagree, match=rf"the counterexample of {found.check} is none: step {len(steps) - 1} "
                                              r"\(\S+\) does not lead to its state in Python"):
        confirm_counterexamples(model, [dataclasses.replace(found, steps=wrong_step)])
    with pytest.raises(KernelsDisagree, match=rf"invariant {found.check} holds on its last state in Python"):
        confirm_counterexamples(model, [dataclasses.replace(found, steps=steps[:1])])
    with pytest.raises(KernelsDisagree, match=r"its last state is no deadlock in Python"):
        confirm_counterexamples(model, [dataclasses.replace(found, kind="deadlock", steps=steps[:1])])


def test_a_counterexample_on_whose_states_the_spec_raises_in_python_is_the_specs_error():
    """The compiled kernels read past an array where Python raises: the counterexample they built
    is not reported, and the run stops with the spec's error on the trace's state, as the first
    tier and the reference explorer stop (it was an internal error with Python's traceback)."""
    import odd_specs

    from kraftcheck.checker.errors import SpecRaised
    cls = odd_specs.ReadsPastAnArrayOnItsLastStep
    with pytest.raises(SpecRaised, match=r"^action CountUp\(i=0\) raised IndexError: index 2 is out of bounds") as e:
        Engine(compile="now").explore(Model(cls(cls.Params())), Options())
    assert e.value.path is not None and [action for action, _ in e.value.path] == [None, "CountUp(i=0)", "CountUp(i=0)"]


@pytest.mark.parametrize("compile", ["bytecode", "now", "never"])
def test_every_tier_but_plain_python_is_audited(monkeypatch, compile):
    """The bytecode tier runs the spec in an interpreter numba compiled: audited as the kernels are."""
    audited = []
    real = KernelAudit.state
    monkeypatch.setattr(KernelAudit, "state", lambda self, kernels, words, index: audited.append(
        type(kernels).__name__) or real(self, kernels, words, index))
    cls = spec_class("two_phase")
    assert Engine(compile=compile).explore(Model(cls(cls.Params(rm=3))), Options()).distinct_states == 288
    assert audited[:1] == {"bytecode": ["BytecodeKernels"], "now": ["Kernels"], "never": []}[compile]


def test_kernels_that_raise_where_python_does_not_disagree():
    from kraftcheck.checker.errors import SpecError

    class Raising(_Wrong):
        def successors(self, words, lo, hi, out):
            raise SpecError("field c = 5 is outside its domain 0..3")

    cls = spec_class("die_hard")
    model = Model(cls(cls.Params()))
    kernels = Raising(Kernels(model), "")
    with pytest.raises(KernelsDisagree, match=r"on state 3: the compiled kernels raised where Python did not "
                                              r"\(field c = 5 is outside its domain 0..3\)"):
        KernelAudit(model).state(kernels, kernels.kernels.pack(model.initial), 3)


def test_a_spec_that_draws_random_numbers_is_refused_before_any_work():
    """An action throwing a coin (np.random, through a helper) ran, before the kernels were
    compiled, to 'holds' with 1 state on one run and 4 on the next: a random answer is sampled,
    not explored, and no count of it is a state space's."""
    from kraftcheck.checker.errors import SpecError
    with pytest.raises(SpecError) as caught:
        Model(odd_specs.RandomStep(odd_specs.RandomStep.Params()))
    said = str(caught.value)
    assert said.startswith("action StepByCoin of spec random_step uses np.random in coin ("), said
    assert "action parameter" in said
    result = CliRunner().invoke(cli, ["check", "--spec", f"{odd_specs.__file__}:RandomStep"])
    assert result.exit_code == 2 and "uses np.random" in result.output, result.output
    assert "holds" not in result.output and "distinct" not in result.output, result.output


def test_a_spec_whose_python_answers_otherwise_the_second_time_gets_no_verdict():
    """A function that changes a module-level array at each call is enabled on every other call:
    the first tier's Python, asked twice on the same state, answers twice otherwise; the run stops
    there (exit 2) instead of counting whichever answer came."""
    from kraftcheck.checker.errors import SpecError
    model = Model(odd_specs.EveryOtherCall(odd_specs.EveryOtherCall.Params()))
    with pytest.raises(SpecError) as caught:
        Engine(compile="never").explore(model, Options(keep_going=True))
    said = str(caught.value)
    assert said.startswith("spec every_other_call is not deterministic: on state 0, called twice with the same "
                           "state, action StepEveryOtherCall answered otherwise the second time; no verdict."), said
    assert said.endswith("The state: {'x': 0}"), said


@pytest.mark.parametrize("explorer", [Engine(compile="never"), Engine(compile="bytecode"), Engine(compile="now"),
                                      ReferenceExplorer()], ids=["python tier", "bytecode tier", "compiled", "reference"])
def test_a_spec_computes_on_int64_values_on_every_tier(explorer):
    """(s.c * s.c).sum() with c[1] = 50,000 is 2.5e9: the compiled kernels read the chunk's int32
    rows as the state, where numpy's product of two int32 arrays wraps, and said 'holds' (and the
    audit, which compares only the states it samples, did not see it); the Python tiers compute on
    int64 arrays and found the violation."""
    model = Model(odd_specs.ArraySquaresPastInt32(odd_specs.ArraySquaresPastInt32.Params()))
    result = explorer.explore(model, Options(keep_going=True))
    assert result.status == "violated", result.status
    assert [v.check for v in result.violations if v.kind == "invariant"] == ["squares_within_two_billion"]
