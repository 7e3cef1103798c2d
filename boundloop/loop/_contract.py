"""A contract's spec and wiring, its MCP servers built (`boundloop.mcp`, the `mcp` extra).

Above `_core` (which `boundloop.mcp` imports): `AgentLoop.from_contract` is the one caller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

import boundloop._core as _core  # pyright reads `from .. import _core` as a private name

from .._base.mcp_spec import MCPServerSpec
from .._core import Toolset, Wiring
from ..errors import ConfigurationError
from ..policy import Approver, SignalHandler, SuccessCheck
from ..settings import LoopSpec
from ..tools import Handler

if TYPE_CHECKING:
    from ..contract import Contract


def contract_wiring(
    contract: Contract,
    wiring: Wiring,
    handlers: Mapping[str, Handler],
    signal_handlers: Mapping[str, SignalHandler] | None = None,
    *,
    approve: Approver | None = None,
    success: SuccessCheck | None = None,
) -> tuple[LoopSpec, Wiring]:
    """The spec of a checked contract (`_core.contract_parts`) and `wiring` with its tools: the
    declared tools bound to `handlers`, the declared MCP servers built.

    Raises:
        ConfigurationError: what `contract_parts` raises; the contract declares MCP servers and
            the `mcp` extra is not installed; a variable a server's declaration names is not set.
    """
    spec, tools = _core.contract_parts(
        contract, handlers=handlers, signal_handlers=signal_handlers, approve=approve, success=success
    )
    toolsets = declared_toolsets(list(spec.mcp_servers))
    return spec, dataclasses.replace(wiring, tools=[*tools, *toolsets])


def declared_toolsets(servers: list[MCPServerSpec]) -> list[Toolset]:
    """The declared MCP servers, built.

    Raises:
        ConfigurationError: the `mcp` extra is not installed, or a variable a declaration names
            is not set.
    """
    if not servers:
        return []
    try:
        from ..mcp import declared_server
    except ModuleNotFoundError as exc:
        names = ", ".join(repr(server.name) for server in servers)
        raise ConfigurationError(
            f"the contract declares MCP servers ({names}), which need the mcp extra "
            f"({exc.name} is not installed): pip install 'boundloop[mcp]'"
        ) from None
    return [declared_server(server) for server in servers]
