"""Promises that hold under hostile input: one validated boundary for what the model sends,
every tool outcome a result, inputs isolated, secrets kept out of what is recorded."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pydantic
import pytest
from prometheus_client import CollectorRegistry

import boundloop
from boundloop import (
    AgentLoop,
    Budget,
    MemoryStore,
    Observers,
    Policy,
    ScriptedClient,
    StopReason,
    Tool,
    tool,
)
from boundloop.events import Proposal, ToolResult, Transition, redact_strings
from boundloop.redaction import Redaction, Redactor
from boundloop.transcript import transcript_errors
from tests.helpers import (
    ScriptedTransport,
    api_message,
    assert_valid_transcript,
    scripted_loop,
    text,
    tool_use,
)

JSON = dict[str, Any]


ran: list[JSON] = []


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    ran.append({"key": key})
    return f"value-{key}"


def body(**fields: Any) -> httpx2.Response:
    """A 200 response whose body is a Message with these fields replaced, valid or not."""
    return httpx2.Response(200, json={**api_message({"stop_reason": "end_turn", "content": []}), **fields})


def nested(depth: int) -> JSON:
    value: JSON = {"leaf": 1}
    for _ in range(depth):
        value = {"deeper": value}
    return value


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "a"}}


@pytest.mark.parametrize(
    ("response", "fault"),
    [
        pytest.param(body(content="hello"), "content is str, not a list", id="content-not-a-list"),
        pytest.param(
            body(content=[{"type": "text", "text": None}]), "text block without text", id="null-text"
        ),
        pytest.param(
            body(stop_reason="tool_use", content=[{**TOOL_USE, "name": None}]),
            "has no name",
            id="tool-use-no-name",
        ),
        pytest.param(
            body(stop_reason="tool_use", content=[{k: v for k, v in TOOL_USE.items() if k != "id"}]),
            "tool_use without an id",
            id="tool-use-no-id",
        ),
        pytest.param(
            body(stop_reason="tool_use", content=[TOOL_USE, {**TOOL_USE, "input": {"key": "b"}}]),
            "repeats the tool_use id 'toolu_1'",
            id="duplicate-ids",
        ),
        pytest.param(body(usage=None), "usage is missing", id="null-usage"),
        pytest.param(
            httpx2.Response(
                200,
                json={
                    k: v
                    for k, v in api_message({"stop_reason": "end_turn", "content": []}).items()
                    if k != "usage"
                },
            ),
            "usage is missing",
            id="no-usage",
        ),
        pytest.param(
            body(usage={"input_tokens": -5, "output_tokens": 1}), "usage.input_tokens is -5", id="negative"
        ),
        pytest.param(body(stop_reason=7), "stop_reason is int, not a string", id="stop-reason-not-str"),
        pytest.param(body(stop_reason=None), "stop_reason is missing (null)", id="stop-reason-null"),
        pytest.param(
            body(stop_reason="tool_use", content=[{**TOOL_USE, "input": nested(300)}]),
            "nests deeper than 32 levels",
            id="deep-input",
        ),
        pytest.param(
            body(
                stop_reason="tool_use",
                content=[{**TOOL_USE, "input": {"key": "a", "x": list(range(20_000))}}],
            ),
            "holds more than 10000 values",
            id="huge-input",
        ),
    ],
)
async def test_a_200_response_that_is_not_a_valid_message_fails_the_run_clearly(
    response: httpx2.Response, fault: str
) -> None:
    """A malformed body through the real SDK ends the run as failed, the fault in state.errors, the
    state kept, no tool run, the transcript valid — never a raw exception from run()."""
    ran.clear()
    store = MemoryStore()
    transport = ScriptedTransport([response])
    loop = AgentLoop(
        transport.client(),
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
        store=store,
    )
    result = await loop.run("goal", task_id="t")
    assert result.stop_reason is StopReason.FAILED
    assert fault in (result.state.stop_detail or "")
    assert result.state.errors[-1].kind == "model_response"
    assert fault in result.state.errors[-1].message
    assert ran == []
    assert_valid_transcript(result.messages)
    assert await store.load("t") is not None


async def test_a_client_that_raises_something_odd_fails_the_run() -> None:
    """Whatever else the client raises ends the run as failed, recorded, not as a raw exception."""

    def explode(request: Any) -> JSON:
        raise RecursionError("maximum recursion depth exceeded while decoding")

    loop = AgentLoop(
        ScriptedClient([explode]),
        model="claude-sonnet-4-6",
        budget=Budget(max_steps=2),
        observers=Observers(metrics=None),
    )
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.FAILED
    assert result.state.errors[-1].type == "RecursionError"


def test_transcript_errors_reject_duplicate_and_missing_ids() -> None:
    """The transcript check refuses an id answered twice and a tool_use without an id."""
    twice: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [TOOL_USE]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
            ],
        },
    ]
    assert transcript_errors(twice)
    no_id: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{k: v for k, v in TOOL_USE.items() if k != "id"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": None, "content": "a"}]},
    ]
    assert transcript_errors(no_id)


async def test_a_handler_cannot_rewrite_the_recorded_input() -> None:
    """A handler mutating its nested input changes neither the transcript nor the observation."""

    def mutate(order: dict[str, Any]) -> str:
        order["items"].append("injected")
        order["id"] = "changed"
        return "done"

    schema = {"type": "object", "properties": {"order": {"type": "object"}}, "required": ["order"]}
    sneaky = Tool(name="sneaky", description="Mutates its input.", input_schema=schema, handler=mutate)
    original = {"order": {"id": "O-1", "items": ["a"]}}
    client = ScriptedClient([tool_use(("sneaky", json.loads(json.dumps(original)))), text("ok")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[sneaky],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
    )
    result = await loop.run("goal")
    assert result.state.observations[0].input == original
    assert result.state.responses[0].content[0].input == original  # type: ignore[union-attr]
    assert client.requests[1]["messages"][1]["content"][0]["input"] == original


class Opaque:
    """Not JSON."""


class Holder(pydantic.BaseModel):
    """A pydantic model holding something pydantic cannot serialise."""

    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    thing: Opaque


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(
            [{"type": "text", "text": "ok"}, {"type": "image", "source": b"\x89PNG"}], id="blocks-with-bytes"
        ),
        pytest.param({"when": Opaque()}, id="dict-with-an-object"),
        pytest.param(Holder(thing=Opaque()), id="model-with-an-unserialisable-field"),
    ],
)
async def test_any_tool_return_value_becomes_a_result(value: object) -> None:
    """A value that is not text, JSON or content blocks is an is_error result, not a crash."""

    @tool
    async def odd(key: str) -> object:
        """Returns something odd."""
        return value

    client = ScriptedClient([tool_use(("odd", {"key": "a"})), text("ok")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[odd],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
    )
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.state.observations[0].outcome == "error"
    assert "which is not text, JSON or content blocks" in str(result.state.observations[0].content)
    assert_valid_transcript(result.messages)
    json.loads(result.state.to_json())


# -- budgets are ceilings ----------------------------------------------------------------


async def test_no_batch_runs_once_the_response_passes_the_token_budget() -> None:
    """A response whose usage already passes max_total_tokens has its tool calls answered, not run."""
    ran.clear()
    client = ScriptedClient([tool_use(("lookup", {"key": "a"}), input_tokens=400, output_tokens=200)])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=4, max_total_tokens=500),
        observers=Observers(metrics=None),
        max_tokens=1000,
    )
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.TOKEN_BUDGET
    assert ran == []
    assert result.state.tool_calls == 0
    assert_valid_transcript(result.messages)


async def test_each_request_asks_for_no_more_output_than_the_budget_has_left() -> None:
    """max_tokens is clamped to the tokens left after the next call's estimated input."""
    client = ScriptedClient(
        [tool_use(("lookup", {"key": "a"}), input_tokens=300, output_tokens=100), text("done")]
    )
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=4, max_total_tokens=1000),
        observers=Observers(metrics=None),
        max_tokens=4096,
    )
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.COMPLETED
    assert client.requests[0]["max_tokens"] == 1000  # nothing used, no estimate yet
    assert client.requests[1]["max_tokens"] == 1000 - 400 - 400  # used 400; the next input is >= 400


