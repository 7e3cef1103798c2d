"""The workflow's edges: model errors recorded and replayed, DBOS cancellation is not a tool
failure, a tool's raised exception reaches the caller, queues, counted tokens, recovery's guard."""

from __future__ import annotations

from typing import Any

import anthropic
import anyio
import httpx2
import pytest
from anthropic.types import Message, MessageTokensCount
from dbos import DBOS
from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSUnexpectedStepError

from boundloop import AgentLoop, Budget, Observers, Policy, StopReason, ToolCall, tool
from boundloop.integrations.dbos import DurableLoop
from boundloop.testing import ScriptedClient
from tests.helpers import JSON, text, tool_use
from tests.integrations.conftest import Launch
from tests.integrations.test_replay import KeywordError

pytestmark = pytest.mark.asyncio_only  # DBOS runs workflows and steps on asyncio event loops


def loop_of(client: Any, tools: list[Any], name: str, **options: Any) -> AgentLoop:
    settings: JSON = {
        "model": "claude-sonnet-4-6",
        "budget": Budget(max_steps=4),
        "observers": Observers(metrics=None),
        "name": name,
    }
    return AgentLoop(client, tools=tools, **(settings | options))


async def test_a_model_error_is_recorded_and_replayed_without_calling_the_model(launch: Launch) -> None:
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    overloaded = anthropic.InternalServerError(
        "overloaded", response=httpx2.Response(529, request=request), body=None
    )
    client = ScriptedClient([overloaded])
    durable = DurableLoop(loop_of(client, [], "overloaded"))
    launch()
    first = await durable.run("Hello", task_id="overloaded")
    assert first.stop_reason is StopReason.FAILED
    assert [error.kind for error in first.state.errors] == ["model_api"]

    await DBOS.rewind_workflow_async("overloaded", start_step=2)  # past the model call: replayed
    again = await (await durable.retrieve("overloaded")).result()

    assert again.stop_reason is StopReason.FAILED
    assert again.state.stop_detail == first.state.stop_detail
    assert [error.kind for error in again.state.errors] == ["model_api"]
    assert len(client.requests) == 1


async def test_a_response_that_is_not_a_message_fails_the_run(launch: Launch) -> None:
    class Odd:
        def __init__(self) -> None:
            self.messages = self

        async def create(self, **request: Any) -> object:
            return {"not": "a message"}

    durable = DurableLoop(loop_of(Odd(), [], "odd"))
    launch()
    result = await durable.run("Hello", task_id="odd")
    assert result.stop_reason is StopReason.FAILED
    assert result.state.stop_detail == "the model call failed: TypeError"


async def test_a_cancelled_workflow_stops_and_is_not_reported_to_the_model(launch: Launch) -> None:
    """DBOS's cancellation surfaces at the next step; the loop does not take it for a tool error."""
    entered, release = anyio.Event(), anyio.Event()

    @tool
    async def wait() -> str:
        """Wait until released."""
        entered.set()
        await release.wait()
        return "released"

    client = ScriptedClient(
        [tool_use(("wait", {}, "toolu_wait")), tool_use(("wait", {}, "toolu_again")), text("x")]
    )
    durable = DurableLoop(loop_of(client, [wait], "cancelled"))
    launch()
    async with anyio.create_task_group() as group:
        outcome: list[BaseException] = []

        async def run() -> None:
            try:
                await durable.run("Wait", task_id="cancelled")
            except DBOSAwaitedWorkflowCancelledError as exc:
                outcome.append(exc)

        group.start_soon(run)
        await entered.wait()
        await DBOS.cancel_workflow_async("cancelled")
        release.set()
    assert len(outcome) == 1
    assert len(client.requests) == 1  # the model was not told about a failure
    assert await (await durable.retrieve("cancelled")).status() == "CANCELLED"


