"""The `chat {model}` span of each model call: always boundloop's, the anthropic SDK's span its child;
the request's attributes (the clamped `max_tokens` sent, the settings, the server), reasoning
tokens, finish reasons on the run span, and server tool calls as the conventions' parts.

The real `AsyncAnthropic` talks to the fake Messages API (tests/fake_api.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from boundloop import AgentLoop, Budget, Observers, ScriptedClient, StopReason, tool
from boundloop.otel import TraceSettings, request_attributes, server_attributes
from tests.fake_api import MODEL, Body, FakeAPI, Hang, message, text_block, tool_use_block
from tests.helpers import text
from tests.otel.spans import finished, named, only

SDK_SPAN = "anthropic.messages.create"


@tool
async def read_order(order_id: str) -> str:
    """Read one order by id."""
    return f"{order_id}: delivered"


def two_calls() -> list[Body]:
    return [
        Body(json=message([tool_use_block("toolu_01", "read_order", {"order_id": "O-1"})], "tool_use", n=1)),
        Body(json=message([text_block("Delivered.")], n=2)),
    ]


def sdk_loop(api: FakeAPI, provider: TracerProvider, sdk_option: object, **options: Any) -> AgentLoop:
    settings: dict[str, Any] = {
        "model": MODEL,
        "tools": [read_order],
        "budget": Budget(max_steps=4),
        "observers": Observers(metrics=None, tracing=TraceSettings(provider=provider)),
    }
    client = api.client().with_options(open_telemetry=sdk_option)  # type: ignore[arg-type]  # the SDK's option
    return AgentLoop(client, **(settings | options))


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.mark.parametrize(
    "sdk_traces", [True, False], ids=["sdk traces to the run's provider", "sdk traces off"]
)
async def test_the_chat_span_is_boundloops_and_the_sdks_span_its_child(
    provider: TracerProvider, exporter: InMemorySpanExporter, sdk_traces: bool
) -> None:
    """One `chat {model}` span per call, a child of the run span, whether or not the SDK traces
    to the same provider; the SDK's own span (when it traces) is a child of the call's chat span.
    Before, boundloop made no chat span when the SDK traced to the run's provider."""
    api = FakeAPI(two_calls())
    option = {"tracer_provider": provider} if sdk_traces else False
    result = await sdk_loop(api, provider, option).run("Check O-1.")
    assert result.stop_reason is StopReason.COMPLETED
    spans = finished(exporter)
    run = only(spans, "invoke_agent")
    chats = named(spans, "chat ")
    assert [span.name for span in chats] == [f"chat {MODEL}"] * len(api.requests) == [f"chat {MODEL}"] * 2
    assert run.context is not None
    for chat in chats:
        assert chat.parent is not None
        assert chat.parent.span_id == run.context.span_id
        assert attributes(chat)["server.address"] == "fake-anthropic.invalid"
        assert attributes(chat)["server.port"] == 80  # the scheme's: the URL names none
    sdk_spans = named(spans, SDK_SPAN)
    if not sdk_traces:
        assert sdk_spans == []
        return
    assert len(sdk_spans) == 2
    for sdk_span, chat in zip(sdk_spans, chats, strict=True):
        assert chat.context is not None
        assert sdk_span.parent is not None
        assert sdk_span.parent.span_id == chat.context.span_id
        assert (chat.start_time or 0) <= (sdk_span.start_time or 0)
        assert (sdk_span.end_time or 0) <= (chat.end_time or 0)


