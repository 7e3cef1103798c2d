"""`export_case`: a real run, exported as a fixture, runs green as an eval case and takes the same path."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import pytest

from boundloop import AgentLoop, Budget, Observers, Policy, ScriptedClient, StopReason, ToolCall, tool
from boundloop.evals import CaseResult, build_loop, export_case, parse_case, run_case
from boundloop.evals._mocks import Mocks
from boundloop.state import LoopState
from tests.helpers import text, tool_use

JSON = dict[str, Any]
TASK = "prod run #7"
Decisions = Sequence[tuple[dict[str, bool | str] | None, str | None]]


def fixture(model: list[JSON], mocked: JSON, **fields: Any) -> JSON:
    """A fixture whose expectations are loose: the runs under test are exported, not judged."""
    return {
        "case_id": "live",
        "goal": "Check the order.",
        "model": model,
        "mocked_tools": mocked,
        "expected": {"stop_reason": "completed"},
        **fields,
    }


async def record(raw: JSON, decisions: Decisions = ()) -> LoopState:
    """Run a fixture as a live run, resumed with each decision in turn; its final state."""
    case = parse_case(raw)
    mocks = Mocks(case.mocked, case.names)
    loop = build_loop(case, mocks)
    result = await loop.run(case.goal, task_id=TASK, on_event=mocks.on_event)
    for approvals, reply in decisions:
        result = await loop.resume(TASK, approvals=approvals, reply=reply, on_event=mocks.on_event)
    assert not mocks.problems
    return result.state


async def rerun(state: LoopState) -> tuple[JSON, CaseResult]:
    """Export the run, read the case back and run it: it passes on the recorded path."""
    exported = export_case(state)
    assert json.loads(json.dumps(exported)) == exported
    result = await run_case(parse_case(exported))
    result.check()
    assert result.stop_reason is state.stop_reason
    assert list(result.tools_run) == [o.tool for o in state.observations if o.attempts > 0]
    return exported, result


async def test_a_completed_run_with_parallel_calls_of_one_tool_comes_back_as_is() -> None:
    """Parallel calls keep their results in block order, and each output its JSON or text form."""
    outputs: list[JSON] = [
        {"status": "ok", "output": {"carrier": "DHL", "late": True}},
        {"status": "ok", "output": "delivered on 3 May"},
        {"status": "ok", "output": '"quoted"'},
        {"status": "ok", "output": [{"type": "text", "text": "a block"}]},
    ]
    calls = [{"name": "lookup", "input": {"n": n}} for n in range(4)]
    raw = fixture([{"tool_calls": calls}, {"text": "Late: yes."}], {"lookup": outputs})
    state = await record(raw)
    exported, result = await rerun(state)
    assert exported["case_id"] == "prod_run__7"
    assert exported["goal"] == "Check the order."
    assert exported["model_name"] == "claude-sonnet-4-6"
    assert exported["mocked_tools"] == {"lookup": outputs}
    assert exported["tools"] == [
        {"name": "lookup", "description": "(mocked) lookup", "input_schema": {"type": "object"}}
    ]
    assert exported["budget"] == {
        "max_steps": 10,
        "max_consecutive_tool_errors": 2,
        "max_repeated_calls": 2,
        "max_tool_retries": 0,
        "max_corrections": 1,
        "retry_backoff_s": 0.1,
        "on_exhausted": "stop",
        "max_tool_output_chars": 100_000,
        "count_tokens": False,
    }
    assert exported["policy"] == {
        "max_continuations": 2,
        "on_forbidden": "stop",
        "on_max_tokens": "stop",
        "on_missing_evidence": "stop",
        "on_tool_error": "report",
    }
    assert "resume" not in exported
    assert exported["expected"] == {
        "stop_reason": "completed",
        "tool_sequence": ["lookup"] * 4,
        "max_tool_calls": 4,
        "max_steps": 2,
        "requires_trace_events": ["proposal", "validation", "tool_result", "stop"],
    }
    assert f"task {TASK}" in exported["description"]
    assert "system prompt is not recorded" in exported["description"]
    assert exported["model"][0]["content"][0]["id"] == "toolu_0_0"
    assert result.answer == "Late: yes."


async def test_a_retried_call_is_exported_as_a_retryable_error_before_its_result() -> None:
    """A retry takes the next result after the batch's first attempts, as the mocks hand them out."""
    mocked = {
        "fetch": [
            {"status": "retryable_error", "reason": "503"},
            {"status": "ok", "output": "b"},
            {"status": "ok", "output": "a"},
        ]
    }
    calls = [{"name": "fetch", "input": {"key": "a"}}, {"name": "fetch", "input": {"key": "b"}}]
    raw = fixture(
        [{"tool_calls": calls}, {"text": "done"}], mocked, budget={"max_steps": 4, "max_tool_retries": 1}
    )
    state = await record(raw)
    assert [o.attempts for o in state.observations] == [2, 1]
    exported, _ = await rerun(state)
    retry = {"status": "retryable_error", "reason": "exported retry"}
    assert exported["mocked_tools"] == {"fetch": [retry, *mocked["fetch"][1:]]}
    assert exported["budget"]["max_tool_retries"] == 1
    assert exported["expected"]["max_tool_calls"] == 3