async def test_a_tool_exception_raised_from_the_run_reaches_the_caller_as_itself(launch: Launch) -> None:
    @tool
    async def broken(order_id: str) -> str:
        """Always fails."""
        raise KeywordError(f"no order {order_id}", code=404)

    client = ScriptedClient([tool_use(("broken", {"order_id": "O-9"}))])
    durable = DurableLoop(loop_of(client, [broken], "raising", policy=Policy(on_tool_error="raise")))
    launch()
    with pytest.raises(KeywordError, match="no order O-9") as caught:
        await durable.run("Break", task_id="raising")
    assert caught.value.code == 404
    with pytest.raises(KeywordError, match="no order O-9"):  # read back from DBOS's record
        await (await durable.retrieve("raising")).result()


async def test_a_run_on_a_queue_is_run_by_a_worker_of_the_queue(launch: Launch) -> None:
    client = ScriptedClient([text("queued answer")])
    durable = DurableLoop(loop_of(client, [], "queued"), name="queued-runs")
    assert durable.name == "queued-runs"
    assert "queued-runs" in repr(durable)
    launch()
    await DBOS.register_queue_async("runs", polling_interval_sec=0.05)

    run = await durable.enqueue("runs", "Answer", task_id="queued-1", metadata={"who": "test"})
    again = await durable.enqueue("runs", "Another goal", task_id="queued-1")
    result = await run.result()

    assert run.task_id == again.task_id == "queued-1"
    assert repr(run) == "DurableRun(task_id='queued-1')"
    assert result.answer == "queued answer"
    assert result.state.metadata == {"who": "test"}
    assert (await again.result()).answer == "queued answer"
    assert len(client.requests) == 1
    assert durable.loop.name == "queued"


async def test_counted_tokens_are_a_step(launch: Launch) -> None:
    class Counting:
        def __init__(self) -> None:
            self.scripted = ScriptedClient([text("counted")])
            self.messages = self
            self.counted = 0

        async def create(self, **request: Any) -> Message:
            return await self.scripted.messages.create(**request)

        async def count_tokens(self, **request: Any) -> MessageTokensCount:
            self.counted += 1
            return MessageTokensCount(input_tokens=12)

    client = Counting()
    budget = Budget(max_steps=2, max_total_tokens=100_000, count_tokens=True)
    durable = DurableLoop(loop_of(client, [], "counting", budget=budget))
    launch()
    result = await durable.run("Count", task_id="counting")
    assert result.answer == "counted"
    assert client.counted == 1
    steps = await DBOS.list_workflow_steps_async("counting")
    assert [s["function_name"] for s in steps] == [
        "boundloop.messages.count_tokens",
        "boundloop.messages.create",
    ]


async def test_recover_hands_over_only_another_workers_runs(launch: Launch) -> None:
    durable = DurableLoop(loop_of(ScriptedClient([]), [], "recovering"))
    launch()
    with pytest.raises(ValueError, match="this process"):
        await durable.recover(DBOS.executor_id)
    assert await durable.recover("nobody") == []


async def test_a_replay_that_diverges_fails_with_dbos_error_not_a_wrong_result(launch: Launch) -> None:
    """The approver says yes, then no on the replay: the call is not run, so the next step DBOS sees
    is a model call where it recorded the tool's. DBOS's error stops the workflow; the loop does
    not report it to the model as a failure of the model call."""
    answers = [True, False]

    async def approve(call: ToolCall) -> bool:
        return answers.pop(0)

    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        return f"refunded {order_id}"

    client = ScriptedClient([tool_use(("refund", {"order_id": "O-1"})), text("done"), text("done")])
    durable = DurableLoop(loop_of(client, [refund], "diverging", policy=Policy(approve=approve)))
    launch()
    assert (await durable.run("Refund", task_id="diverging")).answer == "done"

    await DBOS.rewind_workflow_async("diverging", start_step=3)  # the tool step stays recorded
    with pytest.raises(DBOSUnexpectedStepError):
        await (await durable.retrieve("diverging")).result()
    assert len(client.requests) == 2
