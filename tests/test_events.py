"""The typed events: JSON lines round trips, the discriminator, `seq`, the earlier format, and
replay reading a human's denial from `by_human`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from boundloop import MemoryStore, replay
from boundloop.events import (
    EVENT_ADAPTER,
    EVENT_KINDS,
    ApprovalRequested,
    BaseEvent,
    CallDecision,
    Compacted,
    Deferred,
    Error,
    LimitHit,
    ModelRequest,
    PendingCall,
    Proposal,
    Resumed,
    RunStarted,
    Stop,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolResult,
    ToolStarted,
    Transition,
    Validation,
    from_dict,
    read_events,
    to_json_line,
    write_events,
)
from boundloop.redaction import Redaction
from tests.helpers import scripted_loop
from tests.test_resume import TWO_REFUNDS, Ledger
from tests.test_resume import make_loop as refund_loop

COMMON: dict[str, Any] = {"seq": 3, "task_id": "t", "at": 1_700_000_000.5, "step": 2}
DECISION = CallDecision(tool="lookup", tool_use_id="toolu_1", decision="deny", reason="no")

ONE_OF_EACH: list[BaseEvent] = [
    RunStarted(**COMMON, trace_id="tr", model="m"),
    Transition(
        **COMMON, source="validate", dest="act", trigger="validated", guard="has_tool_calls", duration_s=0.25
    ),
    ModelRequest(**COMMON, model="m", messages=3, max_tokens=1024),
    Proposal(
        **COMMON,
        stop_reason="tool_use",
        tools=["lookup"],
        duration_s=0.5,
        input_tokens=10,
        output_tokens=5,
        response=Deferred({"id": "msg_1", "content": []}),
    ),
    Validation(**COMMON, decision="execute", calls=[DECISION]),
    ToolStarted(**COMMON, calls=[DECISION]),
    ToolResult(
        **COMMON,
        tool="lookup",
        tool_use_id="toolu_1",
        outcome="denied",
        is_error=True,
        by_human=True,
        reason="over the limit",
        input=Deferred({"key": "a"}),
        content=Deferred("denied"),
    ),
    ApprovalRequested(**COMMON, calls=[PendingCall(tool="lookup", tool_use_id="toolu_1")]),
    Resumed(**COMMON, from_phase="stopped", approvals={"toolu_1": "over the limit"}),
    Stop(
        **COMMON,
        stop_reason="max_steps",
        detail="spent",
        limit=LimitHit(limit="max_steps", value=2, used=2),
        steps=2,
        tool_calls=1,
        duration_s=1.0,
        trace_id="tr",
        opening=Deferred([{"role": "user", "content": "goal"}]),
    ),
    Error(**COMMON, error_kind="model_api", type="APIStatusError", message="boom", status_code=529),
    TextDelta(**COMMON, index=0, text="hi"),
    ThinkingDelta(**COMMON, index=0, thinking="hm"),
    ToolInputDelta(**COMMON, index=1, partial_json='{"ke', tool_use_id="toolu_01", name="add"),
    Compacted(**COMMON, tokens_before=160_000, tokens_after=3_000),
]


def test_one_of_each_kind_is_listed() -> None:
    assert sorted(event.to_dict()["kind"] for event in ONE_OF_EACH) == sorted(EVENT_KINDS)


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda event: type(event).__name__)
def test_every_kind_round_trips_through_json_lines(event: BaseEvent, tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write_events([event], path)
    line = json.loads(path.read_text(encoding="utf-8"))
    assert line["schema_version"] == 2
    assert json.loads(to_json_line(event)) == line
    [back] = read_events(path)
    assert type(back) is type(event)
    assert back == event  # every field, not only what both sides would write
    assert back.to_dict() == event.to_dict()


def test_the_discriminator_picks_the_model_and_refuses_unknown_kinds() -> None:
    raw = {**COMMON, "kind": "tool_started", "calls": [dataclasses.asdict(DECISION)]}
    event = EVENT_ADAPTER.validate_python(raw)
    assert isinstance(event, ToolStarted)
    assert event.calls == [DECISION]
    with pytest.raises(ValidationError):
        EVENT_ADAPTER.validate_python({**COMMON, "kind": "nope"})
    with pytest.raises(ValueError, match="schema_version"):
        from_dict({**raw, "schema_version": 99})


async def test_seq_increases_and_continues_over_a_resume() -> None:
    store = MemoryStore()
    first = await refund_loop([TWO_REFUNDS], store, Ledger()).run("Refund?", task_id="t")
    later = refund_loop(
        [{"stop_reason": "end_turn", "content": [{"type": "text", "text": "ok"}]}], store, Ledger()
    )
    second = await later.resume("t", approvals={"toolu_r1": True, "toolu_r2": "over the limit"})
    seqs = [event.seq for event in [*first.events, *second.events]]
    assert seqs == list(range(len(seqs)))
    assert isinstance(first.events[0], RunStarted)
    assert any(isinstance(event, ApprovalRequested) for event in first.events)
    assert isinstance(second.events[0], Resumed)
    assert {event.task_id for event in second.events} == {"t"}


@pytest.mark.parametrize("field", ["stop_reason", "stop_sequence"])
async def test_a_redact_hook_that_raises_leaves_no_gap_in_seq(field: str) -> None:
    """The model's text in an event is redacted before the event takes its `seq`: a hook that
    raises on it fails the run, and the events still number 0, 1, 2, ... without a gap."""

    def redact(text: str) -> str:
        if "odd" in text:
            raise ValueError("the hook cannot redact this")
        return text

    response: dict[str, Any] = {"stop_reason": "odd_reason", "content": [{"type": "text", "text": "?"}]}
    if field == "stop_sequence":
        response = {"stop_reason": "stop_sequence", "stop_sequence": "odd", "content": response["content"]}
    result = await scripted_loop([response], [], redaction=Redaction(hook=redact)).run("Why?")
    seqs = [event.seq for event in result.events]
    assert result.state.stop_reason == "failed"
    assert seqs == list(range(len(seqs)))


async def test_a_human_denial_is_read_from_by_human_not_from_the_text() -> None:
    """The denial's text is the redactor's business: a pattern that hides the word "human" must
    not turn the human's denial into an approval on replay (the earlier code parsed the text)."""
    store = MemoryStore()
    hide = {"redaction": Redaction(patterns=[r"human"])}
    first = await refund_loop([TWO_REFUNDS], store, Ledger(), **hide).run("Refund?", task_id="t")
    later = refund_loop(
        [{"stop_reason": "end_turn", "content": [{"type": "text", "text": "ok"}]}], store, Ledger(), **hide
    )
    result = await later.resume("t", approvals={"toolu_r1": True, "toolu_r2": "over the limit"})
    denial = next(e for e in result.events if isinstance(e, ToolResult) and e.outcome == "denied")
    assert denial.by_human
    assert denial.reason == "over the limit"
    assert " was denied by a human" not in json.dumps(denial.to_dict())
    report = await replay([*first.events, *result.events])
    assert report.identical, report.describe()


