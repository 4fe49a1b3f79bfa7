"""Trace files: build, write, load, replay, and reject tampering at the right step and field."""

from __future__ import annotations

import copy
import json
import os
import re

import networkx as nx
import pytest

from kraftcheck import traces
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class
from kraftcheck.traces.errors import ReplayError, TraceFormatError
from kraftcheck.traces.files import from_data, to_json
from kraftcheck.traces.state_graph import explore_graph
from kraftcheck.traces.states import fingerprint, flat_from_readable, readable_state
from traces_support import RUN_OPTIONS, eager_commit_violation


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    model, violation = eager_commit_violation()
    directory = tmp_path_factory.mktemp("traces")
    path = traces.write_counterexample(model, violation, RUN_OPTIONS, directory)
    return model, violation, path


def test_counterexample_file_is_named_from_spec_check_and_fingerprint(written):
    _, violation, path = written
    assert re.fullmatch(r"two_phase_eager_commit\.tc_consistent\.[0-9a-f]{12}\.json", path.name)
    assert violation.trace_file == str(path)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left behind


def test_graph_has_one_node_per_step_with_readable_state(written):
    model, violation, path = written
    g = traces.load(path)
    assert isinstance(g, nx.DiGraph)
    assert list(g.nodes) == list(range(6)) and list(g.edges) == [(i, i + 1) for i in range(5)]
    assert g.nodes[0]["state"]["rm_state"] == {"rm1": "working", "rm2": "working", "rm3": "working"}
    assert g.nodes[5]["state"]["rm_state"] == {"rm1": "committed", "rm2": "aborted", "rm3": "working"}
    assert g.nodes[5]["violated"] == ["tc_consistent"] and g.nodes[4]["violated"] == []
    assert g.edges[0, 1]["action"] == "RMPrepare" and g.edges[0, 1]["params"] == {"rm": "rm1"}
    assert g.edges[2, 3]["action"] == "TMCommit" and g.edges[2, 3]["params"] == {}
    attrs = g.graph
    assert attrs["spec"] == "two_phase_eager_commit" and attrs["params"] == {"rm": 3}
    assert attrs["run_options"] == RUN_OPTIONS
    assert attrs["violation"]["check"] == "tc_consistent" and attrs["violation"]["step"] == 5
    assert "committed while another has aborted" in attrs["violation"]["doc"]
    assert attrs["kraftcheck_version"] and attrs["schema_version"] == traces.SCHEMA_VERSION
    assert attrs["fingerprints"] == [fingerprint(s.state) for s in violation.steps]
    assert list(attrs["lanes"]) == ["global", "rm1", "rm2", "rm3"]


def test_round_trip_is_lossless(written, tmp_path):
    model, violation, path = written
    built = traces.trace_from_violation(model, violation, RUN_OPTIONS)
    loaded = traces.load(path)
    built.graph["created"] = loaded.graph["created"]
    assert nx.utils.graphs_equal(built, loaded)
    assert dict(built.nodes(data=True)) == dict(loaded.nodes(data=True))
    assert list(built.edges(data=True)) == list(loaded.edges(data=True))
    copy_path = traces.save(loaded, tmp_path / "copy.json")
    assert copy_path.read_bytes() == path.read_bytes()


def test_fingerprint_is_stable():
    # BLAKE2b-64 of the flat state as little-endian int64s: fixed forever, files depend on it.
    assert fingerprint((0, 1, 2)) == "cf5ddb2411b6887b"
    assert fingerprint((0, 1, 2)) != fingerprint((0, 2, 1))


def test_readable_form_decodes_back_for_every_reachable_state():
    model = Model(spec_class("two_phase")())
    sg = explore_graph(model)
    assert len(sg.states) == 288
    for flat in sg.states:
        assert flat_from_readable(model.layout, json.loads(json.dumps(readable_state(model.layout, flat)))) == flat


@pytest.mark.parametrize("compiled", [False, True])
def test_replay_accepts_the_counterexample(written, compiled):
    _, _, path = written
    report = traces.replay(traces.load(path), compiled=compiled)
    assert report.ok, report.error
    assert [s.failing for s in report.steps] == [[], [], [], [], [], ["tc_consistent"]]
    assert report.steps[1].action == "RMPrepare(rm=rm1)"


def test_every_shortest_counterexample_replays(tmp_path):
    for name in ("two_phase_eager_commit",):
        model = Model(spec_class(name)())
        result = ReferenceExplorer().explore(model, Options(keep_going=True))
        assert result.violations
        for violation in result.violations:
            path = traces.write_counterexample(model, violation, {}, tmp_path)
            assert traces.replay(traces.load(path)).ok


