"""Live cases: a case without model turns, run N times on a live model, and the rates it gave.

`run_trials` runs every trial of every live case, at most `concurrency` at once, under one
cost ceiling for the whole eval: before a trial starts, the cost of the trials that have
ended is compared with the ceiling, and at the ceiling no further trial starts (the trials
already running finish, so the ceiling can be passed by what they cost). Trials start in
rounds (every case's first trial, then every case's second, ...), so a ceiling cuts each
case short evenly; a `seed` shuffles that order reproducibly. The model's own sampling takes
no seed: the same seed gives the same order, not the same answers.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable, Sequence
from typing import Any, final

import anyio

from ..errors import SetupError
from ..loop import AgentLoop
from ..model import Model
from ..records import StopReason
from ._fixture import Case
from ._runner import CaseResult, Status, run_case
from ._stats import Rate, Spread

DEFAULT_TRIALS = 5
"""Trials per live case when none are asked for."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Rates:
    """The seed's measures over a set of trials, each with its 95 % interval.

    Rates carry Wilson intervals; tokens, cost, tool calls and latency are per trial, with
    their total, mean (Student's t interval), p50 and p95.
    """

    trials: int
    passed: Rate
    """Trials whose every expectation held."""
    completion: Rate
    """Trials that stopped `completed`."""
    correct_stop: Rate
    """Trials that stopped with the case's expected stop reason (and raised nothing)."""
    invalid_action: Rate
    """Proposed tool calls the loop refused (unknown, invalid, not allowed, forbidden)."""
    repeated_action: Rate
    """Proposed tool calls answered `repeated`."""
    escalation_precision: Rate
    """Of the trials that stopped `needs_human`, those whose case expected it."""
    escalation_recall: Rate
    """Of the trials whose case expected `needs_human`, those that stopped so."""
    replay_success: Rate
    """Trials whose replay from their own trace took the same path."""
    tokens: Spread
    cost_usd: Spread
    tool_calls: Spread
    latency_s: Spread

    @classmethod
    def of(cls, trials: Sequence[CaseResult]) -> Rates:
        """The measures of these trials (skipped ones are not trials and are left out)."""
        runs = [trial for trial in trials if trial.status != "skipped"]
        proposed = sum(run.proposed for run in runs)
        escalated = [run for run in runs if run.stop_reason is StopReason.NEEDS_HUMAN]
        expected_escalation = [run for run in runs if run.case.expected.stop_reason is StopReason.NEEDS_HUMAN]
        replayed = [run for run in runs if run.replay_identical is not None]
        return cls(
            trials=len(runs),
            passed=Rate(count=sum(1 for run in runs if run.passed), total=len(runs)),
            completion=Rate(
                count=sum(1 for run in runs if run.stop_reason is StopReason.COMPLETED), total=len(runs)
            ),
            correct_stop=Rate(count=sum(1 for run in runs if _stopped_right(run)), total=len(runs)),
            invalid_action=Rate(count=sum(run.refused for run in runs), total=proposed),
            repeated_action=Rate(count=sum(run.repeated for run in runs), total=proposed),
            escalation_precision=Rate(
                count=sum(1 for run in escalated if run.case.expected.stop_reason is StopReason.NEEDS_HUMAN),
                total=len(escalated),
            ),
            escalation_recall=Rate(
                count=sum(1 for run in expected_escalation if run.stop_reason is StopReason.NEEDS_HUMAN),
                total=len(expected_escalation),
            ),
            replay_success=Rate(
                count=sum(1 for run in replayed if run.replay_identical), total=len(replayed)
            ),
            tokens=Spread.of([run.tokens for run in runs]),
            cost_usd=Spread.of([run.cost_usd for run in runs]),
            tool_calls=Spread.of([run.tool_calls for run in runs]),
            latency_s=Spread.of([run.duration_s for run in runs]),
        )

    def rows(self) -> list[tuple[str, str]]:
        """The measures as (label, formatted value) rows, in reading order."""
        return [
            ("trials", str(self.trials)),
            ("pass rate", str(self.passed)),
            ("completion rate", str(self.completion)),
            ("correct stop reason", str(self.correct_stop)),
            ("invalid-action rate", str(self.invalid_action)),
            ("repeated-action rate", str(self.repeated_action)),
            ("escalation precision", str(self.escalation_precision)),
            ("escalation recall", str(self.escalation_recall)),
            ("tokens per trial", _mean(self.tokens, "{:,.0f}")),
            ("cost per trial", _mean(self.cost_usd, "${:.4f}") + f", total ${self.cost_usd.total:.4f}"),
            ("tool calls per trial", _mean(self.tool_calls, "{:.1f}")),
            ("latency", _latency(self.latency_s)),
            ("replay success", str(self.replay_success)),
        ]

    def to_dict(self) -> dict[str, Any]:
        """The measures as a JSON object."""
        return {
            "trials": self.trials,
            **{
                name: getattr(self, name).to_dict()
                for name in (
                    "passed",
                    "completion",
                    "correct_stop",
                    "invalid_action",
                    "repeated_action",
                    "escalation_precision",
                    "escalation_recall",
                    "replay_success",
                    "tokens",
                    "cost_usd",
                    "tool_calls",
                    "latency_s",
                )
            },
        }


