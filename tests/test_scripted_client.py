"""`ScriptedClient`: ids numbered across the script, and `async def` script items awaited."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anthropic.types import Message, ToolUseBlock

from boundloop import AgentLoop, Budget, ConfigurationError, ScriptedClient, StopReason, tool
from boundloop.testing import Request, ScriptItem, parse_message
from tests.helpers import assert_valid_transcript, text

JSON = dict[str, Any]


def unnamed_call(order_id: str) -> JSON:
    """A tool_use response whose block has no id."""
    return {
        "stop_reason": "tool_use",
        "content": [{"type": "tool_use", "name": "read_order", "input": {"order_id": order_id}}],
    }


def tool_ids(message: Message) -> list[str]:
    return [block.id for block in message.content if isinstance(block, ToolUseBlock)]


@tool
async def read_order(order_id: str) -> str:
    """Read one order by id."""
    return f"{order_id}: delivered"


async def test_generated_tool_use_ids_run_across_the_script() -> None:
    """Blocks without an id are numbered per client in the order served, through dicts and
    functions alike; a given id is kept and does not use up a number."""
    two_calls: JSON = {
        "stop_reason": "tool_use",
        "content": [
            {"type": "tool_use", "name": "read_order", "input": {"order_id": "O-2"}},
            {"type": "tool_use", "id": "toolu_mine", "name": "read_order", "input": {"order_id": "O-3"}},
            {"type": "tool_use", "name": "read_order", "input": {"order_id": "O-4"}},
        ],
    }
    client = ScriptedClient([unnamed_call("O-1"), lambda _: two_calls, unnamed_call("O-5"), text("-")])
    served = [await client.messages.create(model="m", messages=[]) for _ in range(4)]
    assert [tool_ids(message) for message in served] == [
        ["toolu_scripted_1"],
        ["toolu_scripted_2", "toolu_mine", "toolu_scripted_3"],
        ["toolu_scripted_4"],
        [],
    ]
    assert [message.id for message in served] == [f"msg_scripted_{n}" for n in range(1, 5)]
    assert [block.type for block in served[1].content] == ["tool_use"] * 3
    # A client numbers its own script: a second one starts again.
    again = ScriptedClient([unnamed_call("O-1")])
    assert tool_ids(await again.messages.create(model="m", messages=[])) == ["toolu_scripted_1"]
    # On its own, parse_message names a block by its position in the response.
    assert tool_ids(parse_message(unnamed_call("O-1"))) == ["toolu_scripted_0"]


async def test_a_run_whose_responses_omit_ids_has_a_valid_transcript() -> None:
    """Two tool rounds without ids: each call has its own id, each is answered, the run completes."""
    client = ScriptedClient([unnamed_call("O-1"), unnamed_call("O-2"), text("Both delivered.")])
    loop = AgentLoop(client, model="claude-sonnet-4-6", tools=[read_order], budget=Budget(max_steps=4))
    result = await loop.run("Check O-1 and O-2.")
    assert result.stop_reason is StopReason.COMPLETED
    assert [obs.tool_use_id for obs in result.state.observations] == ["toolu_scripted_1", "toolu_scripted_2"]
    assert [obs.outcome for obs in result.state.observations] == ["ok", "ok"]
    assert_valid_transcript(result.state.messages)


async def test_an_async_function_is_awaited() -> None:
    """An `async def` script item is called with the request and its coroutine awaited; what it
    returns (a dict, or a Message) is served like a plain function's."""
    seen: list[Request] = []

    async def answer_later(request: Request) -> JSON:
        seen.append(request)
        await anyio.lowlevel.checkpoint()  # it really suspends
        messages = request["messages"]
        assert isinstance(messages, list)
        (result,) = messages[-1]["content"]
        return {
            "stop_reason": "end_turn",
            "content": [{"type": "text", "text": f"Order record: {result['content']}"}],
        }

    async def a_message(request: Request) -> Message:
        await anyio.lowlevel.checkpoint()
        return parse_message(unnamed_call("O-2"))

    script: list[ScriptItem] = [a_message, answer_later]
    client = ScriptedClient(script)
    loop = AgentLoop(client, model="claude-sonnet-4-6", tools=[read_order], budget=Budget(max_steps=4))
    result = await loop.run("Check O-2.")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.answer == "Order record: O-2: delivered"
    assert len(seen) == 1
    assert seen[0]["model"] == "claude-sonnet-4-6"
    # A Message is served as it is: its block keeps the id parse_message gave it.
    assert [obs.tool_use_id for obs in result.state.observations] == ["toolu_scripted_0"]
    assert client.remaining == 0


async def test_an_async_function_returning_a_bad_response_fails_the_run() -> None:
    """What an `async def` item returns is validated when served, as a plain function's is."""

    async def broken(request: Request) -> JSON:
        return {"stop_reason": "end_turn", "content": [{"type": "nope"}]}

    loop = AgentLoop(ScriptedClient([broken]), model="claude-sonnet-4-6", budget=Budget(max_steps=2))
    result = await loop.run("Hi?")
    assert result.stop_reason is StopReason.FAILED
    assert "not a valid Message" in result.state.errors[0].message


