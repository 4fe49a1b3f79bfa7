"""Output locations checked before any work starts, for every command.

A run can take an hour; finding out only at its end that ``--json`` points into a directory that
cannot be written loses the result. So each command checks every file and directory it will write
first: a directory must exist or be creatable, must accept new files (probed by creating and
removing a temporary file, since permission bits do not tell, e.g. under /proc or on a read-only
mount), and a path must not be the wrong kind (a file where a directory is needed, or the
reverse). Nothing is left behind by the check: no directory is created and the probe is removed.
An output file may also be ``-`` (standard output), a path to a descriptor (``/dev/stdout``), a
device or a FIFO, or a symlink to any of these or to a file: ``checker.files.write_output`` writes
through them, so only what it needs is checked here (an open descriptor; a device the user may
write; a symlink that ends somewhere).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Optional

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.files import STDOUT, descriptor_of, output_kind


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _probe(directory: Path, option: str, shown: str) -> None:
    existing = _nearest_existing(directory)
    if not existing.is_dir():
        raise UsageError(f"cannot write {option} {shown}: {existing} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".kraftcheck-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"cannot write {option} {shown}: {existing} does not accept new files "
                         f"({e.strerror or e}); choose another location") from None


def check_output_file(path: Optional[os.PathLike | str], option: str) -> None:
    """``path`` can be written as an output file (``checker.files.write_output``)."""
    if path is None:
        return
    shown = str(path)
    if not shown:
        raise UsageError(f"{option} is empty; give a file name (or - for standard output)")
    p = Path(path).expanduser()
    fd = descriptor_of(p) if shown != STDOUT else 1
    if fd is not None:
        try:
            os.fstat(fd)
        except OSError:
            raise UsageError(f"cannot write {option} {shown}: descriptor {fd} is not open") from None
        return
    if shown.endswith(("/", os.sep)):
        raise UsageError(f"{option} {shown} is a directory; give a file name")
    try:
        kind = output_kind(p)
    except IsADirectoryError:
        raise UsageError(f"{option} {shown} is a directory; give a file name") from None
    except OSError as e:  # a loop of symlinks
        raise UsageError(f"cannot write {option} {shown}: {e.strerror}") from None
    if kind == "special":
        if stat.S_ISSOCK(os.stat(p).st_mode):
            raise UsageError(f"cannot write {option} {shown}: it is a socket, which a file cannot be written to")
        if not os.access(p, os.W_OK):
            raise UsageError(f"cannot write {option} {shown}: permission denied")
        return
    target = Path(os.path.realpath(p))  # a symlink is followed: its file is the one replaced
    if target.exists():
        _probe_file(target, option, shown)
    _probe(target.parent, option, shown)


def check_graph_file(path: Optional[os.PathLike | str], option: str) -> None:
    """``--dump-graph``: a GraphML file (named ``*.graphml``) that can be written, or ``-``."""
    if path is None:
        return
    if not to_stdout(path) and Path(path).suffix.lower() != ".graphml":
        raise UsageError(f"{option} writes GraphML: name the file *.graphml (got {Path(path).name}), "
                         "or give - for standard output")
    check_output_file(path, option)


def check_replaceable(path: os.PathLike | str, option: str) -> None:
    """``path`` (an existing file, or a new one) can be rewritten whole, as ``--update-counts`` rewrites
    the manifest and ``--update-baseline`` the baseline: refused now, not after every check ran."""
    check_output_file(path, option)
    if descriptor_of(Path(path)) is not None or output_kind(Path(path)) == "special":
        raise UsageError(f"{option}: {path} is not a regular file, so it cannot be rewritten")


def _probe_file(path: Path, option: str, shown: str) -> None:
    """An existing file may be replaced: its permission bits say so and, since they do not bind
    root, opening it for writing (appending nothing, so it is left as it was) does not fail, as it
    does for an immutable file or one on a read-only mount."""
    if not os.access(path, os.W_OK):
        raise UsageError(f"cannot write {option} {shown}: the file exists and is not writable")
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
    except OSError as e:
        raise UsageError(f"cannot write {option} {shown}: {e.strerror or e}") from None


def refuse_two_on_stdout(outputs: dict[str, Optional[os.PathLike | str]]) -> None:
    """At most one output goes to standard output (option -> path)."""
    on_stdout = [option for option, path in outputs.items() if path is not None and to_stdout(path)]
    if len(on_stdout) > 1:
        raise UsageError(f"{' and '.join(on_stdout)} both write to standard output; send one to a file")


def _same_file_key(path: os.PathLike | str) -> Optional[str]:
    """What ``path`` writes to, for comparing two outputs: None for standard output, a device or a
    FIFO (written into, never replaced, so two of them harm nothing)."""
    if to_stdout(path):
        return None
    real = os.path.realpath(Path(path).expanduser())
    try:
        if not stat.S_ISREG(os.stat(real).st_mode):
            return None
    except OSError:
        pass  # not there yet: a new file
    return real


def refuse_same_file(outputs: dict[str, Optional[os.PathLike | str]]) -> None:
    """No two outputs (option -> path) name the same file: the second written would replace the
    first, whose loss nothing would say."""
    seen: dict[str, str] = {}
    for option, path in outputs.items():
        key = None if path is None else _same_file_key(path)
        if key is None:
            continue
        if key in seen:
            raise UsageError(f"{seen[key]} and {option} both name {path}; the second would replace the first: give "
                             "each its own file")
        seen[key] = option


def refuse_replacing_input(output: Optional[os.PathLike | str], option: str, source: os.PathLike | str,
                           what: str) -> None:
    """``output`` must not be the file the command reads (``source``): writing it would replace it."""
    key = None if output is None else _same_file_key(output)
    if key is not None and key == os.path.realpath(Path(source).expanduser()):
        raise UsageError(f"{option} {output} is the {what} this command reads; writing there would replace it: "
                         "choose another file")


def refuse_inside(output: Optional[os.PathLike | str], option: str, directories: dict[str, os.PathLike | str],
                  why: str) -> None:
    """``output`` must not lie inside any of ``directories`` (what it stands for -> the directory):
    the command empties or removes them (``why``), and the file with them."""
    key = None if output is None else _same_file_key(output)
    if key is None:
        return
    for what, directory in directories.items():
        inside = os.path.realpath(Path(directory).expanduser())
        if os.path.commonpath([key, inside]) == inside:
            raise UsageError(f"{option} {output} is inside {what} ({directory}), which {why}, and the file with "
                             "it: choose a file outside it")


def to_stdout(path: Optional[os.PathLike | str]) -> bool:
    """``path`` is standard output (``-``, ``/dev/stdout``, ``/proc/self/fd/1``)."""
    return path is not None and (str(path) == STDOUT or descriptor_of(Path(path).expanduser()) == 1)


def check_output_dir(path: Optional[os.PathLike | str], option: str) -> None:
    """``path`` is a directory that exists, or can be created, and accepts new files."""
    if path is None:
        return
    if not str(path):
        raise UsageError(f"{option} is empty; give a directory (. for this one)")
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise UsageError(f"{option} {path} exists and is not a directory; give a directory")
    _probe(p, option, str(path))
