"""Several slow tools answered in one turn.

The model asks for four lookups in one response. boundloop runs every `tool_use` block of a
response concurrently in one anyio task group (sync tools in worker threads) and answers all
of them in ONE user message, in block order. Four 0.3 s lookups take about 0.3 s, not 1.2 s.

    python examples/parallel_tools.py
"""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio

from boundloop import AgentLoop, Budget, LoopResult, ScriptedClient, StopReason, tool
from boundloop.events import ToolResult

LATENCY_S = 0.3
"""How long each back end takes to answer."""


@tool
async def warehouse_stock(sku: str) -> dict[str, Any]:
    """Units in stock for a SKU, per warehouse."""
    await anyio.sleep(LATENCY_S)
    return {"sku": sku, "berlin": 12, "lyon": 0}


@tool
async def carrier_quote(destination: str) -> dict[str, Any]:
    """The cheapest carrier quote to a destination."""
    await anyio.sleep(LATENCY_S)
    return {"destination": destination, "carrier": "DPD", "eur": 6.9, "days": 2}


@tool
async def exchange_rate(currency: str) -> float:
    """EUR -> currency exchange rate."""
    await anyio.sleep(LATENCY_S)
    return {"CHF": 0.94, "GBP": 0.85}.get(currency, 1.0)


@tool
def customer_tier(customer_id: str) -> str:
    """The loyalty tier of a customer (a blocking client: runs in a worker thread)."""
    # A sync handler is run with anyio.to_thread, so a blocking call here never stalls the loop.
    time.sleep(LATENCY_S)  # noqa: TID251 - stands in for a blocking SDK call, off the event loop
    return "gold" if customer_id == "C-2291" else "standard"


SCRIPT: list[dict[str, Any]] = [
    {
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "I'll check stock, shipping, currency and tier at once."},
            {"type": "tool_use", "id": "t1", "name": "warehouse_stock", "input": {"sku": "BT-TRAIL2-W9"}},
            {"type": "tool_use", "id": "t2", "name": "carrier_quote", "input": {"destination": "Zurich"}},
            {"type": "tool_use", "id": "t3", "name": "exchange_rate", "input": {"currency": "CHF"}},
            {"type": "tool_use", "id": "t4", "name": "customer_tier", "input": {"customer_id": "C-2291"}},
        ],
    },
    {
        "stop_reason": "end_turn",
        "content": [
            {
                "type": "text",
                "text": "In stock in Berlin; DPD ships to Zurich in 2 days for EUR 6.90 (CHF 6.49). "
                "Gold customer: shipping is free.",
            }
        ],
    },
]


def build_loop() -> AgentLoop:
    """A loop whose model asks for four slow lookups in one turn."""
    return AgentLoop(
        ScriptedClient(SCRIPT),
        model="claude-sonnet-4-6",
        tools=[warehouse_stock, carrier_quote, exchange_rate, customer_tier],
        budget=Budget(max_steps=3, max_tool_calls=8, timeout_s=10),
        name="parallel_tools",
    )


async def run() -> LoopResult:
    """Run the loop and return its result."""
    return await build_loop().run("Can we ship the Trailhead 2 boots to C-2291 in Zurich, and at what cost?")


async def main() -> int:
    """Run, then show that the four calls shared one turn and one answering message."""
    started = time.perf_counter()
    result = await run()
    wall = time.perf_counter() - started

    durations = [e.duration_s for e in result.events if isinstance(e, ToolResult)]
    answers = result.messages[2]  # goal, the assistant's tool_use turn, then ONE user message
    assert answers["role"] == "user"
    results = [
        block for block in answers["content"] if isinstance(block, dict) and block["type"] == "tool_result"
    ]
    print(f"{len(results)} tool calls in one turn, answered in one user message (ids in block order:")
    print("  " + ", ".join(str(block["tool_use_id"]) for block in results) + ")")
    print(f"wall time {wall:.2f} s for {sum(durations):.2f} s of tool time")
    print(f"stop reason: {result.stop_reason}")
    print(f"answer: {result.answer}")
    return 0 if result.stop_reason is StopReason.COMPLETED else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
