"""The documentation's worked example is the real, tested file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_writing_a_spec_embeds_die_hard_verbatim():
    doc = (ROOT / "docs" / "writing-a-spec.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    assert (ROOT / "specs" / "die_hard.py").read_text() in blocks


def test_die_hard_counterexample_is_the_puzzle_answer():
    from kraftcheck.checker.explore.engine import Engine
    from kraftcheck.checker.model import Model
    from kraftcheck.specs.die_hard import DieHard

    model = Model(DieHard())
    (v,) = Engine().explore(model).violations
    assert [str(model.labels[s.label]) for s in v.steps[1:]] == [
        "FillBig", "BigToSmall", "EmptySmall", "BigToSmall", "FillBig", "BigToSmall"]
    assert model.layout.show(v.steps[-1].state) == {"small": 3, "big": 4}


def _doc() -> str:
    return (ROOT / "docs" / "writing-a-spec.md").read_text()


def _named_python_files(doc: str) -> dict[str, str]:
    """The doc's Python blocks that begin with a ``# name.py`` line, by that name."""
    files = {}
    for block in re.findall(r"```python\n(.*?)```", doc, flags=re.S):
        first = block.splitlines()[0]
        if re.fullmatch(r"# \w+\.py", first):
            files[first[2:]] = block
    return files


def test_from_python_example_runs_and_prints_what_the_doc_shows(tmp_path):
    import os
    import subprocess
    import sys

    doc = _doc()
    files = _named_python_files(doc)
    assert set(files) == {"counters.py", "check_counters.py", "field_kinds.py"}  # the last: its own test
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    after_script = doc[doc.index(files["check_counters.py"]):]
    shown = re.search(r"```text\n(.*?)```", after_script, flags=re.S).group(1)

    env = dict(os.environ, KRAFTCHECK_CACHE_DIR=str(tmp_path / "kernels"), NO_COLOR="1")
    out = subprocess.run([sys.executable, "check_counters.py"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout == shown
    assert list((tmp_path / "traces").glob("counters.total_below_cap.*.json"))


def test_entry_point_snippet_uses_the_group_kraftcheck_reads():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: tomli, a dependency there
        import tomli as tomllib

    from kraftcheck.specs import ENTRY_POINT_GROUP

    (snippet,) = re.findall(r"```toml\n(.*?)```", _doc(), flags=re.S)
    registered = tomllib.loads(snippet)["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert registered == {"counters": "team_specs.counters:Counters"}
    assert "[project.entry-points.\"kraftcheck.specs\"]" in (ROOT / "pyproject.toml").read_text()


def test_every_name_in_the_api_table_is_public():
    import kraftcheck

    doc = _doc()
    section = doc[doc.index("## From Python"):]
    first_cells = [row.split("|")[1] for row in section.splitlines() if row.startswith("| `")]
    documented = {name for cell in first_cells for name in re.findall(r"`(?:kraftcheck\.)?(\w+)", cell)}
    assert {"check", "Result", "Violation", "load_trace", "replay_trace", "Spec", "Int", "SpecError"} <= documented
    missing = sorted(documented - set(kraftcheck.__all__))
    assert not missing, f"documented but not in kraftcheck's API: {missing}"


def test_every_public_name_is_in_writing_a_spec():
    """Everything ``kraftcheck`` exports is what a spec author may need: writing-a-spec.md says
    what each is (LaneTouch was not exported, simulate and Model not described)."""
    import kraftcheck

    doc = _doc()
    missing = [name for name in kraftcheck.__all__
               if name != "__version__" and not re.search(rf"`(kraftcheck\.)?{name}\b", doc)]
    assert not missing, f"exported but not described in docs/writing-a-spec.md: {missing}"


def test_every_name_the_docs_import_from_kraftcheck_is_there():
    """The guides write ``from kraftcheck import ...``; each such name must be importable
    (Liveness and Predicate were not)."""
    names = set()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for what in re.findall(r"from kraftcheck import (\([^)]*\)|[^\n`]*)", path.read_text()):
            names.update(n.strip() for n in what.strip("()").replace("\n", ",").split(",") if n.strip(" .\n"))
    assert {"Spec", "Liveness", "Predicate"} <= names
    missing = []
    for name in sorted(names):
        try:
            exec(f"from kraftcheck import {name}", {})
        except ImportError:
            missing.append(name)
    assert not missing, f"the docs import these from kraftcheck, which has none of them: {missing}"


def test_field_kinds_example_prints_what_the_doc_shows():
    doc = _doc()
    block = _named_python_files(doc)["field_kinds.py"]
    shown = doc[doc.index(block) + len(block):]
    expected = re.search(r"```text\n(.*?)```", shown, flags=re.S).group(1)
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "field_kinds.py", "exec"), {})
    assert out.getvalue() == expected


def test_from_tla_excerpts_are_the_files_they_name():
    """Every Python block of "From TLA+" that starts with ``# bench/specs/<file>.py`` is a verbatim
    excerpt of that file."""
    doc = _doc()
    section = doc[doc.index("## From TLA+"):doc.index("## Checking a new spec")]
    excerpts = [b for b in re.findall(r"```python\n(.*?)```", section, flags=re.S)]
    assert len(excerpts) >= 5
    for block in excerpts:
        first, rest = block.split("\n", 1)
        assert re.fullmatch(r"# bench/specs/\w+\.py", first), first
        assert rest in (ROOT / first[2:]).read_text(), f"not in {first[2:]}:\n{rest}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but hyphens dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_to_a_section_names_a_heading_there():
    """A link such as ``writing-a-spec.md#constraints-and-deadlock`` lands on its section (that
    heading was once lost in a merge, and README's link with it)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "docs" / "reports").glob("*.md"))]
    anchors = {}
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        anchors[page.resolve()] = {_slug(h) for h in re.findall(r"^#+ (.*)$", text, flags=re.M)}
    broken = []
    for page in pages:
        for target, anchor in re.findall(r"\]\(([\w./-]*)#([\w-]+)\)", page.read_text()):
            linked = (page.parent / target).resolve() if target else page.resolve()
            if target.endswith(".md") and not linked.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif linked in anchors and anchor not in anchors[linked]:
                broken.append(f"{page.name}: {target}#{anchor}")
    assert not broken, broken


def test_every_relative_link_names_a_file_that_exists():
    """README.md and docs/ link to each other by path (moving a section between pages moves links)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "reports").glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[\w-]+)?\)", text):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_the_readme_tour_says_of_the_default_check_what_its_verdict_table_says():
    """The tour tells a newcomer, before the first run, what the default check ends in; the
    generated verdict table's default row is what ``bench/verdicts.py`` last found."""
    readme = (ROOT / "README.md").read_text()
    (row,) = [line for line in readme.splitlines() if line.startswith("| kip-966, recovery balanced (the default)")]
    invariant, states = re.search(r"\| `(\w+)` \((\d+) states\) \|", row).groups()
    tour = readme[readme.index("## A short tour"):readme.index("### Reading a trace")]
    assert f"violated invariant {invariant}: shortest counterexample\nhas {states} states" in tour
    assert f"counterexample of {states} states" in readme[:readme.index("## A short tour")]
    assert len(re.findall(r"^    \d+\. ", tour, flags=re.M)) == int(states)


