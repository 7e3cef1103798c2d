"""The tool registry: the closed set of tools a loop may run, checked at construction, and the
server tools it offers (the API runs those: `boundloop._base.server_tools`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, cast, final

from .._base.sdk_tools import sdk_tool
from .._base.server_tools import server_tool
from ..errors import ConfigurationError
from ..tools import Tool

if TYPE_CHECKING:
    from anthropic.types import ToolUnionParam

UNKNOWN_TOOL: Final = "_unknown"
"""Metric label for a tool name the model invented: labels never come from the model."""


@final
class ToolRegistry(Mapping[str, Tool]):
    """The loop's tools by name (server tools are not among them: `server`), with the `tools`
    request parameter built once: the loop's tools, then the server tools, in the order given."""

    __slots__ = ("_params", "_tools", "server")

    def __init__(self, tools: Iterable[object]) -> None:
        """Register the tools: `Tool`s, server tool definitions, and the SDK's tool helpers
        (`@beta_tool` functions, its memory tool classes), each converted to a `Tool` once.

        Raises:
            ConfigurationError: an entry is none of these, or two tools share a name.
        """
        if not isinstance(cast(object, tools), Iterable):
            raise ConfigurationError(f"tools takes a list of tools, got {type(tools).__name__}")
        self._tools: dict[str, Tool] = {}
        server: dict[str, dict[str, Any]] = {}
        for entry in tools:
            if isinstance(entry, Mapping):
                definition = server_tool(cast(Mapping[str, object], entry))
                name = str(definition["name"])
            else:
                tool = cast(Tool, entry) if isinstance(entry, Tool) else sdk_tool(entry)
                if tool is None:
                    raise ConfigurationError(
                        f"{entry!r} is not a Tool: decorate the function with @tool or build Tool(...)"
                    )
                definition, name = None, tool.name
                entry = tool
            if name in self._tools or name in server:
                raise ConfigurationError(f"two tools are named {name!r}")
            if definition is None:
                self._tools[name] = cast(Tool, entry)
            else:
                server[name] = definition
        self.server: tuple[dict[str, Any], ...] = tuple(server.values())
        """The server tool definitions, as given."""
        self._params: list[ToolUnionParam] = [entry.to_param() for entry in self._tools.values()]
        self._params.extend(cast("ToolUnionParam", definition) for definition in self.server)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tools  # the dict's own test: Mapping's runs `__getitem__` in a try

    def get(self, name: str, default: Tool | None = None) -> Tool | None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        """The tool named `name`, or `default` (the dict's own look-up, as `__contains__`)."""
        return self._tools.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def params(self) -> list[ToolUnionParam]:
        """The `tools` parameter of a Messages API request."""
        return self._params

    def label(self, name: str) -> str:
        """The metric label for a proposed tool name: itself if registered, else `_unknown`."""
        return name if name in self._tools else UNKNOWN_TOOL
