"""Regression tests for defects found in review: each one failed before its fix."""

from __future__ import annotations

import sys
import threading
from typing import Any

import anyio
import pytest
from anthropic.types import Message

from boundloop import (
    AgentLoop,
    Budget,
    LoopState,
    MemoryStore,
    Observers,
    Policy,
    Route,
    ScriptedClient,
    StopReason,
    ToolCall,
    Verdict,
    tool,
)
from boundloop.records import Exceeded
from boundloop.testing import parse_message
from boundloop.transcript import transcript_errors
from tests.helpers import assert_valid_transcript, blocks, text, tool_use

MODEL = "claude-sonnet-4-6"


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-{key}"


def make(script: list[Any], **kwargs: Any) -> tuple[ScriptedClient, AgentLoop]:
    client = ScriptedClient(script)
    options: dict[str, Any] = {
        "model": MODEL,
        "tools": [lookup],
        "budget": Budget(max_steps=5),
        "observers": Observers(metrics=None),
    }
    options.update(kwargs)
    return client, AgentLoop(client, **options)


async def test_the_answer_keeps_the_text_before_a_max_tokens_continuation() -> None:
    """A cut-off answer and its continuation form one answer; the continuation is asked in a user turn."""
    client, loop = make(
        [text("The answer is part", stop_reason="max_tokens"), text(" two.")],
        policy=Policy(on_max_tokens="continue"),
    )
    result = await loop.run("goal")
    assert result.answer == "The answer is part two."
    second = client.requests[1]["messages"]
    assert second[-1]["role"] == "user"  # no assistant prefill: current models reject it
    assert "cut off" in blocks(second[-1])[0]["text"]
    assert_valid_transcript(result.messages)


async def test_the_answer_keeps_the_text_before_a_pause_turn() -> None:
    """A paused turn's text is part of the final answer, and the success check sees all of it."""
    seen: list[str | None] = []

    def success(state: LoopState, answer: str | None) -> bool:
        seen.append(answer)
        return True

    _, loop = make(
        [text("Searching. Found: A. ", stop_reason="pause_turn"), text("And B.")],
        policy=Policy(success=success),
    )
    result = await loop.run("goal")
    assert result.answer == "Searching. Found: A. And B."
    assert seen == ["Searching. Found: A. And B."]


@pytest.mark.parametrize(
    ("policy_kwargs", "budget", "expected"),
    [
        pytest.param(
            {"forbidden": {"refund"}}, Budget(max_steps=3), StopReason.POLICY_BLOCKED, id="forbidden-sibling"
        ),
        pytest.param({}, Budget(max_steps=3, max_tool_calls=1), StopReason.MAX_TOOL_CALLS, id="over-budget"),
    ],
)
async def test_the_approver_is_never_asked_about_a_batch_that_cannot_run(
    policy_kwargs: dict[str, Any], budget: Budget, expected: StopReason
) -> None:
    """Approval is asked only after the batch passed every other check."""
    asked: list[str] = []

    async def approve(call: ToolCall) -> bool:
        asked.append(call.name)
        return True

    @tool(requires_approval=True)
    async def pay(amount: int) -> str:
        """Pay (needs approval)."""
        return "paid"

    @tool
    async def refund(amount: int) -> str:
        """Refund."""
        return "refunded"

    script = [
        tool_use(
            ("pay", {"amount": 1}),
            ("refund" if policy_kwargs else "lookup", {"amount": 1} if policy_kwargs else {"key": "k"}),
        )
    ]
    _, loop = make(
        script, tools=[lookup, pay, refund], budget=budget, policy=Policy(approve=approve, **policy_kwargs)
    )
    result = await loop.run("goal")
    assert result.stop_reason is expected
    assert asked == []


async def test_a_sync_tool_interrupted_mid_run_is_reported_as_unknown_not_as_not_run() -> None:
    """A worker thread cannot be cancelled: its call is answered 'effect unknown' with its idempotency key."""
    release = threading.Event()
    entered = anyio.Event()

    @tool
    def charge(amount: int) -> str:
        """Charge a card (sync, slow)."""
        anyio.from_thread.run_sync(entered.set)
        release.wait(5)
        return "charged"

    cancel = anyio.Event()
    _, loop = make([tool_use(("charge", {"amount": 5}))], tools=[charge])

    async def cancel_when_running() -> None:
        await entered.wait()
        cancel.set()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_when_running)
            result = await loop.run("goal", cancel=cancel, task_id="t-1")
    finally:
        release.set()
    assert result.stop_reason is StopReason.CANCELLED
    answer = blocks(result.messages[-1])[0]
    assert "effect is unknown" in answer["content"]
    assert "t-1:1:toolu_0_charge" in answer["content"]
    assert result.state.tool_calls == 1


