"""The refund-investigation demo: tools over in-memory data and a scripted conversation.

`boundloop demo` runs it on the embedded `ScriptedClient`, with no API key and no network
(`--live` sends the same tools, policy and budget to the real API). The script is what a
model would plausibly answer, turn by turn, as Messages API response dicts:

1. one turn asking for three tools at once (order, delivery status, refund policy), which the
   loop runs concurrently and answers in one user message;
2. a clarifying question to the customer;
3. a draft recommendation for a human to approve (the model never issues a refund: the payment
   action `issue_refund` is forbidden, and an attempt would stop the run `policy_blocked`);
4. the final answer (`end_turn`), accepted because the required evidence was read.

`SCENARIOS` holds a script for each of the five refund stop reasons (`completed`, this one,
and `policy_blocked`, `needs_human`, `evidence_missing`, `max_steps`: boundloop/cli/_scenarios.py);
`boundloop demo --scenario NAME` runs one.

Public, as `boundloop.cli.demo`: the tests and examples use its data and `demo_loop`;
`examples/refund_investigation.py` shows the same loop written from scratch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import anyio

from .. import (
    AgentLoop,
    Budget,
    Model,
    Observers,
    Policy,
    ScriptedClient,
    Tool,
    ToolContext,
    tool,
)
from ._defaults import DEMO_MODEL
from ._scenarios import scenarios

__all__ = [
    "ALLOWED",
    "ANSWER",
    "CUSTOMER_REPLIES",
    "DELIVERIES",
    "DRAFTS",
    "FORBIDDEN",
    "GOAL",
    "LATENCY_S",
    "MODEL",
    "NAME",
    "ORDERS",
    "POLICY_SECTIONS",
    "REQUIRED_EVIDENCE",
    "SCENARIOS",
    "SCRIPT",
    "SYSTEM",
    "TOOLS",
    "ask_customer_clarifying_question",
    "demo_budget",
    "demo_loop",
    "demo_policy",
    "draft_refund_recommendation",
    "read_delivery_status",
    "read_order",
    "search_refund_policy",
]

GOAL: Final = "Decide whether refund evidence is sufficient for order O-104."
MODEL: Final = DEMO_MODEL
"""The model `--live` calls by default (defined in `_defaults`, which `--help` reads)."""
NAME: Final = "refund_investigation"
SYSTEM: Final = (
    "You investigate refund requests for an online outdoor-gear shop. Read the order, the "
    "delivery status and the refund policy before you conclude. You may ask the customer one "
    "clarifying question. You never issue refunds yourself: draft a recommendation for a "
    "human agent, then answer with your decision and the evidence for it."
)
ALLOWED: Final = frozenset(
    {
        "read_order",
        "read_delivery_status",
        "search_refund_policy",
        "ask_customer_clarifying_question",
        "draft_refund_recommendation",
    }
)
FORBIDDEN: Final = frozenset({"issue_refund", "change_payment_method", "update_policy"})
REQUIRED_EVIDENCE: Final = frozenset({"read_order", "read_delivery_status"})

LATENCY_S: Final = {"read_order": 0.12, "read_delivery_status": 0.2, "search_refund_policy": 0.08}
"""Simulated back-end latency, so the parallel batch is visible: ~0.2 s for three calls."""

ORDERS: Final[dict[str, dict[str, Any]]] = {
    "O-104": {
        "order_id": "O-104",
        "customer": {"id": "C-2291", "name": "Dana Whitfield", "since": "2021-05-02"},
        "placed_at": "2025-03-04T09:12:00Z",
        "items": [
            {"sku": "BT-TRAIL2-W9", "name": "Trailhead 2 hiking boots, women's 9", "qty": 1, "price": 164.0},
            {"sku": "SK-MERINO-M", "name": "Merino hiking socks (2-pack)", "qty": 1, "price": 25.0},
        ],
        "total": 189.0,
        "currency": "EUR",
        "payment": {"method": "card", "last4": "4417", "captured": True},
        "refund_request": {
            "opened_at": "2025-03-13T17:40:00Z",
            "reason": "Boots arrived damaged: the left sole is split at the toe.",
            "amount_requested": 164.0,
            "attachments": ["IMG_2231.jpg", "IMG_2232.jpg"],
        },
        "previous_refunds": 0,
    },
}

DELIVERIES: Final[dict[str, dict[str, Any]]] = {
    "O-104": {
        "carrier": "DPD",
        "tracking": "01524000383391",
        "status": "delivered",
        "delivered_at": "2025-03-11T14:02:00Z",
        "events": [
            {"at": "2025-03-05T18:20:00Z", "what": "picked up"},
            {"at": "2025-03-09T07:55:00Z", "what": "damaged in transit: outer box crushed, re-taped at hub"},
            {"at": "2025-03-11T14:02:00Z", "what": "delivered, signed by D. WHITFIELD"},
        ],
    },
}

POLICY_SECTIONS: Final = (
    {
        "id": "RP-2.1",
        "title": "Damaged on arrival",
        "text": "Items that arrive damaged are refunded in full when the customer reports the damage "
        "within 14 days of delivery and the damage is shown by photos or a carrier damage record.",
    },
    {
        "id": "RP-2.4",
        "title": "Partial orders",
        "text": "Only the damaged items are refunded; undamaged items in the same order are not.",
    },
    {
        "id": "RP-5.2",
        "title": "Approval",
        "text": "Refunds above EUR 100 are approved by a human agent before they are issued.",
    },
    {
        "id": "RP-3.1",
        "title": "Change of mind",
        "text": "Unworn items may be returned within 30 days; the customer pays return shipping.",
    },
)

CUSTOMER_REPLIES: Final = {
    "C-2291": "Yes, they were in the box that came on the 11th, I opened it the same evening. The "
    "left boot's sole is split at the toe. I haven't worn them; the socks are fine.",
}


@tool
async def read_order(order_id: str) -> dict[str, Any]:
    """Read one order by id: customer, items, payment and the open refund request."""
    await anyio.sleep(LATENCY_S["read_order"])
    if order_id not in ORDERS:
        raise KeyError(f"no order {order_id}")
    return ORDERS[order_id]


@tool
async def read_delivery_status(order_id: str) -> dict[str, Any]:
    """Read the carrier's tracking events and delivery status for an order."""
    await anyio.sleep(LATENCY_S["read_delivery_status"])
    if order_id not in DELIVERIES:
        raise KeyError(f"no shipment for order {order_id}")
    return DELIVERIES[order_id]