DOWN: JSON = {"status": "error", "error": "MockedToolError: down"}
BUSY: JSON = {"status": "retryable_error", "reason": "busy"}


@pytest.mark.parametrize(
    ("results", "exported_results", "stop_reason"),
    [
        pytest.param([{"status": "error", "error": "down"}], [DOWN], "completed", id="reported-error"),
        pytest.param(
            [{"status": "error", "error": "down"}] * 2, [DOWN] * 2, "needs_human", id="circuit-breaker"
        ),
        pytest.param([BUSY], [BUSY], "completed", id="retries-spent"),
    ],
)
async def test_an_error_result_is_exported_with_the_text_the_model_saw(
    results: list[JSON], exported_results: list[JSON], stop_reason: str
) -> None:
    """An error comes back as an error, a retry refused as one; a breaker stop is final, with no resume."""
    turns: list[JSON] = [{"tool_calls": [{"name": "lookup", "input": {"n": n}}]} for n in range(len(results))]
    state = await record(fixture([*turns, {"text": "It failed."}], {"lookup": results}))
    assert state.stop_reason == stop_reason
    exported, _ = await rerun(state)
    assert exported["mocked_tools"] == {"lookup": exported_results}
    assert "resume" not in exported


async def test_a_tool_timeout_is_exported_with_a_short_tool_timeout() -> None:
    """A timed-out call is a mocked `timeout`, on a tool whose timeout ends it at once."""
    raw = fixture(
        [{"tool_calls": [{"name": "slow", "input": {}}]}, {"text": "Too slow."}],
        {"slow": [{"status": "timeout"}]},
        budget={"max_steps": 4, "tool_timeout_s": 0.05},
    )
    state = await record(raw)
    assert [o.outcome for o in state.observations] == ["timeout"]
    exported, _ = await rerun(state)
    assert exported["mocked_tools"] == {"slow": [{"status": "timeout"}]}
    assert exported["tools"][0]["timeout_s"] == 0.05


async def test_a_run_resumed_after_approvals_replies_and_denials_exports_the_decisions() -> None:
    """Each `needs_human` stop the run went on from is a decision; the loop adds its escalation tool."""
    model: list[JSON] = [
        {
            "tool_calls": [
                {"name": "refund", "input": {"amount": 1}},
                {"name": "refund", "input": {"amount": 2}},
                {"name": "lookup", "input": {}},
            ]
        },
        {
            "tool_calls": [
                {"name": "ask_human", "input": {"reason": "bigger?"}},
                {"name": "refund", "input": {"amount": 3}},
            ]
        },
        {"text": "Refunded 1."},
    ]
    raw = fixture(
        model,
        {
            "refund": [{"status": "ok", "output": {"refunded": 1}}],
            "lookup": [{"status": "ok", "output": "x"}],
        },
        tools=[{"name": "refund", "requires_approval": True}],
        policy={"escalation_tool": "ask_human", "forbidden": ["wipe"]},
    )
    decisions: Decisions = [
        ({"toolu_0_0": True, "toolu_0_1": "too much"}, None),
        ({"toolu_1_1": False}, "keep it small"),
    ]
    state = await record(raw, decisions)
    assert state.stop_reason is StopReason.COMPLETED
    assert [o.by_human for o in state.observations] == [False, True, False, False, True]
    exported, result = await rerun(state)
    assert exported["resume"] == [
        {"approvals": {"toolu_0_0": True, "toolu_0_1": "too much"}},
        {"approvals": {"toolu_1_1": False}, "reply": "keep it small"},
    ]
    assert [t["name"] for t in exported["tools"]] == ["refund", "lookup"]  # forbidden tools are not offered
    assert exported["tools"][0]["requires_approval"] is True
    assert exported["policy"] == {
        "escalation_tool": "ask_human",
        "forbidden": ["wipe"],
        "max_continuations": 2,
        "on_forbidden": "stop",
        "on_max_tokens": "stop",
        "on_missing_evidence": "stop",
        "on_tool_error": "report",
    }
    assert exported["expected"]["forbidden_tools"] == ["wipe"]
    assert exported["expected"]["requires_trace_events"][-1] == "resumed"
    assert result.tools_run == ("refund", "lookup")


