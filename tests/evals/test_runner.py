"""The eval runner: cases run on the scripted model and mocked tools; expectations checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import anyio.to_thread
import pytest

from boundloop import StopReason
from boundloop.evals import CaseResult, EvalReport, build_loop, load_cases, parse_case, run_case, run_cases

JSON = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]


def case(**fields: Any) -> JSON:
    """A case that reads one order and answers, with fields replaced."""
    fixture: JSON = {
        "case_id": "read_then_answer",
        "goal": "Was order O-1 late?",
        "model": [
            {"tool_calls": [{"name": "orders.read", "input": {"order_id": "O-1"}}]},
            {"text": "O-1 arrived two days late.", "usage": {"input_tokens": 40, "output_tokens": 9}},
        ],
        "mocked_tools": {"orders.read": [{"status": "ok", "output": {"order_id": "O-1", "late_days": 2}}]},
        "expected": {"stop_reason": "completed"},
    }
    fixture.update(fields)
    return fixture


async def run(fixture: JSON) -> CaseResult:
    """Parse and run one fixture."""
    return await run_case(parse_case(fixture))


async def test_a_case_that_holds_passes_with_its_figures() -> None:
    """Stop reason, tools run (fixture names), steps, tokens, cost and an identical replay."""
    result = await run(
        case(
            expected={
                "stop_reason": "completed",
                "max_tool_calls": 1,
                "max_steps": 2,
                "forbidden_tools": ["refunds.issue"],
                "requires_trace_events": ["proposal", "validation", "tool_started", "tool_result", "stop"],
                "tool_sequence": ["orders.read"],
                "answer_contains": ["two days", "late"],
            }
        )
    )
    assert result.status == "passed", result.failures
    assert result.passed
    assert result.failures == ()
    assert result.first_failure == ""
    assert result.stop_reason is StopReason.COMPLETED
    assert result.answer == "O-1 arrived two days late."
    assert (result.steps, result.tool_calls, result.tokens) == (2, 1, 49)
    assert result.cost_usd > 0
    assert result.tools_run == ("orders.read",)
    assert result.replay_identical is True
    assert result.replay_detail == "identical"
    assert (result.proposed, result.refused, result.repeated) == (1, 0, 0)
    result.check()


@pytest.mark.parametrize(
    ("expected", "failure"),
    [
        pytest.param(
            {"stop_reason": "needs_human"}, "stop_reason: expected needs_human, got completed", id="stop"
        ),
        pytest.param(
            {"stop_reason": "completed", "max_tool_calls": 0},
            "max_tool_calls: 1 tool calls, at most 0",
            id="tool-calls",
        ),
        pytest.param(
            {"stop_reason": "completed", "max_steps": 1}, "max_steps: 2 steps, at most 1", id="steps"
        ),
        pytest.param(
            {"stop_reason": "completed", "forbidden_tools": ["orders.read"]},
            "forbidden_tools: orders.read ran",
            id="forbidden",
        ),
        pytest.param(
            {"stop_reason": "completed", "requires_trace_events": ["stop", "error", "resumed"]},
            "requires_trace_events: the trace has no error, resumed event",
            id="trace-events",
        ),
        pytest.param(
            {"stop_reason": "completed", "tool_sequence": ["orders.read", "orders.read"]},
            "tool_sequence: expected [orders.read, orders.read], got [orders.read]",
            id="sequence",
        ),
        pytest.param(
            {"stop_reason": "completed", "answer_contains": "on time"},
            "answer_contains: the answer does not contain 'on time'",
            id="answer",
        ),
    ],
)
async def test_each_expectation_fails_when_the_run_breaks_it(expected: JSON, failure: str) -> None:
    """A broken expectation fails the case, and the report names it first."""
    result = await run(case(expected=expected))
    assert result.status == "failed"
    assert result.first_failure == failure
    with pytest.raises(AssertionError, match="eval case read_then_answer failed"):
        result.check()


async def test_calls_of_one_batch_take_results_in_block_order() -> None:
    """Three concurrent calls of one tool get the first, second and third result, by block."""
    result = await run(
        case(
            model=[
                {"tool_calls": [{"name": "lookup", "input": {"n": n}} for n in range(3)]},
                {"text": "done"},
            ],
            mocked_tools={"lookup": [{"status": "ok", "output": f"result {n}"} for n in range(3)]},
        )
    )
    assert result.passed, result.failures
    assert answered(result) == [
        ("toolu_0_0", "result 0"),
        ("toolu_0_1", "result 1"),
        ("toolu_0_2", "result 2"),
    ]


def answered(result: CaseResult) -> list[tuple[str, str]]:
    """(tool_use_id, content) of every tool result of a case's run, from its trace."""
    events = [event.to_dict() for event in result.trace if event.kind == "tool_result"]
    return [(data["tool_use_id"], data["content"]) for data in events]


