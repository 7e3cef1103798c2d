"""The transcript keeps each response's content as the JSON the API sent, dumped once."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import ToolUseBlock

from boundloop._core.blocks import assistant_message
from boundloop.testing import parse_message

JSON = dict[str, Any]

BLOCKS: list[JSON] = [
    {"type": "thinking", "thinking": "check the order", "signature": "sig-abc=="},
    {"type": "redacted_thinking", "data": "opaque=="},
    {"type": "text", "text": "Looking it up."},
    {
        "type": "text",
        "text": "Per the policy,",
        "citations": [
            {
                "type": "char_location",
                "cited_text": "30 days",
                "document_index": 0,
                "document_title": "policy",
                "start_char_index": 0,
                "end_char_index": 7,
            }
        ],
    },
    {"type": "text", "text": "explicit null", "citations": None},
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "refunds"}},
    {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "O-1", "nested": {"a": [1]}}},
    # A field this SDK version may not know: kept, not dropped.
    {"type": "tool_use", "id": "toolu_2", "name": "lookup", "input": {}, "caller": {"type": "direct"}},
    {
        "type": "tool_use",
        "id": "toolu_3",
        "name": "lookup",
        "input": {"k": 1},
        "caller": None,
        "toolset_name": None,
    },
    {
        "type": "tool_use",
        "id": "toolu_4",
        "name": "lookup",
        "input": {"k": 2},
        "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_9"},
    },
]


def message(content: list[JSON]) -> JSON:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "content": content,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b['type']}-{i}" for i, b in enumerate(BLOCKS)])
def test_each_block_is_the_json_the_api_sent(block: JSON) -> None:
    """No field added (a None the API left out) and none lost (a signature, an explicit null)."""
    response = parse_message(message([block]))
    assert assistant_message(response.content) == {"role": "assistant", "content": [block]}


def test_a_whole_response_keeps_its_block_order() -> None:
    response = parse_message(message(BLOCKS))
    assert assistant_message(response.content)["content"] == BLOCKS


def test_a_tool_use_blocks_input_is_the_responses_own_dict_not_a_copy() -> None:
    """The transcript shares each `tool_use` block's `input` with the SDK block it came from
    (the call's record holds the same dict): one copy of the model's arguments in memory, also
    when the block came with more fields than the usual four."""
    response = parse_message(message([block for block in BLOCKS if block["type"] == "tool_use"]))
    sent: list[Any] = list(assistant_message(response.content)["content"])
    inputs = [block.input for block in response.content if isinstance(block, ToolUseBlock)]
    assert len(inputs) == 4
    assert [block["input"] is given for block, given in zip(sent, inputs, strict=True)] == [True] * 4
