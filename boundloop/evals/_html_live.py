"""The live cases in the HTML report: each case's rates with their intervals and a trial strip.

The strip is one square per trial, in trial order (passed, failed, not started), each with its
stop reason and first failure as its title. Everything a trial carries is redacted and escaped.
"""

from __future__ import annotations

import html
from typing import Final

from ._live import CaseTrials, LiveRun, Rates
from ._live_report import stop_counts
from ._runner import CaseResult
from ._text import reported

LIVE_CSS: Final = """
.status-skipped{background:#eaeef2;color:#424a53}.flaky{background:#fff1c2;color:#7d4e00;
border-radius:4px;padding:1px 6px;font-weight:600}.strip{display:flex;gap:3px;flex-wrap:wrap}
.trial{width:14px;height:14px;border-radius:3px;display:inline-block}.trial-passed{background:#2da44e}
.trial-failed{background:#cf222e}.trial-error{background:#bf8700}.trial-not-started{background:#d0d7de}
table.rates td{font-variant-numeric:tabular-nums}.note{color:#59636e}
"""


def escaped(text: object) -> str:
    """Every text of the page: redacted, only characters XML allows, escaped."""
    return html.escape(reported(text), quote=True)


_e = escaped


def live_section(live: LiveRun | None) -> str:
    """The live cases' section of the page ("" without a live run)."""
    if live is None:
        return ""
    parts = [f'<h2>Live cases</h2>\n<p class="note">{_e(live.note)}</p>\n']
    if live.model is not None:
        parts.append(f'<p class="note">model: <code>{_e(live.model)}</code></p>\n')
    parts += [_case(case) for case in live.cases]
    if len(live.cases) > 1:
        parts.append(f"<h3>Every trial</h3>\n{_rates(live.rates)}")
    return "".join(parts)


def _case(case: CaseTrials) -> str:
    name = _e(case.case.case_id)
    status = f'<span class="status status-{case.status}">{_e(case.status)}</span>'
    flaky = ' <span class="flaky">flaky</span>' if case.flaky else ""
    passed = sum(1 for trial in case.trials if trial.passed)
    summary = f"{passed}/{len(case.trials)} trials passed" + (
        f" ({stop_counts(case)})" if case.trials else ""
    )
    failures = "".join(f"<li>{_e(failure)}</li>" for failure in case.failures)
    description = f'<p class="desc">{_e(case.case.description)}</p>' if case.case.description else ""
    return (
        f'<section class="live-case" id="live-{name}"><h3>{status} <code>{name}</code>{flaky} '
        f"{_e(summary)}</h3>{description}"
        f"<p>expected stop: <code>{_e(case.case.expected.stop_reason)}</code></p>"
        f"{_strip(case)}"
        + (f'<ol class="failures">{failures}</ol>' if failures else "")
        + f"{_rates(case.rates)}</section>\n"
    )


def _strip(case: CaseTrials) -> str:
    squares = [_square(number, trial) for number, trial in enumerate(case.trials, start=1)]
    squares += [
        f'<span class="trial trial-not-started" title="trial {number}: not started (cost ceiling)"></span>'
        for number in range(len(case.trials) + 1, case.planned + 1)
    ]
    return f'<div class="strip" role="img" aria-label="trials">{"".join(squares)}</div>'


def _square(number: int, trial: CaseResult) -> str:
    stopped = "-" if trial.stop_reason is None else str(trial.stop_reason)
    title = f"trial {number}: {trial.status}, stopped {stopped}"
    if trial.failures:
        title += f": {trial.first_failure}"
    return f'<span class="trial trial-{trial.status}" title="{_e(title)}"></span>'


def _rates(rates: Rates) -> str:
    rows = "".join(
        f'<tr><th scope="row">{_e(label)}</th><td>{_e(value)}</td></tr>' for label, value in rates.rows()
    )
    return f'<table class="rates"><tbody>{rows}</tbody></table>\n'
