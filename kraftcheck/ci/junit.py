"""The gate's result as JUnit XML, as Jenkins and GitLab read it.

One ``testsuite`` per check (classname ``kraftcheck.CHECK``), one ``testcase`` per invariant it
checks plus ``exploration`` (budget, counts, a crash). A failure's text is the counterexample's
steps and the command that reproduces it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from kraftcheck.checker.files import write_output
from kraftcheck.ci.judge import Judgement

ELEMENT = {"failed": "failure", "error": "error", "skipped": "skipped"}


def junit_xml(judgements: list[Judgement]) -> str:
    root = ET.Element("testsuites", name="kraftcheck")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    for j in judgements:
        counts = {"tests": len(j.cases), "failures": _count(j, "failed"), "errors": _count(j, "error"),
                  "skipped": _count(j, "skipped")}
        time_s = j.outcome.wall_s
        suite = ET.SubElement(root, "testsuite", name=j.name, time=f"{time_s:.3f}",
                              **{k: str(v) for k, v in counts.items()})
        ET.SubElement(ET.SubElement(suite, "properties"), "property", name="reproduce", value=j.outcome.reproduce)
        for case in j.cases:
            # the check's time is its exploration's; invariants are checked within it
            case_time = time_s if case.name == "exploration" else 0.0
            element = ET.SubElement(suite, "testcase", name=case.name, classname=f"kraftcheck.{j.name}",
                                    time=f"{case_time:.3f}")
            if case.status in ELEMENT:
                child = ET.SubElement(element, ELEMENT[case.status], message=case.message)
                if case.status != "skipped":
                    child.set("type", case.status)
                    child.text = "\n".join(filter(None, [case.message, case.details,
                                                         f"reproduce: {j.outcome.reproduce}"]))
        for key, value in counts.items():
            totals[key] += value
        totals["time"] += time_s
    for key, value in totals.items():
        if key != "skipped":  # the schema Jenkins validates against has no skipped on testsuites
            root.set(key, f"{value:.3f}" if key == "time" else str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _count(j: Judgement, status: str) -> int:
    return sum(1 for c in j.cases if c.status == status)


def write_junit(path: Path, judgements: list[Judgement]) -> None:
    """A file whole, or ``-`` standard output (``files.write_output``)."""
    write_output(path, junit_xml(judgements))