async def test_error_retry_and_timeout_results_reach_the_model_as_such() -> None:
    """An error, a retried retryable error and a timeout: outcomes as a live tool's would be."""
    result = await run(
        case(
            model=[
                {"tool_calls": [{"name": "flaky"}, {"name": "broken"}, {"name": "slow"}]},
                {"text": "giving up"},
            ],
            mocked_tools={
                "flaky": [
                    {"status": "retryable_error", "reason": "busy"},
                    {"status": "ok", "output": "fine"},
                ],
                "broken": [{"status": "error", "error": "upstream 500"}],
                "slow": [{"status": "timeout"}],
            },
            budget={"max_steps": 4, "max_tool_retries": 1, "max_consecutive_tool_errors": 3},
        )
    )
    assert result.passed, result.failures
    events = [event.to_dict() for event in result.trace if event.kind == "tool_result"]
    outcomes = {data["tool"]: (data["outcome"], data["content"]) for data in events}
    assert outcomes["flaky"] == ("ok", "fine")
    assert outcomes["broken"] == ("error", "MockedToolError: upstream 500")
    assert outcomes["slow"][0] == "timeout"
    assert result.tool_calls == 4  # the retry is a call


async def test_a_call_beyond_the_mocked_results_is_a_fixture_error() -> None:
    """The fixture is at fault, and says which tool ran out."""
    result = await run(
        case(
            model=[
                {
                    "tool_calls": [
                        {"name": "orders.read", "input": {"n": 1}},
                        {"name": "orders.read", "input": {"n": 2}},
                    ]
                },
                {"text": "x"},
            ]
        )
    )
    assert result.status == "error"
    assert result.failures == (
        "mocked_tools: 'orders.read' was called 2 times; the fixture has 1 result for it",
    )


async def test_a_script_too_short_is_a_fixture_error() -> None:
    """The run asking for one more model turn than scripted is the fixture's fault."""
    result = await run(case(model=[{"tool_calls": [{"name": "orders.read"}]}]))
    assert result.status == "error"
    assert result.failures == ("model: the run asked for turn 2; the script has 1",)
    assert result.replay_identical is None


async def test_an_unknown_stop_reason_fails_the_case_with_the_exception() -> None:
    """UnhandledStop is not swallowed: the case fails and says so."""
    result = await run(case(model=[{"text": "?", "stop_reason": "brand_new_reason"}]))
    assert result.status == "failed"
    assert result.first_failure.startswith("the run raised UnhandledStop")


async def test_resume_decisions_approve_and_deny_at_needs_human() -> None:
    """A case stops for approval, the fixture's human approves one call and denies another."""
    fixture = case(
        model=[
            {
                "tool_calls": [
                    {"name": "refunds.issue", "input": {"order_id": "O-1"}, "id": "toolu_refund"},
                    {"name": "refunds.issue", "input": {"order_id": "O-2"}, "id": "toolu_other"},
                ]
            },
            {"text": "Refunded O-1; O-2 was refused."},
        ],
        tools=[
            {
                "name": "refunds.issue",
                "description": "Refund an order.",
                "side_effect": True,
                "requires_approval": True,
            }
        ],
        mocked_tools={"refunds.issue": [{"status": "ok", "output": "refunded"}]},
        resume=[{"approvals": {"toolu_refund": True, "toolu_other": "not eligible"}}],
        expected={
            "stop_reason": "completed",
            "tool_sequence": ["refunds.issue"],
            "requires_trace_events": ["resume"],  # the earlier name of `resumed`, still read
        },
    )
    result = await run(fixture)
    assert result.passed, result.failures
    assert (result.proposed, result.refused) == (2, 0)  # a human's denial is not an invalid action


