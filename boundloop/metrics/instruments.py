"""Prometheus instruments: the metrics of docs/metrics.md's table, bound per loop.

Nothing registers at import time. `LoopMetrics(registry)` registers the metrics on `registry`
once: a second `LoopMetrics` on the same registry shares them, so any number of loops in one
process report side by side, told apart by the `loop` label. The values live in plain Python
(`_store.LocalStore`, one prometheus_client collector), not in prometheus_client instruments:
`bind()` resolves the hot path's cells (every edge of the table, every stop reason, every token
and server tool kind) once per loop and thread, so a transition costs a thread-local lookup, a dict lookup and
a `bisect` into its bucket counts. In multiprocess mode they are prometheus_client's own
instruments (`_client.ClientInstruments`), whose values reach the shared mmap files.

Label values are bounded: edges come from the transition table, stop reasons from the API's
documented set and `StopReason`, tool names from the loop's registry, outcomes from
`Outcome`. Anything else is counted under `_unknown` (a server tool use of a kind the installed
SDK does not model, under `other`), so a hostile model cannot create series.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Final, final

from prometheus_client import REGISTRY, CollectorRegistry, Gauge

from .._base.server_tools import OTHER_KIND
from ._children import API_STOP_REASONS as API_STOP_REASONS
from ._children import RUN_STOP_REASONS as RUN_STOP_REASONS
from ._children import TOKEN_KINDS as TOKEN_KINDS
from ._children import TOOL_OUTCOMES as TOOL_OUTCOMES
from ._children import UNKNOWN as UNKNOWN
from ._children import Children
from ._client import ClientInstruments
from ._families import FAMILIES, POOL_RESERVED, POOL_SPENT, RUN_DURATION, TOOL_CALLS_TOTAL, TOOL_DURATION
from ._families import MODEL_BUCKETS as MODEL_BUCKETS
from ._families import RUN_BUCKETS as RUN_BUCKETS
from ._families import TOOL_BUCKETS as TOOL_BUCKETS
from ._families import TRANSITION_BUCKETS as TRANSITION_BUCKETS
from ._store import Backend, LocalStore, Observing, fits_exemplar

__all__ = [
    "API_STOP_REASONS",
    "BoundMetrics",
    "EXEMPLAR_MIN_S",
    "LoopMetrics",
    "MODEL_BUCKETS",
    "RUN_BUCKETS",
    "RUN_STOP_REASONS",
    "TOKEN_KINDS",
    "TOOL_BUCKETS",
    "TOOL_OUTCOMES",
    "TRANSITION_BUCKETS",
    "UNKNOWN",
    "PoolGauges",
    "multiprocess_mode",
    "pool_gauges_for",
]

EXEMPLAR_MIN_S: Final = 1e-3
"""Observations at least this long carry the run's `trace_id` as an exemplar (runs always do).

An exemplar costs a clock read and a tuple here (~0.2 µs; ~3 µs on prometheus_client's own
instruments): nobody follows a sub-millisecond bookkeeping transition to a trace, so those
skip it; model calls, tools and slow states keep it.
"""


def multiprocess_mode() -> bool:
    """Whether prometheus_client runs in multiprocess mode (`PROMETHEUS_MULTIPROC_DIR` is set).

    In that mode values live in mmap files shared by the worker processes and exemplars are
    not stored, so boundloop does not attach them.
    """
    return "PROMETHEUS_MULTIPROC_DIR" in os.environ or "prometheus_multiproc_dir" in os.environ


_shared: weakref.WeakKeyDictionary[CollectorRegistry, dict[str, Backend]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _instruments_for(registry: CollectorRegistry, namespace: str) -> Backend:
    with _lock:
        by_namespace = _shared.setdefault(registry, {})
        if namespace not in by_namespace:
            # Plain Python values behind one collector; in multiprocess mode the values must
            # reach prometheus_client's mmap files, so its own instruments.
            backend = ClientInstruments if multiprocess_mode() else LocalStore
            by_namespace[namespace] = backend(registry, namespace, FAMILIES)
        return by_namespace[namespace]


@final
class PoolGauges:
    """The budget pools' gauges on one registry and namespace: `boundloop_pool_spent_usd{pool}`
    and `boundloop_pool_reserved_usd{pool}`, prometheus_client's own `Gauge`s (set once per model
    call a run settles under a pool, not on the hot path), shared by the registry's loops; in
    multiprocess mode the most recent value any process wrote. The `pool` label is a name the
    application gave its `BudgetPool`: a model never names a pool."""

    __slots__ = ("_reserved", "_spent")

    def __init__(self, registry: CollectorRegistry, namespace: str) -> None:
        self._spent, self._reserved = (
            Gauge(
                family.name,
                family.documentation,
                family.labelnames,
                namespace=namespace,
                registry=registry,
                multiprocess_mode="mostrecent",
            )
            for family in (POOL_SPENT, POOL_RESERVED)
        )

    def set(self, pool: str, *, spent_usd: float, reserved_usd: float) -> None:
        """Show a pool's current period as its store last gave it."""
        self._spent.labels(pool).set(spent_usd)
        self._reserved.labels(pool).set(reserved_usd)


