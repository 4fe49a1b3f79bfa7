"""Faults a checkpoint meets, on purpose: a flipped bit, a truncated or missing level file, an
edited manifest, a second run on a held directory, a mistyped --resume path, the spec's code
edited since the checkpoint was written. Each is refused with
a usage error (exit 2) naming the file or the holder, before any state is read, and leaves the
checkpoint as it was; an intact checkpoint still resumes to the counts of an uninterrupted run."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kraftcheck.checker.dirlock import LOCK_FILE, DirectoryBusy, lock_directory
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.checkpoint import (MANIFEST, CheckpointDamaged, _content_digest, check_level_file,
                                                   check_resumable, run_identity, write_manifest)
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.level_records import LEVEL_RECORDS
from kraftcheck.checker.explore.levels import DiskLevels
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.cli.main import cli
from kraftcheck.specs import spec_class
from kraftcheck.checker.file_modules import file_module_name

SPEC, PARAMS, STOP_AT = "two_phase", {"rm": 4}, 7


def _model(name=SPEC, **params):
    cls = spec_class(name)
    return Model(cls(cls.Params(**(params or PARAMS))))


def _summary(r):
    return (r.status, r.distinct_states, r.states_generated, r.depth, r.coverage())


def _resume(directory):
    return Engine().explore(_model(), Options(checkpoint_dir=str(directory), resume=True))


def _contents(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A checkpoint of a run stopped by --max-depth (resumable), made once and copied per test."""
    directory = tmp_path_factory.mktemp("faults") / "stopped"
    r = Engine().explore(_model(), Options(max_depth=STOP_AT, checkpoint_dir=str(directory)))
    assert r.status == "incomplete" and json.loads((directory / MANIFEST).read_text())["levels"] == STOP_AT
    return directory


@pytest.fixture
def checkpoint(stopped, tmp_path):
    copy = tmp_path / "ck"
    shutil.copytree(stopped, copy)
    return copy


def test_an_intact_checkpoint_resumes_to_the_counts_of_an_uninterrupted_run(checkpoint):
    whole = Engine().explore(_model(), Options())
    resumed = _resume(checkpoint)
    assert resumed.resumed_from_level == STOP_AT
    assert _summary(resumed) == _summary(whole)
    assert not (checkpoint / LOCK_FILE).exists()  # the hold ends with the run


def _flip_a_bit(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _edit_manifest(checkpoint, edit):
    path = checkpoint / MANIFEST
    path.write_text(edit(path.read_text()))


def _change_a_recorded_count(text):
    manifest = json.loads(text)
    manifest["level_records"]["count"] -= 1
    return json.dumps(manifest, indent=1)


def _edit_records(checkpoint, edit):
    path = checkpoint / LEVEL_RECORDS
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(edit(lines)))


def _change_a_record(lines, level=3):
    """A digest of the level's words file changed, the line as long as before."""
    digest = json.loads(lines[level])["files"]["words"]["sha256"]
    lines[level] = lines[level].replace(digest, ("0" if digest[0] != "0" else "1") + digest[1:])
    return lines


