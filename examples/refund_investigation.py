"""The refund investigation, written as a library user writes it.

A bounded loop decides whether the refund evidence for one order is sufficient. The model
(here a `ScriptedClient`, so this runs with no API key and no network) reads the order, the
delivery status and the refund policy in one parallel batch, asks the customer one question,
drafts a recommendation for a human and answers. It never issues the refund: `issue_refund` is
forbidden, and an attempt would stop the run `policy_blocked` before any call of its batch runs.
This is the loop of `boundloop demo`, with the same tools, policy and budget: the demo's
scripts (`--scenario NAME`) end the same way on it.

    python examples/refund_investigation.py             # scripted, offline
    python examples/refund_investigation.py --live      # AsyncAnthropic, ANTHROPIC_API_KEY

or from the shell, with the live view, trace and metrics of the `boundloop` command:

    boundloop run refund_investigation:build_loop --app-dir examples \\
        --goal "Decide whether refund evidence is sufficient for order O-104."
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio

from boundloop import AgentLoop, Budget, Model, Policy, ScriptedClient, StopReason, ToolContext, tool

GOAL = "Decide whether refund evidence is sufficient for order O-104."

ORDERS = {
    "O-104": {
        "order_id": "O-104",
        "customer_id": "C-2291",
        "items": [
            {"name": "Trailhead 2 hiking boots", "price": 164.0},
            {"name": "Merino socks", "price": 25.0},
        ],
        "refund_request": {"reason": "Boots arrived with a split sole.", "opened_at": "2025-03-13"},
    }
}
DELIVERIES = {
    "O-104": {
        "status": "delivered",
        "delivered_at": "2025-03-11",
        "events": ["2025-03-09 damaged in transit: box crushed", "2025-03-11 delivered"],
    }
}
POLICY = [
    {"id": "RP-2.1", "text": "Damaged on arrival: full refund if reported within 14 days with evidence."},
    {"id": "RP-5.2", "text": "Refunds above EUR 100 need a human agent's approval."},
]


@tool
async def read_order(order_id: str) -> dict[str, Any]:
    """Read one order by id, with its open refund request."""
    return ORDERS[order_id]


@tool
async def read_delivery_status(order_id: str) -> dict[str, Any]:
    """Read the carrier's delivery status and tracking events for an order."""
    return DELIVERIES[order_id]


@tool
async def search_refund_policy(query: str) -> list[dict[str, str]]:
    """Search the refund policy for sections matching the query."""
    words = query.lower().split()
    return [section for section in POLICY if any(word in section["text"].lower() for word in words)]


@tool
def ask_customer_clarifying_question(customer_id: str, question: str) -> str:
    """Ask the customer one question and return their reply."""
    return "The boots came in the parcel of the 11th; the left sole is split. Unworn."


@tool(side_effect=True)
def draft_refund_recommendation(
    context: ToolContext, order_id: str, recommendation: str, amount: float, rationale: str
) -> str:
    """Draft a refund recommendation for a human agent; it issues nothing."""
    # A side-effecting tool gets an idempotency key: a retried call must not draft twice.
    return f"draft {context.idempotency_key} for {order_id}: {recommendation} EUR {amount:.2f} ({rationale})"


SCRIPT: list[dict[str, Any]] = [
    {
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "Reading the order, the delivery and the policy."},
            {"type": "tool_use", "id": "t1", "name": "read_order", "input": {"order_id": "O-104"}},
            {"type": "tool_use", "id": "t2", "name": "read_delivery_status", "input": {"order_id": "O-104"}},
            {"type": "tool_use", "id": "t3", "name": "search_refund_policy", "input": {"query": "damaged"}},
        ],
    },
    {
        "stop_reason": "tool_use",
        "content": [
            {
                "type": "tool_use",
                "id": "t4",
                "name": "ask_customer_clarifying_question",
                "input": {"customer_id": "C-2291", "question": "Were the boots worn?"},
            },
        ],
    },
    {
        "stop_reason": "tool_use",
        "content": [
            {
                "type": "tool_use",
                "id": "t6",
                "name": "draft_refund_recommendation",
                "input": {
                    "order_id": "O-104",
                    "recommendation": "approve",
                    "amount": 164.0,
                    "rationale": "carrier damage, RP-2.1",
                },
            }
        ],
    },
    {
        "stop_reason": "end_turn",
        "content": [
            {
                "type": "text",
                "text": "Sufficient: the carrier recorded damage and the claim is within 14 days (RP-2.1). "
                "Recommend refunding EUR 164.00 for the boots; a human must approve (RP-5.2).",
            }
        ],
    },
]


def build_loop(client: Model | None = None, model: str = "claude-sonnet-4-6") -> AgentLoop:
    """The refund-investigation loop; scripted unless a client is given."""
    return AgentLoop(
        ScriptedClient(SCRIPT) if client is None else client,
        model=model,
        tools=[
            read_order,
            read_delivery_status,
            search_refund_policy,
            ask_customer_clarifying_question,
            draft_refund_recommendation,
        ],
        budget=Budget(max_steps=8, max_tool_calls=12, timeout_s=60),
        policy=Policy(
            allowed={
                "read_order",
                "read_delivery_status",
                "search_refund_policy",
                "ask_customer_clarifying_question",
                "draft_refund_recommendation",
            },
            # An attempt stops the run `policy_blocked` (on_forbidden="report" would tell the
            # model "not allowed" and go on instead).
            forbidden={"issue_refund", "change_payment_method", "update_policy"},
            required_evidence={"read_order", "read_delivery_status"},
        ),
        system="You investigate refund requests. You never issue refunds: draft a recommendation.",
        name="refund_investigation",
    )


async def main(live: bool = False) -> int:
    """Run the investigation and print what happened; exit 0 when it completed."""
    client: Model | None = None
    if live:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            print("--live needs ANTHROPIC_API_KEY; without --live the scripted model runs", file=sys.stderr)
            return 2
        from anthropic import AsyncAnthropic

        async with AsyncAnthropic() as api:
            result = await build_loop(api).run(GOAL)
    else:
        result = await build_loop(client).run(GOAL)

    for observation in result.state.observations:
        print(f"step {observation.step}: {observation.tool:<34} {observation.outcome}")
    print(f"stop reason: {result.stop_reason}")
    print(f"answer: {result.answer}")
    print(f"model calls: {result.state.step}, tool calls: {result.state.tool_calls}")
    return 0 if result.stop_reason is StopReason.COMPLETED else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main, "--live" in sys.argv[1:]))
