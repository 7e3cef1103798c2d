"""Builders for scripted Messages API responses, the scripted HTTP transport, and transcript checks."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import anthropic
import httpx2 as httpx  # the HTTP library of the anthropic SDK (>= 2.x)
import pydantic
from anthropic.types import MessageParam

from boundloop import AgentLoop, Budget, Observers, ScriptedClient, Tool
from boundloop.transcript import transcript_errors

JSON = dict[str, Any]


def text(answer: str, stop_reason: str = "end_turn", **usage: int) -> JSON:
    """A response with one text block."""
    return {
        "stop_reason": stop_reason,
        "content": [{"type": "text", "text": answer}],
        "usage": {"input_tokens": 10, "output_tokens": 5, **usage},
    }


def tool_use(
    *calls: tuple[str, JSON] | tuple[str, JSON, str], stop_reason: str = "tool_use", **usage: int
) -> JSON:
    """A response asking for tools: each call is (name, input) or (name, input, id)."""
    blocks: list[JSON] = []
    for index, call in enumerate(calls):
        name, tool_input = call[0], call[1]
        call_id = call[2] if len(call) == 3 else f"toolu_{index}_{name}"
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": tool_input})
    return {
        "stop_reason": stop_reason,
        "content": blocks,
        "usage": {"input_tokens": 10, "output_tokens": 5, **usage},
    }


def api_message(body: Mapping[str, Any], *, model: str = "claude-sonnet-4-6", n: int = 1) -> JSON:
    """A full Messages API response body, as the HTTP API sends it."""
    return {
        "id": f"msg_{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
        **body,
    }


Responder = Callable[[httpx.Request], httpx.Response]


class ScriptedTransport:
    """An httpx transport serving scripted `/v1/messages` responses to the real AsyncAnthropic client.

    Each item is a response body dict (served as 200 JSON), an `httpx.Response`, or a
    callable taking the request. Every request body is recorded in `requests`.
    """

    def __init__(self, items: Iterable[JSON | httpx.Response | Responder]) -> None:
        self.items = list(items)
        self.requests: list[JSON] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/messages", request.url
        self.requests.append(json.loads(request.content))
        if not self.items:
            return httpx.Response(
                500, json={"type": "error", "error": {"type": "api_error", "message": "script ran out"}}
            )
        item = self.items.pop(0)
        if isinstance(item, httpx.Response):
            return item
        if callable(item):
            return item(request)
        return httpx.Response(200, json=api_message(item, n=len(self.requests)))

    def client(self) -> anthropic.AsyncAnthropic:
        """The real SDK client, talking to this transport only (no network, no retries)."""
        return anthropic.AsyncAnthropic(
            api_key="sk-ant-test-0000000000",
            max_retries=0,
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(self.handler)),
        )


def assert_valid_transcript(messages: list[MessageParam]) -> None:
    """Roles alternate and every tool_use is answered exactly once in the next user message."""
    assert messages[0]["role"] == "user"
    problems = transcript_errors(messages)
    assert not problems, problems


def blocks(message: MessageParam | Mapping[str, Any]) -> list[JSON]:
    """A message's content as plain dicts (SDK blocks dumped as the API would receive them)."""
    content = message["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    plain: list[JSON] = []
    for block in content:
        if isinstance(block, pydantic.BaseModel):
            plain.append(block.model_dump(mode="json", exclude_unset=True))
        else:
            plain.append(dict(block))
    return plain


def scripted_loop(script: list[JSON], tools: list[Tool], **options: Any) -> AgentLoop:
    """A loop on a `ScriptedClient`: claude-sonnet-4-6, at most three steps, no metrics; any
    option overridden."""
    settings: JSON = {
        "model": "claude-sonnet-4-6",
        "budget": Budget(max_steps=3),
        "observers": Observers(metrics=None),
    }
    return AgentLoop(ScriptedClient(script), tools=tools, **(settings | options))


ROOT = Path(__file__).resolve().parents[1]


def boundloop_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m boundloop ARGS` in a real process from the project's root, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "boundloop", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