async def test_a_run_still_waiting_for_a_human_exports_no_decision_for_its_last_stop() -> None:
    """The stop a run ended with is expected, not decided."""
    model: list[JSON] = [
        {"tool_calls": [{"name": "refund", "input": {"amount": 1}}]},
        {"tool_calls": [{"name": "refund", "input": {"amount": 2}}]},
    ]
    raw = fixture(
        model,
        {"refund": [{"status": "ok", "output": "ok"}]},
        tools=[{"name": "refund", "requires_approval": True}],
    )
    state = await record(raw, [({"toolu_0_0": True}, None)])
    assert state.stop_reason is StopReason.NEEDS_HUMAN
    exported, _ = await rerun(state)
    assert exported["resume"] == [{"approvals": {"toolu_0_0": True}}]
    assert exported["expected"]["stop_reason"] == "needs_human"


OK: JSON = {"status": "ok", "output": "v"}


def lookup(n: object) -> JSON:
    """A shorthand turn calling `lookup`."""
    return {"tool_calls": [{"name": "lookup", "input": {"n": n}}]}


@pytest.mark.parametrize(
    ("raw", "stop_reason"),
    [
        pytest.param(
            fixture([{"text": "par", "stop_reason": "max_tokens"}], {}), "truncated", id="truncated"
        ),
        pytest.param(fixture([{"text": "no", "stop_reason": "refusal"}], {}), "refused", id="refused"),
        pytest.param(
            fixture([lookup(1)], {"lookup": [OK]}, budget={"max_steps": 1}), "max_steps", id="steps"
        ),
        pytest.param(
            fixture(
                [lookup(1), {"text": "best"}],
                {"lookup": [OK]},
                budget={"max_steps": 1, "on_exhausted": "final_answer"},
            ),
            "max_steps",
            id="final-answer",
        ),
        pytest.param(
            fixture([lookup(1), lookup(2)], {"lookup": [OK]}, budget={"max_steps": 5, "max_tool_calls": 1}),
            "max_tool_calls",
            id="tool-calls",
        ),
        pytest.param(
            fixture([{"tool_calls": [{"name": "wipe"}]}], {}, policy={"forbidden": ["wipe"]}),
            "policy_blocked",
            id="blocked",
        ),
        pytest.param(
            fixture([{"text": "done"}], {"lookup": []}, policy={"required_evidence": ["lookup"]}),
            "evidence_missing",
            id="evidence",
        ),
        pytest.param(fixture([lookup(1)] * 4, {"lookup": [OK]}), "needs_human", id="repeated"),
        pytest.param(
            fixture([lookup(1), {"text": "x"}], {"lookup": []}, policy={"allowed": []}),
            "completed",
            id="allow-none",
        ),
        pytest.param(fixture([lookup("x"), {"text": "x"}], {}), "completed", id="unknown-tool"),
    ],
)
async def test_every_stop_a_script_can_reach_is_exported_on_its_path(raw: JSON, stop_reason: str) -> None:
    """Budgets, policy stops, refusals and denials come back with the same stop and tools."""
    state = await record(raw)
    assert state.stop_reason == stop_reason
    exported, _ = await rerun(state)
    assert exported["expected"]["stop_reason"] == stop_reason


@tool
async def order(order_id: str) -> dict[str, Any]:
    """Read an order."""
    return {"order_id": order_id, "status": "late"}


