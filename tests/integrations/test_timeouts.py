"""A tool call that overruns its timeout, in a DBOS workflow: the timeout happens inside the
tool's step, so it is recorded, and a recovered run replays it (the same "timeout" answer)
instead of invoking the tool again."""

from __future__ import annotations

import threading
import time

import anyio
import pytest
from dbos import DBOS

from boundloop import AgentLoop, Budget, MemoryStore, Observers, StopReason, ToolContext, tool
from boundloop.integrations.dbos import DurableLoop
from boundloop.testing import ScriptedClient
from tests.helpers import text, tool_use
from tests.integrations.conftest import Launch, recorded_steps

pytestmark = pytest.mark.asyncio_only  # DBOS runs workflows and steps on asyncio event loops


async def step_output(task_id: str, name: str) -> object:
    """The recorded output of the step `name`."""
    (output,) = [
        s["output"] for s in await DBOS.list_workflow_steps_async(task_id) if s["function_name"] == name
    ]
    return output


async def last_model_step(task_id: str) -> int:
    return max(
        int(s["function_id"])
        for s in await DBOS.list_workflow_steps_async(task_id)
        if s["function_name"] == "boundloop.messages.create"
    )


async def test_a_timed_out_call_is_recorded_and_replays_as_the_same_timeout(launch: Launch) -> None:
    """`charge` overruns its `timeout_s`: the model is told "timeout", as without DBOS, and the
    tool's step records it. After a crash before the last model call, the replay answers the
    same timeout without invoking `charge` again."""
    invoked: list[str] = []

    @tool(side_effect=True, timeout_s=0.2)
    async def charge(order_id: str, ctx: ToolContext) -> str:
        """Charge an order once per idempotency key."""
        invoked.append(ctx.idempotency_key)
        await anyio.sleep(5.0)
        return f"charged {order_id}"

    client = ScriptedClient(
        [tool_use(("charge", {"order_id": "O-1"}, "toolu_c")), text("done"), text("done")]
    )
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[charge],
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
        store=MemoryStore(),
        name="timeouts",
    )
    durable = DurableLoop(loop)
    launch()
    first = await durable.run("Charge O-1", task_id="timeout")
    seen = [(o.tool_use_id, o.outcome, o.content, o.attempts) for o in first.state.observations]
    assert seen == [("toolu_c", "timeout", "timed out after 0.2 s; the call was cancelled", 1)]
    steps = await recorded_steps("timeout")
    assert steps == [
        ("boundloop.store.exists", 1),
        ("boundloop.messages.create", 2),
        ("boundloop.tool:charge:toolu_c:1", 3),  # the timed-out call has a record
        ("boundloop.messages.create", 4),
    ]
    recorded = await step_output("timeout", "boundloop.tool:charge:toolu_c:1")
    assert type(recorded).__name__ == "TimedOut"

    await DBOS.rewind_workflow_async("timeout", start_step=await last_model_step("timeout"))
    started = time.perf_counter()
    result = await (await durable.retrieve("timeout")).result()

    assert result.stop_reason is StopReason.COMPLETED
    assert [(o.tool_use_id, o.outcome, o.content, o.attempts) for o in result.state.observations] == seen
    assert invoked == ["timeout:1:toolu_c"]  # not invoked again
    assert time.perf_counter() - started < 4.0  # the replay did not wait for the handler
    assert len(client.requests) == 3  # the first model call replayed
    assert await recorded_steps("timeout") == steps


async def test_a_default_timeout_and_a_sync_tool_are_recorded_and_replayed(launch: Launch) -> None:
    """`Budget.tool_timeout_s` applies inside the step too, to a sync tool (in its worker thread)
    as to an async one; a call that finishes in time is recorded as its result."""
    invoked: list[str] = []

    @tool
    def slow(order_id: str) -> str:
        """A sync tool that overruns the loop's tool timeout."""
        invoked.append("slow")
        threading.Event().wait(0.6)  # blocks its worker thread
        return f"{order_id}: slow"

    @tool(timeout_s=5.0)
    async def quick(order_id: str) -> str:
        """Finishes well within its own timeout."""
        invoked.append("quick")
        await anyio.sleep(0.01)
        return f"{order_id}: quick"

    batch = tool_use(
        ("slow", {"order_id": "O-1"}, "toolu_slow"), ("quick", {"order_id": "O-1"}, "toolu_quick")
    )
    client = ScriptedClient([batch, text("done"), text("done")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[slow, quick],
        budget=Budget(max_steps=4, tool_timeout_s=0.2, max_tool_retries=1),
        observers=Observers(metrics=None),
        name="default_timeouts",
    )
    durable = DurableLoop(loop)
    launch()
    first = await durable.run("Look", task_id="default")
    seen = [(o.tool_use_id, o.outcome, o.content, o.attempts) for o in first.state.observations]
    assert [row[:2] for row in seen] == [("toolu_slow", "timeout"), ("toolu_quick", "ok")]
    assert str(seen[0][2]).startswith("timed out after 0.2 s")
    assert seen[1][2] == "O-1: quick"
    steps = await recorded_steps("default")
    # Two ids per call (1 + max_tool_retries), reserved in block order: a timeout is not retried.
    assert steps == [
        ("boundloop.messages.create", 1),
        ("boundloop.tool:slow:toolu_slow:1", 2),
        ("boundloop.tool:quick:toolu_quick:1", 4),
        ("boundloop.messages.create", 6),
    ]

    await DBOS.rewind_workflow_async("default", start_step=await last_model_step("default"))
    result = await (await durable.retrieve("default")).result()

    assert [(o.tool_use_id, o.outcome, o.content, o.attempts) for o in result.state.observations] == seen
    assert sorted(invoked) == ["quick", "slow"]  # neither invoked again
    assert len(client.requests) == 3
    assert await recorded_steps("default") == steps
