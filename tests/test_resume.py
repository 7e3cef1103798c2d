"""Runs that outlive a call to run(): approvals, the model's escalation, resume errors, the envelope."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from boundloop import (
    AgentLoop,
    ApprovalMissing,
    Budget,
    CheckpointCorrupt,
    CheckpointStore,
    ConfigurationError,
    MemoryStore,
    NotResumable,
    Observers,
    Policy,
    ScriptedClient,
    SQLiteStore,
    StopReason,
    TaskExists,
    TaskNotFound,
    ToolContext,
    tool,
)
from boundloop.events import Resumed, Stop
from tests.helpers import assert_valid_transcript, blocks, text, tool_use

JSON = dict[str, Any]


class Ledger:
    """What the tools did, by idempotency key."""

    def __init__(self) -> None:
        self.effects: dict[str, str] = {}
        self.reads: list[str] = []


def make_loop(script: list[JSON], store: CheckpointStore, ledger: Ledger, **options: Any) -> AgentLoop:
    """A refund loop: a read, and a refund that needs approval and honours its idempotency key."""

    @tool
    async def read_order(order_id: str) -> str:
        """Read an order."""
        ledger.reads.append(order_id)
        return f"{order_id}: delivered late"

    @tool(side_effect=True, requires_approval=True)
    async def issue_refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order."""
        ledger.effects.setdefault(ctx.idempotency_key, order_id)
        return f"refunded {order_id}"

    settings: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "tools": [read_order, issue_refund],
        "budget": Budget(max_steps=6, max_tool_calls=6),
        "observers": Observers(metrics=None),
        "store": store,
    }
    settings.update(options)
    return AgentLoop(ScriptedClient(script), **settings)


TWO_REFUNDS = tool_use(
    ("read_order", {"order_id": "O-1"}, "toolu_read"),
    ("issue_refund", {"order_id": "O-1"}, "toolu_r1"),
    ("issue_refund", {"order_id": "O-2"}, "toolu_r2"),
)


async def test_an_approval_round_trip_runs_the_approved_call_and_tells_the_model_the_denial() -> None:
    """Stop for approval, then resume: the approved refund runs once, the denied one is answered with
    the reason, the read held back by the batch runs, and the run completes under the same ids."""
    store = MemoryStore()
    ledger = Ledger()
    first = await make_loop([TWO_REFUNDS], store, ledger).run("Refund?", task_id="t-1")
    assert first.stop_reason is StopReason.NEEDS_HUMAN
    assert [p.tool_use_id for p in first.state.pending_approvals] == ["toolu_r1", "toolu_r2"]
    assert ledger.effects == {}
    assert ledger.reads == []  # the batch waits as a whole
    assert_valid_transcript(first.messages)

    later = make_loop([text("Refunded O-1; O-2 needs a manager.")], store, ledger)
    result = await later.resume("t-1", approvals={"toolu_r1": True, "toolu_r2": "over the limit"})
    assert result.stop_reason is StopReason.COMPLETED
    assert result.state.task_id == "t-1"
    assert result.state.trace_id == first.state.trace_id
    assert ledger.effects == {"t-1:1:toolu_r1": "O-1"}
    assert ledger.reads == ["O-1"]
    answers = {b["tool_use_id"]: b for b in blocks(result.messages[2]) if b["type"] == "tool_result"}
    assert answers["toolu_r1"]["content"] == "refunded O-1"
    assert "denied by a human: over the limit" in answers["toolu_r2"]["content"]
    assert answers["toolu_r2"]["is_error"] is True
    assert len(result.messages) == 4  # goal, calls, their one answer message, the final answer
    assert_valid_transcript(result.messages)
    resumed = result.events[0]
    assert isinstance(resumed, Resumed)
    assert resumed.approvals == {"toolu_r1": True, "toolu_r2": "over the limit"}
    assert [o.outcome for o in result.state.observations] == ["ok", "ok", "denied"]
    assert result.state.pending_approvals == []
    assert result.state.step == 2  # the budget's counters carry over


