"""The Python API's ``kraftcheck.check`` with a spec class given directly."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import kraftcheck
from kraftcheck.api import make_spec
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.explore.simulate import SimulationOptions
from kraftcheck.cli.main import cli
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


class Watched(DieHard):
    """DieHard that notes whether a run began building its model."""

    name = "watched_die_hard"
    built = 0

    def fields(self):
        type(self).built += 1
        return super().fields()


@pytest.mark.parametrize("limits, words", [
    (dict(time_limit=float("nan")), "time_limit: nan is not a number of seconds; give a number greater than 0"),
    (dict(time_limit=float("inf")), "time_limit: inf is not a number of seconds: give a finite number"),
    (dict(time_limit=-5), "time_limit: must be greater than 0, got -5"),
    (dict(max_states=-1), "max_states: must be greater than 0, got -1"),
    (dict(max_states=2.5), "max_states: must be a whole number greater than 0, got 2.5"),
    (dict(max_depth=0), "max_depth: must be greater than 0, got 0"),
    (dict(max_memory_gib=float("nan")), "max_memory_gib: nan is not a number of GiB"),
    (dict(max_memory_gib=0), "max_memory_gib: must be greater than 0, got 0"),
])
def test_a_bad_limit_is_refused_before_any_work(limits, words):
    Watched.built = 0
    with pytest.raises(kraftcheck.UsageError, match=re.escape(words)):
        kraftcheck.check(Watched, **limits)
    assert Watched.built == 0


@pytest.mark.parametrize("options, words", [
    (dict(threads="2"), "threads: must be a whole number greater than 0, got '2'"),
    (dict(threads=3.5), "threads: must be a whole number greater than 0, got 3.5"),
    (dict(compile="later"), "compile: 'later' is not a compile mode; choose one of: background, now"),
    (dict(keep_going="no"), "keep_going: give True or False, got 'no'"),
    (dict(fingerprints=1), "fingerprints: give True or False, got 1"),
    (dict(deadlock="yes"), "deadlock: give True, False or None"),
    (dict(invariants="big_jug_never_holds_4"),
     "invariants: give a list of names, such as invariants=['big_jug_never_holds_4'], not a string"),
    (dict(constraints="c"), "constraints: give a list of names, such as constraints=['c'], not a string"),
    (dict(invariants=5), "invariants: give a list of names, got 5"),
    (dict(progress=3), "progress: give a function called with each progress report, got 3"),
])
def test_an_option_of_the_wrong_kind_is_refused_before_any_work(options, words):
    """Not a traceback mid-run (threads="2", compile="later"), nor a run of other options: a
    string flag would be true, a string of invariant names a list of its letters."""
    Watched.built = 0
    with pytest.raises(kraftcheck.UsageError, match=re.escape(words)):
        kraftcheck.check(Watched, **options)
    assert Watched.built == 0


def test_progress_none_is_no_reports_as_not_given():
    """``progress=None`` was refused as a progress function that is none (a UsageError), where
    None is how Python says 'not given'."""
    result = kraftcheck.check("die_hard", progress=None)
    assert result.status == "violated" and result.distinct_states > 0


@pytest.mark.parametrize("settings, words", [
    (dict(depth=0), "depth: must be greater than 0, got 0"),
    (dict(depth=10**7), "depth: 10,000,000 states per behaviour is more than the 1,000,000"),
    (dict(max_behaviours=-3), "max_behaviours: must be greater than 0, got -3"),
    (dict(time_limit=float("nan")), "time_limit: nan is not a number of seconds"),
    (dict(seed=-1), "seed: must be a whole number from 0 to 2**63 - 1, got -1"),
])
def test_a_bad_simulation_setting_is_refused_before_any_work(settings, words):
    Watched.built = 0
    with pytest.raises(kraftcheck.UsageError, match=re.escape(words)):
        kraftcheck.simulate(Watched, **settings)
    assert Watched.built == 0


def test_the_engines_options_refuse_what_every_entry_point_would():
    for bad in (dict(max_states=0), dict(max_depth=True), dict(time_limit="5"), dict(max_memory=-1)):
        with pytest.raises(kraftcheck.UsageError):
            Options(**bad)
    with pytest.raises(kraftcheck.UsageError, match="max_behaviours"):
        SimulationOptions(max_behaviours=0)
    assert Options(max_states=1, max_depth=1, time_limit=1e-9, max_memory=1).time_limit == 1e-9


def test_the_command_line_says_a_bad_limit_as_the_api_does():
    result = CliRunner().invoke(cli, ["check", "--spec", "die_hard", "--max-states", "-1"])
    assert result.exit_code == 2 and "must be greater than 0, got -1" in result.stderr
    result = CliRunner().invoke(cli, ["check", "--spec", "die_hard", "--time-limit", "nan"])
    assert result.exit_code == 2 and "nan is not a number of seconds; give a number greater than 0" in result.stderr


EVEN_JUGS = Path(__file__).with_name("even_jugs.py")  # a spec whose parameters raise ValueError


def test_parameters_a_spec_refuses_with_a_value_error_are_a_usage_error(tmp_path):
    path = tmp_path / "even_jugs.py"
    shutil.copy(EVEN_JUGS, path)
    said = "spec even_jugs refuses the parameters big=5: ValueError: the big jug must hold an even number of gallons"
    with pytest.raises(kraftcheck.UsageError, match=re.escape(said)):
        kraftcheck.check(f"{path}:EvenJugs", big=5)
    with pytest.raises(kraftcheck.UsageError, match=re.escape(said)):
        make_spec(f"{path}:EvenJugs", {"big": 5})
    result = CliRunner().invoke(cli, ["check", "--spec", f"{path}:EvenJugs", "--param", "big=5"])
    assert result.exit_code == 2 and said in result.stderr and "even_jugs.py:9" in result.stderr, result.stderr
    assert "Traceback" not in result.output


# -- one request, whoever builds it -----------------------------------------------------------------

def test_a_request_made_into_command_arguments_is_the_request_the_command_line_builds(tmp_path):
    """ci and sweep run each check as ``kraftcheck check`` with ``request.command_arguments()``:
    the command line parses them back into the very request (every option a check takes)."""
    from kraftcheck.cli.check_cmd import check, request_from
    from kraftcheck.request import CheckRequest
    request = CheckRequest("two_phase", {"rm": 3}, invariants=("tc_consistent",), constraints=("c",),
                           deadlock=False, keep_going=True, max_states=10, max_depth=4, time_limit=2.5,
                           max_memory_gib=1.5, engine="reference", compile="now", fingerprints=True,
                           checkpoint=str(tmp_path / "ck"), threads=1, liveness=True,
                           dump_graph=str(tmp_path / "g.graphml"), graph_limit=7, json_path=str(tmp_path / "r.json"),
                           trace_dir=str(tmp_path / "t"))
    given = check.make_context("check", request.command_arguments()).params
    for shown in ("quiet", "no_color"):
        given.pop(shown)
    assert request_from(given) == request


def test_a_choice_named_none_survives_the_command_arguments_ci_and_sweep_run():
    """Kafka's recovery strategy "none" is a value, not "not given" (None: balanced): a manifest's
    or a matrix's recovery = "none" runs as none, and --param recovery=none is --recovery none."""
    from kraftcheck.cli.check_cmd import check, request_from
    from kraftcheck.cli.params import parse_param_args
    from kraftcheck.request import CheckRequest
    from kraftcheck.specs import spec_class
    params = {"brokers": 2, "min_isr": 1, "recovery": "none"}
    request = CheckRequest("kafka", params)
    given = check.make_context("check", request.command_arguments()).params
    for shown in ("quiet", "no_color"):
        given.pop(shown)
    assert request_from(given).params == params
    kafka = spec_class("kafka").Params
    assert parse_param_args(kafka, "kafka", ("recovery=none",)) == {"recovery": "none"}
    assert parse_param_args(kafka, "kafka", ("recovery=", "min_isr_policy=none")) == {"recovery": None,
                                                                                     "min_isr_policy": None}


