"""Checkpoints: a run whose levels live on disk (``DiskLevels``) can be resumed from its last
finished level, whenever and however it stopped (SIGKILL included).

Before the first level (no level finished) and after each finished level the engine writes
``checkpoint.json`` atomically: which run this is
(spec, parameters, checks, state layout, labels, kraftcheck version, fingerprint mode, and a
SHA-256 of each source file of the spec's code: ``spec_code``), how many
levels are finished, the counters at that moment (generated, coverage, violations found so far
as state indices), and a SHA-256 of its own content. Each finished level's size and the byte
size and SHA-256 of each of its files (computed as they were written) are appended to
``levels.jsonl`` as the level finishes, chained by digests, and the manifest names how much of
that file is the checkpoint's and its last chain digest (``level_records``); a Spark work dir's
manifest lists its levels itself. The level files and their records were fsynced before, so the
manifest never names data that is not on disk.

A run holds its checkpoint directory for its whole life (``hold_checkpoint``: a lock,
``checker/dirlock.py``), so a second run or a resume while the first goes on is refused at once.
Resuming first checks, before anything is compiled or created, that the directory exists and
holds a manifest, that the manifest is intact (its digest), of this format, of this run (the
spec's code included: a checkpoint resumed under an edited action or invariant would mix levels of
two specs) and not finished; ``DiskLevels.reopen`` then checks every finished level's files
against their recorded sizes and digests before any state is read. A damaged, truncated or edited checkpoint is refused
(``CheckpointDamaged``, exit 2) naming the file and what differs, never resumed. Resuming maps
the finished levels, rebuilds the visited set from their words (the visited set is exactly the
union of all levels' states), drops whatever was written after the manifest, and continues with
the next level, so the run ends with the counts, verdicts and traces of an uninterrupted one. A
resume whose ``--max-depth`` or ``--max-states`` its checkpoint is already past is refused before
any of this (exit 2), saying the depth or the states the checkpoint holds. A
run stopped before its first level was durable resumes from the initial states, and says so
(``Result.resumed``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Optional, Union

from kraftcheck.checker import __version__
from kraftcheck.checker.dirlock import LOCK_FILE, lock_directory
from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.explore.level_records import LEVEL_RECORDS, LevelRecords
from kraftcheck.checker.explore.spec_code import source_file, spec_code
from kraftcheck.checker.files import CONFIG_MAX_BYTES, DIGEST, atomic_write, file_digest, read_at_most
from kraftcheck.checker.model import Model

MANIFEST = "checkpoint.json"
# identity entries that checkpoints written before them lack, with the value they had then
IDENTITY_DEFAULTS = {"symmetry": False, "constraints": []}
FORMAT = "kraftcheck-checkpoint"
# 2: every file checksummed; 3: the spec's code recorded; 4: the local engine's levels recorded
# in their own file, a line a level (``level_records``). Format 3 is still resumed (its manifest
# lists the levels itself); an older checkpoint cannot be verified and is refused, saying what it lacks:
FORMAT_VERSION = 4
RESUMED_VERSIONS = (3, FORMAT_VERSION)
LACKING = {1: "whose files carry no checksums", 2: "which did not record the spec's code"}
RESTART = "start the run again with --checkpoint and a new directory"
# what to do about a damaged checkpoint
RESTORE = f"{RESTART} (or put back a copy of the directory taken while no run was using it)"


class CheckpointDamaged(UsageError):
    """A checkpoint's file is not what its run wrote (damaged, truncated or edited): never resumed."""


def run_identity(model: Model, fingerprints: bool, symmetry: bool = False) -> dict[str, Any]:
    """What must be the same for a checkpoint to be resumed by a run."""
    spec = model.spec
    # a run under --symmetry holds canonical states (checkpoints older than the option say nothing:
    # IDENTITY_DEFAULTS)
    return {"symmetry": symmetry,
        "spec": spec.name,
        "params": json.loads(json.dumps(spec.options(), default=str)),
        "checks": model.check_names,
        "layout": {"nwords": model.layout.nwords, "dtype": [list(map(str, d)) for d in model.layout.dtype.descr],
                   "state_bits": model.layout.state_bits},
        "labels": len(model.labels),
        "actions": [a.name for a in model.actions],
        "fingerprints": fingerprints,
        "constraints": [c.name for c in model.constraints + model.action_constraints],
        "deadlock": model.check_deadlock,
        "kraftcheck_version": __version__,
        "code": spec_code(model),
    }