async def test_no_final_answer_once_tokens_are_spent() -> None:
    """on_exhausted="final_answer" at max_steps makes no call when the tokens are spent too."""
    client = ScriptedClient([tool_use(("lookup", {"key": "a"}), input_tokens=600, output_tokens=100)])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=1, max_total_tokens=1000, on_exhausted="final_answer"),
        observers=Observers(metrics=None),
    )
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.MAX_STEPS
    assert len(client.requests) == 1
    assert result.answer is None


# -- every tool outcome is a result; tool_failure ----------------------------------------


async def test_on_tool_error_stop_ends_the_run_with_tool_failure() -> None:
    """A tool failing after its retries stops the run as tool_failure, every call answered."""

    @tool
    async def broken(key: str) -> str:
        """Always fails."""
        raise RuntimeError(f"backend down for {key}")

    client = ScriptedClient([tool_use(("broken", {"key": "a"}), ("lookup", {"key": "b"})), text("unused")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[broken, lookup],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
        policy=Policy(on_tool_error="stop"),
    )
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.TOOL_FAILURE
    assert result.state.stop_detail == "broken failed: RuntimeError: backend down for a"
    assert [o.outcome for o in result.state.observations] == ["error", "ok"]
    assert len(client.requests) == 1
    assert_valid_transcript(result.messages)
    assert [(e.source, e.dest, e.guard) for e in result.events if isinstance(e, Transition)][-1] == (
        "observe",
        "stopped",
        "tool_failed",
    )
    with pytest.raises(boundloop.ToolFailed):
        result.unwrap()


async def test_identical_calls_in_one_batch_run_once_and_count_as_repeats() -> None:
    """Two identical calls in one response run once; the copy is answered from it and counted."""
    ran.clear()
    client = ScriptedClient(
        [tool_use(("lookup", {"key": "a"}, "toolu_1"), ("lookup", {"key": "a"}, "toolu_2")), text("done")]
    )
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
    )
    result = await loop.run("goal")
    assert ran == [{"key": "a"}]
    assert [o.outcome for o in result.state.observations] == ["ok", "repeated"]
    assert result.state.repeated_calls == 1
    assert result.state.tool_calls == 1
    assert_valid_transcript(result.messages)


