"""The spans of a run: the tree, the GenAI attributes, failures, and message content only on opt-in."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import anyio
import httpx2
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from boundloop import AgentLoop, Budget, LoopState, Observers, Policy, ScriptedClient, StopReason, tool
from boundloop.otel import TraceSettings
from boundloop.redaction import Redaction
from boundloop.testing import ScriptItem
from tests.helpers import text, tool_use
from tests.otel.spans import finished, named, only

MODEL = "claude-sonnet-4-6"
SECRET = "sk-ant-api03-abcdefghijklmnop"
CONTENT_KEYS = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "boundloop.stop_detail",
    }
)


@tool
async def read_order(order_id: str) -> dict[str, str]:
    """Read one order by id."""
    await anyio.sleep(0.05)
    return {"order_id": order_id, "status": "delivered"}


@tool
async def read_customer(customer_id: str) -> dict[str, str]:
    """Read one customer by id."""
    await anyio.sleep(0.05)
    return {"customer_id": customer_id, "tier": "gold"}


@tool
async def read_payments(order_id: str) -> list[str]:
    """List the payments of an order."""
    await anyio.sleep(0.05)
    return ["pay_1"]


@tool
async def flaky(order_id: str) -> str:
    """A tool whose backend is down."""
    raise RuntimeError(f"backend down for {order_id}")


BATCH = tool_use(
    ("read_order", {"order_id": "O-1"}, "toolu_01"),
    ("read_customer", {"customer_id": "C-1"}, "toolu_02"),
    ("read_payments", {"order_id": "O-1"}, "toolu_03"),
    cache_read_input_tokens=3,
    cache_creation_input_tokens=2,
)


def traced_loop(provider: TracerProvider, script: list[ScriptItem], **options: Any) -> AgentLoop:
    settings: dict[str, Any] = {
        "model": MODEL,
        "tools": [read_order, read_customer, read_payments, flaky],
        "budget": Budget(max_steps=4),
        "observers": Observers(metrics=None, tracing=TraceSettings(provider=provider)),
        "name": "refunds",
    }
    return AgentLoop(ScriptedClient(script), **(settings | options))


def every_attribute(spans: list[ReadableSpan]) -> list[tuple[str, object]]:
    """Every attribute of every span and span event."""
    found: list[tuple[str, object]] = []
    for span in spans:
        found += list((span.attributes or {}).items())
        for event in span.events:
            found += list((event.attributes or {}).items())
    return found


async def test_a_run_with_a_parallel_batch_is_one_tree(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """invoke_agent over the run; chat and execute_tool spans its children, the batch's overlapping."""
    result = await traced_loop(provider, [BATCH, text("Delivered.")]).run("Check order O-1.")
    assert result.stop_reason is StopReason.COMPLETED
    spans = finished(exporter)
    run = only(spans, "invoke_agent")
    chats = named(spans, "chat ")
    tools = named(spans, "execute_tool ")
    assert run.name == "invoke_agent refunds"
    assert [span.name for span in chats] == [f"chat {MODEL}"] * 2
    assert sorted(span.name for span in tools) == [
        "execute_tool read_customer",
        "execute_tool read_order",
        "execute_tool read_payments",
    ]
    assert len(spans) == 6
    assert run.parent is None
    assert run.context is not None
    for child in [*chats, *tools]:
        assert child.parent is not None
        assert child.parent.span_id == run.context.span_id
        assert child.context is not None
        assert child.context.trace_id == run.context.trace_id
    starts = [span.start_time or 0 for span in tools]
    ends = [span.end_time or 0 for span in tools]
    assert max(starts) < min(ends), "the batch's calls ran at the same time"
    assert min(ends) - max(starts) >= 40_000_000  # each slept 50 ms, together
    first_chat, last_chat = sorted(chats, key=lambda span: span.start_time or 0)
    assert (first_chat.end_time or 0) <= min(starts)
    assert max(ends) <= (last_chat.start_time or 0)

    assert run.kind is SpanKind.INTERNAL
    assert dict(run.attributes or {}) | {"boundloop.path": None} == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.agent.name": "refunds",
        "gen_ai.request.model": MODEL,
        "gen_ai.request.max_tokens": 4096,
        "gen_ai.conversation.id": result.state.task_id,
        "boundloop.trace_id": result.state.trace_id,
        "boundloop.stop_reason": "completed",
        "boundloop.step": 2,
        "boundloop.tool_calls": 3,
        "boundloop.path": None,
        "gen_ai.usage.input_tokens": 10 + 3 + 2 + 10,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.usage.cache_read.input_tokens": 3,
        "gen_ai.usage.cache_creation.input_tokens": 2,
        "boundloop.cost_usd": pytest.approx(result.usage.cost_usd),
        "gen_ai.response.finish_reasons": ("end_turn",),  # the last response's
    }
    transitions = [event for event in result.events if event.kind == "transition"]
    assert list((run.attributes or {})["boundloop.path"]) == [  # type: ignore[arg-type]
        f"{event.source}->{event.dest}" for event in transitions
    ]
    assert [event.name for event in run.events] == ["transition"] * len(transitions)
    assert [dict(event.attributes or {}) for event in run.events] == [
        {
            "boundloop.source": event.source,
            "boundloop.dest": event.dest,
            "boundloop.trigger": event.trigger,
            **({"boundloop.guard": event.guard} if event.guard is not None else {}),
        }
        for event in transitions
    ]
    assert run.status.status_code is StatusCode.UNSET

    assert first_chat.kind is SpanKind.CLIENT
    assert dict(first_chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": MODEL,
        "gen_ai.request.max_tokens": 4096,
        "gen_ai.conversation.id": result.state.task_id,
        "gen_ai.response.id": result.state.responses[0].id,
        "gen_ai.response.model": "scripted",
        "gen_ai.response.finish_reasons": ("tool_use",),
        "gen_ai.usage.input_tokens": 15,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.usage.cache_read.input_tokens": 3,
        "gen_ai.usage.cache_creation.input_tokens": 2,
        "boundloop.step": 1,
    }
    order = only(tools, "execute_tool read_order")
    assert order.kind is SpanKind.INTERNAL
    assert dict(order.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "read_order",
        "gen_ai.tool.call.id": "toolu_01",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Read one order by id.",
        "boundloop.step": 1,
        "boundloop.tool.outcome": "ok",
        "boundloop.tool.attempts": 1,
    }
    assert all(span.status.status_code is StatusCode.UNSET for span in spans)
    assert not [key for key, _ in every_attribute(spans) if key == "gen_ai.system"]  # deprecated


