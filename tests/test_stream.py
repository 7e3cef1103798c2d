"""`AgentLoop.stream`: a run's events as they happen, the model's deltas included.

Every test runs on asyncio and trio. Ordering is proven with events (a tool that waits on a
`threading.Event`, the consumer's position in the stream, `anyio.wait_all_tasks_blocked`),
never with sleeps.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import typing
from pathlib import Path
from typing import Any

import anyio
import pytest

from boundloop import (
    AgentLoop,
    Budget,
    MemoryStore,
    Observers,
    Policy,
    ScriptedClient,
    SQLiteStore,
    StopReason,
    TaskExists,
    Tool,
    tool,
)
from boundloop._base.scripted_stream import raw_events
from boundloop.events import (
    EVENT_KINDS,
    BaseEvent,
    Event,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolResult,
    to_dict,
)
from boundloop.redaction import Redaction
from tests.docrun import python_blocks, runs_as_promised
from tests.fake_api import Cut, FakeAPI
from tests.helpers import assert_valid_transcript, text
from tests.sdk_scripted import SDKScripted, sse

JSON = dict[str, Any]
DELTAS = {"text_delta", "thinking_delta", "tool_input_delta"}
TIMING = {"at", "duration_s", "seq"}
"""What differs between a streamed and an unstreamed run of one script: the clock, and the
numbers the deltas take in the task's stream."""


@tool
def add(a: int, b: float) -> float:
    """Add two numbers (a sync tool function: it runs in a worker thread)."""
    return a + b


SCRIPT: list[JSON] = [
    {
        "stop_reason": "tool_use",
        "content": [
            {"type": "thinking", "thinking": "Two numbers, one tool.", "signature": "c2ln"},
            {"type": "text", "text": "Let me add them up."},
            {"type": "tool_use", "name": "add", "input": {"a": 1, "b": 2.5}},
        ],
        "usage": {"input_tokens": 20, "output_tokens": 9, "cache_read_input_tokens": 4},
    },
    text("The sum is 3.5, as computed."),
]


def make_loop(client: Any, **options: Any) -> AgentLoop:
    settings: JSON = {
        "model": "claude-sonnet-4-6",
        "tools": [add],
        "budget": Budget(max_steps=4),
        "observers": Observers(metrics=None),
    }
    settings.update(options)
    return AgentLoop(client, **settings)


def comparable(event: BaseEvent) -> JSON:
    return {key: value for key, value in to_dict(event).items() if key not in TIMING}


def state_json(result: Any, *, nulls: bool = True) -> JSON:
    state: JSON = json.loads(result.state.to_json())
    del state["started_at"], state["elapsed_s"], state["next_seq"]
    return state if nulls else without_nulls(state)


def without_nulls(value: Any) -> Any:
    """JSON with every null member left out: the SDK reads an absent field and a null one alike,
    and its JSON body of a response has every field, its stream events only those sent."""
    if isinstance(value, dict):
        members = typing.cast(dict[str, Any], value)
        return {key: without_nulls(item) for key, item in members.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in typing.cast(list[Any], value)]  # type: ignore[redundant-cast]
    return value


def piece(event: TextDelta | ThinkingDelta | ToolInputDelta) -> str:
    """A delta's piece, by the name the SDK gives it."""
    if isinstance(event, TextDelta):
        return event.text
    return event.thinking if isinstance(event, ThinkingDelta) else event.partial_json


async def read_all(loop: AgentLoop, goal: str, **options: Any) -> tuple[list[Event], Any]:
    async with loop.stream(goal, **options) as run:
        events = [event async for event in run]
    return events, run.result


