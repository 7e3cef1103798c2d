"""The live trials in the report: a line per case, the rates in the table, a JUnit testcase."""

from __future__ import annotations

from collections import Counter
from xml.etree import ElementTree

from ._live import CaseTrials, LiveRun, Rates
from ._text import redact, reported


def live_line(case: CaseTrials, width: int) -> str:
    """One line for a live case: its status, pass rate, stop reasons, flakiness, first failure."""
    mark = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}[case.status]
    ran = len(case.trials)
    passed = sum(1 for trial in case.trials if trial.passed)
    line = f"{mark:<5} {redact(case.case.case_id):<{width}}  {passed}/{ran} trials passed"
    line += f" ({stop_counts(case)})" if ran else ""
    if ran < case.planned:
        line += f", {case.planned - ran} not started"
    if case.flaky:
        line += "  FLAKY"
    if not case.passed:
        line += f"  {redact(most_common_failure(case))}"
    return line


def most_common_failure(case: CaseTrials) -> str:
    """The first failure most trials share (the case's own when no trial ran or failed)."""
    counts = Counter(trial.first_failure for trial in case.trials if not trial.passed)
    return counts.most_common(1)[0][0] if counts else case.failures[0]


def stop_counts(case: CaseTrials) -> str:
    """How the trials stopped: `needs_human x4, completed x1`."""
    counts = Counter("-" if trial.stop_reason is None else str(trial.stop_reason) for trial in case.trials)
    return ", ".join(f"{reason} x{count}" for reason, count in counts.most_common())


def live_table(live: LiveRun) -> list[str]:
    """The rates of each live case, then of every trial, then the cost ceiling's line."""
    lines: list[str] = []
    for case in live.cases:
        if case.trials:
            lines += ["", f"live case {redact(case.case.case_id)}" + (" (flaky)" if case.flaky else "")]
            lines += _rows(case.rates)
    if len(live.cases) > 1:
        lines += ["", "live cases, every trial", *_rows(live.rates)]
    return [*lines, "", live.note]


def _rows(rates: Rates) -> list[str]:
    rows = rates.rows()
    width = max(len(label) for label, _ in rows)
    return [f"  {label:<{width}}  {value}" for label, value in rows]


def junit_case(suite: ElementTree.Element, case: CaseTrials) -> None:
    """A `testcase` for a live case: a `failure` below its minimum pass rate, `skipped` when no
    trial ran; the rates in `system-out`."""
    testcase = ElementTree.SubElement(
        suite,
        "testcase",
        classname="boundloop.evals" if case.case.source is None else reported(case.case.source),
        name=reported(case.case.case_id),
        time=f"{sum(trial.duration_s for trial in case.trials):.6f}",
    )
    if case.status != "passed":
        tag = "skipped" if case.status == "skipped" else "failure"
        element = ElementTree.SubElement(testcase, tag, message=reported(case.failures[0]))
        element.text = reported("\n".join(case.failures))
    out = ElementTree.SubElement(testcase, "system-out")
    flaky = "flaky: trials disagree\n" if case.flaky else ""
    out.text = reported(flaky + "\n".join(f"{label}: {value}" for label, value in case.rates.rows()))
