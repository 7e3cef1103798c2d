"""Deprecated alias of `boundloop.signals` (kept for one release)."""

from __future__ import annotations

import warnings

from ..signals import DEFAULT_HANDLERS as DEFAULT_HANDLERS
from ..signals import Route as Route
from ..signals import SignalContext as SignalContext
from ..signals import SignalHandler as SignalHandler
from ..signals import Verdict as Verdict
from ..signals import stop as stop

warnings.warn(
    "boundloop.handlers.stops is deprecated: import the stop-signal handlers' types from boundloop.signals",
    DeprecationWarning,
    stacklevel=2,
)
