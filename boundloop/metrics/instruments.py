"""Prometheus instruments: one object holding every instrument, bound per loop.

Nothing registers at import time. `LoopMetrics(registry)` registers the instruments on
`registry` once: a second `LoopMetrics` on the same registry shares them, so any number of
loops in one process report side by side, told apart by the `loop` label. `bind()` resolves
the labelled children of the hot path (every edge of the table) once per loop.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Final, final

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from ..statemachine.table import TRANSITIONS

TRANSITION_BUCKETS: Final = (
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
    1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0,
)  # fmt: skip
"""Time in a state: microseconds for bookkeeping states, up to minutes for propose and act."""
MODEL_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0)
"""Model request latency: tens of milliseconds to minutes."""
RUN_BUCKETS: Final = (0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
"""Whole runs: from an instant scripted run to half an hour."""
TOOL_BUCKETS: Final = (
    1e-4,
    1e-3,
    0.005,
    0.01,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
"""Tool calls: from an in-memory lookup to a minute."""

API_STOP_REASONS: Final = frozenset(
    {
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    }
)
UNKNOWN: Final = "_unknown"
TOKEN_KINDS: Final = ("input", "output", "cache_read", "cache_creation")


@final
class _Instruments:
    """Every instrument of DESIGN.md's table, registered once per registry and namespace."""

    def __init__(self, registry: CollectorRegistry, namespace: str) -> None:
        def histogram(name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> Histogram:
            return Histogram(
                name,
                doc,
                ("loop", *labels),
                namespace=namespace,
                registry=registry,
                buckets=buckets,
            )

        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(name, doc, ("loop", *labels), namespace=namespace, registry=registry)

        self.transitions = counter(
            "transitions_total", "State machine transitions taken.", ("source", "dest")
        )
        self.transition_duration = histogram(
            "transition_duration_seconds",
            "Time spent in the source state before the transition.",
            ("source", "dest"),
            TRANSITION_BUCKETS,
        )
        self.runs = counter("runs_total", "Runs ended, by stop reason.", ("stop_reason",))
        self.run_duration = histogram(
            "run_duration_seconds", "Wall-clock duration of runs.", ("stop_reason",), RUN_BUCKETS
        )
        self.runs_active = Gauge(
            "runs_active",
            "Runs in progress.",
            ("loop",),
            namespace=namespace,
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.model_requests = counter(
            "model_requests_total", "Model requests, by the API's stop_reason.", ("stop_reason",)
        )
        self.model_request_duration = histogram(
            "model_request_duration_seconds", "Model request latency.", (), MODEL_BUCKETS
        )
        self.model_tokens = counter("model_tokens_total", "Tokens reported by the API.", ("kind",))
        self.tool_calls = counter("tool_calls_total", "Tool calls answered, by outcome.", ("tool", "outcome"))
        self.tool_duration = histogram(
            "tool_duration_seconds", "Tool handler latency (all attempts).", ("tool",), TOOL_BUCKETS
        )


_shared: weakref.WeakKeyDictionary[CollectorRegistry, dict[str, _Instruments]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _instruments_for(registry: CollectorRegistry, namespace: str) -> _Instruments:
    with _lock:
        by_namespace = _shared.setdefault(registry, {})
        if namespace not in by_namespace:
            by_namespace[namespace] = _Instruments(registry, namespace)
        return by_namespace[namespace]


@final
class LoopMetrics:
    """The Prometheus instruments of boundloop, on one registry.

    Args:
        registry: where to register; default: the process's default `REGISTRY`, so an
            existing `/metrics` endpoint shows the loop with no wiring.
        namespace: the metric name prefix.
    """

    __slots__ = ("instruments", "namespace", "registry")

    def __init__(self, registry: CollectorRegistry | None = None, namespace: str = "boundloop") -> None:
        self.registry = REGISTRY if registry is None else registry
        self.namespace = namespace
        self.instruments = _instruments_for(self.registry, namespace)

    def bind(self, loop: str, tools: Iterable[str]) -> BoundMetrics:
        """Resolve the labelled children for one loop and its registered tools."""
        return BoundMetrics(self.instruments, loop, frozenset(tools))


@final
class BoundMetrics:
    """The children of one loop, resolved once; the methods the loop calls on its hot path."""

    __slots__ = (
        "_edges",
        "_instruments",
        "_loop",
        "_model_duration",
        "_model_requests",
        "_runs_active",
        "_tokens",
        "_tool_calls",
        "_tool_duration",
        "_tools",
    )

    def __init__(self, instruments: _Instruments, loop: str, tools: frozenset[str]) -> None:
        self._instruments = instruments
        self._loop = loop
        self._tools = tools
        self._edges = {
            (row["source"], row["dest"]): (
                instruments.transitions.labels(loop, row["source"], row["dest"]),
                instruments.transition_duration.labels(loop, row["source"], row["dest"]),
            )
            for row in TRANSITIONS
        }
        self._runs_active = instruments.runs_active.labels(loop)
        self._model_duration = instruments.model_request_duration.labels(loop)
        self._model_requests = {
            reason: instruments.model_requests.labels(loop, reason) for reason in (*API_STOP_REASONS, UNKNOWN)
        }
        self._tokens = {kind: instruments.model_tokens.labels(loop, kind) for kind in TOKEN_KINDS}
        self._tool_calls: dict[tuple[str, str], Counter] = {}
        self._tool_duration: dict[str, Histogram] = {}

    def tool_label(self, name: str) -> str:
        """A registered tool's name, else `_unknown`: the model never creates a time series."""
        return name if name in self._tools else UNKNOWN

    def transition(self, source: str, dest: str, duration_s: float) -> None:
        """Count an edge and observe the time spent in its source state."""
        count, duration = self._edges[(source, dest)]
        count.inc()
        duration.observe(duration_s)

    def run_started(self) -> None:
        """A run began."""
        self._runs_active.inc()

    def run_finished(self, stop_reason: str, duration_s: float, trace_id: str) -> None:
        """A run ended (also when it raised or was cancelled)."""
        self._runs_active.dec()
        self._instruments.runs.labels(self._loop, stop_reason).inc()
        self._instruments.run_duration.labels(self._loop, stop_reason).observe(
            duration_s, exemplar={"trace_id": trace_id}
        )

    def model_request(
        self,
        stop_reason: str | None,
        duration_s: float,
        trace_id: str,
        tokens: tuple[int, int, int, int] | None,
    ) -> None:
        """Count a model request; `tokens` is (input, output, cache_read, cache_creation)."""
        label = stop_reason if stop_reason in API_STOP_REASONS else UNKNOWN
        self._model_requests[label].inc()
        self._model_duration.observe(duration_s, exemplar={"trace_id": trace_id})
        if tokens is not None:
            for kind, value in zip(TOKEN_KINDS, tokens, strict=True):
                if value:
                    self._tokens[kind].inc(value)

    def tool_call(self, name: str, outcome: str, duration_s: float | None) -> None:
        """Count one answered tool_use; observe its latency when the handler ran."""
        tool = self.tool_label(name)
        key = (tool, outcome)
        child = self._tool_calls.get(key)
        if child is None:
            child = self._tool_calls[key] = self._instruments.tool_calls.labels(self._loop, tool, outcome)
        child.inc()
        if duration_s is not None:
            timer = self._tool_duration.get(tool)
            if timer is None:
                timer = self._tool_duration[tool] = self._instruments.tool_duration.labels(self._loop, tool)
            timer.observe(duration_s)