@pytest.mark.parametrize(
    ("resume", "problem"),
    [
        pytest.param(
            [{"approvals": {}}, {"approvals": {}}], "resume/1: the run stopped completed", id="extra"
        ),
        pytest.param([{"approvals": {"toolu_nope": True}}], "resume/0: ", id="wrong-id"),
    ],
)
async def test_a_decision_the_run_cannot_take_is_a_fixture_error(resume: list[JSON], problem: str) -> None:
    """A decision for no waiting call, or at a stop that waits for nobody, is the fixture's fault."""
    fixture = case(
        model=[{"tool_calls": [{"name": "refunds.issue", "id": "toolu_refund"}]}, {"text": "done"}],
        mocked_tools={"refunds.issue": [{"status": "ok", "output": "refunded"}]},
        policy={"requires_approval": ["refunds.issue"]},
        resume=resume if resume[0]["approvals"] else [{"approvals": {"toolu_refund": True}}, *resume[1:]],
    )
    result = await run(fixture)
    assert result.status == "error"
    assert result.first_failure.startswith(problem), result.failures


async def test_a_saved_state_replays_through_the_case_configuration(tmp_path: Path) -> None:
    """A `state` case passes when the replay is identical, and fails where a new policy parts."""
    fixture = case()
    loop = build_loop(parse_case(fixture))
    recorded = await loop.run("Was order O-1 late?", task_id="recorded")
    (tmp_path / "run.state.json").write_text(recorded.state.to_json())
    replayed = case(state="run.state.json", tools=[{"name": "orders.read"}])
    del replayed["model"], replayed["mocked_tools"]
    (tmp_path / "case.json").write_text(json.dumps(replayed))
    [same] = await anyio.to_thread.run_sync(load_cases, tmp_path)
    result = await run_case(same)
    assert result.passed, result.failures
    assert result.replay_identical is True
    stricter = {**replayed, "policy": {"forbidden": ["orders.read"]}}
    source = tmp_path / "case.json"
    changed = await run_case(await anyio.to_thread.run_sync(lambda: parse_case(stricter, source=source)))
    assert changed.status == "failed"
    assert changed.failures[0].startswith("stop_reason: expected completed, got policy_blocked")
    assert changed.failures[-1].startswith("replay: diverged at step 0")
    accepted = {**stricter, "expected": {"stop_reason": "policy_blocked", "replay": False}}
    accepting = await anyio.to_thread.run_sync(lambda: parse_case(accepted, source=source))
    assert (await run_case(accepting)).passed


async def test_run_cases_keeps_the_cases_order_and_refuses_no_concurrency() -> None:
    """Results come back in the order the cases were given."""
    cases = [parse_case(case(case_id=f"c{n}")) for n in range(5)]
    results = await run_cases(cases, concurrency=2)
    assert [r.case.case_id for r in results] == ["c0", "c1", "c2", "c3", "c4"]
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        await run_cases(cases, concurrency=0)


