"""A checkpoint's record of its finished levels: appended a line a level, chained by digests.

Each finished level's record (its index, how many states it holds, and the size and SHA-256 of
each of its files) is one JSON line of ``levels.jsonl`` in the checkpoint directory. Each line
also carries a chain digest, the SHA-256 of the previous line's chain and this line's record, so
the last chain digest vouches for every record before it. The manifest (``checkpoint.json``,
itself digested) names how many records are finished, how many bytes of the file they take and
the last chain digest. A level therefore costs one appended line, where listing every level in
the manifest rewrote every level's record at every level (time quadratic in the depth: a run of
4,000 one-state levels spent most of its 56 s writing the manifest).

Lines written after the manifest (a level recorded, then a crash before the manifest was renamed
into place, or a line cut short by a full disk) are not part of the checkpoint: a resume ignores
them, and its first append cuts them off. A record changed, removed or reordered breaks the chain
and is refused (``CheckpointDamaged``), as a changed manifest is.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from kraftcheck.checker.files import DIGEST

LEVEL_RECORDS = "levels.jsonl"
CHAIN_START = ""  # the chain digest before the first record
CHAIN = "chain"  # a line's chain digest, and the manifest's last one


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _line(level: int, states: int, files: dict[str, Any], chain_before: str) -> tuple[bytes, str]:
    """One level's record as its line, and the chain digest after it."""
    record = {"level": level, "states": states, "files": files}
    chain = hashlib.new(DIGEST, (chain_before + _canonical(record)).encode()).hexdigest()
    return (_canonical({**record, CHAIN: chain}) + "\n").encode(), chain


class LevelRecords:
    """The records of the first ``count`` finished levels of the checkpoint in ``directory``,
    ``size`` bytes of its ``LEVEL_RECORDS`` file, the last of them chained to ``chain``."""

    def __init__(self, directory: Path, count: int = 0, size: int = 0, chain: str = CHAIN_START) -> None:
        self.path = Path(directory) / LEVEL_RECORDS
        self.count, self.size, self.chain = count, size, chain

    def manifest_entry(self) -> dict[str, Any]:
        """What the manifest says of the records: which of the file's lines are the checkpoint's."""
        return {"count": self.count, "bytes": self.size, CHAIN: self.chain}

    def append(self, sizes: list[int], checksums: list[dict[str, Any]]) -> None:
        """Record the finished levels past ``count`` (``sizes[level]`` states, ``checksums[level]``
        its files), durably, before the manifest names them. Lines past ``size`` (written after
        the last manifest) are cut off first."""
        if len(sizes) <= self.count:
            return
        lines, chain = [], self.chain
        for level in range(self.count, len(sizes)):
            line, chain = _line(level, int(sizes[level]), checksums[level], chain)
            lines.append(line)
        data = b"".join(lines)
        with open(self.path, "ab") as f:
            if f.tell() != self.size:
                f.truncate(self.size)  # appended writes go to the new end
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        self.count, self.size, self.chain = len(sizes), self.size + len(data), chain

    @staticmethod
    def refuse_no_regular_file(directory: Path, damaged: Callable[[str], Exception]) -> None:
        """The records' file is a regular one or absent: a FIFO would block the read, or the first
        append, for ever. Also for a checkpoint that names no records (format 3 listed its levels in
        its manifest), which its resume's first append starts."""
        path = Path(directory) / LEVEL_RECORDS
        if not path.is_file() and path.exists():
            raise damaged(f"checkpoint file {path} cannot be read (not a regular file)")

    @classmethod
    def read(cls, directory: Path, entry: Any, damaged: Callable[[str], Exception]) \
            -> tuple["LevelRecords", list[int], list[dict[str, Any]]]:
        """The records the manifest's ``entry`` names, checked line by line against their chain:
        (the records, each level's states, each level's file checksums). Anything else raises
        ``damaged(what differs)``."""
        path = Path(directory) / LEVEL_RECORDS
        try:
            count, size, chain = int(entry["count"]), int(entry["bytes"]), str(entry[CHAIN])
        except (TypeError, KeyError, ValueError):
            raise damaged(f"{Path(directory) / 'checkpoint.json'} names its level records as {entry!r}, which no "
                          "kraftcheck writes") from None
        cls.refuse_no_regular_file(directory, damaged)
        try:
            if count == 0:
                return cls(directory), [], []
            with open(path, "rb") as f:
                data = f.read(size)
        except FileNotFoundError:
            raise damaged(f"checkpoint file {path} is missing (the checkpoint records {count:,} levels in "
                          f"{size:,} bytes of it)") from None
        except OSError as e:
            raise damaged(f"checkpoint file {path} cannot be read ({e.strerror or e})") from None
        if len(data) < size:
            raise damaged(f"checkpoint file {path} has {len(data):,} bytes where its run wrote {size:,} (cut short, "
                          "or a record removed)")
        sizes, checksums, running = [], [], CHAIN_START
        lines = data.split(b"\n")
        if lines[-1] != b"" or len(lines) - 1 != count:
            raise damaged(f"checkpoint file {path} holds {len(lines) - 1:,} whole records in its first {size:,} bytes "
                          f"where its run wrote {count:,} (changed)")
        for level, line in enumerate(lines[:-1]):
            try:
                record = json.loads(line)
                states, files, said = int(record["states"]), record["files"], record.pop(CHAIN)
                if record["level"] != level or not isinstance(files, dict):
                    raise ValueError("out of order")
            except (ValueError, KeyError, TypeError, AttributeError):
                raise damaged(f"checkpoint file {path}: the record of level {level} is not one its run wrote "
                              "(changed)") from None
            _, running = _line(level, states, files, running)
            if said != running:
                raise damaged(f"checkpoint file {path}: the record of level {level} was changed after its run "
                              f"wrote it (its {DIGEST} chain breaks there)")
            sizes.append(states)
            checksums.append(files)
        if running != chain:
            raise damaged(f"checkpoint file {path}: its records end in a {DIGEST} chain other than the one the "
                          "manifest recorded (changed)")
        return cls(directory, count, size, chain), sizes, checksums
