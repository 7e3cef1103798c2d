"""A lead agent fans out to three researchers in parallel, then writes: one tree, one budget.

`researcher.as_tool("research", ...)` makes the researcher loop a tool of the lead. The lead's
model asks for three research calls in one response; the three researcher runs go at once (the
calls of a response run concurrently), each its own run with its own task id and events,
linked to the lead (`state.parent_task_id`, the lead's `state.children`). Cost, tokens and time
are the tree's: the lead's `Budget(max_cost_usd=0.50)` bounds every model call of every run in
it, reserved before it is sent (docs/delegation.md). `result.usage` is the tree's total.

Offline, on `ScriptedClient`s: python examples/delegation.py
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import anyio

from boundloop import AgentLoop, Budget, LoopResult, ScriptedClient, StopReason, tool
from boundloop.testing import Request

TOPICS = ("battery recycling rates", "cobalt supply", "solid-state cells")
USAGE: Mapping[str, int] = {"input_tokens": 400, "output_tokens": 120}
"""What each scripted response bills."""
SEARCH_LATENCY_S = 0.2
"""How long the search back end takes to answer."""


@tool
async def search(query: str) -> str:
    """Search the literature; returns the best snippet."""
    await anyio.sleep(SEARCH_LATENCY_S)
    return f"snippet on {query}: three sources agree"


def _last_text(request: Request) -> str:
    """The text of the request's last user message (the task, or a tool result)."""
    messages: Any = request["messages"]
    content = messages[-1]["content"]
    if isinstance(content, str):
        return content
    block: Mapping[str, Any] = content[-1]
    inner = block.get("content", block.get("text", ""))
    return inner if isinstance(inner, str) else str(inner[0]["text"])


def researcher_turn(request: Request) -> dict[str, Any]:
    """The researcher's model: search for the task, then report what the search found."""
    if len(request["messages"]) == 1:  # type: ignore[arg-type]
        return {
            "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "name": "search", "input": {"query": _last_text(request)}}],
            "usage": USAGE,
        }
    return {
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": _last_text(request)}],
        "usage": USAGE,
    }


def lead_turn(request: Request) -> dict[str, Any]:
    """The lead's model: delegate the three topics at once, then write from the findings."""
    messages: Any = request["messages"]
    if len(messages) == 1:
        calls = [
            {"type": "tool_use", "id": f"toolu_topic_{n}", "name": "research", "input": {"task": topic}}
            for n, topic in enumerate(TOPICS)
        ]
        return {"stop_reason": "tool_use", "content": calls, "usage": USAGE}
    findings = [block["content"] for block in messages[-1]["content"]]
    report = "Report:\n" + "\n".join(f"- {finding}" for finding in findings)
    return {"stop_reason": "end_turn", "content": [{"type": "text", "text": report}], "usage": USAGE}


def build_lead() -> AgentLoop:
    """The lead, with the researcher as its `research` tool."""
    researcher = AgentLoop(
        ScriptedClient([researcher_turn] * 2 * len(TOPICS), model="claude-sonnet-4-6"),
        model="claude-sonnet-4-6",
        tools=[search],
        budget=Budget(max_steps=4, max_cost_usd=0.20),  # each researcher's own ceiling too
        system="You research one topic and report what you found, with sources.",
        name="researcher",
    )
    return AgentLoop(
        ScriptedClient([lead_turn, lead_turn], model="claude-sonnet-4-6"),
        model="claude-sonnet-4-6",
        tools=[researcher.as_tool("research", description="Research one topic in depth; returns findings.")],
        # The tree's ceilings: cost and time shared by every run of the tree.
        budget=Budget(max_steps=3, max_cost_usd=0.50, timeout_s=60, max_depth=1, max_children=3),
        system="You lead a research team: delegate each topic, then write the report.",
        name="lead",
    )


async def run() -> LoopResult:
    """Run the lead on its goal."""
    return await build_lead().run("Write a short report on " + ", ".join(TOPICS) + ".")


async def main() -> int:
    """Run the tree and show its shape and its spend."""
    result = await run()
    print(f"stop reason: {result.stop_reason}")
    print(f"children: {len(result.state.children)} researcher runs, linked to {result.state.task_id}")
    own, tree = result.state.usage, result.usage
    print(f"tokens: {own.total_tokens} the lead's own, {tree.total_tokens} the tree's")
    print(f"cost: ${tree.cost_usd:.6f} for the tree, of its $0.50")
    print(result.answer)
    return 0 if result.stop_reason is StopReason.COMPLETED else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
