"""What a run keeps of the model's responses: `ModelResponse` records, no SDK objects."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

from anthropic.types import Message, ToolUseBlock, Usage
from pydantic import BaseModel

from boundloop import AgentLoop, Budget, LoopResult, LoopState, Observers, ScriptedClient, tool
from boundloop.events import Transition
from boundloop.records import ModelResponse
from boundloop.statemachine.table import Phase, Trigger
from tests.fake_api import Body, FakeAPI
from tests.helpers import text, tool_use


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key}: found"


async def finished_run() -> LoopResult:
    client = ScriptedClient([tool_use(("lookup", {"key": "a"}), ("lookup", {"key": "b"})), text("done")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
    )
    return await loop.run("Look a and b up.")


def reachable(root: object) -> Iterator[object]:
    """Every object reachable from `root` through references (classes and modules not entered)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, type):
            continue
        seen.add(id(item))
        yield item
        stack.extend(gc.get_referents(item))


async def test_a_finished_run_keeps_no_sdk_object() -> None:
    """The result (state, transcript, trace) holds the responses as JSON: no SDK model is reachable."""
    result = await finished_run()
    assert result.answer == "done"
    kept = [type(item).__name__ for item in reachable(result) if isinstance(item, BaseModel)]
    assert kept == []
    assert [type(response) for response in result.state.responses] == [ModelResponse, ModelResponse]


async def test_a_record_shares_its_content_with_the_transcript() -> None:
    """The record's content is the transcript's assistant turn: the same list, not a copy."""
    result = await finished_run()
    state = result.state
    assert state.responses[0].content_json is state.messages[1]["content"]
    assert state.responses[1].content_json is state.messages[3]["content"]


async def test_a_record_reads_as_the_sdk_objects() -> None:
    """`content`, `usage` and `message()` give the SDK's objects, equal to what was received."""
    result = await finished_run()
    first = result.state.responses[0]
    assert first.stop_reason == "tool_use"
    calls = first.content
    assert [type(block) for block in calls] == [ToolUseBlock, ToolUseBlock]
    assert isinstance(calls[1], ToolUseBlock)
    assert calls[1].input == {"key": "b"}
    assert isinstance(first.usage, Usage)
    assert first.usage.input_tokens == 10
    message = first.message()
    assert isinstance(message, Message)
    assert message.id == first.id
    assert message.content == calls


def test_a_checkpoint_written_with_sdk_messages_reads_back_unchanged() -> None:
    """A stored response (the SDK's dump, as checkpoints have held it) loads as a record and is
    written back as the same JSON: a signature over it still holds."""
    stored = {
        "id": "msg_1",
        "container": {"id": "container_1", "expires_at": "2026-01-01T00:00:00Z"},
        "content": [{"type": "text", "text": "hi"}],
        "model": "claude-sonnet-4-6",
        "role": "assistant",
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "type": "message",
        "usage": {"input_tokens": 3, "output_tokens": 1, "server_tool_use": None},
    }
    state = LoopState(task_id="t", trace_id="r", goal="g", started_at=0.0)
    raw = json.loads(state.to_json())
    raw["responses"] = [stored]
    loaded = LoopState.from_json(json.dumps(raw))
    (response,) = loaded.responses
    assert isinstance(response, ModelResponse)
    assert response.container_id == "container_1"
    assert response.usage_json == stored["usage"]
    assert json.loads(loaded.to_json())["responses"] == [stored]
    assert LoopState.from_json(loaded.to_json()) == loaded


async def test_a_transition_event_keeps_the_table_s_own_strings() -> None:
    """A transition records its states and trigger as the table's strings, not a copy of each
    (three strings kept per transition of the trace otherwise)."""
    result = await finished_run()
    moves = [event for event in result.events if isinstance(event, Transition)]
    assert moves
    for move in moves:
        assert move.source is Phase(move.source).value
        assert move.dest is Phase(move.dest).value
        assert move.trigger is Trigger(move.trigger).value