def test_a_trace_of_the_earlier_format_still_reads() -> None:
    """A line as `TraceEvent.to_dict` wrote it (no schema_version, a `data` object)."""
    old = [
        {
            "kind": "transition",
            "step": 0,
            "at": 1.0,
            "source": "assemble",
            "dest": "propose",
            "trigger": "assembled",
            "duration_s": 0.1,
            "data": {},
        },
        {"kind": "tool_call", "step": 1, "at": 2.0, "data": {"calls": [dataclasses.asdict(DECISION)]}},
        {"kind": "resume", "step": 1, "at": 2.0, "data": {"from_phase": "act", "interrupted": True}},
        {
            "kind": "error",
            "step": 1,
            "at": 2.0,
            "data": {"kind": "model_api", "step": 1, "type": "X", "message": "m"},
        },
        {
            "kind": "stop",
            "step": 2,
            "at": 3.0,
            "data": {
                "task_id": "t-old",
                "stop_reason": "max_steps",
                "exceeded": {"limit": "max_steps", "value": 2, "used": 2},
                "steps": 2,
                "tool_calls": 1,
                "duration_s": 1.5,
                "trace_id": "tr",
            },
        },
    ]
    events = [from_dict(raw) for raw in old]
    assert [type(event) for event in events] == [Transition, ToolStarted, Resumed, Error, Stop]
    transition, started, resumed, error, stop = events
    assert isinstance(transition, Transition)
    assert (transition.source, transition.dest, transition.trigger) == ("assemble", "propose", "assembled")
    assert transition.duration_s == 0.1
    assert isinstance(started, ToolStarted)
    assert started.calls == [DECISION]
    assert isinstance(resumed, Resumed)
    assert (resumed.from_phase, resumed.interrupted) == ("act", True)
    assert isinstance(error, Error)
    assert (error.error_kind, error.type, error.message) == ("model_api", "X", "m")
    assert isinstance(stop, Stop)
    assert stop.task_id == "t-old"
    assert stop.limit == LimitHit(limit="max_steps", value=2, used=2)
    assert (stop.stop_reason, stop.steps, stop.tool_calls) == ("max_steps", 2, 1)
