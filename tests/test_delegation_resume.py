"""A delegation tree resumed: a child's question goes up to the root and its reply down to the
child; a delegation's call run again is the same call (one tool call of its parent); the parent's
checkpoint names a child as it starts; a child that had stopped answers as it stopped.

A kill is re-enacted in-process from the store as the kill leaves it: the lead's checkpoint read
by the child's tool while the child runs (what a process killed there leaves on disk), beside the
child's last checkpoint, both put into a new store the resuming loops read. `tests/test_crash.py`
kills a real process.
"""

from __future__ import annotations

from typing import Any

import pytest

from boundloop import (
    AgentLoop,
    Budget,
    LoopState,
    MemoryStore,
    Observers,
    Policy,
    ScriptedClient,
    StopReason,
    tool,
)
from boundloop.events import Event, Resumed
from tests.helpers import JSON, text, tool_use

MODEL = "claude-sonnet-4-6"


def loop(script: list[JSON], store: MemoryStore, **options: Any) -> AgentLoop:
    settings: dict[str, Any] = {"budget": Budget(max_steps=3), "observers": Observers(metrics=None)}
    return AgentLoop(ScriptedClient(script), model=MODEL, store=store, **(settings | options))


async def test_a_childs_question_stops_the_tree_and_the_roots_reply_reaches_the_child() -> None:
    """A grandchild asks a human (`Policy(escalation_tool=...)`): its parent and the root stop
    `needs_human`, the question on the root's `state.escalation`, `waiting_on` naming the run
    that asked. `resume(root, reply=...)` goes down the tree: the grandchild reads the reply as
    its question's answer and completes, then the child, then the root."""
    store = MemoryStore()
    asked = loop(
        [
            tool_use(("request_human", {"reason": "Which account, EU or US?"}, "toolu_ask")),
            text("billed to EU"),
        ],
        store,
        policy=Policy(escalation_tool="request_human"),
        name="asker",
    )
    middle = loop(
        [tool_use(("bill", {"task": "bill it"}, "toolu_bill")), text("the asker billed EU")],
        store,
        tools=[asked.as_tool("bill", description="Bill.")],
        name="middle",
    )
    root = loop(
        [tool_use(("delegate", {"task": "get it billed"}, "toolu_mid")), text("billed")],
        store,
        tools=[middle.as_tool("delegate", description="Delegate.")],
        name="root",
    )
    waiting = await root.run("Bill the order.")
    assert waiting.stop_reason is StopReason.NEEDS_HUMAN
    (middle_id,) = waiting.state.children
    middle_state = await store.load(middle_id)
    assert middle_state is not None
    (asker_id,) = middle_state.children
    question = waiting.state.escalation
    assert question is not None
    assert (question.tool_use_id, question.reason) == ("toolu_ask", "Which account, EU or US?")
    assert waiting.state.waiting_on == {"toolu_ask": asker_id}
    assert waiting.state.pending_approvals == []
    assert f"the delegated run {middle_id} asked for a human: Which account" in (
        waiting.state.stop_detail or ""
    )
    turn = waiting.state.turn
    assert turn is not None
    (held,) = turn.answers  # provisional, not an error from the child: the call runs again on resume
    assert held is not None
    assert str(held.content) == f"not run: the delegated run {middle_id} waits for a human"

    result = await root.resume(waiting.state.task_id, reply="EU")
    assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail
    assert [answer.content for answer in result.state.observations] == ["the asker billed EU"]
    assert result.state.children == [middle_id]  # the same runs, resumed
    asker = await store.load(asker_id)
    assert asker is not None
    assert asker.stop_reason is StopReason.COMPLETED
    assert [(answer.tool_use_id, answer.content) for answer in asker.observations] == [("toolu_ask", "EU")]
    assert result.state.escalation is None
    assert result.state.waiting_on == {}


def refund_tool(effects: list[str]) -> Any:
    @tool(requires_approval=True)
    async def issue_refund(order_id: str) -> str:
        """Refund an order."""
        effects.append(order_id)
        return f"refunded {order_id}"

    return issue_refund


async def test_a_delegation_run_again_after_a_resume_is_one_tool_call_of_its_parent() -> None:
    """The lead may make one tool call: its delegation waits for a human, and the resume runs
    that call again (which resumes the child): still one call, so the lead completes."""
    store = MemoryStore()
    effects: list[str] = []
    refunds = loop(
        [tool_use(("issue_refund", {"order_id": "O-1"}, "toolu_refund")), text("refunded O-1")],
        store,
        tools=[refund_tool(effects)],
    )
    lead = loop(
        [tool_use(("refunds", {"task": "refund O-1"}, "toolu_del")), text("done")],
        store,
        tools=[refunds.as_tool("refunds", description="Refunds.")],
        budget=Budget(max_steps=3, max_tool_calls=1),
    )
    waiting = await lead.run("Refund O-1.")
    assert waiting.stop_reason is StopReason.NEEDS_HUMAN
    assert waiting.state.tool_calls == 0  # the held call counts as not run
    result = await lead.resume(waiting.state.task_id, approvals={"toolu_refund": True})
    assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail
    assert result.state.tool_calls == 1
    assert effects == ["O-1"]


