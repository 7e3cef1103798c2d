"""`boundloop.web.agui_app`: the AG-UI endpoint, its events read back with the official
`ag-ui-protocol` types; approvals, refusals, the client's disconnect and reconnection."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from ag_ui.core import (
    Event as AguiEvent,
)
from ag_ui.core import (
    EventType,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    TextMessageContentEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
)
from pydantic import TypeAdapter

from boundloop import (
    AgentLoop,
    Budget,
    CheckpointStore,
    ConfigurationError,
    MemoryStore,
    Model,
    Observers,
    ScriptedClient,
    SQLiteStore,
    tool,
)
from boundloop.events import Resumed, Stop
from boundloop.web import agui_app
from tests.test_examples import load
from tests.test_sse_example import WAIT_S, serving

FRONT_ENDS_DOC = (Path(__file__).resolve().parents[1] / "docs" / "front-ends.md").read_text(encoding="utf-8")

EVENTS: TypeAdapter[AguiEvent] = TypeAdapter(AguiEvent)
"""The official types' reader of any AG-UI event."""

HOSTILE = '</script><script>alert(1)</script> \x1b[31m\x07 \u2028\u2029 \r\n\ttab "quote" \\ back'
"""Model text a page must get as data: markup, control characters, line separators."""


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-{key}"


@tool
async def stall(key: str) -> str:
    """Wait until the run is cancelled (what a client's disconnect does)."""
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


@tool(requires_approval=True)
async def refund(order_id: str) -> str:
    """Refund an order (a person approves it)."""
    return f"refunded {order_id}"


def script(*responses: dict[str, Any]) -> ScriptedClient:
    return ScriptedClient(list(responses))


LOOKUP_THEN_ANSWER = (
    {
        "stop_reason": "tool_use",
        "content": [
            {"type": "thinking", "thinking": "I should look it up", "signature": "sig"},
            {"type": "text", "text": "Looking a up."},
            {"type": "tool_use", "id": "toolu_look", "name": "lookup", "input": {"key": "a"}},
        ],
    },
    {"stop_reason": "end_turn", "content": [{"type": "text", "text": f"It is value-a. {HOSTILE}"}]},
)


REFUND_CALL = {
    "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "toolu_r", "name": "refund", "input": {"order_id": "O-1"}}],
}
"""A response calling `refund` (toolu_r): the run waits for a person's answer."""


def make_loop(client: Model, store: CheckpointStore | None = None) -> AgentLoop:
    return AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[lookup, stall, refund],
        budget=Budget(max_steps=6),
        store=MemoryStore(log_deltas=True) if store is None else store,
        observers=Observers(metrics=None),
    )


