"""Live cases on a simulated model behind the real `AsyncAnthropic`: trials, rates, ceiling, concurrency."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import anyio
import pytest

from boundloop.evals import (
    Case,
    EvalReport,
    LiveRun,
    Rate,
    Spread,
    load_cases,
    parse_case,
    render_html,
    run_case,
    run_cases,
    run_trials,
    wilson,
)
from tests.evals.test_html import Page
from tests.sim_model import SimulatedModel, shipping_policy

EVALS = Path(__file__).resolve().parents[2] / "examples" / "evals"
SEED_CASE = EVALS / "shipping_lookup_repeated_failure.json"
PER_TRIAL_USD = 2 * (100 * 3.0 + 20 * 15.0) / 1e6
"""The seed's case read twice on claude-sonnet-4-6 ($3 / $15 per Mtok): 2 requests of 100 in, 20 out."""


(SEED,) = load_cases(SEED_CASE)  # read here: a test on the event loop must not block on a file


def seed_case() -> Case:
    return SEED


@pytest.mark.parametrize(
    ("count", "total", "low", "high"),
    [
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (8, 10, 0.4902, 0.9433),
        (4, 10, 0.1682, 0.6873),
        (1, 5, 0.0362, 0.6245),
    ],
)
def test_wilson_matches_the_published_intervals(count: int, total: int, low: float, high: float) -> None:
    """The Wilson 95 % score interval, against values computed by hand from the formula's tables."""
    got_low, got_high = wilson(count, total)
    assert got_low == pytest.approx(low, abs=5e-5)
    assert got_high == pytest.approx(high, abs=5e-5)


def test_wilson_refuses_what_is_not_a_rate() -> None:
    with pytest.raises(ValueError, match="0 <= count <= total"):
        wilson(3, 2)
    with pytest.raises(ValueError, match="total >= 1"):
        wilson(0, 0)
    assert Rate(count=0, total=0).interval is None
    assert str(Rate(count=0, total=0)) == "n/a"


def test_a_spread_gives_the_mean_its_t_interval_and_percentiles() -> None:
    """Mean 3 of 1..5: sd 1.5811, t(4) = 2.776, half-width 1.963; p50 3, p95 4.8 (linear)."""
    spread = Spread.of([5, 1, 4, 2, 3])
    assert spread.mean == 3
    assert spread.interval is not None
    assert list(spread.interval) == [pytest.approx(1.0371, abs=1e-3), pytest.approx(4.9629, abs=1e-3)]
    assert spread.percentile(50) == 3
    assert spread.percentile(95) == pytest.approx(4.8)
    assert Spread.of([7.0]).interval is None
    assert Spread.of([]).mean is None


def test_the_seed_fixture_verbatim_is_a_live_case() -> None:
    """The shipped seed fixture has no model turns: it is live, and its tool is declared."""
    case = seed_case()
    assert case.live
    assert case.turns == ()
    assert [tool.name for tool in case.tools] == ["shipping__read_delivery_status"]


async def test_without_a_live_model_a_live_case_is_skipped_and_the_report_passes() -> None:
    """run_case without a client skips it, naming why; the report still passes, and counts it."""
    scripted = parse_case(
        {
            "case_id": "scripted",
            "goal": "Say hi.",
            "model": [{"text": "hi"}],
            "expected": {"stop_reason": "completed"},
        }
    )
    results = await run_cases([seed_case(), scripted])
    assert [r.status for r in results] == ["skipped", "passed"]
    assert results[0].failures == ("needs a live model (--live)",)
    report = EvalReport(results)
    assert report.passed
    assert report.skipped_live == 1
    assert report.figures.skipped == 1
    assert report.figures.correct_stop_rate == 1.0  # the skipped case is not a run
    assert "SKIP  shipping_lookup_repeated_failure  -" in report.table()


