"""Tool results: a tool function's return value as text, JSON or content blocks, truncated visibly."""

from __future__ import annotations

import json
from typing import Any, Final, TypeGuard, cast, final

import pydantic

from ..records import CallResult, Content, Outcome, ToolCall

_BLOCK_TYPES: Final = frozenset({"text", "image", "document", "search_result"})
_STRICT_JSON: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
"""Content blocks go to the API as JSON: anything else in them is refused here."""


@final
class Failure:
    """A tool function's value that answers its call as an error (`is_error`) without raising:
    a delegated run that did not complete (an exception would leave the run with
    `on_tool_error="raise"`)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def refused(call: ToolCall, outcome: Outcome, text: str) -> CallResult:
    """A call answered without running its tool function."""
    return CallResult.of(call=call, outcome=outcome, content=text)


def to_result(call: ToolCall, value: object, max_chars: int) -> CallResult:
    """Turn a tool function's return value into a result: text, JSON, or a list of content blocks."""
    if type(value) is str and len(value) <= max_chars:  # the usual: text within the limit
        return CallResult.of(call=call, outcome="ok", content=value)
    if isinstance(value, Failure):
        return refused(call, "error", value.text)  # cut to max_chars as any error result
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
    return CallResult.of(call=call, outcome="ok", content=truncate(content, max_chars))


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


def _marker(cut: int, left_out: dict[str, int]) -> str:
    if not left_out:
        return f"\n[truncated: {cut} more characters]"
    blocks = ", ".join(f"{count} {kind}" for kind, count in left_out.items())
    return f"\n[truncated: {cut} more characters; blocks left out: {blocks}]"


def block_size(block: dict[str, Any]) -> int:
    """What a content block counts towards `max_tool_output_chars`: a text block its text; any
    other block (image, document, search result, ...) the characters of its JSON, which holds
    its base64 data, its source's text or content, its title and source."""
    if block.get("type") == "text":
        return len(block["text"])
    return len(_STRICT_JSON(block))


def truncate(content: Content, max_chars: int) -> Content:
    """Cut content over `max_chars`, with a visible marker saying how much was cut.

    For content blocks, `max_chars` bounds all the blocks together, each counted by
    `block_size`: text past it is cut, and any other block that does not fit whole is left
    out (base64 data is never cut into invalid data); everything after the first cut is left
    out. The last text kept carries the marker, which names the blocks left out.
    """
    if isinstance(content, str):
        if len(content) <= max_chars:
            return content
        return content[:max_chars] + _marker(len(content) - max_chars, {})
    sizes = [block_size(block) for block in content]
    total = sum(sizes)
    if total <= max_chars:
        return content
    blocks: list[dict[str, Any]] = []
    left_out: dict[str, int] = {}  # kind -> how many blocks of it were left out
    left = max_chars
    kept = 0
    last_text: int | None = None
    for block, size in zip(content, sizes, strict=True):
        is_text = block.get("type") == "text"
        if size <= left:
            left -= size
            kept += size
        elif is_text and left > 0:
            block = {**block, "text": block["text"][:left]}
            kept += left
            left = 0
        else:
            if not is_text:
                kind = str(block.get("type"))
                left_out[kind] = left_out.get(kind, 0) + 1
            left = 0
            continue
        if is_text:
            last_text = len(blocks)
        blocks.append(block)
    marker = _marker(total - kept, left_out)
    if last_text is None:
        blocks.append({"type": "text", "text": marker.lstrip()})
    else:
        block = blocks[last_text]
        blocks[last_text] = {**block, "text": block["text"] + marker}
    return blocks
