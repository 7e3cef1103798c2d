"""The response boundary reads `usage` as the API sends it: every field but the two token counts
is optional (the SDK's `Optional`, or one the API leaves out although the SDK's type has it), a
missing count is zero, and a count that is there is a non-negative int — in `usage`,
`server_tool_use`, `cache_creation` and each `iterations` entry. Through the real
`AsyncAnthropic` over tests/fake_api.py."""

from __future__ import annotations

from typing import Any

import pytest

from boundloop import AgentLoop, Budget, Observers, StopReason
from tests.fake_api import MODEL, Body, FakeAPI, message, text_block

JSON = dict[str, Any]
TOKENS: JSON = {"input_tokens": 1000, "output_tokens": 100}


async def _run(usage: JSON) -> Any:
    body = {**message([text_block("done")], stop_reason="end_turn"), "usage": {**TOKENS, **usage}}
    fake = FakeAPI([Body(json=body)])
    loop = AgentLoop(
        fake.client(), model=MODEL, budget=Budget(max_steps=1), observers=Observers(metrics=None)
    )
    return await loop.run("goal")


@pytest.mark.parametrize(
    "usage",
    [
        pytest.param({"server_tool_use": {"web_search_requests": 2}}, id="web-search-alone"),
        pytest.param({"server_tool_use": {"web_fetch_requests": 1}}, id="web-fetch-alone"),
        pytest.param({"server_tool_use": {}}, id="no-server-count"),
        pytest.param(
            {"cache_creation_input_tokens": 400, "cache_creation": {"ephemeral_5m_input_tokens": 400}},
            id="cache-creation-5m-alone",
        ),
        pytest.param({"cache_creation": {}}, id="cache-creation-empty"),
    ],
)
async def test_a_usage_missing_an_optional_count_completes_and_is_priced(usage: JSON) -> None:
    result = await _run(usage)
    assert result.state.errors == []
    assert result.stop_reason is StopReason.COMPLETED
    counts: JSON = usage.get("server_tool_use", {})
    expected = {field.removesuffix("_requests"): count for field, count in counts.items()}
    assert result.state.usage.server_tool_uses == expected
    assert result.state.usage.cost_usd is not None
    assert result.state.usage.cost_usd > 0


@pytest.mark.parametrize(
    ("usage", "fault"),
    [
        pytest.param(
            {"server_tool_use": {"web_search_requests": "2"}},
            "usage.server_tool_use.web_search_requests is '2', not a count",
            id="search-count-a-string",
        ),
        pytest.param(
            {"server_tool_use": 3}, "usage.server_tool_use is int, not an object", id="server-not-object"
        ),
        pytest.param(
            {"cache_creation": {"ephemeral_1h_input_tokens": -1}},
            "usage.cache_creation.ephemeral_1h_input_tokens is -1, not a count",
            id="cache-count-negative",
        ),
        pytest.param(
            {"cache_creation": {"ephemeral_5m_input_tokens": True}},
            "usage.cache_creation.ephemeral_5m_input_tokens is True, not a count",
            id="cache-count-a-bool",
        ),
        pytest.param(
            {"cache_creation": "none"}, "usage.cache_creation is str, not an object", id="cache-not-object"
        ),
        pytest.param(
            {"iterations": {"type": "message"}},
            "usage.iterations is dict, not a list",
            id="iterations-not-list",
        ),
        pytest.param(
            {"iterations": [{"input_tokens": 1}]}, "usage.iterations[0] has no type", id="iteration-no-type"
        ),
        pytest.param(
            {"iterations": [{"type": "compaction", "input_tokens": "many"}]},
            "usage.iterations[0].input_tokens is 'many', not a count",
            id="iteration-count-a-string",
        ),
        pytest.param(
            {"iterations": [{"type": "advisor_message", "input_tokens": 1, "model": 4}]},
            "usage.iterations[0].model is int, not a string",
            id="iteration-model-not-string",
        ),
        pytest.param(
            {"iterations": [{"type": "message", "cache_creation": {"ephemeral_5m_input_tokens": -2}}]},
            "usage.iterations[0].cache_creation.ephemeral_5m_input_tokens is -2, not a count",
            id="iteration-cache-count-negative",
        ),
    ],
)
async def test_a_present_usage_field_of_the_wrong_type_fails_the_run_clearly(usage: JSON, fault: str) -> None:
    result = await _run(usage)
    assert result.stop_reason is StopReason.FAILED
    assert result.state.errors[-1].kind == "model_response"
    assert fault in result.state.errors[-1].message