async def test_the_seed_fixture_runs_live_and_stops_needs_human_every_trial() -> None:
    """The seed's case on a model that reads the status, and again after the timeout: the breaker
    hands every trial to a human; every rate is 5/5 with its Wilson interval; not flaky."""
    sim = SimulatedModel(shipping_policy(), seed=1)
    live = await run_trials([seed_case()], sim.client(), model="claude-sonnet-4-6")
    (case,) = live.cases
    assert [trial.stop_reason for trial in case.trials] == ["needs_human"] * 5
    assert case.passed
    assert not case.flaky
    rates = case.rates
    assert (rates.correct_stop.count, rates.correct_stop.total) == (5, 5)
    assert rates.correct_stop.interval is not None
    assert list(rates.correct_stop.interval) == [pytest.approx(0.5655, abs=5e-5), 1.0]
    assert (rates.escalation_precision.count, rates.escalation_precision.total) == (5, 5)
    assert (rates.escalation_recall.count, rates.escalation_recall.total) == (5, 5)
    assert (rates.invalid_action.count, rates.invalid_action.total) == (0, 10)
    assert (rates.replay_success.count, rates.replay_success.total) == (5, 5)
    assert rates.tool_calls.values == (2.0,) * 5
    assert rates.cost_usd.total == pytest.approx(5 * PER_TRIAL_USD)
    assert [trial.tools_run for trial in case.trials] == [("shipping.read_delivery_status",) * 2] * 5
    # Every request went to the real SDK: the model sees the mocked tool, and 2 requests per trial.
    assert len(sim.requests) == 10
    assert {tool["name"] for tool in sim.requests[0]["tools"]} >= {"shipping__read_delivery_status"}


async def test_a_mixed_policy_gives_the_same_rates_at_any_concurrency() -> None:
    """A seeded policy that sometimes guesses, invents a tool or gives up: the trials' outcomes
    (and so every rate) are the same run one at a time or four at a time; the case is flaky."""

    async def outcomes(concurrency: int) -> tuple[Counter[tuple[str, tuple[str, ...]]], str]:
        sim = SimulatedModel(shipping_policy(guess=1, invent=1, give_up=1), seed=3)
        live = await run_trials([seed_case()], sim.client(), trials=10, concurrency=concurrency)
        (case,) = live.cases
        paths = Counter((str(trial.stop_reason), trial.tools_run) for trial in case.trials)
        return paths, "\n".join(f"{label}: {value}" for label, value in case.rates.rows()[1:-2])

    one_by_one, rates = await outcomes(1)
    assert await outcomes(4) == (one_by_one, rates)
    assert "pass rate: 40% (4/10, 95% CI 17%-69%)" in rates
    assert "completion rate: 60% (6/10, 95% CI 31%-83%)" in rates
    assert "invalid-action rate: 44% (4/9, 95% CI 19%-73%)" in rates
    assert "escalation precision: 100% (4/4, 95% CI 51%-100%)" in rates
    assert "escalation recall: 40% (4/10, 95% CI 17%-69%)" in rates


async def test_trials_that_disagree_are_flaky_and_fail_below_the_minimum_pass_rate() -> None:
    sim = SimulatedModel(shipping_policy(guess=1), seed=5)
    strict = await run_trials([seed_case()], sim.client(), trials=8)
    (case,) = strict.cases
    passed = sum(1 for trial in case.trials if trial.passed)
    assert 0 < passed < 8
    assert case.flaky
    assert case.status == "failed"
    assert case.failures[0] == f"{passed}/8 trials passed, below the minimum pass rate 100%"
    lenient = await run_trials(
        [seed_case()], SimulatedModel(shipping_policy(guess=1), seed=5).client(), trials=8, min_pass_rate=0.25
    )
    assert lenient.cases[0].status == "passed"