def test_every_key_of_the_json_report_is_described_in_docs_cli():
    """docs/cli.md describes the ``--json`` report key by key; a key added to the report is added there."""
    from kraftcheck.checker.explore.reference import ReferenceExplorer
    from kraftcheck.checker.model import Model
    from kraftcheck.checker.report import build_report
    from kraftcheck.specs.die_hard import DieHard

    report = build_report(ReferenceExplorer().explore(Model(DieHard())), {}, {})
    doc = (ROOT / "docs" / "cli.md").read_text()
    section = doc[doc.index("`--json PATH` writes"):doc.index("## Exit codes")]
    missing = sorted(key for key in report if f"`{key}`" not in section)
    assert not missing, f"in the JSON report, not described in docs/cli.md: {missing}"


def test_every_switch_and_option_of_the_kafka_model_is_in_docs_model():
    """docs/model.md names every switch (``k_…`` Const field) any preset or option sets, and every
    option of the Kafka spec: a switch added in ``switches()`` is documented where the model is
    (section 1's list, section 4's table; section 10 says how). ``k_max_*`` are the bounds' (named
    so in section 1)."""
    import dataclasses

    from kraftcheck.specs.kafka.params import BOUNDS, PROTOCOLS, KafkaParams, switches

    doc = (ROOT / "docs" / "model.md").read_text()
    every_option = {f.name: True for f in dataclasses.fields(KafkaParams) if f.type in (bool, "bool")}
    keys = set()
    for protocol in PROTOCOLS:
        keys |= set(switches(KafkaParams(protocol=protocol)))
        keys |= set(switches(dataclasses.replace(KafkaParams(protocol=protocol), **every_option)))
    bounds = {f"k_max_{name}" for name in BOUNDS}
    assert "`k_max_*`" in doc
    missing = sorted(k for k in keys - bounds if f"`{k}`" not in doc)
    assert not missing, f"switches docs/model.md does not name: {missing}"
    options = [f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(KafkaParams)]
    assert not [o for o in options if f"`{o}" not in doc], "options docs/model.md does not name"
