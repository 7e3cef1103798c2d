"""`AgentLoop.run_sync`: a run from synchronous code; inside a running event loop, a clear error."""

from __future__ import annotations

import functools

import anyio
import anyio.to_thread
import pytest

from boundloop import (
    AgentLoop,
    Budget,
    EventLoopRunning,
    LoopError,
    Observers,
    ScriptedClient,
    StopReason,
    ToolContext,
    tool,
)
from tests.helpers import text, tool_use


def make_loop(seen: list[object]) -> AgentLoop[str, str]:
    @tool
    async def whoami(ctx: ToolContext[str]) -> str:
        """Name the current user."""
        seen.append(ctx.deps)
        return f"you are {ctx.deps}"

    client = ScriptedClient([tool_use(("whoami", {})), text("You are ann.")])
    loop: AgentLoop[str, str] = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[whoami],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
    )
    return loop


def test_run_sync_runs_a_run_from_sync_code() -> None:
    """A script calls `run_sync` as it would call `run`, with the same options and deps."""
    seen: list[object] = []
    result = make_loop(seen).run_sync(
        "Who am I?", deps="ann", task_id="t-sync", metadata={"from": "a script"}
    )
    assert result.stop_reason is StopReason.COMPLETED
    assert result.answer == "You are ann."
    assert result.state.task_id == "t-sync"
    assert result.state.metadata == {"from": "a script"}
    assert seen == ["ann"]


async def test_run_sync_inside_a_running_event_loop_is_a_clear_error() -> None:
    """Called from async code it raises at once, naming `await loop.run(...)`, and runs nothing
    (no model call; no coroutine left un-awaited)."""
    seen: list[object] = []
    loop = make_loop(seen)
    with pytest.raises(EventLoopRunning, match=r"use `await loop\.run\(\.\.\.\)`") as raised:
        loop.run_sync("Who am I?", deps="ann")
    assert isinstance(raised.value, LoopError)
    assert isinstance(raised.value, RuntimeError)
    assert raised.value.library in {"asyncio", "trio"}
    assert loop.client.remaining == 2  # type: ignore[attr-defined]
    result = await loop.run("Who am I?", deps="ann")  # what the error says to do
    assert result.stop_reason is StopReason.COMPLETED


async def test_run_sync_in_a_worker_thread_of_async_code_runs() -> None:
    """A worker thread has no running event loop: `run_sync` there runs the run in its own."""
    seen: list[object] = []
    result = await anyio.to_thread.run_sync(functools.partial(make_loop(seen).run_sync, "Who?", deps="bob"))
    assert result.stop_reason is StopReason.COMPLETED
    assert seen == ["bob"]
    assert anyio.get_current_task()  # still in the test's own event loop