# -- every block type and stop reason, validated at construction --------------------------------

EVERY_BLOCK: list[JSON] = [
    {"type": "thinking", "thinking": "Let me see.", "signature": "EqQBCgIYAhIM"},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.com",
                "title": "t",
                "encrypted_content": "E",
            }
        ],
    },
    {
        "type": "server_tool_use",
        "id": "srvtoolu_2",
        "name": "web_fetch",
        "input": {"url": "https://example.com"},
    },
    {
        "type": "web_fetch_tool_result",
        "tool_use_id": "srvtoolu_2",
        "content": {"type": "web_fetch_tool_result_error", "error_code": "url_not_accessible"},
    },
    {"type": "server_tool_use", "id": "srvtoolu_3", "name": "code_execution", "input": {"code": "print(1)"}},
    {
        "type": "code_execution_tool_result",
        "tool_use_id": "srvtoolu_3",
        "content": {
            "type": "code_execution_result",
            "stdout": "1\n",
            "stderr": "",
            "return_code": 0,
            "content": [],
        },
    },
    {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "lookup", "server_name": "crm", "input": {}},
    {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "is_error": False, "content": "found"},
    {"type": "compaction", "content": "Earlier conversation summarized.", "encrypted_content": "Epw"},
    {"type": "text", "text": "Done."},
]


def test_every_block_type_and_a_container_are_scripted_as_the_sdk_receives_them() -> None:
    """Thinking, redacted thinking, server tool calls and their results, MCP blocks, compaction
    and a container: a script holds them, each served exactly as written."""
    container = {"id": "container_1", "expires_at": "2026-02-25T20:07:37Z"}
    client = ScriptedClient([{"stop_reason": "end_turn", "content": EVERY_BLOCK, "container": container}])
    message = client._script[0]  # pyright: ignore[reportPrivateUsage]
    assert isinstance(message, Message)
    assert [block.type for block in message.content] == [block["type"] for block in EVERY_BLOCK]
    assert message.container is not None
    assert message.container.id == "container_1"
    assert [
        dict(block.model_dump(exclude_unset=True), type=block.type) for block in message.content
    ] == EVERY_BLOCK


@pytest.mark.parametrize(
    "stop_reason",
    [
        "end_turn",
        "tool_use",
        "max_tokens",
        "stop_sequence",
        "pause_turn",
        "compaction",
        "refusal",
        "model_context_window_exceeded",
    ],
)
def test_every_stop_reason_is_scripted(stop_reason: str) -> None:
    client = ScriptedClient([{"stop_reason": stop_reason, "content": []}])
    message = client._script[0]  # pyright: ignore[reportPrivateUsage]
    assert isinstance(message, Message)
    assert message.stop_reason == stop_reason


MALFORMED: list[tuple[object, str]] = [
    ("All done.", "not str 'All done.'"),
    ({"content": [{"type": "text", "text": "hi"}]}, "no stop_reason"),
    ({"stop_reason": "end_turn", "content": "hi"}, "content is not a list"),
    ({"stop_reason": "end_turn", "content": ["hi"]}, "content[0] is not a block object"),
    ({"stop_reason": "end_turn", "content": [{"text": "hi"}]}, "content[0] has no type"),
    (
        {"stop_reason": "end_turn", "content": [{"type": "txet", "text": "hi"}]},
        "type 'txet', which the SDK",
    ),
    (
        {"stop_reason": "tool_use", "content": [{"type": "tool_use", "input": {}}]},
        "content[0] is not a valid tool_use",
    ),
    (
        {"stop_reason": "tool_use", "content": [{"type": "tool_use", "name": "x"}]},
        "content[0] is not a valid tool_use",
    ),
    (
        {"stop_reason": "end_turn", "content": [{"type": "thinking", "thinking": "x"}]},
        "not a valid thinking",
    ),
    (
        {"stop_reason": "end_turn", "content": [{"type": "server_tool_use", "id": "s"}]},
        "not a valid server_tool_use",
    ),
    ({"stop_reason": "end_turn", "content": [], "container": {"id": "c"}}, "not a valid Message"),
    (
        {"stop_reason": "end_turn", "content": [], "usage": {"input_tokens": "many"}},
        "not a valid Message",
    ),
]


@pytest.mark.parametrize(("item", "says"), MALFORMED)
def test_a_malformed_item_is_a_configuration_error_at_construction(item: object, says: str) -> None:
    """A bad script fails where it is written, naming the item's fault, not mid-run."""
    with pytest.raises(ConfigurationError, match="scripted response is not a valid Message") as caught:
        ScriptedClient([text("fine"), item])  # type: ignore[list-item]
    assert says in str(caught.value)