@pytest.mark.parametrize("sdk", [False, True], ids=["scripted", "sdk"])
async def test_a_streamed_run_records_what_run_records(sdk: bool) -> None:
    """Same script, same state (but for its clock and `next_seq`), same recorded events (but for
    their clock and numbers); the deltas come in between, numbered in the same sequence, and
    put together they are the blocks the state recorded. On the SDK a null and an absent field
    are the same (`without_nulls`); on the scripted model the JSON is identical."""
    trace_id = "a" * 32
    client = SDKScripted(SCRIPT) if sdk else ScriptedClient(SCRIPT)
    streamed, result = await read_all(make_loop(client), "add 1 and 2.5", task_id="t-1", trace_id=trace_id)
    plain = await make_loop(SDKScripted(SCRIPT) if sdk else ScriptedClient(SCRIPT)).run(
        "add 1 and 2.5", task_id="t-1", trace_id=trace_id
    )

    assert result is not None
    assert result.stop_reason is StopReason.COMPLETED
    assert state_json(result, nulls=not sdk) == state_json(plain, nulls=not sdk)
    assert [event.seq for event in streamed] == list(range(len(streamed)))
    recorded = [event for event in streamed if event.kind not in DELTAS]
    assert [without_nulls(comparable(e)) for e in recorded] == [
        without_nulls(comparable(e)) for e in plain.events
    ]
    if not sdk:
        assert [comparable(e) for e in recorded] == [comparable(e) for e in plain.events]
    assert list(result.events) == recorded  # the deltas are streamed, not kept
    if sdk:
        assert all(body.get("stream") is True for body in client.requests)

    first = streamed[: next(i for i, e in enumerate(streamed) if e.kind == "proposal")]
    pieces: dict[int, str] = {}
    for event in first:
        if isinstance(event, TextDelta | ThinkingDelta | ToolInputDelta):
            pieces[event.index] = pieces.get(event.index, "") + piece(event)
    kinds = [event.kind for event in first if event.kind in DELTAS]
    assert kinds == ["thinking_delta"] * 4 + ["text_delta"] * 5 + ["tool_input_delta"] * 5
    # the call is announced by its id and name when its block starts, before any of its input
    inputs = [event for event in first if isinstance(event, ToolInputDelta)]
    proposal = next(e for e in streamed if e.kind == "proposal")
    call = next(e for e in streamed if isinstance(e, ToolResult))
    assert inputs[0].partial_json == ""
    assert {(e.tool_use_id, e.name) for e in inputs} == {(call.tool_use_id, "add")}
    assert json.loads("".join(e.partial_json for e in inputs)) == {"a": 1, "b": 2.5}
    assert proposal.seq > inputs[-1].seq


async def test_the_beta_route_streams_too() -> None:
    """Settings only the beta API takes: `beta.messages.stream`, the same events."""
    from boundloop import ModelSettings

    client = ScriptedClient([text("Hello there")])
    loop = make_loop(client, settings=ModelSettings(betas=["context-management-2025-06-27"]))
    events, result = await read_all(loop, "hi")
    assert result is not None
    assert result.answer == "Hello there"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hello ", "there"]
    assert client.requests[0]["betas"] == ["context-management-2025-06-27"]


async def test_a_stream_cut_midway_fails_the_run_as_a_failed_model_call() -> None:
    """The SDK raising mid-stream: recorded, the run `failed`, nothing of the cut message kept."""
    client = SDKScripted(SCRIPT, cut_after=6)
    events, result = await read_all(make_loop(client), "add")
    assert result is not None
    assert result.stop_reason is StopReason.FAILED
    assert [error.kind for error in result.state.errors] == ["model_api"]
    assert len(result.state.messages) == 1
    assert result.state.responses == []
    assert any(event.kind == "thinking_delta" for event in events)  # what came before the cut
    assert events[-1].kind == "stop"


async def test_a_stream_cut_by_the_fake_api_fails_the_run() -> None:
    """The fake API's `Cut` (the body breaks off after its first events)."""
    body = b"".join(sse(event) for event in list(raw_events(_message(SCRIPT[1])))[:3])
    api = FakeAPI([Cut(sent=body)])
    _, result = await read_all(make_loop(api.client()), "add")
    assert result is not None
    assert result.stop_reason is StopReason.FAILED
    assert result.state.errors[0].kind in {"model_api", "model_response"}


def _message(raw: JSON) -> Any:
    from boundloop.testing import parse_message

    return parse_message(raw, model="claude-sonnet-4-6")


