"""A contract's `AgentLoop` settings, its MCP servers built (`boundloop.mcp`, the `mcp` extra).

Above `_core` (which `boundloop.mcp` imports): `AgentLoop.from_contract` is the one caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import _core
from ._core import DEFAULT, Default, Toolset
from ._mcp_spec import MCPServerSpec
from .errors import ConfigurationError
from .metrics.instruments import LoopMetrics
from .policy import Approver, SuccessCheck
from .signals import SignalHandler
from .tools import Handler

if TYPE_CHECKING:
    from .contract import Contract


def contract_settings(
    contract: Contract,
    handlers: Mapping[str, Handler],
    signal_handlers: Mapping[str, SignalHandler] | None = None,
    *,
    metrics: LoopMetrics | Default | None = DEFAULT,
    approve: Approver | None = None,
    success: SuccessCheck | None = None,
) -> dict[str, Any]:
    """The `AgentLoop` keyword arguments of a checked contract: `_core.loop_settings`, with the
    declared MCP servers built and in `tools`, and `metrics` unless the contract turns them off.

    Raises:
        ConfigurationError: what `loop_settings` raises; the contract declares MCP servers and
            the `mcp` extra is not installed; a variable a server's declaration names is not set.
    """
    settings = _core.loop_settings(
        contract, handlers=handlers, signal_handlers=signal_handlers, approve=approve, success=success
    )
    settings.setdefault("metrics", metrics)
    servers = [MCPServerSpec.model_validate(server) for server in contract.mcp_servers]
    settings["tools"] = [*settings["tools"], *declared_toolsets(servers)]
    return settings


def declared_toolsets(servers: list[MCPServerSpec]) -> list[Toolset]:
    """The declared MCP servers, built.

    Raises:
        ConfigurationError: the `mcp` extra is not installed, or a variable a declaration names
            is not set.
    """
    if not servers:
        return []
    try:
        from .mcp import declared_server
    except ModuleNotFoundError as exc:
        names = ", ".join(repr(server.name) for server in servers)
        raise ConfigurationError(
            f"the contract declares MCP servers ({names}), which need the mcp extra "
            f"({exc.name} is not installed): pip install 'boundloop[mcp]'"
        ) from None
    return [declared_server(server) for server in servers]
