"""What a run holds while it runs: the records it needs, not the SDK's objects (docs/performance.md)."""

from __future__ import annotations

import gc

import httpx2 as httpx
from anthropic import BaseModel as SDKModel

from boundloop import AgentLoop, Budget, Observers, tool
from tests.helpers import JSON, ScriptedTransport, api_message

MESSAGE_ID = "msg_01MemoryHeldWhileToolsRun"


def _sdk_objects_of_the_response() -> list[object]:
    """The SDK objects alive now that came from the response `MESSAGE_ID` (its `Message`,
    blocks, usage), found by walking from every live `Message` of that id down."""
    gc.collect()
    found: list[object] = []
    for item in gc.get_objects():
        if isinstance(item, SDKModel) and getattr(item, "id", None) == MESSAGE_ID:
            found.append(item)
    return found


async def test_a_run_lets_its_responses_sdk_objects_go_before_its_tools_run() -> None:
    """Once a response is validated, the run keeps its record (transcript blocks, envelope,
    usage) and lets the SDK `Message` go: a run whose tools take long does not hold it (about
    5 KiB for a turn of two calls), and the next request is checked against the response all
    the same."""
    seen: list[list[object]] = []

    @tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        seen.append(_sdk_objects_of_the_response())
        return key

    calls: JSON = {
        "id": MESSAGE_ID,
        "stop_reason": "tool_use",
        "content": [
            {"type": "tool_use", "id": "toolu_01A", "name": "lookup", "input": {"key": "a"}},
            {"type": "tool_use", "id": "toolu_01B", "name": "lookup", "input": {"key": "b"}},
        ],
    }
    answer: JSON = {"stop_reason": "end_turn", "content": [{"type": "text", "text": "done"}]}
    transport = ScriptedTransport(
        [
            lambda _: httpx.Response(200, json=api_message(calls)),
            lambda _: httpx.Response(200, json=api_message(answer, n=2)),
        ]
    )
    loop = AgentLoop(
        transport.client(),
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
    )
    result = await loop.run("Look a and b up.")
    assert (result.stop_reason, result.answer) == ("completed", "done")
    assert seen == [[], []]
    assert result.state.responses[0].id == MESSAGE_ID  # the record stays
    assert result.state.errors == []  # the next request passed its check
