"""The eval report: aggregate figures, a table for the terminal, JSON and JUnit XML for CI."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from typing import Any, Final, final
from xml.etree import ElementTree

from ..records import StopReason
from ._live import LiveRun
from ._live_report import junit_case, live_line, live_table
from ._runner import CaseResult
from ._text import redact, reported


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    """The aggregate figures of a set of runs (a rate is None when nothing was counted)."""

    cases: int
    passed: int
    failed: int
    errors: int
    skipped: int
    """Live cases run without a live model."""
    completion_rate: float | None
    """Runs that stopped `completed` / runs."""
    correct_stop_rate: float | None
    """Runs whose stop reason is the expected one / runs."""
    invalid_action_rate: float | None
    """Proposed calls the loop refused (invalid, or denied by the loop) / proposed calls."""
    repeated_action_rate: float | None
    """Proposed calls answered `repeated` / proposed calls."""
    escalation_precision: float | None
    """Runs stopped `needs_human` whose case expected it / runs stopped `needs_human`."""
    tokens: int
    tool_calls: int
    cost_usd: float
    latency_median_s: float | None
    latency_max_s: float | None
    replay_success_rate: float | None
    """Runs whose replay from their own trace took the same path / runs replayed."""

    @classmethod
    def of(cls, results: Sequence[CaseResult]) -> Figures:
        """Compute the figures; a case whose fixture is invalid counts only in `errors`, a
        skipped live case only in `skipped`."""
        runs = [result for result in results if result.status not in ("error", "skipped")]
        proposed = sum(result.proposed for result in runs)
        escalated = [result for result in runs if result.stop_reason is StopReason.NEEDS_HUMAN]
        replayed = [result for result in runs if result.replay_identical is not None]
        latencies = [result.duration_s for result in runs]
        return cls(
            cases=len(results),
            passed=sum(1 for result in results if result.status == "passed"),
            failed=sum(1 for result in results if result.status == "failed"),
            errors=sum(1 for result in results if result.status == "error"),
            skipped=sum(1 for result in results if result.status == "skipped"),
            completion_rate=_rate(sum(1 for r in runs if r.stop_reason is StopReason.COMPLETED), len(runs)),
            correct_stop_rate=_rate(  # a run that raised did not stop as the case expects
                sum(1 for r in runs if r.raised is None and r.stop_reason is r.case.expected.stop_reason),
                len(runs),
            ),
            invalid_action_rate=_rate(sum(result.refused for result in runs), proposed),
            repeated_action_rate=_rate(sum(result.repeated for result in runs), proposed),
            escalation_precision=_rate(
                sum(1 for r in escalated if r.case.expected.stop_reason is StopReason.NEEDS_HUMAN),
                len(escalated),
            ),
            tokens=sum(result.tokens for result in runs),
            tool_calls=sum(result.tool_calls for result in runs),
            cost_usd=sum(result.cost_usd for result in runs),
            latency_median_s=statistics.median(latencies) if latencies else None,
            latency_max_s=max(latencies) if latencies else None,
            replay_success_rate=_rate(sum(1 for r in replayed if r.replay_identical), len(replayed)),
        )

    def rows(self) -> list[tuple[str, str]]:
        """The figures as (label, formatted value) rows, in reading order."""
        return [
            ("cases", self._counts()),
            ("completion rate", _percent(self.completion_rate)),
            ("correct stop reason", _percent(self.correct_stop_rate)),
            ("invalid-action rate", _percent(self.invalid_action_rate)),
            ("repeated-action rate", _percent(self.repeated_action_rate)),
            ("escalation precision", _percent(self.escalation_precision)),
            ("tokens", f"{self.tokens:,}"),
            ("tool calls", f"{self.tool_calls:,}"),
            ("cost", f"${self.cost_usd:.4f}"),
            ("latency", _latency(self.latency_median_s, self.latency_max_s)),
            ("replay success", _percent(self.replay_success_rate)),
        ]

    def _counts(self) -> str:
        skipped = f", {self.skipped} skipped" if self.skipped else ""
        return f"{self.cases} ({self.passed} passed, {self.failed} failed, {self.errors} errors{skipped})"


def _rate(count: int, total: int) -> float | None:
    return None if total == 0 else count / total


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.0%}"


def _latency(median: float | None, largest: float | None) -> str:
    if median is None or largest is None:
        return "n/a"
    return f"median {median * 1000:.1f} ms, max {largest * 1000:.1f} ms"


_MARKS: Final = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}


@final
@dataclasses.dataclass(frozen=True, slots=True)
class EvalReport:
    """The results of an eval run, with their figures.

    `results` are the scripted and saved-state cases, and the live cases skipped for want of
    a live model; `live` holds the live cases' trials when they ran on one.
    """

    results: Sequence[CaseResult]
    live: LiveRun | None = None

    @property
    def figures(self) -> Figures:
        """The aggregate figures."""
        return Figures.of(self.results)

    @property
    def passed(self) -> bool:
        """Every case passed (a skipped live case is not a failure: see `skipped_live`), and
        every live case reached its minimum pass rate."""
        live = () if self.live is None else self.live.cases
        return all(result.status in ("passed", "skipped") for result in self.results) and all(
            case.status in ("passed", "skipped") for case in live
        )

    @property
    def skipped_live(self) -> int:
        """Live cases that did not run: no live model, or the cost ceiling came first."""
        live = () if self.live is None else self.live.cases
        return sum(1 for r in self.results if r.status == "skipped") + sum(
            1 for case in live if case.status == "skipped"
        )

    @property
    def has_errors(self) -> bool:
        """Some fixture is at fault."""
        return any(result.status == "error" for result in self.results)

    def table(self) -> str:
        """One line per case (its first failure when it failed), then the figures."""
        names = [redact(result.case.case_id) for result in self.results]
        lines: list[str] = []
        live = () if self.live is None else self.live.cases
        names += [redact(case.case.case_id) for case in live]
        width = max((len(name) for name in names), default=4)
        for name, result in zip(names, self.results, strict=False):
            mark = _MARKS[result.status]
            got = "-" if result.stop_reason is None else str(result.stop_reason)
            line = f"{mark:<5} {name:<{width}}  {got:<16} {result.duration_s * 1000:7.1f} ms"
            if result.failures:
                line += f"  {redact(result.first_failure)}"
            lines.append(line)
        lines += [live_line(case, width) for case in live]
        if self.results or self.live is None:
            lines.append("")
            label_width = max(len(label) for label, _ in self.figures.rows())
            lines += [f"{label:<{label_width}}  {value}" for label, value in self.figures.rows()]
        if self.live is not None:
            lines += live_table(self.live)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON object: the figures and one object per case."""
        return {
            "figures": dataclasses.asdict(self.figures),
            "cases": [result.to_dict() for result in self.results],
            "live": None if self.live is None else self.live.to_dict(),
        }

    def junit(self) -> str:
        """The report as JUnit XML: one `testcase` per case, a `failure` or `error` in it.

        Every name and message is redacted, and a character XML 1.0 forbids (a control
        character, a lone surrogate) is written as U+FFFD: the document always parses.
        """
        figures = self.figures
        live = () if self.live is None else self.live.cases
        suite = ElementTree.Element(
            "testsuite",
            name="boundloop-evals",
            tests=str(figures.cases + len(live)),
            failures=str(figures.failed + sum(1 for case in live if case.status == "failed")),
            errors=str(figures.errors),
            skipped=str(self.skipped_live),
            time=f"{sum(result.duration_s for result in self.results):.6f}",
        )
        for result in self.results:
            testcase = ElementTree.SubElement(
                suite,
                "testcase",
                classname="boundloop.evals" if result.case.source is None else reported(result.case.source),
                name=reported(result.case.case_id),
                time=f"{result.duration_s:.6f}",
            )
            if result.status != "passed":
                tag = {"failed": "failure", "error": "error", "skipped": "skipped"}[result.status]
                element = ElementTree.SubElement(testcase, tag, message=reported(result.first_failure))
                element.text = reported("\n".join(result.failures))
        for case in live:
            junit_case(suite, case)
        ElementTree.indent(suite)
        return (
            '<?xml version="1.0" encoding="utf-8"?>\n'
            + ElementTree.tostring(suite, encoding="unicode")
            + "\n"
        )
