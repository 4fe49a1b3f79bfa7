"""What a check or a simulation found, given in full whatever the disk does, and its exit code.

The pipeline (kraftcheck/pipeline.py) has written the trace file of each violation, one by one
(one the disk refuses is named, the next still written), and merged the whole-graph analyses'
findings into the verdict (a violated liveness property makes the run violated). Here, in this
order: the text summary and the analyses' sections (standard output on a full disk is named as any
file is); the JSON report; then one error line per output not written, and what stopped the run if
it stopped early.

The exit code is the verdict's: 1 if anything was violated, however the run ended (a full disk,
a limit), else 3 if the run could not finish or an output could not be written, else 0. An
analysis that failed makes it 2, and the JSON report then says ``error``, never ``holds``. An
interrupt once the exploration was over (``Checked.cut_short``: while writing the traces, say)
makes it 130, after the summary and the JSON report of what was found.
"""

from __future__ import annotations

from typing import Any, Optional

from kraftcheck.checker.disk_full import UnwrittenFile, is_disk_full_reason, stopped_by_full_disk, write_kept
from kraftcheck.checker.explore.result import HOLDS, INCOMPLETE, VIOLATED, Result
from kraftcheck.cli.terminal import Terminal
from kraftcheck.pipeline import Checked

EXIT_HOLDS, EXIT_VIOLATED, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def exit_code(result: Result) -> int:
    if result.interrupted:
        return EXIT_INTERRUPTED
    return {HOLDS: EXIT_HOLDS, VIOLATED: EXIT_VIOLATED, INCOMPLETE: EXIT_INCOMPLETE}[result.status]


class Outcome:
    """One run's result on its way out (``pipeline.Checked``: its traces written, its analyses
    run): ``report`` gives the summary, the JSON report and what was not written."""

    def __init__(self, terminal: Terminal, checked: Checked) -> None:
        self.terminal = terminal
        self.model = checked.prepared.model
        self.result = checked.result
        self.run_options = checked.run_options
        self.not_checked = list(checked.prepared.not_checked)
        # --liveness asked for that did not run or finish (an exploration stopped early, an
        # interrupt, a limit): the properties are as unchecked as without it
        self.liveness_skipped = checked.prepared.request.liveness and \
            "liveness" not in getattr(checked.analyses, "found", {})
        if self.liveness_skipped:
            from kraftcheck.checker.analyses.liveness_properties import unchecked_liveness
            self.not_checked = unchecked_liveness(self.model, checking=False)
        self.trace_files = checked.trace_files
        self.unwritten: list[UnwrittenFile] = checked.unwritten
        self.analyses: Any = checked.analyses  # analyses.GraphAnalyses
        self.error: Optional[str] = None if checked.analyses is None else checked.analyses.error
        # an interrupt once the exploration was over: the verdict stands, some outputs are missing
        self.cut_short = checked.cut_short
        if self.cut_short == "analysing the state graph":  # then the analyses' answer is not known
            self.error = "interrupted while analysing the state graph: its results are not known"

    def report(self, json_path: Optional[str]) -> int:
        """The summary, the analyses' sections, the JSON report, what was not written; the exit code."""
        t, result = self.terminal, self.result
        # standard output on a full disk: the JSON report and the verdict's exit code still follow
        write_kept("the summary", "standard error" if t.out.stderr else "standard output", self._print_summary,
                   self.unwritten)
        if json_path:
            from kraftcheck.checker.report import build_report, write_report
            report = {**build_report(result, self.run_options, self.trace_files, not_checked=self.not_checked,
                                     unwritten=self.unwritten, error=self.error),
                      **(self.analyses.found if self.analyses is not None else {}),
                      "cut_short": self.cut_short}
            write_kept("the JSON report", json_path, lambda: write_report(report, json_path), self.unwritten)
        for u in self.unwritten:
            t.error(str(u))
        if self.error is not None:
            t.error(self.error)
        if is_disk_full_reason(result.incomplete_reason):
            t.error(stopped_by_full_disk(result.incomplete_reason, result.checkpoint_dir))
        if result.interrupted:
            # the reference explorer counts every state it reached; the engine and Spark the levels
            # they finished, which a resume continues from
            what = "what was simulated so far" if result.simulation is not None else \
                "what was explored so far" if result.engine == "reference" else "the levels finished so far"
            # under --quiet no summary was printed: say where the statistics are, if anywhere
            where = "the statistics above" if not t.quiet else "the JSON report's statistics" if json_path else None
            t.error(f"interrupted; {where} cover {what}" if where else
                    "interrupted (--quiet: no statistics shown; --json FILE keeps them)")
        elif self.cut_short is not None:
            stand = "the counts above stand (the analyses' error says what is not known)" if self.error is not None \
                else "the counts and verdict above stand; a violation shown without a trace file has none"
            t.error(f"interrupted after the exploration, while {self.cut_short}: {stand}")
        if result.checkpoint_dir and (result.interrupted or result.incomplete_reason) and \
                not is_disk_full_reason(result.incomplete_reason):
            # the option the command gave the directory with: a resumed run's is --resume already
            instead = "" if result.resumed else \
                f" instead of {'--work-dir' if result.engine == 'spark' else '--checkpoint'}"
            # the same bound would stop the resumed run where this one stopped
            reason = result.incomplete_reason or ""
            bounds = ("--max-states", "--max-depth", "--max-memory", "--graph-limit")
            larger = next((f", a larger {bound}" for bound in bounds if reason.startswith(f"stopped at {bound}")), "")
            t.hint(f"the last finished level is saved in {result.checkpoint_dir}: continue with the same "
                   f"command{larger} and --resume {result.checkpoint_dir}{instead}")
        return self.exit_code()

    def _print_summary(self) -> None:
        """The summary and the analyses' sections, on the terminal's results console."""
        self.terminal.summary(self.result, self.trace_files, not_checked=self.not_checked,
                              unwritten={u.check: f"{u.path} ({u.reason})" for u in self.unwritten
                                         if u.check is not None},
                              errored=self.error is not None, liveness_skipped=self.liveness_skipped)
        if self.analyses is not None:
            from kraftcheck.cli.graph_analyses import print_analyses
            print_analyses(self.terminal, self.analyses)

    def exit_code(self) -> int:
        if self.cut_short is not None:
            return EXIT_INTERRUPTED
        if self.error is not None:
            return EXIT_USAGE
        code = exit_code(self.result)
        return EXIT_INCOMPLETE if code == EXIT_HOLDS and self.unwritten else code
