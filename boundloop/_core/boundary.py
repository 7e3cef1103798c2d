"""The boundary: every model response is checked once, strictly, where it enters the loop.

The SDK builds its `Message` without validating a 200 response, so a hostile or broken API
could hand the loop a `content` that is not a list, a `tool_use` without an id, negative
usage or a tool input nested a thousand levels deep. `problem(response)` finds the first
such fault; the run then stops as `failed` with it in `state.errors`, its state kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, cast

from anthropic.types import Message
from pydantic import BaseModel

from .blocks import field_of

MAX_INPUT_DEPTH: Final = 32
"""How deeply a tool_use input may nest objects and arrays."""
MAX_INPUT_NODES: Final = 10_000
"""How many values a tool_use input may hold in all."""
_USAGE_FIELDS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def problem(response: object) -> str | None:
    """What is wrong with a response, or None when it is a usable Message."""
    if not isinstance(response, Message):
        return f"messages.create returned {type(response).__name__}, not an anthropic Message"
    content: Any = response.content  # as received: the SDK does not validate a response
    if not isinstance(content, list):
        return f"content is {type(content).__name__}, not a list"
    stop_reason: Any = response.stop_reason
    if stop_reason is None:  # only a stream's first event has none; a whole response always does
        return "stop_reason is missing (null)"
    if not isinstance(stop_reason, str):
        return f"stop_reason is {type(stop_reason).__name__}, not a string"
    return _usage_problem(response.usage) or _blocks_problem(response.content)


def _usage_problem(usage: object) -> str | None:
    """What is wrong with `usage`: its two counts must be there; every other field is optional
    (the SDK's `Optional`, or one the API leaves out: sonnet-4-0 and 4-5 send `server_tool_use`
    with `web_search_requests` alone), a missing count is zero, and a count that is there is a
    non-negative int."""
    if usage is None:
        return "usage is missing"
    for field in _USAGE_FIELDS:
        value = getattr(usage, field, None)
        if type(value) is int and value >= 0:  # the usual: a count
            continue
        if value is None and field not in ("input_tokens", "output_tokens"):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"usage.{field} is {value!r}, not a count"
    server = field_of(usage, "server_tool_use")
    if server is not None:
        found = _counts_problem(server, "usage.server_tool_use", "_requests")
        if found is not None:
            return found
    split = field_of(usage, "cache_creation")
    if split is not None:
        found = _counts_problem(split, "usage.cache_creation", "_tokens")
        if found is not None:
            return found
    iterations = field_of(usage, "iterations")
    return None if iterations is None else _iterations_problem(iterations)


def _counts_problem(counts: object, where: str, suffix: str) -> str | None:
    """An object of counts (`server_tool_use`, `cache_creation`, an iteration): each field named
    `*{suffix}` that is there is a count (one the SDK does not model included; None is absent)."""
    if isinstance(counts, BaseModel):
        fields: dict[str, object] = {**counts.__dict__, **(counts.model_extra or {})}
    elif isinstance(counts, dict):
        fields = cast(dict[str, object], counts)
    else:
        return f"{where} is {type(counts).__name__}, not an object"
    for field, value in fields.items():
        if (
            field.endswith(suffix)
            and value is not None
            and (isinstance(value, bool) or not isinstance(value, int) or value < 0)
        ):
            return f"{where}.{field} is {value!r}, not a count"
    return None


def _iterations_problem(iterations: object) -> str | None:
    """`usage.iterations` (beta: compaction, the advisor): a list of objects, each with a `type`,
    its token counts and `cache_creation` checked as the top level's, its `model` a string."""
    if not isinstance(iterations, list):
        return f"usage.iterations is {type(iterations).__name__}, not a list"
    for index, entry in enumerate(cast(list[object], iterations)):
        where = f"usage.iterations[{index}]"
        if not isinstance(field_of(entry, "type"), str):
            return f"{where} has no type"
        found = _counts_problem(entry, where, "_tokens")
        if found is not None:
            return found
        model = field_of(entry, "model")
        if model is not None and not isinstance(model, str):
            return f"{where}.model is {type(model).__name__}, not a string"
        split = field_of(entry, "cache_creation")
        if split is not None:
            found = _counts_problem(split, f"{where}.cache_creation", "_tokens")
            if found is not None:
                return found
    return None


def _blocks_problem(content: Sequence[object]) -> str | None:
    seen: set[str] = set()
    for index, block in enumerate(content):
        kind = getattr(block, "type", None)
        if kind != "tool_use":
            if not isinstance(kind, str):
                return f"content[{index}] has no type"
            if kind == "text" and not isinstance(getattr(block, "text", None), str):
                return f"content[{index}] is a text block without text"
            continue
        block_id = getattr(block, "id", None)
        if not isinstance(block_id, str) or not block_id:
            return f"content[{index}] is a tool_use without an id"
        if block_id in seen:
            return f"content[{index}] repeats the tool_use id {block_id!r}"
        seen.add(block_id)
        name = getattr(block, "name", None)
        if not isinstance(name, str) or not name:
            return f"tool_use {block_id!r} has no name"
        tool_input = getattr(block, "input", None)
        if not isinstance(tool_input, dict):
            return f"tool_use {block_id!r} input is {type(tool_input).__name__}, not an object"
        items: dict[Any, Any] = tool_input  # pyright: ignore[reportUnknownVariableType]
        if (
            type(items) is dict
            and len(items) < MAX_INPUT_NODES
            and _SCALARS.issuperset(map(type, items.values()))
        ):
            continue  # the usual input: one flat object
        shape = _input_problem(items)
        if shape is not None:
            return f"tool_use {block_id!r} input {shape}"
    return None


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _input_problem(value: object) -> str | None:
    """Depth and size of a JSON value, walked without recursion."""
    stack: list[tuple[object, int]] = [(value, 1)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > MAX_INPUT_NODES:
            return f"holds more than {MAX_INPUT_NODES} values"
        if isinstance(item, dict):
            children = list(cast(dict[object, object], item).values())
        elif isinstance(item, list):
            children = list(cast(list[object], item))
        else:
            continue
        if depth >= MAX_INPUT_DEPTH and children:
            return f"nests deeper than {MAX_INPUT_DEPTH} levels"
        stack.extend((child, depth + 1) for child in children)
    return None
