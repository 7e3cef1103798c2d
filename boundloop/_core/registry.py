"""The tool registry: the closed set of tools a loop may run, checked at construction."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Final, cast, final

from ..errors import ConfigurationError
from ..tools import Tool

if TYPE_CHECKING:
    from anthropic.types import ToolParam

UNKNOWN_TOOL: Final = "_unknown"
"""Metric label for a tool name the model invented: labels never come from the model."""


@final
class ToolRegistry(Mapping[str, Tool]):
    """Tools by name, with the `tools` request parameter built once."""

    __slots__ = ("_params", "_tools")

    def __init__(self, tools: Iterable[Tool]) -> None:
        """Register the tools.

        Raises:
            ConfigurationError: an entry is not a `Tool`, or two tools share a name.
        """
        if not isinstance(cast(object, tools), Iterable):
            raise ConfigurationError(f"tools takes a list of tools, got {type(tools).__name__}")
        self._tools: dict[str, Tool] = {}
        for entry in tools:
            if not isinstance(cast(object, entry), Tool):
                raise ConfigurationError(
                    f"{entry!r} is not a Tool: decorate the function with @tool or build Tool(...)"
                )
            if entry.name in self._tools:
                raise ConfigurationError(f"two tools are named {entry.name!r}")
            self._tools[entry.name] = entry
        self._params: list[ToolParam] = [entry.to_param() for entry in self._tools.values()]

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def params(self) -> list[ToolParam]:
        """The `tools` parameter of a Messages API request."""
        return self._params

    def label(self, name: str) -> str:
        """The metric label for a proposed tool name: itself if registered, else `_unknown`."""
        return name if name in self._tools else UNKNOWN_TOOL
