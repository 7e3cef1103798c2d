"""MCP servers as tools (`pip install 'boundloop[mcp]'`): pass them in `AgentLoop(tools=[...])`.

Each tool a server lists passes the same gate as a local tool; see docs/mcp.md.
"""

from __future__ import annotations

from .._lazy import claim as _claim
from ._declared import declared_server
from ._link import MCPToolError
from ._server import IDEMPOTENCY_META, MAX_MESSAGE_BYTES, MCPServerHTTP, MCPServerStdio

__all__ = [
    "IDEMPOTENCY_META",
    "MAX_MESSAGE_BYTES",
    "MCPServerHTTP",
    "MCPServerStdio",
    "MCPToolError",
    "declared_server",
]

_claim(__name__, *(globals()[name] for name in __all__))