def _stopped_right(run: CaseResult) -> bool:
    return run.raised is None and run.stop_reason is run.case.expected.stop_reason


def _mean(spread: Spread, style: str) -> str:
    if spread.mean is None:
        return "n/a"
    interval = spread.interval
    shown = style.format(spread.mean)
    if interval is None:
        return shown
    low, high = (style.format(max(0.0, bound)) for bound in interval)
    return f"{shown} (95% CI {low}-{high})"


def _latency(spread: Spread) -> str:
    p50, p95 = spread.percentile(50), spread.percentile(95)
    if p50 is None or p95 is None:
        return "n/a"
    return f"p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms"


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CaseTrials:
    """The trials of one live case."""

    case: Case
    trials: tuple[CaseResult, ...]
    """The trials that ran, in the order they were numbered."""
    planned: int
    """Trials asked for; fewer ran when the cost ceiling was reached."""
    min_pass_rate: float = 1.0
    """The share of trials that must pass for the case to pass."""

    @property
    def rates(self) -> Rates:
        """The case's measures."""
        return Rates.of(self.trials)

    @property
    def status(self) -> Status:
        """`passed` when the share of passed trials reaches `min_pass_rate`; `skipped` when no
        trial ran (the cost ceiling came first)."""
        if not self.trials:
            return "skipped"
        passed = sum(1 for trial in self.trials if trial.passed)
        return "passed" if passed >= math.ceil(self.min_pass_rate * len(self.trials) - 1e-9) else "failed"

    @property
    def passed(self) -> bool:
        """The case passed."""
        return self.status == "passed"

    @property
    def flaky(self) -> bool:
        """Its trials disagree: some passed and some did not, or they stopped differently."""
        outcomes = {(trial.passed, trial.stop_reason) for trial in self.trials}
        return len(outcomes) > 1

    @property
    def failures(self) -> tuple[str, ...]:
        """Why the case did not pass: the pass rate, then each distinct trial failure."""
        if not self.trials:
            return ("no trial ran: the cost ceiling was reached first",)
        passed = sum(1 for trial in self.trials if trial.passed)
        if self.passed:
            return ()
        head = (
            f"{passed}/{len(self.trials)} trials passed, below the minimum pass rate {self.min_pass_rate:.0%}"
        )
        seen = dict.fromkeys(failure for trial in self.trials for failure in trial.failures)
        return (head, *seen)

    def to_dict(self) -> dict[str, Any]:
        """The case's trials as a JSON object: status, flakiness, rates and each trial."""
        return {
            "case_id": self.case.case_id,
            "source": None if self.case.source is None else str(self.case.source),
            "status": self.status,
            "flaky": self.flaky,
            "planned": self.planned,
            "min_pass_rate": self.min_pass_rate,
            "expected_stop_reason": str(self.case.expected.stop_reason),
            "failures": list(self.failures),
            "rates": self.rates.to_dict(),
            "trials": [trial.to_dict() for trial in self.trials],
        }


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LiveRun:
    """Every live case's trials, and how the run was bounded."""

    cases: tuple[CaseTrials, ...]
    model: str | None
    concurrency: int
    max_cost_usd: float | None
    seed: int | None
    not_started: int
    """Trials not started because the cost ceiling was reached."""

    @property
    def rates(self) -> Rates:
        """The measures over every trial of every live case."""
        return Rates.of([trial for case in self.cases for trial in case.trials])

    @property
    def spent_usd(self) -> float:
        """What the trials cost."""
        return math.fsum(trial.cost_usd for case in self.cases for trial in case.trials)

    @property
    def note(self) -> str:
        """One line on the cost ceiling: reached (and how many trials it left out) or not."""
        if self.max_cost_usd is None:
            return f"live trials cost ${self.spent_usd:.4f} (no cost ceiling)"
        if self.not_started:
            return (
                f"cost ceiling ${self.max_cost_usd:.4f} reached: spent ${self.spent_usd:.4f}, "
                f"{self.not_started} trial(s) not started"
            )
        return f"live trials cost ${self.spent_usd:.4f} of the ${self.max_cost_usd:.4f} ceiling"

    def to_dict(self) -> dict[str, Any]:
        """The live run as a JSON object."""
        return {
            "model": self.model,
            "concurrency": self.concurrency,
            "max_cost_usd": self.max_cost_usd,
            "seed": self.seed,
            "spent_usd": self.spent_usd,
            "not_started": self.not_started,
            "ceiling_reached": self.not_started > 0,
            "note": self.note,
            "rates": self.rates.to_dict(),
            "cases": [case.to_dict() for case in self.cases],
        }


