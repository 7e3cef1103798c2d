"""Tools and scripted runs shared by the metrics tests (and their worker processes)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from boundloop import AgentLoop, Budget, LoopMetrics, LoopResult, Observers, Policy, ScriptedClient, tool
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


def refund_loop(
    metrics: LoopMetrics | None, *, name: str = "refunds", version: str | None = None
) -> AgentLoop:
    """A loop running `refund_script` on `ScriptedClient`."""
    return AgentLoop(
        ScriptedClient(refund_script()),
        model="claude-sonnet-4-5",
        tools=TOOLS,
        budget=Budget(max_steps=6, max_consecutive_tool_errors=5),
        policy=Policy(forbidden={"issue_refund"}, on_forbidden="report"),
        name=name,
        version=version,
        observers=Observers(metrics=metrics),
    )


SEARCH: dict[str, Any] = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
"""The API's web search, a server tool."""


def searched(*queries: str, then: dict[str, Any], **uses: int) -> dict[str, Any]:
    """`then` (a response) preceded by a web search per query the API ran, its usage reporting
    them (`usage.server_tool_use`: `web_search_requests`, and any other `<kind>=count` given)."""
    blocks: list[dict[str, Any]] = []
    for n, query in enumerate(queries):
        call_id = f"srvtoolu_{query.replace(' ', '_')}_{n}"
        blocks.append(
            {"type": "server_tool_use", "id": call_id, "name": "web_search", "input": {"query": query}}
        )
        blocks.append({"type": "web_search_tool_result", "tool_use_id": call_id, "content": []})
    counts = {"web_search_requests": len(queries), "web_fetch_requests": 0}
    counts.update({f"{kind}_requests": count for kind, count in uses.items()})
    return {
        **then,
        "content": [*blocks, *then["content"]],
        "usage": {**then["usage"], "server_tool_use": counts},
    }


def search_script() -> list[dict[str, Any]]:
    """Two web searches and a tool call, then one more search and an answer: 3 web searches."""
    return [
        searched("refund policy", "O-104 carrier", then=tool_use(("read_order", {"order_id": "O-104"}))),
        searched("carrier delays", then=text("Refund O-104.")),
    ]


def search_loop(metrics: LoopMetrics | None, *, name: str = "searches") -> AgentLoop:
    """A loop offering web search, running `search_script` on `ScriptedClient`."""
    return AgentLoop(
        ScriptedClient(search_script()),
        model="claude-sonnet-4-5",
        tools=[*TOOLS, SEARCH],
        budget=Budget(max_steps=4),
        name=name,
        observers=Observers(metrics=metrics),
    )


def edges_taken(result: LoopResult) -> Counter[tuple[str, str]]:
    """How often the run took each (source, dest) edge, from its trace."""
    return Counter(
        (str(event.source), str(event.dest)) for event in result.events if event.kind == "transition"
    )
