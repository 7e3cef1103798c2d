"""A run's dependencies (`run(goal, deps=...)`): handed to its tool functions as `ToolContext.deps`,
given again on resume, and never written anywhere a run is kept, recorded, traced or measured."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import anyio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest

from boundloop import (
    AgentLoop,
    Budget,
    LoopMetrics,
    MemoryStore,
    Observers,
    ScriptedClient,
    SQLiteStore,
    StopReason,
    Tool,
    ToolContext,
    replay,
    tool,
)
from boundloop.events import to_json_line
from boundloop.otel import TraceSettings
from boundloop.testing import ScriptItem
from tests.helpers import JSON, text, tool_use

SECRET = "sk-deps-7c1e55d0-never-persisted"


@dataclasses.dataclass
class Deps:
    """What a run hands its tools: a 'database' and a credential that must never be stored."""

    orders: dict[str, str]
    api_key: str = SECRET
    seen: list[str] = dataclasses.field(default_factory=list)

    def __repr__(self) -> str:  # a leak through repr() or str() would show the secret too
        return f"Deps(api_key={self.api_key!r})"


def refund_loop(script: list[ScriptItem], **options: object) -> AgentLoop[str, Deps]:
    """A loop whose read reads the run's deps, and whose refund needs a human."""

    @tool
    async def read_order(order_id: str, ctx: ToolContext[Deps]) -> str:
        """Read an order from the run's database."""
        ctx.deps.seen.append(f"read {order_id}")
        return ctx.deps.orders[order_id]

    @tool(side_effect=True, requires_approval=True)
    def issue_refund(order_id: str, ctx: ToolContext[Deps]) -> str:
        """Refund an order (a sync tool: it runs in a worker thread, deps included)."""
        ctx.deps.seen.append(f"refund {order_id}")
        return f"refunded {order_id}"

    loop: AgentLoop[str, Deps] = AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=[read_order, issue_refund],
        budget=Budget(max_steps=6),
        **options,  # type: ignore[arg-type]
    )
    return loop


READ = tool_use(("read_order", {"order_id": "O-1"}, "toolu_read"))
REFUND = tool_use(("issue_refund", {"order_id": "O-1"}, "toolu_refund"))


async def test_a_tool_reads_the_runs_deps_from_its_context() -> None:
    """The very object given to `run(deps=...)` reaches the tool function; without deps, None."""
    deps = Deps(orders={"O-1": "O-1: delivered late"})
    result = await refund_loop([READ, text("Late.")], observers=Observers(metrics=None)).run(
        "Read O-1.", deps=deps
    )
    assert result.stop_reason is StopReason.COMPLETED
    assert deps.seen == ["read O-1"]
    assert result.state.observations[0].content == "O-1: delivered late"

    seen: list[object] = []

    @tool
    async def probe(ctx: ToolContext) -> str:
        """Report the deps."""
        seen.append(ctx.deps)
        return "ok"

    loop = AgentLoop(
        ScriptedClient([tool_use(("probe", {})), text("done")]),
        model="claude-sonnet-4-6",
        tools=[probe],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
    )
    await loop.run("Probe.")
    assert seen == [None]


def test_a_contexts_repr_leaves_the_deps_out() -> None:
    """A context printed or logged by a tool function does not show the deps."""
    context = ToolContext(
        task_id="t", trace_id="x", step=1, tool_use_id="u", idempotency_key="t:1:u", deps=Deps(orders={})
    )
    assert SECRET not in repr(context)
    assert "idempotency_key='t:1:u'" in repr(context)


async def test_a_streamed_run_and_a_streamed_resume_hand_their_deps_to_the_tools() -> None:
    """`stream(goal, deps=...)` and `stream_resume(task_id, deps=...)` as `run` and `resume` do."""
    store = MemoryStore()
    first, second = Deps(orders={"O-1": "late"}), Deps(orders={})
    loop = refund_loop([READ, REFUND, text("Refunded.")], observers=Observers(metrics=None), store=store)
    async with loop.stream("Refund O-1.", task_id="t-stream", deps=first) as run:
        async for _ in run:
            pass
    assert run.result is not None
    assert run.result.stop_reason is StopReason.NEEDS_HUMAN
    async with loop.stream_resume("t-stream", approvals={"toolu_refund": True}, deps=second) as resumed:
        async for _ in resumed:
            pass
    assert resumed.result is not None
    assert resumed.result.stop_reason is StopReason.COMPLETED
    assert (first.seen, second.seen) == (["read O-1"], ["refund O-1"])


