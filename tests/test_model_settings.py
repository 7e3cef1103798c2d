"""ModelSettings: every request setting of the installed SDK, sent, routed, checked, recorded."""

from __future__ import annotations

import inspect
import json
from typing import Any

import httpx2
import pytest
from anthropic.resources.beta.messages import AsyncMessages as BetaMessages
from anthropic.resources.messages import AsyncMessages

from boundloop import (
    AgentLoop,
    Budget,
    ConfigurationError,
    MemoryStore,
    ModelSettings,
    Policy,
    ScriptedClient,
    StopReason,
    tool,
)
from boundloop._base.model_settings import EXCLUDED, LOOP_OWN
from boundloop.contract import Contract
from tests.fake_api import MODEL, Body, FakeAPI, message, text_block, tool_use_block

THINKING: Any = {"type": "enabled", "budget_tokens": 2048}


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def answer(text: str = "done") -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}


def call(name: str = "lookup", **arguments: Any) -> dict[str, Any]:
    block = {"type": "tool_use", "name": name, "input": arguments or {"key": "k"}}
    return {"content": [block], "stop_reason": "tool_use"}


def loop_of(client: Any, settings: ModelSettings | None = None, **options: Any) -> AgentLoop:
    options.setdefault("budget", Budget(max_steps=4))
    return AgentLoop(client, model=MODEL, tools=[lookup], max_tokens=8192, settings=settings, **options)


def test_every_create_parameter_is_a_setting_or_excluded() -> None:
    """A parameter of messages.create or beta.messages.create in the installed SDK is either a
    ModelSettings field, the loop's own, or excluded with a reason: a new one fails here."""
    parameters = set(inspect.signature(AsyncMessages.create).parameters)
    parameters |= set(inspect.signature(BetaMessages.create).parameters)
    fields = set(ModelSettings.model_fields)
    unaccounted = sorted(parameters - fields - LOOP_OWN - set(EXCLUDED))
    assert not unaccounted, f"neither a ModelSettings field nor excluded: {unaccounted}"
    assert fields <= parameters, f"fields the SDK does not take: {sorted(fields - parameters)}"
    assert all(reason for reason in EXCLUDED.values())
    assert not set(EXCLUDED) & fields


async def test_settings_are_sent_with_every_request_and_none_is_not_sent() -> None:
    settings = ModelSettings(
        thinking=THINKING,
        stop_sequences=["END"],
        metadata={"user_id": "u-1"},
        service_tier="standard_only",
        output_config={"effort": "low"},
        extra_body={"top_p": 0.97},
        extra_headers={"x-team": "a"},
    )
    client = ScriptedClient([call(), answer()])
    result = await loop_of(client, settings).run("go")
    assert result.stop_reason is StopReason.COMPLETED
    for request in client.requests:
        assert request["thinking"] == THINKING
        assert request["stop_sequences"] == ["END"]
        assert request["metadata"] == {"user_id": "u-1"}
        assert request["service_tier"] == "standard_only"
        assert request["output_config"] == {"effort": "low"}
        assert request["extra_body"] == {"top_p": 0.97}
        assert request["extra_headers"] == {"x-team": "a"}
        assert "speed" not in request
        assert "tool_choice" not in request
        assert "betas" not in request
    assert result.state.model_settings == settings.data()


async def test_the_real_sdk_sends_the_settings_in_the_body() -> None:
    """The regular route over HTTP: the settings are in the JSON body, extra_body merged in."""
    fake = FakeAPI([Body(json=message([text_block("hi")]))])
    settings = ModelSettings(stop_sequences=["END"], extra_body={"temperature": 0.1}, speed="fast")
    result = await loop_of(fake.client(), settings).run("go")
    assert result.stop_reason is StopReason.COMPLETED
    body = fake.requests[0]
    assert body["stop_sequences"] == ["END"]
    assert body["temperature"] == 0.1
    assert body["speed"] == "fast"


