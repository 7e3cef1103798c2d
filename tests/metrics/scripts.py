"""Tools and scripted runs shared by the metrics tests (and their worker processes)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from boundloop import AgentLoop, Budget, LoopMetrics, LoopResult, Policy, ScriptedClient, tool
from tests.helpers import text, tool_use


@tool
async def read_order(order_id: str) -> dict[str, Any]:
    """Read one order by id."""
    return {"id": order_id, "total": 42}


@tool
def read_delivery_status(order_id: str) -> str:
    """The delivery status of an order."""
    return "delivered"


@tool
async def flaky_lookup(order_id: str) -> str:
    """A lookup that always fails."""
    raise LookupError(f"no record for {order_id}")


@tool
async def issue_refund(order_id: str) -> str:
    """Refund an order (forbidden by the policy)."""
    return "refunded"


TOOLS = [read_order, read_delivery_status, flaky_lookup, issue_refund]


def refund_script() -> list[dict[str, Any]]:
    """Two tool turns (ok, sync ok, error, denied, an invented tool, a repeat), then an answer."""
    return [
        tool_use(
            ("read_order", {"order_id": "O-104"}),
            ("read_delivery_status", {"order_id": "O-104"}),
            ("flaky_lookup", {"order_id": "O-104"}),
            ("issue_refund", {"order_id": "O-104"}),
            cache_read_input_tokens=7,
            cache_creation_input_tokens=3,
        ),
        tool_use(
            ("read_order", {"order_id": "O-104"}, "toolu_again"),
            ("delete_all_orders", {"confirm": True}),
        ),
        text("Evidence sufficient."),
    ]


def refund_loop(metrics: LoopMetrics | None, *, name: str = "refunds") -> AgentLoop:
    """A loop running `refund_script` on `ScriptedClient`."""
    return AgentLoop(
        ScriptedClient(refund_script()),
        model="claude-sonnet-4-5",
        tools=TOOLS,
        budget=Budget(max_steps=6, max_consecutive_tool_errors=5),
        policy=Policy(forbidden={"issue_refund"}, on_forbidden="report"),
        name=name,
        metrics=metrics,
    )


def edges_taken(result: LoopResult) -> Counter[tuple[str, str]]:
    """How often the run took each (source, dest) edge, from its trace."""
    return Counter(
        (str(event.source), str(event.dest)) for event in result.events if event.kind == "transition"
    )