async def test_a_tool_with_an_error_outcome_has_an_error_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A failing handler and a denied call: error.type is the outcome, the status ERROR; the run is fine."""
    script: list[ScriptItem] = [
        tool_use(("flaky", {"order_id": "O-1"}), ("read_payments", {"order_id": "O-1"})),
        text("Could not check."),
    ]
    loop = traced_loop(
        provider,
        script,
        policy=Policy(forbidden={"read_payments"}, on_forbidden="report"),
        budget=Budget(max_steps=4, max_consecutive_tool_errors=3),
    )
    result = await loop.run("Check order O-1.")
    assert result.stop_reason is StopReason.COMPLETED
    spans = finished(exporter)
    failed = only(spans, "execute_tool flaky")
    assert (failed.attributes or {})["error.type"] == "error"
    assert (failed.attributes or {})["boundloop.tool.attempts"] == 1
    assert failed.status.status_code is StatusCode.ERROR
    denied = only(spans, "execute_tool read_payments")
    assert (denied.attributes or {})["error.type"] == "denied"
    assert (denied.attributes or {})["boundloop.tool.attempts"] == 0
    assert denied.start_time == denied.end_time  # never ran
    assert denied.status.status_code is StatusCode.ERROR
    assert only(spans, "invoke_agent").status.status_code is StatusCode.UNSET


def failing_success(state: LoopState, answer: str | None) -> bool:
    raise RuntimeError("the success check is broken")


async def test_a_failed_run_records_the_exception_and_an_error_status(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A callback's exception ends the run as failed: recorded on the run span, status ERROR."""
    loop = traced_loop(provider, [text("Done.")], policy=Policy(success=failing_success))
    result = await loop.run("Check order O-1.")
    assert result.stop_reason is StopReason.FAILED
    run = only(finished(exporter), "invoke_agent")
    assert run.status.status_code is StatusCode.ERROR
    assert (run.attributes or {})["error.type"] == "RuntimeError"
    assert (run.attributes or {})["boundloop.stop_reason"] == "failed"
    [exception] = [event for event in run.events if event.name == "exception"]
    assert dict(exception.attributes or {}) == {
        "exception.type": "RuntimeError",
        "exception.message": "the success check is broken",
        "boundloop.error.kind": "exception",
    }