async def test_repeats_inside_one_batch_open_the_breaker() -> None:
    """max_repeated_calls counts copies within a batch too."""
    client = ScriptedClient(
        [tool_use(*[("lookup", {"key": "a"}, f"toolu_{i}") for i in range(3)]), text("x")]
    )
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=3, max_repeated_calls=1),
        observers=Observers(metrics=None),
    )
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.NEEDS_HUMAN
    assert result.state.stop_detail == "2 repeated tool calls"


# -- nothing leaked ------------------------------------------------------------------------

SECRET = "sk-ant-api03-AbCdEf0123456789xyzXYZ"


async def test_a_secret_in_a_tool_name_reaches_no_recorded_artefact(tmp_path: Any) -> None:
    """An API key the model puts in a tool name is redacted in every event and in the errors."""
    client = ScriptedClient([tool_use((f"leak_{SECRET}", {"key": "a"})), text(f"the key is {SECRET}")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
    )
    result = await loop.run("goal")
    recorded = json.dumps([event.to_dict() for event in result.events]) + json.dumps(
        result.state.to_dict()["errors"]
    )
    assert SECRET not in recorded
    assert "[REDACTED]" in recorded
    assert SECRET not in str([event.tools for event in result.events if isinstance(event, Proposal)])
    assert SECRET not in (result.state.stop_detail or "")


@pytest.mark.parametrize(
    "secret",
    [
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_0123456789abcdefghijABCDEFGHIJ",
        "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
        "AIzaSyA-0123456789abcdefghijklmnopqrstu",
        "xoxb-1234567890-abcdefghij",
        "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
    ],
)
async def test_the_default_patterns_cover_common_cloud_keys_and_bearer_tokens(secret: str) -> None:
    """A tool error carrying a common cloud key or token never reaches the trace or the errors."""

    @tool
    async def leaky(key: str) -> str:
        """Fails with a secret in its message."""
        raise RuntimeError(f"auth failed: {secret}")

    client = ScriptedClient([tool_use(("leaky", {"key": "a"})), text("done")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[leaky],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
    )
    result = await loop.run("goal")
    recorded = json.dumps([event.to_dict() for event in result.events]) + json.dumps(
        result.state.to_dict()["errors"]
    )
    assert secret not in recorded
    assert "auth failed: [REDACTED]" in recorded  # the message is recorded, redacted


async def test_your_patterns_and_redacted_checkpoints() -> None:
    """redact_patterns adds your secrets; redact_checkpoints keeps them out of the stored transcript."""
    store = MemoryStore()
    client = ScriptedClient([text("customer PIN-4242-9999 is verified")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        budget=Budget(max_steps=2),
        observers=Observers(metrics=None),
        store=store,
        redaction=Redaction(patterns=[r"PIN-\d{4}-\d{4}"], checkpoints=True),
    )
    result = await loop.run("goal", task_id="t")
    assert result.answer == "customer PIN-4242-9999 is verified"  # the caller gets the answer
    stored = await store.load("t")
    assert stored is not None
    assert "PIN-4242-9999" not in stored.to_json()
    assert "customer [REDACTED] is verified" in stored.to_json()
    events = json.dumps([event.to_dict() for event in result.events])
    assert "PIN-4242-9999" not in events
    assert "customer [REDACTED] is verified" in events  # the answer is recorded, redacted


TOKEN = "eyJhbGciOiJIUzI1NiJ9.payload.sig"
HEADERS = {f"Authorization: Bearer {TOKEN}": 1, f"x-api-key {SECRET}": 2, "Bearer zzzzzzzz1": 3}
"""Secrets in the keys of a tool input; the last two both redact to one text, kept apart."""


async def test_a_secret_in_a_key_of_a_tool_input_reaches_no_trace_checkpoint_or_repeat_history(
    tmp_path: Any,
) -> None:
    """A secret the model puts in an object key is redacted in the trace and the redacted
    checkpoint (transcript, observations, pending approvals, repeat history), and the repeat
    history still finds the identical call after a resume from that checkpoint."""
    fetched: list[JSON] = []

    @tool
    async def fetch(headers: dict[str, int]) -> str:
        """Fetch with headers."""
        fetched.append(headers)
        return "fetched"

    @tool(requires_approval=True)
    async def send(headers: dict[str, int]) -> str:
        """Send with headers."""
        return "sent"

    store = MemoryStore()
    settings: JSON = {
        "model": "claude-sonnet-4-6",
        "tools": [fetch, send],
        "budget": Budget(max_steps=6),
        "observers": Observers(metrics=None),
        "store": store,
        "redaction": Redaction(checkpoints=True),
    }
    script = [tool_use(("fetch", {"headers": HEADERS})), tool_use(("send", {"headers": HEADERS}, "toolu_s"))]
    first = await AgentLoop(ScriptedClient(script), **settings).run("goal", task_id="k")
    assert first.stop_reason is StopReason.NEEDS_HUMAN
    trace_file = tmp_path / "trace.jsonl"
    await anyio.to_thread.run_sync(first.write_events, trace_file)
    written = await anyio.to_thread.run_sync(trace_file.read_text)
    stored = await store.load("k")
    assert stored is not None
    for recorded in (written, stored.to_json(), json.dumps(list(first.state.succeeded))):
        assert TOKEN not in recorded
        assert SECRET not in recorded
        assert "zzzzzzzz1" not in recorded
    assert [o.input for o in stored.observations] == [
        {"headers": {"Authorization: [REDACTED]": 1, "x-api-key [REDACTED]": 2, "[REDACTED]": 3}}
    ]
    assert stored.pending_approvals[0].input == stored.observations[0].input
    assert HEADERS == {f"Authorization: Bearer {TOKEN}": 1, f"x-api-key {SECRET}": 2, "Bearer zzzzzzzz1": 3}

    again = [tool_use(("fetch", {"headers": HEADERS}, "toolu_again")), text("done")]
    later = await AgentLoop(ScriptedClient(again), **settings).resume("k", approvals={"toolu_s": False})
    assert later.stop_reason is StopReason.COMPLETED
    assert [o.outcome for o in later.state.observations if o.tool == "fetch"] == ["ok", "repeated"]
    assert fetched == [HEADERS]  # run once: the repeat was answered from the history


async def test_a_redacted_checkpoint_keeps_its_own_field_names_whatever_your_patterns_match() -> None:
    """A pattern of yours that matches a field name (`input_tokens`) redacts the keys of tool
    inputs and metadata, never the state's fields: the checkpoint keeps the run's usage."""
    store = MemoryStore()
    client = ScriptedClient([tool_use(("lookup", {"key": "a"})), text("done")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
        store=store,
        redaction=Redaction(patterns=[r"token"], checkpoints=True),
    )
    result = await loop.run("goal", task_id="u", metadata={"token": "x"})
    stored = await store.load("u")
    assert stored is not None
    assert stored.usage.input_tokens == result.usage.input_tokens == 20
    assert stored.metadata == {"[REDACTED]": "x"}


def test_keys_that_redact_to_the_same_text_stay_apart() -> None:
    """Two secrets as keys of one object both stay, the second with a suffix."""
    redacted = redact_strings({"Bearer aaaaaaaa1": 1, "Bearer bbbbbbbb2": 2, "[REDACTED]#2": 3}, Redactor())
    assert redacted == {"[REDACTED]": 1, "[REDACTED]#2": 2, "[REDACTED]#2#2": 3}


def test_a_redact_pattern_that_does_not_compile_is_a_configuration_error() -> None:
    """Bad patterns fail at construction."""
    with pytest.raises(boundloop.ConfigurationError, match="does not compile"):
        AgentLoop(
            ScriptedClient([]),
            model="m",
            budget=Budget(max_steps=1),
            redaction=Redaction(patterns=["(unclosed"]),
        )


# -- a malformed tool result -------------------------------------------------------------


async def test_a_result_that_breaks_the_return_annotation_is_invalid_and_never_evidence(
    registry: CollectorRegistry,
) -> None:
    """A @tool returning what its annotation does not allow is answered as invalid_result, counted
    as such in the trace and the metrics, and does not satisfy required evidence."""

    @tool
    async def read_stock(sku: str) -> dict[str, int]:
        """Units in stock by warehouse."""
        return {"berlin": "many"}  # type: ignore[dict-item]

    client = ScriptedClient([tool_use(("read_stock", {"sku": "S-1"})), text("in stock")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[read_stock],
        budget=Budget(max_steps=3),
        policy=boundloop.Policy(required_evidence={"read_stock"}),
        observers=Observers(metrics=boundloop.LoopMetrics(registry=registry)),
        name="stock",
    )
    result = await loop.run("goal")
    observation = result.state.observations[0]
    assert observation.outcome == "invalid_result"
    assert "berlin" in str(observation.content)
    assert result.stop_reason is StopReason.EVIDENCE_MISSING
    assert [e.outcome for e in result.events if isinstance(e, ToolResult)] == ["invalid_result"]
    labels = {"loop": "stock", "tool": "read_stock", "outcome": "invalid_result"}
    assert registry.get_sample_value("boundloop_tool_calls_total", labels) == 1
    assert_valid_transcript(result.messages)


async def test_an_output_schema_catches_a_malformed_result() -> None:
    """Tool(output_schema=...) checks the result's JSON and names the field."""

    def status(order_id: str) -> dict[str, str]:
        return {"order": order_id}

    schema = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    checked = Tool(
        name="status",
        description="Order status.",
        input_schema=schema,
        handler=status,
        output_schema={"type": "object", "required": ["status"]},
    )
    client = ScriptedClient([tool_use(("status", {"order_id": "O-1"})), text("ok")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[checked],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
    )
    result = await loop.run("goal")
    assert result.state.observations[0].outcome == "invalid_result"
    assert "'status' is a required property" in str(result.state.observations[0].content)


def test_an_invalid_output_schema_is_a_configuration_error() -> None:
    """A declared output that is not a JSON schema fails at construction."""
    with pytest.raises(boundloop.ConfigurationError, match="invalid output_schema"):
        Tool(
            name="t",
            description="d",
            input_schema={"type": "object"},
            handler=lambda: None,
            output_schema={"type": "nonsense"},
        )


class CountingTransport:
    """The real SDK over a transport that answers count_tokens with a fixed count and serves messages."""

    def __init__(self, counted: int, bodies: list[JSON]) -> None:
        self.counted = counted
        self.bodies = bodies
        self.paths: list[str] = []
        self.max_tokens: list[int] = []

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.paths.append(request.url.path)
        if request.url.path == "/v1/messages/count_tokens":
            return httpx2.Response(200, json={"input_tokens": self.counted})
        self.max_tokens.append(json.loads(request.content)["max_tokens"])
        return httpx2.Response(200, json=api_message(self.bodies.pop(0)))


@pytest.mark.parametrize(
    ("counted", "expected_stop", "expected_max_tokens"),
    [
        pytest.param(900, StopReason.COMPLETED, [100], id="clamped-to-what-is-left"),
        pytest.param(1000, StopReason.TOKEN_BUDGET, [], id="no-call-when-the-input-alone-fills-the-budget"),
    ],
)
async def test_count_tokens_checks_the_exact_input_before_the_first_call(
    counted: int, expected_stop: StopReason, expected_max_tokens: list[int]
) -> None:
    """With count_tokens=True the first call's input is counted, not guessed as 0."""
    import anthropic

    transport = CountingTransport(counted, [text("done")])
    client = anthropic.AsyncAnthropic(
        api_key="sk-ant-test-0000000000",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(transport.handler)),
    )
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        budget=Budget(max_steps=2, max_total_tokens=1000, count_tokens=True),
        observers=Observers(metrics=None),
    )
    result = await loop.run("goal")
    assert result.stop_reason is expected_stop
    assert transport.max_tokens == expected_max_tokens
    assert transport.paths[0] == "/v1/messages/count_tokens"


def test_count_tokens_needs_a_client_that_counts() -> None:
    """The scripted client cannot count tokens: a construction error, not a mid-run failure."""
    with pytest.raises(boundloop.ConfigurationError, match="count_tokens=True needs a client"):
        AgentLoop(ScriptedClient([]), model="m", budget=Budget(max_steps=1, count_tokens=True))


# -- the exceptions run() lets out ---------------------------------------------------------


class Broken(Exception):
    """Raised by a callback of the caller's."""


def _raise(*_: object) -> Any:
    raise Broken("callback failed with sk-ant-api03-SECRETSECRETSECRET")


class FailingStore:
    """A store whose second save fails (the one before the first tool batch)."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.saves = 0

    async def save(self, state: Any) -> None:
        self.saves += 1
        if self.saves == 2:
            raise OSError("disk full")
        await self.inner.save(state)

    async def load(self, task_id: str) -> Any:
        return await self.inner.load(task_id)

    async def list(self, *, status: Any = None, stop_reason: str | None = None) -> Any:
        return await self.inner.list(status=status, stop_reason=stop_reason)

    async def delete(self, task_id: str) -> bool:
        return await self.inner.delete(task_id)


@pytest.mark.parametrize(
    "where",
    ["success", "approve", "on_event", "signal_handler", "store"],
)
async def test_a_failing_callback_of_yours_fails_the_run_it_does_not_escape(where: str) -> None:
    """Your callback raising ends the run as failed, recorded and redacted, and run() returns."""
    options: dict[str, Any] = {}
    script: list[JSON] = [tool_use(("lookup", {"key": "a"})), text("done")]
    if where == "success":
        options["policy"] = boundloop.Policy(success=_raise)
    elif where == "approve":
        options["policy"] = boundloop.Policy(requires_approval={"lookup"}, approve=_async_raise)
    elif where == "on_event":
        options["observers"] = Observers(metrics=None, on_event=_raise)
    elif where == "signal_handler":
        options["policy"] = boundloop.Policy(signal_handlers={"end_turn": _raise})
    else:
        options["store"] = FailingStore()
    result = await scripted_loop(script, [lookup], **options).run("goal")
    assert result.stop_reason is StopReason.FAILED
    error = next(e for e in result.state.errors if e.kind == "exception")
    assert error.type in ("Broken", "OSError")
    assert "SECRET" not in error.message
    assert_valid_transcript(result.messages)


async def _async_raise(*_: object) -> bool:
    raise Broken("approver down")
