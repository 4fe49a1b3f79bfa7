"""``kraftcheck ci --update-counts``: write the counts of exhaustive runs into the manifest as expected counts.

The manifest is edited as text, line by line, so its comments and layout stay as the team wrote
them: a count line is replaced in place, or added at the end of its check's table.
"""

from __future__ import annotations

import re

from kraftcheck.checker.files import write_output
from kraftcheck.ci.manifest import COUNT_KEYS, Manifest, ManifestError, _header


def update_counts(manifest: Manifest, counts: dict[str, dict[str, int]]) -> list[str]:
    """Set each check's expected counts to ``counts[check]``; returns one line per change made
    (none: the file is left untouched)."""
    lines = manifest.text.splitlines(keepends=True)
    changes: list[str] = []
    for name, values in counts.items():
        start, end = _table_span(lines, manifest.table_prefix + ("checks", name))
        if start is None:
            raise ManifestError(f"{manifest.path}: cannot update the counts of check {name}: write it as its own "
                                f"[{'.'.join(manifest.table_prefix + ('checks', name))}] table")
        insert_at = end
        while insert_at > start + 1 and not lines[insert_at - 1].strip():
            insert_at -= 1  # before the blank lines that separate it from the next table
        for key in COUNT_KEYS:
            new_line = f"{key} = {values[key]}\n"
            pattern = re.compile(rf"^\s*{key}\s*=\s*(\S+)")
            at = next((i for i in range(start + 1, end) if pattern.match(lines[i])), None)
            if at is None:
                lines.insert(insert_at, new_line)
                insert_at += 1
                end += 1
                changes.append(f"{name}: {key} = {values[key]} (added)")
            elif pattern.match(lines[at]).group(1) != str(values[key]):
                old = pattern.match(lines[at]).group(1)
                lines[at] = new_line
                changes.append(f"{name}: {key} = {values[key]} (was {old})")
    if changes:
        write_output(manifest.path, "".join(lines))  # through a symlink, which is kept
    return changes


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
