"""Levels on disk give the in-memory results: in a checkpoint, and spilled to a temporary
directory once they outgrow their share of memory (engine.py, ``DiskLevels.spill``), whose
directory goes however the run ends. The threshold is forced (``Engine(spill_levels_at=...)``)
on small models."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model
from kraftcheck.checker.report import build_report
from kraftcheck.cli.terminal import Terminal
from kraftcheck.specs import spec_class


def _model(name, **params):
    cls = spec_class(name)
    return Model(cls(cls.Params(**params)))


def _summary(r):
    return (r.status, r.initial_states, r.distinct_states, r.states_generated, r.depth, r.coverage(),
            [(v.check, v.kind, [(s.label, s.state) for s in v.steps]) for v in r.violations])


@pytest.fixture
def spill_root(tmp_path, monkeypatch):
    """Where this test's spills go (tempfile's $TMPDIR): nothing else writes there."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


# a violating spec (first violation; --continue with --fingerprints), the Kafka model, and a
# symmetric one (--symmetry); the last flag: also with --checkpoint (levels on disk from the start)
KAFKA = {"brokers": 2, "min_isr": 1, "protocol": "kafka-3.5", "lossy_shutdowns": 1, "fences": 0, "isr_shrinks": 0,
         "min_isr_changes": 0}
CASES = [
    ("two_phase_eager_commit", {"rm": 4}, {}, True),
    ("two_phase_eager_commit", {"rm": 4}, {"keep_going": True, "fingerprints": True}, True),
    ("kafka", KAFKA, {"keep_going": True}, True),
    ("symmetry_specs:Voting", {"revote": True}, {"keep_going": True, "symmetry": True}, False),
]


@pytest.mark.parametrize("name,params,options,checkpoint", CASES, ids=[f"{n}-{o}" for n, _, o, _ in CASES])
def test_levels_on_disk_give_the_in_memory_results(spill_root, tmp_path, name, params, options, checkpoint):
    """Spilled from the first level on, spilled in the middle of the run (small chunks, a
    threshold passed after a few levels), and in a checkpoint: every count, verdict and trace the
    same as in memory."""
    memory = Engine().explore(_model(name, **params), Options(**options))
    assert memory.levels_spilled is None and not list(spill_root.iterdir()), "nothing on disk below the threshold"
    first = Engine(spill_levels_at=0).explore(_model(name, **params), Options(**options))
    # half the parents and labels the whole run holds (6 bytes a state): passed half way or so
    at = 3 * memory.distinct_states
    middle = Engine(spill_levels_at=at, chunk_candidates=64).explore(_model(name, **params), Options(**options))
    assert first.levels_spilled["at_level"] == 1
    assert middle.levels_spilled["at_level"] > 1 and middle.levels_spilled["at_distinct"] < memory.distinct_states
    assert _summary(first) == _summary(memory)
    assert _summary(middle) == _summary(memory)
    assert not list(spill_root.iterdir())
    if checkpoint:
        directory = tmp_path / "checkpoint"
        disk = Engine().explore(_model(name, **params), Options(**options, checkpoint_dir=str(directory)))
        assert disk.levels_spilled is None
        assert _summary(disk) == _summary(memory)
        assert sorted(p.name for p in directory.iterdir())[0] == "checkpoint.json"


def _spilling_run(spill_root, name, options, on_progress=None):
    """A run spilled from its first level; per progress report after the spill, the files in its
    directory."""
    seen = []

    def progress(p):
        if p.levels_spilled_to is not None:
            seen.append(sorted(f.name for f in Path(p.levels_spilled_to).iterdir()))
            if on_progress is not None:
                on_progress()

    result = Engine(spill_levels_at=0).explore(_model(name, rm=4), options, progress)
    return result, seen


def test_the_directory_holds_the_levels_while_running_and_goes_at_a_normal_end(spill_root):
    result, seen = _spilling_run(spill_root, "two_phase", Options(keep_going=True))
    assert result.status == "holds" and result.levels_spilled is not None
    assert str(spill_root) in result.levels_spilled["directory"]
    assert seen and any(f.endswith(".parents") for f in seen[-1])
    # expanded levels' words are deleted: at most the frontier's and the next level's
    assert max(sum(f.endswith(".words") for f in files) for files in seen) <= 2
    assert not list(spill_root.iterdir())


def test_the_directory_goes_at_a_violation_stop(spill_root):
    result, seen = _spilling_run(spill_root, "two_phase_eager_commit", Options())
    assert result.status == "violated" and seen
    assert not list(spill_root.iterdir())


def test_the_directory_goes_on_an_exception_and_on_ctrl_c(spill_root):
    def fail():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        _spilling_run(spill_root, "two_phase", Options(keep_going=True), fail)
    assert not list(spill_root.iterdir())

    def interrupt():
        raise KeyboardInterrupt

    result, seen = _spilling_run(spill_root, "two_phase", Options(keep_going=True), interrupt)
    assert result.interrupted and seen
    assert not list(spill_root.iterdir())


def test_the_report_and_summary_say_the_levels_spilled(spill_root, capsys):
    result = Engine(spill_levels_at=0).explore(_model("two_phase", rm=4), Options(keep_going=True))
    report = build_report(result, {}, {})
    assert report["levels_spilled"]["at_level"] == 1
    assert report["levels_spilled"]["directory"] == result.levels_spilled["directory"]
    Terminal(color=False, width=400).summary(result, {})
    out = capsys.readouterr().out
    assert "spilled to disk at level 1" in out and result.levels_spilled["directory"] in out
    assert build_report(Engine().explore(_model("two_phase", rm=4), Options()), {}, {})["levels_spilled"] is None


DEEP_UNDER_FEW_FILES = """
import os, resource, sys, tempfile
sys.path.insert(0, sys.argv[1])
import odd_specs
from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.result import Options
from kraftcheck.checker.model import Model

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
model = lambda: Model(odd_specs.DeepRing(odd_specs.DeepRingParams(400)))
ck = tempfile.mkdtemp(dir=sys.argv[2])
stopped = Engine().explore(model(), Options(checkpoint_dir=ck, max_depth=200))
manifest_bytes = os.path.getsize(os.path.join(ck, "checkpoint.json"))
resumed = Engine().explore(model(), Options(checkpoint_dir=ck, resume=True))
manifest_grew = os.path.getsize(os.path.join(ck, "checkpoint.json")) - manifest_bytes
spilled = Engine(spill_levels_at=0).explore(model(), Options())
print(stopped.depth, resumed.status, resumed.distinct_states, resumed.depth, spilled.distinct_states, spilled.depth,
      spilled.levels_spilled is not None, manifest_grew < 64)
"""


def test_a_deep_run_on_disk_holds_a_few_files_open(tmp_path):
    """Levels on disk (a checkpoint, or spilled) kept every finished level's three files mapped, a
    file descriptor each: a run stopped with an internal error ("Too many open files") at level 82
    under a limit of 256 descriptors, about 340 under the usual 1,024. Only the frontier's words
    are mapped now: under a limit of 128, a 400-level run stopped at depth 200 and resumed, and one
    whose levels spill, end as a run in memory. The manifest, written at every level, does not grow
    with the depth (it listed every level's files: time quadratic in the depth); the levels'
    records are appended to a file of their own."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", DEEP_UNDER_FEW_FILES, str(Path(__file__).parent), str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["200", "holds", "400", "400", "400", "400", "True", "True"], out.stdout
