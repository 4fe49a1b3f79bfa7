"""``kraftcheck ci --update-counts``: write the counts of exhaustive runs into the manifest as expected counts.

The manifest is edited as text, line by line, so its comments and layout stay as the team wrote
them: a count line is replaced in place, or added at the end of its check's table.
"""

from __future__ import annotations

import re
from typing import Iterable

from kraftcheck.checker.files import write_output
from kraftcheck.ci.manifest import COUNT_KEYS, Manifest, ManifestError, _header, tomllib


def update_counts(manifest: Manifest, counts: dict[str, dict[str, int]]) -> list[str]:
    """Set each check's expected counts to ``counts[check]``; returns one line per change made
    (none: the file is left untouched). The text is checked to read back as these counts before
    it is written: a layout this line editing does not follow is refused, the file left whole."""
    refuse_unwritable_layout(manifest, counts)
    lines = manifest.text.splitlines(keepends=True)
    changes: list[str] = []
    for name, values in counts.items():
        start, end = _table_span(lines, manifest.table_prefix + ("checks", name))
        assert start is not None  # refuse_unwritable_layout
        insert_at = end
        while insert_at > start + 1 and not lines[insert_at - 1].strip():
            insert_at -= 1  # before the blank lines that separate it from the next table
        for key in COUNT_KEYS:
            new_line = f"{key} = {values[key]}\n"
            pattern = _count_line(key)
            at = next((i for i in range(start + 1, end) if pattern.match(lines[i])), None)
            if at is None:
                lines.insert(insert_at, new_line)
                insert_at += 1
                end += 1
                changes.append(f"{name}: {key} = {values[key]} (added)")
            elif (match := pattern.match(lines[at])).group(2) != str(values[key]):
                # the value alone is replaced: the key as written and a comment after it stay
                lines[at] = lines[at][:match.start(2)] + str(values[key]) + lines[at][match.end(2):]
                changes.append(f"{name}: {key} = {values[key]} (was {match.group(2)})")
    if changes:
        text = "".join(lines)
        _refuse_unless_read_back(manifest, text, counts)
        write_output(manifest.path, text)  # through a symlink, which is kept
    return changes


def refuse_unwritable_layout(manifest: Manifest, names: Iterable[str]) -> None:
    """Every check of ``names`` has its own ``[checks.NAME]`` table, which ``update_counts`` edits:
    ``kraftcheck ci --update-counts`` asks before its first check runs, not after the last."""
    lines = manifest.text.splitlines(keepends=True)
    for name in names:
        if _table_span(lines, manifest.table_prefix + ("checks", name))[0] is None:
            raise ManifestError(f"{manifest.path}: cannot update the counts of check {name}: write it as its own "
                                f"[{'.'.join(manifest.table_prefix + ('checks', name))}] table")


def _count_line(key: str) -> re.Pattern:
    """A line setting ``key`` (bare or quoted, as TOML allows), its value in group 2."""
    return re.compile(rf"""^\s*(["']?){key}\1\s*=\s*([^\s#]+)""")


def _refuse_unless_read_back(manifest: Manifest, text: str, counts: dict[str, dict[str, int]]) -> None:
    try:
        data = tomllib.loads(text)
        for part in manifest.table_prefix + ("checks",):
            data = data[part]
        wrong = [name for name, values in counts.items()
                 if any(data[name].get(key) != values[key] for key in COUNT_KEYS)]
    except (tomllib.TOMLDecodeError, KeyError, TypeError, AttributeError) as e:
        wrong, why = list(counts), f" ({e})"
    else:
        why = ""
    if wrong:
        raise ManifestError(f"{manifest.path}: cannot update the counts of check {wrong[0]} as written{why}; "
                            f"the file is left as it was: write its counts as plain lines, distinct = N, in its "
                            f"[{'.'.join(manifest.table_prefix + ('checks', wrong[0]))}] table")


def _table_span(lines: list[str], table: tuple[str, ...]) -> tuple[int | None, int]:
    """Index of the table's header line and of the line after its last line."""
    start = None
    for i, raw in enumerate(lines):
        line = raw.strip()
        if line.startswith("["):
            if start is not None:
                return start, i
            if _header(line) == table:
                start = i
    return start, len(lines)
