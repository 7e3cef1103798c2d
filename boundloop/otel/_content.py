"""Message content in the GenAI conventions' shapes, redacted, as JSON strings for span attributes.

Only a run that opted in (`Observers(tracing=TraceSettings(content=True))`) puts content on its
spans. Every string goes through the loop's redactor first, as in the JSON-lines trace. The conventions'
parts: `text`, `tool_call` (id, name, arguments), `tool_call_response` (id, response),
`server_tool_call` (a `server_tool_use` or `mcp_tool_use` block: id, name, and the call as
`server_tool_call`) and `server_tool_call_response` (a server tool's result block, e.g.
`web_search_tool_result`: id, and the result as `server_tool_call_response`), `reasoning` for
thinking, and the block's own type for anything else (no data). Output messages carry no
`finish_reason` (deprecated by the conventions): it is the span's `gen_ai.response.finish_reasons`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from .._base.recorded import Deferred, json_default, redact_strings

Redact = Callable[[str], str]

_SERVER_CALLS = frozenset({"server_tool_use", "mcp_tool_use"})
"""Blocks of a tool call the API runs itself (its result is a `*_tool_result` block)."""


def as_json(value: object, redact: Redact) -> str:
    """`value` (a `Deferred` or plain JSON) redacted: a string as it is, anything else as JSON."""
    plain = value.json() if isinstance(value, Deferred) else redact_strings(value, redact)
    return plain if isinstance(plain, str) else json.dumps(plain, default=json_default, ensure_ascii=False)


def messages(history: Sequence[Mapping[str, Any]], redact: Redact) -> str:
    """Messages API params (or dumped responses) as the conventions' chat messages."""
    chat = [{"role": message.get("role"), "parts": parts(message.get("content"))} for message in history]
    return json.dumps(redact_strings(chat, redact), default=json_default, ensure_ascii=False)


def output(blocks: object, redact: Redact) -> str:
    """A response's content as the conventions' output messages: one assistant message."""
    message: dict[str, object] = {"role": "assistant", "parts": parts(blocks)}
    return json.dumps(redact_strings([message], redact), default=json_default, ensure_ascii=False)


def system_instructions(system: str, redact: Redact) -> str:
    """The system prompt as the conventions' system instructions."""
    return json.dumps([{"type": "text", "content": redact(system)}], ensure_ascii=False)


def parts(content: object) -> list[dict[str, object]]:
    """A message's content (a string, or blocks as dicts or SDK objects) as message parts."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if not isinstance(content, list):
        return []
    return [_part(_plain(block)) for block in cast(list[object], content)]


def _plain(block: object) -> Mapping[str, Any]:
    if isinstance(block, Mapping):
        return cast(Mapping[str, Any], block)
    try:
        dumped = json_default(block)  # an SDK block: the fields the API sent
    except TypeError:
        return {}
    return cast(Mapping[str, Any], dumped) if isinstance(dumped, Mapping) else {}


def _part(block: Mapping[str, Any]) -> dict[str, object]:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "content": block.get("text", "")}
    if kind == "tool_use":
        return {
            "type": "tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "arguments": block.get("input"),
        }
    if kind == "tool_result":
        response = block.get("content", "")
        return {"type": "tool_call_response", "id": block.get("tool_use_id"), "response": response}
    if kind in _SERVER_CALLS:  # run by the API, not by the loop
        call = {key: value for key, value in block.items() if key not in ("id", "name", "type")}
        return {
            "type": "server_tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "server_tool_call": {"type": block.get("name"), **call},
        }
    if isinstance(kind, str) and kind.endswith("_tool_result") and "tool_use_id" in block:
        result = {key: value for key, value in block.items() if key not in ("tool_use_id", "type")}
        return {
            "type": "server_tool_call_response",
            "id": block.get("tool_use_id"),
            "server_tool_call_response": {"type": kind, **result},
        }
    if kind == "thinking":
        return {"type": "reasoning", "content": block.get("thinking", "")}
    return {"type": str(kind)}  # images, documents, redacted thinking, ...: the kind, not the data
