"""What a person reads: every command's help and output fits 80 columns, and the header names the
spec with only the options that differ from its defaults."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from kraftcheck.cli.main import SUBCOMMANDS, cli


def _commands():
    """Every command path: ('check',), ('trace', 'show'), ..."""
    out = [()]
    ctx = click.Context(cli)
    for name in SUBCOMMANDS:
        cmd = cli.get_command(ctx, name)
        out.append((name,))
        if isinstance(cmd, click.Group):
            out.extend((name, sub) for sub in cmd.list_commands(click.Context(cmd)))
    return out


def run(*args, **kw):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, terminal_width=80, env={"COLUMNS": "80"}, **kw)


@pytest.mark.parametrize("path", _commands(), ids=lambda p: " ".join(p) or "kraftcheck")
def test_help_fits_80_columns(path):
    result = run(*path, "--help")
    assert result.exit_code == 0
    wide = [line for line in result.output.splitlines() if len(line) > 80]
    assert wide == []


def test_specs_listing_fits_80_columns():
    result = run("specs", "--no-color")
    assert result.exit_code == 0
    assert [line for line in result.output.splitlines() if len(line) > 80] == []
    assert "accept_stale_fetch_responses" in result.output


def test_check_output_fits_80_columns_and_names_only_changed_options(tmp_path, monkeypatch):
    """Progress lines included: a CI log gets one every 10 s, here one at every snapshot."""
    import kraftcheck.cli.terminal as terminal
    monkeypatch.setattr(terminal, "PLAIN_PROGRESS_EVERY_S", 0)
    result = run("check", "--spec", "two_phase_eager_commit", "--param", "rm=4", "--no-color",
                 "--trace-dir", str(tmp_path))
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert any(line.startswith("progress: depth ") for line in lines)
    assert [line for line in lines if len(line) > 80] == []
    assert lines[0].startswith("checking two_phase_eager_commit (rm=4): ")
    assert any(line.startswith("two_phase_eager_commit (rm=4): invariant violated") for line in lines)


def test_a_default_run_says_default_options(tmp_path):
    result = run("check", "--spec", "die_hard", "--no-color", "--trace-dir", str(tmp_path))
    assert result.output.splitlines()[0].startswith("checking die_hard (default options): ")


def test_spark_progress_line_fits_80_columns():
    """A Spark run's progress names the level and the bytes its last level shuffled; big counts
    are kept short, and the time goes first when the line would be wider than 80 columns."""
    from kraftcheck.checker.explore.result import Progress
    from kraftcheck.cli.terminal import progress_line

    small = Progress(11, 288, 1_000, 0, 12.3, engine="spark", shuffle_bytes=1_649)
    assert progress_line(small) == "level 11  distinct 288 (+0)  generated 1,000  23/s  shuffle 1.61 KiB  12.3s"
    first = Progress(1, 8, 8, 8, 0.5, engine="spark")
    assert "shuffle -" in progress_line(first)  # no level finished yet, or figures unavailable
    big = Progress(142, 21_800_000, 180_000_000, 1_230_000, 1_234.5, engine="spark", shuffle_bytes=1_100_000_000)
    assert progress_line(big) == "level 142  distinct 21.8M (+1.23M)  generated 180M  17.7k/s  shuffle 1.02 GiB"
    huge = Progress(1_000, 999_999_999, 10**12, 123_456_789, 99_999.9, engine="spark", shuffle_bytes=1023 * 2**40)
    assert len(progress_line(huge)) <= 80 and "shuffle 1,023 TiB" in progress_line(huge)
    local = Progress(11, 288, 1_000, 0, 12.3)
    assert progress_line(local).startswith("depth 11  distinct 288  generated 1,000  frontier 0")


def test_a_local_progress_line_keeps_its_counts_whole_and_fits_80_columns():
    """The rate's word goes first, then the time, then the frontier is kept short; depth, distinct
    and generated stay whole, as ``kraftcheck ci`` reads them from a check's plain lines."""
    from kraftcheck.checker.explore.result import Progress
    from kraftcheck.ci.runner import PROGRESS_LINE
    from kraftcheck.cli.terminal import progress_line

    small = Progress(6, 426, 1_391, 378, 0.7)
    assert progress_line(small) == "depth 6  distinct 426  generated 1,391  frontier 378  609/s distinct  0.7s"
    assert progress_line(small, 70) == "depth 6  distinct 426  generated 1,391  frontier 378  609/s  0.7s"
    big = Progress(60, 12_345_678, 123_456_789, 1_234_567, 100.0)
    assert progress_line(big, 70) == "depth 60  distinct 12,345,678  generated 123,456,789  frontier 1.23M  123k/s"
    huge = Progress(1_234, 123_456_789, 1_234_567_890, 12_345_678, 100.0)  # wider than 70 columns: counts whole
    depth, distinct, generated = PROGRESS_LINE.match(f"progress: {progress_line(huge, 70)}").groups()
    assert (depth, distinct, generated) == ("1,234", "123,456,789", "1,234,567,890")
    compiling = Progress(5, 1496, 2907, 1158, 11.5, compiling="5/21: Fetch", meanwhile="interpreting")
    meanwhile = progress_line(compiling, 70)
    assert all(len(line) <= 70 for line in meanwhile.splitlines())


def test_a_simulation_progress_line_fits_80_columns():
    """The time goes first, then the rates, then the counts are kept short."""
    from kraftcheck.checker.explore.result import Progress
    from kraftcheck.cli.terminal import progress_line

    small = Progress(0, 2_680, 17_244, 40, 10.0, behaviours=100)
    assert progress_line(small) == "behaviours 100 (10/s)  states 2,680 (268/s)  generated 17,244  running 40  10.0s"
    big = Progress(0, 12_345_678, 123_456_789, 4_096, 100.0, behaviours=1_234_567)
    assert progress_line(big) == "behaviours 1,234,567  states 12,345,678  generated 123,456,789  running 4,096"
    assert progress_line(big, 70) == "behaviours 1.23M  states 12.3M  generated 123M  running 4,096"
