"""An `AgentLoop` run as a DBOS workflow on a real PostgreSQL: same outcome as the plain loop, one
step per model call and per tool call, idempotent submission, and replay after a crash."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest
from dbos import DBOS
from prometheus_client import CollectorRegistry

from boundloop import (
    AgentLoop,
    Budget,
    LoopMetrics,
    LoopResult,
    MemoryStore,
    Observers,
    StopReason,
    TaskExists,
    ToolContext,
    tool,
)
from boundloop.integrations.dbos import DurableLoop
from boundloop.testing import ScriptedClient
from boundloop.tools import Tool
from tests.helpers import JSON, text, tool_use
from tests.integrations.conftest import Launch

pytestmark = pytest.mark.asyncio_only  # DBOS runs workflows and steps on asyncio event loops

BATCH: JSON = tool_use(
    ("lookup", {"city": "Paris"}, "toolu_paris"),
    ("lookup", {"city": "Oslo"}, "toolu_oslo"),
    ("add", {"a": 2, "b": 3}, "toolu_add"),
)
SCRIPT: list[JSON] = [BATCH, text("Paris 21, Oslo 4, sum 5")]


def weather_tools(invoked: list[str]) -> list[Tool]:
    """Two tools: an async lookup whose first call finishes last, and a sync one (a worker thread)."""

    @tool
    async def lookup(city: str, ctx: ToolContext) -> str:
        """Look up a city's temperature."""
        await anyio.sleep(0.2 if city == "Paris" else 0.01)  # finish out of order
        invoked.append(ctx.idempotency_key)
        return {"Paris": "21", "Oslo": "4"}[city]

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        invoked.append("add")
        return a + b

    return [lookup, add]


def weather_loop(client: ScriptedClient, invoked: list[str], **options: Any) -> AgentLoop:
    settings: JSON = {
        "model": "claude-sonnet-4-6",
        "budget": Budget(max_steps=4),
        "observers": Observers(metrics=None),
        "name": "weather",
    }
    return AgentLoop(client, tools=weather_tools(invoked), **(settings | options))


def observed(result: LoopResult) -> list[tuple[str, str, object]]:
    return [(o.tool_use_id, o.outcome, o.content) for o in result.state.observations]


async def test_a_run_with_a_parallel_batch_completes_through_the_workflow_as_the_plain_loop_does(
    launch: Launch,
) -> None:
    """Same stop reason, answer, observations and steps as `loop.run`; DBOS lists one step per
    model call and per tool call (plus the store's existence check), in the batch's block order
    although the calls finished in another; the store, trace and metrics work inside."""
    plain = await weather_loop(ScriptedClient(SCRIPT), []).run("Weather?", task_id="plain")
    store = MemoryStore()
    registry = CollectorRegistry()
    metrics = LoopMetrics(registry=registry)
    client, invoked = ScriptedClient(SCRIPT), list[str]()
    durable = DurableLoop(weather_loop(client, invoked, store=store, observers=Observers(metrics=metrics)))
    launch()

    result = await durable.run("Weather?", task_id="task-1")

    assert result.stop_reason is StopReason.COMPLETED is plain.stop_reason
    assert result.answer == plain.answer == "Paris 21, Oslo 4, sum 5"
    assert observed(result) == observed(plain)
    assert result.state.task_id == "task-1"
    assert result.state.step == plain.state.step == 2
    assert [event.kind for event in result.events] == [event.kind for event in plain.events]
    assert len(client.requests) == 2
    steps = await DBOS.list_workflow_steps_async("task-1")
    assert [step["function_name"] for step in steps] == [
        "boundloop.store.exists",
        "boundloop.messages.create",
        "boundloop.tool:lookup:toolu_paris:1",
        "boundloop.tool:lookup:toolu_oslo:1",
        "boundloop.tool:add:toolu_add:1",
        "boundloop.messages.create",
    ]
    assert [step["function_id"] for step in steps] == [1, 2, 3, 4, 5, 6]
    assert steps[0]["output"] is False
    assert [step["output"] for step in steps[2:5]] == ["21", "4", 5]
    response = cast(JSON, steps[1]["output"])
    assert response["stop_reason"] == "tool_use"  # the response, as the API's JSON
    assert invoked.index("task-1:1:toolu_oslo") < invoked.index("task-1:1:toolu_paris")
    saved = await store.load("task-1")
    assert saved is not None
    assert saved.stop_reason is StopReason.COMPLETED
    assert (
        registry.get_sample_value(
            "boundloop_runs_total", {"loop": "weather", "version": "", "stop_reason": "completed"}
        )
        == 1.0
    )
    status = await (await durable.retrieve("task-1")).status()
    assert status == "SUCCESS"


async def test_submitting_a_task_twice_runs_it_once(launch: Launch) -> None:
    """The workflow id is the task id: the second `run` returns the first run's result."""
    client, invoked = ScriptedClient(SCRIPT), list[str]()
    durable = DurableLoop(weather_loop(client, invoked))
    launch()

    first = await durable.run("Weather?", task_id="twice")
    second = await durable.run("Something else entirely", task_id="twice")

    assert second.answer == first.answer
    assert second.state.goal == "Weather?"
    assert second.state.trace_id == first.state.trace_id
    assert len(client.requests) == 2
    assert len(invoked) == 3


async def test_a_task_a_plain_run_stored_is_refused(launch: Launch) -> None:
    """`TaskExists`, as from `loop.run`: the store's check is the workflow's first step."""
    store = MemoryStore()
    loop = weather_loop(ScriptedClient(SCRIPT * 2), [], store=store)
    await loop.run("Weather?", task_id="taken")
    durable = DurableLoop(loop)
    launch()

    with pytest.raises(TaskExists, match="taken"):
        await durable.run("Weather?", task_id="taken")
