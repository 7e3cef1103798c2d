"""Prometheus instruments: one object holding every instrument, bound per loop.

Nothing registers at import time. `LoopMetrics(registry)` registers the instruments on
`registry` once: a second `LoopMetrics` on the same registry shares them, so any number of
loops in one process report side by side, told apart by the `loop` label. `bind()` resolves
the labelled children of the hot path (every edge of the table, every stop reason, every token
kind) once per loop, so a transition costs a dict lookup, an `inc()` and an `observe()`.

Label values are bounded: edges come from the transition table, stop reasons from the API's
documented set and `StopReason`, tool names from the loop's registry, outcomes from
`Outcome`. Anything else is counted under `_unknown`, so a hostile model cannot create series.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable
from typing import Final, final

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from .._records import OUTCOMES, StopReason
from ..statemachine.table import TRANSITIONS

TRANSITION_BUCKETS: Final = (
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
"""Time in the source state: tens of microseconds for the bookkeeping states (assemble, validate,
observe), seconds to minutes for `propose` (the model call) and `act` (the tools)."""
MODEL_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0)
"""Model request latency: tens of milliseconds (cached, short) to minutes (long outputs)."""
RUN_BUCKETS: Final = (0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
"""Whole runs: from an instant scripted run to half an hour."""
TOOL_BUCKETS: Final = (1e-4, 1e-3, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
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
"""The Messages API's documented `stop_reason` values: the `stop_reason` label of model requests."""
RUN_STOP_REASONS: Final = frozenset(str(reason) for reason in StopReason)
"""`StopReason` values: the `stop_reason` label of runs."""
TOOL_OUTCOMES: Final = frozenset(OUTCOMES)
"""`Outcome` values: the `outcome` label of tool calls."""
EXEMPLAR_MIN_S: Final = 1e-3
"""Observations at least this long carry the run's `trace_id` as an exemplar (runs always do).

An exemplar costs ~3 µs per observation in prometheus_client (validation, a tuple, a clock
read): about as much as the observation itself. Sub-millisecond bookkeeping transitions are
not what anyone follows to a trace, so they skip it; model calls, tools and slow states keep it.
"""
UNKNOWN: Final = "_unknown"
"""The label value for anything outside the bounded sets above."""
TOKEN_KINDS: Final = ("input", "output", "cache_read", "cache_creation")
"""The `kind` label of `boundloop_model_tokens_total`, in the order `model_request` takes them."""


def multiprocess_mode() -> bool:
    """Whether prometheus_client runs in multiprocess mode (`PROMETHEUS_MULTIPROC_DIR` is set).

    In that mode values live in mmap files shared by the worker processes and exemplars are
    not stored, so boundloop does not attach them.
    """
    return "PROMETHEUS_MULTIPROC_DIR" in os.environ or "prometheus_multiproc_dir" in os.environ