async def test_the_report_figures_count_what_the_runs_did() -> None:
    """Completion, correct stop, invalid and repeated actions, escalation precision, replay."""
    repeated = case(
        case_id="repeats",
        model=[
            {"tool_calls": [{"name": "orders.read", "input": {"id": 1}}]},
            {"tool_calls": [{"name": "orders.read", "input": {"id": 1}}, {"name": "made.up"}]},
            {"text": "done"},
        ],
        budget={"max_steps": 5, "max_consecutive_tool_errors": 5},
    )
    escalated_wrongly = case(
        case_id="breaker",
        model=[{"tool_calls": [{"name": "orders.read"}, {"name": "orders.read"}]}],
        mocked_tools={"orders.read": [{"status": "error", "error": "x"}, {"status": "error", "error": "y"}]},
        expected={"stop_reason": "completed"},
    )
    escalated_rightly = {
        **escalated_wrongly,
        "case_id": "breaker_expected",
        "expected": {"stop_reason": "needs_human"},
    }
    broken = case(case_id="broken", model=[])
    results = await run_cases(
        [parse_case(f) for f in (case(), repeated, escalated_wrongly, escalated_rightly, broken)]
    )
    report = EvalReport(results)
    figures = report.figures
    assert [r.status for r in results] == ["passed", "passed", "failed", "passed", "error"]
    assert (figures.cases, figures.passed, figures.failed, figures.errors) == (5, 3, 1, 1)
    assert figures.completion_rate == 2 / 4
    assert figures.correct_stop_rate == 3 / 4
    assert figures.invalid_action_rate == 1 / 8  # made.up, of 1 + 3 + 2 + 2 proposed calls
    assert figures.repeated_action_rate == 1 / 8
    assert figures.escalation_precision == 1 / 2
    assert figures.replay_success_rate == 1.0
    assert figures.tool_calls == sum(r.tool_calls for r in results[:4])
    assert not report.passed
    assert report.has_errors
    table = report.table()
    assert "FAIL  breaker" in table
    assert "stop_reason: expected completed, got needs_human" in table
    assert "ERROR broken" in table
    assert "escalation precision  50%" in table
    document = json.loads(json.dumps(report.to_dict()))
    assert document["figures"]["cases"] == 5
    assert document["cases"][2]["status"] == "failed"
    suite = ElementTree.fromstring(report.junit().split("\n", 1)[1])
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("5", "1", "1")
    failure = suite.find("testcase[@name='breaker']/failure")
    assert failure is not None
    assert failure.get("message", "").startswith("stop_reason: expected completed")
    assert suite.find("testcase[@name='broken']/error") is not None


async def test_ids_the_trace_redacts_still_take_results_in_block_order() -> None:
    """Call ids that look like secrets are redacted in the trace; each call still gets its own result."""
    ids = ["ghp_aaaaaaaaaaaaaaaaaaaaaaaa1", "ghp_aaaaaaaaaaaaaaaaaaaaaaaa2"]
    result = await run(
        case(
            model=[
                {"tool_calls": [{"name": "lookup", "input": {"n": n}, "id": ids[n]} for n in range(2)]},
                {"text": "done"},
            ],
            mocked_tools={
                "lookup": [{"status": "ok", "output": "first"}, {"status": "ok", "output": "second"}]
            },
            # The trace redacted the ids the model sent: it cannot replay this run faithfully.
            expected={"stop_reason": "completed", "replay": False},
        )
    )
    assert result.passed, result.failures
    assert answered(result) == [("[REDACTED]", "first"), ("[REDACTED]", "second")]  # by block, not by start
    assert result.replay_identical is False


async def test_failure_messages_name_tools_as_the_fixture_writes_them() -> None:
    """The loop's stop detail shows `refunds.issue`, not the API's `refunds__issue`."""
    result = await run(
        case(
            model=[{"tool_calls": [{"name": "refunds.issue"}]}],
            policy={"forbidden": ["refunds.issue"]},
            expected={"stop_reason": "completed"},
        )
    )
    assert result.first_failure == (
        "stop_reason: expected completed, got policy_blocked (forbidden tool proposed: refunds.issue)"
    )
    assert result.refused == 1


async def test_a_run_that_raised_never_counts_as_a_correct_stop() -> None:
    """An UnhandledStop run records `failed`, but it raised: the figures do not count it as right."""
    result = await run(
        case(model=[{"text": "?", "stop_reason": "brand_new_reason"}], expected={"stop_reason": "failed"})
    )
    assert result.status == "failed"
    assert result.raised is not None
    assert result.raised.startswith("UnhandledStop")
    assert EvalReport([result]).figures.correct_stop_rate == 0.0