_pools_shared: weakref.WeakKeyDictionary[CollectorRegistry, dict[str, PoolGauges]] = (
    weakref.WeakKeyDictionary()
)


def pool_gauges_for(registry: CollectorRegistry, namespace: str) -> PoolGauges:
    """The pool gauges of `registry` and `namespace`, registered on first use."""
    with _lock:
        by_namespace = _pools_shared.setdefault(registry, {})
        if namespace not in by_namespace:
            by_namespace[namespace] = PoolGauges(registry, namespace)
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

    __slots__ = ("exemplars", "instruments", "namespace", "pools", "registry")

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
        self.pools = pool_gauges_for(self.registry, namespace)
        """The budget pools' gauges, shared by every loop of the registry."""

    def bind(
        self, loop: str, tools: Iterable[str], version: str = "", platform: str = "anthropic"
    ) -> BoundMetrics:
        """Resolve the labelled children for one loop and its registered tools.

        Args:
            loop: the `loop` label (`AgentLoop(name=...)`).
            tools: the registered tool names; any other name is counted as `_unknown`.
            version: the `version` label of the run families (`AgentLoop(version=...)`, "" when
                the loop has none).
            platform: the `platform` label of the model families: where the loop's client runs
                (`boundloop.platforms.Platform`).

        Returns:
            The children of that loop, with the methods the loop calls on its hot path.
        """
        return BoundMetrics(
            self.instruments,
            loop,
            frozenset(tools),
            version=version,
            exemplars=self.exemplars,
            platform=platform,
            pools=self.pools,
        )


