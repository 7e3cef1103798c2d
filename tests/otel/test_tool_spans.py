"""A tool call's `execute_tool` span is the current span while its handler runs: a span the handler
starts is its child, in a parallel batch, in a worker thread, across retries."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from boundloop import (
    AgentLoop,
    Budget,
    Event,
    Observers,
    Policy,
    RetryableToolError,
    ScriptedClient,
    StopReason,
    Tool,
    tool,
)
from boundloop.otel import TraceSettings
from boundloop.testing import ScriptItem
from tests.helpers import text, tool_use
from tests.otel.spans import finished, named, only

MODEL = "claude-sonnet-4-6"


class Meeting:
    """Each party waits until all have arrived: the calls of a batch are inside their spans at once."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.everyone = anyio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived == self.parties:
            self.everyone.set()
        await self.everyone.wait()


def loop_of(
    provider: TracerProvider, script: list[ScriptItem], tools: list[Tool], **options: Any
) -> AgentLoop:
    settings: dict[str, Any] = {
        "model": MODEL,
        "tools": tools,
        "budget": Budget(max_steps=4),
        "observers": Observers(metrics=None, tracing=TraceSettings(provider=provider)),
    }
    return AgentLoop(ScriptedClient(script), **(settings | options))


def call_span(spans: list[ReadableSpan], call_id: str) -> ReadableSpan:
    """The execute_tool span of the call with this tool_use id."""
    [found] = [
        span
        for span in named(spans, "execute_tool ")
        if (span.attributes or {})["gen_ai.tool.call.id"] == call_id
    ]
    return found


def assert_child(child: ReadableSpan, parent: ReadableSpan) -> None:
    """`child`'s parent is `parent`, and it ran inside `parent`'s time."""
    assert child.parent is not None
    assert parent.context is not None
    assert child.parent.span_id == parent.context.span_id
    assert (parent.start_time or 0) <= (child.start_time or 0)
    assert (child.end_time or 0) <= (parent.end_time or 0)


