"""A resume takes nothing on trust: every call taken from a checkpoint is decided again.

The calls a resumed run is about to act on — approved pending calls, and intents a crash left
without a result — pass the resuming loop's registry, policy, approvals and budget first, as
a fresh run's calls do. A crash checkpoint is built as a crash leaves it: the run is stopped
while its refund is in flight, and the store gets back the state it held at that moment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import pytest

from boundloop import (
    AgentLoop,
    Budget,
    CheckpointStore,
    LoopState,
    MemoryStore,
    Observers,
    Policy,
    ScriptedClient,
    SQLiteStore,
    StopReason,
    Tool,
    ToolCall,
    ToolContext,
    tool,
)
from boundloop.events import Resumed, Validation
from boundloop.statemachine import Phase
from tests.helpers import assert_valid_transcript, blocks, text, tool_use

JSON = dict[str, Any]
REFUND = tool_use(("issue_refund", {"order_id": "O-1"}, "toolu_r1"))
DONE = text("Done.")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> CheckpointStore:
    """Each case runs on both real stores."""
    return MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.db")


class Shop:
    """The tools, and what the refund did, by idempotency key."""

    def __init__(self) -> None:
        self.refunds: dict[str, str] = {}

    def refund(self, *, requires_approval: bool = False) -> Tool:
        @tool(name="issue_refund", side_effect=True, requires_approval=requires_approval)
        async def issue_refund(order_id: str, ctx: ToolContext) -> str:
            """Refund an order."""
            self.refunds.setdefault(ctx.idempotency_key, order_id)
            return f"refunded {order_id}"

        return issue_refund


@tool
async def read_order(order_id: str) -> str:
    """Read an order."""
    return f"{order_id}: delivered late"


def loop(script: list[JSON], store: CheckpointStore, tools: list[Tool], **options: Any) -> AgentLoop:
    settings: JSON = {"budget": Budget(max_steps=6, max_tool_calls=6), "observers": Observers(metrics=None)}
    settings.update(options)
    return AgentLoop(ScriptedClient(script), model="claude-sonnet-4-6", tools=tools, store=store, **settings)


async def crash_in_refund(
    store: CheckpointStore,
    task_id: str,
    start: Callable[[AgentLoop], Coroutine[Any, Any, object]],
    script: list[JSON],
    **options: Any,
) -> None:
    """Start a run with `start`, stop it while its refund is in flight, and leave in the store
    the checkpoint it held then: the refund saved as an intent without a result."""
    in_tool = anyio.Event()

    @tool(name="issue_refund", side_effect=True)
    async def stuck_refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order."""
        in_tool.set()
        await anyio.sleep_forever()
        raise AssertionError("never reached")

    crashing = loop(script, store, [read_order, stuck_refund], **options)
    in_flight: LoopState | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(start, crashing)
        await in_tool.wait()
        in_flight = await store.load(task_id)
        group.cancel_scope.cancel()
    assert in_flight is not None
    assert in_flight.phase is Phase.ACT
    assert in_flight.turn is not None
    assert in_flight.turn.answers == [None]
    await store.save(in_flight)


async def crash_a_new_run(store: CheckpointStore, task_id: str, **options: Any) -> None:
    await crash_in_refund(
        store, task_id, lambda lp: lp.run("Refund O-1", task_id=task_id), [REFUND], **options
    )


def validations(result: Any) -> list[JSON]:
    """The calls of every validation event of the session."""
    return [
        {key: value for key, value in dataclasses.asdict(call).items() if value is not None}
        for event in result.events
        if isinstance(event, Validation)
        for call in event.calls
    ]


def answer_of(result: Any, tool_use_id: str) -> JSON:
    for message in result.messages:
        for block in blocks(message):
            if block.get("type") == "tool_result" and block["tool_use_id"] == tool_use_id:
                return block
    raise AssertionError(f"no tool_result for {tool_use_id}")


# -- the policy, again ---------------------------------------------------------------------


