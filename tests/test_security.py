"""Guarantees docs/security.md states that no other test pinned down, and one limit it states.

The order of the validation checks, that a resumed run's timeout counts its earlier sessions,
that only `True` approves on resume too, that a sync tool past its timeout is reported as
having an unknown effect (and does finish), and what a checkpoint signature does not prove.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.to_thread
import pytest

from boundloop import (
    AgentLoop,
    ApprovalMissing,
    Budget,
    CheckpointCorrupt,
    CheckpointStore,
    MemoryStore,
    Observers,
    Policy,
    ScriptedClient,
    StopReason,
    ToolContext,
    tool,
)
from boundloop.checkpoint.signed import SignedStore
from boundloop.events import Validation
from tests.helpers import text, tool_use

JSON = dict[str, Any]
KEY = b"the operators' checkpoint key"
REFUND = tool_use(("issue_refund", {"order_id": "O-1"}, "toolu_refund"))
REFUND_STEP = 1
"""The step of the refund call: the first model call."""
NOT_A_DECISION: Any = 1
"""Neither a bool nor a string: what a caller without type checking might pass."""


class Ledger:
    """What the tools did: the orders read, and the idempotency key of every refund."""

    def __init__(self) -> None:
        self.reads: list[str] = []
        self.refunds: list[str] = []


def refund_loop(ledger: Ledger, store: CheckpointStore, script: list[JSON], **options: Any) -> AgentLoop:
    """A read, an export outside the allow-list, and a refund that needs a human's approval."""

    @tool
    async def read_order(order_id: str) -> str:
        """Read an order."""
        ledger.reads.append(order_id)
        return f"{order_id}: delivered"

    @tool
    async def export_data(table: str) -> str:
        """Export a table."""
        raise AssertionError("never allowed")

    @tool(side_effect=True, requires_approval=True)
    async def issue_refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order."""
        ledger.refunds.append(ctx.idempotency_key)
        return f"refunded {order_id}"

    options.setdefault("budget", Budget(max_steps=6))
    return AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=[read_order, export_data, issue_refund],
        store=store,
        observers=Observers(metrics=None),
        **options,
    )


async def test_the_checks_run_in_the_documented_order() -> None:
    """Each call breaks two checks; the earlier one answers it: forbidden before the registry,
    the registry before the allow-list, the allow-list before the schema, the schema before
    approval. Only the sound read runs, and no call waits for a human."""
    ledger = Ledger()
    batch = tool_use(
        ("wipe", {}),  # forbidden, and no such tool
        ("ghost", {}),  # no such tool, and not allowed
        ("export_data", {"table": 7}),  # not allowed, and not its schema
        ("issue_refund", {}),  # not its schema, and needs approval
        ("read_order", {"order_id": "O-1"}),
    )
    policy = Policy(forbidden={"wipe"}, allowed={"read_order", "issue_refund"}, on_forbidden="report")
    loop = refund_loop(ledger, MemoryStore(), [batch, text("done")], policy=policy)
    result = await loop.run("Check O-1.")
    assert result.stop_reason is StopReason.COMPLETED
    validation = next(event for event in result.events if isinstance(event, Validation))
    calls = validation.calls
    assert [call.decision for call in calls] == ["deny", "deny", "deny", "deny", "execute"]
    reasons = [call.reason or "" for call in calls]
    assert "wipe is forbidden by policy" in reasons[0]
    assert "unknown tool 'ghost'" in reasons[1]
    assert "export_data is not allowed" in reasons[2]
    assert "invalid input for issue_refund" in reasons[3]
    assert ledger.reads == ["O-1"]
    assert ledger.refunds == []
    assert result.state.pending_approvals == []


async def test_a_resumed_run_counts_the_time_of_its_earlier_sessions() -> None:
    """The stored run had used its whole `timeout_s` before it waited: the approved refund does
    not run on a fresh clock; the resumed run stops with `timeout`."""
    ledger = Ledger()
    store = MemoryStore()
    budget = Budget(max_steps=6, timeout_s=60)
    first = await refund_loop(ledger, store, [REFUND], budget=budget).run("Refund O-1?", task_id="t")
    assert first.stop_reason is StopReason.NEEDS_HUMAN
    waiting = await store.load("t")
    assert waiting is not None
    waiting.elapsed_s = 60.0  # what sixty seconds of earlier sessions leave in the row
    await store.save(waiting)
    loop = refund_loop(ledger, store, [text("done")], budget=budget)
    result = await loop.resume("t", approvals={"toolu_refund": True})
    assert result.stop_reason is StopReason.TIMEOUT
    assert ledger.refunds == []


async def test_on_resume_too_only_true_approves() -> None:
    """A decision that is neither a bool nor a string is refused and the run keeps waiting;
    the string "yes" is a denial whose reason the model sees."""
    ledger = Ledger()
    store = MemoryStore()
    first = await refund_loop(ledger, store, [REFUND]).run("Refund O-1?", task_id="t")
    assert first.stop_reason is StopReason.NEEDS_HUMAN
    loop = refund_loop(ledger, store, [text("not refunded")])
    with pytest.raises(ApprovalMissing, match="True, False or a reason string"):
        await loop.resume("t", approvals={"toolu_refund": NOT_A_DECISION})
    assert [run.status for run in await store.list()] == ["waiting"]
    result = await loop.resume("t", approvals={"toolu_refund": "yes"})
    assert result.stop_reason is StopReason.COMPLETED
    assert ledger.refunds == []
    answer = result.state.observations[-1]
    assert answer.outcome == "denied"
    assert "issue_refund was denied by a human: yes; not run" in str(answer.content)


async def test_a_sync_tool_past_its_timeout_is_answered_with_an_unknown_effect_and_may_finish() -> None:
    """A thread cannot be cancelled: the model is told the effect is unknown, and the thread
    does finish its work after the run went on."""
    release = threading.Event()
    finished = threading.Event()

    @tool(timeout_s=0.01)
    def charge(order_id: str) -> str:
        """Charge an order (blocks until released)."""
        release.wait(30)
        finished.set()
        return f"charged {order_id}"

    loop = AgentLoop(
        ScriptedClient([tool_use(("charge", {"order_id": "O-1"})), text("done")]),
        model="claude-sonnet-4-6",
        tools=[charge],
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
    )
    result = await loop.run("Charge O-1.")
    assert result.stop_reason is StopReason.COMPLETED
    observation = result.state.observations[0]
    assert observation.outcome == "timeout"
    assert "the worker thread may still finish, so its effect is unknown" in str(observation.content)
    assert not finished.is_set()
    release.set()
    assert await anyio.to_thread.run_sync(finished.wait, 30)  # the effect happens after all


async def test_a_signature_proves_the_writer_not_that_the_row_is_the_newest() -> None:
    """An older signed row of the same task, put back, verifies: the refund it waited for runs
    again, under the same idempotency key (a tool that honours the key applies it once). The
    same row under another task id is refused."""
    ledger = Ledger()
    store = MemoryStore()
    first = await refund_loop(ledger, SignedStore(store, KEY), [REFUND]).run("Refund O-1?", task_id="t")
    assert first.stop_reason is StopReason.NEEDS_HUMAN
    older = await store.load("t")  # the row as stored, its signature in it
    assert older is not None
    assert older.signature is not None
    done = await refund_loop(ledger, SignedStore(store, KEY), [text("refunded")]).resume(
        "t", approvals={"toolu_refund": True}
    )
    assert done.stop_reason is StopReason.COMPLETED
    await store.save(older)  # someone who can write the store puts the older row back
    again = await refund_loop(ledger, SignedStore(store, KEY), [text("refunded")]).resume(
        "t", approvals={"toolu_refund": True}
    )
    assert again.stop_reason is StopReason.COMPLETED
    assert len(ledger.refunds) == 2
    assert ledger.refunds[0] == ledger.refunds[1] == f"t:{REFUND_STEP}:toolu_refund"
    store.write_raw("t-other", older.to_json())
    signed = refund_loop(ledger, SignedStore(store, KEY), []).store
    assert signed is not None
    with pytest.raises(CheckpointCorrupt) as moved:
        await signed.load("t-other")
    assert moved.value.field == "task_id"