async def test_a_handlers_span_is_a_child_of_its_call_in_a_parallel_batch(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """Two calls of one batch, both inside their own spans at the same time: each handler's span
    is a child of its own call's execute_tool span, and those are children of the run span."""
    meeting = Meeting(2)
    tracer = provider.get_tracer("app")

    @tool
    async def lookup(order_id: str) -> str:
        """Look an order up in the database."""
        with tracer.start_as_current_span(f"db {order_id}"):
            await meeting.wait()
        return f"{order_id}: delivered"

    script: list[ScriptItem] = [
        tool_use(("lookup", {"order_id": "O-1"}, "toolu_01"), ("lookup", {"order_id": "O-2"}, "toolu_02")),
        text("Both delivered."),
    ]
    result = await loop_of(provider, script, [lookup]).run("Check O-1 and O-2.")
    assert result.stop_reason is StopReason.COMPLETED
    spans = finished(exporter)
    run = only(spans, "invoke_agent")
    first, second = call_span(spans, "toolu_01"), call_span(spans, "toolu_02")
    assert_child(only(spans, "db O-1"), first)
    assert_child(only(spans, "db O-2"), second)
    for call in (first, second):
        assert call.parent is not None
        assert run.context is not None
        assert call.parent.span_id == run.context.span_id
        assert (call.attributes or {})["boundloop.tool.outcome"] == "ok"
        assert (call.attributes or {})["boundloop.tool.attempts"] == 1
    assert (first.start_time or 0) < (second.end_time or 0)
    assert (second.start_time or 0) < (first.end_time or 0)  # the two overlap
    assert len(spans) == 1 + 2 + 2 + 2  # the run, two chats, two calls, two handlers' spans


async def test_a_sync_handler_in_a_worker_thread_sees_its_call_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A sync handler runs in a worker thread; the span it starts is still its call's child."""
    tracer = provider.get_tracer("app")

    @tool
    def lookup(order_id: str) -> str:
        """Look an order up in the database."""
        with tracer.start_as_current_span("db"):
            return f"{order_id}: delivered"

    script: list[ScriptItem] = [tool_use(("lookup", {"order_id": "O-1"}, "toolu_01")), text("Delivered.")]
    await loop_of(provider, script, [lookup]).run("Check O-1.")
    spans = finished(exporter)
    assert_child(only(spans, "db"), call_span(spans, "toolu_01"))


async def test_the_attempts_of_a_retried_call_are_in_one_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A call retried after a RetryableToolError is one execute_tool span over both attempts."""
    tracer = provider.get_tracer("app")
    attempts: list[int] = []

    @tool
    async def lookup(order_id: str) -> str:
        """Look an order up in the database."""
        with tracer.start_as_current_span(f"attempt {len(attempts) + 1}"):
            attempts.append(1)
            if len(attempts) == 1:
                raise RetryableToolError("busy", retry_after_s=0.0)
            return f"{order_id}: delivered"

    script: list[ScriptItem] = [tool_use(("lookup", {"order_id": "O-1"}, "toolu_01")), text("Delivered.")]
    budget = Budget(max_steps=4, max_tool_retries=1)
    await loop_of(provider, script, [lookup], budget=budget).run("Check O-1.")
    spans = finished(exporter)
    call = only(spans, "execute_tool lookup")
    assert (call.attributes or {})["boundloop.tool.attempts"] == 2
    assert_child(only(spans, "attempt 1"), call)
    assert_child(only(spans, "attempt 2"), call)


async def test_a_call_whose_exception_leaves_run_still_ends_its_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """on_tool_error="raise": the handler's exception leaves run(); its span and its call's end."""
    tracer = provider.get_tracer("app")

    @tool
    async def lookup(order_id: str) -> str:
        """Look an order up in the database."""
        with tracer.start_as_current_span("db"):
            raise RuntimeError(f"backend down for {order_id}")

    script: list[ScriptItem] = [tool_use(("lookup", {"order_id": "O-1"}, "toolu_01")), text("-")]
    loop = loop_of(provider, script, [lookup], policy=Policy(on_tool_error="raise"))
    with pytest.raises(RuntimeError, match="backend down"):
        await loop.run("Check O-1.")
    spans = finished(exporter)
    assert_child(only(spans, "db"), only(spans, "execute_tool lookup"))
    assert_child(only(spans, "execute_tool lookup"), only(spans, "invoke_agent"))


class RefuseToolSpans(SpanProcessor):
    """A span processor that fails on every execute_tool span: a broken telemetry pipeline."""

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        if span.name.startswith("execute_tool"):
            raise RuntimeError("exporter down")


async def test_a_call_span_that_cannot_start_does_not_fail_the_run(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """Telemetry never fails a run: with no execute_tool span, the handler runs under the run span."""
    provider.add_span_processor(RefuseToolSpans())
    current: list[trace.Span] = []

    @tool
    async def lookup(order_id: str) -> str:
        """Look an order up in the database."""
        current.append(trace.get_current_span())
        return f"{order_id}: delivered"

    script: list[ScriptItem] = [tool_use(("lookup", {"order_id": "O-1"}, "toolu_01")), text("Delivered.")]
    result = await loop_of(provider, script, [lookup]).run("Check O-1.")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.state.observations[0].outcome == "ok"
    run = only(finished(exporter), "invoke_agent")
    assert run.context is not None
    assert [span.get_span_context().span_id for span in current] == [run.context.span_id]
    assert not named(finished(exporter), "execute_tool")


class Halt(BaseException):
    """Not an Exception: what a handler's KeyboardInterrupt or SystemExit is to the loop."""


async def test_a_run_that_a_handler_halts_ends_its_call_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A BaseException leaves run() before the call's result is recorded: its span still ends."""

    @tool
    async def lookup(order_id: str) -> str:
        """Look an order up in the database."""
        raise Halt(order_id)

    script: list[ScriptItem] = [tool_use(("lookup", {"order_id": "O-1"}, "toolu_01")), text("-")]
    with pytest.raises(Halt):
        await loop_of(provider, script, [lookup]).run("Check O-1.")
    spans = finished(exporter)
    assert_child(only(spans, "execute_tool lookup"), only(spans, "invoke_agent"))


async def test_a_call_whose_result_is_never_recorded_ends_with_the_run(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """An `on_event` hook that raises on the first tool_result fails the run before the second
    call's result is recorded: that call's span, opened when its handler ran, ends with the run."""

    @tool
    async def lookup(order_id: str) -> str:
        """Look an order up in the database."""
        return f"{order_id}: delivered"

    def hook(event: Event) -> None:
        if event.kind == "tool_result":
            raise RuntimeError("the dashboard is down")

    script: list[ScriptItem] = [
        tool_use(("lookup", {"order_id": "O-1"}, "toolu_01"), ("lookup", {"order_id": "O-2"}, "toolu_02")),
        text("Both delivered."),
    ]
    result = await loop_of(provider, script, [lookup]).run("Check O-1 and O-2.", on_event=hook)
    assert result.stop_reason is StopReason.FAILED
    spans = finished(exporter)
    run = only(spans, "invoke_agent")
    first, second = call_span(spans, "toolu_01"), call_span(spans, "toolu_02")
    assert (first.attributes or {})["boundloop.tool.outcome"] == "ok"
    assert "boundloop.tool.outcome" not in (second.attributes or {})  # never recorded
    assert_child(first, run)
    assert_child(second, run)
