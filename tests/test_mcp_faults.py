"""MCP faults end as results, never as hangs: tests/hostile_mcp.py's faults, reconnecting once,
`tools/list_changed`, cancellation, and the server's own log as the proof of what reached it.
These run on asyncio and trio (stdio only: no HTTP server here)."""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.abc import SocketListener
from mcp.shared.message import SessionMessage

from boundloop import AgentLoop, Budget, LoopResult, Observers, Policy, ScriptedClient, StopReason, tool
from boundloop.events import Event, ToolResult, ToolStarted
from boundloop.mcp import MCPServerStdio
from boundloop.mcp._stdio import MessageTooLarge, messages
from tests.conftest import require_binary
from tests.helpers import text, tool_use

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 5.0
"""Each call's: a reconnect (a new server process) is made within the next call's."""


class Hostile:
    """The hostile server of one test, and its log (what reached each of its processes)."""

    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.log = tmp_path / "hostile.log"
        self.env = {"PYTHONPATH": str(ROOT), "HOSTILE_LOG": str(self.log), **env}

    def server(self, **options: Any) -> MCPServerStdio:
        options.setdefault("timeout_s", TIMEOUT_S)
        return MCPServerStdio(
            sys.executable, ["-m", "tests.hostile_mcp"], env=self.env, cwd=ROOT, name="hostile", **options
        )

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def calls(self) -> list[str]:
        return [line.removeprefix("call ") for line in self.lines() if line.startswith("call ")]

    def starts(self) -> int:
        return sum(line.startswith("start ") for line in self.lines())


def loop_of(script: list[dict[str, Any]], tools: list[Any], **options: Any) -> AgentLoop:
    options.setdefault("budget", Budget(max_steps=5, timeout_s=60, max_consecutive_tool_errors=3))
    return AgentLoop(ScriptedClient(script), model="claude-sonnet-4-6", tools=tools, **options)


def answers(result: LoopResult[Any]) -> list[dict[str, Any]]:
    """Every tool_result block of the run, in order."""
    return [
        dict(block)
        for message in result.messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if isinstance(block, dict) and block["type"] == "tool_result"
    ]