async def test_a_call_approved_by_a_human_does_not_run_when_the_resuming_loop_forbids_it(
    store: CheckpointStore,
) -> None:
    """A human's approval lifts the approval requirement, never a ban: the run stops with
    policy_blocked, the refund never runs, and the trace shows the call blocked on resume."""
    shop = Shop()
    first = await loop([REFUND], store, [shop.refund(requires_approval=True)]).run("Refund?", task_id="t")
    assert first.stop_reason is StopReason.NEEDS_HUMAN
    strict = loop(
        [DONE], store, [shop.refund(requires_approval=True)], policy=Policy(forbidden={"issue_refund"})
    )
    result = await strict.resume("t", approvals={"toolu_r1": True})
    assert result.stop_reason is StopReason.POLICY_BLOCKED
    assert shop.refunds == {}
    assert validations(result) == [
        {
            "tool": "issue_refund",
            "tool_use_id": "toolu_r1",
            "decision": "block",
            "reason": "issue_refund is forbidden by policy: not run",
        }
    ]
    assert answer_of(result, "toolu_r1")["is_error"] is True
    assert_valid_transcript(result.messages)


async def test_a_crash_intent_of_a_tool_forbidden_since_does_not_run(store: CheckpointStore) -> None:
    """The refund was in flight when the process died; the loop that resumes forbids it, with
    on_forbidden="report": the model is told, and the refund is not run again."""
    await crash_a_new_run(store, "t")
    shop = Shop()
    policy = Policy(forbidden={"issue_refund"}, on_forbidden="report")
    result = await loop([DONE], store, [shop.refund()], policy=policy).resume("t")
    assert result.stop_reason is StopReason.COMPLETED
    assert shop.refunds == {}
    assert "forbidden by policy" in answer_of(result, "toolu_r1")["content"]
    assert [call["decision"] for call in validations(result)] == ["deny"]


async def test_a_crash_intent_needing_approval_waits_for_a_human_instead_of_running(
    store: CheckpointStore,
) -> None:
    """The first run's approver let the refund through, then the process died with it in
    flight. The resuming loop has no approver: the refund waits for a human (needs_human,
    pending), and runs once only after a human approves it."""
    yes = Policy(requires_approval={"issue_refund"}, approve=lambda call: _answer(True))
    await crash_a_new_run(store, "t", policy=yes)
    shop = Shop()
    gated = Policy(requires_approval={"issue_refund"})
    result = await loop([], store, [shop.refund()], policy=gated).resume("t")
    assert result.stop_reason is StopReason.NEEDS_HUMAN
    assert [p.tool_use_id for p in result.state.pending_approvals] == ["toolu_r1"]
    assert shop.refunds == {}
    approved = await loop([DONE], store, [shop.refund()], policy=gated).resume(
        "t", approvals={"toolu_r1": True}
    )
    assert approved.stop_reason is StopReason.COMPLETED
    assert shop.refunds == {"t:1:toolu_r1": "O-1"}


async def test_a_crash_intent_needing_approval_asks_the_resuming_loops_approver(
    store: CheckpointStore,
) -> None:
    """An approval given before the crash by an in-process approver is asked again; its "no"
    (a reason) keeps the refund from running."""
    await crash_a_new_run(
        store, "t", policy=Policy(approve=lambda call: _answer(True), requires_approval={"issue_refund"})
    )
    shop = Shop()
    asked: list[str] = []

    async def approver(call: ToolCall) -> bool | str:
        asked.append(call.id)
        return "over the limit"

    policy = Policy(requires_approval={"issue_refund"}, approve=approver)
    result = await loop([DONE], store, [shop.refund()], policy=policy).resume("t")
    assert result.stop_reason is StopReason.COMPLETED
    assert asked == ["toolu_r1"]
    assert shop.refunds == {}
    assert "denied by the approver: over the limit" in answer_of(result, "toolu_r1")["content"]


