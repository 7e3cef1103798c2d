"""A loopback fake of the Anthropic Messages API, served to the real `anthropic.AsyncAnthropic`.

Nothing leaves the process: the SDK's HTTP client (`httpx2`) is given a `MockTransport` whose
async handler answers each `POST /v1/messages` with the next queued `Reply`:

- `Body`: any JSON value with any status (a valid Message, an odd one, a malformed one);
- `ApiError`: an error status with the API's error JSON (`{"type": "error", "error": {...}}`)
  and a `request-id` header (429, 500, 529, 400, ...);
- `Drop`: the connection dropped before a response (`httpx2.ConnectError`,
  `httpx2.RemoteProtocolError`, `httpx2.ReadTimeout` raised from the handler);
- `Raw`: any bytes with any content type (garbage, truncated JSON, an empty body);
- `Cut`: a 200 whose body streams some bytes and then breaks off (the connection drops
  mid-body);
- `Hang`: a response that never comes (the handler waits until it is cancelled).

Every reply may wait `delay_s` first (`anyio.sleep` inside the async handler: latency, not a
proof of anything). Every request body is recorded in `requests`; an empty queue is answered
with a 500 `api_error`, so a run never waits on a script that ran out.
"""

from __future__ import annotations

import dataclasses
import json
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Final, Literal, TypeAlias

import anthropic
import anyio
import httpx2

JSON = dict[str, Any]
MODEL: Final = "claude-sonnet-4-6"
API_KEY: Final = "sk-ant-fake-0000000000"
"""The key the fake's client sends; the fake never checks it."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Body:
    """Any JSON value as the response body, with any status."""

    json: object
    status: int = 200
    delay_s: float = 0.0
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict[str, str])


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ApiError:
    """An error status with the API's error JSON shape and a `request-id` header."""

    status: int
    type: str = "api_error"
    message: str = "Internal server error"
    delay_s: float = 0.0


DropKind: TypeAlias = Literal["connect", "protocol", "read_timeout"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Drop:
    """No response: the handler raises the transport error of a dropped connection."""

    kind: DropKind = "connect"
    delay_s: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Raw:
    """Raw bytes as the body (garbage, truncated JSON), under any status and content type."""

    content: bytes
    status: int = 200
    content_type: str = "application/json"
    delay_s: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Cut:
    """A 200 whose body streams `sent` and then breaks off with `httpx2.RemoteProtocolError`."""

    sent: bytes
    delay_s: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Hang:
    """A response that never comes: the handler sets `started` and waits until cancelled."""

    started: anyio.Event | None = None
    delay_s: float = 0.0


Reply: TypeAlias = Body | ApiError | Drop | Raw | Cut | Hang

ERROR_TYPES: Final[Mapping[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
"""The API's `error.type` for each status it documents."""


def message(
    content: object,
    stop_reason: object = "end_turn",
    *,
    input_tokens: object = 10,
    output_tokens: object = 5,
    n: int = 1,
    **fields: object,
) -> JSON:
    """A Messages API response body; any field may be given any value, valid or not."""
    return {
        "id": f"msg_{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        **fields,
    }


def text_block(text: object) -> JSON:
    """A text content block."""
    return {"type": "text", "text": text}


def tool_use_block(call_id: object, name: object, tool_input: object) -> JSON:
    """A tool_use content block."""
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}


class _BreaksOff(httpx2.AsyncByteStream):
    """A response body that sends some bytes, then the connection drops."""

    def __init__(self, sent: bytes) -> None:
        self._sent = sent

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._sent:
            yield self._sent
        raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body")


class FakeAPI:
    """The fake Messages API: a queue of replies, served in order, and every request recorded.

    Args:
        replies: the first replies to serve.
        honour_max_tokens: clamp a JSON body's integer `usage.output_tokens` to the request's
            `max_tokens`, as the real API never returns more output than asked for (a
            budget's token bound depends on it).
    """

    def __init__(self, replies: Iterable[Reply] = (), *, honour_max_tokens: bool = True) -> None:
        self.queue: deque[Reply] = deque(replies)
        self.requests: list[JSON] = []
        """The JSON body of every request, in order."""
        self.served: list[str] = []
        """The kind of reply given to each request (`empty` when the queue had run out)."""
        self.honour_max_tokens = honour_max_tokens

    def push(self, *replies: Reply) -> None:
        """Queue replies after those already queued."""
        self.queue.extend(replies)

    def clear(self) -> None:
        """Forget the queued replies (recorded requests stay)."""
        self.queue.clear()

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        """Answer one HTTP request (the `MockTransport` handler)."""
        if request.method != "POST" or request.url.path != "/v1/messages":
            return _error(404, "not_found_error", f"no route {request.method} {request.url.path}")
        body: JSON = json.loads(request.content)
        self.requests.append(body)
        if not self.queue:
            self.served.append("empty")
            return _error(500, "api_error", "the fake API's queue is empty")
        reply = self.queue.popleft()
        self.served.append(type(reply).__name__)
        if reply.delay_s > 0:
            await anyio.sleep(reply.delay_s)
        return await self._respond(reply, body)

    async def _respond(self, reply: Reply, request: JSON) -> httpx2.Response:
        match reply:
            case Body():
                value = self._clamped(reply.json, request) if self.honour_max_tokens else reply.json
                return httpx2.Response(
                    reply.status,
                    json=value,
                    headers={"request-id": f"req_{len(self.requests):04d}", **reply.headers},
                )
            case ApiError():
                return _error(reply.status, reply.type, reply.message)
            case Drop():
                raise _dropped(reply.kind)
            case Raw():
                return httpx2.Response(
                    reply.status, content=reply.content, headers={"content-type": reply.content_type}
                )
            case Cut():
                return httpx2.Response(
                    200, headers={"content-type": "application/json"}, stream=_BreaksOff(reply.sent)
                )
            case Hang():
                if reply.started is not None:
                    reply.started.set()
                await anyio.sleep_forever()
                raise AssertionError("unreachable: sleep_forever returned")  # pragma: no cover

    @staticmethod
    def _clamped(value: object, request: JSON) -> object:
        if not isinstance(value, dict):
            return value
        usage = value.get("usage")
        limit = request.get("max_tokens")
        if not isinstance(usage, dict) or not isinstance(limit, int):
            return value
        output = usage.get("output_tokens")
        if isinstance(output, int) and not isinstance(output, bool) and output > limit:
            return {**value, "usage": {**usage, "output_tokens": limit}}
        return value

    def client(self) -> anthropic.AsyncAnthropic:
        """The real SDK client, talking only to this fake (no network, no SDK retries)."""
        return anthropic.AsyncAnthropic(
            api_key=API_KEY,
            base_url="http://fake-anthropic.invalid",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler)),
        )


def _error(status: int, kind: str, text: str) -> httpx2.Response:
    return httpx2.Response(
        status,
        json={"type": "error", "error": {"type": kind, "message": text}},
        headers={"request-id": f"req_err_{status}"},
    )


def _dropped(kind: DropKind) -> httpx2.TransportError:
    if kind == "connect":
        return httpx2.ConnectError("[Errno 111] Connection refused")
    if kind == "protocol":
        return httpx2.RemoteProtocolError("Server disconnected without sending a response.")
    return httpx2.ReadTimeout("The read operation timed out")
