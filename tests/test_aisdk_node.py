"""`chat_app` read by the AI SDK's own client in node: the `ai` package's `DefaultChatTransport`
(what `useChat` sends, and its parsing of each part against the package's `uiMessageChunkSchema`)
and `readUIMessageStream` (how `useChat` assembles the message), against the app under uvicorn
on loopback. The message the package assembles equals the run's transcript.

Needs node and `npm ci --prefix tests/node/aisdk` (.ci/run does both); locally a missing one
skips, in CI (BOUNDLOOP_REQUIRE_INTEGRATION=1) it fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from boundloop import MemoryStore, tool
from tests.aisdk_chat import (
    ASK,
    HOSTILE,
    Noticing,
    approval_script,
    call,
    chat_loop,
    expected_parts,
    mounted,
    question_script,
    serving,
    shown,
    transcript,
)
from tests.conftest import require_binary

NODE_PROJECT = Path(__file__).resolve().parent / "node" / "aisdk"
WAIT_S = 60.0
"""The bound on a node run against the server (node starts slowly on a shared CI machine)."""

pytestmark = pytest.mark.asyncio_only


def require_ai_package() -> str:
    """The path of node, once the `ai` package is installed in tests/node/aisdk."""
    node = require_binary("node", "nodejs")
    if not (NODE_PROJECT / "node_modules" / "ai" / "package.json").is_file():
        message = "the ai package is missing: npm ci --prefix tests/node/aisdk (.ci/run does)"
        if os.environ.get("BOUNDLOOP_REQUIRE_INTEGRATION") or os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return node


async def read_with_ai(node: str, scenario: str, url: str, chat_id: str, text: str, *more: str) -> Any:
    """Run tests/node/aisdk/read.mjs: what the `ai` package assembled, as JSON."""
    done = await anyio.run_process(
        [node, str(NODE_PROJECT / "read.mjs"), scenario, url, chat_id, text, *more], check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


async def test_ai_package_assembles_the_run_with_its_approval() -> None:
    """The `ai` package parses every part and assembles reasoning, text (hostile characters and a
    100 000-character word intact) and tool parts with input and output, equal to the run's
    transcript; the refund waits as `approval-requested`, and the approval sent back (as
    `addToolApprovalResponse` leaves the message) finishes the same message."""
    node = require_ai_package()
    store = MemoryStore(log_deltas=True)
    answer = f"Refunded. {HOSTILE}{'y' * 100_000} end"
    loop = chat_loop(approval_script(answer), store=store)
    with anyio.fail_after(WAIT_S):
        async with serving(mounted(loop)) as url:
            read = await read_with_ai(node, "chat", url, "c-1", "Refund O-1")
    first, final = read["first"], read["final"]
    assert first["id"] == final["id"] == "c-1/1"
    waiting = [part for part in first["parts"] if part.get("toolCallId") == "toolu_refund"]
    assert [(part["state"], part["approval"]["id"]) for part in waiting] == [
        ("approval-requested", "toolu_refund")
    ]
    messages = await transcript(store, "c-1/1")
    assert shown(final) == expected_parts(messages)
    assert shown(final)[-1] == {"type": "text", "text": answer, "state": "done"}
    assert final["metadata"] == {"taskId": "c-1/1", "stopReason": "completed"}
    assert [part["type"] for part in final["parts"]].count("step-start") == 3


async def test_ai_package_answers_the_models_question() -> None:
    """The `ai` package's own chat (`AbstractChat`, what `useChat` runs) shows the model's
    question as its tool part `input-available`; `addToolOutput` with the person's answer and
    `sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls` send it back by
    themselves; the run resumes with it as the reply and the same message ends with the model's
    answer, equal to the run's transcript (the question's output is the person's answer)."""
    node = require_ai_package()
    store = MemoryStore(log_deltas=True)
    loop = chat_loop(question_script("Refunded O-1 to account 7."), store=store)
    with anyio.fail_after(WAIT_S):
        async with serving(mounted(loop)) as url:
            read = await read_with_ai(node, "question", url, "q-1", "Refund O-1", ASK, "Account 7, please")
    assert read["errors"] == []
    first, final = read["first"], read["final"]
    asked = [part for part in first["parts"] if part.get("toolCallId") == "toolu_ask"]
    assert [(part["state"], part["input"]) for part in asked] == [
        ("input-available", {"reason": "Which account gets the refund?"})
    ]
    assert first["metadata"] == {"taskId": "q-1/1", "stopReason": "needs_human"}
    assert final["id"] == first["id"] == "q-1/1"
    assert read["messages"] == 2  # the user's and one assistant message, continued
    messages = await transcript(store, "q-1/1")
    assert shown(final) == expected_parts(messages)
    answered = [part for part in shown(final) if part.get("toolCallId") == "toolu_ask"]
    assert [(part["state"], part["output"]) for part in answered] == [
        ("output-available", "Account 7, please")
    ]
    assert shown(final)[-1] == {"type": "text", "text": "Refunded O-1 to account 7.", "state": "done"}
    assert final["metadata"] == {"taskId": "q-1/1", "stopReason": "completed"}
    assert read["end"]["finishReason"] == "stop"


async def test_ai_package_reconnects_without_gap_or_duplicate() -> None:
    """The client hangs up once a call's input is available (`on_disconnect="continue"`: the run
    goes on) and reconnects with the `ai` package's `reconnectToStream` (GET CHAT_ID/stream):
    the message it assembles from the replay equals the run's transcript, each part once."""
    node = require_ai_package()
    released = anyio.Event()

    @tool
    async def carrier(order: str) -> str:
        """Ask the carrier where the parcel is."""
        await released.wait()
        return f"{order} was delivered"

    store = MemoryStore(log_deltas=True)
    script = [
        {
            "stop_reason": "tool_use",
            "content": [
                {"type": "text", "text": "Asking the carrier."},
                call("carrier", {"order": "O-2"}, "toolu_c"),
            ],
        },
        {"stop_reason": "end_turn", "content": [{"type": "text", "text": "It was delivered yesterday."}]},
    ]
    loop = chat_loop(script, store=store, tools=[carrier])
    app = Noticing(mounted(loop, on_disconnect="continue"))

    async def release() -> None:
        await app.reconnected.wait()
        released.set()

    read: Any = None
    with anyio.fail_after(WAIT_S):
        async with serving(app) as url, anyio.create_task_group() as group:
            group.start_soon(release)
            read = await read_with_ai(node, "reconnect", url, "c-2", "Where is O-2?")
    assert read["before"][-1] == "tool-input-available"
    assert "tool-output-available" not in read["before"]  # it hung up while the call ran
    assert shown(read["final"]) == expected_parts(await transcript(store, "c-2/1"))
