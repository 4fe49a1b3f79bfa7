"""The documentation's worked example is the real, tested file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_writing_a_spec_embeds_die_hard_verbatim():
    doc = (ROOT / "docs" / "writing-a-spec.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    assert (ROOT / "specs" / "die_hard.py").read_text() in blocks


def test_die_hard_counterexample_is_the_puzzle_answer():
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.model import Model
    from kraftcheck.specs.die_hard import DieHard

    model = Model(DieHard())
    (v,) = Engine().explore(model).violations
    assert [str(model.labels[s.label]) for s in v.steps[1:]] == [
        "FillBig", "BigToSmall", "EmptySmall", "BigToSmall", "FillBig", "BigToSmall"]
    assert model.layout.show(v.steps[-1].state) == {"small": 3, "big": 4}
