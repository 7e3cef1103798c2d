"""One trace id for the spans, the JSON-lines trace and the exemplars; the SDK's own chat span;
which provider a run uses, and that an untraced run makes nothing and imports nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from boundloop import (
    AgentLoop,
    Budget,
    ConfigurationError,
    LoopMetrics,
    MemoryStore,
    Observers,
    ScriptedClient,
    StopReason,
    ToolContext,
    tool,
)
from boundloop.events import Stop
from boundloop.metrics import render
from boundloop.otel import TraceSettings
from tests.helpers import ScriptedTransport, text, tool_use
from tests.otel.spans import finished, named, only

MODEL = "claude-sonnet-4-6"
OPENMETRICS = "application/openmetrics-text; version=1.0.0"
INCOMING = "4bf92f3577b34da6a3ce929d0e0e4736"


class Seen:
    """What a tool saw while it ran: the run's trace id and the current span."""

    def __init__(self) -> None:
        self.trace_ids: list[str] = []
        self.spans: list[trace.Span] = []

    def tool(self) -> Any:
        @tool
        async def read_order(order_id: str, context: ToolContext) -> str:
            """Read one order by id."""
            self.trace_ids.append(context.trace_id)
            self.spans.append(trace.get_current_span())
            return f"{order_id}: delivered"

        return read_order


def two_steps() -> list[Any]:
    return [tool_use(("read_order", {"order_id": "O-1"})), text("Delivered.")]


def make_loop(seen: Seen, **options: Any) -> AgentLoop:
    settings: dict[str, Any] = {
        "model": MODEL,
        "budget": Budget(max_steps=4),
        "observers": Observers(metrics=None),
    }
    return AgentLoop(ScriptedClient(two_steps()), tools=[seen.tool()], **(settings | options))


def hex_id(value: int) -> str:
    return f"{value:032x}"


def exemplars(registry: CollectorRegistry) -> list[dict[str, str]]:
    body, _ = render(registry, accept=OPENMETRICS)
    families = text_string_to_metric_families(body.decode())  # type: ignore[no-untyped-call]  # untyped upstream
    return [
        sample.exemplar.labels
        for family in families
        for sample in family.samples
        if sample.name == "boundloop_run_duration_seconds_bucket" and sample.exemplar is not None
    ]