async def test_an_exception_leaving_run_sets_the_error_status(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """on_tool_error="raise": the tool's exception leaves run(); the run span has it and ends."""
    loop = traced_loop(
        provider, [tool_use(("flaky", {"order_id": "O-1"})), text("-")], policy=Policy(on_tool_error="raise")
    )
    with pytest.raises(RuntimeError, match="backend down"):
        await loop.run("Check order O-1.")
    run = only(finished(exporter), "invoke_agent")
    assert run.status.status_code is StatusCode.ERROR
    assert (run.attributes or {})["error.type"] == "RuntimeError"
    assert [event.name for event in run.events if event.name == "exception"] == ["exception"]


async def test_a_failed_model_call_has_an_error_chat_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """An API error: the chat span carries the status code as error.type; the run failed."""
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    error = anthropic.InternalServerError(
        "overloaded", response=httpx2.Response(500, request=request), body=None
    )
    result = await traced_loop(provider, [error]).run("Check order O-1.")
    assert result.stop_reason is StopReason.FAILED
    spans = finished(exporter)
    chat = only(spans, "chat ")
    assert (chat.attributes or {})["error.type"] == "500"
    assert chat.status.status_code is StatusCode.ERROR
    run = only(spans, "invoke_agent")
    assert (run.attributes or {})["error.type"] == "InternalServerError"
    assert run.status.status_code is StatusCode.ERROR


def content_script() -> list[ScriptItem]:
    return [
        tool_use(("read_order", {"order_id": f"O-1 {SECRET}"}, "toolu_01")),
        text(f"Delivered; the key was {SECRET}."),
    ]


async def test_no_content_without_opt_in(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """By default no span carries the goal, the transcript, tool inputs or results."""
    loop = traced_loop(provider, content_script(), system="You investigate refunds.")
    await loop.run("Check order O-1 for customer Ada Lovelace.")
    attributes = every_attribute(finished(exporter))
    assert not CONTENT_KEYS & {key for key, _ in attributes}
    values = json.dumps([str(value) for _, value in attributes])
    for private in ("Ada Lovelace", "O-1", "Delivered", "You investigate", SECRET):
        assert private not in values


async def test_content_on_opt_in_is_redacted(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """trace_content=True: the transcript, tool input and result, and answer, every secret redacted."""
    loop = traced_loop(
        provider,
        content_script(),
        system="You investigate refunds.",
        observers=Observers(metrics=None, tracing=TraceSettings(provider=provider, content=True)),
        redaction=Redaction(patterns=[r"Ada Lovelace"]),
    )
    result = await loop.run("Check order O-1 for customer Ada Lovelace.")
    spans = finished(exporter)
    values = json.dumps([str(value) for _, value in every_attribute(spans)])
    assert SECRET not in values
    assert "Ada Lovelace" not in values
    assert "[REDACTED]" in values

    called = only(spans, "execute_tool read_order")
    assert json.loads(str((called.attributes or {})["gen_ai.tool.call.arguments"])) == {
        "order_id": "O-1 [REDACTED]"
    }
    returned = json.loads(str((called.attributes or {})["gen_ai.tool.call.result"]))
    assert returned == {"order_id": "O-1 [REDACTED]", "status": "delivered"}

    first, last = sorted(named(spans, "chat "), key=lambda span: span.start_time or 0)
    assert json.loads(str((first.attributes or {})["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "Check order O-1 for customer [REDACTED]."}]}
    ]
    assert json.loads(str((first.attributes or {})["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "toolu_01",
                    "name": "read_order",
                    "arguments": {"order_id": "O-1 [REDACTED]"},
                }
            ],
        }
    ]
    history = json.loads(str((last.attributes or {})["gen_ai.input.messages"]))
    assert [message["role"] for message in history] == ["user", "assistant", "user"]
    assert history[2]["parts"][0]["type"] == "tool_call_response"
    assert json.loads(str((first.attributes or {})["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "You investigate refunds."}
    ]
    run = only(spans, "invoke_agent")
    assert json.loads(str((run.attributes or {})["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Delivered; the key was [REDACTED]."}],
        }
    ]
    assert result.answer is not None
    assert SECRET in result.answer


@tool
async def slow(order_id: str) -> str:
    """A tool that takes a second."""
    await anyio.sleep(1)
    return order_id


async def test_a_cancelled_run_ends_its_span_without_an_error(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """The caller's cancellation leaves run(): the run span still ends, as cancelled, status unset."""
    loop = traced_loop(provider, [tool_use(("slow", {"order_id": "O-1"})), text("-")], tools=[slow])
    with anyio.move_on_after(0.05):
        await loop.run("Check order O-1.")
    spans = finished(exporter)
    run = only(spans, "invoke_agent")
    assert (run.attributes or {})["boundloop.stop_reason"] == "cancelled"
    assert run.status.status_code is StatusCode.UNSET
    cancelled = only(spans, "execute_tool slow")
    assert (cancelled.attributes or {})["boundloop.tool.outcome"] == "cancelled"
    assert cancelled.status.status_code is StatusCode.UNSET
