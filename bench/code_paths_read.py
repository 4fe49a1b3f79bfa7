"""Check specs/kafka/code_paths.py against Kafka's sources: every (file, Class.method, commit) of
the table names a file that exists at that commit, a class (or object, record, interface) of that
name in it, and a method of that name called or defined there.

    python bench/code_paths_read.py GIT_DIR

GIT_DIR is a bare clone holding the commits (the snapshot of confluentinc/kafka, which carries
Apache's commits with their upstream hashes: ``fetch github:confluentinc/kafka``). Prints each
entry that fails and the count checked; exit 1 if any failed.
"""

from __future__ import annotations

import re
import subprocess
import sys

from kraftcheck.specs.kafka.code_paths import CODE_PATHS


def main(git_dir: str) -> int:
    sources: dict[tuple[str, str], str | None] = {}

    def text(commit: str, path: str) -> str | None:
        if (commit, path) not in sources:
            shown = subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], capture_output=True,
                                   text=True)
            sources[commit, path] = shown.stdout if shown.returncode == 0 else None
        return sources[commit, path]

    checked, failed = 0, 0
    for action, row in sorted(CODE_PATHS.items()):
        for preset, entries in sorted(row.items()):
            for file, method, commit in entries:
                if file.startswith("KIP-"):
                    continue
                checked += 1
                cls, name = method.split(".")
                source = text(commit, file)
                problem = ("no such file" if source is None else
                           "no such class" if not re.search(rf"\b(class|object|record|interface)\s+{cls}\b", source)
                           else "no such method" if not re.search(rf"\b{name}\s*[(\[]", source) else None)
                if problem:
                    failed += 1
                    print(f"{action} {preset}: {file} {method} at {commit[:12]}: {problem}")
    print(f"{checked} entries checked, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
