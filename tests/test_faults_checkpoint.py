"""Faults a checkpoint meets, on purpose: a flipped bit, a truncated or missing level file, an
edited manifest, a second run on a held directory, a mistyped --resume path. Each is refused with
a usage error (exit 2) naming the file or the holder, before any state is read, and leaves the
checkpoint as it was; an intact checkpoint still resumes to the counts of an uninterrupted run."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from kraftcheck.checker.dirlock import LOCK_FILE, DirectoryBusy, lock_directory
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.checkpoint import MANIFEST, CheckpointDamaged, check_level_file
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.levels import DiskLevels
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.cli.main import cli
from kraftcheck.specs import spec_class

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


def _change_a_recorded_size(text):
    manifest = json.loads(text)
    manifest["sizes"][-1] -= 1
    return json.dumps(manifest, indent=1)


DAMAGE = {
    # what is done to the checkpoint -> what the refusal says
    "a bit flipped in a level's words": (lambda ck: _flip_a_bit(ck / f"level-{STOP_AT - 2:04d}.words"),
                                         [f"level-{STOP_AT - 2:04d}.words", "was changed after its run wrote it"]),
    "a level's parents truncated": (lambda ck: os.truncate(ck / "level-0003.parents", 6),
                                    ["level-0003.parents", "has 6 bytes where its run wrote"]),
    "bytes appended to a level's labels": (lambda ck: (ck / "level-0002.labels").open("ab").write(b"\0\0"),
                                           ["level-0002.labels", "bytes where its run wrote"]),
    "a level file missing": (lambda ck: (ck / "level-0001.words").unlink(), ["level-0001.words", "is missing"]),
    "a size edited in the manifest": (lambda ck: _edit_manifest(ck, _change_a_recorded_size),
                                      [MANIFEST, "does not match its sha256"]),
    "a counter edited in the manifest": (lambda ck: _edit_manifest(ck, lambda t: t.replace('"generated": ',
                                                                                           '"generated": 1', 1)),
                                         [MANIFEST, "does not match its sha256"]),
    "the manifest truncated": (lambda ck: _edit_manifest(ck, lambda t: t[: len(t) // 2]),
                               [MANIFEST, "is not a readable checkpoint"]),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_checkpoint_is_refused_naming_the_file_and_left_as_it_is(checkpoint, damage):
    do, said = DAMAGE[damage]
    do(checkpoint)
    before = _contents(checkpoint)
    with pytest.raises(CheckpointDamaged) as refused:
        _resume(checkpoint)
    assert isinstance(refused.value, UsageError)  # exit 2
    for words in said:
        assert words in str(refused.value)
    assert "start the run again with --checkpoint" in str(refused.value)
    assert _contents(checkpoint) == before


def test_a_checkpoint_of_the_format_without_checksums_is_refused_saying_so(checkpoint):
    manifest = json.loads((checkpoint / MANIFEST).read_text())
    del manifest["digest"], manifest["checksums"]
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
        Engine().explore(_model(), Options(keep_going=True, record_graph=True, checkpoint_dir=str(tmp_path / "new")))
    assert not (tmp_path / "new").exists()