def test_threads_travel_in_the_options_and_a_bad_count_is_refused_before_any_work(monkeypatch):
    monkeypatch.setenv("KRAFTCHECK_THREADS", "many")  # the default only: the run's own count comes first
    assert kraftcheck.check(DieHard, threads=1).distinct_states == 14
    Watched.built = 0
    with pytest.raises(kraftcheck.UsageError, match="threads: must be greater than 0, got 0"):
        kraftcheck.check(Watched, threads=0)
    assert Watched.built == 0


def test_never_fired_says_nothing_of_a_run_that_did_not_see_every_state():
    """A run stopped early (a limit, its first violation) has not seen every state: an action it
    never fired proves nothing, so never_fired() is None there, as the JSON report's never_fired
    is; it listed them, a finding the run had not earned (RMRcvCommitMsg 'never fires' in two_phase
    at depth 2)."""
    cut = kraftcheck.check("two_phase", rm=2, max_depth=2, engine="reference")
    assert not cut.exhaustive and cut.never_fired() is None
    whole = kraftcheck.check("two_phase", rm=2, engine="reference")
    assert whole.exhaustive and whole.never_fired() == []


def test_an_analysis_that_asks_for_other_input_raises_a_usage_error():
    """An analysis stopped by a limit to raise (the state graph larger than --graph-limit) left
    no verdict as a plain KraftcheckError from Python, so `trace report --with-fix` called such a
    fix run an error of the spec's rather than refused; it is a UsageError, as on the command line's
    refusals."""
    import tempfile
    from kraftcheck.api import run
    from kraftcheck.request import CheckRequest
    with tempfile.TemporaryDirectory() as folder:
        request = CheckRequest("two_phase", {"rm": 3}, dump_graph=f"{folder}/g.graphml", graph_limit=10)
        with pytest.raises(kraftcheck.UsageError, match="--graph-limit"):
            run(request)