async def test_a_new_run_takes_its_span_trace_id(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """No caller span, no trace id given: the run span starts a trace, and its id is the run's
    everywhere: state, tools, the JSON-lines stop event, the exemplar."""
    registry = CollectorRegistry()
    seen = Seen()
    loop = make_loop(
        seen,
        observers=Observers(metrics=LoopMetrics(registry=registry), tracing=TraceSettings(provider=provider)),
    )
    result = await loop.run("Check O-1.")
    run = only(finished(exporter), "invoke_agent")
    assert run.parent is None
    assert run.context is not None
    trace_id = hex_id(run.context.trace_id)
    assert result.state.trace_id == trace_id
    assert seen.trace_ids == [trace_id]
    assert [event.trace_id for event in result.events if isinstance(event, Stop)] == [trace_id]
    assert exemplars(registry) == [{"trace_id": trace_id}]
    call = only(finished(exporter), "execute_tool read_order")  # current while the tool runs
    assert call.context is not None
    assert seen.spans[0].get_span_context().span_id == call.context.span_id
    assert call.parent is not None
    assert call.parent.span_id == run.context.span_id


async def test_a_run_under_the_callers_span_is_in_its_trace(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """The caller's current span is the run span's parent, and its trace id is the run's."""
    seen = Seen()
    with provider.get_tracer("app").start_as_current_span("POST /refunds") as request:
        result = await make_loop(
            seen, observers=Observers(metrics=None, tracing=TraceSettings(provider=provider))
        ).run("Check O-1.")
    run = only(finished(exporter), "invoke_agent")
    assert run.parent is not None
    assert run.parent.span_id == request.get_span_context().span_id
    assert result.state.trace_id == hex_id(request.get_span_context().trace_id) == seen.trace_ids[0]


async def test_a_given_trace_id_wins_and_is_joined(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A caller's W3C trace id: the state keeps it, and the run span joins that trace."""
    result = await make_loop(
        Seen(), observers=Observers(metrics=None, tracing=TraceSettings(provider=provider))
    ).run("Check O-1.", trace_id=INCOMING)
    assert result.state.trace_id == INCOMING
    run = only(finished(exporter), "invoke_agent")
    assert run.context is not None
    assert hex_id(run.context.trace_id) == INCOMING
    assert run.parent is not None
    assert run.parent.is_remote


async def test_a_given_trace_id_wins_over_the_callers_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A given id is the state's even under a caller's span; the span tree stays the caller's
    and the run span names the run's id."""
    with provider.get_tracer("app").start_as_current_span("POST /refunds") as request:
        result = await make_loop(
            Seen(), observers=Observers(metrics=None, tracing=TraceSettings(provider=provider))
        ).run("Check O-1.", trace_id="order-42")
    assert result.state.trace_id == "order-42"
    run = only(finished(exporter), "invoke_agent")
    assert run.parent is not None
    assert run.parent.span_id == request.get_span_context().span_id
    assert (run.attributes or {})["boundloop.trace_id"] == "order-42"


async def test_a_resumed_run_continues_its_trace(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """Each session is a run span; a resume joins the trace of the run it continues."""

    @tool(requires_approval=True)
    async def issue_refund(order_id: str) -> str:
        """Refund an order."""
        return f"refunded {order_id}"

    client = ScriptedClient([tool_use(("issue_refund", {"order_id": "O-1"}, "toolu_01")), text("Refunded.")])
    loop = AgentLoop(
        client,
        model=MODEL,
        tools=[issue_refund],
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None, tracing=TraceSettings(provider=provider)),
        store=MemoryStore(),
    )
    waiting = await loop.run("Refund O-1.")
    assert waiting.stop_reason is StopReason.NEEDS_HUMAN
    done = await loop.resume(waiting.state.task_id, approvals={"toolu_01": True})
    assert done.stop_reason is StopReason.COMPLETED
    first, second = named(finished(exporter), "invoke_agent")
    assert first.context is not None
    assert second.context is not None
    assert first.context.trace_id == second.context.trace_id
    assert hex_id(second.context.trace_id) == done.state.trace_id == waiting.state.trace_id
    assert (second.attributes or {})["boundloop.resumed_from"] == "stopped"
    assert (second.attributes or {})["boundloop.stop_reason"] == "completed"
    assert (first.attributes or {})["boundloop.stop_reason"] == "needs_human"
    refund = only(finished(exporter), "execute_tool issue_refund")
    assert refund.parent is not None
    assert refund.parent.span_id == second.context.span_id


@pytest.mark.parametrize(
    ("sdk_option", "sdk_spans"),
    [("same provider", True), ("off", False), ("global provider, none set", False)],
)
async def test_one_chat_span_per_model_call(
    provider: TracerProvider, exporter: InMemorySpanExporter, sdk_option: str, sdk_spans: bool
) -> None:
    """The real AsyncAnthropic: the chat span is always boundloop's, a child of the run span; when
    the SDK traces to the run's provider, its own span of the call is the chat span's child."""
    options: Any = {
        "same provider": {"tracer_provider": provider},
        "off": False,
        "global provider, none set": None,
    }[sdk_option]
    transport = ScriptedTransport(two_steps())
    client = transport.client().with_options(open_telemetry=options)
    loop = AgentLoop(
        client,
        model=MODEL,
        tools=[Seen().tool()],
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None, tracing=TraceSettings(provider=provider)),
    )
    result = await loop.run("Check O-1.")
    assert result.stop_reason is StopReason.COMPLETED
    spans = finished(exporter)
    chats = named(spans, "chat ")
    assert (
        [span.name for span in chats] == [f"chat {MODEL}"] * len(transport.requests) == [f"chat {MODEL}"] * 2
    )
    chat_ids = {span.context.span_id for span in chats if span.context is not None}
    sdk = named(spans, "anthropic.messages.create")
    assert len(sdk) == (2 if sdk_spans else 0)
    assert all(span.parent is not None and span.parent.span_id in chat_ids for span in sdk)
    run = only(spans, "invoke_agent")
    assert run.context is not None
    assert all(span.parent is not None and span.parent.span_id == run.context.span_id for span in chats)
    assert all(span.context is not None and span.context.trace_id == run.context.trace_id for span in chats)


async def test_without_a_provider_nothing_is_traced(exporter: InMemorySpanExporter) -> None:
    """No provider given and none set globally (this process never sets one): no span is made
    or made current, and the state's trace id is a random one."""
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    seen = Seen()
    result = await make_loop(seen).run("Check O-1.")
    assert result.stop_reason is StopReason.COMPLETED
    assert seen.spans == [trace.INVALID_SPAN]
    assert finished(exporter) == []


async def test_tracer_provider_none_is_off(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """`Observers(tracing=None)`: no spans, even under a caller's span (whose trace the run ignores)."""
    seen = Seen()
    with provider.get_tracer("app").start_as_current_span("POST /refunds") as request:
        result = await make_loop(seen, observers=Observers(metrics=None, tracing=None)).run("Check O-1.")
    assert [span.name for span in finished(exporter)] == ["POST /refunds"]
    assert seen.spans == [request]
    assert result.state.trace_id != hex_id(request.get_span_context().trace_id)


GLOBAL = textwrap.dedent(
    """
    import json, sys
    import boundloop

    seen = {
        "imported_on_import": "boundloop.otel._run" in sys.modules,
        "otel_on_import": any(name.startswith("opentelemetry") for name in sys.modules),
    }
    import anyio
    from boundloop import AgentLoop, Budget, Observers, ScriptedClient

    backend = sys.argv[1]

    def loop(observers=Observers(metrics=None)):
        answer = {"stop_reason": "end_turn", "content": [{"type": "text", "text": "Done."}]}
        client = ScriptedClient([answer])
        return AgentLoop(client, model="claude-sonnet-4-6", budget=Budget(max_steps=2),
                         observers=observers, name="global")

    anyio.run(loop().run, "go", backend=backend)
    seen["imported_untraced"] = "boundloop.otel._run" in sys.modules
    seen["sdk_untraced"] = "opentelemetry.sdk" in sys.modules

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    traced = anyio.run(loop().run, "go", backend=backend)
    seen["traced"] = [span.name for span in exporter.get_finished_spans()]
    seen["trace_id_matches"] = traced.state.trace_id == format(
        exporter.get_finished_spans()[-1].context.trace_id, "032x")
    exporter.clear()
    anyio.run(loop(Observers(metrics=None, tracing=None)).run, "go", backend=backend)
    seen["off"] = [span.name for span in exporter.get_finished_spans()]
    print(json.dumps(seen))
    """
)


def test_the_global_provider_and_the_cost_of_none(anyio_backend: str) -> None:
    """In a fresh process: importing boundloop and an untraced run load none of the tracing code;
    once the application sets a global provider, runs are traced to it; None turns it off."""
    done = subprocess.run(
        [sys.executable, "-c", GLOBAL, anyio_backend], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "imported_on_import": False,
        "otel_on_import": False,
        "imported_untraced": False,
        "sdk_untraced": False,
        "traced": ["chat claude-sonnet-4-6", "invoke_agent global"],
        "trace_id_matches": True,
        "off": [],
    }


def test_the_settings_are_checked() -> None:
    """A provider must have get_tracer; trace_content is a bool."""
    client = ScriptedClient([text("Done.")])
    with pytest.raises(ConfigurationError, match=r"TraceSettings\.provider must be"):
        AgentLoop(
            client,
            model=MODEL,
            budget=Budget(max_steps=2),
            observers=Observers(tracing=TraceSettings(provider="otlp")),  # type: ignore[arg-type]
        )
    with pytest.raises(ConfigurationError, match=r"TraceSettings\.content must be"):
        AgentLoop(
            client,
            model=MODEL,
            budget=Budget(max_steps=2),
            observers=Observers(tracing=TraceSettings(content="yes")),  # type: ignore[arg-type]
        )