@tool
async def search_refund_policy(query: str) -> list[dict[str, str]]:
    """Search the refund policy; returns the matching sections, best first."""
    await anyio.sleep(LATENCY_S["search_refund_policy"])
    words = {word.strip(".,").lower() for word in query.split()}

    def score(section: dict[str, str]) -> int:
        text = f"{section['title']} {section['text']}".lower()
        return sum(word in text for word in words)

    ranked = sorted(POLICY_SECTIONS, key=score, reverse=True)
    return [section for section in ranked if score(section) > 0][:3]


@tool
def ask_customer_clarifying_question(customer_id: str, question: str) -> str:
    """Ask the customer one question on the support ticket and return their reply."""
    return CUSTOMER_REPLIES.get(customer_id, "The customer has not replied yet.")


DRAFTS: dict[str, dict[str, Any]] = {}
"""Drafted recommendations by idempotency key: a retried call returns the draft it made."""


@tool(side_effect=True)
def draft_refund_recommendation(
    context: ToolContext, order_id: str, recommendation: str, amount: float, rationale: str
) -> dict[str, Any]:
    """Draft a refund recommendation for a human agent to approve; it does not issue anything."""
    key = context.idempotency_key
    if key not in DRAFTS:
        DRAFTS[key] = {
            "draft_id": f"RR-{order_id}-{len(DRAFTS) + 1}",
            "order_id": order_id,
            "recommendation": recommendation,
            "amount": amount,
            "rationale": rationale,
            "status": "awaiting human approval",
        }
    return DRAFTS[key]


TOOLS: Final[tuple[Tool, ...]] = (
    read_order,
    read_delivery_status,
    search_refund_policy,
    ask_customer_clarifying_question,
    draft_refund_recommendation,
)

