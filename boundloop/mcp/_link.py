"""One MCP server's connection while its toolset is open: calls, reconnecting once, re-listing.

One task (`Link.keep`) owns the session: it connects, and when the session breaks (the server
exited, wrote what is not JSON-RPC or a message over the size limit, closed the connection) it
closes it and waits until a call asks for a new one. The calls in flight on a broken session end
at once, as errors; the next call reconnects once (a new session, its tools listed again) and
runs on it, or is an error if that fails.

A `tools/list_changed` notification (it reaches the session's `message_handler`) marks the
`ToolList` stale and wakes the session's relisting task, which lists the tools again at once into
the same `ToolList`. Before each request the loop awaits `relist()`: the listing in flight for a
notification seen so far, within `connect_timeout_s`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, cast

import anyio
import anyio.abc
import mcp_types
import pydantic
from mcp import ClientSession, MCPError
from mcp.client.session import IncomingMessage, MessageHandlerFnT

from .._core import ToolList, lone
from ..errors import ConfigurationError
from ..tools import Tool
from ._stdio import MessageTooLarge, ServerExited

OpenSession = Callable[[MessageHandlerFnT], AbstractAsyncContextManager[ClientSession]]
"""`open_session(message_handler)`: a transport and a `ClientSession` on it, not yet initialized."""


class MCPToolError(Exception):
    """A call's failure at the server: `isError`, a JSON-RPC error, a broken or lost connection
    (an `is_error` tool result)."""


@dataclasses.dataclass(eq=False)
class _Session:
    """One connection: usable while `fault` is None."""

    session: ClientSession | None = None
    fault: str | None = None
    closed: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    calls: set[anyio.CancelScope] = dataclasses.field(default_factory=set[anyio.CancelScope])
    changes: int = 0
    """`tools/list_changed` notifications seen."""
    listed: int = 0
    """`changes` when the latest listing that ended (taken or not) started."""
    changed: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    """Set by a notification; the relisting task clears it (a new event) when it starts listing."""
    progress: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    """Set (and replaced) when a listing ends or the session breaks."""

    def pulse(self) -> None:
        self.progress.set()
        self.progress = anyio.Event()


class Link:
    """A server's session, kept by `keep`, and the tools it lists."""

    def __init__(
        self,
        label: str,
        open_session: OpenSession,
        connect_timeout_s: float,
        build: Callable[[Link, Sequence[mcp_types.Tool]], list[Tool]],
    ) -> None:
        self.label = label
        self._open_session = open_session
        self._connect_timeout_s = connect_timeout_s
        self._build = build
        self.tools = ToolList(relist=self.relist)
        self._current: _Session | None = None
        self._opened = False
        self._wanted = anyio.Event()  # a call asks for a new session
        self._attempt: anyio.Event | None = None  # set when the asked-for session is settled

    async def keep(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect, serve until the session breaks, then reconnect each time a call asks.

        Raises:
            Exception: the first connection failed (`started` is never called).
        """
        while True:
            try:
                await self._serve(task_status)
            except Exception as exc:
                if not self._opened:
                    raise
                current = self._current
                assert current is not None
                self._break(current, reason(exc))
                if current.session is None:  # the asked-for session failed to start
                    self._settle()
            await self._wanted.wait()
            self._wanted = anyio.Event()

    async def _serve(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        current = self._current = _Session()
        handler = cast(MessageHandlerFnT, functools.partial(self._on_message, current))
        async with self._open_session(handler) as session:
            with anyio.fail_after(self._connect_timeout_s):
                await session.initialize()
                listed = await list_tools(session)
            tools = self._build(self, listed)
            if current.fault is not None:  # it broke while starting
                raise ConnectionError(current.fault)
            self.tools.replace(tools)
            current.session = session
            if not self._opened:
                self._opened = True
                task_status.started()
            self._settle()
            async with anyio.create_task_group() as group:
                group.start_soon(self._relisting, current, session)
                await current.closed.wait()
                group.cancel_scope.cancel()

    def _settle(self) -> None:
        if self._attempt is not None:
            self._attempt.set()
            self._attempt = None

    def _break(self, current: _Session, fault: str) -> None:
        """The session is unusable: its calls in flight end, `keep` closes it."""
        if current.fault is not None:
            return
        current.fault = fault
        current.closed.set()
        current.pulse()
        for scope in current.calls:
            scope.cancel()

    async def _on_message(self, current: _Session, message: IncomingMessage) -> None:
        """The session's `message_handler`, run in a task of the SDK's."""
        if isinstance(message, Exception):
            self._break(current, _fault(message))
        elif isinstance(message, mcp_types.ToolListChangedNotification) and current is self._current:
            current.changes += 1
            self.tools.stale = True
            current.changed.set()

    async def _relisting(self, current: _Session, session: ClientSession) -> None:
        """While the session serves: list the tools again after each `tools/list_changed`."""
        while True:
            await current.changed.wait()
            current.changed = anyio.Event()
            asked = current.changes
            try:
                with anyio.fail_after(self._connect_timeout_s):
                    listed = await list_tools(session)
                tools = self._build(self, listed)
            # Not a tool call's error: a listing the loop cannot use, or a broken session (its
            # calls end as errors, and reconnecting lists again); the tools stay as listed.
            except Exception:  # boundloop: ignore[BL003]
                pass
            else:
                if current.fault is None:
                    self.tools.replace(tools)
            current.listed = max(current.listed, asked)
            current.pulse()

    async def relist(self) -> None:
        """Await the listing of every `tools/list_changed` seen so far, within `connect_timeout_s`
        (a broken session's: no wait, reconnecting lists them)."""
        current = self._current
        if current is None:
            return
        asked = current.changes
        with anyio.move_on_after(self._connect_timeout_s):
            while current.listed < asked and current.session is not None and current.fault is None:
                await current.progress.wait()

    async def _usable(self) -> _Session:
        current = self._current
        if current is not None and current.session is not None and current.fault is None:
            return current
        if self._attempt is None:  # one reconnect for the calls that find the session broken
            self._attempt = anyio.Event()
            self._wanted.set()
        await self._attempt.wait()
        current = self._current
        if current is None or current.fault is not None or current.session is None:
            fault = "no session" if current is None else current.fault
            raise MCPToolError(f"{self.label} could not reconnect: {fault}")
        return current

    async def call(self, name: str, arguments: dict[str, Any], meta: dict[str, Any]) -> str:
        """One `tools/call` on a usable session (reconnecting once first if it is broken).

        Raises:
            MCPToolError: an `isError` result, a JSON-RPC error, a result that is not one, the
                session broke during the call, or reconnecting failed.
        """
        current = await self._usable()
        session = current.session
        assert session is not None
        with anyio.CancelScope() as scope:  # cancelled by `_break`
            current.calls.add(scope)
            try:
                result = await session.call_tool(
                    name, arguments, meta=cast(mcp_types.RequestParamsMeta, meta)
                )
            except MCPError as exc:
                if exc.error.code != mcp_types.CONNECTION_CLOSED:
                    raise MCPToolError(str(exc)) from None
                self._break(current, "closed the connection")
            except pydantic.ValidationError as exc:
                raise MCPToolError(f"{self.label} answered with an invalid result: {exc}") from None
            else:
                text = _text(result)
                if result.is_error:
                    raise MCPToolError(text or "the server reported an error")
                return text
            finally:
                current.calls.discard(scope)
        raise MCPToolError(f"{self.label} {current.fault}; the call's result is lost")


async def list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    """Every page of `tools/list`."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools


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


def _fault(error: Exception) -> str:
    """What broke the session, after the server's label."""
    if isinstance(error, MessageTooLarge):
        return f"sent {error}"
    if isinstance(error, ServerExited):
        return "exited (its output ended)"
    if isinstance(error, ValueError):
        return "sent a line that is not JSON-RPC"
    return f"broke the connection ({type(error).__name__}: {error})"


def reason(error: BaseException) -> str:
    """Why a connection failed, in a sentence's second half."""
    exc = lone(error)
    if isinstance(exc, ConfigurationError):
        return str(exc).removeprefix("MCP server ")
    if isinstance(exc, TimeoutError):
        return "no answer to initialize and tools/list in time"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
