"""The metrics of one run, recorded from its events: an observer of the run's event stream.

Each run with metrics has one `RunMetrics`, called first with every event, before the OTel spans
and your `on_event` hooks: a hook that raises on the `Stop` event cannot leave
`runs_active` up, since the run was counted as finished before the hook saw it. It records from
the events' typed fields alone:

| event | metrics |
|---|---|
| the session's first (`RunStarted`, `Resumed`) | `runs_active` up |
| `Transition` | the edge's count and the time spent in its `source` |
| `Proposal` | the model request: its `stop_reason`, latency and tokens; its server tool uses by kind |
| `ToolResult` | the tool call by `outcome`; its latency when the tool function ran |
| `Stop` | `runs_active` down, the run by `stop_reason` and its wall-clock time |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import final

from ..events import BaseEvent, Proposal, Stop, ToolResult, Transition
from ._store import Observing
from .instruments import EXEMPLAR_MIN_S, BoundMetrics

__all__ = [
    "RunMetrics",
]


@final
class RunMetrics:
    """One run's observer: `observe(event)` records what `event` counts (never raises on the
    events a run emits).

    The edges' cells are resolved once, in the thread that makes it: a run stays in the thread
    of its event loop. A session's first event counts the run as active; a run continued from a
    checkpoint without a `Resumed` event counts from its first event, whatever its kind.

    Args:
        metrics: the loop's bound metrics.
        trace_id: the run's trace id, attached as an exemplar to slow observations.
    """

    __slots__ = ("_edges", "_exemplar", "_metrics", "_since", "_trace_id")

    def __init__(self, metrics: BoundMetrics, trace_id: str) -> None:
        self._metrics = metrics
        self._trace_id = trace_id
        self._edges: Mapping[tuple[str, str], Observing] = metrics.edges()
        self._exemplar = metrics.exemplar_id(trace_id)
        self._since: float | None = None
        """When the session started (the first event's `at`); None: no event yet."""

    def observe(self, event: BaseEvent) -> None:
        """Record what `event` counts: the run's hook (bound once per run, called with every event)."""
        # The most frequent kinds first; a chain of `is` costs less than a `match` or a dict of
        # methods here (~11 events a turn). The other kinds record nothing.
        if type(event) is Transition:
            self.moved(event.source, event.dest, event.at, event.duration_s)
            return
        if type(event) is ToolResult:
            # A call answered without running (refused, repeated, by a human) has no latency.
            self.answered(event.tool, event.outcome, event.at, event.duration_s if event.attempts else None)
            return
        if self._since is None:
            self._begin(event.at)
        if type(event) is Proposal:
            self._metrics.model_request(
                event.stop_reason,
                event.duration_s,
                self._trace_id,
                (
                    event.input_tokens,
                    event.output_tokens,
                    event.cache_read_input_tokens,
                    event.cache_creation_input_tokens,
                ),
            )
            if event.server_tool_uses:  # most responses use no server tool
                self._metrics.server_tool_uses(event.server_tool_uses)
        elif type(event) is Stop:
            assert self._since is not None  # set by the first event
            self._metrics.run_finished(event.stop_reason, event.at - self._since, event.trace_id)

    def moved(self, source: str, dest: str, at: float, duration_s: float) -> None:
        """Record a transition (its `Transition` event's fields; a run whose transitions nobody
        else hears calls this alone, with no event built: `_core/trail.py`)."""
        if self._since is None:  # a transition first (a continued run): the session began in `source`
            self._begin(at - duration_s)
        self._edges[(source, dest)].observe(
            duration_s, self._exemplar if duration_s >= EXEMPLAR_MIN_S else None
        )

    def answered(self, tool: str, outcome: str, at: float, duration_s: float | None) -> None:
        """Record a tool call's answer (its `ToolResult` event's fields, `duration_s` None for a
        call answered without running; a run whose tool results nobody else hears calls this
        alone, with no event built: `_core/trail.py`)."""
        if self._since is None:
            self._begin(at)
        self._metrics.tool_call(tool, outcome, duration_s, self._trace_id)

    def _begin(self, at: float) -> None:
        self._since = at
        self._metrics.run_started()
