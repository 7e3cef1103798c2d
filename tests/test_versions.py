"""A loop's version (`AgentLoop(version=...)`, a contract's `version`): in the provenance, on
`RunStarted`, as `gen_ai.agent.version` on the run's span; replay names a changed version, model
route or hash."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from boundloop import AgentLoop, Budget, Observers, ScriptedClient, replay
from boundloop.cli import demo
from boundloop.contract import load_contract
from boundloop.events import RunStarted
from boundloop.otel import TraceSettings
from tests.helpers import text
from tests.otel.spans import finished, only

MODEL = "claude-sonnet-4-6"
CONTRACT = Path(__file__).resolve().parent.parent / "examples" / "contracts" / "refund_investigation.json"


def loop_of(
    version: str | None, *, fallback: str | None = None, observers: Observers = Observers(metrics=None)
) -> AgentLoop:
    return AgentLoop(
        ScriptedClient([text("done")], model=MODEL),
        model=MODEL,
        budget=Budget(max_steps=2),
        observers=observers,
        version=version,
        fallback_model=fallback,
    )


async def test_the_version_is_in_the_provenance_and_on_run_started() -> None:
    result = await loop_of("refunds-2025.12.1").run("goal")
    assert result.state.provenance is not None
    assert result.state.provenance.version == "refunds-2025.12.1"
    started = [event for event in result.events if isinstance(event, RunStarted)]
    assert [event.version for event in started] == ["refunds-2025.12.1"]
    assert started[0].to_dict()["version"] == "refunds-2025.12.1"  # in the trace's JSON lines


async def test_without_a_version_nothing_is_recorded() -> None:
    result = await loop_of(None).run("goal")
    assert result.state.provenance is not None
    assert result.state.provenance.version is None


async def test_the_run_span_carries_gen_ai_agent_version() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    await loop_of("v7", observers=Observers(metrics=None, tracing=TraceSettings(provider=provider))).run(
        "goal"
    )
    await loop_of(None, observers=Observers(metrics=None, tracing=TraceSettings(provider=provider))).run(
        "goal"
    )
    spans = [span for span in finished(exporter) if span.name.startswith("invoke_agent")]
    assert [(span.attributes or {}).get("gen_ai.agent.version") for span in spans] == ["v7", None]
    provider.shutdown()
    assert only(spans[:1], "invoke_agent").name == "invoke_agent agent"


async def test_replay_names_a_changed_version_and_model_route() -> None:
    result = await loop_of("v1").run("goal")
    same = await replay(result.state, loop_of("v1"))
    assert same.provenance_changes == []
    changed = await replay(result.state, loop_of("v2", fallback="claude-opus-4-1"))
    assert "version v1 -> v2" in changed.provenance_changes
    assert "fallback_model None -> claude-opus-4-1" in changed.provenance_changes
    assert "provenance: version v1 -> v2" in changed.describe()


def test_a_contract_version_reaches_the_loop_and_round_trips() -> None:
    document = json.loads(CONTRACT.read_text(encoding="utf-8"))
    document["version"] = "refund-investigation@3"
    document["system"] = {"text": demo.SYSTEM}
    document["policy"] = json.loads((CONTRACT.parent / "refund-policy.json").read_text(encoding="utf-8"))
    contract = load_contract(document)
    assert contract.spec.version == "refund-investigation@3"
    handlers = {tool.name: tool.handler for tool in demo.TOOLS}
    loop = AgentLoop.from_contract(
        contract, handlers=handlers, client=ScriptedClient(demo.SCRIPT), observers=Observers(metrics=None)
    )
    result = anyio.run(loop.run, demo.GOAL)
    assert result.state.provenance is not None
    assert result.state.provenance.version == "refund-investigation@3"
    assert loop.to_contract().to_dict()["version"] == "refund-investigation@3"