async def test_no_final_answer_call_after_a_token_budget() -> None:
    """Tokens are a hard ceiling: on_exhausted="final_answer" makes no extra call after token_budget."""
    client, loop = make(
        [tool_use(("lookup", {"key": "a"}), input_tokens=500), text("extra")],
        budget=Budget(max_steps=5, max_total_tokens=100, on_exhausted="final_answer"),
    )
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.TOKEN_BUDGET
    assert len(client.requests) == 1
    assert result.answer is None


class HangingFinalAnswer:
    """A model that asks for one tool, then never returns the final-answer call (setting `cancel`)."""

    def __init__(self, cancel: anyio.Event) -> None:
        self.cancel = cancel
        self.calls = 0
        self.messages = self

    async def create(self, **request: Any) -> Message:
        self.calls += 1
        if self.calls == 1:
            return parse_message(tool_use(("lookup", {"key": "a"})))
        self.cancel.set()
        await anyio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_cancel_event_during_the_final_answer_keeps_the_budget_reason() -> None:
    """The stop was decided first (max_steps); interrupting its final-answer call does not rewrite it."""
    cancel = anyio.Event()
    model = HangingFinalAnswer(cancel)
    loop = AgentLoop(
        model,
        model=MODEL,
        tools=[lookup],
        budget=Budget(max_steps=1, on_exhausted="final_answer"),
        observers=Observers(metrics=None),
    )
    with anyio.fail_after(5):
        result = await loop.run("goal", cancel=cancel)
    assert model.calls == 2
    assert result.stop_reason is StopReason.MAX_STEPS
    assert "final-answer call was interrupted" in (result.state.stop_detail or "")
    assert result.state.exceeded == Exceeded(limit="max_steps", value=1, used=1)
    assert_valid_transcript(result.messages)


def test_an_invalid_route_is_refused_when_built() -> None:
    """A handler cannot return a route the driver cannot follow."""
    with pytest.raises(ValueError, match="needs a stop_reason"):
        Route(verdict=Verdict.STOP)
    with pytest.raises(ValueError, match="must be a Verdict"):
        Route(verdict="continue")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def test_system_exit_in_a_tool_leaves_as_itself() -> None:
    """A handler's SystemExit is not wrapped in an exception group."""

    @tool
    def quit_now(code: int) -> str:
        """Exits."""
        sys.exit(code)

    _, loop = make([tool_use(("quit_now", {"code": 3}))], tools=[quit_now])
    with pytest.raises(SystemExit) as caught:
        await loop.run("goal")
    assert caught.value.code == 3


async def test_a_failing_store_does_not_replace_the_callers_cancellation() -> None:
    """When the last checkpoint fails during a cancellation, the cancellation still propagates."""

    final_saves: list[StopReason] = []

    class BrokenStore:
        async def save(self, state: LoopState) -> None:
            if state.stop_reason is not None:
                final_saves.append(state.stop_reason)
                raise OSError("disk full")

        async def load(self, task_id: str) -> LoopState | None:
            return None

    in_tool = anyio.Event()

    @tool
    async def wait(key: str) -> str:
        """Waits forever."""
        in_tool.set()
        await anyio.Event().wait()
        return key

    _, loop = make([tool_use(("wait", {"key": "a"}))], tools=[wait], store=BrokenStore())
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: loop.run("goal"))
            await in_tool.wait()
            group.cancel_scope.cancel()
    # Reaching here means the cancellation was delivered, not replaced by the OSError, which
    # the final checkpoint did raise:
    assert final_saves == [StopReason.CANCELLED]


def test_an_unanswered_tool_use_at_the_end_is_an_invalid_transcript() -> None:
    """The transcript check flags a tool_use that is never answered."""
    problems = transcript_errors(
        [
            {"role": "user", "content": "goal"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
        ]
    )
    assert problems == ["tool_use ['t1'] never answered"]


async def test_memory_store_checkpoints_every_step() -> None:
    """The store holds the state after every completed step and at the stop."""
    store = MemoryStore()
    saved_steps: list[int] = []

    class Spy:
        async def save(self, state: LoopState) -> None:
            saved_steps.append(state.step)
            await store.save(state)

        async def load(self, task_id: str) -> LoopState | None:
            return await store.load(task_id)

    _, loop = make(
        [tool_use(("lookup", {"key": "a"})), tool_use(("lookup", {"key": "b"})), text("done")], store=Spy()
    )
    result = await loop.run("goal", task_id="t-9")
    # At the start, before each batch (its intents) and after it (its results), then at the stop.
    assert saved_steps == [0, 1, 1, 2, 2, 3]
    loaded = await store.load("t-9")
    assert loaded is not None
    assert loaded.to_dict() == result.state.to_dict()