class Gate:
    """A sync tool that says when it started (in its worker thread) and waits to be released."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.tool = tool(name="slow", description="Waits.")(self.run)

    def run(self, key: str) -> str:
        self.started.set()
        self.release.wait(timeout=30)
        return key


def gated_script() -> list[JSON]:
    call = {"type": "tool_use", "name": "slow", "input": {"key": "k"}}
    return [
        {"stop_reason": "tool_use", "content": [{"type": "text", "text": "One moment."}, call]},
        text("Done."),
    ]


async def test_cancel_stops_the_run_now_with_a_valid_transcript_and_its_checkpoint() -> None:
    gate = Gate()
    store = MemoryStore()
    client = ScriptedClient(gated_script())
    loop = make_loop(client, tools=[gate.tool], store=store)
    seen: list[str] = []
    try:
        async with loop.stream("go", task_id="c-1") as run:
            async for event in run:
                seen.append(event.kind)
                if event.kind == "tool_started":
                    await anyio.to_thread.run_sync(gate.started.wait)  # the tool runs in its thread
                    await run.cancel()
                    assert run.result is not None  # stopped when cancel() returns
    finally:
        gate.release.set()
    result = run.result
    assert result is not None
    assert result.stop_reason is StopReason.CANCELLED
    assert [o.outcome for o in result.state.observations] == ["cancelled"]
    assert_valid_transcript(result.state.messages)
    assert seen[-1] == "stop"
    stored = await store.load("c-1")
    assert stored is not None
    assert stored.stop_reason is StopReason.CANCELLED
    assert client.remaining == 1


async def test_cancel_after_turn_lets_the_turn_finish_then_stops_before_the_next_call() -> None:
    gate = Gate()
    gate.release.set()
    store = MemoryStore()
    client = ScriptedClient(gated_script())
    loop = make_loop(client, tools=[gate.tool], store=store)
    async with loop.stream("go", task_id="c-2") as run:
        async for event in run:
            if event.kind == "text_delta":  # mid model call: the call and its batch still finish
                await run.cancel(after_turn=True)
    result = run.result
    assert result is not None
    assert result.stop_reason is StopReason.CANCELLED
    assert [o.outcome for o in result.state.observations] == ["ok"]
    assert client.remaining == 1  # no second model call
    assert_valid_transcript(result.state.messages)
    stored = await store.load("c-2")
    assert stored is not None
    assert stored.stop_reason is StopReason.CANCELLED


async def test_leaving_the_stream_early_cancels_the_run_and_waits_for_it() -> None:
    """`break` and leave the `async with`: the run is stopped, not running in the background."""
    gate = Gate()
    gate.release.set()
    store = MemoryStore()
    client = ScriptedClient(gated_script())
    async with make_loop(client, tools=[gate.tool], store=store).stream("go", task_id="c-3") as run:
        async for event in run:
            if event.kind == "text_delta":
                break
    result = run.result
    assert result is not None
    assert result.stop_reason is StopReason.CANCELLED
    assert not gate.started.is_set()
    assert client.remaining == 1
    stored = await store.load("c-3")
    assert stored is not None
    assert stored.stop_reason is StopReason.CANCELLED


async def test_a_slow_reader_holds_at_most_the_buffer_and_loses_no_event() -> None:
    words = " ".join(f"w{n}" for n in range(40))
    client = ScriptedClient([text(words)])
    async with make_loop(client).stream("talk", buffer=4) as run:
        await anyio.wait_all_tasks_blocked()  # the run can go no further without the reader
        stats = run.statistics()
        assert stats.deltas_buffered == 4
        assert stats.producer_waiting
        assert stats.buffer == 4
        events = [event async for event in run]
    result = run.result
    assert result is not None
    assert result.answer == words
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert "".join(e.text for e in deltas) == words
    assert len(deltas) == 40
    assert [e for e in events if e.kind not in DELTAS] == list(result.events)
    assert run.statistics().peak_deltas_buffered == 4


async def test_the_runs_exception_is_raised_by_the_iteration() -> None:
    store = MemoryStore()
    loop = make_loop(ScriptedClient([text("a"), text("b")]), store=store)
    await loop.run("first", task_id="same")
    stream = loop.stream("again", task_id="same")

    async def read() -> None:
        async with stream as run:
            async for _ in run:
                pass

    with pytest.raises(TaskExists):
        await read()
    assert stream.result is None


async def test_stream_resume_streams_the_continued_run() -> None:
    store = MemoryStore()
    script = [
        {
            "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1, "b": 1}}],
        },
        text("Two."),
    ]
    loop = make_loop(ScriptedClient(script), store=store, policy=Policy(requires_approval={"add"}))
    waiting = await loop.run("add", task_id="r-1")
    assert waiting.stop_reason is StopReason.NEEDS_HUMAN
    async with loop.stream_resume("r-1", approvals={"toolu_1": True}) as run:
        events = [event async for event in run]
    assert events[0].kind == "resumed"
    assert events[0].seq == waiting.events[-1].seq + 1
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Two."]
    assert run.result is not None
    assert run.result.answer == "Two."


GUIDE = (Path(__file__).parent.parent / "docs" / "streaming.md").read_text(encoding="utf-8")


def test_the_guide_names_every_event_kind_with_its_class_and_fields() -> None:
    """docs/streaming.md's table: one row per kind of `EVENT_KINDS`, naming its class and fields."""
    rows = {line.split("`")[1]: line for line in GUIDE.splitlines() if line.startswith("| `")}
    assert list(rows) == list(EVENT_KINDS)
    base = {field.name for field in dataclasses.fields(BaseEvent)} | {"kind"}
    for cls in typing.get_args(typing.get_args(Event)[0]):
        row = rows[cls.__dataclass_fields__["kind"].default]
        cells = row.split(" | ")
        assert cells[1] == f"`{cls.__name__}`"
        named = [name for name in cells[2].split("`")[1::2]]
        assert named == [field.name for field in dataclasses.fields(cls) if field.name not in base], row


