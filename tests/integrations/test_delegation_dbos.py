"""A delegation tree run as a DBOS workflow (the lead's `DurableLoop`; the delegation is one of
its tool steps, the child checkpointed in its own loop's store): a child that waits for a human
stops the tree, and the decision sent to the lead's waiting workflow goes down to the child,
which runs its approved call once; then the lead completes in the same workflow."""

from __future__ import annotations

import anyio
import pytest
from dbos import DBOS

from boundloop import AgentLoop, Budget, LoopResult, MemoryStore, Observers, StopReason, ToolContext, tool
from boundloop.integrations.dbos import DurableLoop
from boundloop.integrations.dbos._wait import WAITING_EVENT
from boundloop.testing import ScriptedClient
from tests.helpers import text, tool_use
from tests.integrations.conftest import Launch

pytestmark = pytest.mark.asyncio_only  # DBOS runs workflows and steps on asyncio event loops

WAIT_S = 60.0


async def test_a_decision_sent_to_the_lead_workflow_reaches_the_waiting_child(launch: Launch) -> None:
    store = MemoryStore()
    ran: list[str] = []

    @tool(requires_approval=True, side_effect=True)
    async def refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order (once a human approved it)."""
        ran.append(ctx.idempotency_key)
        return f"refunded {order_id}"

    child = AgentLoop(
        ScriptedClient([tool_use(("refund", {"order_id": "O-1"}, "toolu_refund")), text("refunded O-1")]),
        model="claude-sonnet-4-6",
        tools=[refund],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
        store=store,
        name="refunds",
    )
    lead = AgentLoop(
        ScriptedClient(
            [tool_use(("refunds", {"task": "Refund O-1."}, "toolu_del")), text("O-1 is refunded.")]
        ),
        model="claude-sonnet-4-6",
        tools=[child.as_tool("refunds", description="Handle refunds.")],
        budget=Budget(max_steps=3, max_tool_calls=1),
        observers=Observers(metrics=None),
        store=store,
        name="lead",
    )
    durable = DurableLoop(lead)
    launch()
    results: list[LoopResult] = []
    with anyio.fail_after(2 * WAIT_S):  # a decision that never reaches the child waits again, forever
        async with anyio.create_task_group() as group:

            async def run() -> None:
                results.append(await durable.run("Refund O-1.", task_id="tree-1"))

            group.start_soon(run)
            published = await DBOS.get_event_async("tree-1", WAITING_EVENT, timeout_seconds=WAIT_S)
            assert published is not None, "the lead's workflow did not start waiting"
            assert [p["tool_use_id"] for p in published["pending"]] == ["toolu_refund"]  # the child's call
            waiting = await store.load("tree-1")
            assert waiting is not None
            (child_id,) = waiting.children
            assert waiting.waiting_on == {"toolu_refund": child_id}
            assert ran == []

            await durable.decide("tree-1", approvals={"toolu_refund": True})

    [result] = results
    assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail
    assert [answer.content for answer in result.state.observations] == ["refunded O-1"]
    assert result.state.children == [child_id]  # the same child, resumed
    assert result.state.tool_calls == 1
    assert ran == [f"{child_id}:1:toolu_refund"]  # once, after the approval, under the child's key
    stored_child = await store.load(child_id)
    assert stored_child is not None
    assert stored_child.stop_reason is StopReason.COMPLETED
