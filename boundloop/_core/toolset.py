"""A toolset: tools known only once connected (an MCP server of `boundloop.mcp`); see `connect`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, cast, final, overload, runtime_checkable

from .._base.mcp_spec import MCPServerSpec
from ..tools import Tool


@runtime_checkable
class Toolset(Protocol):
    """Tools listed when connected: `open_tools()` connects and yields them until it exits."""

    @property
    def label(self) -> str:
        """Its name in error messages."""
        ...

    def open_tools(self) -> AbstractAsyncContextManager[Sequence[Tool]]:
        """Connect, list the tools, keep them callable until the context exits."""
        ...


@final
class ToolList(Sequence[Tool]):
    """What a toolset's `open_tools()` yields to have the loop follow changes of its tools: the
    tools as listed now, and `version`, counting the listings. A toolset whose tools changed sets
    `stale`; before each request the run awaits `relist()` of a stale list and offers the tools
    of the latest listing (`_core.connect`)."""

    __slots__ = ("_relist", "_tools", "stale", "version")

    def __init__(
        self, tools: Iterable[Tool] = (), *, relist: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        self._tools = tuple(tools)
        self._relist = relist
        self.version = 0
        self.stale = False
        """The toolset said its tools changed: `relist()` lists them again."""

    def replace(self, tools: Iterable[Tool]) -> None:
        """The tools as listed again (a new version, even if they are the same)."""
        self._tools = tuple(tools)
        self.version += 1

    async def relist(self) -> None:
        """If `stale`, the toolset's `relist`: the tools listed again, or a listing under way
        awaited (it keeps them if it cannot)."""
        if self.stale and self._relist is not None:
            self.stale = False
            await self._relist()

    @overload
    def __getitem__(self, index: int) -> Tool: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Tool]: ...
    def __getitem__(self, index: int | slice) -> Tool | Sequence[Tool]:
        return self._tools[index]

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolList({[tool.name for tool in self._tools]!r}, version={self.version})"


def split_toolsets(
    tools: Iterable[object],
) -> tuple[list[object], tuple[Toolset, ...]]:
    """The tools, server tools and SDK tool helpers (`ToolRegistry` checks each), and the
    toolsets, of `AgentLoop(tools=...)`."""
    if not isinstance(cast(object, tools), Iterable) or isinstance(cast(object, tools), str | bytes):
        return cast(list[object], tools), ()  # ToolRegistry names the mistake
    plain: list[object] = []
    toolsets: list[Toolset] = []
    for entry in tools:
        if isinstance(entry, Toolset):
            toolsets.append(entry)
        else:
            plain.append(entry)
    return plain, tuple(toolsets)


def lone(error: BaseException) -> BaseException:
    """The one exception inside nested groups of one (task groups wrap what failed), else `error`."""
    while isinstance(error, BaseExceptionGroup):
        members = cast(tuple[BaseException, ...], error.exceptions)
        if len(members) != 1:
            break
        error = members[0]
    return error  # pyright: ignore[reportUnknownVariableType]


def declared_specs(toolsets: Iterable[Toolset]) -> tuple[MCPServerSpec, ...]:
    """The declarations of the toolsets built from a contract (`boundloop.mcp`), in order."""
    declared = (getattr(toolset, "declared", None) for toolset in toolsets)
    return tuple(spec for spec in declared if isinstance(spec, MCPServerSpec))
