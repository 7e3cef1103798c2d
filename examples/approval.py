"""A human approves one refund and denies another, between two calls of the loop.

`issue_refund` needs approval and no approver runs in-process, so the run stops with
`needs_human`: the proposed calls are in `state.pending_approvals` and the state is in the
SQLite store. Later — another request, another process — `loop.resume(task_id, approvals=...)`
continues the run: the approved call runs (once per idempotency key), the denied one is
answered with the reviewer's reason, which the model reads, and the run goes on to its answer.

    python examples/approval.py
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from boundloop import (
    AgentLoop,
    Budget,
    LoopResult,
    Observers,
    ScriptedClient,
    SQLiteStore,
    StopReason,
    ToolContext,
    tool,
)

REFUNDS: dict[str, str] = {}
"""The payment system's side: refunds applied, by idempotency key."""


@tool(side_effect=True, requires_approval=True)
async def issue_refund(order_id: str, amount_eur: float, ctx: ToolContext) -> str:
    """Refund an order; a human approves every refund."""
    REFUNDS.setdefault(ctx.idempotency_key, f"{order_id}: EUR {amount_eur:.2f}")
    return f"refunded EUR {amount_eur:.2f} on {order_id}"


SCRIPT: list[Mapping[str, Any]] = [
    {
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "Both orders qualify; refunding them."},
            {
                "type": "tool_use",
                "id": "t1",
                "name": "issue_refund",
                "input": {"order_id": "O-104", "amount_eur": 40},
            },
            {
                "type": "tool_use",
                "id": "t2",
                "name": "issue_refund",
                "input": {"order_id": "O-221", "amount_eur": 900},
            },
        ],
    },
    {
        "stop_reason": "end_turn",
        "content": [
            {
                "type": "text",
                "text": "Refunded EUR 40.00 on O-104. O-221 was not refunded: a reviewer declined it "
                "(over the EUR 500 limit without a manager); I have told the customer it is under review.",
            }
        ],
    },
]


def build_loop(store: SQLiteStore, script: list[Mapping[str, Any]]) -> AgentLoop:
    """The refund loop, checkpointing to `store`; `script` is what the model says next."""
    return AgentLoop(
        ScriptedClient(script),  # or anthropic.AsyncAnthropic()
        model="claude-sonnet-4-6",
        tools=[issue_refund],
        budget=Budget(max_steps=4, max_tool_calls=4, timeout_s=30),
        store=store,
        observers=Observers(metrics=None),
        name="approval",
    )


async def run(directory: Path) -> LoopResult:
    """Run until the loop waits for a human, then resume it with the reviewer's decisions."""
    store = SQLiteStore(directory / "runs.db")
    first = await build_loop(store, SCRIPT[:1]).run("Refund O-104 and O-221.", task_id="refunds-42")
    print(f"stop reason: {first.stop_reason}")
    for pending in first.state.pending_approvals:
        print(f"  waiting: {pending.tool_use_id} {pending.tool}({pending.input})")
    print(f"refunds so far: {len(REFUNDS)}")

    # Later, in any process with the same store: the reviewer's decisions.
    decisions: dict[str, bool | str] = {"t1": True, "t2": "over the EUR 500 limit without a manager"}
    return await build_loop(store, SCRIPT[1:]).resume("refunds-42", approvals=decisions)


async def main() -> int:
    """Run the approval round trip in a temporary directory and print what happened."""
    async with anyio.TemporaryDirectory() as directory:
        result = await run(Path(directory))
    for observation in result.state.observations:
        print(f"  {observation.tool_use_id} {observation.outcome}: {observation.content}")
    print(f"refunds applied: {sorted(REFUNDS.values())}")
    print(f"stop reason: {result.stop_reason}")
    print(f"answer: {result.answer}")
    return 0 if result.stop_reason is StopReason.COMPLETED else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