@final
class BoundMetrics:
    """One loop's children, resolved once per thread; the methods the loop calls on its hot path.

    Off multiprocess mode a child is a plain Python cell of `LocalStore` (no lock: an
    attribute increment, or a `bisect` into the bucket counts); each thread records into cells
    of its own, found through a `threading.local`, and a scrape adds them up.
    """

    __slots__ = (
        "_backend",
        "_exemplars",
        "_local",
        "_loop",
        "_platform",
        "_pools",
        "_runs_active",
        "_tools",
        "_version",
    )

    def __init__(
        self,
        backend: Backend,
        loop: str,
        tools: frozenset[str],
        *,
        version: str = "",
        exemplars: bool = True,
        platform: str = "anthropic",
        pools: PoolGauges | None = None,
    ) -> None:
        self._backend = backend
        self._pools = pools
        self._loop = loop
        self._platform = platform
        self._version = version
        self._tools = tools
        self._exemplars = exemplars
        self._runs_active = backend.gauge((loop, version))
        self._local = threading.local()
        # every bounded series exists now
        self._local.children = Children(backend, loop, version, tools, platform)

    def _children(self) -> Children:
        """The calling thread's children, made on its first call."""
        children = self._local.children = Children(
            self._backend, self._loop, self._version, self._tools, self._platform
        )
        return children

    def on(self, other: BoundMetrics) -> BoundMetrics:
        """This loop's children on the registry `other` records to (a delegated run of a loop on
        the default metrics counts where its parent's loop does), under this loop's labels."""
        return BoundMetrics(
            other._backend, self._loop, self._tools, version=self._version, exemplars=other._exemplars
        )

    def with_tools(self, tools: Iterable[str]) -> BoundMetrics:
        """The same loop's children with `tools` registered (an MCP server's, listed at run start)."""
        return BoundMetrics(
            self._backend,
            self._loop,
            frozenset(tools),
            version=self._version,
            exemplars=self._exemplars,
            platform=self._platform,
            pools=self._pools,
        )

    @property
    def loop(self) -> str:
        """The `loop` label."""
        return self._loop

    @property
    def version(self) -> str:
        """The `version` label of the run families ("" when the loop has no version)."""
        return self._version

    def tool_label(self, name: str) -> str:
        """A registered tool's name, else `_unknown`: the model never creates a time series."""
        return name if name in self._tools else UNKNOWN

    def edges(self) -> Mapping[tuple[str, str], Observing]:
        """The calling thread's observer of every edge, by (source, dest): a run's driver resolves
        them once, since a run stays in the thread of its event loop. `observe(seconds, trace_id)`
        counts the edge and observes the time; give a trace id only for an exemplar."""
        try:
            children: Children = self._local.children
        except AttributeError:
            children = self._children()
        return children.edges

    def exemplar_id(self, trace_id: str) -> str | None:
        """The trace id to attach to this loop's slow observations, or None: exemplars off, or an
        id too long for one."""
        return trace_id if self._exemplars and fits_exemplar(trace_id) else None

    def transition(self, source: str, dest: str, duration_s: float, trace_id: str | None = None) -> None:
        """Count an edge and observe the time spent in its source state.

        Args:
            source: the state left.
            dest: the state entered.
            duration_s: seconds spent in `source`.
            trace_id: the run's trace id, attached as an exemplar when given and the
                observation is at least `EXEMPLAR_MIN_S`.
        """
        try:
            edges: dict[tuple[str, str], Observing] = self._local.children.edges
        except AttributeError:
            edges = self._children().edges
        if duration_s >= EXEMPLAR_MIN_S and trace_id is not None and self._exemplars:
            edges[(source, dest)].observe(duration_s, trace_id)
        else:
            edges[(source, dest)].observe(duration_s, None)

    def pool_usage(self, pool: str, spent_usd: float, reserved_usd: float) -> None:
        """Show a budget pool's current period as its store gave it (`PoolStatus`).

        Args:
            pool: the pool's name, which the application gave its `BudgetPool`.
            spent_usd: what its period has spent.
            reserved_usd: what calls not yet settled hold in it.
        """
        if self._pools is not None:
            self._pools.set(pool, spent_usd=spent_usd, reserved_usd=reserved_usd)

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
        try:
            children: Children = self._local.children
        except AttributeError:
            children = self._children()
        label = stop_reason if stop_reason in RUN_STOP_REASONS else UNKNOWN
        children.runs[label].inc()
        timer = children.run_duration.get(label)
        if timer is None:
            timer = children.run_duration[label] = self._backend.histogram(
                RUN_DURATION, (self._loop, self._version, label)
            )
        timer.observe(duration_s, trace_id if self._exemplars else None)

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
        try:
            children: Children = self._local.children
        except AttributeError:
            children = self._children()
        # The dict holds every documented stop reason and `_unknown`: anything else is unknown.
        counter = children.model_requests.get(stop_reason)
        if counter is None:
            counter = children.model_requests[UNKNOWN]
        counter.inc()
        if duration_s >= EXEMPLAR_MIN_S and self._exemplars:
            children.model_duration.observe(duration_s, trace_id)
        else:
            children.model_duration.observe(duration_s, None)
        if tokens is not None:
            # Unrolled: this runs once per model call, and most calls report no cache tokens.
            input_tokens, output_tokens, cache_read, cache_creation = tokens
            counters = children.tokens
            if input_tokens:
                counters[0].inc(input_tokens)
            if output_tokens:
                counters[1].inc(output_tokens)
            if cache_read:
                counters[2].inc(cache_read)
            if cache_creation:
                counters[3].inc(cache_creation)

    def server_tool_uses(self, uses: Mapping[str, int]) -> None:
        """Count one response's server tool uses.

        Args:
            uses: the counts by kind (`web_search`, `web_fetch`, ...), as `Proposal.server_tool_uses`
                gives them; a kind the installed SDK does not model is counted as `other`.
        """
        try:
            children: Children = self._local.children
        except AttributeError:
            children = self._children()
        counters = children.server_tool_uses
        for kind, count in uses.items():
            counter = counters.get(kind)
            if counter is None:
                counter = counters[OTHER_KIND]
            counter.inc(count)

    def tool_call(
        self, name: str, outcome: str, duration_s: float | None, trace_id: str | None = None
    ) -> None:
        """Count one answered tool_use; observe its latency when the tool function ran.

        Args:
            name: the tool name the model asked for; unregistered names count as `_unknown`.
            outcome: how the call was answered (`Outcome`); other values count as `_unknown`.
            duration_s: the tool function's seconds over all attempts, or None when it never ran.
            trace_id: the run's trace id, attached as an exemplar when given and the
                tool function took at least `EXEMPLAR_MIN_S`.
        """
        try:
            children: Children = self._local.children
        except AttributeError:
            children = self._children()
        # Fast path: the dict holds every registered tool x outcome. A miss is bounded first and
        # cached under the bounded key only, so invented names never grow the dict.
        counter = children.tool_calls.get((name, outcome))
        if counter is None:
            key = (self.tool_label(name), outcome if outcome in TOOL_OUTCOMES else UNKNOWN)
            counter = children.tool_calls.get(key)
            if counter is None:
                counter = children.tool_calls[key] = self._backend.counter(
                    TOOL_CALLS_TOTAL, (self._loop, *key)
                )
        counter.inc()
        if duration_s is None:
            return
        timer = children.tool_duration.get(name)
        if timer is None:
            tool = self.tool_label(name)
            timer = children.tool_duration.get(tool)
            if timer is None:
                timer = children.tool_duration[tool] = self._backend.histogram(
                    TOOL_DURATION, (self._loop, tool)
                )
        if duration_s >= EXEMPLAR_MIN_S and trace_id is not None and self._exemplars:
            timer.observe(duration_s, trace_id)
        else:
            timer.observe(duration_s, None)