ANSWER: Final = (
    "Evidence is sufficient: recommend a refund of EUR 164.00 for the Trailhead 2 boots on order "
    "O-104 (not the socks). The carrier recorded damage in transit on 9 March (box crushed), the "
    "parcel was delivered on 11 March and the damage was reported on 13 March, within the 14 days "
    "of policy RP-2.1; the customer's photos and reply confirm a split sole on unworn boots. "
    "Per RP-2.4 only the boots are refunded, and per RP-5.2 a human agent must approve: the draft "
    "is waiting for them. I did not issue the refund."
)


def _usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens}


SCRIPT: Final[tuple[dict[str, Any], ...]] = (
    {
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "I'll read the order, its delivery history and the refund policy."},
            {"type": "tool_use", "id": "toolu_01", "name": "read_order", "input": {"order_id": "O-104"}},
            {
                "type": "tool_use",
                "id": "toolu_02",
                "name": "read_delivery_status",
                "input": {"order_id": "O-104"},
            },
            {
                "type": "tool_use",
                "id": "toolu_03",
                "name": "search_refund_policy",
                "input": {"query": "damaged on arrival refund photos carrier"},
            },
        ],
        "usage": _usage(1180, 164),
    },
    {
        "stop_reason": "tool_use",
        "content": [
            {
                "type": "text",
                "text": "The carrier logged damage in transit and the report is within 14 days. I'll confirm "
                "the details with the customer.",
            },
            {
                "type": "tool_use",
                "id": "toolu_04",
                "name": "ask_customer_clarifying_question",
                "input": {
                    "customer_id": "C-2291",
                    "question": "Did the boots arrive in the delivery of 11 March, and have they been worn?",
                },
            },
        ],
        "usage": _usage(2410, 151),
    },
    {
        "stop_reason": "tool_use",
        "content": [
            {
                "type": "text",
                "text": "The customer confirms it. I may not issue refunds: I'll draft a recommendation "
                "for a human agent.",
            },
            {
                "type": "tool_use",
                "id": "toolu_06",
                "name": "draft_refund_recommendation",
                "input": {
                    "order_id": "O-104",
                    "recommendation": "approve",
                    "amount": 164.0,
                    "rationale": "Damage recorded by the carrier (RP-2.1), reported within 14 days, "
                    "photos attached; boots only (RP-2.4); above EUR 100 so human approval (RP-5.2).",
                },
            },
        ],
        "usage": _usage(2780, 182),
    },
    {
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": ANSWER}],
        "usage": _usage(2990, 171),
    },
)
"""The model's turns, as Messages API response dicts."""

SCENARIOS: Final[Mapping[str, tuple[dict[str, Any], ...]]] = {"completed": SCRIPT, **scenarios(SCRIPT[0])}
"""The script of each scenario, by the stop reason it ends with (`completed` is `SCRIPT`)."""


def demo_budget() -> Budget:
    """The demo's limits: 8 model calls, 12 tool calls, one minute."""
    return Budget(max_steps=8, max_tool_calls=12, timeout_s=60)


def demo_policy() -> Policy:
    """The demo's policy: the five investigation tools; refunds, payments and policy edits forbidden
    (an attempt stops the run `policy_blocked`)."""
    return Policy(allowed=ALLOWED, forbidden=FORBIDDEN, required_evidence=REQUIRED_EVIDENCE)


def demo_loop(
    client: Model | None = None,
    *,
    model: str = MODEL,
    observers: Observers = Observers(),
    scenario: str = "completed",
) -> AgentLoop:
    """The refund-investigation loop, on a fresh `ScriptedClient` of `SCRIPT` unless a client is given.

    Args:
        client: the model client; default: the scenario's scripted conversation (no network).
        scenario: which script the scripted client plays (a key of `SCENARIOS`).
        model: the model name sent with every request.
        observers: the loop's metrics, tracing and event hook (default: metrics on the
            process's default registry, the global tracer provider when one is set, no hook).

    Returns:
        A loop ready to `run(GOAL)`.
    """
    return AgentLoop(
        ScriptedClient(SCENARIOS[scenario], model=model) if client is None else client,
        model=model,
        tools=TOOLS,
        budget=demo_budget(),
        policy=demo_policy(),
        system=SYSTEM,
        max_tokens=2048,
        name=NAME,
        observers=observers,
    )
