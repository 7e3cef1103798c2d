"""MCP servers as tools, against real servers: `mcp-server-time` over stdio and a streamable-HTTP
server built in the test with the `mcp` SDK's own `MCPServer` (its record of calls is the proof)."""

from __future__ import annotations

import socket
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from boundloop import (
    AgentLoop,
    Budget,
    ConfigurationError,
    LoopResult,
    Policy,
    ScriptedClient,
    StopReason,
    tool,
)
from boundloop.mcp import IDEMPOTENCY_META, MCPServerHTTP, MCPServerStdio
from tests.conftest import require_binary
from tests.helpers import text, tool_use

pytestmark = pytest.mark.asyncio_only  # uvicorn serves on asyncio


@tool
def order_status(order_id: str) -> str:
    """The shipping status of an order."""
    return f"{order_id}: shipped"


def answers(result: LoopResult[Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the run's first answering user message."""
    message = result.messages[2]
    assert message["role"] == "user"
    return [dict(b) for b in message["content"] if isinstance(b, dict) and b["type"] == "tool_result"]


def time_server() -> MCPServerStdio:
    require_binary("mcp-server-time", "mcp-server-time (pip; the dev extra installs it)")
    return MCPServerStdio("mcp-server-time", name="time", timeout_s=20)


def loop_of(script: list[dict[str, Any]], tools: list[Any], **options: Any) -> AgentLoop:
    options.setdefault("budget", Budget(max_steps=4, max_tool_calls=6, timeout_s=60))
    return AgentLoop(ScriptedClient(script), model="claude-sonnet-4-6", tools=tools, **options)


async def test_an_mcp_tool_and_a_local_tool_in_one_batch_are_answered_in_one_user_message() -> None:
    script = [
        tool_use(
            ("get_current_time", {"timezone": "Asia/Tokyo"}, "t1"),
            ("order_status", {"order_id": "A-17"}, "t2"),
        ),
        text("done"),
    ]
    result = await loop_of(script, [order_status, time_server()]).run("time and order")
    assert result.stop_reason is StopReason.COMPLETED
    blocks = answers(result)
    assert [b["tool_use_id"] for b in blocks] == ["t1", "t2"]
    assert not any(b.get("is_error") for b in blocks)
    assert "Asia/Tokyo" in str(blocks[0]["content"])
    assert "A-17: shipped" in str(blocks[1]["content"])


async def test_the_loop_entered_lists_the_servers_tools_once_and_validates_their_input() -> None:
    script = [tool_use(("get_current_time", {"zone": "UTC"}, "t1")), text("done")]
    async with loop_of(script, [order_status, time_server()]) as loop:
        assert list(loop.tools) == ["order_status", "get_current_time", "convert_time"]
        result = await loop.run("time")
    [block] = answers(result)
    assert block["is_error"] is True
    assert "invalid input for get_current_time" in str(block["content"])
    assert list(loop.tools) == ["order_status"]  # disconnected: the loop as built


async def test_a_server_that_is_not_installed_is_a_configuration_error_at_start() -> None:
    loop = loop_of([text("never")], [MCPServerStdio("no-such-mcp-server-here", name="ghost")])
    with pytest.raises(ConfigurationError, match="MCP server 'ghost' did not start: the command"):
        await loop.run("hi")


async def test_a_server_that_exits_at_start_is_a_configuration_error() -> None:
    server = MCPServerStdio(
        sys.executable, ["-c", "raise SystemExit(3)"], name="quitter", connect_timeout_s=10
    )
    with pytest.raises(ConfigurationError, match="MCP server 'quitter' did not start"):
        await loop_of([text("never")], [server]).run("hi")


async def test_a_tool_name_clash_is_a_configuration_error_unless_prefixed() -> None:
    @tool
    def get_current_time() -> str:
        """A local clock."""
        return "noon"

    with pytest.raises(ConfigurationError, match="already a local tool: give the server a prefix="):
        await loop_of([text("never")], [get_current_time, time_server()]).run("hi")
    prefixed = MCPServerStdio("mcp-server-time", name="time", prefix="time_")
    async with loop_of([text("ok")], [get_current_time, prefixed]) as loop:
        assert list(loop.tools) == ["get_current_time", "time_get_current_time", "time_convert_time"]


# A streamable-HTTP server of the mcp SDK, in the test: its `calls` is what reached it.


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], Any]] = []
        self.release = anyio.Event()

    def server(self) -> MCPServer:
        mcp = MCPServer("records")

        @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
        def lookup(key: str, ctx: Context) -> str:
            """Look a key up."""
            self.calls.append(("lookup", {"key": key}, ctx.request_context.meta))
            return f"value of {key}"

        @mcp.tool(annotations=ToolAnnotations(destructive_hint=True))
        def delete_record(key: str) -> str:
            """Delete a record."""
            self.calls.append(("delete_record", {"key": key}, None))
            return "deleted"

        @mcp.tool()
        def broken(key: str) -> str:
            """Always fails."""
            self.calls.append(("broken", {"key": key}, None))
            raise ValueError(f"no record {key}")

        @mcp.tool()
        async def slow(key: str) -> str:
            """Waits until released."""
            self.calls.append(("slow", {"key": key}, None))
            await self.release.wait()
            return "late"

        return mcp


