"""OpenTelemetry tracing of runs, following the GenAI semantic conventions (docs/otel.md).

`AgentLoop(tracer_provider=...)` traces every run to that provider; by default a run is traced
to the global provider when one is set (`opentelemetry.trace.set_tracer_provider`), and costs
nothing otherwise: this package imports OpenTelemetry only once a run is traced.
"""

from __future__ import annotations

from ._setup import SCOPE, Tracing

__all__ = ["SCOPE", "Tracing"]
