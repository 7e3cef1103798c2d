"""Replay after a simulated crash, in one process: DBOS's `rewind_workflow` drops the record from a
step on, as a crash leaves it, and runs the same workflow (the same task id) again. Recorded model
and tool steps are replayed, without calling the model or the tools; the rest runs."""

from __future__ import annotations

import anyio
import pytest
from dbos import DBOS

from boundloop import (
    AgentLoop,
    Budget,
    MemoryStore,
    Observers,
    RetryableToolError,
    StopReason,
    ToolContext,
    tool,
)
from boundloop.integrations.dbos import DurableLoop
from boundloop.testing import ScriptedClient
from tests.helpers import JSON, text, tool_use
from tests.integrations.conftest import Launch, recorded_steps

pytestmark = pytest.mark.asyncio_only  # DBOS runs workflows and steps on asyncio event loops


class KeywordError(Exception):
    """An exception pickle cannot rebuild: its constructor takes a keyword-only argument."""

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


async def rewound(task_id: str, start_step: int) -> None:
    """Simulate a crash before `start_step`, and let DBOS run the workflow again."""
    await DBOS.rewind_workflow_async(task_id, start_step=start_step)


async def test_a_crash_during_a_batch_replays_the_done_calls_and_reruns_the_one_in_flight(
    launch: Launch,
) -> None:
    """The record ends before `charge` finished: on recovery `read_order` is replayed (not invoked),
    `charge` runs again under the same idempotency key (its effect lands once), the first model
    call is replayed and only the second reaches the model; the loop's store, which holds the
    task, does not make the recovered run fail with TaskExists."""
    effects: dict[str, str] = {}
    calls: list[tuple[str, str]] = []

    @tool
    async def read_order(order_id: str, ctx: ToolContext) -> str:
        """Read one order."""
        calls.append(("read_order", ctx.idempotency_key))
        return f"{order_id}: confirmed"

    @tool(side_effect=True)
    async def charge(order_id: str, ctx: ToolContext) -> str:
        """Charge an order once per idempotency key."""
        calls.append(("charge", ctx.idempotency_key))
        await anyio.sleep(0.05)  # finishes after read_order
        effects.setdefault(ctx.idempotency_key, order_id)
        return f"charged {order_id}"

    script: list[JSON] = [
        tool_use(
            ("read_order", {"order_id": "O-1"}, "toolu_read"), ("charge", {"order_id": "O-1"}, "toolu_charge")
        ),
        text("charged"),
        text("charged"),
    ]
    client = ScriptedClient(script)
    store = MemoryStore()
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[read_order, charge],
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
        store=store,
        name="charges",
    )
    durable = DurableLoop(loop)
    launch()
    first = await durable.run("Charge O-1", task_id="crash")
    assert first.stop_reason is StopReason.COMPLETED
    steps = await recorded_steps("crash")
    charge_step = dict(steps)["boundloop.tool:charge:toolu_charge:1"]

    await rewound("crash", charge_step)
    result = await (await durable.retrieve("crash")).result()

    assert result.stop_reason is StopReason.COMPLETED
    assert result.answer == "charged"
    assert result.state.trace_id == first.state.trace_id
    assert len(client.requests) == 3  # two in the first run, one after the crash
    key = "crash:1:toolu_charge"
    assert sorted(calls) == [("charge", key), ("charge", key), ("read_order", "crash:1:toolu_read")]
    assert effects == {key: "O-1"}
    assert [(o.tool_use_id, o.content) for o in result.state.observations] == [
        ("toolu_read", "O-1: confirmed"),
        ("toolu_charge", "charged O-1"),
    ]
    assert await recorded_steps("crash") == steps  # the same steps at the same ids
    saved = await store.load("crash")
    assert saved is not None
    assert saved.stop_reason is StopReason.COMPLETED


async def test_failed_and_retried_calls_replay_as_the_same_failures(launch: Launch) -> None:
    """A tool's exception is recorded and replayed as itself: one pickle cannot rebuild, one of a
    local class, and a retried call (its attempts at step ids reserved when the batch started).
    After a crash before the last model call, nothing is invoked again and the model sees the
    same results."""
    invoked: list[str] = []

    class LocalError(Exception):
        """A class pickle cannot find by name."""

    @tool
    async def keyword(order_id: str) -> str:
        """Fails with a keyword-only exception."""
        invoked.append("keyword")
        raise KeywordError(f"no order {order_id}", code=404)

    @tool
    async def local(order_id: str) -> str:
        """Fails with a local exception class."""
        invoked.append("local")
        raise LocalError(f"local failure for {order_id}")

    @tool
    async def retried(order_id: str) -> str:
        """Fails once, then succeeds."""
        invoked.append("retried")
        if invoked.count("retried") == 1:
            raise RetryableToolError("busy", retry_after_s=0.0)
        return f"{order_id}: ok"

    batch = tool_use(
        ("keyword", {"order_id": "O-1"}, "toolu_kw"),
        ("local", {"order_id": "O-1"}, "toolu_local"),
        ("retried", {"order_id": "O-1"}, "toolu_retry"),
    )
    client = ScriptedClient([batch, text("done"), text("done")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[keyword, local, retried],
        budget=Budget(max_steps=4, max_tool_retries=1, max_consecutive_tool_errors=5),
        observers=Observers(metrics=None),
        name="failures",
    )
    durable = DurableLoop(loop)
    launch()
    first = await durable.run("Try", task_id="failures")
    steps = await recorded_steps("failures")
    # Two ids per call (1 + max_tool_retries), reserved in block order: unused ones are gaps.
    assert steps == [
        ("boundloop.messages.create", 1),
        ("boundloop.tool:keyword:toolu_kw:1", 2),
        ("boundloop.tool:local:toolu_local:1", 4),
        ("boundloop.tool:retried:toolu_retry:1", 6),
        ("boundloop.tool:retried:toolu_retry:2", 7),
        ("boundloop.messages.create", 8),
    ]
    seen = [(o.tool_use_id, o.outcome, o.content, o.attempts) for o in first.state.observations]
    assert seen == [
        ("toolu_kw", "error", "KeywordError: no order O-1", 1),
        ("toolu_local", "error", "LocalError: local failure for O-1", 1),
        ("toolu_retry", "ok", "O-1: ok", 2),
    ]

    await rewound("failures", 8)
    result = await (await durable.retrieve("failures")).result()

    assert [(o.tool_use_id, o.outcome, o.content, o.attempts) for o in result.state.observations] == seen
    assert sorted(invoked) == ["keyword", "local", "retried", "retried"]  # none again
    assert len(client.requests) == 3
    assert client.requests[2]["messages"] == client.requests[1]["messages"]  # the same request