async def test_a_child_that_had_stopped_answers_the_resumed_parent_as_it_stopped() -> None:
    """A kill while the child runs: the lead's checkpoint (in `act`) already names the child and
    counts the delegation as its one tool call. The child then completed. Resuming the lead runs
    the delegation's call again: it finds the child stopped and answers with its answer, without
    running it (its client has no response left), and the call is still the lead's one."""
    store = MemoryStore()
    killed: dict[str, LoopState | None] = {}

    @tool
    async def look_up() -> str:
        """Look it up."""
        killed["lead"] = await store.load("lead")  # the lead as a kill now would leave it
        return "Paris"

    researcher = loop([tool_use(("look_up", {})), text("Paris")], store, tools=[look_up])
    lead_options: dict[str, Any] = {"budget": Budget(max_steps=3, max_tool_calls=1)}
    lead = loop(
        [tool_use(("research", {"task": "the capital"}, "toolu_del")), text("It is Paris.")],
        store,
        tools=[researcher.as_tool("research", description="Research.")],
        **lead_options,
    )
    first = await lead.run("The capital of France?", task_id="lead")
    (child_id,) = first.state.children
    at_kill = killed["lead"]
    assert at_kill is not None
    assert str(at_kill.phase) == "act"
    assert at_kill.children == [child_id]  # saved when the child started, not at the batch's end
    assert at_kill.tool_calls == 1
    child = await store.load(child_id)
    assert child is not None
    assert child.stop_reason is StopReason.COMPLETED

    disk = MemoryStore()  # what the killed process left: the lead mid-batch, the child stopped
    await disk.save(at_kill)
    await disk.save(child)
    idle = ScriptedClient([])  # running the child again would ask it for a response: it has none
    again = AgentLoop(
        idle, model=MODEL, budget=Budget(max_steps=3), observers=Observers(metrics=None), store=disk
    )
    resumed_lead = loop(
        [text("It is Paris.")],
        disk,
        tools=[again.as_tool("research", description="Research.")],
        **lead_options,
    )
    events: list[Event] = []
    result = await resumed_lead.resume("lead", on_event=events.append)
    assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail
    assert [answer.content for answer in result.state.observations] == ["Paris"]
    assert result.state.children == [child_id]
    assert result.state.tool_calls == 1  # the call run again is the same call
    assert idle.requests == []
    assert [event.task_id for event in events if isinstance(event, Resumed)] == ["lead"]  # not the child


async def test_two_children_asking_at_once_are_answered_one_resume_each() -> None:
    """Both delegations of one batch ask a human: the root holds the first question; the resume
    that answers it finds the second still waiting, and the tree stops again with that one."""
    store = MemoryStore()

    def asker(question: str, answer: str) -> AgentLoop:
        return loop(
            [tool_use(("request_human", {"reason": question}, f"toolu_{answer}")), text(answer)],
            store,
            policy=Policy(escalation_tool="request_human"),
        )

    root = loop(
        [
            tool_use(("first", {"task": "a"}, "toolu_a"), ("second", {"task": "b"}, "toolu_b")),
            text("both answered"),
        ],
        store,
        tools=[
            asker("Which account?", "one").as_tool("first", description="First."),
            asker("Which day?", "two").as_tool("second", description="Second."),
        ],
    )
    waiting = await root.run("Go.")
    assert waiting.state.escalation is not None
    assert waiting.state.escalation.reason == "Which account?"
    again = await root.resume(waiting.state.task_id, reply="EU")
    assert again.stop_reason is StopReason.NEEDS_HUMAN
    assert again.state.escalation is not None
    assert again.state.escalation.reason == "Which day?"
    result = await root.resume(waiting.state.task_id, reply="Monday")
    assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail
    assert sorted(str(answer.content) for answer in result.state.observations) == ["one", "two"]


async def test_a_resumed_trees_ledger_counts_what_the_runs_below_spent_before() -> None:
    """The lead's ceiling is $0.35; its refunds child spends $0.30015 before it waits for a human.
    After the resume, the tree's ledger starts from that spend too (kept in the lead's
    `state.below`), so the next child's request is clamped to what the tree has left, and the
    lead's usage is the whole tree's, every session of it."""
    store = MemoryStore()
    refunds = loop(
        [
            tool_use(
                ("issue_refund", {"order_id": "O-1"}, "toolu_refund"), input_tokens=100_000, output_tokens=10
            ),
            text("refunded O-1"),
        ],
        store,
        tools=[refund_tool([])],
    )
    writer_client = ScriptedClient([text("written")])
    writer = AgentLoop(
        writer_client, model=MODEL, budget=Budget(max_steps=2), observers=Observers(metrics=None), store=store
    )
    lead = loop(
        [
            tool_use(("refunds", {"task": "refund O-1"}, "toolu_del")),
            tool_use(("write", {"task": "write it up"}, "toolu_write")),
            text("done"),
        ],
        store,
        tools=[
            refunds.as_tool("refunds", description="Refunds."),
            writer.as_tool("write", description="Write."),
        ],
        budget=Budget(max_steps=4, max_cost_usd=0.35),
    )
    waiting = await lead.run("Refund O-1, then write it up.")
    (refunds_id,) = waiting.state.children
    assert waiting.state.below[refunds_id].cost_usd == pytest.approx(0.30015)
    result = await lead.resume(waiting.state.task_id, approvals={"toolu_refund": True})
    assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail
    (request,) = writer_client.requests
    assert request["max_tokens"] < 4096  # the tree had under $0.0614 left: not the loop's 4,096
    assert 0.30015 < (result.usage.cost_usd or 0.0) <= 0.35
    children = [await store.load(task_id) for task_id in result.state.children]
    spent = sum((child.usage.cost_usd or 0.0) for child in children if child is not None)
    assert result.usage.cost_usd == pytest.approx((result.state.usage.cost_usd or 0.0) + spent)