DAMAGE = {
    # what is done to the checkpoint -> what the refusal says
    "a bit flipped in a level's words": (lambda ck: _flip_a_bit(ck / f"level-{STOP_AT - 2:04d}.words"),
                                         [f"level-{STOP_AT - 2:04d}.words", "was changed after its run wrote it"]),
    "a level's parents truncated": (lambda ck: os.truncate(ck / "level-0003.parents", 6),
                                    ["level-0003.parents", "has 6 bytes where its run wrote"]),
    "bytes appended to a level's labels": (lambda ck: (ck / "level-0002.labels").open("ab").write(b"\0\0"),
                                           ["level-0002.labels", "bytes where its run wrote"]),
    "a level file missing": (lambda ck: (ck / "level-0001.words").unlink(), ["level-0001.words", "is missing"]),
    "a level count edited in the manifest": (lambda ck: _edit_manifest(ck, _change_a_recorded_count),
                                             [MANIFEST, "does not match its sha256"]),
    "a level's record edited": (lambda ck: _edit_records(ck, _change_a_record),
                                [LEVEL_RECORDS, "the record of level 3 was changed", "chain breaks there"]),
    "a level's record removed": (lambda ck: _edit_records(ck, lambda lines: lines[:2] + lines[3:]),
                                 [LEVEL_RECORDS, "bytes where its run wrote", "(cut short, or a record removed)"]),
    "two levels' records swapped": (lambda ck: _edit_records(ck, lambda lines: [lines[1], lines[0], *lines[2:]]),
                                    [LEVEL_RECORDS, "the record of level 0 is not one its run wrote"]),
    "the level records truncated": (lambda ck: os.truncate(ck / LEVEL_RECORDS, 100),
                                    [LEVEL_RECORDS, "has 100 bytes where its run wrote"]),
    "the level records missing": (lambda ck: (ck / LEVEL_RECORDS).unlink(), [LEVEL_RECORDS, "is missing"]),
    "a counter edited in the manifest": (lambda ck: _edit_manifest(ck, lambda t: re.sub(r'"generated": ?',
                                                                                        '"generated": 1', t, 1)),
                                         [MANIFEST, "does not match its sha256"]),
    "the manifest truncated": (lambda ck: _edit_manifest(ck, lambda t: t[: len(t) // 2]),
                               [MANIFEST, "is not a readable checkpoint"]),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_checkpoint_is_refused_naming_the_file_and_left_as_it_is(checkpoint, damage, monkeypatch):
    """Refused before the kernels are loaded or compiled (a cold compile takes minutes; a Ctrl-C
    while the files were checked after it reported a run of no states)."""
    do, said = DAMAGE[damage]
    do(checkpoint)
    before = _contents(checkpoint)

    def start_kernels(*_):
        raise AssertionError("the kernels were started before the checkpoint's files were checked")

    monkeypatch.setattr("kraftcheck.checker.explore.engine.start_kernels", start_kernels)
    with pytest.raises(CheckpointDamaged) as refused:
        _resume(checkpoint)
    assert isinstance(refused.value, UsageError)  # exit 2
    for words in said:
        assert words in str(refused.value)
    assert "start the run again with --checkpoint" in str(refused.value)
    assert _contents(checkpoint) == before


def test_records_written_after_the_manifest_are_not_the_checkpoints_and_are_cut_off(checkpoint):
    """A level recorded and then a crash before the manifest named it, and a line a full disk cut
    short: neither is part of the checkpoint; the resume ends as an uninterrupted run and its first
    level's record replaces them."""
    records = checkpoint / LEVEL_RECORDS
    lines = records.read_text().splitlines(keepends=True)
    with records.open("a") as f:
        f.write(lines[-1].replace('"level":' + str(STOP_AT - 1), '"level":' + str(STOP_AT)) + lines[0][:30])
    resumed = _resume(checkpoint)
    assert _summary(resumed) == _summary(Engine().explore(_model(), Options()))
    after = records.read_text().splitlines(keepends=True)
    assert after[:STOP_AT] == lines and len(after) == resumed.depth
    assert [json.loads(line)["level"] for line in after] == list(range(resumed.depth))


def test_level_records_that_are_no_file_are_refused_even_before_the_first_level(tmp_path):
    """A checkpoint stopped before its first level names no record; a FIFO in the records' place
    blocked the resume's first append for ever."""
    from kraftcheck.checker.explore.observer import RunObserver

    class StopBeforeTheFirstLevel(RunObserver):
        def run_started(self):
            raise KeyboardInterrupt

    directory = tmp_path / "ck"
    stopped = Engine().explore(_model(), Options(checkpoint_dir=str(directory)), observer=StopBeforeTheFirstLevel())
    assert stopped.interrupted and json.loads((directory / MANIFEST).read_text())["level_records"]["count"] == 0
    os.mkfifo(directory / LEVEL_RECORDS)
    with pytest.raises(CheckpointDamaged, match="levels.jsonl cannot be read .not a regular file"):
        _resume(directory)


def _as_format_3(checkpoint):
    """The checkpoint as format 3 wrote it (every level listed in the manifest, no records); its manifest as read before."""
    from kraftcheck.checker.explore.checkpoint import read_manifest
    listed = read_manifest(checkpoint)

    def format_3(manifest):
        manifest["format_version"] = 3
        del manifest["level_records"]
        manifest["sizes"], manifest["checksums"] = listed["sizes"], listed["checksums"]
    _rewrite_manifest(checkpoint, format_3)
    (checkpoint / LEVEL_RECORDS).unlink()
    return listed


def test_a_checkpoint_of_format_3_resumes_and_records_its_levels(checkpoint):
    """Format 3 listed every level in the manifest: such a checkpoint (kraftcheck 0.2.0 wrote it
    too) still resumes, checked as before, to the counts of an uninterrupted run."""
    listed = _as_format_3(checkpoint)
    _flip_a_bit(checkpoint / "level-0002.words")
    with pytest.raises(CheckpointDamaged, match="level-0002.words was changed after its run wrote it"):
        _resume(checkpoint)
    _flip_a_bit(checkpoint / "level-0002.words")
    resumed = _resume(checkpoint)
    assert _summary(resumed) == _summary(Engine().explore(_model(), Options()))
    assert [json.loads(line)["states"] for line in (checkpoint / LEVEL_RECORDS).read_text().splitlines()][:STOP_AT] \
        == listed["sizes"]


def test_level_records_that_are_no_file_are_refused_in_a_checkpoint_of_format_3(checkpoint):
    """Format 3 names no records, so its resume did not look at the records' place before its
    first append, which a FIFO there blocked for ever."""
    _as_format_3(checkpoint)
    os.mkfifo(checkpoint / LEVEL_RECORDS)
    with pytest.raises(CheckpointDamaged, match="levels.jsonl cannot be read .not a regular file"):
        _resume(checkpoint)


def test_a_checkpoint_of_the_format_without_checksums_is_refused_saying_so(checkpoint):
    manifest = json.loads((checkpoint / MANIFEST).read_text())
    del manifest["digest"], manifest["level_records"]
    manifest["format_version"] = 1
    (checkpoint / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(UsageError, match="checkpoint of format 1 .*carry no checksums"):
        _resume(checkpoint)


def test_the_checksums_of_a_level_cut_at_a_violation_are_those_of_its_file(tmp_path):
    """A run stopped at its first violation cuts the level being built after the violating
    state: the level's checksums are those of its files as they stay, not of the bytes written."""
    levels = DiskLevels(2, tmp_path)
    for first in (0, 5):
        rows = np.arange(first, first + 5, dtype=np.uint32)
        levels.add(np.repeat(rows.astype(np.uint64), 2).reshape(-1, 2), rows, rows.astype(np.uint16))
    levels.truncate_pending(2)
    assert levels.finish_level().shape == (7, 2)
    levels.close()
    [files] = levels.checksums
    assert {kind: record["bytes"] for kind, record in files.items()} == {"words": 7 * 16, "parents": 7 * 4,
                                                                         "labels": 7 * 2}
    for kind, record in files.items():
        check_level_file(levels.path(0, kind), record)


def test_a_held_checkpoint_directory_is_refused_at_once_naming_its_holder(checkpoint, tmp_path):
    """Another run's hold (a second open file description of the lock: flock refuses it as it
    refuses another process) stops a resume and a new run alike, before any work."""
    before = _contents(checkpoint)
    with lock_directory(checkpoint, "a checkpointed run"):
        with pytest.raises(DirectoryBusy, match=f"pid {os.getpid()}"):
            _resume(checkpoint)
        said = CliRunner().invoke(cli, ["check", "--spec", SPEC, "--param", "rm=4", "--resume", str(checkpoint),
                                        "--no-color"])
        assert said.exit_code == 2, said.output
        message = " ".join(said.stderr.split())
        assert f"{checkpoint} is in use by a checkpointed run: pid {os.getpid()}" in message
        assert "Traceback" not in said.output
        with lock_directory(tmp_path / "new", "a checkpointed run"):
            with pytest.raises(DirectoryBusy):
                Engine().explore(_model(), Options(checkpoint_dir=str(tmp_path / "new")))
    assert _contents(checkpoint) == before  # the refused runs touched nothing; the hold's file went with it
    # a lock file left by a killed run (the kernel dropped its lock) holds nothing
    (tmp_path / "left").mkdir()
    (tmp_path / "left" / LOCK_FILE).write_text("{}")
    r = Engine().explore(_model(), Options(max_depth=2, checkpoint_dir=str(tmp_path / "left")))
    assert r.depth == 2 and not (tmp_path / "left" / LOCK_FILE).exists()


def test_resume_of_a_path_without_a_checkpoint_is_refused_and_creates_nothing(tmp_path):
    missing = tmp_path / "mistyped" / "ck"
    said = CliRunner().invoke(cli, ["check", "--spec", SPEC, "--resume", str(missing), "--no-color"])
    assert said.exit_code == 2 and "no such checkpoint directory" in said.stderr, said.output
    assert "checking" not in said.output  # refused before any work
    with pytest.raises(UsageError, match="no such checkpoint directory"):
        _resume(missing)
    assert not (tmp_path / "mistyped").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no checkpoint there"):
        _resume(tmp_path / "empty")
    assert not any((tmp_path / "empty").iterdir())
    # a new run refused after its directory was taken leaves no empty directory either
    with pytest.raises(UsageError, match="recording the state graph"):
        Engine().explore(_model(), Options(keep_going=True, keep_graph=True, checkpoint_dir=str(tmp_path / "new")))
    assert not (tmp_path / "new").exists()


# --- the spec's code is part of a checkpoint's identity -------------------------------------------------------

EDITS = {
    # what is edited in the spec file: (the text, what it becomes)
    "an action's guard": ("if s.tm_state != TM_INIT or s.tm_prepared != (1 << len(s.rm_state)) - 1:",
                          "if s.tm_state != TM_INIT:"),
    "the invariant, to fail on the initial state": ("return not (committed and aborted)", "return False"),
}


@pytest.fixture
def spec_file(tmp_path):
    """A copy of two_phase loaded by path, with its own name (a copy named like the bundled spec is refused)."""
    from kraftcheck.specs import two_phase
    path = tmp_path / "two_phase_copy.py"
    path.write_text(Path(two_phase.__file__).read_text().replace('name = "two_phase"', 'name = "two_phase_copy"'))
    return path, f"{path}:TwoPhase"


def _as_checkpoint_of(checkpoint, model):
    """``checkpoint`` (of the bundled two_phase) made the checkpoint of ``model``, a copy of the
    same spec: only the identity differs, and a run of the copy would have written the same levels.
    (The copy's own run would compile its kernels afresh, for many seconds; the refusal comes
    before anything is compiled.)"""
    def of_the_copy(manifest):
        ours = manifest["identity"]
        manifest["identity"] = run_identity(model, ours["fingerprints"], ours["symmetry"])
    _rewrite_manifest(checkpoint, of_the_copy)


@pytest.mark.parametrize("edit", EDITS)
def test_a_checkpoint_resumed_after_its_spec_file_was_edited_is_refused_naming_the_file(checkpoint, spec_file, edit):
    path, ref = spec_file
    model = _model(ref)
    _as_checkpoint_of(checkpoint, model)
    assert check_resumable(checkpoint, run_identity(model, False))  # as it was written: resumable
    old, new = EDITS[edit]
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    # this process still runs the code it imported, the checkpoint's: its identity is unchanged
    assert run_identity(_model(ref), False)["code"] == run_identity(model, False)["code"]
    before = _contents(checkpoint)
    del sys.modules[file_module_name(path)]  # imported again, as the next run does: the edited code
    with pytest.raises(UsageError) as refused:
        Engine().explore(_model(ref), Options(checkpoint_dir=str(checkpoint), resume=True))
    assert not isinstance(refused.value, CheckpointDamaged)  # the checkpoint is intact; the code is not its code
    assert f"the spec's code changed since the checkpoint was written ({path.resolve()} differs)" in str(refused.value)
    assert _contents(checkpoint) == before
    said = CliRunner().invoke(cli, ["check", "--spec", ref, "--param", "rm=4", "--resume", str(checkpoint),
                                    "--no-color"])
    assert said.exit_code == 2 and f"({path.resolve()} differs)" in "".join(said.stderr.split("\n")), said.output
    assert _contents(checkpoint) == before


def _rewrite_manifest(checkpoint, edit):
    """The manifest edited and its digest made to match (as a run of that content would have written it)."""
    manifest = json.loads((checkpoint / MANIFEST).read_text())
    edit(manifest)
    manifest["digest"] = _content_digest(manifest)
    (checkpoint / MANIFEST).write_text(json.dumps(manifest))


def test_a_checkpoint_of_the_format_without_the_spec_code_is_refused_saying_so(checkpoint):
    def format_2(manifest):
        manifest["format_version"] = 2
        del manifest["identity"]["code"]
    _rewrite_manifest(checkpoint, format_2)
    with pytest.raises(UsageError, match="checkpoint of format 2 .*did not record the spec's code"):
        _resume(checkpoint)


def test_another_runs_layout_is_shown_where_it_differs(checkpoint):
    def other_layout(manifest):
        manifest["identity"]["layout"]["dtype"][-1][0] = "some_other_field"
    _rewrite_manifest(checkpoint, other_layout)
    with pytest.raises(UsageError, match="belongs to another run") as refused:
        _resume(checkpoint)
    assert '"some_other_field"' in str(refused.value)
    ours = json.dumps(run_identity(_model(), False)["layout"])
    assert ours not in str(refused.value) and len(ours) > 60  # cut, yet around the difference


def test_a_spark_work_dir_is_refused_under_other_spec_code(tmp_path):
    """The Spark explorer's resume checks its work dir's identity (the local one and Spark's own
    entries) with the same check: other code is refused."""
    from kraftcheck.spark.explorer import run_identity_on_spark
    model = _model()
    identity = run_identity_on_spark(model, 2)
    module = type(model.spec).__module__
    assert set(identity["code"]) == {module}
    write_manifest(tmp_path, {**identity, "code": {module: "0" * 64}}, {"levels": 1})
    with pytest.raises(UsageError, match=r"the spec's code changed .*two_phase\.py differs"):
        check_resumable(tmp_path, identity)
    write_manifest(tmp_path, identity, {"levels": 1})
    assert check_resumable(tmp_path, identity)["levels"] == 1


def test_a_resume_with_a_max_depth_its_run_is_past_is_refused(checkpoint, monkeypatch):
    """It reported 'stopped at --max-depth 4' with the checkpoint's larger depth (exit 3)."""
    monkeypatch.setattr("kraftcheck.checker.explore.engine.start_kernels", lambda *_: pytest.fail("started"))
    before = _contents(checkpoint)
    with pytest.raises(UsageError, match=f"at depth {STOP_AT} already, past --max-depth 4; give --max-depth {STOP_AT}"):
        Engine().explore(_model(), Options(checkpoint_dir=str(checkpoint), resume=True, max_depth=4))
    assert _contents(checkpoint) == before
    monkeypatch.undo()
    same = Engine().explore(_model(), Options(checkpoint_dir=str(checkpoint), resume=True, max_depth=STOP_AT))
    assert same.status == "incomplete" and same.depth == STOP_AT  # the run's own bound still resumes


def _states_held(checkpoint):
    return sum(json.loads(line)["states"] for line in (checkpoint / LEVEL_RECORDS).read_text().splitlines())


def test_a_resume_with_fewer_max_states_than_its_checkpoint_holds_is_refused(checkpoint, monkeypatch):
    """It started the kernels and stopped at the first chunk of the visited set's rebuild, 'stopped
    at --max-states' with more states than that (exit 3): for a large checkpoint, minutes of work
    toward a run that could not go on. Now refused before anything starts, saying how many it holds."""
    held = _states_held(checkpoint)
    monkeypatch.setattr("kraftcheck.checker.explore.engine.start_kernels", lambda *_: pytest.fail("started"))
    before = _contents(checkpoint)
    with pytest.raises(UsageError, match=f"holds {held:,} states already, more than --max-states {held - 1:,}; "
                                         f"give --max-states {held:,} or more, or none"):
        Engine().explore(_model(), Options(checkpoint_dir=str(checkpoint), resume=True, max_states=held - 1))
    assert _contents(checkpoint) == before
    result = CliRunner().invoke(cli, ["check", "--spec", SPEC, "--param", "rm=4", "--resume", str(checkpoint),
                                      "--max-states", "1"])
    assert result.exit_code == 2 and f"holds {held:,} states already, more than --max-states 1" in result.output, \
        result.output
    assert _contents(checkpoint) == before
    monkeypatch.undo()
    same = Engine().explore(_model(), Options(checkpoint_dir=str(checkpoint), resume=True, max_states=held))
    assert same.status == "incomplete" and same.distinct_states > held  # as many as it holds still resumes


def test_a_resume_past_the_graph_limit_names_the_graph_limit(checkpoint, tmp_path):
    """--dump-graph bounds the exploration by --graph-limit, not --max-states: the refusal told the
    user to give '--max-states N or more' (also when they had), which changed nothing; it names
    the option that set the limit."""
    held = _states_held(checkpoint)
    before = _contents(checkpoint)
    for extra in ([], ["--max-states", str(held * 10)]):
        result = CliRunner().invoke(cli, ["check", "--spec", SPEC, "--param", "rm=4", "--resume", str(checkpoint),
                                          "--dump-graph", str(tmp_path / "g.graphml"), "--graph-limit", "5",
                                          *extra])
        said = " ".join(result.output.split())
        assert result.exit_code == 2 and f"holds {held:,} states already, more than --graph-limit 5" in said, said
        assert f"give --graph-limit {held:,} or more" in said and "--max-states" not in said, said
        assert _contents(checkpoint) == before and not (tmp_path / "g.graphml").exists()


def test_a_level_file_changed_in_place_after_the_check_is_still_found(checkpoint, tmp_path):
    """A resume's level files are checked before anything is compiled and again as they are mapped,
    the second time from the digest the first found if the file looks unchanged: a byte changed in
    place with its modification time put back is still found (its change time moved), and outside a
    resume nothing is remembered."""
    from kraftcheck.checker.explore import checkpoint as ck
    manifest = ck.read_manifest(checkpoint)
    path, recorded = checkpoint / "level-0002.words", manifest["checksums"][2]["words"]
    ck.check_level_files(checkpoint, manifest)
    st = path.stat()
    _flip_a_bit(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(CheckpointDamaged, match="was changed after its run wrote it"):
        check_level_file(path, recorded)
    ck.forget_found_digests()
    _flip_a_bit(path)  # back as written: found so, and then remembered by nothing
    check_level_file(path, recorded)
    assert not ck._digests_found


def test_every_manifest_comes_after_the_names_of_the_files_it_names_are_durable(tmp_path, monkeypatch):
    """fsyncing a file makes its bytes durable, not its name: a crash could keep a manifest (renamed
    into place) and lose a level file or the level records created since the last one, leaving a
    checkpoint that names a file that is not there. The directory is synced before each manifest."""
    from kraftcheck.checker.explore import checkpoint_writer

    events = []
    sync, write = checkpoint_writer.sync_directory, checkpoint_writer.write_manifest
    monkeypatch.setattr(checkpoint_writer, "sync_directory", lambda d: (events.append(("sync", Path(d))), sync(d)))
    monkeypatch.setattr(checkpoint_writer, "write_manifest",
                        lambda d, *a: (events.append(("manifest", Path(d))), write(d, *a)))
    r = Engine().explore(_model(), Options(checkpoint_dir=str(tmp_path / "ck")))
    manifests = [i for i, (what, _) in enumerate(events) if what == "manifest"]
    assert len(manifests) == r.depth + 2  # before the first level, after each, and the finished run's
    assert all(events[i - 1] == ("sync", tmp_path / "ck") for i in manifests), events
