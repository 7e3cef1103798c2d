"""An eval fixture declaring the loop's MCP servers mocks their tools like local ones: the
mocks replace the server, which never starts (a command that does not exist would fail)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from boundloop import AgentLoop, ConfigurationError, FixtureError, ScriptedClient
from boundloop.evals import parse_case, run_case, schema
from tests.helpers import text, tool_use

pytestmark = pytest.mark.asyncio_only  # the contract case starts (tries to) a server process

ROOT = Path(__file__).resolve().parents[2]
GHOST = {"name": "time", "command": "no-such-mcp-server-here", "prefix": "time_", "timeout_s": 5}
"""A server that cannot start: a run that tried would stop with a ConfigurationError."""


def fixture(**fields: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "case_id": "time_in_tokyo",
        "goal": "What time is it in Tokyo?",
        "mcp_servers": [GHOST],
        "model": [
            {"tool_calls": [{"name": "time_get_current_time", "input": {"timezone": "Asia/Tokyo"}}]},
            {"text": "It is noon in Tokyo."},
        ],
        "mocked_tools": {"time_get_current_time": [{"status": "ok", "output": {"datetime": "12:00"}}]},
        "expected": {"stop_reason": "completed", "tool_sequence": ["time_get_current_time"]},
    }
    document.update(fields)
    return document


async def test_a_mocked_mcp_servers_tools_answer_and_the_server_never_starts() -> None:
    case = parse_case(fixture())
    result = await run_case(case)
    assert result.status == "passed", result.failures
    assert result.tools_run == ("time_get_current_time",)
    [tool] = case.tools
    assert tool.timeout_s == 5  # the server's per-call timeout, as the live server's tools get
    assert "of MCP server 'time'" in tool.description


@pytest.fixture
def contract_loop() -> AgentLoop:
    """The loop of a contract declaring the same server (built outside the event loop: the
    first build imports the mcp SDK)."""
    signals = dict.fromkeys(
        (
            "stop_sequence",
            "pause_turn",
            "compaction",
            "max_tokens",
            "refusal",
            "model_context_window_exceeded",
        ),
        "unhandled_stop",
    )
    contract = {
        "name": "clock",
        "model": "claude-sonnet-4-6",
        "tools": [],
        "mcp_servers": [GHOST],
        "signals": {"tool_use": "on_tool_use", "end_turn": "on_end_turn", **signals},
        "budget": {"max_steps": 3},
        "policy": {},
    }
    script = [tool_use(("time_get_current_time", {"timezone": "Asia/Tokyo"}, "t1")), text("noon")]
    return AgentLoop.from_contract(contract, handlers={}, client=ScriptedClient(script))


async def test_the_same_server_in_a_contract_does_start_and_fails_to(contract_loop: AgentLoop) -> None:
    """What the mocks spare the eval: the loop built from a contract starts the server."""
    with pytest.raises(ConfigurationError, match="MCP server 'time' did not start"):
        await contract_loop.run("What time is it in Tokyo?")


def test_the_fixture_schema_rejects_a_server_with_both_command_and_url() -> None:
    both = {**GHOST, "url": "http://127.0.0.1:8000/mcp"}
    with pytest.raises(FixtureError, match="mcp_servers/0"):
        parse_case(fixture(mcp_servers=[both]))


def test_the_fixtures_server_declaration_is_the_contracts() -> None:
    """One shape in both schemas (the contract's is generated from `MCPServerSpec`)."""
    contract = json.loads((ROOT / "boundloop/contract/loop-contract.schema.json").read_text(encoding="utf-8"))
    assert schema()["$defs"]["mcp_server"] == contract["$defs"]["MCPServerSpec"]


async def test_the_docs_fixture_passes_without_starting_its_server() -> None:
    from tests.contract.test_contract_mcp import docs_json_blocks

    result = await run_case(parse_case(docs_json_blocks()[1]))
    assert result.status == "passed", result.failures
