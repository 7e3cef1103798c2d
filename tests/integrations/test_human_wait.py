"""A run on DBOS that stops `needs_human` waits inside its workflow (DBOS's durable `recv`) for
a decision sent with `DurableLoop.decide`, and goes on in the same workflow: approved calls run
once, denied ones are answered denied; a decision that does not fit is refused and the run keeps
waiting; while it waits, `loop.resume` outside DBOS is refused; once the wait runs out, the
workflow ends `needs_human` and `loop.resume` continues the run."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from dbos import DBOS

from boundloop import (
    AgentLoop,
    ApprovalMissing,
    Budget,
    LoopResult,
    MemoryStore,
    NotResumable,
    Observers,
    StopReason,
    TaskBusy,
    ToolContext,
    tool,
)
from boundloop.integrations.dbos import DurableLoop
from boundloop.integrations.dbos._wait import WAITING_EVENT
from boundloop.testing import ScriptedClient
from boundloop.tools import Tool
from tests.helpers import JSON, text, tool_use
from tests.integrations.conftest import Launch, recorded_steps

pytestmark = pytest.mark.asyncio_only  # DBOS runs workflows and steps on asyncio event loops

WAIT_S = 60.0
"""How long `get_event` waits for the workflow to start waiting (a slow, shared CI machine)."""


def refund_loop(store: MemoryStore, ran: list[str], *, turns: int = 2) -> AgentLoop:
    @tool(requires_approval=True, side_effect=True)
    async def refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order (once a human approved it)."""
        ran.append(ctx.idempotency_key)
        return f"refunded {order_id}"

    tools: list[Tool] = [refund]
    script: list[JSON] = [tool_use(("refund", {"order_id": "O-1"}, "toolu_refund"))]
    script += [text("done")] * (turns - 1)
    return AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=tools,
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
        store=store,
        name="refunds",
    )


async def waiting(task_id: str) -> dict[str, Any]:
    """What the workflow waits for, once it waits."""
    published = await DBOS.get_event_async(task_id, WAITING_EVENT, timeout_seconds=WAIT_S)
    assert published is not None, "the workflow did not start waiting"
    return dict(published)


async def test_an_approval_continues_the_run_inside_its_workflow(launch: Launch) -> None:
    store, ran = MemoryStore(), list[str]()
    loop = refund_loop(store, ran)
    durable = DurableLoop(loop)
    launch()
    results: list[LoopResult] = []
    async with anyio.create_task_group() as group:

        async def run() -> None:
            results.append(await durable.run("Refund O-1", task_id="wait-1"))

        group.start_soon(run)
        published = await waiting("wait-1")
        assert published["pending"] == [
            {"tool_use_id": "toolu_refund", "tool": "refund", "input": {"order_id": "O-1"}}
        ]
        assert await (await durable.retrieve("wait-1")).status() == "PENDING"
        saved = await store.load("wait-1")
        assert saved is not None
        assert saved.stop_reason is StopReason.NEEDS_HUMAN
        assert ran == []
        with pytest.raises(TaskBusy):  # the guard: not continued outside DBOS meanwhile
            await loop.resume("wait-1", approvals={"toolu_refund": True})

        await durable.decide("wait-1", approvals={"toolu_refund": True})

    [result] = results
    assert result.stop_reason is StopReason.COMPLETED
    assert result.answer == "done"
    assert ran == ["wait-1:1:toolu_refund"]  # once, after the approval
    assert [(o.tool_use_id, o.outcome) for o in result.state.observations] == [("toolu_refund", "ok")]
    names = [name for name, _ in await recorded_steps("wait-1")]
    assert "boundloop.wait" in names
    assert names[-2:] == ["boundloop.tool:refund:toolu_refund:1", "boundloop.messages.create"]
    assert names.count("boundloop.messages.create") == 2
    assert await (await durable.retrieve("wait-1")).status() == "SUCCESS"
    saved = await store.load("wait-1")
    assert saved is not None
    assert saved.stop_reason is StopReason.COMPLETED
    with pytest.raises(NotResumable):  # the workflow ended: it waits for nothing any more
        await durable.decide("wait-1", approvals={"toolu_refund": True})


async def test_a_denial_is_answered_denied_and_a_decision_that_does_not_fit_is_refused(
    launch: Launch,
) -> None:
    store, ran = MemoryStore(), list[str]()
    durable = DurableLoop(refund_loop(store, ran))
    launch()
    results: list[LoopResult] = []
    async with anyio.create_task_group() as group:

        async def run() -> None:
            results.append(await durable.run("Refund O-1", task_id="wait-2"))

        group.start_soon(run)
        await waiting("wait-2")
        with pytest.raises(ApprovalMissing, match="toolu_other"):
            await durable.decide("wait-2", approvals={"toolu_other": True})
        with pytest.raises(ApprovalMissing, match="no decision for toolu_refund"):
            await durable.decide("wait-2", approvals={})
        assert await (await durable.retrieve("wait-2")).status() == "PENDING"  # still waiting

        await durable.decide("wait-2", approvals={"toolu_refund": "not without a receipt"})

    [result] = results
    assert result.stop_reason is StopReason.COMPLETED
    assert ran == []
    [observation] = result.state.observations
    assert observation.outcome == "denied"
    assert "not without a receipt" in str(observation.content)


async def test_when_the_wait_runs_out_the_workflow_ends_and_resume_continues_outside(
    launch: Launch,
) -> None:
    store, ran = MemoryStore(), list[str]()
    loop = refund_loop(store, ran)
    durable = DurableLoop(loop, human_wait_s=0.2)
    launch()

    result = await durable.run("Refund O-1", task_id="wait-3")

    assert result.stop_reason is StopReason.NEEDS_HUMAN
    assert await DBOS.get_event_async("wait-3", WAITING_EVENT, timeout_seconds=0) is None
    with pytest.raises(NotResumable):
        await durable.decide("wait-3", approvals={"toolu_refund": True})
    resumed = await loop.resume("wait-3", approvals={"toolu_refund": True})
    assert resumed.stop_reason is StopReason.COMPLETED
    assert ran == ["wait-3:1:toolu_refund"]


async def test_human_wait_s_zero_ends_the_workflow_at_once(launch: Launch) -> None:
    store, ran = MemoryStore(), list[str]()
    durable = DurableLoop(refund_loop(store, ran), human_wait_s=0)
    launch()
    result = await durable.run("Refund O-1", task_id="wait-4")
    assert result.stop_reason is StopReason.NEEDS_HUMAN
    assert "boundloop.wait" not in [name for name, _ in await recorded_steps("wait-4")]


def test_a_negative_wait_is_refused() -> None:
    with pytest.raises(ValueError, match="human_wait_s"):
        DurableLoop(refund_loop(MemoryStore(), []), human_wait_s=-1)
