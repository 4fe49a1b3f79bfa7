"""The Python API's ``kraftcheck.check`` with a spec class given directly."""

from __future__ import annotations

import pytest

import kraftcheck
from kraftcheck.specs.die_hard import DieHard


def test_a_class_given_directly_is_checked():
    result = kraftcheck.check(DieHard, small=3, big=5)
    assert result.status == "violated" and [v.depth for v in result.violations] == [7]


def test_a_subclass_under_its_own_name_runs():
    class BigJugOnly(DieHard):
        name = "big_jug_only"

    assert kraftcheck.check(BigJugOnly).status == "violated"


def test_a_class_that_takes_a_registered_name_is_refused():
    class Copy(DieHard):  # forgot to set name: its traces would be replayed against die_hard
        pass

    with pytest.raises(kraftcheck.UsageError, match="is named 'die_hard'"):
        kraftcheck.check(Copy)


def test_not_a_spec_is_refused():
    with pytest.raises(kraftcheck.UsageError, match="is not a spec"):
        kraftcheck.check(int)


@pytest.mark.parametrize("value", ["abc", "0"])
def test_a_bad_thread_count_in_the_environment_is_refused(monkeypatch, value):
    monkeypatch.setenv("KRAFTCHECK_THREADS", value)
    with pytest.raises(kraftcheck.UsageError, match=f"KRAFTCHECK_THREADS={value}|KRAFTCHECK_THREADS='{value}'"):
        kraftcheck.check(DieHard)
