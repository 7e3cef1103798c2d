"""A contract's `mcp_servers`: the schema and rules, `from_contract` building them (a real
`mcp-server-time`), `to_contract` and the compiled module keeping them, and no secret written."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from boundloop import AgentLoop, ConfigurationError, ContractError, ScriptedClient, StopReason
from boundloop.contract import RULES, check_contract, compile_module, compile_report, load_contract
from boundloop.mcp import MCPServerHTTP, MCPServerStdio, declared_server
from tests.conftest import require_binary
from tests.contract.test_compile import build, load
from tests.contract.test_contract import contract, lookup
from tests.helpers import text, tool_use

pytestmark = pytest.mark.asyncio_only  # a real server process, as in tests/test_mcp.py

TIME = {"name": "time", "command": "mcp-server-time", "prefix": "time_", "timeout_s": 20}


def with_servers(*servers: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The small sound contract, with these MCP servers."""
    return contract(mcp_servers=list(servers), **fields)


def rules_of(document: dict[str, Any]) -> list[tuple[str, str]]:
    return [(problem.rule, problem.where) for problem in check_contract(document)]


async def test_a_contract_declaring_mcp_server_time_runs_a_scripted_run_that_calls_its_tool() -> None:
    require_binary("mcp-server-time", "mcp-server-time (pip; the dev extra installs it)")
    document = with_servers(
        TIME, policy={"required_evidence": ["lookup"], "allowed": ["lookup", "time_get_current_time"]}
    )
    assert check_contract(document) == []
    script = [
        tool_use(("time_get_current_time", {"timezone": "Asia/Tokyo"}, "t1"), ("lookup", {"key": "k"}, "t2")),
        text("done"),
    ]
    loop = AgentLoop.from_contract(document, handlers={"lookup": lookup}, client=ScriptedClient(script))
    result = await loop.run("what time is it in Tokyo?")
    assert result.stop_reason is StopReason.COMPLETED
    answer = result.messages[2]
    blocks = [dict(b) for b in answer["content"] if isinstance(b, dict) and b["type"] == "tool_result"]
    assert [b["tool_use_id"] for b in blocks] == ["t1", "t2"]
    assert not any(b.get("is_error") for b in blocks)
    assert "Asia/Tokyo" in str(blocks[0]["content"])
    # The loop writes its contract back with the server as declared.
    assert loop.to_contract().to_dict()["mcp_servers"] == [TIME]


def test_the_schema_rejects_a_server_with_both_command_and_url_or_neither() -> None:
    both = {"name": "x", "command": "server", "url": "http://127.0.0.1:8000/mcp"}
    neither = {"name": "x", "prefix": "x_"}
    assert rules_of(with_servers(both)) == [("schema", "mcp_servers/0")]
    assert rules_of(with_servers(neither)) == [("schema", "mcp_servers/0")]
    # A transport's fields need it: headers on a stdio server, env on an HTTP one.
    assert rules_of(with_servers({"name": "x", "command": "s", "headers": {"A": "b"}})) == [
        ("schema", "mcp_servers/0")
    ]
    assert rules_of(with_servers({"name": "x", "url": "https://h/mcp", "env": ["HOME"]})) == [
        ("schema", "mcp_servers/0")
    ]
    with pytest.raises(ContractError, match="mcp_servers/0"):
        AgentLoop.from_contract(with_servers(both), handlers={"lookup": lookup}, client=ScriptedClient([]))


def test_a_secret_written_into_a_header_is_a_problem_taken_from_the_environment_it_is_not() -> None:
    def server(headers: dict[str, str]) -> dict[str, Any]:
        return {"name": "crm", "url": "https://crm.example/mcp", "headers": headers}

    assert rules_of(with_servers(server({"Authorization": "Bearer ${CRM_TOKEN}", "X-Team": "ops"}))) == []
    assert rules_of(with_servers(server({"Authorization": "Bearer abcdefgh12345678"}))) == [
        ("mcp-secret", "mcp_servers/0/headers/Authorization")
    ]
    # A key the default patterns know is a secret under any header name.
    assert rules_of(with_servers(server({"X-Note": "sk-ant-api03-abcdefghijkl"}))) == [
        ("mcp-secret", "mcp_servers/0/headers/X-Note")
    ]
    assert {"mcp-secret", "mcp-server"} <= set(RULES)


