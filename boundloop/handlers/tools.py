"""Deprecated alias of `boundloop.tools` (kept for one release)."""

from __future__ import annotations

import warnings

from ..tools import RetryableToolError as RetryableToolError
from ..tools import Tool as Tool
from ..tools import ToolContext as ToolContext
from ..tools import ToolInputError as ToolInputError
from ..tools import idempotency_key as idempotency_key
from ..tools import tool as tool

warnings.warn(
    "boundloop.handlers.tools is deprecated: import Tool, tool and ToolContext from boundloop.tools",
    DeprecationWarning,
    stacklevel=2,
)
