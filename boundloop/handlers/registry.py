"""Deprecated: `ToolRegistry` is what `AgentLoop.tools` returns (kept for one release)."""

from __future__ import annotations

import warnings

from .._core import ToolRegistry as ToolRegistry

warnings.warn(
    "boundloop.handlers.registry is deprecated: AgentLoop.tools is the registry",
    DeprecationWarning,
    stacklevel=2,
)
