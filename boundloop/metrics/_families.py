"""docs/metrics.md's table as data: each metric's name, help, type, labels and buckets.

Both backends build their series from these: `_store.LocalStore` (plain Python values behind
one collector) and `_client.ClientInstruments` (prometheus_client's instruments, multiprocess
mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

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


@dataclass(frozen=True, slots=True)
class Family:
    """One metric of the table: what prometheus_client's constructor would be given."""

    name: str
    """The name before the namespace (a counter's `_total` is dropped from the family name)."""
    documentation: str
    type: Literal["counter", "gauge", "histogram"]
    labelnames: tuple[str, ...]
    buckets: tuple[float, ...] = ()
    """A histogram's upper bounds, without `+Inf`."""

    def full_name(self, namespace: str) -> str:
        """The name with the namespace, as prometheus_client builds it."""
        return f"{namespace}_{self.name}" if namespace else self.name


TRANSITIONS_TOTAL: Final = Family(
    "transitions_total", "State machine transitions taken.", "counter", ("loop", "source", "dest")
)
TRANSITION_DURATION: Final = Family(
    "transition_duration_seconds",
    "Time spent in the source state before the transition.",
    "histogram",
    ("loop", "source", "dest"),
    TRANSITION_BUCKETS,
)
RUNS_TOTAL: Final = Family(
    "runs_total", "Runs ended, by stop reason.", "counter", ("loop", "version", "stop_reason")
)
RUN_DURATION: Final = Family(
    "run_duration_seconds",
    "Wall-clock duration of runs.",
    "histogram",
    ("loop", "version", "stop_reason"),
    RUN_BUCKETS,
)
RUNS_ACTIVE: Final = Family("runs_active", "Runs in progress.", "gauge", ("loop", "version"))
MODEL_REQUESTS_TOTAL: Final = Family(
    "model_requests_total",
    "Model requests, by the API's stop_reason.",
    "counter",
    ("loop", "platform", "stop_reason"),
)
MODEL_REQUEST_DURATION: Final = Family(
    "model_request_duration_seconds",
    "Model request latency.",
    "histogram",
    ("loop", "platform"),
    MODEL_BUCKETS,
)
MODEL_TOKENS_TOTAL: Final = Family(
    "model_tokens_total", "Tokens reported by the API.", "counter", ("loop", "platform", "kind")
)
SERVER_TOOL_USES_TOTAL: Final = Family(
    "server_tool_uses_total",
    "Server tool uses the API reported, by kind.",
    "counter",
    ("loop", "platform", "kind"),
)
TOOL_CALLS_TOTAL: Final = Family(
    "tool_calls_total", "Tool calls answered, by outcome.", "counter", ("loop", "tool", "outcome")
)
TOOL_DURATION: Final = Family(
    "tool_duration_seconds",
    "Tool function latency (all attempts).",
    "histogram",
    ("loop", "tool"),
    TOOL_BUCKETS,
)
FAMILIES: Final = (
    TRANSITIONS_TOTAL,
    TRANSITION_DURATION,
    RUNS_TOTAL,
    RUN_DURATION,
    RUNS_ACTIVE,
    MODEL_REQUESTS_TOTAL,
    MODEL_REQUEST_DURATION,
    MODEL_TOKENS_TOTAL,
    SERVER_TOOL_USES_TOTAL,
    TOOL_CALLS_TOTAL,
    TOOL_DURATION,
)
"""docs/metrics.md's table, in the order a scrape lists it."""

POOL_SPENT: Final = Family(
    "pool_spent_usd", "Dollars a budget pool has spent in its current period.", "gauge", ("pool",)
)
POOL_RESERVED: Final = Family(
    "pool_reserved_usd",
    "Dollars a budget pool holds for model calls not yet settled (live leases).",
    "gauge",
    ("pool",),
)
POOL_FAMILIES: Final = (POOL_SPENT, POOL_RESERVED)
"""The budget pools' gauges (docs/metrics.md, after the table): labelled by the pool's name only,
a name the application gave its `BudgetPool`, and shared by every loop of the registry."""