async def test_beta_settings_go_through_the_beta_client_over_http() -> None:
    """`betas` (or any setting only the beta API takes) sends the request through
    `client.beta.messages.create`, with the anthropic-beta header; its BetaMessage is read as a
    Message: the tool call runs."""
    fake = FakeAPI(
        [
            Body(json=message([tool_use_block("toolu_1", "lookup", {"key": "k"})], "tool_use")),
            Body(json=message([text_block("done")], n=2)),
        ]
    )
    seen: list[httpx2.Request] = []

    async def recording(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return await fake.handler(request)

    client = fake.client()
    client = client.with_options(http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(recording)))
    settings = ModelSettings(
        betas=["context-management-2025-06-27"],
        context_management={"edits": [{"type": "clear_tool_uses_20250919"}]},
    )
    result = await loop_of(client, settings).run("go")
    assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail
    assert [observation.outcome for observation in result.state.observations] == ["ok"]
    assert len(seen) == 2
    assert all(request.headers["anthropic-beta"] == "context-management-2025-06-27" for request in seen)
    assert fake.requests[0]["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}


async def test_the_scripted_client_records_beta_requests_with_their_betas() -> None:
    client = ScriptedClient([answer()])
    settings = ModelSettings(betas=["context-management-2025-06-27"], fallbacks="default")
    await loop_of(client, settings).run("go")
    assert client.requests[0]["betas"] == ["context-management-2025-06-27"]
    assert client.requests[0]["fallbacks"] == "default"


async def test_the_final_answer_call_forces_no_tools_whatever_the_settings_say() -> None:
    client = ScriptedClient([call(), answer("summary")])
    settings = ModelSettings(tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    loop = loop_of(client, settings, budget=Budget(max_steps=1, on_exhausted="final_answer"))
    result = await loop.run("go")
    assert client.requests[0]["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert client.requests[1]["tool_choice"] == {"type": "none"}
    assert result.answer == "summary"


async def test_a_thinking_budget_above_the_clamped_max_tokens_is_lowered() -> None:
    """The budget clamps max_tokens below the thinking budget: the request lowers the budget
    (the API refuses budget_tokens >= max_tokens), or turns thinking off under 1024."""
    client = ScriptedClient([call(), answer()])
    settings = ModelSettings(thinking={"type": "enabled", "budget_tokens": 6000})
    loop = loop_of(client, settings, budget=Budget(max_steps=4, max_total_tokens=5000))
    await loop.run("go")
    request = client.requests[0]
    assert request["thinking"]["budget_tokens"] < request["max_tokens"]
    assert request["thinking"]["budget_tokens"] >= 1024 or request["thinking"] == {"type": "disabled"}


@pytest.mark.parametrize(
    ("settings", "max_tokens", "rule"),
    [
        ({"thinking": THINKING, "tool_choice": {"type": "any"}}, 8192, "forces tool use"),
        ({"thinking": THINKING, "tool_choice": {"type": "tool", "name": "lookup"}}, 8192, "forces tool use"),
        ({"thinking": THINKING}, 2048, "max_tokens must be greater than thinking.budget_tokens"),
        ({"thinking": {"type": "enabled", "budget_tokens": 1000}}, 8192, "at least 1024"),
        ({"stop_sequences": ["END", ""]}, 8192, "empty or blank"),
        ({"thinking": THINKING, "extra_body": {"temperature": 0.5}}, 8192, "temperature cannot be changed"),
        ({"thinking": THINKING, "extra_body": {"top_p": 0.5}}, 8192, "top_p must be between 0.95 and 1"),
        ({"tool_choice": {"type": "tool", "name": "nope"}}, 8192, "does not have"),
        ({"extra_body": {"thinking": THINKING}}, 8192, "extra_body must not set"),
    ],
)
def test_combinations_the_api_refuses_are_a_configuration_error(
    settings: dict[str, Any], max_tokens: int, rule: str
) -> None:
    with pytest.raises(ConfigurationError, match=rule):
        AgentLoop(
            ScriptedClient([]),
            model=MODEL,
            tools=[lookup],
            budget=Budget(max_steps=1),
            max_tokens=max_tokens,
            settings=ModelSettings.model_validate(settings),
        )


def test_beta_settings_need_a_client_with_a_beta_api() -> None:
    class Bare:
        messages = ScriptedClient([]).messages

    with pytest.raises(ConfigurationError, match=r"beta\.messages\.create"):
        loop_of(Bare(), ModelSettings(betas=["context-management-2025-06-27"]))


async def test_a_run_overrides_the_loops_settings_field_by_field() -> None:
    client = ScriptedClient([answer(), answer()])
    loop = loop_of(client, ModelSettings(stop_sequences=["END"], metadata={"user_id": "u"}))
    first = await loop.run("go", settings=ModelSettings(metadata=None, speed="fast"))
    assert client.requests[0]["stop_sequences"] == ["END"]
    assert client.requests[0]["speed"] == "fast"
    assert "metadata" not in client.requests[0]
    assert first.state.model_settings == {"stop_sequences": ["END"], "speed": "fast"}
    assert first.state.provenance is not None
    assert loop.config.provenance.settings_sha256 is not None
    assert first.state.provenance.settings_sha256 != loop.config.provenance.settings_sha256
    await loop.run("again")
    assert client.requests[1]["metadata"] == {"user_id": "u"}
    assert "speed" not in client.requests[1]


async def test_a_runs_override_is_checked_at_run_start() -> None:
    loop = loop_of(ScriptedClient([answer()]), ModelSettings(thinking=THINKING))
    with pytest.raises(ConfigurationError, match="forces tool use"):
        await loop.run("go", settings=ModelSettings(tool_choice={"type": "any"}))


async def test_a_resumed_run_sends_the_settings_it_recorded() -> None:
    """The run was started with settings; the loop resuming it has none: the resumed requests
    carry the run's own settings (from the checkpoint)."""

    @tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return "refunded"

    store = MemoryStore()
    first = ScriptedClient([call("refund", order="o-1")])
    options: dict[str, Any] = {"budget": Budget(max_steps=4), "store": store}
    loop = AgentLoop(first, model=MODEL, tools=[refund], max_tokens=8192, settings=None, **options)
    result = await loop.run("refund", task_id="t-1", settings=ModelSettings(stop_sequences=["END"]))
    assert result.stop_reason is StopReason.NEEDS_HUMAN
    second = ScriptedClient([answer()])
    resuming = AgentLoop(second, model=MODEL, tools=[refund], max_tokens=8192, **options)
    resumed = await resuming.resume("t-1", approvals={result.state.pending_approvals[0].tool_use_id: True})
    assert resumed.stop_reason is StopReason.COMPLETED
    assert second.requests[0]["stop_sequences"] == ["END"]


def test_settings_are_in_the_contract_and_the_provenance() -> None:
    settings = ModelSettings(thinking=THINKING, stop_sequences=["END"])
    loop = loop_of(ScriptedClient([]), settings, policy=Policy())
    document = loop.to_contract().to_dict()
    assert document["settings"] == settings.data()
    rebuilt = AgentLoop.from_contract(
        document, handlers={"lookup": lookup.handler}, client=ScriptedClient([])
    )
    assert rebuilt.config.spec.settings == settings
    assert rebuilt.config.provenance.settings_sha256 == loop.config.provenance.settings_sha256
    assert loop.to_contract().spec.settings == settings
    bare = loop_of(ScriptedClient([]))
    assert bare.config.provenance.settings_sha256 is None
    assert "settings" not in bare.to_contract().to_dict()
    assert isinstance(loop.to_contract(), Contract)
    assert json.loads(json.dumps(document))["settings"]["thinking"] == THINKING


def test_a_contract_with_invalid_settings_is_refused_naming_the_rule() -> None:
    document = loop_of(ScriptedClient([])).to_contract().to_dict()
    document["settings"] = {"thinking": THINKING, "tool_choice": {"type": "any"}}
    with pytest.raises(ConfigurationError, match="forces tool use"):
        AgentLoop.from_contract(document, handlers={"lookup": lookup.handler}, client=ScriptedClient([]))


def test_a_count_request_keeps_the_settings_the_count_endpoint_takes() -> None:
    from boundloop._core.request import for_count

    request = {
        "model": MODEL,
        "max_tokens": 10,
        "messages": [],
        "thinking": THINKING,
        "stop_sequences": ["x"],
    }
    request |= {"metadata": {"user_id": "u"}, "extra_body": {"temperature": 0.1}, "betas": ["b"]}
    assert set(for_count(request, beta=False)) == {"model", "messages", "thinking"}
    assert set(for_count(request, beta=True)) == {"model", "messages", "thinking", "betas"}
