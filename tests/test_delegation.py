"""Delegation (`AgentLoop.as_tool`): a tree of runs under one ledger.

The guarantee (docs/delegation.md): before every model call anywhere in the tree, the call's
worst case is reserved from the tree's ledger and its `max_tokens` clamped to what the tree can
still cover; concurrent children never together spend more than the tree has, no request is sent
that the ledger could not cover, and a child whose call cannot be covered stops `cost_budget`.
`test_eight_concurrent_children_never_spend_more_than_the_tree_has` proves it on the real
`AsyncAnthropic` over the fake API, counting requests and dollars exactly.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import anyio
import httpx2
import pydantic
import pytest

from boundloop import (
    AgentLoop,
    Budget,
    LoopState,
    MemoryStore,
    Observers,
    ScriptedClient,
    StopReason,
    ToolContext,
    tool,
)
from boundloop.events import Event, RunStarted, Stop
from tests.fake_api import MODEL, FakeAPI, message, text_block, tool_use_block
from tests.helpers import JSON, text, tool_use

TREE_USD = Fraction("0.05")
"""The tree's ceiling: the lead's `max_cost_usd`."""
INPUT_USD = Fraction(3, 1_000_000)
OUTPUT_USD = Fraction(15, 1_000_000)
"""claude-sonnet-4-6's price per token."""


def counted(body: JSON) -> int:
    """The fake's token count of a request: what `count_tokens` answers and what it bills."""
    return 20 * len(body["messages"])


def system_of(body: JSON) -> str:
    """The request's system prompt (sent as a block, for its cache breakpoint)."""
    return "".join(block["text"] for block in body["system"])


class TreeAPI(FakeAPI):
    """The fake Messages API with `count_tokens`, billing exactly: a request's input is its
    count, its output all of its `max_tokens` (the worst case). At every request it checks that
    what was billed plus the worst case of every request in flight fits in the tree's ceiling.
    A researcher's first request waits until `covered` of them are in flight."""

    def __init__(self, covered: int) -> None:
        super().__init__()
        self.billed: list[Fraction] = []
        self.in_flight: dict[int, Fraction] = {}
        self.overdrawn: list[Fraction] = []
        self.counts = 0
        self.covered = covered
        self.researchers_waiting = 0
        self.all_in_flight = anyio.Event()

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        body: JSON = json.loads(request.content)
        if request.url.path == "/v1/messages/count_tokens":
            self.counts += 1
            return httpx2.Response(200, json={"input_tokens": counted(body)})
        self.requests.append(body)
        number = len(self.requests)
        worst = counted(body) * INPUT_USD + body["max_tokens"] * OUTPUT_USD
        self.in_flight[number] = worst
        committed = sum(self.billed, Fraction(0)) + sum(self.in_flight.values(), Fraction(0))
        if committed > TREE_USD:
            self.overdrawn.append(committed)
        if system_of(body) == "researcher":
            self.researchers_waiting += 1
            if self.researchers_waiting == self.covered:
                self.all_in_flight.set()
            await self.all_in_flight.wait()  # no researcher is answered before all are in flight
            reply = message([text_block(f"finding {number}")], output_tokens=body["max_tokens"], n=number)
        elif number == 1:
            blocks = [tool_use_block(f"toolu_{i}", "research", {"task": f"topic {i}"}) for i in range(8)]
            reply = message(blocks, "tool_use", output_tokens=200, n=number)
        else:
            reply = message([text_block("the report")], n=number)
        reply["usage"]["input_tokens"] = counted(body)
        usage = reply["usage"]
        del self.in_flight[number]
        self.billed.append(usage["input_tokens"] * INPUT_USD + usage["output_tokens"] * OUTPUT_USD)
        return httpx2.Response(200, json=reply, headers={"request-id": f"req_{number:04d}"})


