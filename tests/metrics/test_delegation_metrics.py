"""A delegated run's metrics: the child's run is counted under its own loop's name (registered
when the loop was built, never a name the model chose), the delegation as the parent's tool call."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

from boundloop import AgentLoop, Budget, LoopMetrics, Observers, ScriptedClient, StopReason
from tests.helpers import JSON, text, tool_use


def loop_of(script: list[JSON], **options: Any) -> AgentLoop:
    settings: dict[str, Any] = {"model": "claude-sonnet-4-6", "budget": Budget(max_steps=3)}
    return AgentLoop(ScriptedClient(script), **(settings | options))


def loops_of(registry: CollectorRegistry) -> set[str]:
    """Every `loop` label in the registry's boundloop samples."""
    return {
        sample.labels["loop"]
        for family in registry.collect()
        if family.name.startswith("boundloop_")
        for sample in family.samples
        if "loop" in sample.labels
    }


async def test_a_childs_run_is_counted_under_its_own_loops_name(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    researcher = loop_of([text("one"), text("two")], name="researcher", observers=Observers(metrics=metrics))
    lead = loop_of(
        [
            tool_use(("research", {"task": "evil-label-a"}), ("research", {"task": "evil-label-b"})),
            text("done"),
        ],
        name="lead",
        tools=[researcher.as_tool("research", description="Research.")],
        observers=Observers(metrics=metrics),
    )
    result = await lead.run("go")
    assert result.stop_reason is StopReason.COMPLETED

    def runs(loop: str) -> float:
        labels = {"loop": loop, "stop_reason": "completed", "version": ""}
        return registry.get_sample_value("boundloop_runs_total", labels) or 0.0

    assert (runs("lead"), runs("researcher")) == (1.0, 2.0)
    requests = {"loop": "researcher", "platform": "anthropic", "stop_reason": "end_turn"}
    assert registry.get_sample_value("boundloop_model_requests_total", requests) == 2.0
    calls = {"loop": "lead", "tool": "research", "outcome": "ok"}
    assert registry.get_sample_value("boundloop_tool_calls_total", calls) == 2.0
    assert loops_of(registry) == {"lead", "researcher"}  # the task never becomes a label


async def test_a_child_loop_without_metrics_of_its_own_counts_on_its_parents_registry(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """The researcher was built without `Observers.metrics`: run by a lead whose loop counts on `registry`,
    its runs are counted there (under its own name), not on the process's default registry."""
    default = {"loop": "default-researcher", "stop_reason": "completed", "version": ""}
    before = REGISTRY.get_sample_value("boundloop_runs_total", default) or 0.0
    researcher = loop_of([text("one")], name="default-researcher")
    lead = loop_of(
        [tool_use(("research", {"task": "a"})), text("done")],
        name="lead",
        tools=[researcher.as_tool("research", description="Research.")],
        observers=Observers(metrics=metrics),
    )
    result = await lead.run("go")
    assert result.stop_reason is StopReason.COMPLETED
    assert registry.get_sample_value("boundloop_runs_total", default) == 1.0
    assert (REGISTRY.get_sample_value("boundloop_runs_total", default) or 0.0) == before
