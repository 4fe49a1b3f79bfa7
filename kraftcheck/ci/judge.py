"""Compare one check's run with its expectation and the baseline: the gate's verdict per check.

A check passes when every expected violation was reported (``deadlock`` too, for a spec that
checks for deadlocks), every other violation is an accepted finding of the baseline, and (when the
run was exhaustive) the expected counts match exactly. A time or memory budget that ran out is its
own verdict, and so is a run stopped before its end by anything else (a full disk): exit 3,
nothing was proved either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from kraftcheck.checker.model import DEADLOCK
from kraftcheck.checker.report import ERROR
from kraftcheck.ci.baseline import Finding, signature
from kraftcheck.ci.manifest import COUNT_KEYS
from kraftcheck.ci.runner import Outcome

PASS, FAIL, BUDGET, STOPPED, BAD_INPUT = "pass", "fail", "budget", "stopped", "bad input"
INCOMPLETE = (BUDGET, STOPPED)  # nothing proved either way (exit 3)
REPORT_COUNT = {"distinct": "distinct_states", "generated": "states_generated", "depth": "depth"}
BOUNDED = ("--max-states", "--max-depth")  # limits a manifest sets on purpose: the run is bounded, not cut short
BUDGETS = ("--time-limit", "--max-memory")  # the check's time_budget and max_memory


@dataclass
class Case:
    """One JUnit test case: an invariant of a check, or the check's exploration as a whole."""

    name: str
    status: str  # passed, failed, error, skipped
    message: str = ""
    details: str = ""


@dataclass
class Judgement:
    outcome: Outcome
    status: str = PASS
    problems: list[str] = field(default_factory=list)  # why the check did not pass, one line each
    notes: list[str] = field(default_factory=list)     # worth saying, not failing
    cases: list[Case] = field(default_factory=list)
    new: list[Finding] = field(default_factory=list)       # unexpected and not in the baseline
    accepted: list[Finding] = field(default_factory=list)  # unexpected but in the baseline
    stale: list[Finding] = field(default_factory=list)     # in the baseline, not found this time
    found: list[Finding] = field(default_factory=list)     # every violation reported, expected or not

    @property
    def name(self) -> str:
        return self.outcome.check.name

    def fail(self, message: str) -> None:
        self.problems.append(message)
        if self.status == PASS or self.status in INCOMPLETE:
            self.status = FAIL


def step_lines(finding: Finding) -> list[str]:
    """A finding's counterexample as ``kraftcheck check`` lists it: a numbered line per state (its
    ``depth`` of them) and, for a lasso that does not stutter, its closing step unnumbered: it leads
    back to a state listed already (its actions as many as its states)."""
    lines = ["1. initial state"] + [f"{i}. {a}" for i, a in enumerate(finding.actions, 2)]
    if finding.cycle_start is not None and len(finding.actions) == finding.depth:
        lines[-1] = f"closing step: {finding.actions[-1]}, back to {finding.cycle_start + 1}"
    return lines


def steps_text(finding: Finding) -> str:
    return "\n".join(step_lines(finding))