def test_the_policy_names_a_servers_tools_under_its_prefix() -> None:
    """A server's tools are known only once it runs: a name under a declared prefix is taken as
    one; without a prefix, the policy cannot name the server's tools in a contract."""
    policy = {"required_evidence": ["lookup"], "requires_approval": ["time_convert_time"]}
    assert rules_of(with_servers(TIME, policy=policy)) == []
    unprefixed = {key: value for key, value in TIME.items() if key != "prefix"}
    assert rules_of(with_servers(unprefixed, policy=policy)) == [("unknown-tool", "policy/requires_approval")]
    (problem,) = check_contract(with_servers(unprefixed, policy=policy))
    assert problem.message.endswith("(name an MCP server's tool with the server's prefix)")
    (problem,) = check_contract(contract(policy=policy))  # no server: the hint would mislead
    assert problem.message == "names tools the contract does not declare: time_convert_time"


def test_server_names_and_prefixes_are_unique_and_no_declared_tool_is_under_a_prefix() -> None:
    other = {"name": "time", "url": "http://127.0.0.1:1/mcp", "prefix": "time_"}
    assert rules_of(with_servers(TIME, other)) == [
        ("mcp-server", "mcp_servers/1/name"),
        ("mcp-server", "mcp_servers/1/prefix"),
    ]
    assert rules_of(with_servers({**TIME, "prefix": "look"})) == [("mcp-server", "mcp_servers/0/prefix")]


def test_environment_names_and_header_references_are_read_when_the_loop_is_built() -> None:
    stdio = declared_server({"name": "gh", "command": "server", "env": ["GH_TOKEN"]}, {"GH_TOKEN": "t0k"})
    assert isinstance(stdio, MCPServerStdio)
    assert stdio.env == {"GH_TOKEN": "t0k"}
    http = declared_server(
        {"name": "crm", "url": "https://crm.example/mcp", "headers": {"Authorization": "Bearer ${CRM}"}},
        {"CRM": "s3cret"},
    )
    assert isinstance(http, MCPServerHTTP)
    assert http.headers == {"Authorization": "Bearer s3cret"}
    with pytest.raises(ConfigurationError, match="needs the environment variable CRM, which is not set"):
        declared_server({"name": "crm", "url": "https://crm.example/mcp", "headers": {"A": "${CRM}"}}, {})


def test_from_contract_reads_a_missing_variable_as_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("BOUNDLOOP_TEST_UNSET", raising=False)
    server = {"name": "gh", "command": "server", "env": ["BOUNDLOOP_TEST_UNSET"]}
    with pytest.raises(ConfigurationError, match="BOUNDLOOP_TEST_UNSET, which is not set"):
        AgentLoop.from_contract(with_servers(server), handlers={"lookup": lookup}, client=ScriptedClient([]))


def test_without_the_mcp_extra_a_contract_naming_a_server_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # importing it fails, as when not installed
    for name in [name for name in sys.modules if name.startswith("boundloop.mcp")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(
        ConfigurationError, match=r"MCP servers \('time'\), which need the mcp extra"
    ) as caught:
        AgentLoop.from_contract(with_servers(TIME), handlers={"lookup": lookup}, client=ScriptedClient([]))
    assert "pip install 'boundloop[mcp]'" in str(caught.value)
    # A contract without servers needs no extra.
    AgentLoop.from_contract(contract(), handlers={"lookup": lookup}, client=ScriptedClient([]))


def test_the_compiled_module_builds_the_declared_servers(tmp_path: Path) -> None:
    path = tmp_path / "timed_loop.py"
    path.write_text(compile_module(load_contract(with_servers(TIME)), source="timed.json"), encoding="utf-8")
    module = load(path)
    module.HANDLERS["lookup"] = lookup
    loop = build(module, ScriptedClient([]))
    [server] = loop.config.toolsets
    assert isinstance(server, MCPServerStdio)
    assert (server.command, server.prefix, server.timeout_s) == ("mcp-server-time", "time_", 20)


def docs_json_blocks() -> list[dict[str, Any]]:
    """The JSON blocks of docs/mcp.md: the contract's servers, then the eval fixture."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text(encoding="utf-8")
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, flags=re.DOTALL)]


def test_the_docs_contract_servers_pass_check() -> None:
    declared = docs_json_blocks()[0]
    assert check_contract(contract(**declared)) == []


def test_the_review_report_lists_the_servers() -> None:
    report = compile_report(load_contract(with_servers(TIME)), source="timed.json")
    assert "## MCP servers" in report
    assert "| time | mcp-server-time | time_ | 20 |" in report
