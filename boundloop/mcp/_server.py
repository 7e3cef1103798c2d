"""MCP servers as toolsets: each listed tool becomes a `Tool` whose tool function calls the server.

The official `mcp` SDK is imported here only (the `mcp` extra). A server is connected when a run
starts (or once, by `async with loop:`) and its tools listed then; see docs/mcp.md.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import anyio
import anyio.to_thread
import httpx2
import mcp_types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client

from ..errors import ConfigurationError
from ..tools import Tool, ToolContext, check_tool_name
from ._link import Link, reason
from ._stdio import stdio_transport

IDEMPOTENCY_META: Final = "boundloop/idempotency_key"
"""The `_meta` key carrying each call's idempotency key (`task_id:step:tool_use_id`)."""

_HTTP_TIMEOUT: Final = httpx2.Timeout(30.0, read=300.0)
"""`MCPServerHTTP`'s HTTP timeouts, the SDK's defaults: 30 s to connect, write and wait for a
pooled connection, 300 s between reads (a server may hold a response stream open)."""

MAX_MESSAGE_BYTES: Final = 8 * 1024 * 1024
"""`MCPServerStdio`'s default `max_message_bytes`: a longer message breaks the connection."""


class _Server:
    """What both transports share: connecting, listing, and the listed tools as `Tool`s."""

    def __init__(
        self, *, name: str, prefix: str | None, timeout_s: float | None, connect_timeout_s: float
    ) -> None:
        if prefix is not None and not (prefix and check_tool_name(f"{prefix}x")):
            raise ConfigurationError(f"prefix {prefix!r} must be characters of [a-zA-Z0-9_-]")
        if not connect_timeout_s > 0:
            raise ConfigurationError(f"connect_timeout_s must be > 0, got {connect_timeout_s!r}")
        self.name = name
        self.prefix = prefix
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s

    @property
    def label(self) -> str:
        """The server in messages: `MCP server 'time'`."""
        return f"MCP server {self.name!r}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    def _transport(self) -> contextlib.AbstractAsyncContextManager[tuple[Any, ...]]:
        raise NotImplementedError

    async def _check(self) -> None:
        """What can be checked before connecting (a stdio command on the PATH)."""

    @contextlib.asynccontextmanager
    async def open_tools(self) -> AsyncGenerator[Sequence[Tool]]:
        """Connect, initialize and list the tools, which call the server until the context exits.

        A `ToolList`: a `tools/list_changed` notification, or a reconnect, lists them again.

        Raises:
            ConfigurationError: the server cannot be started or reached, does not answer
                `initialize` and `tools/list` within `connect_timeout_s`, or lists a tool the
                loop cannot offer (a name the API rejects, an invalid schema).
        """
        await self._check()
        link = Link(self.label, self._session, self.connect_timeout_s, self._tools)
        started = False
        try:
            async with anyio.create_task_group() as group:
                await group.start(link.keep)
                started = True
                yield link.tools
                group.cancel_scope.cancel()
        except Exception as exc:
            if started:
                raise
            raise ConfigurationError(f"{self.label} did not start: {reason(exc)}") from exc

    @contextlib.asynccontextmanager
    async def _session(self, on_message: MessageHandlerFnT) -> AsyncGenerator[ClientSession]:
        async with self._transport() as streams:
            async with ClientSession(streams[0], streams[1], message_handler=on_message) as session:
                yield session

    def _tools(self, link: Link, listed: Sequence[mcp_types.Tool]) -> list[Tool]:
        return [self._tool(link, entry) for entry in listed]

    def _tool(self, link: Link, listed: mcp_types.Tool) -> Tool:
        name = f"{self.prefix or ''}{listed.name}"
        try:
            check_tool_name(name)
        except ConfigurationError:
            raise ConfigurationError(
                f"{self.label} lists a tool named {listed.name!r}, which the Messages API rejects "
                "(1-64 characters of [a-zA-Z0-9_-])"
            ) from None
        hints = listed.annotations
        # The spec's defaults: readOnlyHint false, destructiveHint true; a tool with no
        # annotations is not called destructive here (most servers annotate nothing).
        destructive = hints is not None and not hints.read_only_hint and hints.destructive_hint is not False
        remote = listed.name

        async def call_server(_boundloop_context_: ToolContext, **arguments: Any) -> str:
            meta = {IDEMPOTENCY_META: _boundloop_context_.idempotency_key}
            return await link.call(remote, arguments, meta)

        try:
            return Tool(
                name=name,
                description=listed.description or listed.title or f"{listed.name} of {self.label}",
                input_schema=listed.input_schema,
                handler=call_server,
                side_effect=destructive,
                timeout_s=self.timeout_s,
            )
        except ConfigurationError as exc:
            raise ConfigurationError(f"{self.label}: {exc}") from None