async def test_a_humans_approval_is_recorded_so_a_crash_after_it_does_not_ask_again(
    store: CheckpointStore,
) -> None:
    """Approved on resume, then killed while the refund runs: the next resume runs the intent
    under the same key without asking again, after checking it again."""
    shop = Shop()
    await loop([REFUND], store, [shop.refund(requires_approval=True)]).run("Refund?", task_id="t")
    gated = Policy(requires_approval={"issue_refund"})
    await crash_in_refund(
        store, "t", lambda lp: lp.resume("t", approvals={"toolu_r1": True}), [], policy=gated
    )
    result = await loop([DONE], store, [shop.refund()], policy=gated).resume("t")
    assert result.stop_reason is StopReason.COMPLETED
    assert shop.refunds == {"t:1:toolu_r1": "O-1"}
    assert [call["decision"] for call in validations(result)] == ["human_approved"]


@pytest.mark.parametrize("how", ["crash", "approval"])
async def test_a_checkpointed_call_of_a_tool_the_resuming_loop_lacks_is_answered_not_a_key_error(
    store: CheckpointStore, how: str
) -> None:
    """The resuming loop has no `issue_refund`: the call is answered as an unknown tool (the
    model sees the real tools), as in a fresh run, and the run goes on."""
    if how == "crash":
        await crash_a_new_run(store, "t")
        approvals = None
    else:
        await loop([REFUND], store, [Shop().refund(requires_approval=True)]).run("Refund?", task_id="t")
        approvals = {"toolu_r1": True}
    result = await loop([DONE], store, [read_order]).resume("t", approvals=approvals)
    assert result.stop_reason is StopReason.COMPLETED
    answer = answer_of(result, "toolu_r1")
    assert answer["content"] == "unknown tool 'issue_refund'; known tools: read_order"
    assert answer["is_error"] is True
    assert [e.kind for e in result.state.errors] == ["invalid_action"]
    assert_valid_transcript(result.messages)


# -- the budget, first and again ------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "stop"),
    [
        pytest.param(Budget(max_steps=6, max_total_tokens=15), StopReason.TOKEN_BUDGET, id="tokens"),
        pytest.param(Budget(max_steps=6, max_cost_usd=0.0001), StopReason.COST_BUDGET, id="cost"),
    ],
)
async def test_a_spent_ceiling_stops_the_run_before_it_waits_for_approval(
    store: CheckpointStore, budget: Budget, stop: StopReason
) -> None:
    """The proposal spent the token (cost) budget: the run stops for the budget, not for a
    human who could approve nothing that may run."""
    result = await loop([REFUND], store, [Shop().refund(requires_approval=True)], budget=budget).run(
        "Refund?"
    )
    assert result.stop_reason is stop
    assert result.state.pending_approvals == []
    assert result.state.exceeded is not None


@pytest.mark.parametrize(
    ("budget", "stop"),
    [
        pytest.param(Budget(max_steps=6, max_total_tokens=15), StopReason.TOKEN_BUDGET, id="tokens"),
        pytest.param(Budget(max_steps=6, max_cost_usd=0.0001), StopReason.COST_BUDGET, id="cost"),
    ],
)
@pytest.mark.parametrize("how", ["crash", "approval"])
async def test_a_resume_with_a_spent_ceiling_stops_before_the_refund_runs(
    store: CheckpointStore, budget: Budget, stop: StopReason, how: str
) -> None:
    """The checkpoint's usage already spends the resuming loop's budget: the approved (or
    in-flight) refund does not run; the run stops for the budget."""
    if how == "crash":
        await crash_a_new_run(store, "t")
        approvals = None
    else:
        await loop([REFUND], store, [Shop().refund(requires_approval=True)]).run("Refund?", task_id="t")
        approvals = {"toolu_r1": True}
    shop = Shop()
    result = await loop([DONE], store, [shop.refund(requires_approval=True)], budget=budget).resume(
        "t", approvals=approvals
    )
    assert result.stop_reason is stop
    assert shop.refunds == {}
    assert "not run" in answer_of(result, "toolu_r1")["content"]


