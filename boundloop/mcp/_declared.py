"""The MCP servers a contract declares, built: `AgentLoop.from_contract` passes them as toolsets.

A built server remembers its declaration (`declared`), so `to_contract()` writes it back as
declared: its environment's names and its headers' `${NAME}` references, not their values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pydantic

from .._base.mcp_spec import MCPServerSpec, resolved
from ..errors import ConfigurationError
from ._server import MCPServerHTTP, MCPServerStdio


class DeclaredStdio(MCPServerStdio):
    """A stdio server built from a contract's declaration."""

    declared: MCPServerSpec


class DeclaredHTTP(MCPServerHTTP):
    """A streamable-HTTP server built from a contract's declaration."""

    declared: MCPServerSpec


def declared_server(
    spec: MCPServerSpec | Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> DeclaredStdio | DeclaredHTTP:
    """The server a declaration stands for (an entry of a contract's `mcp_servers`, docs/mcp.md),
    its environment and headers read from `environ` (default: the process's environment).

    Raises:
        ConfigurationError: the declaration is invalid, a variable it names is not set, or a
            bad prefix.
    """
    if not isinstance(spec, MCPServerSpec):
        try:
            spec = MCPServerSpec.model_validate(spec)
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            raise ConfigurationError(f"MCP server's {where}: {message}" if where else message) from None
    env, headers = resolved(spec, os.environ if environ is None else environ)
    server: DeclaredStdio | DeclaredHTTP
    if spec.command is not None:
        server = DeclaredStdio(
            spec.command,
            spec.args,
            env=env or None,
            cwd=spec.cwd,
            name=spec.name,
            prefix=spec.prefix,
            timeout_s=spec.timeout_s,
            connect_timeout_s=spec.connect_timeout_s,
        )
    else:
        assert spec.url is not None  # the spec has one of the two
        server = DeclaredHTTP(
            spec.url,
            headers=headers,
            name=spec.name,
            prefix=spec.prefix,
            timeout_s=spec.timeout_s,
            connect_timeout_s=spec.connect_timeout_s,
        )
    server.declared = spec
    return server