class MCPServerStdio(_Server):
    """An MCP server run as a subprocess, spoken to over its stdin and stdout."""

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        name: str | None = None,
        prefix: str | None = None,
        timeout_s: float | None = None,
        connect_timeout_s: float = 30.0,
        errlog: TextIO | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        """Args:
        command, args, env, cwd: how to start the server (`env` is added to a minimal
            environment, as the SDK does).
        name: the server in messages (default: the command's file name).
        prefix: put before each of its tool names (to tell apart servers listing the same).
        timeout_s: each call's timeout (default: `Budget.tool_timeout_s`).
        connect_timeout_s: the start, `initialize` and `tools/list` together.
        errlog: where the server's stderr goes (default: `sys.stderr` when connecting).
        max_message_bytes: the longest line (one JSON-RPC message) read from the server; a
            longer one is not read into memory: it breaks the connection (docs/mcp.md, Faults).

        Raises:
            ConfigurationError: a bad prefix, timeout or `max_message_bytes`.
        """
        super().__init__(
            name=name or Path(command).name,
            prefix=prefix,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
        )
        self.command = command
        self.args = tuple(args)
        self.env = None if env is None else dict(env)
        self.cwd = cwd
        self.errlog = errlog
        if not max_message_bytes > 0:
            raise ConfigurationError(f"max_message_bytes must be > 0, got {max_message_bytes!r}")
        self.max_message_bytes = max_message_bytes

    async def _check(self) -> None:
        if await anyio.to_thread.run_sync(shutil.which, self.command) is None:
            raise ConfigurationError(
                f"{self.label} did not start: the command {self.command!r} is not installed (not on PATH)"
            )

    def _transport(self) -> contextlib.AbstractAsyncContextManager[tuple[Any, ...]]:
        errlog = self.errlog or _stderr()
        if sys.platform == "win32":  # no process groups: the SDK's transport (no size limit)
            parameters = StdioServerParameters(
                command=self.command, args=list(self.args), env=self.env, cwd=self.cwd
            )
            return stdio_client(parameters, errlog=errlog)
        return stdio_transport(
            self.command,
            self.args,
            env=self.env,
            cwd=self.cwd,
            errlog=errlog,
            max_message_bytes=self.max_message_bytes,
        )


class MCPServerHTTP(_Server):
    """An MCP server reached over streamable HTTP."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        prefix: str | None = None,
        timeout_s: float | None = None,
        connect_timeout_s: float = 30.0,
    ) -> None:
        """Args:
        url: the server's MCP endpoint (`http://127.0.0.1:8000/mcp`).
        headers: sent with every request (e.g. `Authorization`).
        name, prefix, timeout_s, connect_timeout_s: as for `MCPServerStdio` (name default: the URL).

        Raises:
            ConfigurationError: a bad prefix or timeout.
        """
        super().__init__(
            name=name or url, prefix=prefix, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s
        )
        self.url = url
        self.headers = dict(headers or {})

    def _transport(self) -> contextlib.AbstractAsyncContextManager[tuple[Any, ...]]:
        return _http(self.url, self.headers)


@contextlib.asynccontextmanager
async def _http(url: str, headers: dict[str, str]) -> AsyncGenerator[tuple[Any, ...]]:
    # Building the client reads the CA certificates from disk: in a worker thread.
    client = await anyio.to_thread.run_sync(
        lambda: httpx2.AsyncClient(headers=headers, timeout=_HTTP_TIMEOUT)
    )
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield tuple(streams)


def _stderr() -> TextIO:
    """`sys.stderr` if it is a file the server can write to, else the process's own stderr."""
    try:
        sys.stderr.fileno()
    except (OSError, ValueError, AttributeError):
        return sys.__stderr__ or sys.stderr
    return sys.stderr
