"""The real `anthropic.AsyncAnthropic`, serving a `ScriptedClient` script over HTTP.

`SDKScripted(script)` takes what `ScriptedClient` takes and is an `AsyncAnthropic` whose HTTP
client is an `httpx2.MockTransport`: every `POST /v1/messages` (the beta route included) is
answered with the next scripted response, dumped to JSON the way the API sends it, and parsed
back by the SDK; a streamed request (`"stream": true`, `messages.stream`) is answered with the
response's stream events as server-sent events (boundloop/_base/scripted_stream.py), cut off after
`cut_after` events when given (the connection drops mid-stream). `requests` holds the JSON body
of every request, as the API would receive it.
A doc example written for the scripted model runs unchanged on the SDK with it in place of
`ScriptedClient` (tests/test_docs.py does that for docs/claude-api.md).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anthropic
import httpx2

from boundloop import ScriptedClient
from boundloop._base.scripted_stream import raw_events
from boundloop.testing import ScriptItem


def sse(event: dict[str, Any]) -> bytes:
    """One server-sent event, as the API sends a stream event."""
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


class _SSE(httpx2.AsyncByteStream):
    """A stream's body, one event per chunk; after `cut_after` events the connection drops."""

    def __init__(self, events: list[bytes], cut_after: int | None) -> None:
        self._events = events
        self._cut_after = cut_after

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for sent, event in enumerate(self._events):
            if sent == self._cut_after:
                raise httpx2.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            yield event


class SDKScripted(anthropic.AsyncAnthropic):
    """`AsyncAnthropic` over a mock transport answering from a script (no network)."""

    def __init__(
        self, responses: Iterable[ScriptItem], *, model: str = "scripted", cut_after: int | None = None
    ) -> None:
        self.script = ScriptedClient(responses, model=model)
        self.cut_after = cut_after
        self.requests: list[dict[str, Any]] = []
        super().__init__(
            api_key="sk-ant-scripted",
            base_url="http://scripted-anthropic.invalid",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self._answer)),
        )

    async def _answer(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST" or request.url.path != "/v1/messages":
            return httpx2.Response(404, json={"type": "error", "error": {"type": "not_found_error"}})
        body: dict[str, Any] = json.loads(request.content)
        self.requests.append(body)
        message = await self.script.messages.create(**body)
        if body.get("stream"):
            events = [sse(event) for event in raw_events(message)]
            return httpx2.Response(
                200,
                headers={"content-type": "text/event-stream", "request-id": "req_scripted"},
                stream=_SSE(events, self.cut_after),
            )
        return httpx2.Response(
            200, json=message.model_dump(mode="json", warnings=False), headers={"request-id": "req_scripted"}
        )

    @property
    def remaining(self) -> int:
        """Scripted responses not served yet."""
        return self.script.remaining