@final
class _Instruments:
    """Every instrument of docs/metrics.md's table, registered once per registry and namespace."""

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
            # Multiprocess mode: sum over the live processes; a dead worker's runs drop out.
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

    Instruments are registered once per (registry, namespace): every `LoopMetrics` on the same
    registry shares them, so two loops never raise "Duplicated timeseries".

    Args:
        registry: where to register; default: the process's default `REGISTRY`, so an
            existing `/metrics` endpoint (or `prometheus_client.start_http_server`) shows the
            loop with no wiring.
        namespace: the metric name prefix.
        exemplars: attach the run's `trace_id` as an exemplar to the duration histograms
            (visible when scraped as OpenMetrics) for observations of at least
            `EXEMPLAR_MIN_S`, and to every run's duration. Default: on, except in prometheus_client's
            multiprocess mode, which does not store exemplars.
    """

    __slots__ = ("exemplars", "instruments", "namespace", "registry")

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        namespace: str = "boundloop",
        *,
        exemplars: bool | None = None,
    ) -> None:
        self.registry = REGISTRY if registry is None else registry
        self.namespace = namespace
        self.exemplars = not multiprocess_mode() if exemplars is None else exemplars
        self.instruments = _instruments_for(self.registry, namespace)

    def bind(self, loop: str, tools: Iterable[str]) -> BoundMetrics:
        """Resolve the labelled children for one loop and its registered tools.

        Args:
            loop: the `loop` label (`AgentLoop(name=...)`).
            tools: the registered tool names; any other name is counted as `_unknown`.

        Returns:
            The children of that loop, with the methods the loop calls on its hot path.
        """
        return BoundMetrics(self.instruments, loop, frozenset(tools), exemplars=self.exemplars)


@final
class BoundMetrics:
    """The children of one loop, resolved once; the methods the loop calls on its hot path."""

    __slots__ = (
        "_edges",
        "_exemplars",
        "_instruments",
        "_loop",
        "_model_duration",
        "_model_requests",
        "_run_duration",
        "_runs",
        "_runs_active",
        "_tokens",
        "_tool_calls",
        "_tool_duration",
        "_tools",
    )

    def __init__(
        self, instruments: _Instruments, loop: str, tools: frozenset[str], *, exemplars: bool = True
    ) -> None:
        self._instruments = instruments
        self._loop = loop
        self._tools = tools
        self._exemplars = exemplars
        # Every edge of the table, resolved now: the hot path never calls `.labels()`. The
        # children's bound methods are stored, saving two attribute lookups per transition.
        self._edges = {
            (row["source"], row["dest"]): (
                instruments.transitions.labels(loop, row["source"], row["dest"]).inc,
                instruments.transition_duration.labels(loop, row["source"], row["dest"]).observe,
            )
            for row in TRANSITIONS
        }
        self._runs_active = instruments.runs_active.labels(loop)
        # Counters start at zero for every bounded value, so `rate()` sees the first increase
        # and a dashboard's ratio is 0, not absent.
        self._runs = {
            reason: instruments.runs.labels(loop, reason) for reason in (*RUN_STOP_REASONS, UNKNOWN)
        }
        self._run_duration: dict[str, Histogram] = {}
        self._model_duration = instruments.model_request_duration.labels(loop)
        self._model_requests = {
            reason: instruments.model_requests.labels(loop, reason) for reason in (*API_STOP_REASONS, UNKNOWN)
        }
        self._tokens = tuple(instruments.model_tokens.labels(loop, kind) for kind in TOKEN_KINDS)
        self._tool_calls: dict[tuple[str, str], Counter] = {
            (tool, outcome): instruments.tool_calls.labels(loop, tool, outcome)
            for tool in (*sorted(tools), UNKNOWN)
            for outcome in OUTCOMES
        }
        # Histograms appear on first use (a series per bucket: most stop reasons never happen);
        # their keys are bounded by the enums and the registry, so these dicts are too.
        self._tool_duration: dict[str, Histogram] = {}

    @property
    def loop(self) -> str:
        """The `loop` label."""
        return self._loop

    def tool_label(self, name: str) -> str:
        """A registered tool's name, else `_unknown`: the model never creates a time series."""
        return name if name in self._tools else UNKNOWN

    def transition(self, source: str, dest: str, duration_s: float, trace_id: str | None = None) -> None:
        """Count an edge and observe the time spent in its source state.

        Args:
            source: the state left.
            dest: the state entered.
            duration_s: seconds spent in `source`.
            trace_id: the run's trace id, attached as an exemplar when given and the
                observation is at least `EXEMPLAR_MIN_S`.
        """
        inc, observe = self._edges[(source, dest)]
        inc()
        if trace_id is not None and duration_s >= EXEMPLAR_MIN_S and self._exemplars:
            observe(duration_s, {"trace_id": trace_id})
        else:
            observe(duration_s)

    def run_started(self) -> None:
        """A run began."""
        self._runs_active.inc()

    def run_finished(self, stop_reason: str, duration_s: float, trace_id: str) -> None:
        """A run ended (also when it raised or was cancelled).

        Args:
            stop_reason: the run's `StopReason`; any other value is counted as `_unknown`.
            duration_s: the run's wall-clock seconds.
            trace_id: the run's trace id, attached as an exemplar.
        """
        self._runs_active.dec()
        label = stop_reason if stop_reason in RUN_STOP_REASONS else UNKNOWN
        self._runs[label].inc()
        timer = self._run_duration.get(label)
        if timer is None:
            timer = self._run_duration[label] = self._instruments.run_duration.labels(self._loop, label)
        if self._exemplars:
            timer.observe(duration_s, {"trace_id": trace_id})
        else:
            timer.observe(duration_s)

    def model_request(
        self,
        stop_reason: str | None,
        duration_s: float,
        trace_id: str,
        tokens: tuple[int, int, int, int] | None,
    ) -> None:
        """Count a model request and its tokens, and observe its latency.

        Args:
            stop_reason: the API's `stop_reason`; a value outside the documented set is
                counted as `_unknown`.
            duration_s: the request's latency.
            trace_id: the run's trace id, attached as an exemplar when the request took at
                least `EXEMPLAR_MIN_S`.
            tokens: (input, output, cache_read, cache_creation), from the response's `usage`.
        """
        label = stop_reason if stop_reason in API_STOP_REASONS else UNKNOWN
        self._model_requests[label].inc()
        if duration_s >= EXEMPLAR_MIN_S and self._exemplars:
            self._model_duration.observe(duration_s, {"trace_id": trace_id})
        else:
            self._model_duration.observe(duration_s)
        if tokens is not None:
            # Unrolled: this runs once per model call, and most calls report no cache tokens.
            input_tokens, output_tokens, cache_read, cache_creation = tokens
            counters = self._tokens
            if input_tokens:
                counters[0].inc(input_tokens)
            if output_tokens:
                counters[1].inc(output_tokens)
            if cache_read:
                counters[2].inc(cache_read)
            if cache_creation:
                counters[3].inc(cache_creation)

    def tool_call(
        self, name: str, outcome: str, duration_s: float | None, trace_id: str | None = None
    ) -> None:
        """Count one answered tool_use; observe its latency when the handler ran.

        Args:
            name: the tool name the model asked for; unregistered names count as `_unknown`.
            outcome: how the call was answered (`Outcome`); other values count as `_unknown`.
            duration_s: the handler's seconds over all attempts, or None when it never ran.
            trace_id: the run's trace id, attached as an exemplar when given and the
                handler took at least `EXEMPLAR_MIN_S`.
        """
        # Fast path: the dict holds every registered tool x outcome. A miss is bounded first and
        # cached under the bounded key only, so invented names never grow the dict.
        child = self._tool_calls.get((name, outcome))
        if child is None:
            key = (self.tool_label(name), outcome if outcome in TOOL_OUTCOMES else UNKNOWN)
            child = self._tool_calls.get(key)
            if child is None:
                child = self._tool_calls[key] = self._instruments.tool_calls.labels(self._loop, *key)
        child.inc()
        if duration_s is None:
            return
        timer = self._tool_duration.get(name)
        if timer is None:
            tool = self.tool_label(name)
            timer = self._tool_duration.get(tool)
            if timer is None:
                timer = self._tool_duration[tool] = self._instruments.tool_duration.labels(self._loop, tool)
        if trace_id is not None and duration_s >= EXEMPLAR_MIN_S and self._exemplars:
            timer.observe(duration_s, {"trace_id": trace_id})
        else:
            timer.observe(duration_s)