def judge(outcome: Outcome, accepted: list[Finding]) -> Judgement:
    """The verdict on ``outcome`` given the baseline's ``accepted`` findings (all checks')."""
    j = Judgement(outcome)
    check, report = outcome.check, outcome.report
    # exit 2 is no verdict, with or without a report: a report says ``error`` when an analysis after
    # the exploration failed (a predicate that raised), and its checks, none proved, would otherwise
    # pass as those of a bounded run. (One over --max-memory is a budget: its report says incomplete.)
    if (outcome.exit_code == 2 and report is None) or (report is not None and report.get("result") == ERROR):
        line = report.get("error") or outcome.error_line if report is not None else outcome.error_line
        j.status = BAD_INPUT
        j.problems.append(line)
        j.cases.append(Case("exploration", "error", line))
        return j
    # never started (its run directory refused), or stopped with its report unwritten (exit 3: a full disk)
    said = outcome.stopped_unreported
    if said is not None:
        j.status = STOPPED
        j.problems.append(f"stopped before its end: {said}")
        j.cases.append(Case("exploration", "error", outcome.error_line))
        return j
    if report is None:
        if outcome.killed:
            j.status = BUDGET
            message = f"still running {outcome.wall_s:.0f} s after it started (budget {check.time_budget:g} s); killed"
        else:
            j.status = FAIL
            message = f"kraftcheck check exited {outcome.exit_code} without a report: {outcome.error_line}"
        j.problems.append(message)
        j.cases.append(Case("exploration", "error", message, outcome.output[-4000:]))
        return j

    mine = [f for f in accepted if f.check == check.name]
    for v in report["violations"]:
        j.found.append(Finding(check.name, v["invariant"], signature(v["actions"]), v["depth"], tuple(v["actions"]),
                               v.get("cycle_start")))
    found = {f.invariant: f for f in j.found}
    reason = report.get("incomplete_reason") or ""
    bounded = reason.startswith(tuple(f"stopped at {b}" for b in BOUNDED))
    budget = reason.startswith(tuple(f"stopped at {b}" for b in BUDGETS))
    label = "budget ran out" if budget else "stopped before its end"  # the check's problem
    cut = "the budget ran out" if budget else "the run stopped before its end"  # why something was not proved
    # a run that goes on past its violations (continue = true) and is cut short has not looked for the
    # rest: what it found is reported, but that nothing else is violated is as unproved as in a run
    # that found nothing; a run that stops at its first violation had nothing more to look for
    went_on = bool(report.get("options", {}).get("continue"))
    out_of_budget = not bounded and (report["result"] == "incomplete" or (went_on and bool(reason)))
    stopped_early = not report["exhaustive"]
    # a deadlock is reported as a violation of "deadlock" by a run that checks for it (the spec's check_deadlock)
    deadlock = report.get("options", {}).get("deadlock") or DEADLOCK in found
    # with liveness = true the liveness properties analysed are checks too (their lassos among the violations)
    analysed = [p["property"] for p in (report.get("liveness") or {}).get("properties") or []]
    for p in (report.get("liveness") or {}).get("properties") or []:
        if p.get("vacuous"):  # its "holds" proves nothing of any behaviour: said, as the command line says it
            j.notes.append(f"liveness {p['property']} holds vacuously: {p['vacuous']}")
    checked = list(report["checked"]) + analysed + ([DEADLOCK] if deadlock else [])
    unchecked = report.get("liveness_not_checked") or []
    if unchecked:  # a "holds" says nothing of them: said, as the command line says it
        j.notes.append(f"liveness not checked: {', '.join(unchecked)} (set liveness = true)")
    if check.request.liveness and not analysed:  # --liveness skips a run that stopped early: said too
        why = "the run did not explore every state" if not report["exhaustive"] else "the analysis did not finish"
        j.notes.append(f"liveness not checked: {why} ({reason or 'stopped early'}), which liveness = true needs")

    exploration = Case("exploration", "passed")
    if out_of_budget:
        j.status = BUDGET if budget else STOPPED
        j.problems.append(f"{label}: {reason}")
        exploration = Case("exploration", "error", f"{label}: {reason}")
    elif reason:
        j.notes.append(f"bounded run: {reason}" if bounded else f"{label}: {reason}")

    for name in checked:
        f = found.get(name)
        if name in check.violates:
            if f is not None:
                j.cases.append(Case(name, "passed", f"violated as expected ({f.depth} states)"))
            elif out_of_budget:
                j.cases.append(Case(name, "skipped", f"not found before {cut}"))
            else:
                first = ", ".join(found) or "none"
                hint = f"; the run stopped at its first violation ({first}): set continue = true" if found and stopped_early else ""
                message = f"expected a violation of {name}, none was reported{hint}"
                j.fail(message)
                j.cases.append(Case(name, "failed", message))
        elif f is not None:
            match = next((a for a in mine if a.key == f.key), None)
            if match is not None:
                j.accepted.append(f)
                j.cases.append(Case(name, "passed", f"accepted finding ({f.depth} states, baseline)"))
            else:
                j.new.append(f)
                what = "deadlock reached" if name == DEADLOCK else f"{name} violated"
                message = f"{what} ({f.depth} states), a new finding"
                j.fail(message)
                j.cases.append(Case(name, "failed", message, steps_text(f)))
        elif stopped_early:
            why = cut if out_of_budget else ("the run stopped at its first violation" if found
                                             else "the run was bounded" if bounded or not reason else cut)
            j.cases.append(Case(name, "skipped", f"not proved: {why}"))
        else:
            j.cases.append(Case(name, "passed"))
    missing_expected = [n for n in check.violates if n not in checked]
    # the manifest names only checks and (liveness = true) liveness properties: one of these went
    # unanalysed because the run did not explore every state
    unanalysed = check.request.liveness and not analysed
    for name in missing_expected:
        if unanalysed and out_of_budget:  # as an invariant's: the budget is the check's problem, said once
            j.cases.append(Case(name, "skipped", f"not analysed before {cut}"))
            continue
        message = (f"expected a violation of {name}, which this run did not check: liveness needs every state, and "
                   f"the run {reason or 'stopped early'}" if unanalysed
                   else f"expected a violation of {name}, which this run does not check")
        j.fail(message)
        j.cases.append(Case(name, "failed", message))

    if not out_of_budget:  # a run cut short proves no finding gone
        j.stale = [a for a in mine if a.key not in {f.key for f in j.found}]
    for a in j.stale:
        j.notes.append(f"baseline finding {a.invariant} ({a.signature[:19]}) no longer reported: prune it "
                       "with --update-baseline")

    mismatches = _count_mismatches(check.counts, report)
    if mismatches and report["exhaustive"]:
        message = "counts differ from the manifest: " + "; ".join(mismatches)
        j.fail(message)
        exploration = Case("exploration", "failed", message)
    elif check.counts and not report["exhaustive"]:
        j.notes.append("expected counts not compared: the run was not exhaustive")
    j.notes.extend(reduction_notes(report))
    j.cases.insert(0, exploration)
    return j


def reduction_notes(report: dict) -> list[str]:
    """What a reduced run's verdict and counts mean: one line per reduction it used."""
    notes = []
    if report.get("symmetry"):
        notes.append("--symmetry: one state per orbit; counts are orbits")
    collisions = report.get("collision_probability")
    if report.get("fingerprints") and collisions:
        notes.append(f"--fingerprints: exhaustive up to hash collisions (probability {collisions['optimistic']:.1e} "
                     f"optimistic, {collisions['from_fingerprints']:.1e} from the fingerprints)")
    return notes


def _count_mismatches(expected: dict[str, int], report: dict) -> list[str]:
    return [f"{key} {report[REPORT_COUNT[key]]:,} (expected {value:,})" for key, value in expected.items()
            if report[REPORT_COUNT[key]] != value]


def counts_of(report: Optional[dict]) -> dict[str, int]:
    """The counts ``--update-counts`` writes: those of an exhaustive run only."""
    if not report or not report["exhaustive"]:
        return {}
    return {key: report[REPORT_COUNT[key]] for key in COUNT_KEYS}
