"""`Observers`: a loop's metrics, tracing and event hook, one frozen value with the defaults a
loop had when it took them as three keywords."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from boundloop import AgentLoop, Budget, LoopMetrics, Observers, ScriptedClient
from boundloop.events import Event, RunStarted, Stop
from boundloop.otel import TraceSettings
from tests.helpers import text

MODEL = "claude-sonnet-4-6"


def test_observers_are_frozen() -> None:
    """An `Observers` cannot be changed once built: a loop holding one sees what it was given."""
    observers = Observers(metrics=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        observers.metrics = LoopMetrics(registry=CollectorRegistry())  # type: ignore[misc]
    assert dataclasses.replace(observers, tracing=None) == Observers(metrics=None, tracing=None)


def test_a_loop_built_without_observers_has_the_default_ones() -> None:
    """`AgentLoop(...)` and `AgentLoop(..., observers=Observers())` are wired the same."""
    plain = AgentLoop(ScriptedClient([]), model=MODEL, budget=Budget(max_steps=2))
    given = AgentLoop(ScriptedClient([]), model=MODEL, budget=Budget(max_steps=2), observers=Observers())
    assert plain.wiring.observers == given.wiring.observers == Observers()
    assert Observers().tracing == TraceSettings()
    assert Observers().on_event is None


async def test_the_loops_hook_sees_each_event_before_the_runs_own() -> None:
    """`Observers.on_event` is called with every event as it is recorded, before `run(on_event=)`."""
    seen: list[tuple[str, str]] = []

    def hook(name: str) -> Callable[[Event], None]:
        def record(event: Event) -> None:
            if isinstance(event, RunStarted | Stop):
                seen.append((name, event.kind))

        return record

    loop = AgentLoop(
        ScriptedClient([text("done")]),
        model=MODEL,
        budget=Budget(max_steps=2),
        observers=Observers(metrics=None, on_event=hook("loop")),
    )
    await loop.run("go", on_event=hook("run"))
    assert seen == [("loop", "run_started"), ("run", "run_started"), ("loop", "stop"), ("run", "stop")]


DEFAULTS = textwrap.dedent(
    """
    import json, sys
    import anyio
    from prometheus_client import REGISTRY
    from boundloop import AgentLoop, Budget, Observers, ScriptedClient

    backend = sys.argv[1]
    answer = {"stop_reason": "end_turn", "content": [{"type": "text", "text": "Done."}]}
    plain = AgentLoop(ScriptedClient([answer] * 2), model="claude-sonnet-4-6", budget=Budget(max_steps=2),
                      name="defaults")
    given = AgentLoop(ScriptedClient([answer] * 2), model="claude-sonnet-4-6", budget=Budget(max_steps=2),
                      name="defaults", observers=Observers())
    anyio.run(plain.run, "go", backend=backend)
    anyio.run(given.run, "go", backend=backend)
    labels = {"loop": "defaults", "stop_reason": "completed", "version": ""}
    seen = {
        "counted_on_the_default_registry": REGISTRY.get_sample_value("boundloop_runs_total", labels),
        "tracing_loaded_without_a_provider": "boundloop.otel._run" in sys.modules,
        "otel_sdk_loaded_without_a_provider": "opentelemetry.sdk" in sys.modules,
    }

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    anyio.run(plain.run, "go", backend=backend)
    anyio.run(given.run, "go", backend=backend)
    seen["spans_once_a_global_provider_is_set"] = [span.name for span in exporter.get_finished_spans()]
    print(json.dumps(seen))
    """
)


def test_the_default_observers_count_on_the_default_registry_and_trace_only_to_a_global_provider(
    anyio_backend: str,
) -> None:
    """In a fresh process, loops built without observers and with `Observers()` count their runs
    on prometheus_client's default registry, trace nothing (and load no tracing code) while no
    provider is set, and trace to the global provider once the application sets one."""
    done = subprocess.run(
        [sys.executable, "-c", DEFAULTS, anyio_backend],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "counted_on_the_default_registry": 2.0,
        "tracing_loaded_without_a_provider": False,
        "otel_sdk_loaded_without_a_provider": False,
        "spans_once_a_global_provider_is_set": [
            "chat claude-sonnet-4-6",
            "invoke_agent defaults",
            "chat claude-sonnet-4-6",
            "invoke_agent defaults",
        ],
    }


async def test_a_loops_observers_are_replaced_through_its_wiring() -> None:
    """`AgentLoop.from_spec(loop.spec, dataclasses.replace(loop.wiring, observers=...))` is the
    same loop observed as the new `Observers` says (metrics on another registry, or none)."""
    registry = CollectorRegistry()
    loop = AgentLoop(ScriptedClient([text("done")]), model=MODEL, budget=Budget(max_steps=2), name="rewired")
    counted = AgentLoop.from_spec(
        loop.spec,
        dataclasses.replace(loop.wiring, observers=Observers(metrics=LoopMetrics(registry=registry))),
    )
    silent = AgentLoop.from_spec(
        loop.spec, dataclasses.replace(loop.wiring, observers=Observers(metrics=None))
    )
    assert (await counted.run("go")).answer == "done"
    labels = {"loop": "rewired", "stop_reason": "completed", "version": ""}
    assert registry.get_sample_value("boundloop_runs_total", labels) == 1.0
    assert loop.metrics is not None
    assert silent.metrics is None