async def run_trials(
    cases: Iterable[Case],
    client: Model,
    *,
    model: str | None = None,
    trials: int = DEFAULT_TRIALS,
    concurrency: int = 4,
    max_cost_usd: float | None = None,
    seed: int | None = None,
    min_pass_rate: float = 1.0,
    app: AgentLoop[Any] | None = None,
) -> LiveRun:
    """Run each live case `trials` times on `client` (cases with model turns are left out).

    Args:
        cases: the cases; only live ones (no model turns, no saved state) run.
        client: the live model, an `AsyncAnthropic` (tools are the fixtures' mocks).
        model: the model's name (default: each case's `model_name`).
        trials: runs per case.
        concurrency: trials running at once.
        max_cost_usd: the eval's cost ceiling: no trial starts once the trials that ended
            cost this much.
        seed: shuffles the order trials start in, reproducibly.
        min_pass_rate: the share of a case's trials that must pass for it to pass.
        app: run the trials through the application's loop (`run_case`), on `client`.

    Raises:
        ValueError: `trials` or `concurrency` below 1, `max_cost_usd` negative or
            `min_pass_rate` outside 0..1.
        SetupError: the first trial that found the model's setup wrong (no API key, a refused
            key, no such model); the other trials are cancelled.
    """
    if trials < 1 or concurrency < 1:
        raise ValueError(f"trials and concurrency must be at least 1, got {trials} and {concurrency}")
    if max_cost_usd is not None and not max_cost_usd >= 0:
        raise ValueError(f"max_cost_usd must be 0 or more, got {max_cost_usd}")
    if not 0.0 <= min_pass_rate <= 1.0:
        raise ValueError(f"min_pass_rate must be between 0 and 1, got {min_pass_rate}")
    live = [case for case in cases if case.live]
    order = [(trial, index) for trial in range(trials) for index in range(len(live))]
    if seed is not None:
        random.Random(seed).shuffle(order)
    results: list[dict[int, CaseResult]] = [{} for _ in live]
    slots = anyio.Semaphore(concurrency)
    spent: list[float] = [0.0]

    async def one(trial: int, index: int) -> None:
        try:
            case = live[index]
            task_id = f"{case.case_id}.trial-{trial + 1}"
            result = await run_case(case, client=client, model=model, task_id=task_id, app=app)
            results[index][trial] = result
            spent[0] += result.cost_usd
        finally:
            slots.release()

    started = 0
    try:
        async with anyio.create_task_group() as group:
            for trial, index in order:
                await slots.acquire()  # a slot first: the trials that ended so far are paid for
                if max_cost_usd is not None and spent[0] >= max_cost_usd:
                    slots.release()
                    break
                group.start_soon(one, trial, index)
                started += 1
    except* SetupError as failed:  # the first one stops every trial: none can pass until it is fixed
        raise failed.exceptions[0] from None
    return LiveRun(
        cases=tuple(
            CaseTrials(
                case=case,
                trials=tuple(results[index][trial] for trial in sorted(results[index])),
                planned=trials,
                min_pass_rate=min_pass_rate,
            )
            for index, case in enumerate(live)
        ),
        model=model,
        concurrency=concurrency,
        max_cost_usd=max_cost_usd,
        seed=seed,
        not_started=len(order) - started,
    )