async def test_deps_are_given_again_on_resume_never_restored(tmp_path: Path) -> None:
    """A resumed run's tools get the deps given to `resume`, or None: the checkpoint has none."""
    store = SQLiteStore(tmp_path / "runs.db")
    before, after = Deps(orders={"O-1": "late"}), Deps(orders={}, api_key="another")
    stopped = await refund_loop([READ, REFUND], observers=Observers(metrics=None), store=store).run(
        "Refund O-1.", task_id="t-1", deps=before
    )
    assert stopped.stop_reason is StopReason.NEEDS_HUMAN
    later = refund_loop([text("Refunded.")], observers=Observers(metrics=None), store=store)
    result = await later.resume("t-1", approvals={"toolu_refund": True}, deps=after)
    assert result.stop_reason is StopReason.COMPLETED
    assert (before.seen, after.seen) == (["read O-1"], ["refund O-1"])

    forgot: list[object] = []

    @tool(side_effect=True, requires_approval=True)
    def issue_refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order."""
        forgot.append(ctx.deps)
        return "refunded"

    await refund_loop([READ, REFUND], observers=Observers(metrics=None), store=store).run(
        "Refund.", task_id="t-2", deps=before
    )
    plain = AgentLoop(
        ScriptedClient([text("Refunded.")]),
        model="claude-sonnet-4-6",
        tools=[issue_refund],
        budget=Budget(max_steps=6),
        observers=Observers(metrics=None),
        store=store,
    )
    await plain.resume("t-2", approvals={"toolu_refund": True})
    assert forgot == [None]


async def test_deps_are_never_checkpointed_recorded_traced_or_measured(tmp_path: Path) -> None:
    """A run and its resume with a secret in their deps, checkpointed to SQLite (state and event
    log), traced with content, measured, its events written as a trace and replayed: the secret
    is in none of them."""
    trace = tmp_path / "trace.jsonl"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    options = {
        "store": SQLiteStore(tmp_path / "runs.db"),
        "observers": Observers(
            metrics=LoopMetrics(registry), tracing=TraceSettings(provider=provider, content=True)
        ),
    }
    deps = Deps(orders={"O-1": "O-1: delivered late"})
    first = await refund_loop([READ, REFUND], **options).run("Refund O-1.", task_id="t-secret", deps=deps)
    assert first.stop_reason is StopReason.NEEDS_HUMAN
    result = await refund_loop([text("Refunded.")], **options).resume(
        "t-secret", approvals={"toolu_refund": True}, deps=deps
    )
    assert result.stop_reason is StopReason.COMPLETED
    assert deps.seen == ["read O-1", "refund O-1"]  # the secret was there to leak
    provider.shutdown()

    events = "".join(to_json_line(event) + "\n" for event in [*first.events, *result.events])
    await anyio.Path(trace).write_text(events, encoding="utf-8")
    report = await replay(trace)  # the recorded run replays: nothing it needs was in the deps
    assert report.identical, report.divergence
    spans = exporter.get_finished_spans()
    assert spans
    kept = {
        "the checkpoint": result.state.to_json(),
        "the result": result.to_json(),
        "the events": events,
        "the spans": "\n".join(span.to_json() for span in spans),
        "the metrics": generate_latest(registry).decode(),
        "the replay": repr(report),
    }
    kept |= await anyio.to_thread.run_sync(files, tmp_path)
    assert {"runs.db", "trace.jsonl"} <= set(kept)
    for where in ("the checkpoint", "the events", "the spans", "trace.jsonl"):
        assert "O-1: delivered late" in kept[where], where  # what the tool returned is recorded
    assert "O-1: delivered late" in kept["runs.db"] + kept.get("runs.db-wal", "")
    leaked = [where for where, text_ in kept.items() if SECRET in text_ or "Deps(" in text_]
    assert leaked == []


def files(folder: Path) -> dict[str, str]:
    """Every file under `folder` (the store's database, its WAL, the trace), as text."""
    return {
        str(path.relative_to(folder)): path.read_bytes().decode("utf-8", "replace")
        for path in folder.rglob("*")
        if path.is_file()
    }


async def test_the_deps_are_the_runs_own_when_two_runs_share_a_loop() -> None:
    """Concurrent runs of one loop each see their own deps."""

    def answer(request: Mapping[str, object]) -> JSON:  # in whatever order the two runs ask
        messages = request["messages"]
        assert isinstance(messages, list)
        return READ if len(messages) == 1 else text("read")

    loop = refund_loop([answer] * 4, observers=Observers(metrics=None))
    one, two = Deps(orders={"O-1": "one"}), Deps(orders={"O-1": "two"})
    results: dict[str, object] = {}

    async def run(name: str, deps: Deps) -> None:
        results[name] = (await loop.run("Read O-1.", deps=deps)).state.observations[0].content

    async with anyio.create_task_group() as group:
        group.start_soon(run, "one", one)
        group.start_soon(run, "two", two)
    assert results == {"one": "one", "two": "two"}
    assert one.seen == two.seen == ["read O-1"]


def test_a_parametrised_context_is_the_context_and_no_property_of_the_schema() -> None:
    """`ToolContext[Deps]` is the context: for `@tool` (resolved: left out of the schema) and for
    `Tool(handler=...)` whose annotations do not resolve (read as strings)."""

    @tool
    async def lookup(order_id: str, ctx: ToolContext[Deps]) -> str:
        """Look an order up."""
        return ctx.deps.orders[order_id]

    assert lookup.takes_context
    assert list(lookup.input_schema["properties"]) == ["order_id"]

    def unresolved(order_id: str, ctx: ToolContext[NotDefinedAnywhere]) -> str:  # type: ignore[name-defined]  # noqa: F821
        return order_id

    made = Tool(name="unresolved", description="d", input_schema={"type": "object"}, handler=unresolved)
    assert made.takes_context