def run_input(
    thread: str = "thread-1", run: str = "run-1", text: str = "What is a?", **more: Any
) -> dict[str, Any]:
    """A `RunAgentInput` as `HttpAgent` sends it."""
    body: dict[str, Any] = {
        "threadId": thread,
        "runId": run,
        "state": {},
        "messages": [{"id": "m-1", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    return body | more


def parse(body: str) -> list[tuple[str | None, AguiEvent]]:
    """Each server-sent event of a body: its `id` (None without one) and its event, read by
    the official types; every `data:` is a single line."""
    out: list[tuple[str | None, AguiEvent]] = []
    for chunk in body.split("\n\n"):
        if not chunk.strip():
            continue
        fields = dict(line.split(": ", 1) for line in chunk.split("\n"))
        assert set(fields) <= {"id", "data"}, chunk
        out.append((fields.get("id"), EVENTS.validate_json(fields["data"])))
    return out


def texts(events: list[tuple[str | None, AguiEvent]]) -> dict[str, str]:
    """Each text message's content, put together from its deltas."""
    found: dict[str, str] = {}
    for _, event in events:
        if isinstance(event, TextMessageContentEvent):
            found[event.message_id] = found.get(event.message_id, "") + event.delta
    return found


def resolved(interrupt_id: str, payload: Any) -> dict[str, Any]:
    """A `resume` entry answering the interrupt `interrupt_id` with `payload`."""
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


def asgi(app: Any) -> httpx.AsyncClient:
    """An HTTP client calling `app` in process."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app")


async def post(app: Any, body: dict[str, Any], **headers: str) -> httpx.Response:
    async with asgi(app) as client:
        return await client.post("/", json=body, headers=headers)


@pytest.fixture
def lookup_app() -> Any:
    """The endpoint of a loop whose model looks `a` up, then answers (`LOOKUP_THEN_ANSWER`)."""
    return agui_app(make_loop(script(*LOOKUP_THEN_ANSWER)))


@dataclasses.dataclass(frozen=True)
class Waiting:
    """An endpoint whose run thread-1/run-1 waits for a person to answer its `refund` call."""

    loop: AgentLoop
    app: Any
    finished: RunFinishedEvent
    """The run's last event: RUN_FINISHED with its interrupt."""


@pytest.fixture
async def waiting() -> Waiting:
    """Run thread-1/run-1 to its `refund` call (toolu_r), waiting; once answered, the model says
    "Refunded." (whatever the answer was: what the tests read is the call's result)."""
    loop = make_loop(
        script(REFUND_CALL, {"stop_reason": "end_turn", "content": [{"type": "text", "text": "Refunded."}]})
    )
    app = agui_app(loop)
    finished = parse((await post(app, run_input())).text)[-1][1]
    assert isinstance(finished, RunFinishedEvent)
    return Waiting(loop, app, finished)


async def test_a_run_streams_as_ag_ui_events_in_the_protocols_order(lookup_app: Any) -> None:
    """RUN_STARTED; the thinking as REASONING, the text as TEXT_MESSAGE_START/CONTENT/END, the
    tool call announced (TOOL_CALL_START) before its input streams (TOOL_CALL_ARGS), ended and
    answered (TOOL_CALL_RESULT); RUN_FINISHED with success; every id a cursor, increasing."""
    answer = await post(lookup_app, run_input())
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = parse(answer.text)
    kinds = [event.type for _, event in events]
    result = kinds.index(EventType.TOOL_CALL_RESULT)
    assert kinds[: result + 1] == [
        EventType.RUN_STARTED,
        EventType.REASONING_START,
        EventType.REASONING_MESSAGE_START,
        *[EventType.REASONING_MESSAGE_CONTENT] * 5,
        EventType.REASONING_MESSAGE_END,
        EventType.REASONING_END,
        EventType.TEXT_MESSAGE_START,
        *[EventType.TEXT_MESSAGE_CONTENT] * 3,
        EventType.TEXT_MESSAGE_END,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.TOOL_CALL_RESULT,
    ]
    answer_kinds = kinds[result + 1 :]
    assert answer_kinds[0] == EventType.TEXT_MESSAGE_START
    assert set(answer_kinds[1:-2]) == {EventType.TEXT_MESSAGE_CONTENT}
    assert answer_kinds[-2:] == [EventType.TEXT_MESSAGE_END, EventType.RUN_FINISHED]
    ids = [ident for ident, _ in events]
    assert ids[0] is None  # RUN_STARTED: a stream's own head
    cursors = [tuple(int(part) for part in ident.split(":")) for ident in ids[1:] if ident is not None]
    assert len(cursors) == len(ids) - 1
    assert cursors == sorted(set(cursors))
    assert list(texts(events).values()) == ["Looking a up.", f"It is value-a. {HOSTILE}"]
    args = "".join(event.delta for _, event in events if isinstance(event, ToolCallArgsEvent))
    assert json.loads(args) == {"key": "a"}
    finished = events[-1][1]
    assert isinstance(finished, RunFinishedEvent)
    assert finished.outcome is not None
    assert finished.outcome.type == "success"
    assert finished.result == {"taskId": "thread-1/run-1", "stopReason": "completed"}


async def test_the_tool_call_is_announced_when_its_block_starts(lookup_app: Any) -> None:
    """TOOL_CALL_START comes from the call's first delta (its block's start, an empty piece),
    so the client names the call before any of its input is written."""
    events = parse((await post(lookup_app, run_input())).text)
    start = next(i for i, (_, e) in enumerate(events) if e.type == EventType.TOOL_CALL_START)
    first_args = next(i for i, (_, e) in enumerate(events) if e.type == EventType.TOOL_CALL_ARGS)
    assert start < first_args
    announced, written = events[start][0], events[first_args][0]
    assert announced is not None
    assert written is not None
    assert int(announced.split(":")[0]) < int(written.split(":")[0])  # an earlier boundloop event


async def test_huge_and_hostile_text_passes_intact_as_one_json_line() -> None:
    """A 2 MB delta with markup and control characters arrives whole: one `data:` line, JSON
    that the official types read back to the exact text."""
    huge = (HOSTILE + "x" * 1000) * 2000
    loop = make_loop(script({"stop_reason": "end_turn", "content": [{"type": "text", "text": huge}]}))
    answer = await post(agui_app(loop), run_input())
    events = parse(answer.text)
    assert "".join(texts(events).values()) == huge
    for line in answer.text.split("\n"):
        assert line == "" or line.startswith(("id: ", "data: "))


async def test_a_run_waiting_for_approval_ends_with_its_interrupts_and_resume_continues_it(
    waiting: Waiting,
) -> None:
    """needs_human: RUN_FINISHED with an interrupt outcome naming the call; the next run's
    `resume` approving it runs the call and the run completes; the same answer again is 409."""
    app, finished = waiting.app, waiting.finished
    assert finished.outcome is not None
    assert finished.outcome.type == "interrupt"
    (interrupt,) = finished.outcome.interrupts
    assert interrupt.tool_call_id == "toolu_r"
    assert interrupt.reason == "approval"
    answer = [resolved(interrupt.id, {"approved": True})]
    second = await post(app, run_input(run="run-2", messages=[], resume=answer))
    assert second.status_code == 200
    events = parse(second.text)
    assert [e.type for _, e in events][:2] == [EventType.RUN_STARTED, EventType.TOOL_CALL_RESULT]
    ran = events[1][1]
    assert isinstance(ran, ToolCallResultEvent)
    assert ran.content == "refunded O-1"  # the approved call ran
    assert texts(events) == {"thread-1/run-1:1:0": "Refunded."}
    done = events[-1][1]
    assert isinstance(done, RunFinishedEvent)
    assert done.run_id == "run-2"
    assert done.outcome is not None
    assert done.outcome.type == "success"
    again = await post(app, run_input(run="run-3", messages=[], resume=answer))
    assert again.status_code == 409
    assert "no longer pending" in again.json()["error"]


@pytest.mark.parametrize(
    ("resume", "status", "words"),
    [
        pytest.param(
            [resolved("toolu_r@other/run-1", {"approved": True})],
            400,
            "not of thread",
            id="another-threads-task",
        ),
        pytest.param(
            [resolved("toolu_r", {"approved": True})],
            400,
            "no interrupt of this endpoint",
            id="not-ours",
        ),
        pytest.param(
            [resolved("toolu_r@thread-1/run-1", "yes")],
            409,
            "no longer pending",
            id="a-reply-where-no-question-waits",
        ),
        pytest.param(
            [resolved("toolu_r@thread-1/run-1", {"ok": 1})],
            400,
            '"approved": true',
            id="bad-payload",
        ),
        pytest.param(
            [resolved("toolu_x@thread-1/run-1", {"approved": True})],
            409,
            "no longer pending",
            id="a-call-not-waiting",
        ),
        pytest.param(
            [{"interruptId": "toolu_r@thread-1/nothing", "status": "cancelled"}],
            404,
            "No run",
            id="no-such-run",
        ),
    ],
)
async def test_answers_are_checked_before_anything_changes(
    waiting: Waiting, resume: list[dict[str, Any]], status: int, words: str
) -> None:
    """Answers naming another thread's run, an id this endpoint did not make, a payload that is
    no approval, or a call that does not wait are refused with a status and the reason; the run
    still waits."""
    refused = await post(waiting.app, run_input(run="run-2", messages=[], resume=resume))
    assert refused.status_code == status
    assert words in refused.json()["error"]
    state = await waiting.loop.config.store.load("thread-1/run-1")  # type: ignore[union-attr]
    assert state is not None
    assert [p.tool_use_id for p in state.pending_approvals] == ["toolu_r"]


async def test_a_denial_with_its_reason_reaches_the_model(waiting: Waiting) -> None:
    """`{"approved": false, "reason": ...}` denies the call: its result is the reason."""
    interrupt = waiting.finished
    assert isinstance(interrupt.outcome, RunFinishedInterruptOutcome)
    answer = [resolved(interrupt.outcome.interrupts[0].id, {"approved": False, "reason": "too much"})]
    events = parse((await post(waiting.app, run_input(run="run-2", messages=[], resume=answer))).text)
    result = next(e for _, e in events if isinstance(e, ToolCallResultEvent))
    assert isinstance(result.content, str)
    assert "too much" in result.content


@pytest.mark.parametrize(
    ("body", "headers", "status", "words"),
    [
        pytest.param(
            "{}", {"content-type": "application/json"}, 422, "threadId: Field required", id="not-a-run-input"
        ),
        pytest.param(
            json.dumps(run_input()),
            {"content-type": "text/plain"},
            415,
            "application/json",
            id="a-form-like-body",
        ),
        pytest.param(
            json.dumps(run_input(thread="a/b")),
            {"content-type": "application/json"},
            400,
            "thread id may not",
            id="slash-in-thread",
        ),
        pytest.param(
            json.dumps(run_input(thread="x" * 300)),
            {"content-type": "application/json"},
            400,
            "at most 200",
            id="task-id-too-long",
        ),
        pytest.param(
            json.dumps(run_input(messages=[{"id": "a", "role": "assistant", "content": "hi"}])),
            {"content-type": "application/json"},
            400,
            "end with the user's turn",
            id="no-user-turn",
        ),
        pytest.param(
            json.dumps(run_input()),
            {"content-type": "application/json", "last-event-id": "seven"},
            400,
            "Last-Event-ID",
            id="bad-last-event-id",
        ),
    ],
)
async def test_bad_requests_are_refused_with_a_clear_message(
    body: str, headers: dict[str, str], status: int, words: str
) -> None:
    """Input the endpoint cannot run is answered with a 4xx and what is wrong, and starts nothing."""
    loop = make_loop(script())
    async with asgi(agui_app(loop)) as client:
        answer = await client.post("/", content=body, headers=headers)
    assert answer.status_code == status
    assert words in answer.json()["error"]
    assert await loop.config.store.list() == []  # type: ignore[union-attr]


async def test_a_token_guards_the_endpoint_and_get_is_not_allowed() -> None:
    """With a token, a request without `Authorization: Bearer TOKEN` is 401; GET is 405."""
    app = agui_app(make_loop(script(*LOOKUP_THEN_ANSWER)), token="s3cret")
    assert (await post(app, run_input())).status_code == 401
    assert (await post(app, run_input(), authorization="Bearer wrong")).status_code == 401
    assert (await post(app, run_input(), cookie="boundloop_session=s3cret")).status_code == 401  # no cookies
    assert (await post(app, run_input(), authorization="Bearer s3cret")).status_code == 200
    async with asgi(app) as client:
        assert (await client.get("/")).status_code == 405


def test_the_endpoint_needs_a_store_logging_deltas() -> None:
    """A loop whose store keeps no deltas (or no store) cannot serve reconnecting clients: refused."""
    with pytest.raises(ConfigurationError, match="log_deltas=True"):
        agui_app(make_loop(script(), store=MemoryStore()))
    with pytest.raises(ConfigurationError, match="empty"):
        agui_app(make_loop(script()), token=" ")


async def test_the_same_ids_again_replay_the_run_from_its_start(lookup_app: Any) -> None:
    """A client that lost a finished run's stream and holds none of it posts the same ids: it
    gets the run's events again, the same ids, nothing run twice."""
    first = parse((await post(lookup_app, run_input())).text)
    again = parse((await post(lookup_app, run_input())).text)
    assert [(i, e.type) for i, e in again] == [(i, e.type) for i, e in first]
    assert texts(again) == texts(first)


async def stream_until(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], until: EventType
) -> list[tuple[str | None, AguiEvent]]:
    """POST and read the stream up to the first event of type `until`, then hang up."""
    got: list[tuple[str | None, AguiEvent]] = []
    async with client.stream("POST", url, json=body) as answer:
        buffer = ""
        async for piece in answer.aiter_text():
            buffer += piece
            while "\n\n" in buffer:
                chunk, buffer = buffer.split("\n\n", 1)
                got += parse(chunk + "\n\n")
                if got[-1][1].type == until:
                    return got
    raise AssertionError(f"the stream ended before {until}")


async def stopped(loop: AgentLoop, task_id: str) -> str:
    """The reason of the task's next stop in its event log (followed, never slept on)."""
    async with contextlib.aclosing(loop.events(task_id)) as events:
        async for event in events:
            if isinstance(event, Stop):
                return event.stop_reason
    raise AssertionError("the log ended without a stop")


@pytest.mark.asyncio_only  # a real server in a thread: one event loop is enough
async def test_a_disconnect_cancels_the_run_and_a_reconnect_continues_without_gap_or_duplicate(
    tmp_path: Path,
) -> None:
    """Served by uvicorn: the client hangs up while a tool runs, the run stops `cancelled`
    (checkpoint written); the same run posted again with `Last-Event-ID` gets what came after
    that event once (the open message restarted by id, no delta twice), then the run goes on
    (resumed) to its stop."""
    store = SQLiteStore(tmp_path / "runs.db", log_deltas=True)
    loop = make_loop(
        script(
            {
                "stop_reason": "tool_use",
                "content": [
                    {"type": "text", "text": "Waiting on the slow tool now."},
                    {"type": "tool_use", "id": "toolu_s", "name": "stall", "input": {"key": "a"}},
                ],
            },
            {"stop_reason": "end_turn", "content": [{"type": "text", "text": "Done after all."}]},
        ),
        store=store,
    )
    app = load("front_ends").create_app(loop)
    with serving(app) as base, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=base, timeout=WAIT_S) as client:
            cut = await stream_until(client, "/agui", run_input(), EventType.TOOL_CALL_END)
            assert await stopped(loop, "thread-1/run-1") == "cancelled"
            last = cut[-1][0]
            assert last is not None
            rest = await client.post("/agui", json=run_input(), headers={"last-event-id": last})
    more = parse(rest.text)
    assert more[0][1].type == EventType.RUN_STARTED
    ids = [i for i, _ in cut + more if i is not None]
    assert len(ids) == len(set(ids))  # nothing twice
    assert texts(cut + more) == {
        "thread-1/run-1:0:0": "Waiting on the slow tool now.",
        "thread-1/run-1:1:0": "Done after all.",
    }
    assert any(e.type == EventType.TOOL_CALL_RESULT for _, e in more)  # the cancelled call's answer
    done = more[-1][1]
    assert isinstance(done, RunFinishedEvent)
    assert done.outcome is not None
    assert done.outcome.type == "success"
    resumed = [event for event in await store.read("thread-1/run-1") if isinstance(event, Resumed)]
    assert [event.from_stop for event in resumed] == ["cancelled"]  # the checkpoint said so


async def test_a_reconnect_in_the_middle_of_a_message_restarts_it_by_id(tmp_path: Path) -> None:
    """Cut after the first piece of text: the new stream starts the same message id again (the
    client adds to what it has) and sends only the pieces after the cut."""
    store = SQLiteStore(tmp_path / "runs.db", log_deltas=True)
    loop = make_loop(script(*LOOKUP_THEN_ANSWER), store=store)
    app = agui_app(loop)
    whole = parse((await post(app, run_input())).text)
    cut_at = next(i for i, (_, e) in enumerate(whole) if e.type == EventType.TEXT_MESSAGE_CONTENT)
    first = whole[: cut_at + 1]
    rest = parse((await post(app, run_input(), **{"last-event-id": str(first[-1][0])})).text)
    assert [e.type for _, e in rest][:2] == [EventType.RUN_STARTED, EventType.TEXT_MESSAGE_START]
    assert texts(first + rest) == texts(whole)
    assert [i for i, _ in rest if i is not None] == [i for i, _ in whole[cut_at + 1 :] if i is not None]


async def test_a_waiting_call_left_unanswered_is_refused() -> None:
    """Two calls wait; answering one is 400 (decide every waiting call) and nothing runs."""
    calls = [
        {"type": "tool_use", "id": "toolu_1", "name": "refund", "input": {"order_id": "O-1"}},
        {"type": "tool_use", "id": "toolu_2", "name": "refund", "input": {"order_id": "O-2"}},
    ]
    loop = make_loop(script({"stop_reason": "tool_use", "content": calls}))
    app = agui_app(loop)
    await post(app, run_input())
    answer = [resolved("toolu_1@thread-1/run-1", {"approved": True})]
    refused = await post(app, run_input(run="run-2", messages=[], resume=answer))
    assert refused.status_code == 400
    assert "Decide every waiting call" in refused.json()["error"]
    state = await loop.config.store.load("thread-1/run-1")  # type: ignore[union-attr]
    assert state is not None
    assert len(state.pending_approvals) == 2


async def test_the_docs_event_table_names_the_events_the_endpoint_sends() -> None:
    """docs/front-ends.md's table names every AG-UI event type a run sends (thinking, text, a
    tool, a success, a budget stop as RUN_ERROR), and no other."""
    sent: set[str] = set()
    for steps in (6, 1):  # completed; max_steps after the first call
        loop = AgentLoop(
            script(*LOOKUP_THEN_ANSWER),
            model="claude-sonnet-4-6",
            tools=[lookup],
            budget=Budget(max_steps=steps),
            store=MemoryStore(log_deltas=True),
            observers=Observers(metrics=None),
        )
        sent |= {str(event.type.value) for _, event in parse((await post(agui_app(loop), run_input())).text)}
    doc = FRONT_ENDS_DOC
    table = doc[doc.index("| boundloop event | AG-UI events |") : doc.index("### A run waiting for a person")]
    named = set(re.findall(r"`([A-Z]+(?:_[A-Z]+)+)`", table))
    assert "RUN_ERROR" in sent
    assert named == sent
