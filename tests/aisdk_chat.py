"""What the AI SDK chat tests share: scripted chats, the app under real uvicorn on loopback, the
UI message stream read back, and the UI message a run's transcript should assemble to."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from boundloop import (
    AgentLoop,
    Budget,
    CheckpointStore,
    MemoryStore,
    Observers,
    Policy,
    ScriptedClient,
    ToolContext,
    tool,
)
from boundloop.testing import ScriptItem
from boundloop.web import OnDisconnect, chat_app

JSON = dict[str, Any]
MODEL = "claude-sonnet-4-6"
HOSTILE = '</script><script>alert(1)</script> \x00\x01\x1b[31m\u2028\u2029 \r\n"quoted" \\ \U0001f600 '
"""Model text a page must show as text: a closing script tag, control characters, line and
paragraph separators, CR LF, quotes, a backslash and an emoji."""


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-{key}"


@tool(side_effect=True, requires_approval=True)
async def refund(order: str, ctx: ToolContext) -> str:
    """Refund an order (a person approves it first)."""
    return f"refunded {order}"


def call(name: str, tool_input: JSON, tool_use_id: str) -> JSON:
    return {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input}


def approval_script(answer: str = "Done: refunded O-1.") -> list[JSON]:
    """Thinking, text, a lookup; then a refund that waits for a person; then the answer."""
    return [
        {
            "stop_reason": "tool_use",
            "content": [
                {"type": "thinking", "thinking": "The order first, then the refund.", "signature": "sig"},
                {"type": "text", "text": f"Looking it up {HOSTILE}"},
                call("lookup", {"key": "O-1"}, "toolu_lookup"),
            ],
        },
        {"stop_reason": "tool_use", "content": [call("refund", {"order": "O-1"}, "toolu_refund")]},
        {"stop_reason": "end_turn", "content": [{"type": "text", "text": answer}]},
    ]


ASK = "ask_human"
"""The chat loops' escalation tool (`Policy.escalation_tool`): the model's question to a person."""


def question_script(answer: str = "Refunded O-1 to account 7.") -> list[JSON]:
    """A lookup; then the model asks a person (the escalation tool); then the answer."""
    return [
        {"stop_reason": "tool_use", "content": [call("lookup", {"key": "O-1"}, "toolu_lookup")]},
        {
            "stop_reason": "tool_use",
            "content": [
                {"type": "text", "text": "I need to ask."},
                call(ASK, {"reason": "Which account gets the refund?"}, "toolu_ask"),
            ],
        },
        {"stop_reason": "end_turn", "content": [{"type": "text", "text": answer}]},
    ]


def chat_loop(
    script: Sequence[ScriptItem], *, store: CheckpointStore | None = None, tools: Sequence[Any] = ()
) -> AgentLoop[Any]:
    return AgentLoop(
        ScriptedClient(script),
        model=MODEL,
        tools=[lookup, refund, *tools],
        budget=Budget(max_steps=6),
        store=store if store is not None else MemoryStore(log_deltas=True),
        observers=Observers(metrics=None),
        policy=Policy(escalation_tool=ASK),
    )


def mounted(
    loop: AgentLoop[Any], *, on_disconnect: OnDisconnect = "cancel", token: str | None = None
) -> Starlette:
    """The chat app at /chat, as an application mounts it (the AI SDK's `api`)."""
    return Starlette(routes=[Mount("/chat", chat_app(loop, on_disconnect=on_disconnect, token=token))])


def user(text: str, message_id: str = "u1") -> JSON:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def body(chat_id: str, *messages: JSON) -> JSON:
    """`useChat`'s POST body (`DefaultChatTransport`)."""
    return {"id": chat_id, "messages": list(messages), "trigger": "submit-message"}


def parse(stream: str) -> list[JSON]:
    """The parts of a UI message stream's body (every event one `data:` line), `[DONE]` checked."""
    frames = [frame for frame in stream.split("\n\n") if frame]
    assert frames[-1] == "data: [DONE]", frames[-1:]
    parts: list[JSON] = []
    for frame in frames[:-1]:
        assert frame.startswith("data: "), frame[:80]
        assert "\n" not in frame, frame[:80]
        assert "\r" not in frame, frame[:80]
        parts.append(json.loads(frame.removeprefix("data: ")))
    return parts


def expected_parts(messages: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """The UI message parts a run's transcript makes: its reasoning, text and tool calls (with
    their input and output), in order, each in its final state."""
    outputs: dict[str, Any] = {}
    for message in messages:
        content: str | list[JSON] = message["content"]
        if message["role"] == "user" and isinstance(content, list):
            for block in content:
                if block["type"] == "tool_result":
                    outputs[block["tool_use_id"]] = block["content"]
    parts: list[JSON] = []
    for message in messages:
        if message["role"] != "assistant":
            continue
        for block in message["content"]:
            if block["type"] == "thinking":
                parts.append({"type": "reasoning", "text": block["thinking"], "state": "done"})
            elif block["type"] == "text":
                parts.append({"type": "text", "text": block["text"], "state": "done"})
            elif block["type"] == "tool_use":
                parts.append(
                    {
                        "type": f"tool-{block['name']}",
                        "toolCallId": block["id"],
                        "state": "output-available",
                        "input": block["input"],
                        "output": outputs[block["id"]],
                    }
                )
    return parts


def shown(message: Mapping[str, Any]) -> list[JSON]:
    """An assembled UI message's parts, as `expected_parts` writes them (step boundaries left out)."""
    keys = ("type", "text", "state", "toolCallId", "input", "output")
    return [
        {k: part[k] for k in keys if k in part} for part in message["parts"] if part["type"] != "step-start"
    ]


async def transcript(store: CheckpointStore, task_id: str) -> list[Mapping[str, Any]]:
    state = await store.load(task_id)
    assert state is not None
    return [json.loads(json.dumps(message, default=_plain)) for message in state.messages]


def _plain(value: object) -> object:
    dump = getattr(value, "model_dump", None)
    if dump is None:
        raise TypeError(type(value).__name__)
    return dump(mode="json", exclude_none=True)


class Noticing:
    """An ASGI app in front of another that sets `reconnected` when a client GETs a chat's stream."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.reconnected = anyio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and scope["path"].endswith("/stream"):
            self.reconnected.set()
        await self.app(scope, receive, send)


@contextlib.asynccontextmanager
async def serving(app: ASGIApp) -> AsyncGenerator[str]:
    """`app` under real uvicorn in this event loop, on a free port of 127.0.0.1: its base URL.

    The socket listens before the server starts, so a request made at once waits in its backlog.
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [sock])
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
        finally:
            server.should_exit = True
    sock.close()
