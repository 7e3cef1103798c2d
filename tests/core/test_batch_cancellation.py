"""A batch under cancellation, on asyncio and trio: the same outcomes on both.

On asyncio a batch runs in native tasks (`asyncio.TaskGroup`), on trio in an anyio task group.
These runs pin what must not differ: which calls are cancelled, that every cancelled call's
cleanup has finished before `run()` returns or raises, and how each call is answered.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from boundloop import (
    AgentLoop,
    Budget,
    LoopResult,
    MemoryStore,
    Observers,
    Policy,
    ScriptedClient,
    StopReason,
    Tool,
    tool,
)
from tests.helpers import assert_valid_transcript, blocks, text, tool_use

JSON = dict[str, Any]


class Blocked:
    """Tools that wait until cancelled, record that their cleanup ran, and count who started."""

    def __init__(self, expected: int) -> None:
        self.log: list[str] = []
        self.started = 0
        self.expected = expected
        self.all_started = anyio.Event()

    def tool(self, name: str) -> Tool:
        async def handler(key: str) -> str:
            self.started += 1
            if self.started == self.expected:
                self.all_started.set()
            try:
                await anyio.Event().wait()
            finally:
                # A cleanup that itself awaits, shielded: it must finish before the batch ends.
                with anyio.CancelScope(shield=True):
                    for _ in range(3):
                        await anyio.lowlevel.checkpoint()
                self.log.append(f"{name} cleaned up")
            return key

        return tool(name=name, description=f"{name}: waits until cancelled.")(handler)


async def failing(key: str) -> str:
    """Fails once the blocked siblings are running."""
    raise RuntimeError(f"backend down for {key}")


def make_loop(script: list[JSON], tools: list[Tool], **kwargs: Any) -> AgentLoop:
    options: JSON = {
        "model": "claude-sonnet-4-6",
        "budget": Budget(max_steps=4),
        "observers": Observers(metrics=None),
    }
    options.update(kwargs)
    return AgentLoop(ScriptedClient(script), tools=tools, **options)


@pytest.mark.parametrize("failing_position", [0, 1, 2])
async def test_raise_cancels_every_sibling_and_waits_for_their_cleanup(failing_position: int) -> None:
    """on_tool_error="raise": the failure leaves run() once both siblings cleaned up, wherever it
    sits; the call that raised is recorded as the error it is, the siblings as cut short (it was
    recorded `cancelled` too)."""
    blocked = Blocked(expected=2)
    names = ["first", "second"]

    async def fail_when_siblings_run(key: str) -> str:
        await blocked.all_started.wait()
        return await failing(key)

    broken = tool(name="broken", description="Fails.")(fail_when_siblings_run)
    calls: list[tuple[str, JSON]] = [(name, {"key": name}) for name in names]
    calls.insert(failing_position, ("broken", {"key": "b"}))
    loop = make_loop(
        [tool_use(*calls)],
        [blocked.tool(name) for name in names] + [broken],
        policy=Policy(on_tool_error="raise"),
        store=(store := MemoryStore()),
    )
    with anyio.fail_after(10), pytest.raises(RuntimeError, match="backend down for b"):
        await loop.run("goal", task_id="t-raise")
    assert sorted(blocked.log) == ["first cleaned up", "second cleaned up"]
    state = await store.load("t-raise")
    assert state is not None
    assert state.stop_reason is StopReason.FAILED
    outcomes = {o.tool: (o.outcome, str(o.content)) for o in state.observations}
    assert outcomes.pop("broken") == ("error", "RuntimeError: backend down for b")
    assert {outcome for outcome, _ in outcomes.values()} == {"cancelled"}
    assert_valid_transcript(state.messages)


class Halt(BaseException):
    """Not an `Exception`: no tool boundary turns it into a result, so it ends the batch."""


@pytest.mark.parametrize("halting_position", [0, 1, 2])
async def test_a_calls_base_exception_cancels_the_usual_batch_and_waits_for_its_cleanup(
    halting_position: int,
) -> None:
    """The usual batch (on_tool_error="report"): a call that raises what no tool boundary takes
    (a `BaseException`) leaves run() as itself, once both other calls were cancelled and cleaned
    up, wherever it sits (the first call runs in the batch's own task, the others in tasks)."""
    blocked = Blocked(expected=2)
    names = ["first", "second"]

    async def halt_when_siblings_run(key: str) -> str:
        await blocked.all_started.wait()
        raise Halt(key)

    halting = tool(name="halting", description="Halts.")(halt_when_siblings_run)
    calls: list[tuple[str, JSON]] = [(name, {"key": name}) for name in names]
    calls.insert(halting_position, ("halting", {"key": "h"}))
    loop = make_loop([tool_use(*calls)], [blocked.tool(name) for name in names] + [halting])
    with anyio.fail_after(10), pytest.raises(Halt):
        await loop.run("goal")
    assert sorted(blocked.log) == ["first cleaned up", "second cleaned up"]


async def test_a_run_timeout_cancels_the_whole_batch_and_answers_every_call() -> None:
    """timeout_s in the middle of a batch: every call cancelled and cleaned up, each answered."""
    blocked = Blocked(expected=3)
    names = ["a", "b", "c"]
    loop = make_loop(
        [tool_use(*[(name, {"key": name}) for name in names])],
        [blocked.tool(name) for name in names],
        budget=Budget(max_steps=3, timeout_s=0.2),
    )
    with anyio.fail_after(10):
        result = await loop.run("goal")
    assert result.stop_reason is StopReason.TIMEOUT
    assert sorted(blocked.log) == ["a cleaned up", "b cleaned up", "c cleaned up"]
    assert [o.outcome for o in result.state.observations] == ["cancelled"] * 3
    assert all("its effect is unknown" in str(o.content) for o in result.state.observations)
    assert_valid_transcript(result.messages)


async def test_the_callers_cancellation_waits_for_the_batch_then_propagates() -> None:
    """Cancelling the caller's scope mid-batch: every call cleaned up before the scope exits."""
    blocked = Blocked(expected=3)
    names = ["a", "b", "c"]
    loop = make_loop(
        [tool_use(*[(name, {"key": name}) for name in names])],
        [blocked.tool(name) for name in names],
    )
    results: list[LoopResult] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:

            async def run() -> None:
                results.append(await loop.run("goal"))

            group.start_soon(run)
            await blocked.all_started.wait()
            group.cancel_scope.cancel()
    assert results == []  # the cancellation propagated out of run()
    assert sorted(blocked.log) == ["a cleaned up", "b cleaned up", "c cleaned up"]


async def test_a_cancel_event_mid_batch_returns_a_cancelled_result() -> None:
    """The run's cancel event set while a batch runs: a result, every call answered as cancelled."""
    blocked = Blocked(expected=2)
    cancel = anyio.Event()

    async def set_cancel_when_running(key: str) -> str:
        await blocked.all_started.wait()
        cancel.set()
        await anyio.Event().wait()
        return key

    trigger = tool(name="trigger", description="Sets the cancel event.")(set_cancel_when_running)
    loop = make_loop(
        [tool_use(("a", {"key": "a"}), ("trigger", {"key": "t"}), ("b", {"key": "b"})), text("unused")],
        [blocked.tool("a"), blocked.tool("b"), trigger],
    )
    with anyio.fail_after(10):
        result = await loop.run("goal", cancel=cancel)
    assert result.stop_reason is StopReason.CANCELLED
    assert sorted(blocked.log) == ["a cleaned up", "b cleaned up"]
    assert [o.outcome for o in result.state.observations] == ["cancelled"] * 3
    assert [block["tool_use_id"] for block in blocks(result.messages[2])] == [
        "toolu_0_a",
        "toolu_1_trigger",
        "toolu_2_b",
    ]
    assert_valid_transcript(result.messages)