def write_manifest(directory: Path, identity: dict[str, Any], progress: dict[str, Any]) -> None:
    content = {"format": FORMAT, "format_version": FORMAT_VERSION, "identity": identity, **progress}
    content["digest"] = _content_digest(content)
    # one line, by json's C encoder: the manifest is written at every level and lists every
    # level's files, and indenting (Python's encoder) took a deep narrow run 27 ms a level at 4,000
    atomic_write(Path(directory) / MANIFEST, json.dumps(content, separators=(",", ":")) + "\n")


def counts_for_manifest(result: Any, generated: int, fired: Any, new_states: Any, elapsed_s: float,
                        found_at: dict[str, Any], finished: bool) -> dict[str, Any]:
    """What every explorer's manifest holds of its run's counts and findings (each adds its
    levels' own entries): ``found_at`` says where each violation found was, as the explorer
    finds it again on a resume (``restore_counts``)."""
    return {"initial_states": result.initial_states, "generated": generated,
            "fired": [int(x) for x in fired], "new_states": [int(x) for x in new_states], "elapsed_s": elapsed_s,
            "found": {name: list(at) for name, at in found_at.items()},
            "finished": finished, "status": result.status if finished else None}


def restore_counts(manifest: dict[str, Any], result: Any, fired: Any, new_states: Any,
                   note_violation: Callable[..., None]) -> tuple[int, float]:
    """A resumed run's counts from its manifest (``counts_for_manifest``): into ``result``,
    ``fired`` and ``new_states`` (arrays, in place), each violation noted again by
    ``note_violation(name, *where)``; returns (states generated, seconds explored before)."""
    result.initial_states = manifest["initial_states"]
    fired[:] = manifest["fired"]
    new_states[:] = manifest["new_states"]
    for name, at in manifest["found"].items():
        note_violation(name, *at)
    return manifest["generated"], manifest["elapsed_s"]


def _content_digest(content: dict[str, Any]) -> str:
    """The manifest's digest: of its canonical JSON (sorted keys, no spaces) without the digest."""
    canonical = json.dumps({k: v for k, v in content.items() if k != "digest"}, sort_keys=True,
                           separators=(",", ":"))
    return hashlib.new(DIGEST, canonical.encode()).hexdigest()


