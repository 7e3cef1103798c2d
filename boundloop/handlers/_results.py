"""Tool results: a handler's return value as text, JSON or content blocks, truncated visibly."""

from __future__ import annotations

import json
from typing import Any, Final, TypeGuard, cast

import pydantic

from .._records import CallResult, Content, Outcome, ToolCall

_BLOCK_TYPES: Final = frozenset({"text", "image", "document", "search_result"})
_STRICT_JSON: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
"""Content blocks go to the API as JSON: anything else in them is refused here."""


def refused(call: ToolCall, outcome: Outcome, text: str) -> CallResult:
    """A call answered without running its handler."""
    return CallResult(call=call, outcome=outcome, content=text)


def to_result(call: ToolCall, value: object, max_chars: int) -> CallResult:
    """Turn a handler's return value into a result: text, JSON, or a list of content blocks."""
    content: Content
    try:
        if isinstance(value, str):
            content = value
        elif isinstance(value, pydantic.BaseModel):
            content = value.model_dump_json()
        elif _is_block_list(value):
            content = json.loads(_STRICT_JSON(value))  # a copy, and proof it is JSON (no bytes)
        else:
            content = json.dumps(value, ensure_ascii=False)
    except Exception as exc:  # the tool boundary: an unusable value is an error result, never a crash
        return refused(
            call,
            "error",
            f"the tool returned a {type(value).__name__}, which is not text, JSON or content "
            f"blocks ({type(exc).__name__}: {exc})",
        )
    return CallResult(call=call, outcome="ok", content=truncate(content, max_chars))


def _is_block_list(value: object) -> TypeGuard[list[dict[str, Any]]]:
    if not isinstance(value, list):
        return False
    items = cast("list[object]", value)
    return bool(items) and all(_is_block(block) for block in items)


def _is_block(block: object) -> bool:
    if not isinstance(block, dict):
        return False
    fields = cast("dict[object, object]", block)
    kind = fields.get("type")
    # A text block without its text would be rejected by the API: it is not a content block.
    return kind in _BLOCK_TYPES and (kind != "text" or isinstance(fields.get("text"), str))


def _marker(cut: int) -> str:
    return f"\n[truncated: {cut} more characters]"


def truncate(content: Content, max_chars: int) -> Content:
    """Cut text over `max_chars`, with a visible marker saying how much was cut.

    For content blocks, `max_chars` bounds the text of all the blocks together: text past it
    is cut (later text blocks dropped), and the last text kept carries the marker.
    """
    if isinstance(content, str):
        if len(content) <= max_chars:
            return content
        return content[:max_chars] + _marker(len(content) - max_chars)
    total = sum(len(block["text"]) for block in content if block.get("type") == "text")
    if total <= max_chars:
        return content
    blocks: list[dict[str, Any]] = []
    left = max_chars
    last_text: int | None = None
    for block in content:
        if block.get("type") != "text":
            blocks.append(block)
            continue
        if left == 0:
            continue
        text: str = block["text"]
        kept = text[:left]
        left -= len(kept)
        last_text = len(blocks)
        blocks.append(block if kept == text else {**block, "text": kept})
    marker = _marker(total - max_chars)
    if last_text is None:
        blocks.append({"type": "text", "text": marker.lstrip()})
    else:
        block = blocks[last_text]
        blocks[last_text] = {**block, "text": block["text"] + marker}
    return blocks