async def test_a_record_of_a_received_response_is_the_record_of_its_json() -> None:
    """A response received over HTTP (its envelope's optional fields, a field this SDK does not
    model) is recorded as the record read from the JSON the API sent: the same values, its
    envelope's other fields in the same order, and written back as that JSON."""
    body = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "container": {"id": "container_1", "expires_at": "2026-01-01T00:00:00Z"},
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "stop_sequence",
        "stop_sequence": "END",
        "stop_details": None,
        "usage": {"input_tokens": 3, "output_tokens": 1, "cache_read_input_tokens": 0},
        "novel_field": {"kept": [1, 2]},
    }
    api = FakeAPI([Body(json=body)])
    loop = AgentLoop(
        api.client(), model="claude-sonnet-4-6", budget=Budget(max_steps=2), observers=Observers(metrics=None)
    )
    result = await loop.run("Say done.")
    assert result.answer == "done"
    (live,) = result.state.responses
    raw = json.loads(result.state.to_json())
    raw["responses"] = [body]
    (read,) = LoopState.from_json(json.dumps(raw)).responses
    assert live == read
    assert live.extra_json is not None
    assert read.extra_json is not None
    assert list(live.extra_json) == list(read.extra_json) == ["container", "stop_details", "novel_field"]
    assert live.json() == body
    assert json.loads(result.state.to_json())["responses"] == [body]


USUAL: dict[str, Any] = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [{"type": "text", "text": "done"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 1},
}
"""A response's envelope with the usual fields only, as the API sends it."""


async def test_an_envelope_of_the_usual_fields_and_an_unmodelled_one_keeps_that_one() -> None:
    """A response sending no optional envelope field the SDK models (no `container`, no
    `stop_details`) keeps the fields it does not model all the same; with none of either, the
    record has no other fields at all."""
    for body, extra in (
        ({**USUAL, "novel_field": {"kept": [1, 2]}}, {"novel_field": {"kept": [1, 2]}}),
        (USUAL, None),
    ):
        api = FakeAPI([Body(json=body)])
        loop = AgentLoop(
            api.client(),
            model="claude-sonnet-4-6",
            budget=Budget(max_steps=2),
            observers=Observers(metrics=None),
        )
        result = await loop.run("Say done.")
        assert result.answer == "done"
        (record,) = result.state.responses
        assert record.extra_json == extra
        assert record.json() == body
        assert json.loads(result.state.to_json())["responses"] == [body]


async def test_a_response_whose_envelope_field_has_the_wrong_type_fails_the_run() -> None:
    """An `id` that is not a string (the SDK does not check a 200's body) is not recorded: the
    run fails with the error a stored response of that JSON gets."""
    body = {**USUAL, "id": 5}
    api = FakeAPI([Body(json=body)])
    loop = AgentLoop(
        api.client(), model="claude-sonnet-4-6", budget=Budget(max_steps=2), observers=Observers(metrics=None)
    )
    result = await loop.run("Say done.")
    assert result.stop_reason == "failed"
    assert result.state.responses == []
    assert [(error.type, error.message[:20]) for error in result.state.errors] == [
        ("ValueError", "not a Message: {'id'")
    ]


async def test_responses_repeating_their_envelope_fields_share_one_dict() -> None:
    """The envelope's other fields as the last response sent them are that record's dict (one a
    run while they repeat); fields that differ get their own, and every record still writes
    back the JSON its response was."""

    def body(index: int, container: str, *, last: bool = False) -> dict[str, object]:
        content: list[dict[str, object]] = (
            [{"type": "text", "text": "done"}]
            if last
            else [{"type": "tool_use", "id": f"toolu_0{index}", "name": "lookup", "input": {"key": "a"}}]
        )
        return {
            "id": f"msg_0{index}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "container": {"id": container, "expires_at": "2026-01-01T00:00:00Z"},
            "content": content,
            "stop_reason": "end_turn" if last else "tool_use",
            "stop_sequence": None,
            "stop_details": None,
            "usage": {"input_tokens": 3 + index, "output_tokens": 1},
        }

    bodies = [body(1, "container_1"), body(2, "container_1"), body(3, "container_2", last=True)]
    api = FakeAPI([Body(json=item) for item in bodies])
    loop = AgentLoop(
        api.client(),
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
    )
    result = await loop.run("Look a up twice.")
    assert result.answer == "done"
    first, second, third = result.state.responses
    assert first.extra_json is not None
    assert second.extra_json is first.extra_json
    assert third.extra_json is not second.extra_json
    assert [record.json() for record in result.state.responses] == bodies
    assert json.loads(result.state.to_json())["responses"] == bodies