# -- the approver's contract --------------------------------------------------------------


async def _answer(value: object) -> Any:
    return value


@pytest.mark.parametrize(
    ("verdict", "refunded", "content"),
    [
        pytest.param(True, True, "refunded O-1", id="true-approves"),
        pytest.param(False, False, "issue_refund was denied by the approver: not run", id="false-denies"),
        pytest.param(
            "too large",
            False,
            "issue_refund was denied by the approver: too large; not run",
            id="reason-denies",
        ),
        pytest.param(
            "", False, "issue_refund was denied by the approver: ; not run", id="empty-reason-denies"
        ),
    ],
)
async def test_only_true_from_the_approver_approves(
    store: CheckpointStore, verdict: object, refunded: bool, content: str
) -> None:
    """True runs the call; False denies it; a string denies it, and the model sees the string."""
    shop = Shop()
    policy = Policy(requires_approval={"issue_refund"}, approve=lambda call: _answer(verdict))
    result = await loop([REFUND, DONE], store, [shop.refund()], policy=policy).run("Refund?")
    assert result.stop_reason is StopReason.COMPLETED
    assert bool(shop.refunds) is refunded
    assert answer_of(result, "toolu_r1")["content"] == content


@pytest.mark.parametrize("verdict", [None, 1, b"yes"], ids=["none", "one", "bytes"])
async def test_an_approver_returning_anything_else_fails_the_run_and_runs_nothing(
    store: CheckpointStore, verdict: object
) -> None:
    """Neither a bool nor a string: a ConfigurationError ends the run as failed, recorded."""
    shop = Shop()
    policy = Policy(requires_approval={"issue_refund"}, approve=lambda call: _answer(verdict))
    result = await loop([REFUND, DONE], store, [shop.refund()], policy=policy).run("Refund?")
    assert result.stop_reason is StopReason.FAILED
    assert shop.refunds == {}
    [error] = result.state.errors
    assert (error.kind, error.type) == ("exception", "ConfigurationError")
    assert error.message.startswith(f"Policy.approve returned {verdict!r} for issue_refund (toolu_r1)")
    assert_valid_transcript(result.messages)


async def test_the_crash_helper_leaves_the_refund_as_an_unanswered_intent(store: CheckpointStore) -> None:
    """The crash checkpoint is what an unguarded resume would act on: the old path ran it."""
    await crash_a_new_run(store, "t")
    shop = Shop()
    result = await loop([DONE], store, [shop.refund()]).resume("t")
    assert result.stop_reason is StopReason.COMPLETED
    assert shop.refunds == {"t:1:toolu_r1": "O-1"}
    resumed = result.events[0]
    assert isinstance(resumed, Resumed)
    assert (resumed.from_phase, resumed.interrupted, resumed.approvals) == ("act", True, {})
    assert [call["decision"] for call in validations(result)] == ["execute"]


async def test_approved_calls_beyond_max_tool_calls_stop_the_resumed_run_before_any_runs(
    store: CheckpointStore,
) -> None:
    """Two approved refunds, one tool call left in the resuming loop's budget: the batch is
    atomic on resume too; it stops with max_tool_calls and neither refund runs."""
    two = tool_use(
        ("issue_refund", {"order_id": "O-1"}, "toolu_r1"), ("issue_refund", {"order_id": "O-2"}, "toolu_r2")
    )
    await loop([two], store, [Shop().refund(requires_approval=True)]).run("Refund?", task_id="t")
    shop = Shop()
    tight = loop(
        [DONE], store, [shop.refund(requires_approval=True)], budget=Budget(max_steps=6, max_tool_calls=1)
    )
    result = await tight.resume("t", approvals={"toolu_r1": True, "toolu_r2": True})
    assert result.stop_reason is StopReason.MAX_TOOL_CALLS
    assert shop.refunds == {}
    assert [call["decision"] for call in validations(result)] == ["human_approved", "human_approved"]
