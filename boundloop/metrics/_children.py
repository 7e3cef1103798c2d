"""The label sets of the metrics and one loop's children (its series' cells) in one thread.

`instruments.BoundMetrics` makes a `Children` per thread that records: every bounded series of
the loop exists from then on, so the hot path never resolves a label set. The run families
(`runs_total`, `run_duration_seconds`, `runs_active`) carry the loop's `version` too, bound
here once per loop: a run's events never look it up.
"""

from __future__ import annotations

from typing import Final, final

from .._base.server_tools import OTHER_KIND, server_tool_kinds
from ..records import OUTCOMES, StopReason
from ..signals import KNOWN_STOP_REASONS
from ..statemachine.table import TRANSITIONS
from ._families import (
    MODEL_REQUEST_DURATION,
    MODEL_REQUESTS_TOTAL,
    MODEL_TOKENS_TOTAL,
    RUNS_TOTAL,
    SERVER_TOOL_USES_TOTAL,
    TOOL_CALLS_TOTAL,
    TRANSITION_DURATION,
    TRANSITIONS_TOTAL,
)
from ._store import Backend, Counting, Observing

API_STOP_REASONS: Final = KNOWN_STOP_REASONS
"""The Messages API's documented `stop_reason` values: the `stop_reason` label of model requests."""
RUN_STOP_REASONS: Final = frozenset(str(reason) for reason in StopReason)
"""`StopReason` values: the `stop_reason` label of runs."""
TOOL_OUTCOMES: Final = frozenset(OUTCOMES)
"""`Outcome` values: the `outcome` label of tool calls."""
UNKNOWN: Final = "_unknown"
"""The label value for anything outside the bounded sets above."""
TOKEN_KINDS: Final = ("input", "output", "cache_read", "cache_creation")
"""The `kind` label of `boundloop_model_tokens_total`, in the order `model_request` takes them."""


@final
class Children:
    """One loop's children in one thread: a `LocalStore` cell has a single writer, its thread."""

    __slots__ = (
        "edges",
        "model_duration",
        "model_requests",
        "run_duration",
        "runs",
        "server_tool_uses",
        "tokens",
        "tool_calls",
        "tool_duration",
    )

    def __init__(
        self, backend: Backend, loop: str, version: str, tools: frozenset[str], platform: str = "anthropic"
    ) -> None:
        # Every edge of the table, resolved now: the hot path never resolves a label set.
        self.edges = {
            (row["source"], row["dest"]): backend.counted_histogram(
                TRANSITIONS_TOTAL, TRANSITION_DURATION, (loop, row["source"], row["dest"])
            )
            for row in TRANSITIONS
        }
        # Counters start at zero for every bounded value, so `rate()` sees the first increase
        # and a dashboard's ratio is 0, not absent.
        self.runs = {
            reason: backend.counter(RUNS_TOTAL, (loop, version, reason))
            for reason in (*RUN_STOP_REASONS, UNKNOWN)
        }
        self.model_duration = backend.histogram(MODEL_REQUEST_DURATION, (loop, platform))
        self.model_requests: dict[str | None, Counting] = {
            reason: backend.counter(MODEL_REQUESTS_TOTAL, (loop, platform, reason))
            for reason in (*API_STOP_REASONS, UNKNOWN)
        }
        self.tokens = tuple(
            backend.counter(MODEL_TOKENS_TOTAL, (loop, platform, kind)) for kind in TOKEN_KINDS
        )
        # Every kind the installed SDK's `ServerToolUsage` models, and `other` for the rest.
        self.server_tool_uses = {
            kind: backend.counter(SERVER_TOOL_USES_TOTAL, (loop, platform, kind))
            for kind in (*server_tool_kinds(), OTHER_KIND)
        }
        self.tool_calls: dict[tuple[str, str], Counting] = {
            (tool, outcome): backend.counter(TOOL_CALLS_TOTAL, (loop, tool, outcome))
            for tool in (*sorted(tools), UNKNOWN)
            for outcome in OUTCOMES
        }
        # Histograms appear on first use (a series per bucket: most stop reasons never happen);
        # their keys are bounded by the enums and the registry, so these dicts are too.
        self.run_duration: dict[str, Observing] = {}
        self.tool_duration: dict[str, Observing] = {}
