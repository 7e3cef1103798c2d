"""A streamed run's side of the core: the `Watch` a stream gives its run, and the model call
over the SDK's streaming API (`messages.stream`), whose deltas become events.

The message the stream assembles (`get_final_message()`) is what the run records, as a
`Message` like the one `messages.create` returns; the deltas go to the watch only (not into
`LoopResult.events`, the trace or the `on_event` hooks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import anthropic
import httpx2

from ..events import BaseEvent, TextDelta, ThinkingDelta, ToolInputDelta

if TYPE_CHECKING:
    from .context import RunContext, Watch

DELTAS: Final[Mapping[str, tuple[type[BaseEvent], str]]] = {
    "text_delta": (TextDelta, "text"),
    "thinking_delta": (ThinkingDelta, "thinking"),
    "input_json_delta": (ToolInputDelta, "partial_json"),
}
"""The SDK's delta type -> the event it becomes and the field both name the piece with."""

CALLS: Final = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
"""The content blocks whose input streams as `input_json_delta`s: a tool call, by its id and name."""

UNNAMED: Final[Mapping[str, str]] = {"tool_use_id": "", "name": ""}
"""A piece of input whose block never started (the SDK's accumulator refuses such a stream)."""


def streamed(ctx: RunContext, messages: Any, watch: Watch) -> Callable[..., Awaitable[object]]:
    """A `create(**request)` that streams the call: each delta handed to `watch` as an event,
    and the message the stream assembled returned.

    Raises:
        ValueError: the stream ended without its `message_stop` (a cut stream the SDK did not
            raise for).
        anthropic.APIConnectionError: the connection broke off mid-stream.
        Exception: whatever the SDK raises, as `messages.create` would.
    """

    async def create(**request: Any) -> object:
        stopped = False
        calls: dict[int, Mapping[str, str]] = {}  # a streaming tool call's block index -> its id and name
        async with messages.stream(**request) as stream:
            try:
                async for event in stream:
                    kind = event.type
                    if kind == "content_block_delta":
                        known = DELTAS.get(event.delta.type)
                        if known is not None:
                            cls, field = known
                            piece: str = getattr(event.delta, field)
                            named: Mapping[str, str] = (
                                calls.get(event.index, UNNAMED) if cls is ToolInputDelta else {}
                            )
                            await watch.delta(ctx.delta(cls, index=event.index, **{field: piece}, **named))
                    elif kind == "content_block_start" and event.content_block.type in CALLS:
                        block = event.content_block
                        calls[event.index] = named = {"tool_use_id": block.id, "name": block.name}
                        await watch.delta(
                            ctx.delta(ToolInputDelta, index=event.index, partial_json="", **named)
                        )
                    elif kind == "message_stop":
                        stopped = True
            except httpx2.TransportError as exc:  # the connection broke mid-stream: an API error
                raise anthropic.APIConnectionError(
                    message=f"the stream broke off: {exc}", request=stream.response.request
                ) from exc
            if not stopped:
                raise ValueError("the stream ended before its message_stop event")
            return recorded(await stream.get_final_message())

    return create


def recorded(final: Any) -> object:
    """The streamed message as `messages.create` returns it: a `Message` of the same fields.

    The SDK's accumulator sets `stop_details` from every `message_delta`, also to None; a None
    one is left unset, as in a response that has none (the state records only the fields set).
    """
    from anthropic.types import Message

    fields: dict[str, Any] = final.to_dict(warnings=False)
    if fields.get("stop_details", 0) is None:
        del fields["stop_details"]
    return Message.model_construct(**fields)
