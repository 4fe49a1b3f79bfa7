"""A differential fuzzing campaign: every explorer on generated specs, compared with the reference.

    KRAFTCHECK_CACHE_DIR=/tmp/fuzz/cache nice -n 19 .venv/bin/python bench/fuzz_explorers.py --seeds 0..99 \
        --table-layouts --min-states 20

For each seed, tests/spec_generator.py writes a spec (kept in --out), and each explorer that
applies explores it: the compiled engine on one thread and on two, with small chunks, its
bytecode and interpreted first tiers alone, with --fingerprints, --compact, levels on disk
(--checkpoint), a run stopped part way and resumed, the table form of the kernels, and (with
--spark) Spark in local mode; and, but the interpreted tier and the resumed run, under --symmetry
when the spec declares a symmetry. Each is compared with the pure-Python reference explorer:
status, initial states, distinct states, states generated, depth, coverage per action, and each
violated check with its kind and the length of its shortest counterexample, on complete runs
(--continue) and on runs that stop at the first violation. A spec error must be the same error,
on the same state, on every explorer. A simulation must find only the checks the search finds,
no shorter, and the same behaviours compiled as interpreted.

One line per seed; a disagreement prints what each side found and the spec's file, and the
campaign ends with exit 1 if there was any.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("KRAFTCHECK_KEEP_COMPILING", "0")
os.environ.setdefault("KRAFTCHECK_INTERPRET_S", "600")  # the first tiers alone run to their end
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import spec_generator  # noqa: E402

from kraftcheck.checker import codegen  # noqa: E402
from kraftcheck.checker.explore.engine import Engine  # noqa: E402
from kraftcheck.checker.explore.reference import ReferenceExplorer  # noqa: E402
from kraftcheck.checker.explore.result import Options  # noqa: E402
from kraftcheck.checker.explore.simulate import SimulationOptions, simulate  # noqa: E402
from kraftcheck.checker.model import Model  # noqa: E402
from kraftcheck.specs import spec_class  # noqa: E402

MAX_STATES = 300_000  # a generated spec larger than this is skipped, not compared


def in_table_form(model, options):
    """The engine with the table form of every layout (``--table-layouts``)."""
    with TableLayouts():
        return Engine(compile="now").explore(model, options)


def compared(runs: dict, model_of, options, expected: dict, how: str) -> list[str]:
    """Each of ``runs`` (name -> explore(model, options)) whose outcome is not ``expected``, said
    with ``how`` the runs were made and what differs."""
    said = []
    for name, explore in runs.items():
        got = outcome(lambda: explore(model_of(), options))
        if got != expected:
            said.append(f"{name} ({how}): {difference(expected, got)}")
    return said


def outcome(explore):
    """What an exploration gave: its summary, or the error it raised (its type and message, with
    the path to the state it was raised on)."""
    try:
        return explore().agreed()
    except Exception as error:  # a spec's error must be every explorer's, on the same state
        return {"error": type(error).__name__, "message": str(error)}


class TableLayouts:
    """Every layout packed by its table, as a large one is (tests/conftest.py's TableLayoutEngine)."""

    def __enter__(self):
        self.before = codegen.INLINE_PACK_MAX_ELEMENTS
        codegen.INLINE_PACK_MAX_ELEMENTS = -1

    def __exit__(self, *exc):
        codegen.INLINE_PACK_MAX_ELEMENTS = self.before


def difference(expected: dict, got: dict) -> str:
    """What differs, key by key: the reference's value, then the explorer's."""
    keys = [k for k in dict.fromkeys([*expected, *got]) if expected.get(k) != got.get(k)]
    return "; ".join(f"{k}: {expected.get(k)!r} vs {got.get(k)!r}" for k in keys)


def in_temporary_dir(run):
    directory = tempfile.mkdtemp(prefix="kraftcheck-fuzz-")
    try:
        return run(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def resumed(model_of, options, distinct):
    """A run stopped at about half the states (--max-states), then resumed from its checkpoint."""
    def run(directory):
        path = str(Path(directory) / "run")
        first = Engine().explore(model_of(), dataclasses.replace(options, checkpoint_dir=path,
                                                                 max_states=max(1, distinct // 2)))
        if first.exhaustive:  # the spec has fewer states than the stop: nothing to resume
            return first
        return Engine().explore(model_of(), dataclasses.replace(options, checkpoint_dir=path, resume=True))
    return in_temporary_dir(run)


def explorers(symmetric: bool, spark_context=None):
    """name -> (options changes, how to explore a model with options)."""
    engine = Engine(compile="now")
    table: dict = {
        "engine-1-thread": lambda m, o: engine.explore(m, dataclasses.replace(o, threads=1)),
        "engine-2-threads": lambda m, o: engine.explore(m, dataclasses.replace(o, threads=2)),
        "engine-small-chunks": lambda m, o: Engine(chunk_candidates=64, shard_bits=1).explore(m, o),
        "bytecode": lambda m, o: Engine(compile="bytecode").explore(m, o),
        "interpreted": lambda m, o: Engine(compile="never").explore(m, o),
        "fingerprints": lambda m, o: engine.explore(m, dataclasses.replace(o, fingerprints=True)),
        "compact": lambda m, o: engine.explore(m, dataclasses.replace(o, compact=True)),
        "levels-on-disk": lambda m, o: in_temporary_dir(
            lambda d: engine.explore(m, dataclasses.replace(o, checkpoint_dir=str(Path(d) / "run")))),
    }
    if spark_context is not None:
        from kraftcheck.spark import SparkExplorer
        table["spark"] = lambda m, o: SparkExplorer(spark_context, partitions=2).explore(m, o)
    return table


def simulation_disagreements(model_of, complete: dict) -> list[str]:
    """Simulation finds only what the exhaustive search finds, no shorter than its shortest
    counterexample, and the same behaviours compiled as interpreted (one thread, one seed)."""
    options = SimulationOptions(seed=1, depth=complete["depth"] + 2, max_behaviours=300, keep_going=True, threads=1)
    runs = {compile: outcome(lambda: simulate(model_of(), options, compile=compile)) for compile in ("now", "never")}
    found = []
    if runs["now"] != runs["never"]:
        found.append(f"simulation compiled vs interpreted: {difference(runs['never'], runs['now'])}")
    shortest = {(check, kind): depth for check, kind, depth in complete["violations"]}
    for check, kind, depth in runs["now"].get("violations", []):
        if (check, kind) not in shortest or depth < shortest[(check, kind)]:
            found.append(f"simulation found {kind} {check} in {depth} states; the search's shortest: "
                         f"{shortest.get((check, kind))}")
    if "error" in runs["now"]:
        found.append(f"simulation raised {runs['now']}, the search did not")
    return found


def check_seed(seed: int, out: Path, table_layouts: bool, spark_context=None,
               min_states: int = 0) -> tuple[str, list[str]]:
    """Explores the spec of ``seed`` every way; returns its line and the disagreements."""
    ref = spec_generator.write(seed, out)
    cls = spec_class(ref)
    symmetric = spec_generator.is_symmetric(seed)

    def model_of():
        return Model(cls(cls.Params()))

    disagreements: list[str] = []
    line = f"seed {seed:5d}"
    for keep_going in (True, False):
        options = Options(keep_going=keep_going, max_states=MAX_STATES)
        expected = outcome(lambda: ReferenceExplorer().explore(model_of(), options))
        if expected.get("status") == "incomplete":
            return f"{line} skipped: more than {MAX_STATES} states", []
        if keep_going and expected.get("distinct", min_states) < min_states:
            return f"{line} skipped: {expected['distinct']} states, fewer than --min-states", []
        runs = dict(explorers(symmetric, spark_context if keep_going else None))
        if keep_going and "error" not in expected:
            runs["resumed"] = lambda m, o: resumed(model_of, o, expected["distinct"])
        if table_layouts:
            runs["table-layouts"] = in_table_form
        disagreements += compared(runs, model_of, options, expected, "--continue" if keep_going else "first violation")
        if keep_going:
            complete = expected
            if "error" in expected:
                line += f" error {expected['error']}"
            else:
                line += (f" {expected['status']:10s} {expected['distinct']:7d} distinct {expected['generated']:8d} "
                         f"generated depth {expected['depth']:3d} {len(expected['violations'])} violated")
    if "error" not in complete:
        disagreements += simulation_disagreements(model_of, complete)
    if symmetric:
        for keep_going in (True, False):
            options = Options(keep_going=keep_going, symmetry=True, max_states=MAX_STATES)
            expected = outcome(lambda: ReferenceExplorer().explore(model_of(), options))
            runs = {name: run for name, run in explorers(symmetric).items() if name != "interpreted"}
            if table_layouts:
                runs["table-layouts"] = in_table_form
            disagreements += compared(runs, model_of, options, expected,
                                      f"--symmetry{' --continue' if keep_going else ''}")
            if keep_going:
                line += (f"; symmetry: error {expected['error']}" if "error" in expected
                         else f"; symmetry {expected['distinct']} orbits")
    return line, disagreements


def seed_range(text: str) -> range:
    lo, sep, hi = text.partition("..")
    try:
        return range(int(lo), int(hi) + 1) if sep else range(int(lo), int(lo) + 1)
    except ValueError:
        raise SystemExit(f"--seeds takes A..B (both included) or one seed, not {text!r}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0..9", help="A..B, both included (default 0..9)")
    parser.add_argument("--out", default="/tmp/kraftcheck-fuzz", help="where the generated specs are kept")
    parser.add_argument("--table-layouts", action="store_true", help="also the kernels' table form (a second compile)")
    parser.add_argument("--spark", action="store_true", help="also Spark in local mode (local[2])")
    parser.add_argument("--min-states", type=int, default=0,
                        help="skip a spec with fewer distinct states than this (its compiles cost the same)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spark_context = None
    if args.spark:
        from kraftcheck.spark.session import start_context
        spark_context = start_context("local[2]")
        spark_context.addPyFile(str(Path(spec_generator.__file__)))
    failures = 0
    seeds = seed_range(args.seeds)
    try:
        for seed in seeds:
            t0 = time.perf_counter()
            try:
                line, disagreements = check_seed(seed, out, args.table_layouts, spark_context, args.min_states)
            except Exception:
                line, disagreements = f"seed {seed:5d}", ["the campaign itself failed:\n" + traceback.format_exc()]
            print(f"{line} ({time.perf_counter() - t0:.1f} s){' DISAGREE' if disagreements else ''}", flush=True)
            if disagreements:
                failures += 1
                print(f"  spec: {out / f'fuzz_{seed}.py'}:Fuzz (the reference's value, then the explorer's)",
                      flush=True)
                for d in disagreements:
                    print("  " + d, flush=True)
    finally:
        if spark_context is not None:
            from kraftcheck.spark.session import stop_context
            stop_context(spark_context)
    print(f"{len(seeds)} seeds, {failures} with a disagreement")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