def read_manifest(directory: Path) -> Optional[dict[str, Any]]:
    """The manifest in ``directory`` (None if there is none), refused unless intact and of this format."""
    path = Path(directory) / MANIFEST
    if not path.exists():
        return None
    try:
        raw = read_at_most(path, CONFIG_MAX_BYTES)  # not a FIFO waited on, nor /dev/zero read to the end
        if raw is None:
            raise ValueError(f"it holds more than {CONFIG_MAX_BYTES} bytes")
        data = json.loads(raw)
    except (OSError, ValueError) as e:
        raise CheckpointDamaged(f"{path} is not a readable checkpoint ({e}): it is damaged or not kraftcheck's; "
                                f"{RESTORE}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"{path} is not a kraftcheck checkpoint")
    version = data.get("format_version")
    if version not in RESUMED_VERSIONS:
        made_by = (f"an earlier kraftcheck, {LACKING[version]}, so it cannot be verified"
                   if version in LACKING else "another kraftcheck")
        raise UsageError(f"{path} is a checkpoint of format {version} ({made_by}); this kraftcheck resumes "
                         f"format {FORMAT_VERSION} only: {RESTART}")
    recorded = data.get("digest")
    if recorded != _content_digest(data):
        shown = "none recorded" if recorded is None else f"recorded {str(recorded)[:16]}..."
        raise CheckpointDamaged(f"{path} was changed after its run wrote it: its content does not match its "
                                f"{DIGEST} ({shown}); the checkpoint cannot be trusted: {RESTORE}")

    def damaged(what: str) -> CheckpointDamaged:
        return CheckpointDamaged(f"{what}; {RESTORE}")

    if "level_records" in data:  # the local engine's, format 4: each finished level's record, checked
        _, data["sizes"], data["checksums"] = LevelRecords.read(Path(directory), data["level_records"], damaged)
        if len(data["sizes"]) != data.get("levels"):
            raise CheckpointDamaged(f"{path} records {data.get('levels')} finished levels but "
                                    f"{len(data['sizes'])} level records; {RESTORE}")
    else:  # format 3 (or a Spark work dir's): the levels listed here; a resume's first append starts the records
        LevelRecords.refuse_no_regular_file(Path(directory), damaged)
    return data


def file_checksum(size: int, digest: str) -> dict[str, Any]:
    """What the manifest keeps of one level file (an entry of its ``checksums``): its size and digest."""
    return {"bytes": size, DIGEST: digest}


LEVEL_KINDS = ("words", "parents", "labels")  # a level's files


def level_path(directory: Path, level: int, kind: str) -> Path:
    """The file of ``kind`` (one of ``LEVEL_KINDS``) of level ``level`` in a checkpoint directory."""
    return Path(directory) / f"level-{level:04d}.{kind}"


LEVEL_FILE = re.compile(rf"level-(\d{{4,}})\.(?:{'|'.join(LEVEL_KINDS)})")  # the names level_path gives


# Between check_level_files (a resume, before anything is compiled) and forget_found_digests (its
# levels mapped, or the run over), the digests check_level_file found, by path, with the file's
# identity, size and change times then: mapping the files checks them again without reading
# gigabytes twice. Outside that window (None) nothing is remembered (Spark's work dir checks, a
# second resume in one process).
_digests_found: Optional[dict[str, tuple[tuple[int, ...], str]]] = None


def check_level_file(path: Path, checksum: dict[str, Any]) -> None:
    """``path`` is the file its run wrote: ``checksum``'s size, then its digest (``file_checksum``)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise CheckpointDamaged(f"checkpoint file {path} is missing (the checkpoint records {checksum['bytes']:,} "
                                f"bytes); {RESTORE}") from None
    size = st.st_size
    if size != checksum["bytes"]:
        raise CheckpointDamaged(f"checkpoint file {path} has {size:,} bytes where its run wrote {checksum['bytes']:,} "
                                f"(truncated or changed); {RESTORE}")
    signature = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)  # utime cannot set ctime back
    known = None if _digests_found is None else _digests_found.get(str(path))
    try:
        digest = known[1] if known is not None and known[0] == signature else file_digest(path)
    except OSError as e:
        raise CheckpointDamaged(f"checkpoint file {path} cannot be read ({e.strerror or e}); {RESTORE}") from None
    if _digests_found is not None:
        _digests_found[str(path)] = (signature, digest)
    if digest != checksum[DIGEST]:
        raise CheckpointDamaged(f"checkpoint file {path} was changed after its run wrote it: its {DIGEST} is "
                                f"{digest[:16]}..., its run recorded {checksum[DIGEST][:16]}... (same size, other "
                                f"content); {RESTORE}")


def check_new_checkpoint_dir(directory: Path) -> None:
    """A new run writes its checkpoint into an empty (or new) directory, never over another run's."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--checkpoint {directory} exists and is not a directory")
    if (directory / MANIFEST).exists():
        raise UsageError(f"--checkpoint {directory} already holds a checkpoint: continue it with --resume "
                         f"{directory}, or give an empty directory")
    if directory.exists() and any(p.name != LOCK_FILE for p in directory.iterdir()):
        raise UsageError(f"--checkpoint {directory} is not empty; give an empty or new directory")


def check_resume_dir(directory: Optional[Union[str, Path]]) -> None:
    """``--resume DIR`` names a directory that holds a checkpoint; checked before any work, and
    creating nothing (a mistyped path must not become an empty directory)."""
    if directory is None:
        return
    directory = Path(directory)
    if not directory.exists():
        raise UsageError(f"--resume {directory}: no such checkpoint directory; give the directory of the run to "
                         "continue (a new run takes --checkpoint DIR)")
    if not directory.is_dir():
        raise UsageError(f"--resume {directory}: not a directory; give the directory of the run to continue")
    if not (directory / MANIFEST).exists():
        raise UsageError(f"--resume {directory}: no checkpoint there ({MANIFEST} is missing)")


# what a run keeps in its directory besides its levels' files (level-*): the manifest, its levels'
# records and the lock; a Spark work dir keeps its levels, visited set and candidates in folders of these names
RUN_DIR_ENTRIES = (MANIFEST, LEVEL_RECORDS, LOCK_FILE, "levels", "visited", "candidates")


def is_run_file(directory: Union[str, Path], path: Union[str, Path]) -> bool:
    """Whether ``path`` (its symlinks followed) is one of the files a run keeps in its checkpoint
    directory ``directory``, or inside one of its folders: an output written there replaces it."""
    root = Path(os.path.realpath(Path(directory).expanduser()))
    target = Path(os.path.realpath(Path(path).expanduser()))
    try:
        first = target.relative_to(root).parts[0]
    except (ValueError, IndexError):  # elsewhere, or the directory itself
        return False
    return first in RUN_DIR_ENTRIES or first.startswith("level-")


class HeldCheckpoint(NamedTuple):
    """What ``hold_checkpoint`` found, for the run to use without reading it again."""

    identity: Optional[dict[str, Any]]  # the run's, as its manifests say it (None: no checkpoint)
    manifest: Optional[dict[str, Any]]  # a resumed run's manifest, checked resumable (else None)


@contextmanager
def hold_checkpoint(model: Model, options: Any) -> Iterator[HeldCheckpoint]:
    """The run's exclusive hold of its checkpoint directory (``options.checkpoint_dir``, if any),
    checked first: a new run's must be empty (or new: it is created), a resumed run's must hold a
    manifest this run may resume (``check_resumable``). A directory another run holds is refused
    at once (``DirectoryBusy``). Yields the run's identity and the manifest it resumes."""
    if not options.checkpoint_dir:
        yield HeldCheckpoint(None, None)
        return
    directory, resume = Path(options.checkpoint_dir), options.resume
    if resume:
        check_resume_dir(directory)
    elif directory.exists() and not directory.is_dir():
        raise UsageError(f"--checkpoint {directory} exists and is not a directory")
    created = not directory.exists()
    hold = lock_directory(directory, "a resumed run" if resume else "a checkpointed run")
    try:
        # under the hold: what another run (now ended) may have left is seen
        if not resume:
            check_new_checkpoint_dir(directory)
        identity = run_identity(model, options.fingerprints, options.symmetry)
        manifest = check_resumable(directory, identity, options.keep_going) if resume else None
        if manifest is not None:  # damaged level files refused before anything is compiled
            check_resume_depth(directory, int(manifest["levels"]), options.max_depth)
            check_resume_states(directory, sum(int(n) for n in manifest.get("sizes", [])), options.max_states)
            check_level_files(directory, manifest)
        yield HeldCheckpoint(identity, manifest)
    finally:
        forget_found_digests()  # if the run never mapped its levels
        hold.release()
        if created:  # refused before its first manifest: leave no empty directory behind
            try:
                directory.rmdir()  # only if empty
            except OSError:
                pass


def check_resume_depth(directory: Path, levels: int, max_depth: Optional[int]) -> None:
    """A resume asks for no depth its checkpoint's run is already past: it would report
    'stopped at --max-depth' with a larger depth."""
    if max_depth is not None and levels > max_depth:
        raise UsageError(f"--resume {directory}: its run is at depth {levels} already, past --max-depth {max_depth}; "
                         f"give --max-depth {levels} or more, or none")


class ResumePastMaxStates(UsageError):
    """A resume's state limit is below the states its checkpoint holds (``check_resume_states``).
    Its fields let a caller whose limit is another option's (``--graph-limit``) say that one."""

    def __init__(self, directory: Path, states: int, max_states: int) -> None:
        super().__init__(f"--resume {directory}: its checkpoint holds {states:,} states already, more than "
                         f"--max-states {max_states:,}; give --max-states {states:,} or more, or none")
        self.directory, self.states, self.max_states = directory, states, max_states


def check_resume_states(directory: Path, states: int, max_states: Optional[int]) -> None:
    """A resume asks for no fewer states than its checkpoint's finished levels hold: it would stop
    'at --max-states' once the first part of them was back in the visited set, with more states
    than that counted, after what can be minutes of work (or Spark's start)."""
    if max_states is not None and states > max_states:
        raise ResumePastMaxStates(directory, states, max_states)


def forget_found_digests() -> None:
    """The level files were mapped (or the run is over): later checks read them again."""
    global _digests_found
    _digests_found = None


def check_level_files(directory: Path, manifest: dict[str, Any]) -> None:
    """Every file of the finished levels a local run's ``manifest`` records is as its run wrote it
    (``check_level_file``; ``levels.DiskLevels.reopen`` checks them again as it maps them, and
    checks each file's size against the level's states)."""
    global _digests_found
    _digests_found = {}
    checksums = manifest.get("checksums") or []
    for level in range(min(int(manifest.get("levels", 0)), len(checksums))):
        for kind in LEVEL_KINDS:
            if isinstance(checksums[level], dict) and isinstance(checksums[level].get(kind), dict):
                check_level_file(level_path(directory, level, kind), checksums[level][kind])


def check_resumable(directory: Path, identity: dict[str, Any], keep_going: bool = True) -> dict[str, Any]:
    """The manifest of a checkpoint this run may resume; a clear refusal otherwise. (Its level
    files are checked against it by ``check_level_files``, and when they are mapped:
    ``DiskLevels.reopen``.) ``keep_going``:
    whether this run goes on past a violation (--continue), as a run that found one and went on
    must be resumed."""
    manifest = read_manifest(directory)
    if manifest is None:
        raise UsageError(f"--resume {directory}: no checkpoint there ({MANIFEST} is missing)")
    theirs = manifest["identity"]
    # the keys of both: a Spark work dir's identity has keys the local engine's lacks, and is not its
    keys = [*identity, *(key for key in theirs if key not in identity)]
    differ = [key for key in keys if key != "code" and
              theirs.get(key, IDENTITY_DEFAULTS.get(key)) != identity.get(key, IDENTITY_DEFAULTS.get(key))]
    if differ:
        shown = {key: _shown_apart(theirs.get(key), identity.get(key)) for key in differ}
        details = "; ".join(f"{key}: checkpoint {old}, this run {new}" for key, (old, new) in shown.items())
        raise UsageError(f"--resume {directory}: the checkpoint belongs to another run ({details}); resume it "
                         "with the same spec, parameters, checks and kraftcheck version")
    changed = _changed_code(theirs.get("code", {}), identity.get("code", {}))
    if changed:
        raise UsageError(f"--resume {directory}: the spec's code changed since the checkpoint was written "
                         f"({changed}): its finished levels were explored by other code; resume it with the code "
                         f"as it was, or {RESTART}")
    if manifest.get("finished"):
        raise UsageError(f"--resume {directory}: that run already finished ({manifest.get('status')}); "
                         "nothing to resume")
    if manifest.get("found") and not keep_going:  # a run without --continue stops at its first violation
        raise UsageError(f"--resume {directory}: its run went on past the violations it found "
                         f"({', '.join(manifest['found'])}), as --continue does; resume it with --continue")
    return manifest


def _changed_code(theirs: dict[str, str], ours: dict[str, str]) -> str:
    """Which of the spec's source files differ from the checkpoint's record ("" if none)."""
    said = []
    for module in sorted(set(theirs) | set(ours)):
        if theirs.get(module) == ours.get(module):
            continue
        path = source_file(module)
        where = str(path) if path is not None else module
        if module not in ours:
            said.append(f"{where} is no longer part of the spec")
        elif module not in theirs:
            said.append(f"{where} is new to the spec")
        else:
            said.append(f"{where} differs")
    shown = said[:3] + ([f"and {len(said) - 3} more"] if len(said) > 3 else [])
    return ", ".join(shown)


SHOWN = 60  # characters of a value shown in a refusal


def _shown_apart(theirs: Any, ours: Any) -> tuple[str, str]:
    """The two values as JSON, each cut to the same window around their first difference (a long
    layout cut at its start would hide what differs)."""
    texts = [json.dumps(v, default=str) for v in (theirs, ours)]
    if max(map(len, texts)) <= SHOWN:
        return texts[0], texts[1]
    first = next((i for i, (a, b) in enumerate(zip(*texts)) if a != b), min(map(len, texts)))
    start = max(0, first - SHOWN // 3)
    return tuple(("..." if start else "") + t[start:start + SHOWN] + ("..." if len(t) > start + SHOWN else "")
                 for t in texts)
