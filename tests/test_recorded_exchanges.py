"""Recorded real API exchanges replayed through the real `AsyncAnthropic` over tests/fake_api.py:
every request boundloop sends keeps the API's rules (tests/api_rules.py).

tests/recorded/sdk_exchanges.json holds the response bodies of thirteen exchanges recorded
against the Messages API in the anthropic SDK repository's test snapshots, each with its
source (`github.com/anthropics/anthropic-sdk-python/blob/<commit>/<path>`): tool runs, a web
search, programmatic tool calling inside a code execution container, structured outputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from boundloop import AgentLoop, Budget, Observers, Tool
from tests.api_rules import violations
from tests.fake_api import MODEL, Body, FakeAPI

JSON = dict[str, Any]
EXCHANGES: list[JSON] = json.loads(
    (Path(__file__).parent / "recorded" / "sdk_exchanges.json").read_text("utf-8")
)


def _tools(responses: list[JSON]) -> list[Tool]:
    """A tool for each client tool the recorded model called, answering with a fixed text."""
    names = sorted(
        {block["name"] for body in responses for block in body["content"] if block["type"] == "tool_use"}
    )

    def answer(**arguments: object) -> str:
        return "recorded answer"

    schema = {"type": "object", "additionalProperties": True}
    return [
        Tool(name=name, description=f"{name} (replayed)", input_schema=schema, handler=answer)
        for name in names
    ]


def test_there_are_at_least_ten_recorded_exchanges_each_with_its_source() -> None:
    assert len(EXCHANGES) >= 10
    for exchange in EXCHANGES:
        assert exchange["source"].startswith("github.com/anthropics/anthropic-sdk-python/blob/")
        assert exchange["responses"]


@pytest.mark.parametrize("exchange", EXCHANGES, ids=[e["source"].rsplit("/", 1)[-1][:8] for e in EXCHANGES])
async def test_a_recorded_exchange_replays_with_requests_the_api_accepts(exchange: JSON) -> None:
    responses: list[JSON] = exchange["responses"]
    fake = FakeAPI([Body(json=body) for body in responses], honour_max_tokens=False)
    loop = AgentLoop(
        fake.client(),
        model=MODEL,  # the recorded models are older: the SDK warns of their deprecation
        tools=_tools(responses),
        budget=Budget(max_steps=len(responses)),
        observers=Observers(metrics=None),
        prices={},
    )
    result = await loop.run("Replay the recorded exchange.")
    assert result.state.errors == []
    assert str(result.stop_reason) in ("completed", "max_steps")
    assert len(fake.requests) == len(responses)
    assert violations(fake.requests, responses) == []
    for request, body in zip(fake.requests[1:], responses, strict=False):
        if body.get("container"):
            assert request["container"] == body["container"]["id"]