async def test_the_chat_span_has_the_max_tokens_sent_after_the_clamp(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A token budget clamps `max_tokens`: the chat span has the value each request sent."""
    api = FakeAPI(two_calls())
    loop = sdk_loop(api, provider, False, budget=Budget(max_steps=4, max_total_tokens=3000))
    await loop.run("Check O-1.")
    chats = named(finished(exporter), "chat ")
    sent = [request["max_tokens"] for request in api.requests]
    assert [attributes(chat)["gen_ai.request.max_tokens"] for chat in chats] == sent
    assert all(value < 4096 for value in sent)  # clamped below the loop's max_tokens
    run = only(finished(exporter), "invoke_agent")
    assert attributes(run)["gen_ai.request.max_tokens"] == 4096  # the loop's setting


async def test_reasoning_tokens_and_the_last_finish_reason(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """Thinking tokens the usage reports are `gen_ai.usage.reasoning.output_tokens` (the run's
    summed); the run span has the last response's finish reason."""
    thinking = {"type": "thinking", "thinking": "Look it up.", "signature": "c2ln"}
    first = message([thinking, tool_use_block("toolu_01", "read_order", {"order_id": "O-1"})], "tool_use")
    first["usage"]["output_tokens_details"] = {"thinking_tokens": 4}
    last = message([text_block("Delivered.")], "end_turn", n=2)
    last["usage"]["output_tokens_details"] = {"thinking_tokens": 3}
    api = FakeAPI([Body(json=first), Body(json=last)])
    await sdk_loop(api, provider, False).run("Check O-1.")
    spans = finished(exporter)
    chats = named(spans, "chat ")
    assert [attributes(chat)["gen_ai.usage.reasoning.output_tokens"] for chat in chats] == [4, 3]
    assert [attributes(chat)["gen_ai.response.finish_reasons"] for chat in chats] == [
        ("tool_use",),
        ("end_turn",),
    ]
    assert [attributes(chat)["gen_ai.response.id"] for chat in chats] == ["msg_0001", "msg_0002"]
    assert [attributes(chat)["gen_ai.response.model"] for chat in chats] == [MODEL, MODEL]
    run = only(spans, "invoke_agent")
    assert attributes(run)["gen_ai.usage.reasoning.output_tokens"] == 7
    assert attributes(run)["gen_ai.response.finish_reasons"] == ("end_turn",)


async def test_no_reasoning_tokens_when_the_usage_reports_none(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """ScriptedClient: no usage breakdown, no reasoning attribute; no server to name either."""
    loop = AgentLoop(
        ScriptedClient([text("Done.")]),
        model=MODEL,
        observers=Observers(metrics=None, tracing=TraceSettings(provider=provider)),
        budget=Budget(max_steps=2),
    )
    await loop.run("Go.")
    spans = finished(exporter)
    chat = only(spans, "chat ")
    for key in ("gen_ai.usage.reasoning.output_tokens", "server.address", "server.port"):
        assert key not in attributes(chat)
        assert key not in attributes(only(spans, "invoke_agent"))
    assert attributes(chat)["gen_ai.response.finish_reasons"] == ("end_turn",)


async def test_server_tool_calls_are_server_tool_call_parts(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """With trace_content: a `server_tool_use` block is a `server_tool_call` part, its
    `web_search_tool_result` a `server_tool_call_response` part; no `finish_reason` (deprecated)."""
    search_input = {"query": "order O-1 carrier"}
    results = [
        {
            "type": "web_search_result",
            "url": "https://example.com",
            "title": "Carrier",
            "encrypted_content": "e",
        }
    ]
    content = [
        {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": search_input},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": results},
        text_block("Delivered."),
    ]
    api = FakeAPI([Body(json=message(content, "end_turn"))])
    await sdk_loop(
        api,
        provider,
        False,
        observers=Observers(metrics=None, tracing=TraceSettings(provider=provider, content=True)),
    ).run("Where is O-1?")
    chat = only(finished(exporter), "chat ")
    [output] = json.loads(attributes(chat)["gen_ai.output.messages"])
    assert "finish_reason" not in output
    call, response, answer = output["parts"]
    assert call == {
        "type": "server_tool_call",
        "id": "srvtoolu_01",
        "name": "web_search",
        "server_tool_call": {"type": "web_search", "input": search_input},
    }
    assert response["type"] == "server_tool_call_response"
    assert response["id"] == "srvtoolu_01"
    assert response["server_tool_call_response"]["type"] == "web_search_tool_result"
    assert response["server_tool_call_response"]["content"][0]["url"] == "https://example.com"
    assert answer == {"type": "text", "content": "Delivered."}


async def test_a_model_call_cut_by_the_deadline_ends_its_chat_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """The run's deadline cancels a call that never answers: its span ends with the run, no error."""
    api = FakeAPI([Hang()])
    result = await sdk_loop(api, provider, False, budget=Budget(max_steps=2, timeout_s=0.2)).run("Go.")
    assert result.stop_reason is StopReason.TIMEOUT
    spans = finished(exporter)
    chat = only(spans, "chat ")
    assert chat.status.status_code is StatusCode.UNSET
    assert chat.end_time is not None
    assert attributes(chat)["gen_ai.request.max_tokens"] == api.requests[0]["max_tokens"]


def test_request_attributes_of_a_request_dict() -> None:
    """The settings the conventions name, from the request's keys (`extra_body` too); wrong types dropped."""
    request: dict[str, object] = {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": [],
        "stop_sequences": ["\n\nHuman:", "END"],
        "temperature": 0,
        "top_k": 40,
        "service_tier": "auto",
        "output_config": {"format": {"type": "json_schema", "schema": {}}},
        "stream": True,
        "extra_body": {"top_p": 0.9, "temperature": 0.5},
    }
    assert request_attributes(request) == {
        "gen_ai.request.model": MODEL,
        "gen_ai.request.max_tokens": 1024,
        "gen_ai.request.stop_sequences": ["\n\nHuman:", "END"],
        "gen_ai.request.temperature": 0.5,  # extra_body is merged into the body last
        "gen_ai.request.top_p": 0.9,
        "gen_ai.request.top_k": 40.0,
        "gen_ai.request.stream": True,
        "gen_ai.output.type": "json",
        "anthropic.request.service_tier": "auto",
    }
    wrong: dict[str, object] = {
        "model": 3,
        "max_tokens": True,
        "stop_sequences": "END",
        "temperature": "hot",
        "top_p": None,
        "stream": False,
        "output_config": {"effort": "high"},
        "extra_body": ["not", "a", "mapping"],
    }
    assert request_attributes(wrong) == {}
    assert request_attributes({"stop_sequences": ["a", 1]}) == {}


def test_server_attributes_of_a_client() -> None:
    """An SDK client's base_url names the server (its port, or the scheme's); other clients none."""
    assert server_attributes(FakeAPI().client()) == {
        "server.address": "fake-anthropic.invalid",
        "server.port": 80,
    }
    sdk = FakeAPI().client().with_options(base_url="https://gateway.example:8443/anthropic")
    assert server_attributes(sdk) == {"server.address": "gateway.example", "server.port": 8443}
    default = FakeAPI().client().with_options(base_url="https://api.anthropic.com")
    assert server_attributes(default) == {"server.address": "api.anthropic.com", "server.port": 443}
    assert server_attributes(ScriptedClient([text("-")])) == {}
