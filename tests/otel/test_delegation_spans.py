"""A delegated run's spans: the child's `invoke_agent` span is a child of the parent's
`execute_tool` span of the call that started it, in the parent's trace."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext

from boundloop import AgentLoop, Budget, Observers, ScriptedClient, StopReason
from boundloop.otel import TraceSettings
from tests.helpers import JSON, text, tool_use
from tests.otel.spans import finished, named, only

MODEL = "claude-sonnet-4-6"


def loop_of(script: list[JSON], **options: Any) -> AgentLoop:
    settings: dict[str, Any] = {
        "model": MODEL,
        "budget": Budget(max_steps=3),
        "observers": Observers(metrics=None),
    }
    return AgentLoop(ScriptedClient(script), **(settings | options))


def context(span: ReadableSpan) -> SpanContext:
    found = span.context
    assert isinstance(found, SpanContext)
    return found


@pytest.mark.parametrize("own_tracing", [True, False], ids=["child-traced", "child-default"])
async def test_a_childs_run_span_is_a_child_of_the_parents_tool_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, own_tracing: bool
) -> None:
    """Two children, started by one response: each one's `invoke_agent` span (and its `chat`
    span below it) is under the `execute_tool` span of its own call. A child loop on the
    default tracing (the global provider, none set here) is traced where its parent is."""
    child_options: dict[str, Any] = {"name": "researcher"}
    if own_tracing:
        child_options["observers"] = Observers(metrics=None, tracing=TraceSettings(provider=provider))
    researcher = loop_of([text("one"), text("two")], **child_options)
    lead = loop_of(
        [tool_use(("research", {"task": "a"}), ("research", {"task": "b"})), text("done")],
        name="lead",
        tools=[researcher.as_tool("research", description="Research.")],
        observers=Observers(metrics=None, tracing=TraceSettings(provider=provider)),
    )
    result = await lead.run("go")
    assert result.stop_reason is StopReason.COMPLETED
    spans = finished(exporter)
    root = only(spans, "invoke_agent lead")
    calls = named(spans, "execute_tool research")
    children = named(spans, "invoke_agent researcher")
    assert len(calls) == len(children) == 2
    assert all(call.parent is not None and call.parent.span_id == context(root).span_id for call in calls)
    call_ids = {context(call).span_id: call for call in calls}
    under = {child.parent.span_id for child in children if child.parent is not None}
    assert under == set(call_ids)  # each child under its own call's span
    for child in children:
        assert context(child).trace_id == context(root).trace_id
        assert child.attributes is not None
        assert child.attributes["gen_ai.conversation.id"] in result.state.children
        (chat,) = [
            span
            for span in named(spans, "chat")
            if span.parent is not None and span.parent.span_id == context(child).span_id
        ]
        assert context(chat).trace_id == context(root).trace_id
