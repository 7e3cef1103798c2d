"""A hostile MCP server for the tests, over stdio, on the `mcp` SDK's own `MCPServer`.

Run as `python -m tests.hostile_mcp`. Its faults: `hang` never answers, `die` kills the process
mid-call, `garbage` answers with a line that is not JSON-RPC (written raw to stdout), `huge`
returns 10 MB. `echo` behaves; `grow` adds the tool `added`, sends `tools/list_changed` and
answers only once the client asked `tools/list` after it (so the answer reaches the client after
its listing started); `wipe` is destructive (the test forbids it).

Environment:
    HOSTILE_LOG: a file each process appends to: `start <pid>`, `call <tool>` for every call
        that reaches it, `cancelled <tool>` when a call's handler is cancelled.
    HOSTILE_BEACON: a Unix socket the `hang` tool connects to and writes `hang` when it starts
        and `cancelled` when it is cancelled (how a test waits for them without sleeping).
    HOSTILE_ONCE: a file: the first process creates it; a process started while it exists
        exits at once with status 3 (a server that cannot be restarted).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import Tool as MCPTool
from mcp_types import ToolAnnotations

HUGE_CHARS = 10_000_000
LISTED_TIMEOUT_S = 10.0

WIRE = os.dup(1)
"""The protocol's pipe: the SDK's server points fd 1 at stderr while it serves (it guards its
wire), so the garbage is written here, raw, where its answer would go."""


def log(line: str) -> None:
    path = os.environ.get("HOSTILE_LOG")
    if path:
        with Path(path).open("a", encoding="utf-8") as file:
            file.write(f"{line}\n")


def beacon(word: str) -> None:
    path = os.environ.get("HOSTILE_BEACON")
    if path:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            sock.sendall(f"{word}\n".encode())


class HostileServer(MCPServer):
    """`MCPServer` that tells `grow` when a `tools/list` arrives."""

    listed: anyio.Event | None = None
    """Set by the next `tools/list` (`grow` makes one)."""

    async def list_tools(self) -> list[MCPTool]:
        if self.listed is not None:
            self.listed.set()
        return await super().list_tools()


def build() -> MCPServer:
    server = HostileServer("hostile")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Answer the text."""
        log("call echo")
        return f"echo: {text}"

    @server.tool()
    async def hang() -> str:
        """Never answer."""
        log("call hang")
        beacon("hang")
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            log("cancelled hang")
            beacon("cancelled")
            raise
        return "never"

    @server.tool()
    def die() -> str:
        """Kill the server process mid-call."""
        log("call die")
        os._exit(1)

    @server.tool()
    async def garbage() -> str:
        """Answer with a line that is not JSON-RPC, then nothing."""
        log("call garbage")
        os.write(WIRE, b'{"jsonrpc": "2.0", "id": this is not json\n')
        await anyio.sleep_forever()
        return "never"

    @server.tool()
    def huge() -> str:
        """Return 10 MB of text."""
        log("call huge")
        return "x" * HUGE_CHARS

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def wipe(table: str) -> str:
        """Delete every row of a table."""
        log("call wipe")
        return f"wiped {table}"

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add the tool `added` and tell the client its tool list changed."""
        log("call grow")

        def added() -> str:
            """A tool that exists once `grow` ran."""
            log("call added")
            return "added ran"

        server.add_tool(added)
        server.listed = listed = anyio.Event()
        await ctx.session.send_tool_list_changed()
        with anyio.fail_after(LISTED_TIMEOUT_S):  # a client that does not list at once: an error
            await listed.wait()
        return "grown"

    return server


def main() -> None:
    once = os.environ.get("HOSTILE_ONCE")
    if once:
        marker = Path(once)
        if marker.exists():
            raise SystemExit(3)
        marker.touch()
    log(f"start {os.getpid()}")
    build().run()


if __name__ == "__main__":
    main()
