"""OpenTelemetry tracing of runs, following the GenAI semantic conventions (docs/otel.md).

`Observers(tracing=TraceSettings(provider=...))` traces every run of a loop to that provider; by
default a run is traced to the global provider when one is set
(`opentelemetry.trace.set_tracer_provider`), and costs nothing otherwise: this package imports
OpenTelemetry only once a run is traced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import claim as _claim
from ._request import request_attributes, server_attributes
from ._setup import (
    SCOPE,
    TracedLoop,
    TraceSettings,
    Tracing,
    global_tracing,
    is_provider,
    run_tracing,
    tracing_for,
)

if TYPE_CHECKING:
    from ..state import LoopState
    from ._run import RunSpans

__all__ = [
    "SCOPE",
    "TraceSettings",
    "TracedLoop",
    "Tracing",
    "global_tracing",
    "is_provider",
    "request_attributes",
    "run_tracing",
    "server_attributes",
    "start_run",
    "tracing_for",
]


def start_run(
    config: TracedLoop, state: LoopState, tracing: Tracing, *, adopt_trace_id: bool
) -> RunSpans | None:
    """The spans of a run (`invoke_agent`, its `chat` and `execute_tool` spans), or None when
    the tracer does not record. OpenTelemetry is imported here, once a run is traced."""
    from ._run import start_run as spans_of

    return spans_of(config, state, tracing, adopt_trace_id=adopt_trace_id)


_claim(__name__, *(globals()[name] for name in __all__))
