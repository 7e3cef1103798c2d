"""Prometheus metrics for boundloop: instruments and exposition.

`LoopMetrics` (imported from `boundloop`) holds every instrument (docs/metrics.md), `RunMetrics`
records a run's events into them; `serve()` and `asgi_app()` expose them. See docs/metrics.md.
"""

from __future__ import annotations

from .exposition import MetricsApp as MetricsApp
from .exposition import MetricsServer as MetricsServer
from .exposition import asgi_app as asgi_app
from .exposition import exposed_registry as exposed_registry
from .exposition import multiprocess_registry as multiprocess_registry
from .exposition import render as render
from .exposition import serve as serve
from .instruments import BoundMetrics as BoundMetrics
from .instruments import multiprocess_mode as multiprocess_mode
from .observer import RunMetrics as RunMetrics

__all__ = [
    "BoundMetrics",
    "MetricsApp",
    "MetricsServer",
    "RunMetrics",
    "asgi_app",
    "exposed_registry",
    "multiprocess_mode",
    "multiprocess_registry",
    "render",
    "serve",
]
