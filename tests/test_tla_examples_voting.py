"""Lamport's Voting from the TLA+ Examples (bench/specs/voting.py), the worked translation of
docs/writing-a-spec.md, against TLC; and how its fields show in traces: ``max_bal`` holds -1
(``Int(name, lo, hi)``), ``votes`` has three axes, two of them labelled (``axis_labels``)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kraftcheck import traces
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.cli.trace_cmd import trace
from kraftcheck.traces.states import DecodeError, flat_from_readable

from conftest import TableLayoutEngine
from voting_support import Voting, VotingWithChosen


def _counts(result):
    return (result.status, result.initial_states, result.states_generated, result.distinct_states, result.depth)


@pytest.mark.parametrize("explorer", [ReferenceExplorer, Engine, TableLayoutEngine],
                         ids=["reference", "engine", "engine-table-layouts"])
def test_voting_gives_tlcs_counts(explorer):
    """MCVoting of the TLA+ Examples (specifications/Paxos/MCVoting.tla and MCVoting.cfg at commit
    32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9: Acceptor = {a1, a2, a3}, Value = {v1, v2},
    Quorum = {{a1, a2}, {a1, a3}, {a2, a3}}, Ballot = 0..1, INVARIANT Inv, CHECK_DEADLOCK FALSE)
    without its SYMMETRY and PROPERTY lines, as TLC 2.20 (rev 96056d9, -workers 1) reports it:

        Model checking completed. No error has been found.
        3124 states generated, 599 distinct states found, 0 states left on queue.
        The depth of the complete state graph search is 11.

    (Voting.tla run with its proof part cut, from ``C == INSTANCE Consensus`` on, and without
    ``EXTENDS TLAPS``, which the jar does not ship; the cut defines nothing the model uses. With
    the SYMMETRY line, that copy gives the Examples' own manifest figures, 451 generated and 77
    distinct, depth 11.) TLC's coverage counts VoteFor 2,352 times: one per witness of the
    existentials inside it, which the spec makes parameters."""
    result = explorer().explore(Model(Voting()), Options())
    assert _counts(result) == ("holds", 1, 3124, 599, 11)
    assert {a: c["fired"] for a, c in result.coverage().items()} == {"IncreaseMaxBal": 771, "VoteFor": 2352}


@pytest.mark.parametrize("explorer", [Engine, TableLayoutEngine], ids=["engine", "engine-table-layouts"])
def test_voting_with_three_ballots_gives_tlcs_counts(explorer):
    """The same model with ``MCBallot == 0..2`` (MCVoting.tla edited in the same copy), as TLC
    2.20 (rev 96056d9, -workers 1) reports it:

        41017 states generated, 6752 distinct states found, 0 states left on queue.
        The depth of the complete state graph search is 16."""
    result = explorer().explore(Model(Voting(Voting.Params(ballots=3))), Options())
    assert _counts(result) == ("holds", 1, 41017, 6752, 16)


@pytest.fixture(scope="module")
def chosen_trace(tmp_path_factory):
    model = Model(VotingWithChosen())
    result = ReferenceExplorer().explore(model, Options(keep_going=False))
    (violation,) = result.violations
    assert violation.check == "nothing_chosen"
    options = {"engine": "reference", "max_states": None, "max_depth": None, "keep_going": False,
               "check": ["nothing_chosen"]}
    return model, traces.write_counterexample(model, violation, options, tmp_path_factory.mktemp("voting"))


def test_a_trace_names_every_labelled_axis_and_shows_minus_one_as_written(chosen_trace):
    _, path = chosen_trace
    result = CliRunner().invoke(trace, ["show", str(path), "--no-color", "--ascii", "--width", "160", "--full"])
    assert result.exit_code == 0, result.output
    out = result.output
    # acceptors and values by name, ballots (no labels) by number
    assert "votes[a1][0][v1]: false" in out and "votes[a3][1][v2]: false" in out
    assert "max_bal[a1]: -1" in out
    # the shortest way to a chosen value: two acceptors vote in ballot 0, with no IncreaseMaxBal
    # before; VoteFor(a, b, v) sets maxBal[a] to b (Voting.tla: maxBal' = [maxBal EXCEPT ![a] = b]),
    # so a1's goes from -1 to 0, and never to 1, after which a1 could not vote in ballot 0
    assert "VoteFor(a=a1, b=0, v=v1, Q={a1,a2}, c=-1, w=none)" in out
    assert "max_bal[a1]: -1 -> 0" in out and "max_bal[a1]: -1 -> 1" not in out


def test_the_trace_file_keeps_labelled_axes_as_mappings_and_replays(chosen_trace):
    model, path = chosen_trace
    graph = traces.load(path)
    fields = {f["name"]: f for f in graph.graph["fields"]}
    assert fields["votes"]["axis_labels"] == [["a1", "a2", "a3"], None, ["v1", "v2"]]
    assert fields["max_bal"]["lo"] == -1 and "axis_labels" not in fields["max_bal"]
    first = graph.nodes[0]["state"]
    assert first["max_bal"] == {"a1": -1, "a2": -1, "a3": -1}
    assert first["votes"]["a2"] == [{"v1": False, "v2": False}, {"v1": False, "v2": False}]
    report = traces.replay(graph, spec=VotingWithChosen)
    assert report.ok, report.error
    # a value below the field's smallest is refused, naming the element
    bad = json.loads(json.dumps(first))
    bad["max_bal"]["a2"] = -2
    with pytest.raises(DecodeError, match=r"max_bal\[a2\]: -2 is outside -1\.\.1"):
        flat_from_readable(model.layout, bad)
    bad = json.loads(json.dumps(first))
    del bad["votes"]["a1"][1]["v2"]
    with pytest.raises(DecodeError, match=r"votes\[a1\]\[1\]\[v2\]: missing"):
        flat_from_readable(model.layout, bad)


def test_the_docs_trace_lines_are_what_trace_show_prints(chosen_trace):
    """docs/writing-a-spec.md's worked translation quotes two lines of this trace's table."""
    import re
    from pathlib import Path

    from kraftcheck.traces.table import trace_text
    from kraftcheck.traces.view import TraceView

    doc = (Path(__file__).resolve().parents[1] / "docs" / "writing-a-spec.md").read_text()
    section = doc[doc.index("### Worked translation: Voting"):]
    quoted = re.findall(r"```text\n(\|.*?)```", section, flags=re.S)[0].splitlines()
    _, path = chosen_trace
    table = trace_text(TraceView(traces.load(path)), width=110, ascii_only=True).splitlines()
    assert len(quoted) == 2 and all(line in table for line in quoted)


@pytest.mark.parametrize("change, message", [
    (lambda f: f.__setitem__("axis_labels", [["a1", "a2", "a3"], None]), "axis_labels must have one entry per axis"),
    (lambda f: f.__setitem__("axis_labels", [["a1", "a2"], None, ["v1", "v2"]]), "axis_labels must have one entry"),
    (lambda f: f.__setitem__("lo", "-1"), "lo, the field's smallest value, must be an integer"),
])
def test_a_tampered_field_description_is_refused_on_load(chosen_trace, tmp_path, change, message):
    from kraftcheck.traces.errors import TraceFormatError

    _, path = chosen_trace
    data = json.loads(path.read_text())
    field = next(f for f in data["graph"]["fields"] if f["name"] == ("max_bal" if "lo" in message else "votes"))
    change(field)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(TraceFormatError, match=message):
        traces.load(bad)


def test_a_field_that_names_its_axes_shows_them_named_in_trace_tables(tmp_path):
    from voting_support import VotingWithChosenRecords

    model = Model(VotingWithChosenRecords())
    (violation,) = ReferenceExplorer().explore(model, Options()).violations
    options = {"engine": "reference", "max_states": None, "max_depth": None, "keep_going": False,
               "check": ["nothing_chosen"]}
    path = traces.write_counterexample(model, violation, options, tmp_path)
    result = CliRunner().invoke(trace, ["show", str(path), "--no-color", "--ascii", "--width", "160"])
    assert result.exit_code == 0, result.output
    assert "votes[acceptor=a1, ballot=0, value=v1]: false -> true" in result.output
    assert "max_bal[a1]: -1 -> 0" in result.output  # a field that names no axes is shown as before
    graph = traces.load(path)
    assert {f["name"]: f.get("axis_names") for f in graph.graph["fields"]}["votes"] == ["acceptor", "ballot", "value"]
    # the file itself, its lanes and its replay keep the element names
    assert traces.replay(graph, spec=VotingWithChosenRecords).ok