async def test_a_call_left_undecided_keeps_the_run_waiting() -> None:
    """Deciding one of two calls is refused with a clear error, and the stored run still waits."""
    store = MemoryStore()
    await make_loop([TWO_REFUNDS], store, Ledger()).run("Refund?", task_id="t-2")
    loop = make_loop([], store, Ledger())
    with pytest.raises(ApprovalMissing, match=r"no decision for toolu_r2 \(issue_refund\)"):
        await loop.resume("t-2", approvals={"toolu_r1": True})
    with pytest.raises(ApprovalMissing, match="no call waiting for approval has the id toolu_nope"):
        await loop.resume("t-2", approvals={"toolu_r1": True, "toolu_r2": True, "toolu_nope": True})
    assert [row.status for row in await store.list()] == ["waiting"]


async def test_the_models_escalation_stops_the_run_and_a_human_reply_resumes_it() -> None:
    """The escalation tool stops the run with the model's reason; the reply answers it and the run goes on."""
    store = MemoryStore()
    ledger = Ledger()
    policy = Policy(escalation_tool="request_human")
    script = [tool_use(("request_human", {"reason": "Is a late delivery refundable?"}, "toolu_ask"))]
    first = await make_loop(script, store, ledger, policy=policy).run("Refund?", task_id="t-3")
    assert first.stop_reason is StopReason.NEEDS_HUMAN
    assert first.state.stop_detail == "the model asked for a human: Is a late delivery refundable?"
    assert first.state.escalation is not None
    assert first.state.escalation.reason == "Is a late delivery refundable?"
    assert "request_human" in [
        dict(t).get("name") for t in make_loop([], store, ledger, policy=policy).tools.params
    ]
    assert_valid_transcript(first.messages)

    later = make_loop([text("Yes: refund it.")], store, ledger, policy=policy)
    with pytest.raises(ApprovalMissing, match="pass reply="):
        await later.resume("t-3")
    result = await later.resume("t-3", reply="Yes, within 30 days.")
    assert result.stop_reason is StopReason.COMPLETED
    answer = blocks(result.messages[2])[0]
    assert answer == {"type": "tool_result", "tool_use_id": "toolu_ask", "content": "Yes, within 30 days."}
    assert result.state.escalation is None


@pytest.mark.parametrize(
    ("setup", "error", "message"),
    [
        pytest.param("none", TaskNotFound, "task 't' is not in the store", id="unknown"),
        pytest.param("completed", NotResumable, "task 't' stopped with completed", id="completed"),
        pytest.param("corrupt", CheckpointCorrupt, "the checkpoint of task 't' cannot be read", id="corrupt"),
        pytest.param("future", CheckpointCorrupt, "schema_version 7", id="foreign-schema"),
    ],
)
async def test_resume_errors_name_the_task(setup: str, error: type[Exception], message: str) -> None:
    """An unknown, finished or unreadable task gives a clear error naming it, never a crash mid-run."""
    store = MemoryStore()
    loop = make_loop([text("done")], store, Ledger())
    if setup == "completed":
        await loop.run("goal", task_id="t")
    elif setup == "corrupt":
        store.write_raw("t", "{not json")
    elif setup == "future":
        finished = await make_loop([text("done")], MemoryStore(), Ledger()).run("goal", task_id="t")
        store.write_raw("t", finished.state.to_json().replace('"schema_version":1', '"schema_version":7'))
    with pytest.raises(error, match=message):
        await loop.resume("t")


async def test_resume_without_a_store_is_a_configuration_error() -> None:
    """There is nothing to resume from without a store."""
    loop = AgentLoop(
        ScriptedClient([]),
        model="claude-sonnet-4-6",
        budget=Budget(max_steps=1),
        observers=Observers(metrics=None),
    )
    with pytest.raises(ConfigurationError, match="resume needs a store"):
        await loop.resume("t")


async def test_a_stored_task_id_is_never_overwritten(tmp_path: Path) -> None:
    """run(task_id=...) with a task already in the store is refused; the stored run is untouched."""
    store = SQLiteStore(tmp_path / "runs.db")
    await make_loop([text("first")], store, Ledger()).run("goal", task_id="t")
    with pytest.raises(TaskExists, match=r"resume it with loop\.resume"):
        await make_loop([text("second")], store, Ledger()).run("goal", task_id="t")
    stored = await store.load("t")
    assert stored is not None
    assert stored.answer == "first"