async def test_eight_concurrent_children_never_spend_more_than_the_tree_has() -> None:
    """One lead response asks for eight researchers at once, each wanting 1,000 output tokens
    ($0.01506 with its input): more than an eighth of what is left ($0.04694 after the lead's
    first call, $0.00306). Three are covered in full, the fourth gets the 113 tokens left, the
    other four are refused before they send anything and stop `cost_budget`; the four covered
    requests are all in flight together (the fake holds each until the fourth arrives). The fake
    billed $0.049995 of $0.05, and no request was ever sent beyond what the tree could cover."""
    api = TreeAPI(covered=4)
    client = api.client()
    researcher = AgentLoop(
        client,
        model=MODEL,
        system="researcher",
        max_tokens=1000,
        budget=Budget(max_steps=2, count_tokens=True),
        observers=Observers(metrics=None, tracing=None),
    )
    lead = AgentLoop(
        client,
        model=MODEL,
        system="lead",
        max_tokens=1000,
        tools=[researcher.as_tool("research", description="Research one topic.")],
        budget=Budget(max_steps=4, max_cost_usd=0.05, count_tokens=True, max_consecutive_tool_errors=9),
        observers=Observers(metrics=None, tracing=None),
    )
    with anyio.fail_after(10):  # a failure to run them concurrently waits forever: fail instead
        result = await lead.run("Write a report on eight topics.")

    assert api.overdrawn == []  # at every request: billed + in flight <= the tree's ceiling
    assert sum(api.billed, Fraction(0)) == Fraction("0.049995") <= TREE_USD
    assert len(api.requests) == 5  # the lead's first call and four researchers: nothing more
    researchers = [body for body in api.requests if system_of(body) == "researcher"]
    assert sorted(body["max_tokens"] for body in researchers) == [113, 1000, 1000, 1000]
    assert api.all_in_flight.is_set()

    assert result.stop_reason is StopReason.COST_BUDGET  # its next call cannot be covered either
    assert "the tree's max_cost_usd=0.05 cannot cover the next call" in (result.state.stop_detail or "")
    children = result.state.children
    assert len(children) == 8
    answers = result.state.observations
    done = [answer for answer in answers if answer.outcome == "ok"]
    refused = [answer for answer in answers if answer.outcome == "error"]
    assert len(done) == 4
    assert len(refused) == 4
    for answer in refused:
        content = str(answer.content)
        assert "stopped cost_budget" in content
        assert any(f"delegated run {task_id} " in content for task_id in children)
    assert result.usage.cost_usd == pytest.approx(0.049995)  # the tree's total
    assert result.state.usage.cost_usd == pytest.approx(0.00306)  # the lead's own


async def test_a_run_alone_sends_what_its_own_budget_allows() -> None:
    """No delegation, no ledger: the lead's own clamp is what a request carries."""
    api = TreeAPI(covered=0)
    loop = AgentLoop(
        api.client(),
        model=MODEL,
        system="lead",
        max_tokens=1000,
        budget=Budget(max_steps=1),
        observers=Observers(metrics=None),
    )
    api.push()
    result = await loop.run("Write a report.")
    assert api.requests[0]["max_tokens"] == 1000
    assert result.tree_usage is None
    assert result.usage is result.state.usage


def researcher_loop(*answers: JSON, **options: Any) -> AgentLoop:
    settings: dict[str, Any] = {"budget": Budget(max_steps=2), "observers": Observers(metrics=None)}
    return AgentLoop(
        ScriptedClient(list(answers)), model="claude-sonnet-4-6", system="researcher", **(settings | options)
    )


def lead_loop(script: list[JSON], *tools: Any, **options: Any) -> AgentLoop:
    settings: dict[str, Any] = {"budget": Budget(max_steps=3), "observers": Observers(metrics=None)}
    return AgentLoop(
        ScriptedClient(script), model="claude-sonnet-4-6", tools=list(tools), **(settings | options)
    )


async def test_a_completed_child_answers_with_its_answer_and_is_linked_to_its_parent() -> None:
    store = MemoryStore()
    researcher = researcher_loop(text("Paris"), store=store)
    lead = lead_loop(
        [tool_use(("research", {"task": "the capital of France"})), text("It is Paris.")],
        researcher.as_tool("research", description="Research one question."),
        store=store,
    )
    result = await lead.run("What is the capital of France?")
    assert result.stop_reason is StopReason.COMPLETED
    assert [answer.content for answer in result.state.observations] == ["Paris"]
    (child_id,) = result.state.children
    child = await store.load(child_id)
    assert child is not None
    assert child.parent_task_id == result.state.task_id
    assert child.goal == "the capital of France"
    assert child.trace_id == result.state.trace_id  # one trace for the tree
    stored = await store.load(result.state.task_id)
    assert stored is not None
    assert stored.children == [child_id]
    assert result.usage.total_tokens == result.state.usage.total_tokens + child.usage.total_tokens


class Finding(pydantic.BaseModel):
    city: str


async def test_a_child_with_an_output_type_answers_with_its_output_as_json() -> None:
    researcher = AgentLoop(
        ScriptedClient([text('{"city": "Paris"}')]),
        model="claude-sonnet-4-6",
        budget=Budget(max_steps=1),
        output_type=Finding,
        observers=Observers(metrics=None),
    )
    lead = lead_loop(
        [tool_use(("research", {"task": "capital"})), text("done")],
        researcher.as_tool("research", description="Research."),
    )
    result = await lead.run("go")
    assert [answer.content for answer in result.state.observations] == ['{"city":"Paris"}']


