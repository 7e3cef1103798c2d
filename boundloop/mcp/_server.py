"""MCP servers as toolsets: each listed tool becomes a `Tool` whose tool function calls the server.

The official `mcp` SDK is imported here only (the `mcp` extra). A server is connected when a run
starts (or once, by `async with loop:`) and its tools listed then; see docs/mcp.md.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO, cast

import anyio
import anyio.to_thread
import mcp_types
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from .._core import lone
from ..errors import ConfigurationError
from ..tools import Tool, ToolContext, check_tool_name

IDEMPOTENCY_META: Final = "boundloop/idempotency_key"
"""The `_meta` key carrying each call's idempotency key (`task_id:step:tool_use_id`)."""


class MCPToolError(Exception):
    """The server answered a call with `isError`, or with a JSON-RPC error: an `is_error` result."""


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
        """Connect, initialize and list the tools, which call this session until the context exits.

        Raises:
            ConfigurationError: the server cannot be started or reached, does not answer
                `initialize` and `tools/list` within `connect_timeout_s`, or lists a tool the
                loop cannot offer (a name the API rejects, an invalid schema).
        """
        await self._check()
        started = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                with anyio.fail_after(self.connect_timeout_s):
                    await session.initialize()
                    listed = await _list_tools(session)
                tools = [self._tool(session, entry) for entry in listed]
                started = True
                yield tools
        except Exception as exc:
            if started:
                raise
            raise ConfigurationError(f"{self.label} did not start: {_reason(exc)}") from exc

    def _tool(self, session: ClientSession, listed: mcp_types.Tool) -> Tool:
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
            return await _call(session, remote, arguments, _boundloop_context_)

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
    ) -> None:
        """Args:
        command, args, env, cwd: how to start the server (`env` is added to a minimal
            environment, as the SDK does).
        name: the server in messages (default: the command's file name).
        prefix: put before each of its tool names (to tell apart servers listing the same).
        timeout_s: each call's timeout (default: `Budget.tool_timeout_s`).
        connect_timeout_s: the start, `initialize` and `tools/list` together.
        errlog: where the server's stderr goes (default: `sys.stderr` when connecting).

        Raises:
            ConfigurationError: a bad prefix or timeout.
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

    async def _check(self) -> None:
        if await anyio.to_thread.run_sync(shutil.which, self.command) is None:
            raise ConfigurationError(
                f"{self.label} did not start: the command {self.command!r} is not installed (not on PATH)"
            )

    def _transport(self) -> contextlib.AbstractAsyncContextManager[tuple[Any, ...]]:
        parameters = StdioServerParameters(
            command=self.command, args=list(self.args), env=self.env, cwd=self.cwd
        )
        return stdio_client(parameters, errlog=self.errlog or _stderr())


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
    client = await anyio.to_thread.run_sync(lambda: create_mcp_http_client(headers=headers))
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield tuple(streams)


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools


async def _call(session: ClientSession, name: str, arguments: dict[str, Any], context: ToolContext) -> str:
    """One `tools/call`, its idempotency key in `_meta`; the result's content as text.

    Raises:
        MCPToolError: an `isError` result or a JSON-RPC error (an `is_error` tool result).
    """
    try:
        meta = cast(mcp_types.RequestParamsMeta, {IDEMPOTENCY_META: context.idempotency_key})
        result = await session.call_tool(name, arguments, meta=meta)
    except MCPError as exc:
        raise MCPToolError(str(exc)) from None
    text = _text(result)
    if result.is_error:
        raise MCPToolError(text or "the server reported an error")
    return text


def _text(result: mcp_types.CallToolResult) -> str:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{block.type} content omitted]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


def _reason(error: BaseException) -> str:
    exc = lone(error)
    if isinstance(exc, ConfigurationError):
        return str(exc).removeprefix("MCP server ")
    if isinstance(exc, TimeoutError):
        return "no answer to initialize and tools/list in time"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _stderr() -> TextIO:
    """`sys.stderr` if it is a file the server can write to, else the process's own stderr."""
    try:
        sys.stderr.fileno()
    except (OSError, ValueError, AttributeError):
        return sys.__stderr__ or sys.stderr
    return sys.stderr
