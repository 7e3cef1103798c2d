"""The official `@ag-ui/client` (`HttpAgent`, from the npm registry, in node) against the AG-UI
endpoint of examples/front_ends.py served by uvicorn on a loopback port: the messages it
assembles are the run's answer and tool calls, through an approval and a reconnection.

The node project is tests/node/agui (pinned in its package-lock.json; `.ci/run` installs it
with `npm ci`); without node or its packages these tests skip, and fail in CI
(BOUNDLOOP_REQUIRE_INTEGRATION=1).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from boundloop import SQLiteStore
from boundloop.state import LoopState
from tests.conftest import require_binary
from tests.test_agui import HOSTILE, LOOKUP_THEN_ANSWER, make_loop, script
from tests.test_examples import load
from tests.test_sse_example import WAIT_S, serving

NODE_PROJECT = Path(__file__).resolve().parent / "node" / "agui"
USER = [{"id": "m-1", "role": "user", "content": "What is a?"}]


def node_agent() -> list[str]:
    """The command that runs tests/node/agui/agent.mjs, once node and its packages are there."""
    node = require_binary("node", "nodejs")
    if not (NODE_PROJECT / "node_modules" / "@ag-ui" / "client" / "package.json").is_file():
        message = f"@ag-ui/client is not installed: npm ci --prefix {NODE_PROJECT} (.ci/run does)"
        if os.environ.get("BOUNDLOOP_REQUIRE_INTEGRATION") or os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return [node, str(NODE_PROJECT / "agent.mjs")]


def drive(command: list[str], url: str, **config: Any) -> dict[str, Any]:
    """Run the official client with `config`; what it assembled."""
    done = subprocess.run(
        [
            *command,
            json.dumps({"url": url, "threadId": "thread-1", "runId": "run-1", "messages": USER, **config}),
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
        env={**os.environ, "NODE_ENV": "production"},
    )
    assert done.returncode == 0, done.stderr
    output: dict[str, Any] = json.loads(done.stdout)
    return output


def transcript(state: LoopState) -> list[tuple[Any, ...]]:
    """The run's conversation after the user's message: thinking, text, each tool call with its
    input, each tool result with its text, in order."""
    items: list[tuple[Any, ...]] = []
    for message in state.messages[1:]:
        content = message["content"]
        assert isinstance(content, list)
        for block in content:
            part: dict[str, Any] = dict(block)
            if part["type"] == "thinking":
                items.append(("thinking", part["thinking"]))
            elif part["type"] == "text":
                items.append(("text", part["text"]))
            elif part["type"] == "tool_use":
                items.append(("call", part["id"], part["name"], part["input"]))
            elif part["type"] == "tool_result":
                result = part["content"]
                text = result if isinstance(result, str) else "".join(b["text"] for b in result)
                items.append(("result", part["tool_use_id"], text))
    return items


def assembled(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The same, from the messages `HttpAgent` assembled (after the user's)."""
    items: list[tuple[Any, ...]] = []
    for message in messages[1:]:
        if message["role"] == "reasoning":
            items.append(("thinking", message["content"]))
        elif message["role"] == "assistant":
            if message.get("content"):
                items.append(("text", message["content"]))
            for call in message.get("toolCalls", []):
                function = call["function"]
                items.append(("call", call["id"], function["name"], json.loads(function["arguments"])))
        elif message["role"] == "tool":
            items.append(("result", message["toolCallId"], message["content"]))
    return items


def stored(store: SQLiteStore, task_id: str) -> LoopState:
    state = anyio.run(store.load, task_id)
    assert state is not None
    return state


def test_http_agent_assembles_the_runs_answer_and_tool_calls(tmp_path: Path) -> None:
    """One run: the client's messages are the run's thinking, text (markup and control
    characters intact), tool call with its input, and result, in order; the run's result."""
    command = node_agent()
    store = SQLiteStore(tmp_path / "runs.db", log_deltas=True)
    app = load("front_ends").create_app(make_loop(script(*LOOKUP_THEN_ANSWER), store=store))
    with serving(app) as base:
        got = drive(command, f"{base}/agui", scenario="run")
    state = stored(store, "thread-1/run-1")
    assert str(state.stop_reason) == "completed"
    assert assembled(got["messages"]) == transcript(state)
    assert ("text", f"It is value-a. {HOSTILE}") in transcript(state)
    assert got["results"] == [{"taskId": "thread-1/run-1", "stopReason": "completed"}]
    assert got["pendingInterrupts"] == []
    assert got["errors"] == []


def test_http_agent_answers_the_interrupt_and_the_run_completes(tmp_path: Path) -> None:
    """The run stops waiting for approval: the client holds the interrupt (its tool call id);
    the next run's `resume` (built by `buildResumeArray`) approves it, the refund runs once,
    and the client's messages are the whole run's."""
    command = node_agent()
    store = SQLiteStore(tmp_path / "runs.db", log_deltas=True)
    client = script(
        {
            "stop_reason": "tool_use",
            "content": [
                {"type": "tool_use", "id": "toolu_r", "name": "refund", "input": {"order_id": "O-1"}}
            ],
        },
        {"stop_reason": "end_turn", "content": [{"type": "text", "text": "Refunded O-1."}]},
    )
    app = load("front_ends").create_app(make_loop(client, store=store))
    with serving(app) as base:
        got = drive(
            command, f"{base}/agui", scenario="approve", secondRunId="run-2", payload={"approved": True}
        )
    first, waiting, second = got["results"]
    assert first is None  # an interrupted run has no success result
    (interrupt,) = waiting["interrupts"]
    assert interrupt["toolCallId"] == "toolu_r"
    assert interrupt["id"] == "toolu_r@thread-1/run-1"
    assert second == {"taskId": "thread-1/run-1", "stopReason": "completed"}
    state = stored(store, "thread-1/run-1")
    assert assembled(got["messages"]) == transcript(state)
    assert ("result", "toolu_r", "refunded O-1") in transcript(state)
    assert got["pendingInterrupts"] == []


def test_http_agent_reconnects_after_a_cut_without_gap_or_duplicate(tmp_path: Path) -> None:
    """The connection is cut while a tool runs (the run stops `cancelled`); the client posts the
    same run with `Last-Event-ID`: the run goes on, and the client's messages are the run's,
    none doubled."""
    command = node_agent()
    store = SQLiteStore(tmp_path / "runs.db", log_deltas=True)
    client = script(
        {
            "stop_reason": "tool_use",
            "content": [
                {"type": "text", "text": "Waiting on the slow tool now."},
                {"type": "tool_use", "id": "toolu_s", "name": "stall", "input": {"key": "a"}},
            ],
        },
        {"stop_reason": "end_turn", "content": [{"type": "text", "text": "Done after all."}]},
    )
    app = load("front_ends").create_app(make_loop(client, store=store))
    with serving(app) as base:
        got = drive(command, f"{base}/agui", scenario="reconnect", cutAfter="TOOL_CALL_END")
    cut = got["results"][1]
    assert cut["cutAt"] is not None
    assert assembled(cut["messagesAtCut"]) == [
        ("text", "Waiting on the slow tool now."),
        ("call", "toolu_s", "stall", {"key": "a"}),
    ]
    state = stored(store, "thread-1/run-1")
    assert str(state.stop_reason) == "completed"
    assert assembled(got["messages"]) == transcript(state)
    assert [item[0] for item in transcript(state)] == ["text", "call", "result", "text"]
    assert got["results"][-1] == {"taskId": "thread-1/run-1", "stopReason": "completed"}