async def test_a_child_that_does_not_complete_is_an_error_naming_its_stop_and_task_id() -> None:
    researcher = researcher_loop(tool_use(("missing", {})), budget=Budget(max_steps=1))
    lead = lead_loop(
        [tool_use(("research", {"task": "x"})), text("could not")],
        researcher.as_tool("research", description="Research."),
        policy=None,
    )
    result = await lead.run("go")
    (answer,) = result.state.observations
    (child_id,) = result.state.children
    assert answer.outcome == "error"
    assert f"the delegated run {child_id} stopped max_steps" in str(answer.content)
    assert result.stop_reason is StopReason.COMPLETED


async def test_a_child_too_deep_is_denied_before_it_starts() -> None:
    """max_depth=1: a child runs, its own delegation (a grandchild) is denied, as an error its
    model reads; nothing of the grandchild runs."""
    grandchild_client = ScriptedClient([])  # never called: an empty script would raise
    grandchild = AgentLoop(
        grandchild_client,
        model="claude-sonnet-4-6",
        budget=Budget(max_steps=1),
        observers=Observers(metrics=None),
    )
    child = researcher_loop(
        tool_use(("deeper", {"task": "y"})),
        text("I did it myself"),
        tools=[grandchild.as_tool("deeper", description="Delegate further.")],
    )
    lead = lead_loop(
        [tool_use(("research", {"task": "x"})), text("done")],
        child.as_tool("research", description="Research."),
        budget=Budget(max_steps=3, max_depth=1),
    )
    events: list[Event] = []
    result = await lead.run("go", on_event=events.append)
    assert [answer.content for answer in result.state.observations] == ["I did it myself"]
    started = [event for event in events if isinstance(event, RunStarted)]
    assert len(started) == 2  # the lead and its child: no grandchild
    child_events = [event for event in events if event.task_id == started[1].task_id]
    denied = [event for event in child_events if event.kind == "tool_result"]
    assert "deeper than max_depth=1" in json.dumps([event.to_dict() for event in denied])
    assert grandchild_client.requests == []


async def test_a_run_past_max_children_is_denied_before_the_child_starts() -> None:
    researcher = researcher_loop(text("one"), text("two"))
    lead = lead_loop(
        [tool_use(("research", {"task": "a"}), ("research", {"task": "b"})), text("done")],
        researcher.as_tool("research", description="Research."),
        budget=Budget(max_steps=3, max_children=1),
    )
    result = await lead.run("go")
    contents = sorted(str(answer.content) for answer in result.state.observations)
    assert len(result.state.children) == 1
    assert (
        contents[0]
        == "delegation denied: this run has started its max_children=1 delegated runs; do the task yourself"
    )
    assert contents[1] == "one"


async def test_a_childs_events_reach_the_parents_hooks_and_stream_with_their_own_task_id() -> None:
    loop_events: list[Event] = []
    researcher = researcher_loop(text("found"))
    lead = lead_loop(
        [tool_use(("research", {"task": "x"})), text("done")],
        researcher.as_tool("research", description="Research."),
        observers=Observers(metrics=None, on_event=loop_events.append),
    )
    streamed: list[Event] = []
    async with lead.stream("go") as run:
        async for event in run:
            streamed.append(event)
    assert run.result is not None
    root = run.result.state.task_id
    (child_id,) = run.result.state.children
    for events in (streamed, loop_events):
        starts = [(event.task_id, event.parent_task_id) for event in events if isinstance(event, RunStarted)]
        assert starts == [(root, None), (child_id, root)]
        stops = [event.task_id for event in events if isinstance(event, Stop)]
        assert stops == [child_id, root]
    assert any(event.kind == "text_delta" and event.task_id == child_id for event in streamed)
    assert all(event.task_id == root for event in run.result.events)  # the parent's own record


def test_a_checkpoint_from_before_delegation_reads_back() -> None:
    """`parent_task_id` and `children` are new fields: a state written without them loads."""
    state = LoopState(task_id="t", trace_id="r", goal="g", started_at=0.0)
    raw = json.loads(state.to_json())
    del raw["parent_task_id"], raw["children"]
    loaded = LoopState.from_json(json.dumps(raw))
    assert loaded.parent_task_id is None
    assert loaded.children == []


async def test_a_delegation_tool_called_as_its_function_runs_the_child_alone() -> None:
    researcher = researcher_loop(text("alone"))
    tool = researcher.as_tool("research", description="Research.")
    assert await tool(task="x") == "alone"  # type: ignore[misc]


