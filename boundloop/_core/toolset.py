"""A toolset: tools known only once connected (an MCP server of `boundloop.mcp`); see `connect`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, cast, runtime_checkable

from .._mcp_spec import MCPServerSpec
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


def split_toolsets(
    tools: Iterable[Tool | Mapping[str, object] | Toolset],
) -> tuple[list[Tool | Mapping[str, object]], tuple[Toolset, ...]]:
    """The tools and server tools, and the toolsets, of `AgentLoop(tools=...)`."""
    if not isinstance(cast(object, tools), Iterable) or isinstance(cast(object, tools), str | bytes):
        return cast(list[Tool | Mapping[str, object]], tools), ()  # ToolRegistry names the mistake
    plain: list[Tool | Mapping[str, object]] = []
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
