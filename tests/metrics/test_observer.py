"""The metrics observe the run's event stream: a run's metrics are its events read again."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from boundloop import LoopMetrics, LoopState, StopReason
from boundloop.events import Event, Proposal, Stop
from boundloop.metrics import RunMetrics
from boundloop.statemachine.table import Phase
from tests.metrics.scripts import TOOLS, refund_loop, search_loop

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(registry: CollectorRegistry) -> Samples:
    """Every boundloop sample's value, by name and labels (not when each series was created)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in registry.collect()
        if family.name.startswith("boundloop_")
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """A sample's value (0 when absent); the run families' `version` is "" (the loops have none)."""
    if name.startswith(("boundloop_runs_", "boundloop_run_duration_seconds")):
        labels = {"version": "", **labels}
    if name.startswith(("boundloop_model_", "boundloop_server_tool_uses")):  # a first-party client
        labels = {"platform": "anthropic", **labels}
    return registry.get_sample_value(name, labels) or 0.0


async def test_a_runs_metrics_are_its_events_read_again(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """Feeding a finished run's events to a fresh `RunMetrics` gives every sample the live run gave:
    the metrics read the events' typed fields and nothing else."""
    result = await refund_loop(metrics).run("Decide on O-104.")
    assert result.stop_reason is StopReason.COMPLETED
    again = CollectorRegistry()
    observer = RunMetrics(LoopMetrics(again).bind("refunds", [t.name for t in TOOLS]), result.state.trace_id)
    for event in result.events:
        observer.observe(event)
    live = samples(registry)
    assert live == samples(again)
    assert (
        live[("boundloop_runs_total", (("loop", "refunds"), ("stop_reason", "completed"), ("version", "")))]
        == 1
    )
    assert live[("boundloop_runs_active", (("loop", "refunds"), ("version", "")))] == 0


async def test_server_tool_uses_are_read_from_the_proposal_events(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """A run's server tool uses are counted from its `Proposal` events: re-fed, they count the same."""
    result = await search_loop(metrics).run("Should O-104 be refunded?")
    reported = [event.server_tool_uses for event in result.events if isinstance(event, Proposal)]
    assert reported == [{"web_search": 2}, {"web_search": 1}]
    again = CollectorRegistry()
    observer = RunMetrics(LoopMetrics(again).bind("searches", [t.name for t in TOOLS]), result.state.trace_id)
    for event in result.events:
        observer.observe(event)
    assert samples(registry) == samples(again)
    assert value(again, "boundloop_server_tool_uses_total", loop="searches", kind="web_search") == 3


async def test_a_hook_raising_on_the_stop_event_leaves_no_run_active(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """The metrics see each event before your hooks: an `on_event` hook raising on `Stop` leaves
    `runs_active` at 0 with the run counted."""
    seen: list[Event] = []

    def failing(event: Event) -> None:
        seen.append(event)
        if isinstance(event, Stop):
            raise RuntimeError("the hook broke")

    with pytest.raises(RuntimeError, match="the hook broke"):
        await refund_loop(metrics).run("Decide on O-104.", on_event=failing)
    assert isinstance(seen[-1], Stop)
    assert value(registry, "boundloop_runs_active", loop="refunds") == 0
    assert value(registry, "boundloop_runs_total", loop="refunds", stop_reason="completed") == 1


async def test_a_run_continued_without_a_first_event_is_counted_once(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """A run continued from a saved state records no `RunStarted` or `Resumed`: it is counted as
    active from its first event, and finished once."""
    first = await refund_loop(metrics).run("Decide on O-104.")
    state = LoopState.from_json(first.state.to_json())
    state.phase = Phase.ASSEMBLE  # before the final answer's model call
    state.stop_reason = None
    state.stop_detail = None
    assert state.next_seq > 0  # no RunStarted: the stream goes on
    continued = await refund_loop(metrics, name="continued")._continue(state)
    assert continued.events[0].kind == "transition"
    assert value(registry, "boundloop_runs_active", loop="continued") == 0
    assert (
        sum(
            value(registry, "boundloop_runs_total", loop="continued", stop_reason=str(reason))
            for reason in StopReason
        )
        == 1
    )