def refund_tool(effects: list[str]) -> Any:
    """A side-effecting tool a human approves; each run appends its idempotency key."""

    @tool(side_effect=True, requires_approval=True)
    async def issue_refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order."""
        effects.append(ctx.idempotency_key)
        return f"refunded {order_id}"

    return issue_refund


async def test_a_child_that_needs_a_human_stops_the_tree_and_resume_continues_the_child_then_the_parent() -> (
    None
):
    """The child's refund waits for approval: the lead stops `needs_human` too, the refund listed
    on it; beside it, the lead's other call ran and keeps its result. `resume(root, approvals=...)`
    resumes the same child (which refunds once), then the lead reads its answer and completes."""
    store = MemoryStore()
    effects: list[str] = []
    lookups: list[str] = []

    @tool
    async def look_up(order_id: str) -> str:
        """Look an order up."""
        lookups.append(order_id)
        return f"{order_id}: paid"

    researcher = researcher_loop(
        tool_use(("issue_refund", {"order_id": "O-1"}, "toolu_refund")),
        text("refunded O-1"),
        tools=[refund_tool(effects)],
        store=store,
    )
    lead = lead_loop(
        [
            tool_use(
                ("look_up", {"order_id": "O-1"}, "toolu_look"),
                ("refunds", {"task": "refund O-1"}, "toolu_del"),
            ),
            text("done"),
        ],
        look_up,
        researcher.as_tool("refunds", description="Handle refunds."),
        store=store,
    )
    waiting = await lead.run("Refund O-1.")
    root = waiting.state.task_id
    (child_id,) = waiting.state.children
    assert waiting.stop_reason is StopReason.NEEDS_HUMAN
    assert [p.tool_use_id for p in waiting.state.pending_approvals] == ["toolu_refund"]
    assert waiting.state.waiting_on == {"toolu_refund": child_id}
    assert "approval required for issue_refund in the delegated run" in (waiting.state.stop_detail or "")
    stored_child = await store.load(child_id)
    assert stored_child is not None
    assert stored_child.stop_reason is StopReason.NEEDS_HUMAN
    assert effects == []

    result = await lead.resume(root, approvals={"toolu_refund": True})
    assert result.stop_reason is StopReason.COMPLETED
    assert result.state.children == [child_id]  # the same child, resumed: no fresh one
    assert len(effects) == 1  # the refund ran once
    assert effects[0].startswith(f"{child_id}:")
    assert lookups == ["O-1"]  # the lead's other call ran once, before the stop
    contents = {answer.tool_use_id: answer.content for answer in result.state.observations}
    assert contents == {"toolu_look": "O-1: paid", "toolu_del": "refunded O-1"}
    child = await store.load(child_id)
    assert child is not None
    assert child.stop_reason is StopReason.COMPLETED
    assert result.state.pending_approvals == []
    assert result.state.waiting_on == {}


async def test_a_child_denied_by_the_human_answers_its_parent_with_what_it_did_then() -> None:
    store = MemoryStore()
    effects: list[str] = []
    researcher = researcher_loop(
        tool_use(("issue_refund", {"order_id": "O-1"}, "toolu_refund")),
        text("not refunded"),
        tools=[refund_tool(effects)],
        store=store,
    )
    lead = lead_loop(
        [tool_use(("refunds", {"task": "refund O-1"})), text("done")],
        researcher.as_tool("refunds", description="Handle refunds."),
        store=store,
    )
    waiting = await lead.run("Refund O-1.")
    result = await lead.resume(waiting.state.task_id, approvals={"toolu_refund": "not today"})
    assert result.stop_reason is StopReason.COMPLETED
    assert [answer.content for answer in result.state.observations] == ["not refunded"]
    assert effects == []


@pytest.mark.parametrize("stop", [StopReason.CANCELLED, StopReason.TIMEOUT])
async def test_cancel_and_timeout_stop_the_whole_tree_every_checkpoint_saying_so(stop: StopReason) -> None:
    """The child's tool is in flight when the lead's cancel event is set (or the tree's deadline
    passes): the child stops, then the lead, each checkpoint recording the stop."""
    store = MemoryStore()
    cancel = anyio.Event()
    started = anyio.Event()

    @tool
    async def wait_forever() -> str:
        """Wait."""
        started.set()
        if stop is StopReason.CANCELLED:
            cancel.set()
        await anyio.sleep_forever()
        raise AssertionError("not reached")

    researcher = researcher_loop(tool_use(("wait_forever", {})), tools=[wait_forever], store=store)
    lead = lead_loop(
        [tool_use(("research", {"task": "x"}))],
        researcher.as_tool("research", description="Research."),
        store=store,
        budget=Budget(max_steps=3, timeout_s=0.2 if stop is StopReason.TIMEOUT else None),
    )
    with anyio.fail_after(10):
        result = await lead.run("go", cancel=cancel)
    assert started.is_set()
    assert result.stop_reason is stop
    (child_id,) = result.state.children
    for task_id in (result.state.task_id, child_id):
        saved = await store.load(task_id)
        assert saved is not None
        assert saved.stop_reason is stop, task_id