async def test_the_envelope_keeps_the_callers_trace_id_metadata_and_history() -> None:
    """An incoming trace id and metadata are kept; a history replaces the goal string."""
    client = ScriptedClient([text("It was late.")])
    loop = AgentLoop(
        client, model="claude-sonnet-4-6", budget=Budget(max_steps=2), observers=Observers(metrics=None)
    )
    history: list[Any] = [
        {"role": "user", "content": "Order O-1 arrived on the 9th."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Was it late?"},
    ]
    result = await loop.run(
        trace_id="0af7651916cd43dd8448eb211c80319c", metadata={"tenant": "acme"}, messages=history
    )
    assert result.state.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert result.state.metadata == {"tenant": "acme"}
    stop = result.events[-1]
    assert isinstance(stop, Stop)
    assert stop.metadata == {"tenant": "acme"}
    assert client.requests[0]["messages"] == history
    assert result.state.goal == "Was it late?"
    assert result.state.provenance is not None
    assert result.state.provenance.model == "claude-sonnet-4-6"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({}, "give the run a goal, or messages", id="nothing"),
        pytest.param(
            {"messages": [{"role": "assistant", "content": "hi"}]}, "must start with a user", id="starts"
        ),
        pytest.param(
            {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
            "must end with a user message",
            id="ends",
        ),
        pytest.param({"goal": "g", "metadata": {"when": object()}}, "JSON values only", id="metadata"),
        pytest.param({"goal": "g", "trace_id": ""}, "trace_id must be a non-empty string", id="trace-id"),
    ],
)
async def test_a_bad_envelope_is_refused_before_the_run(kwargs: JSON, message: str) -> None:
    """A run that cannot start says why, before any model call."""
    client = ScriptedClient([])
    loop = AgentLoop(
        client, model="claude-sonnet-4-6", budget=Budget(max_steps=1), observers=Observers(metrics=None)
    )
    with pytest.raises(ConfigurationError, match=message):
        await loop.run(**kwargs)
    assert client.requests == []


async def test_a_humans_denials_do_not_open_the_circuit_breaker() -> None:
    """Denying every waiting call is a decision, not the model failing: the run goes on."""
    store = MemoryStore()
    await make_loop([TWO_REFUNDS], store, Ledger()).run("Refund?", task_id="t-deny")
    later = make_loop([text("Neither refund was approved.")], store, Ledger())
    result = await later.resume("t-deny", approvals={"toolu_r1": False, "toolu_r2": "no"})
    assert result.stop_reason is StopReason.COMPLETED
    assert result.state.consecutive_tool_errors == 0


async def test_a_call_waiting_for_the_approver_waits_for_the_human_when_the_batch_stops() -> None:
    """A call the in-process approver would decide, held back because the model asked a human in
    the same batch, needs the human's decision on resume: it never runs unapproved."""
    store = MemoryStore()
    ledger = Ledger()
    asked: list[str] = []

    async def approver(call: Any) -> bool:
        asked.append(call.id)
        return True

    policy = Policy(escalation_tool="request_human", approve=approver)
    script = [
        tool_use(
            ("issue_refund", {"order_id": "O-1"}, "toolu_r1"),
            ("request_human", {"reason": "Refund a late order?"}, "toolu_ask"),
            ("request_human", {"reason": "Again?"}, "toolu_ask2"),
        )
    ]
    first = await make_loop(script, store, ledger, policy=policy).run("Refund?", task_id="t-mixed")
    assert first.stop_reason is StopReason.NEEDS_HUMAN
    assert [p.tool_use_id for p in first.state.pending_approvals] == ["toolu_r1"]
    assert asked == []
    later = make_loop([text("Not refunded.")], store, ledger, policy=policy)
    with pytest.raises(ApprovalMissing, match="toolu_r1"):
        await later.resume("t-mixed", reply="Yes.")
    result = await later.resume("t-mixed", reply="Yes.", approvals={"toolu_r1": "ask finance first"})
    assert result.stop_reason is StopReason.COMPLETED
    assert ledger.effects == {}
    outcomes = {o.tool_use_id: o.outcome for o in result.state.observations}
    assert outcomes == {"toolu_r1": "denied", "toolu_ask": "ok", "toolu_ask2": "denied"}
    assert_valid_transcript(result.messages)