async def test_the_cost_ceiling_stops_starting_trials_and_says_so() -> None:
    """One at a time at $0.0012 a trial under a $0.003 ceiling: trials 1-3 start (the third at
    $0.0024 spent), then $0.0036 is past it: 2 of 5 are not started."""
    sim = SimulatedModel(shipping_policy())
    live = await run_trials([seed_case()], sim.client(), concurrency=1, max_cost_usd=0.003)
    (case,) = live.cases
    assert len(case.trials) == 3
    assert live.not_started == 2
    assert live.spent_usd == pytest.approx(3 * PER_TRIAL_USD)
    assert live.note == "cost ceiling $0.0030 reached: spent $0.0036, 2 trial(s) not started"
    assert case.status == "passed"  # 3/3 of the trials that ran
    report = EvalReport([], live=live)
    assert "3/3 trials passed (needs_human x3), 2 not started" in report.table()
    assert report.table().endswith(live.note)
    none = await run_trials([seed_case()], sim.client(), max_cost_usd=0.0)
    assert none.not_started == 5
    assert none.cases[0].status == "skipped"
    assert EvalReport([], live=none).skipped_live == 1


async def test_no_more_trials_run_at_once_than_the_concurrency() -> None:
    """Every request waits at a gate; with 3 requests waiting and every task blocked no fourth
    arrives; opened, the 7 trials finish, never more than 3 in flight."""
    waiting = 0
    most = 0
    three = anyio.Event()
    opened = anyio.Event()

    async def gate() -> None:
        nonlocal waiting, most
        waiting += 1
        most = max(most, waiting)
        if waiting == 3:
            three.set()
        await opened.wait()
        waiting -= 1

    sim = SimulatedModel(shipping_policy(), gate=gate)
    results: list[LiveRun] = []

    async def run() -> None:
        results.append(await run_trials([seed_case()], sim.client(), trials=7, concurrency=3))

    with anyio.fail_after(30):  # a guard against a hang, not a measurement
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await three.wait()
            await anyio.wait_all_tasks_blocked()
            assert waiting == 3
            opened.set()
    assert most == 3
    assert len(results[0].cases[0].trials) == 7


async def test_a_call_past_the_mocks_on_a_live_model_is_a_failure_not_a_fixture_error() -> None:
    """The live model reads a third time where the fixture has two results (a case without the
    breaker): the trial fails, naming the mocks; the fixture is not at fault."""
    case = parse_case(
        {
            "case_id": "three_reads",
            "goal": "Investigate whether an order arrived late.",
            "budget": {"max_steps": 5, "max_consecutive_tool_errors": 5},
            "mocked_tools": {
                "shipping.read_delivery_status": [
                    {"status": "retryable_error", "reason": "upstream_timeout"},
                    {"status": "retryable_error", "reason": "upstream_timeout"},
                ]
            },
            "expected": {"stop_reason": "completed"},
        }
    )
    policy = {
        "start": shipping_policy()["start"],
        "*": shipping_policy()["start"],
        "start > shipping__read_delivery_status:error > shipping__read_delivery_status:error > "
        "shipping__read_delivery_status:error": shipping_policy()["*"],
    }
    result = await run_case(case, client=SimulatedModel(policy).client())
    assert result.status == "failed"
    assert result.failures[0] == (
        "mocked_tools: 'shipping.read_delivery_status' was called 3 times; the fixture has 2 results for it"
    )


async def test_the_html_report_shows_rates_and_a_trial_strip_escaped() -> None:
    """A live case's section: its rates with intervals and one square per trial (and per trial
    not started); a hostile description is escaped."""
    case = dataclasses.replace(SEED, description="<script>alert(1)</script>")
    live = await run_trials(
        [case], SimulatedModel(shipping_policy(guess=1), seed=2).client(), concurrency=1, max_cost_usd=0.003
    )
    page = render_html(EvalReport([], live=live))
    parsed = Page(page)  # well formed: every element closed, in order
    assert "<script>alert(1)</script>" in "".join(parsed.text)  # the description, as text
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count('class="trial trial-') == 5
    assert page.count("trial-not-started") >= 1
    assert "95% CI" in page
    assert "cost ceiling $0.0030 reached" in page
