"""`ScriptedClient.messages.stream`: a scripted response served as the API streams it.

The response the script gives (the one `messages.create` would return) is turned into the
events the API sends for it, built as the SDK's own stream event types, and handed to the
SDK's own `AsyncMessageStreamManager` (the beta one for `beta.messages.stream`): iterating it,
its events and `get_final_message()` are the SDK's, so a loop takes the same path as over
the network.

The events, per content block: `content_block_start` with the block less its streamed part,
the deltas, `content_block_stop`. Text, thinking and a tool input's JSON (`json.dumps` of the
input) are split after each run of whitespace ("Hello big world" streams as "Hello ",
"big ", "world"); a thinking block's signature follows as one `signature_delta`; any other
block (redacted thinking, server tool results, ...) comes whole in its `content_block_start`.
Around them: `message_start` (the envelope and usage, no content), `message_delta` (the stop
reason, stop sequence and output tokens), `message_stop`. Between two events the stream
yields to the event loop once, as a network stream would.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, cast, final

import anyio.lowlevel

if TYPE_CHECKING:
    from anthropic.types import Message

PIECE: Final = re.compile(r"(?<=\s)(?=\S)")
"""Where streamed text is split: after each run of whitespace."""


def pieces(text: str) -> list[str]:
    """`text` as its streamed pieces (none for an empty text)."""
    return [piece for piece in PIECE.split(text) if piece]


def raw_events(message: Message) -> Iterator[dict[str, Any]]:
    """The API's stream events for `message`, as the JSON objects of its `data:` lines."""
    envelope: dict[str, Any] = message.to_dict(warnings=False)
    stop_reason = envelope.pop("stop_reason", None)
    stop_sequence = envelope.pop("stop_sequence", None)
    blocks: list[dict[str, Any]] = envelope.pop("content", [])
    yield {
        "type": "message_start",
        "message": {**envelope, "content": [], "stop_reason": None, "stop_sequence": None},
    }
    for index, block in enumerate(blocks):
        yield from _block_events(index, block)
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
        "usage": {"output_tokens": message.usage.output_tokens},
    }
    yield {"type": "message_stop"}


def _block_events(index: int, block: dict[str, Any]) -> Iterator[dict[str, Any]]:
    kind = block.get("type")
    deltas: list[dict[str, Any]] = []
    start = dict(block)
    if kind == "text":
        start["text"] = ""
        deltas = [{"type": "text_delta", "text": piece} for piece in pieces(block["text"])]
    elif kind == "thinking":
        start["thinking"] = ""
        start["signature"] = ""
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    elif kind in ("tool_use", "server_tool_use"):
        start["input"] = {}
        text = json.dumps(block.get("input", {}))
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces(text)]
    yield {"type": "content_block_start", "index": index, "content_block": start}
    for delta in deltas:
        yield {"type": "content_block_delta", "index": index, "delta": delta}
    yield {"type": "content_block_stop", "index": index}


@final
class RawStream:
    """The raw event stream a stream manager reads (what the SDK's `AsyncStream` is over HTTP)."""

    def __init__(self, events: Iterator[dict[str, Any]], *, beta: bool, request: Mapping[str, Any]) -> None:
        import httpx2

        self._events = events
        self._beta = beta
        self.closed = False
        betas = ",".join(str(beta) for beta in cast(list[object], request.get("betas") or []))
        self.response = httpx2.Response(
            200,
            headers={"content-type": "text/event-stream", "request-id": "req_scripted"},
            request=httpx2.Request(
                "POST", "https://api.anthropic.com/v1/messages", headers={"anthropic-beta": betas}
            ),
        )
        """The HTTP response the SDK's stream reads headers from (the request's betas among them)."""

    async def __aiter__(self) -> AsyncIterator[object]:
        from anthropic._models import construct_type  # how the SDK builds the events it receives

        if self._beta:
            from anthropic.types.beta import BetaRawMessageStreamEvent as Union
        else:
            from anthropic.types import RawMessageStreamEvent as Union
        for raw in self._events:
            if self.closed:
                return
            await anyio.lowlevel.checkpoint()  # an event arrives: others run meanwhile
            yield construct_type(type_=Union, value=raw)

    async def close(self) -> None:
        self.closed = True


def stream_manager(
    create: Callable[..., Awaitable[Message]], request: Mapping[str, Any], *, beta: bool
) -> object:
    """The SDK's stream manager over the scripted response to `request` (served on entering it)."""

    async def api_request() -> Any:
        return RawStream(raw_events(await create(**request)), beta=beta, request=request)

    if beta:
        from anthropic.lib.streaming import BetaAsyncMessageStreamManager

        return BetaAsyncMessageStreamManager(api_request())
    from anthropic.lib.streaming import AsyncMessageStreamManager

    return AsyncMessageStreamManager(api_request())