# ----------------------------------------------------------------------------------------------
# tampering


def _data(path):
    return json.loads(path.read_text())


def _node(data, step):
    return next(n for n in data["nodes"] if n["id"] == step)


def _edge(data, step):
    return next(e for e in data["edges"] if e["target"] == step)


def _replay_error(data) -> ReplayError:
    report = traces.replay(from_data(data))
    assert not report.ok
    return report.error


def test_edited_state_value_is_named_with_its_step(written):
    data = _data(written[2])
    _node(data, 3)["state"]["rm_state"]["rm2"] = "prepared"
    err = _replay_error(data)
    assert (err.step, err.field) == (3, "rm_state[rm2]")
    assert "produces 'working'" in str(err) and "says 'prepared'" in str(err)


def test_value_outside_the_field_is_named(written):
    data = _data(written[2])
    _node(data, 2)["state"]["tm_state"] = "maybe"
    err = _replay_error(data)
    assert (err.step, err.field) == (2, "tm_state") and "not one of init, committed, aborted" in str(err)
    data = _data(written[2])
    _node(data, 4)["state"]["tm_prepared"] = ["rm1", "rm9"]
    assert (_replay_error(data).step, _replay_error(data).field) == (4, "tm_prepared")


def test_edited_action_and_params_are_named(written):
    data = _data(written[2])
    _edge(data, 3)["action"] = "TMAbort"
    err = _replay_error(data)
    assert (err.step, err.field) == (3, "tm_state") and "produces 'aborted'" in str(err)
    data = _data(written[2])
    _edge(data, 4)["action"] = "Reboot"
    err = _replay_error(data)
    assert (err.step, err.field) == (4, "action") and "no action 'Reboot'" in str(err)
    data = _data(written[2])
    _edge(data, 1)["params"] = {"rm": "rm7"}
    err = _replay_error(data)
    assert (err.step, err.field) == (1, "params.rm")
    data = _data(written[2])
    _edge(data, 2)["params"] = {"rm": "rm3"}  # the TM never got rm3's Prepared: not enabled
    err = _replay_error(data)
    assert (err.step, err.field) == (2, "action") and "not enabled" in str(err)


def test_edited_fingerprint_and_checks_are_named(written):
    data = _data(written[2])
    _node(data, 4)["fingerprint"] = "0" * 16
    data["graph"]["fingerprints"][4] = "0" * 16
    err = _replay_error(data)
    assert (err.step, err.field) == (4, "fingerprint")
    data = _data(written[2])
    _node(data, 5)["violated"] = []
    err = _replay_error(data)
    assert (err.step, err.field) == (5, "violated")


def test_edited_field_descriptions_are_named(written):
    """show, render and export read the states through graph.fields: a field left out would show
    no change, a label swapped another element, under a replay that said the trace is a behaviour."""
    data = _data(written[2])
    data["graph"]["fields"].pop(0)  # rm_state: its changes would vanish from the table
    err = _replay_error(data)
    assert err.field == "graph.fields[0].name" and "rm_state" in str(err)
    data = _data(written[2])
    data["graph"]["fields"] = []
    err = _replay_error(data)
    assert err.field == "graph.fields" and "describes 0" in str(err)
    data = _data(written[2])
    data["graph"]["fields"][0]["index_labels"] = list(reversed(data["graph"]["fields"][0]["index_labels"]))
    assert _replay_error(data).field == "graph.fields[0].index_labels"
    data = _data(written[2])
    data["graph"]["fields"][0]["doc"] = "reworded"  # a doc is not what the table reads values by
    assert traces.replay(from_data(data)).ok


def test_edited_lanes_touch_and_records_are_named(written):
    """show, render and export draw each step on the lane the file's touch names, with the messages
    it names, the fields on the lanes graph.lanes gives, and under the action any lines in its
    writes: edited, they showed another story under a replay that said the trace is a behaviour."""
    assert _edge(_data(written[2]), 1)["touch"] == {"lane": "rm1", "receives_from": [], "sends_to": ["global"]}
    data = _data(written[2])
    _edge(data, 1)["touch"] = {"lane": "rm3", "receives_from": ["rm2"], "sends_to": []}
    err = _replay_error(data)
    assert (err.step, err.field) == (1, "touch") and "'lane': 'rm1'" in str(err)
    data = _data(written[2])
    _edge(data, 1)["touch"]["sends_to"] = []
    assert _replay_error(data).field == "touch"
    data = _data(written[2])
    data["graph"]["lanes"] = {"global": ["rm_state[rm1]"], "rm1": ["tm_state"]}
    assert _replay_error(data).field == "graph.lanes"
    for key in ("writes", "code"):
        data = _data(written[2])
        _edge(data, 1)[key] = ["PrepareRecord(rm=1)"]
        err = _replay_error(data)
        assert (err.step, err.field) == (1, key)


