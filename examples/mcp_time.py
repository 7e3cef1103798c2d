"""An MCP server's tool and a local tool, answered together.

`mcp-server-time` (an MCP server from the package registry: `pip install mcp-server-time`) runs
as a subprocess over stdio. Its tools are listed when the loop is entered and registered next
to the local tool, so both pass the same gate (schema, policy, budget, timeouts, events). The
scripted model asks for the time in Tokyo and for an order's status in one turn: both calls
run concurrently and are answered in ONE user message.

    python examples/mcp_time.py
"""

from __future__ import annotations

import sys
from typing import Any

import anyio

from boundloop import AgentLoop, Budget, LoopResult, ScriptedClient, StopReason, tool
from boundloop.mcp import MCPServerStdio


@tool
def order_status(order_id: str) -> str:
    """The shipping status of an order."""
    return f"order {order_id}: shipped from Osaka, arriving tomorrow"


SCRIPT: list[dict[str, Any]] = [
    {
        "stop_reason": "tool_use",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "get_current_time", "input": {"timezone": "Asia/Tokyo"}},
            {"type": "tool_use", "id": "t2", "name": "order_status", "input": {"order_id": "A-17"}},
        ],
    },
    {"stop_reason": "end_turn", "content": [{"type": "text", "text": "It ships tomorrow, Tokyo time."}]},
]


def build_loop() -> AgentLoop:
    """A loop with mcp-server-time's tools and a local tool."""
    return AgentLoop(
        ScriptedClient(SCRIPT),
        model="claude-sonnet-4-6",
        tools=[order_status, MCPServerStdio("mcp-server-time", name="time", timeout_s=10)],
        budget=Budget(max_steps=3, max_tool_calls=4, timeout_s=30),
        name="mcp_time",
    )


async def run() -> LoopResult:
    """Connect the server for the run (`async with loop:`), run, disconnect."""
    async with build_loop() as loop:
        print(f"tools: {', '.join(loop.tools)}")
        return await loop.run("When does order A-17 arrive, and what time is it in Tokyo now?")


async def main() -> int:
    """Run, then show both answers in the one user message."""
    result = await run()
    answers = result.messages[2]
    results = [b for b in answers["content"] if isinstance(b, dict) and b["type"] == "tool_result"]
    for block in results:
        print(f"{block['tool_use_id']}: is_error={block.get('is_error', False)} {str(block['content'])[:80]}")
    print(f"stop reason: {result.stop_reason}")
    return 0 if result.stop_reason is StopReason.COMPLETED and len(results) == 2 else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
