"""A run stopped `cancelled` can be resumed by whoever stopped it: it goes on at `assemble` with
its transcript as the cancel left it (the open calls answered `cancelled`), its budget checked
before the next model call, and every call the model proposes then decided as any call is:
the policy, the approvals and the budget hold as on every resume."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from boundloop import (
    AgentLoop,
    ApprovalMissing,
    Budget,
    MemoryStore,
    NotResumable,
    Observers,
    Policy,
    ScriptedClient,
    StopReason,
    ToolContext,
    tool,
)
from boundloop.events import Resumed, ToolResult
from tests.helpers import assert_valid_transcript, text, tool_use

WAIT_S = 10.0


class Shop:
    """What the tools did, and the gate the slow lookup waits on."""

    def __init__(self) -> None:
        self.refunds: list[str] = []
        self.looking = anyio.Event()
        self.lookups = 0

    def tools(self) -> list[Any]:
        @tool
        async def lookup(order_id: str) -> str:
            """Look an order up (the first lookup hangs until the run is cancelled)."""
            self.lookups += 1
            if self.lookups == 1:
                self.looking.set()
                await anyio.sleep_forever()
            return f"{order_id}: delivered damaged"

        @tool(side_effect=True)
        async def refund(order_id: str, context: ToolContext) -> str:
            """Refund an order."""
            self.refunds.append(context.idempotency_key)
            return f"refunded {order_id}"

        return [lookup, refund]


def make_loop(shop: Shop, store: MemoryStore, script: list[dict[str, Any]], **options: Any) -> AgentLoop:
    options.setdefault("budget", Budget(max_steps=6))
    return AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=shop.tools(),
        observers=Observers(metrics=None),
        store=store,
        **options,
    )


async def cancelled_run(shop: Shop, store: MemoryStore, **options: Any) -> None:
    """A run stopped `cancelled` while its lookup ran (the cancel answered it `cancelled`)."""
    cancel = anyio.Event()
    loop = make_loop(shop, store, [tool_use(("lookup", {"order_id": "O-1"}))], **options)

    async def stop_it() -> None:
        await shop.looking.wait()
        cancel.set()

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as group:
            group.start_soon(stop_it)
            result = await loop.run("Refund O-1 if damaged", task_id="t", cancel=cancel)
    assert result.stop_reason is StopReason.CANCELLED


async def test_a_cancelled_run_resumes_at_the_next_model_call() -> None:
    """The resumed run's first model call sees the interrupted lookup answered `cancelled`; the
    model looks again and completes; the `resumed` event says it continued from `cancelled`."""
    shop, store = Shop(), MemoryStore()
    await cancelled_run(shop, store)
    script = [tool_use(("lookup", {"order_id": "O-1"}, "toolu_again")), text("O-1 arrived damaged.")]
    loop = make_loop(shop, store, script)
    with anyio.fail_after(WAIT_S):
        result = await loop.resume("t")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.state.step == 3  # the counters carried over: one step before the cancel
    resumed = result.events[0]
    assert isinstance(resumed, Resumed)
    assert (resumed.from_phase, resumed.from_stop, resumed.interrupted) == ("stopped", "cancelled", False)
    client = loop.config.client
    assert isinstance(client, ScriptedClient)
    sent = client.requests[0]["messages"][-1]["content"]
    assert sent[0]["type"] == "tool_result"
    assert sent[0]["is_error"] is True
    assert "interrupted while running" in str(sent[0]["content"])
    assert shop.lookups == 2
    assert_valid_transcript(result.state.messages)
    results = [event for event in result.events if isinstance(event, ToolResult)]
    assert [(event.tool_use_id, event.outcome) for event in results] == [("toolu_again", "ok")]


async def test_a_call_proposed_after_the_resume_still_needs_its_approval() -> None:
    """Fail closed: the resumed run's refund needs a human as any refund does; it waits."""
    shop, store = Shop(), MemoryStore()
    policy = Policy(requires_approval={"refund"})
    await cancelled_run(shop, store, policy=policy)
    loop = make_loop(shop, store, [tool_use(("refund", {"order_id": "O-1"}))], policy=policy)
    result = await loop.resume("t")
    assert result.stop_reason is StopReason.NEEDS_HUMAN
    assert [pending.tool for pending in result.state.pending_approvals] == ["refund"]
    assert shop.refunds == []


async def test_a_forbidden_call_after_the_resume_does_not_run() -> None:
    shop, store = Shop(), MemoryStore()
    await cancelled_run(shop, store)
    loop = make_loop(
        shop,
        store,
        [tool_use(("refund", {"order_id": "O-1"})), text("I may not refund.")],
        policy=Policy(forbidden={"refund"}, on_forbidden="report"),
    )
    result = await loop.resume("t")
    assert result.stop_reason is StopReason.COMPLETED
    assert shop.refunds == []


async def test_a_spent_budget_stops_the_resumed_run_before_any_model_call() -> None:
    """The budget is checked before the next model call: with the steps spent, the resume stops
    `max_steps` and asks the model nothing."""
    shop, store = Shop(), MemoryStore()
    await cancelled_run(shop, store, budget=Budget(max_steps=1))
    loop = make_loop(shop, store, [], budget=Budget(max_steps=1))
    result = await loop.resume("t")
    assert result.stop_reason is StopReason.MAX_STEPS
    client = loop.config.client
    assert isinstance(client, ScriptedClient)
    assert client.requests == []


@pytest.mark.parametrize(
    "decisions", [{"approvals": {"toolu_0_lookup": True}}, {"reply": "yes"}], ids=["approvals", "reply"]
)
async def test_a_cancelled_run_takes_no_decision(decisions: dict[str, Any]) -> None:
    """Its calls were answered at the cancel: a decision for one is refused and the run stays
    cancelled."""
    shop, store = Shop(), MemoryStore()
    await cancelled_run(shop, store)
    loop = make_loop(shop, store, [text("never")])
    with pytest.raises(ApprovalMissing, match="cancelled and waits for no decision"):
        await loop.resume("t", **decisions)
    state = await store.load("t")
    assert state is not None
    assert state.stop_reason is StopReason.CANCELLED


async def test_a_completed_run_is_still_not_resumable() -> None:
    shop, store = Shop(), MemoryStore()
    loop = make_loop(shop, store, [text("done")])
    await loop.run("goal", task_id="done")
    with pytest.raises(NotResumable, match="completed"):
        await make_loop(shop, store, [text("again")]).resume("done")