def test_trace_that_misses_its_violation_is_rejected(written):
    data = _data(written[2])
    data["nodes"] = [n for n in data["nodes"] if n["id"] < 5]
    data["edges"] = [e for e in data["edges"] if e["target"] < 5]
    data["graph"]["fingerprints"] = data["graph"]["fingerprints"][:5]
    data["graph"]["violation"]["step"] = 4
    _node(data, 4)["violated"] = []
    err = _replay_error(data)
    assert (err.step, err.field) == (4, "violation") and "holds" in str(err)


def test_spec_name_is_looked_up_never_imported(written):
    data = _data(written[2])
    data["graph"]["spec"] = "os:system"
    err = _replay_error(data)
    assert err.field == "graph.spec" and "unknown spec" in str(err)
    data = _data(written[2])
    data["graph"]["params"] = {"rm": 3, "exec": "print(1)"}
    assert _replay_error(data).field == "graph.params.exec"


def test_malformed_files_get_a_clear_error(written, tmp_path):
    text = written[2].read_text()
    bad = tmp_path / "bad.json"
    bad.write_text(text[: len(text) // 2])
    with pytest.raises(TraceFormatError, match="not valid JSON"):
        traces.load(bad)
    data = _data(written[2])
    data["graph"]["schema_version"] = 99
    bad.write_text(json.dumps(data))
    with pytest.raises(TraceFormatError, match="upgrade kraftcheck"):
        traces.load(bad)
    data = _data(written[2])
    del _edge(data, 3)["action"]
    bad.write_text(json.dumps(data))
    with pytest.raises(TraceFormatError) as info:
        traces.load(bad)
    assert (info.value.step, info.value.field) == (3, "action")
    data = _data(written[2])
    data["edges"] = [e for e in data["edges"] if e["target"] != 2]
    bad.write_text(json.dumps(data))
    with pytest.raises(TraceFormatError, match="a trace is a path"):
        traces.load(bad)
    bad.write_text(json.dumps({"nodes": [], "edges": []}))
    with pytest.raises(TraceFormatError, match="graph"):
        traces.load(bad)


def test_failed_write_leaves_the_old_file_and_no_temporary(written, tmp_path, monkeypatch):
    model, violation, path = written
    target = tmp_path / "t.json"
    target.write_text("old")

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        traces.save(traces.load(path), target)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_save_refuses_a_graph_that_is_not_a_trace(tmp_path):
    g = nx.DiGraph()
    g.add_edge(0, 1)
    with pytest.raises(TraceFormatError):
        traces.save(g, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


def test_graph_built_in_python_replays_without_a_file(written):
    g = traces.load(written[2])
    h = copy.deepcopy(g)
    assert traces.replay(h).ok
    h.nodes[1]["state"]["msg_commit"] = True
    assert traces.replay(h).error.field == "msg_commit"
    assert json.loads(to_json(g)) == _data(written[2])


# ----------------------------------------------------------------------------------------------
# lanes: the spec hooks and their defaults


def test_default_lanes_follow_the_most_used_index_labels():
    from kraftcheck.checker.spec import Int, Spec

    class Mixed(Spec):
        name, summary, Params = "mixed", "", type(spec_class("two_phase")().params)

        def fields(self):
            bs, rs = ("b1", "b2"), ("r1", "r2", "r3")
            return [Int("x", 3, (2,), index_labels=bs), Int("y", 3, (2, 2), index_labels=bs),
                    Int("rec", 3, (3,), index_labels=rs), Int("z", 3)]

    assert Mixed().lanes() == {"global": ("rec", "z"), "b1": ("x[b1]", "y[b1]"), "b2": ("x[b2]", "y[b2]")}


def test_spec_can_say_where_an_action_happens():
    from kraftcheck.checker.spec import LaneTouch
    from kraftcheck.specs.two_phase_eager_commit import TwoPhaseEagerCommit
    from kraftcheck.traces.export import to_mermaid

    class Drawn(TwoPhaseEagerCommit):
        main_lane = "tm"

        def action_lanes(self, action, params):
            if action == "RMRcvCommitMsg":
                return LaneTouch(params["rm"], receives_from=("tm",))
            return None

    model, violation = eager_commit_violation()
    drawn = Model(Drawn())
    g = traces.build_trace(drawn, [(s.label, s.state) for s in violation.steps])
    assert list(g.graph["lanes"])[0] == "tm"
    assert g.edges[4, 5]["touch"] == {"lane": "rm1", "receives_from": ["tm"], "sends_to": []}
    assert g.edges[1, 2]["touch"] == {"lane": "tm", "receives_from": ["rm1"], "sends_to": []}  # derived
    assert "  L0->>L1: 5. RMRcvCommitMsg(rm=rm1)" in to_mermaid(g).splitlines()


def test_written_files_get_the_usual_permissions(written, tmp_path):
    mask = os.umask(0o022)
    try:
        path = traces.save(traces.load(written[2]), tmp_path / "perm.json")
    finally:
        os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o644


def test_graph_with_a_python_object_cannot_be_saved(written, tmp_path):
    g = traces.load(written[2])
    g.nodes[2]["state"]["tm_state"] = object()
    with pytest.raises(TraceFormatError, match="JSON cannot represent"):
        traces.save(g, tmp_path / "x.json")
    assert traces.replay(g).error is not None and not (tmp_path / "x.json").exists()


def test_a_trace_lacking_a_parameter_is_not_replayed_against_todays_defaults(written, tmp_path):
    """A trace whose params were {} (or lacked some) replayed against the spec's defaults of the day
    and was called valid, and its report's command left those values out: both depended on
    defaults that can change. Now replay names the missing parameters, and so report refuses the
    trace; a trace as check writes it (every parameter) replays as before."""
    from click.testing import CliRunner

    from kraftcheck.cli.main import cli
    from constraint_specs import Counters, CountersParams

    assert traces.replay(traces.load(written[2])).ok
    data = _data(written[2])
    data["graph"]["params"] = {}
    err = _replay_error(data)
    assert err.field == "graph.params.rm" and "no value of spec two_phase_eager_commit's parameter rm" in str(err)
    path = tmp_path / "no_params.json"
    path.write_text(json.dumps(data))
    replayed = CliRunner().invoke(cli, ["trace", "replay", str(path)])
    assert replayed.exit_code == 1 and "parameter rm" in replayed.output
    reported = CliRunner().invoke(cli, ["trace", "report", str(path)])
    assert reported.exit_code == 2 and "parameter rm" in reported.output and "Reproduce" not in reported.output

    model = Model(Counters(CountersParams(limit=3, cap=3)))
    (violation, *_) = ReferenceExplorer().explore(model, Options(keep_going=True)).violations
    data = json.loads(to_json(traces.trace_from_violation(model, violation, {"constraints": []})))
    assert traces.replay(from_data(data), spec=Counters).ok
    for key in ("n", "blocked"):
        del data["graph"]["params"][key]
    err = traces.replay(from_data(data), spec=Counters).error
    assert err.field == "graph.params.n" and "parameters n, blocked:" in str(err)


def test_the_stricter_variant_a_counterexample_records_is_checked_by_replay():
    """violation.stricter_variant (does the real system have this counterexample too?) was written
    into the file and never checked: an edited 'replays: true' replayed as valid, to be read as
    fact by any program reading the file. Now replay recomputes it on the spec's stricter variant."""
    from kraftcheck.checker.explore.concrete import check_in_stricter_variant
    from traces_support import Jumps

    model = Model(Jumps())
    result = ReferenceExplorer().explore(model, Options())
    check_in_stricter_variant(model, result.violations)
    (violation,) = result.violations
    bad = violation.stricter_variant["step"]
    assert violation.stricter_variant == {"variant": "the stepping counter", "replays": False, "step": bad,
                                          "note": "this counterexample is not a behaviour of the stepping "
                                                  f"counter: it has no step {bad} of it"}
    data = json.loads(to_json(traces.trace_from_violation(model, violation, {})))
    assert traces.replay(from_data(data), spec=Jumps).ok
    claim = data["graph"]["violation"]["stricter_variant"]
    for edit in ({"replays": True, "step": None}, {"note": "this counterexample is also a behaviour of the stepping "
                                                           "counter"},
                 {"variant": "Kafka"}, {"step": 3 - bad}):
        data["graph"]["violation"]["stricter_variant"] = {**claim, **edit}
        err = traces.replay(from_data(data), spec=Jumps).error
        assert err is not None and err.field == "graph.violation.stricter_variant", edit
        assert "the file says" in str(err)
    data["graph"]["violation"]["stricter_variant"] = "anything"
    assert traces.replay(from_data(data), spec=Jumps).error.field == "graph.violation.stricter_variant"
