"""The transcript is JSON, dumped once: the assistant turn exactly as the API sent it, and every
request built from the dicts already held (issue 22, item 6)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from anthropic.types import TextBlock

from boundloop import AgentLoop, Budget, SQLiteStore, StopReason, tool
from boundloop.testing import ScriptedClient
from tests.fake_api import MODEL, Body, FakeAPI, message, text_block, tool_use_block
from tests.helpers import text, tool_use

MCP_BLOCK: dict[str, Any] = {
    "type": "mcp_tool_use",
    "id": "mcptoolu_01",
    "name": "search_docs",
    "server_name": "docs",
    "input": {},
    "cache_hint": {"ttl": [1, None, 2.5], "scope": "turn"},
}
"""A block type this SDK does not model, with fields it does not know."""


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def sdk_loop(api: FakeAPI) -> AgentLoop:
    return AgentLoop(api.client(), model=MODEL, tools=[lookup], budget=Budget(max_steps=5), max_tokens=256)


async def test_an_unknown_block_type_reaches_the_next_request_byte_for_byte() -> None:
    """On the SDK path an unmodelled block type and a tool_use with an unknown field are kept as
    sent: the transcript holds plain dicts equal to the response's JSON, and the next request
    carries the blocks as received (the unknown type was sent back as `{"type": "text", "text": null}`,
    the tool_use's extra field dropped)."""
    tagged_call = {**tool_use_block("toolu_01", "lookup", {"key": "a"}), "trace_tag": {"n": [1, None]}}
    content = [text_block("Searching."), MCP_BLOCK, tagged_call]
    api = FakeAPI([Body(json=message(content, "tool_use")), Body(json=message([text_block("done")], n=2))])
    result = await sdk_loop(api).run("find it")
    assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail
    turn: Any = result.state.messages[1]
    assert type(turn) is dict
    assert turn["role"] == "assistant"
    assert all(type(block) is dict for block in turn["content"])
    assert turn["content"] == content
    sent = api.requests[1]["messages"][1]
    assert sent["content"] == content
    # Byte for byte where the SDK keeps the keys' order: the text and the unknown type.
    plain = {"role": "assistant", "content": content[:2]}
    assert json.dumps({**sent, "content": sent["content"][:2]}) == json.dumps(plain)
    assert api.requests[1]["messages"][2]["content"][0]["content"] == "value of a"


async def test_a_plain_tool_use_and_text_reach_the_next_request_byte_for_byte() -> None:
    """The usual blocks are copied by hand in the API's own key order."""
    content = [text_block("Looking."), tool_use_block("toolu_01", "lookup", {"key": "a"})]
    api = FakeAPI([Body(json=message(content, "tool_use")), Body(json=message([text_block("done")], n=2))])
    result = await sdk_loop(api).run("find it")
    assert result.answer == "done"
    assert json.dumps(api.requests[1]["messages"][1]) == json.dumps({"role": "assistant", "content": content})


async def test_requests_carry_the_transcripts_own_dicts() -> None:
    """Request N + 1 holds the very dict objects of request N and of `state.messages`: earlier
    turns are never rebuilt or re-serialised, only the list is new."""
    client = ScriptedClient(
        [tool_use(("lookup", {"key": "a"})), tool_use(("lookup", {"key": "b"})), text("done")]
    )
    loop = AgentLoop(client, model=MODEL, tools=[lookup], budget=Budget(max_steps=5), max_tokens=256)
    result = await loop.run("goal")
    assert result.answer == "done"
    requests = [request["messages"] for request in client.requests]
    assert [len(messages) for messages in requests] == [1, 3, 5]
    for earlier, later in itertools.pairwise(requests):
        assert all(kept is sent for kept, sent in zip(later, earlier, strict=False))
    assert all(sent is held for sent, held in zip(requests[-1], result.state.messages, strict=False))
    assert all(
        type(block) is dict
        for message in result.state.messages
        if not isinstance(message["content"], str)
        for block in message["content"]
    )


async def test_a_history_of_sdk_blocks_is_dumped_once_at_the_start() -> None:
    """A response's `content` passed on in `messages=` becomes JSON in the transcript: the first
    request already holds dicts, equal to the blocks' JSON."""
    client = ScriptedClient([text("done")])
    loop = AgentLoop(client, model=MODEL, budget=Budget(max_steps=2), max_tokens=256)
    earlier = TextBlock(type="text", text="It is 42.")
    history: list[Any] = [
        {"role": "user", "content": "What is it?"},
        {"role": "assistant", "content": [earlier]},
        {"role": "user", "content": "And then?"},
    ]
    result = await loop.run(messages=history)
    assert result.answer == "done"
    sent = client.requests[0]["messages"][1]["content"][0]
    assert type(sent) is dict
    assert sent == {"type": "text", "text": "It is 42."}
    held: list[Any] = list(result.state.messages[1]["content"])
    assert held[0] is sent
    assert history[1]["content"][0] is earlier  # the caller's list is left alone


@tool(requires_approval=True)
async def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


async def test_an_unknown_block_survives_a_checkpoint_and_a_resume(tmp_path: Path) -> None:
    """Stored in SQLite while the run waits for approval, then resumed by a new loop: the request
    after the resume carries the unmodelled block as the API sent it, byte for byte."""
    content = [MCP_BLOCK, tool_use_block("toolu_01", "refund", {"order_id": "O-1"})]
    api = FakeAPI([Body(json=message(content, "tool_use")), Body(json=message([text_block("done")], n=2))])
    store = SQLiteStore(tmp_path / "runs.db")

    def loop() -> AgentLoop:
        return AgentLoop(
            api.client(),
            model=MODEL,
            tools=[refund],
            budget=Budget(max_steps=5),
            max_tokens=256,
            store=store,
        )

    first = await loop().run("Refund O-1.", task_id="t-mcp")
    assert first.stop_reason is StopReason.NEEDS_HUMAN
    result = await loop().resume("t-mcp", approvals={"toolu_01": True})
    assert result.answer == "done"
    sent = api.requests[1]["messages"][1]
    assert json.dumps(sent) == json.dumps({"role": "assistant", "content": content})
    assert result.state.messages[1]["content"] == content