FAULTS = {
    "hang": f"timed out after {TIMEOUT_S:g} s; the call was cancelled",
    "die": "MCP server 'hostile' exited (its output ended); the call's result is lost",
    "garbage": "MCP server 'hostile' sent a line that is not JSON-RPC; the call's result is lost",
    "huge": "MCP server 'hostile' sent a message of 20000123 bytes, over the limit of 8388608",
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_each_fault_is_an_error_result_within_the_timeout_and_the_run_goes_on(
    tmp_path: Path, fault: str
) -> None:
    hostile = Hostile(tmp_path)
    script = [tool_use((fault, {}, "t1")), tool_use(("echo", {"text": "hi"}, "t2")), text("done")]
    clock: dict[str, float] = {}

    def on_event(event: Event) -> None:
        if isinstance(event, ToolStarted) and "started" not in clock:
            clock["started"] = anyio.current_time()
        elif isinstance(event, ToolResult) and event.tool_use_id == "t1":
            clock["answered"] = anyio.current_time()

    result = await loop_of(script, [hostile.server()], observers=Observers(on_event=on_event)).run(
        "be hostile"
    )
    assert result.stop_reason is StopReason.COMPLETED
    faulty, echoed = answers(result)
    assert faulty["is_error"] is True
    assert FAULTS[fault] in str(faulty["content"])
    assert clock["answered"] - clock["started"] < TIMEOUT_S + 1  # the promise: timeout + 1 s
    assert not echoed.get("is_error")
    assert echoed["content"] == "echo: hi"  # the run went on, on a server that answers
    assert hostile.calls() == [fault, "echo"]
    # A fault that broke the connection: the next call reconnected once (a new process).
    assert hostile.starts() == (1 if fault == "hang" else 2)
    assert len(json.dumps(result.messages)) < 10_000  # nothing of the 10 MB was kept


async def test_calls_that_find_the_server_dead_share_one_reconnect(tmp_path: Path) -> None:
    hostile = Hostile(tmp_path)
    script = [
        tool_use(("die", {}, "t1")),
        tool_use(("echo", {"text": "a"}, "t2"), ("echo", {"text": "b"}, "t3")),
        text("done"),
    ]
    result = await loop_of(script, [hostile.server()]).run("be hostile")
    died, first, second = answers(result)
    assert died["is_error"] is True
    assert (first["content"], second["content"]) == ("echo: a", "echo: b")
    assert hostile.starts() == 2


async def test_the_breaker_counts_mcp_faults(tmp_path: Path) -> None:
    hostile = Hostile(tmp_path)
    script = [
        tool_use(("die", {}, "t1")),
        tool_use(("garbage", {}, "t2")),
        tool_use(("echo", {"text": "never"}, "t3")),
        text("done"),
    ]
    budget = Budget(max_steps=5, timeout_s=60, max_consecutive_tool_errors=2)
    result = await loop_of(script, [hostile.server()], budget=budget).run("be hostile")
    assert result.state.consecutive_tool_errors == 2
    assert result.state.exceeded is not None
    assert result.state.exceeded.limit == "max_consecutive_tool_errors"
    assert "echo" not in hostile.calls()


async def test_a_large_result_under_the_message_limit_is_cut_like_a_local_tools(tmp_path: Path) -> None:
    hostile = Hostile(tmp_path)
    server = hostile.server(max_message_bytes=32 * 1024 * 1024, timeout_s=30)
    script = [tool_use(("huge", {}, "t1")), text("done")]
    result = await loop_of(
        script, [server], budget=Budget(max_steps=5, timeout_s=60, max_tool_output_chars=1_000)
    ).run("be big")
    [block] = answers(result)
    assert not block.get("is_error")
    assert str(block["content"]).startswith("x" * 1_000 + "\n[truncated: 9999000 more characters]")


async def test_a_server_that_cannot_be_restarted_is_an_error_result_not_a_hang(tmp_path: Path) -> None:
    hostile = Hostile(tmp_path, HOSTILE_ONCE=str(tmp_path / "started"))
    script = [tool_use(("die", {}, "t1")), tool_use(("echo", {"text": "hi"}, "t2")), text("done")]
    result = await loop_of(script, [hostile.server()]).run("be hostile")
    assert result.stop_reason is StopReason.COMPLETED
    died, unreachable = answers(result)
    assert died["is_error"] is True
    assert unreachable["is_error"] is True
    assert "MCP server 'hostile' could not reconnect:" in str(unreachable["content"])
    assert hostile.calls() == ["die"]


async def test_tools_list_changed_is_offered_at_the_next_request(tmp_path: Path) -> None:
    hostile = Hostile(tmp_path)
    client = ScriptedClient([tool_use(("grow", {}, "t1")), tool_use(("added", {}, "t2")), text("done")])
    loop = AgentLoop(client, model="claude-sonnet-4-6", tools=[hostile.server()], budget=Budget(max_steps=4))
    async with loop:
        result = await loop.run("grow")
    assert result.stop_reason is StopReason.COMPLETED
    offered = [[tool["name"] for tool in request["tools"]] for request in client.requests]
    assert "added" not in offered[0]
    assert "added" in offered[1]
    grown, added = answers(result)
    assert grown["content"] == "grown"
    assert added["content"] == "added ran"
    assert hostile.calls() == ["grow", "added"]


async def test_a_new_listing_that_clashes_is_not_taken_and_the_run_keeps_its_tools(tmp_path: Path) -> None:
    @tool
    def added() -> str:
        """A local tool with the name the server adds later."""
        return "the local one"

    hostile = Hostile(tmp_path)
    client = ScriptedClient([tool_use(("grow", {}, "t1")), tool_use(("added", {}, "t2")), text("done")])
    loop = AgentLoop(
        client, model="claude-sonnet-4-6", tools=[added, hostile.server()], budget=Budget(max_steps=4)
    )
    result = await loop.run("grow")
    assert result.stop_reason is StopReason.COMPLETED
    assert [answer["content"] for answer in answers(result)] == ["grown", "the local one"]
    [error] = result.state.errors
    assert error.kind == "tools_list_changed"
    assert "already a local tool" in error.message


async def accept_line(listener: SocketListener) -> str:
    async with await listener.accept() as connection:
        return (await connection.receive()).decode().strip()


async def test_cancelling_the_run_cancels_the_server_call(tmp_path: Path) -> None:
    beacon = tmp_path / "beacon.sock"
    hostile = Hostile(tmp_path, HOSTILE_BEACON=str(beacon))
    script = [tool_use(("hang", {}, "t1")), text("never")]
    cancel = anyio.Event()
    results: list[LoopResult[Any]] = []
    loop = loop_of(script, [hostile.server(timeout_s=None)])
    async with await anyio.create_unix_listener(beacon) as listener, loop:

        async def run() -> None:
            results.append(await loop.run("hang", cancel=cancel))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                assert await accept_line(listener) == "hang"  # the call is in the server's handler
                cancel.set()
            # The server is still up (the loop is entered): it was told, and its handler cancelled.
            assert await accept_line(listener) == "cancelled"
    [result] = results
    assert result.stop_reason is StopReason.CANCELLED
    assert hostile.lines()[-1] == "cancelled hang"


async def test_a_forbidden_mcp_tool_never_reaches_the_server_by_its_own_log(tmp_path: Path) -> None:
    hostile = Hostile(tmp_path)
    script = [
        tool_use(("echo", {"text": "hi"}, "t1")),
        tool_use(("wipe", {"table": "users"}, "t2")),
        text("x"),
    ]
    result = await loop_of(script, [hostile.server()], policy=Policy(forbidden={"wipe"})).run("wipe")
    assert result.stop_reason is StopReason.POLICY_BLOCKED
    assert hostile.calls() == ["echo"]  # the log records the calls that reach it; wipe never did


async def test_mcp_server_time_on_both_backends() -> None:
    require_binary("mcp-server-time", "mcp-server-time (pip; the dev extra installs it)")
    server = MCPServerStdio("mcp-server-time", name="time", timeout_s=20)
    script = [tool_use(("get_current_time", {"timezone": "Asia/Tokyo"}, "t1")), text("done")]
    result = await loop_of(script, [server]).run("time")
    assert result.stop_reason is StopReason.COMPLETED
    [block] = answers(result)
    assert not block.get("is_error")
    assert "Asia/Tokyo" in str(block["content"])


async def read_lines(chunks: list[bytes], limit: int) -> list[Any]:
    """What the stdio transport makes of a server's output arriving in these chunks."""
    send, receive = anyio.create_memory_object_stream[bytes](len(chunks))
    for chunk in chunks:
        send.send_nowait(chunk)
    send.close()
    with receive:
        return [item async for item in messages(StapledByteStream(receive), limit)]


class StapledByteStream(anyio.abc.ByteReceiveStream):
    """A process's stdout as the transport reads it: byte chunks, then the end."""

    def __init__(self, chunks: anyio.abc.ObjectReceiveStream[bytes]) -> None:
        self.chunks = chunks

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self.chunks.receive()

    async def aclose(self) -> None:
        await self.chunks.aclose()


async def test_the_stdio_transport_splits_lines_across_chunks_and_skips_long_ones() -> None:
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    chunks = [
        ping[:10],
        ping[10:] + b"\n" + b"y" * 30,
        b"y" * 30 + b"\n\n" + ping[:5],
        ping[5:] + b"\nnot json\n",
    ]
    first, too_long, second, garbage = await read_lines(chunks, limit=len(ping))
    assert isinstance(first, SessionMessage)
    assert isinstance(second, SessionMessage)
    assert first.message == second.message
    assert isinstance(too_long, MessageTooLarge)
    assert too_long.size == 60
    assert isinstance(garbage, ValueError)


async def test_a_line_over_the_limit_is_never_held_in_memory() -> None:
    chunk = b"z" * 65536
    tracemalloc.start()
    try:
        [item] = await read_lines([chunk] * 320 + [b"\n"], limit=1024 * 1024)  # 20 MiB in one line
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(item, MessageTooLarge)
    assert item.size == 320 * 65536
    assert peak < 2 * 1024 * 1024  # the limit and a chunk, not the line
