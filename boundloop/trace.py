"""Deprecated names of the run's events (kept for one release): see `boundloop.events`.

`TraceEvent` is the `Event` union (one typed model per kind); `read_trace` and `write_trace` are
`read_events` and `write_events`, which read and write JSON lines with a `schema_version` and
still read this release's earlier trace files. Importing this module warns (`DeprecationWarning`).
"""

from __future__ import annotations

import warnings

from ._recorded import Deferred as Deferred
from ._recorded import is_sdk_object as is_sdk_object
from ._recorded import json_default as json_default
from ._recorded import redact_strings as redact_strings
from .events import EVENT_KINDS, Event, EventKind
from .events import read_events as read_trace
from .events import write_events as write_trace

TraceEvent = Event
"""Deprecated: the `Event` union of `boundloop.events`."""

TraceKind = EventKind
"""Deprecated: `boundloop.events.EventKind`."""

TRACE_KINDS = EVENT_KINDS
"""Deprecated: `boundloop.events.EVENT_KINDS`."""

__all__ = [
    "TRACE_KINDS",
    "Deferred",
    "TraceEvent",
    "TraceKind",
    "is_sdk_object",
    "json_default",
    "read_trace",
    "redact_strings",
    "write_trace",
]

warnings.warn(
    "boundloop.trace is deprecated: import Event, read_events and write_events from boundloop.events "
    "(TraceEvent is Event, read_trace is read_events, write_trace is write_events)",
    DeprecationWarning,
    stacklevel=2,
)