@pytest.mark.parametrize("index", range(len(python_blocks(GUIDE))))
def test_the_guides_examples_run_as_promised(
    index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs_as_promised(python_blocks(GUIDE)[index], tmp_path / f"streaming_{index}.py", capsys)


@pytest.mark.parametrize("log_deltas", [False, True])
async def test_a_store_logging_deltas_gets_the_streamed_deltas_in_their_place(
    log_deltas: bool, tmp_path: Path
) -> None:
    """With `log_deltas=True` the event log holds every event the stream gave, deltas included,
    each at its `seq`: the log is the stream without a gap. Without, the log is the recorded
    events only (no delta kind), as `result.events` is."""
    store = SQLiteStore(tmp_path / "runs.db", log_deltas=log_deltas)
    loop = make_loop(ScriptedClient(SCRIPT), store=store)
    streamed, result = await read_all(loop, "Add 1 and 2.5.", task_id="t-deltas")
    logged = await store.read("t-deltas", after=-1, limit=1_000)
    assert any(event.kind in DELTAS for event in streamed)
    if log_deltas:
        assert [event.seq for event in logged] == [event.seq for event in streamed]
        assert [event.kind for event in logged] == [event.kind for event in streamed]
    else:
        assert [event.seq for event in logged] == [event.seq for event in result.events]
        assert not any(event.kind in DELTAS for event in logged)


BEARER = "Bearer abcdefghijklmnop0123"
"""A secret the stream splits: the scripted stream cuts after whitespace, so `Bearer ` and the
token come in two deltas, neither of them a secret on its own."""


@pytest.mark.parametrize("redact_checkpoints", [False, True])
async def test_logged_deltas_are_redacted_a_secret_split_across_two_included(
    redact_checkpoints: bool, tmp_path: Path
) -> None:
    """The event log of a store logging deltas holds no secret of the model's text or a tool
    input's JSON, also one split across two deltas; every `seq` is still there, and the logged
    pieces put together are the redacted text the recorded events hold."""
    script: list[JSON] = [
        {
            "stop_reason": "tool_use",
            "content": [
                {"type": "text", "text": f"Calling with {BEARER} now."},
                {"type": "tool_use", "name": "add", "input": {"a": 1, "b": 2.5, "note": BEARER}},
            ],
        },
        text(f"Done; the header was {BEARER} and the key sk-ant-api03-abcdefghijklmnopqrst."),
    ]
    store = SQLiteStore(tmp_path / "runs.db", log_deltas=True)
    loop = make_loop(
        ScriptedClient(script),
        store=store,
        redaction=Redaction(checkpoints=redact_checkpoints),
        tools=[
            Tool(
                name="add",
                description="Add two numbers.",
                input_schema={"type": "object", "additionalProperties": True},
                handler=lambda a, b, note: a + b,
            )
        ],
    )
    streamed, result = await read_all(loop, "Add 1 and 2.5.", task_id="t-secret")
    assert result.stop_reason is StopReason.COMPLETED
    split = [piece(e) for e in streamed if isinstance(e, TextDelta | ToolInputDelta)]
    assert "Bearer " in "".join(split)
    assert not any(BEARER in part for part in split)  # the stream did split it
    logged = await store.read("t-secret", after=-1, limit=1_000)
    assert [event.seq for event in logged] == [event.seq for event in streamed]
    for event in logged:
        assert "abcdefghijklmnop" not in json.dumps(to_dict(event))
    steps = sorted({e.step for e in logged if isinstance(e, TextDelta)})
    texts = ["".join(e.text for e in logged if isinstance(e, TextDelta) and e.step == step) for step in steps]
    assert texts == [
        "Calling with [REDACTED] now.",
        "Done; the header was [REDACTED] and the key [REDACTED].",
    ]
    inputs = "".join(e.partial_json for e in logged if isinstance(e, ToolInputDelta))
    assert json.loads(inputs) == {"a": 1, "b": 2.5, "note": "[REDACTED]"}