@pytest.fixture
async def http_server() -> AsyncIterator[tuple[Recorder, str]]:
    recorder = Recorder()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    app = recorder.server().streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [sock])
        yield recorder, f"http://127.0.0.1:{port}/mcp"
        recorder.release.set()
        server.should_exit = True
    sock.close()


async def test_http_tools_run_with_the_idempotency_key_in_meta(http_server: tuple[Recorder, str]) -> None:
    recorder, url = http_server
    script = [tool_use(("lookup", {"key": "k1"}, "t1")), text("done")]
    result = await loop_of(script, [MCPServerHTTP(url, name="records")]).run("look up k1", task_id="task-1")
    assert result.stop_reason is StopReason.COMPLETED
    assert [(name, args) for name, args, _ in recorder.calls] == [("lookup", {"key": "k1"})]
    meta = recorder.calls[0][2]
    assert meta is not None
    assert meta[IDEMPOTENCY_META] == "task-1:1:t1"
    assert "value of k1" in str(answers(result)[0]["content"])


async def test_a_forbidden_mcp_tool_never_reaches_the_server(http_server: tuple[Recorder, str]) -> None:
    recorder, url = http_server
    script = [tool_use(("delete_record", {"key": "k1"}, "t1")), text("done")]
    policy = Policy(forbidden={"delete_record"})
    result = await loop_of(script, [MCPServerHTTP(url)], policy=policy).run("delete k1")
    assert result.stop_reason is StopReason.POLICY_BLOCKED
    assert recorder.calls == []


async def test_a_destructive_mcp_tool_waits_for_a_human(http_server: tuple[Recorder, str]) -> None:
    recorder, url = http_server
    script = [tool_use(("delete_record", {"key": "k1"}, "t1"), ("lookup", {"key": "k2"}, "t2")), text("done")]
    policy = Policy(require_approval_for_destructive=True)
    result = await loop_of(script, [MCPServerHTTP(url)], policy=policy).run("delete k1")
    assert result.stop_reason is StopReason.NEEDS_HUMAN
    assert [pending.tool for pending in result.state.pending_approvals] == ["delete_record"]
    assert all(name != "delete_record" for name, _, _ in recorder.calls)


async def test_is_error_and_a_timeout_are_error_results_and_the_run_goes_on(
    http_server: tuple[Recorder, str],
) -> None:
    recorder, url = http_server
    script = [tool_use(("broken", {"key": "k1"}, "t1"), ("slow", {"key": "k2"}, "t2")), text("done")]
    server = MCPServerHTTP(url, timeout_s=0.5)
    budget = Budget(max_steps=4, timeout_s=60, max_consecutive_tool_errors=3)
    result = await loop_of(script, [server], budget=budget).run("try")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.state.consecutive_tool_errors == 2  # the breaker counts them like a local tool's
    broken, slow = answers(result)
    assert broken["is_error"] is True
    assert "Error executing tool broken" in str(broken["content"])  # the server's own isError text
    assert slow["is_error"] is True
    assert "timed out after 0.5 s" in str(slow["content"])
    assert {name for name, _, _ in recorder.calls} == {"broken", "slow"}