@tool
async def count(order_id: str) -> int:
    """Count the parcels (broken: returns text)."""
    return f"{order_id} has two"  # type: ignore[return-value]  # pyright: ignore[reportReturnType]


@tool
async def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


async def approver(call: ToolCall) -> bool:
    """Approve only the refund of O-1."""
    return bool(call.input["order_id"] == "O-1")


async def test_a_plain_loop_run_with_real_tools_and_an_approver_exports_a_passing_case() -> None:
    """Real tools' JSON comes back as values, an invalid result as an error, the approver as decisions."""
    client = ScriptedClient(
        [
            tool_use(("order", {"order_id": "O-1"}, "t1"), ("count", {"order_id": "O-1"}, "t2")),
            tool_use(("refund", {"order_id": "O-1"}, "t3"), ("refund", {"order_id": "O-2"}, "t4")),
            text("Refunded O-1."),
        ]
    )
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[order, count, refund],
        budget=Budget(max_steps=5),
        policy=Policy(requires_approval=["refund"], approve=approver),
        system="Be brief.",
        observers=Observers(metrics=None),
    )
    result = await loop.run("Refund the late order.", task_id=TASK)
    assert [o.outcome for o in result.state.observations] == ["ok", "invalid_result", "ok", "denied"]
    exported, _ = await rerun(result.state)
    assert exported["mocked_tools"]["order"] == [
        {"status": "ok", "output": {"order_id": "O-1", "status": "late"}}
    ]
    assert exported["mocked_tools"]["count"][0]["status"] == "error"
    assert exported["resume"] == [{"approvals": {"t3": True, "t4": False}}]
    assert exported["policy"]["requires_approval"] == ["refund"]
    description = exported["description"]
    assert "invalid_result" in description
    assert "approve hook" in description


async def test_a_state_without_provenance_exports_the_script_and_results_only() -> None:
    """Without provenance there are no tools, policy or budget to export: the case still runs."""
    raw = fixture(
        [{"tool_calls": [{"name": "lookup", "input": {}}]}, {"text": "ok"}],
        {"lookup": [{"status": "ok", "output": 7}]},
    )
    state = dataclasses.replace(await record(raw), provenance=None)
    exported, _ = await rerun(state)
    assert not {"tools", "policy", "budget", "model_name", "resume"} & set(exported)
    assert exported["mocked_tools"] == {"lookup": [{"status": "ok", "output": 7}]}
    assert "no provenance" in exported["description"]


async def test_a_state_read_back_from_json_exports_the_same_case() -> None:
    """A stored state (responses rebuilt from JSON) exports exactly as the live one."""
    raw = fixture(
        [{"tool_calls": [{"name": "lookup", "input": {"q": None}}]}, {"text": "ok"}],
        {"lookup": [{"status": "ok", "output": "v"}]},
    )
    state = await record(raw)
    stored = LoopState.from_json(state.to_json())
    assert export_case(stored) == export_case(state)
    assert export_case(stored)["model"][0]["content"][0]["input"] == {"q": None}


async def test_the_case_id_is_the_callers_or_the_task_id_made_valid() -> None:
    """An explicit id is used as given; a bad one, or a run that has not stopped, is refused."""
    state = await record(fixture([{"text": "ok"}], {}))
    assert export_case(state, case_id="regression.1")["case_id"] == "regression.1"
    assert export_case(dataclasses.replace(state, task_id="ü" * 200))["case_id"] == "_" * 128
    with pytest.raises(ValueError, match="does not match"):
        export_case(state, case_id="no spaces")
    with pytest.raises(ValueError, match="has not stopped"):
        export_case(LoopState(task_id="t", trace_id="r", goal="g", started_at=0.0))


async def test_a_run_stopped_by_a_failing_tool_exports_its_tool_error_policy() -> None:
    """on_tool_error="stop" travels with the policy, so the exported case stops the same way."""
    raw = fixture(
        [{"tool_calls": [{"name": "lookup", "input": {}}]}],
        {"lookup": [{"status": "error", "error": "down"}]},
        policy={"on_tool_error": "stop"},
    )
    state = await record(raw, [])
    assert state.stop_reason is StopReason.TOOL_FAILURE
    exported, result = await rerun(state)
    assert exported["policy"]["on_tool_error"] == "stop"
    assert result.stop_reason is StopReason.TOOL_FAILURE
