"""The instruments of docs/metrics.md's table, read back from a fresh registry after real runs."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskStatus
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from boundloop import (
    AgentLoop,
    Budget,
    LoopMetrics,
    LoopResult,
    Observers,
    Policy,
    ScriptedClient,
    StopReason,
    UnhandledStop,
    tool,
)
from boundloop.events import Transition
from boundloop.metrics import render
from boundloop.metrics._families import FAMILIES, POOL_FAMILIES
from boundloop.metrics.instruments import EXEMPLAR_MIN_S
from boundloop.statemachine.table import TRANSITIONS
from tests.helpers import text, tool_use
from tests.metrics.scripts import (
    SEARCH,
    TOOLS,
    edges_taken,
    flaky_lookup,
    read_order,
    refund_loop,
    refund_script,
    search_loop,
    searched,
)

OPENMETRICS = "application/openmetrics-text; version=1.0.0"
ROOT = Path(__file__).resolve().parents[2]


RUN_FAMILIES = ("boundloop_runs_total", "boundloop_run_duration_seconds", "boundloop_runs_active")
MODEL_FAMILIES = ("boundloop_model_", "boundloop_server_tool_uses")
"""The families with a `platform` label: "anthropic" in these tests, whose clients are first-party."""
"""The run families: they carry the loop's `version` label too ("" for a loop without one)."""


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """A sample's value; 0 when the series does not exist. A run family's `version` is "" unless given."""
    if name.startswith(RUN_FAMILIES):
        labels = {"version": "", **labels}
    if name.startswith(MODEL_FAMILIES):
        labels = {"platform": "anthropic", **labels}
    return registry.get_sample_value(name, labels) or 0.0


def label_values(registry: CollectorRegistry, label: str) -> set[str]:
    """Every value `label` takes in any boundloop sample of the registry."""
    return {
        sample.labels[label]
        for family in registry.collect()
        if family.name.startswith("boundloop_")
        for sample in family.samples
        if label in sample.labels
    }


def series(registry: CollectorRegistry) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """Every boundloop time series in the registry."""
    return {
        (sample.name, tuple(sorted(sample.labels.items())))
        for family in registry.collect()
        if family.name.startswith("boundloop_")
        for sample in family.samples
    }


async def test_every_transition_is_counted_and_timed(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """Each edge the run took is counted once per crossing and its source-state time observed."""
    result = await refund_loop(metrics).run("Decide on O-104.")
    taken = edges_taken(result)
    assert taken[("act", "observe")] == 2
    for row in TRANSITIONS:
        labels = {"loop": "refunds", "source": row["source"], "dest": row["dest"]}
        expected = taken[(row["source"], row["dest"])]
        assert value(registry, "boundloop_transitions_total", **labels) == expected
        assert value(registry, "boundloop_transition_duration_seconds_count", **labels) == expected
    traced = sum(
        e.duration_s
        for e in result.events
        if isinstance(e, Transition) and (e.source, e.dest) == ("act", "observe")
    )
    observed = value(
        registry, "boundloop_transition_duration_seconds_sum", loop="refunds", source="act", dest="observe"
    )
    assert observed == pytest.approx(traced)


async def test_runs_model_requests_and_tokens_are_counted(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """A completed run counts its stop reason, model requests by API stop_reason, and tokens by kind."""
    result = await refund_loop(metrics).run("Decide on O-104.")
    assert result.stop_reason is StopReason.COMPLETED
    assert value(registry, "boundloop_runs_total", loop="refunds", stop_reason="completed") == 1
    assert (
        value(registry, "boundloop_run_duration_seconds_count", loop="refunds", stop_reason="completed") == 1
    )
    assert value(registry, "boundloop_runs_active", loop="refunds") == 0
    assert value(registry, "boundloop_model_requests_total", loop="refunds", stop_reason="tool_use") == 2
    assert value(registry, "boundloop_model_requests_total", loop="refunds", stop_reason="end_turn") == 1
    assert value(registry, "boundloop_model_request_duration_seconds_count", loop="refunds") == 3
    tokens = {
        kind: value(registry, "boundloop_model_tokens_total", loop="refunds", kind=kind)
        for kind in ("input", "output", "cache_read", "cache_creation")
    }
    assert tokens == {"input": 30, "output": 15, "cache_read": 7, "cache_creation": 3}


async def test_server_tool_uses_are_counted_by_kind(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """The web searches the API reported (`usage.server_tool_use`) are counted by kind in a scrape;
    the other kinds of the installed SDK, and `other`, are there at 0."""
    result = await search_loop(metrics).run("Should O-104 be refunded?")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.state.usage.server_tool_uses == {"web_search": 3}
    body, _ = render(registry, accept="")
    assert (
        'boundloop_server_tool_uses_total{kind="web_search",loop="searches",platform="anthropic"} 3.0'
        in body.decode()
    )
    counted = {
        sample.labels["kind"]: sample.value
        for family in registry.collect()
        if family.name == "boundloop_server_tool_uses"
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    assert counted == {"web_search": 3, "web_fetch": 0, "other": 0}


async def test_a_server_tool_use_the_sdk_does_not_model_counts_as_other(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """A `usage.server_tool_use` count of a kind the installed SDK has no field for (the API is
    newer than the SDK) is counted as `other`: the API cannot create series either."""
    loop = AgentLoop(
        ScriptedClient(
            [
                searched("q", then=text("Searched and ran code."), code_execution=2, future_tool=1),
                searched("again", then=text("More."), code_execution=4),
            ]
        ),
        model="claude-sonnet-4-5",
        tools=[read_order, SEARCH],
        budget=Budget(max_steps=2),
        name="newer",
        observers=Observers(metrics=metrics),
    )
    first = await loop.run("Go.")
    assert first.state.usage.server_tool_uses == {"web_search": 1, "code_execution": 2, "future_tool": 1}
    before = series(registry)
    await loop.run("Again.")
    assert series(registry) == before
    assert value(registry, "boundloop_server_tool_uses_total", loop="newer", kind="web_search") == 2
    assert value(registry, "boundloop_server_tool_uses_total", loop="newer", kind="other") == 7
    assert {
        sample.labels["kind"]
        for family in registry.collect()
        if family.name == "boundloop_server_tool_uses"
        for sample in family.samples
    } == {"web_search", "web_fetch", "other"}


async def test_tool_calls_are_counted_by_tool_and_outcome(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """Tool calls are counted as ok, error, denied, repeated and invalid; only executed calls are timed."""
    await refund_loop(metrics).run("Decide on O-104.")
    counts = {
        (tool_name, outcome): value(
            registry, "boundloop_tool_calls_total", loop="refunds", tool=tool_name, outcome=outcome
        )
        for tool_name, outcome in [
            ("read_order", "ok"),
            ("read_delivery_status", "ok"),
            ("flaky_lookup", "error"),
            ("issue_refund", "denied"),
            ("read_order", "repeated"),
            ("_unknown", "invalid"),
        ]
    }
    assert set(counts.values()) == {1.0}
    timed = {
        name: value(registry, "boundloop_tool_duration_seconds_count", loop="refunds", tool=name)
        for name in ("read_order", "read_delivery_status", "flaky_lookup", "issue_refund", "_unknown")
    }
    assert timed == {
        "read_order": 1,
        "read_delivery_status": 1,
        "flaky_lookup": 1,
        "issue_refund": 0,
        "_unknown": 0,
    }


async def test_tool_timeout_is_counted(registry: CollectorRegistry, metrics: LoopMetrics) -> None:
    """A tool that overruns its timeout is counted with outcome `timeout`."""

    @tool(timeout_s=0.05)
    async def hang(order_id: str) -> str:
        """Never answers."""
        await anyio.Event().wait()
        return order_id

    loop = AgentLoop(
        ScriptedClient([tool_use(("hang", {"order_id": "O-1"})), text("gave up")]),
        model="claude-sonnet-4-5",
        tools=[hang],
        budget=Budget(max_steps=3),
        name="hangs",
        observers=Observers(metrics=metrics),
    )
    with anyio.fail_after(5):
        await loop.run("Try.")
    assert value(registry, "boundloop_tool_calls_total", loop="hangs", tool="hang", outcome="timeout") == 1


@pytest.fixture
def blocking_tool() -> tuple[Any, anyio.Event]:
    """A tool that signals it started and then blocks until cancelled."""
    started = anyio.Event()

    @tool
    async def wait_forever(order_id: str) -> str:
        """Blocks."""
        started.set()
        await anyio.Event().wait()
        return order_id

    return wait_forever, started


def blocking_loop(metrics: LoopMetrics, wait_tool: Any) -> AgentLoop:
    """A loop whose first tool call blocks."""
    return AgentLoop(
        ScriptedClient([tool_use(("wait_forever", {"order_id": "O-1"})), text("unreachable")]),
        model="claude-sonnet-4-5",
        tools=[wait_tool],
        budget=Budget(max_steps=3),
        name="blocks",
        observers=Observers(metrics=metrics),
    )


async def test_runs_active_follows_a_cancel_event(
    registry: CollectorRegistry, metrics: LoopMetrics, blocking_tool: tuple[Any, anyio.Event]
) -> None:
    """`runs_active` is 1 while a run blocks and 0 after its cancel event; the open call is `cancelled`."""
    wait_tool, started = blocking_tool
    loop = blocking_loop(metrics, wait_tool)
    cancel = anyio.Event()
    results: list[LoopResult] = []

    async def run() -> None:
        results.append(await loop.run("Wait.", cancel=cancel))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await started.wait()
            assert value(registry, "boundloop_runs_active", loop="blocks") == 1
            cancel.set()
    assert results[0].stop_reason is StopReason.CANCELLED
    assert value(registry, "boundloop_runs_active", loop="blocks") == 0
    assert value(registry, "boundloop_runs_total", loop="blocks", stop_reason="cancelled") == 1
    assert (
        value(registry, "boundloop_tool_calls_total", loop="blocks", tool="wait_forever", outcome="cancelled")
        == 1
    )


async def test_runs_active_drops_when_the_caller_cancels(
    registry: CollectorRegistry, metrics: LoopMetrics, blocking_tool: tuple[Any, anyio.Event]
) -> None:
    """A run cancelled from outside (its task's scope) still decrements `runs_active` and counts the run."""
    wait_tool, started = blocking_tool
    loop = blocking_loop(metrics, wait_tool)

    async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await loop.run("Wait.")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            await group.start(run)
            await started.wait()
            assert value(registry, "boundloop_runs_active", loop="blocks") == 1
            group.cancel_scope.cancel()
    assert value(registry, "boundloop_runs_active", loop="blocks") == 0
    assert value(registry, "boundloop_runs_total", loop="blocks", stop_reason="cancelled") == 1


async def test_runs_active_drops_when_a_run_raises(registry: CollectorRegistry, metrics: LoopMetrics) -> None:
    """A run that raises (`on_tool_error="raise"`) still decrements `runs_active` and counts as `failed`."""
    loop = AgentLoop(
        ScriptedClient([tool_use(("flaky_lookup", {"order_id": "O-1"})), text("unreachable")]),
        model="claude-sonnet-4-5",
        tools=[flaky_lookup],
        budget=Budget(max_steps=3),
        policy=Policy(on_tool_error="raise"),
        name="raises",
        observers=Observers(metrics=metrics),
    )
    with pytest.raises(LookupError):
        await loop.run("Look.")
    assert value(registry, "boundloop_runs_active", loop="raises") == 0
    assert value(registry, "boundloop_runs_total", loop="raises", stop_reason="failed") == 1


def hostile_script(tag: str) -> list[dict[str, Any]]:
    """A model inventing tool names (some with quotes and newlines) and then a stop_reason."""
    invented = [(f"{tag}_tool_{n}", {"x": n}) for n in range(20)]
    return [
        tool_use(*invented, ('evil"}\nboundloop_runs_total 1e9', {}), ("read_order", {"order_id": tag})),
        {"stop_reason": f"{tag}_reason", "content": [{"type": "text", "text": "ha"}]},
    ]


async def test_a_hostile_model_cannot_create_time_series(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """Invented tool names and stop reasons land in `_unknown`; a second hostile run adds no series."""

    def hostile_loop(tag: str) -> AgentLoop:
        return AgentLoop(
            ScriptedClient(hostile_script(tag)),
            model="claude-sonnet-4-5",
            tools=TOOLS,
            budget=Budget(max_steps=4, max_consecutive_tool_errors=100),
            name="hostile",
            observers=Observers(metrics=metrics),
        )

    with pytest.raises(UnhandledStop):
        await hostile_loop("first").run("Go.")
    before = series(registry)
    with pytest.raises(UnhandledStop):
        await hostile_loop("second").run("Go.")
    assert series(registry) == before
    assert label_values(registry, "tool") == {t.name for t in TOOLS} | {"_unknown"}
    assert (
        value(registry, "boundloop_tool_calls_total", loop="hostile", tool="_unknown", outcome="invalid")
        == 42
    )
    assert value(registry, "boundloop_model_requests_total", loop="hostile", stop_reason="_unknown") == 2
    assert label_values(registry, "stop_reason") <= {
        *(str(reason) for reason in StopReason),
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "compaction",
        "refusal",
        "model_context_window_exceeded",
        "_unknown",
    }
    assert value(registry, "boundloop_runs_total", loop="hostile", stop_reason="failed") == 2


def test_bound_metrics_bound_every_label(registry: CollectorRegistry, metrics: LoopMetrics) -> None:
    """Values outside the enums and the registry are counted as `_unknown`, never as new label values."""
    bound = metrics.bind("direct", ["read_order"])
    bound.run_started()
    bound.run_finished("not_a_stop_reason", 0.1, "trace")
    bound.tool_call("read_order", "not_an_outcome", 0.01)
    bound.tool_call("made_up", "ok", None)
    bound.model_request(None, 0.2, "trace", None)
    bound.server_tool_uses({"web_search": 1, "made_up": 2})
    assert value(registry, "boundloop_runs_total", loop="direct", stop_reason="_unknown") == 1
    assert (
        value(registry, "boundloop_tool_calls_total", loop="direct", tool="read_order", outcome="_unknown")
        == 1
    )
    assert value(registry, "boundloop_tool_calls_total", loop="direct", tool="_unknown", outcome="ok") == 1
    assert value(registry, "boundloop_model_requests_total", loop="direct", stop_reason="_unknown") == 1
    assert value(registry, "boundloop_server_tool_uses_total", loop="direct", kind="web_search") == 1
    assert value(registry, "boundloop_server_tool_uses_total", loop="direct", kind="other") == 2
    assert bound.tool_label("read_order") == "read_order"
    assert bound.tool_label("made_up") == "_unknown"


async def test_two_loops_share_the_instruments(registry: CollectorRegistry) -> None:
    """Two loops (and two `LoopMetrics`) on one registry report side by side, told apart by `loop`."""
    first = refund_loop(LoopMetrics(registry=registry), name="first")
    second = refund_loop(LoopMetrics(registry=registry), name="second")
    await first.run("One.")
    await second.run("Two.")
    for name in ("first", "second"):
        assert value(registry, "boundloop_runs_total", loop=name, stop_reason="completed") == 1
        assert value(registry, "boundloop_transitions_total", loop=name, source="act", dest="observe") == 2


async def test_the_run_families_carry_the_loops_version(registry: CollectorRegistry) -> None:
    """Two releases of one loop (a canary) report their runs side by side, told apart by
    `version`; a loop without one has `version=""`. Only the run families carry it: the per-turn
    families keep their labels."""
    metrics = LoopMetrics(registry=registry)
    await refund_loop(metrics, version="v1").run("One.")
    await refund_loop(metrics, version="v2").run("Two.")
    await refund_loop(metrics, version="v2").run("Three.")
    await refund_loop(metrics, name="unversioned").run("Four.")
    for version, runs in (("v1", 1), ("v2", 2)):
        labels = {"loop": "refunds", "version": version}
        assert value(registry, "boundloop_runs_total", **labels, stop_reason="completed") == runs
        assert (
            value(registry, "boundloop_run_duration_seconds_count", **labels, stop_reason="completed") == runs
        )
        assert registry.get_sample_value("boundloop_runs_active", labels) == 0
    assert value(registry, "boundloop_runs_total", loop="unversioned", stop_reason="completed") == 1
    assert value(registry, "boundloop_transitions_total", loop="refunds", source="act", dest="observe") == 6
    labelled = {
        family.name: set(sample.labels)
        for family in registry.collect()
        if family.name.startswith("boundloop_")
        for sample in family.samples
        if not sample.name.endswith(("_bucket", "_created"))
    }
    assert {name for name, labels in labelled.items() if "version" in labels} == {
        "boundloop_runs",
        "boundloop_run_duration_seconds",
        "boundloop_runs_active",
    }
    assert labelled["boundloop_runs"] == {"loop", "version", "stop_reason"}
    assert labelled["boundloop_runs_active"] == {"loop", "version"}


def test_a_version_is_bound_once_and_kept_with_more_tools(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """`bind(loop, tools, version)` fixes the label; the MCP rebinding (`with_tools`) keeps it."""
    bound = metrics.bind("direct", ["read_order"], "2025.12.1").with_tools(["read_order", "listed_later"])
    assert bound.version == "2025.12.1"
    bound.run_started()
    labels = {"loop": "direct", "version": "2025.12.1"}
    assert registry.get_sample_value("boundloop_runs_active", labels) == 1
    bound.run_finished("completed", 0.5, "trace")
    assert registry.get_sample_value("boundloop_runs_active", labels) == 0
    assert registry.get_sample_value("boundloop_runs_total", {**labels, "stop_reason": "completed"}) == 1
    assert metrics.bind("direct", []).version == ""


@pytest.mark.parametrize("doc", ["docs/metrics.md", "README.md"])
def test_the_docs_tables_name_every_metric_its_type_and_labels(doc: str) -> None:
    """The metrics table of docs/metrics.md and of the README lists each family with its type and
    its labels besides `loop` (the first backticked names of the labels column), in order."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    rows = [line.split("|")[1:4] for line in text.splitlines() if line.startswith("| `boundloop_")]
    documented = [
        (name.strip(" `"), kind.strip(), re.findall(r"`(\w+)`", labels)) for name, kind, labels in rows
    ]
    expected = [
        (
            family.full_name("boundloop"),
            family.type,
            [label for label in family.labelnames if label != "loop"],
        )
        for family in (*FAMILIES, *POOL_FAMILIES)
    ]
    assert len(documented) == len(expected)
    assert [
        (name, kind, labels[: len(want)])
        for (name, kind, labels), (_, _, want) in zip(documented, expected, strict=True)
    ] == expected


def test_default_registry_is_shared_per_namespace() -> None:
    """`LoopMetrics()` uses the process's default registry, once: a second one shares the instruments."""
    one, two = LoopMetrics(), LoopMetrics()
    assert one.registry is REGISTRY
    assert one.instruments is two.instruments
    assert LoopMetrics(namespace="other_app").instruments is not one.instruments


def test_a_fresh_registry_gets_its_own_instruments() -> None:
    """Each fresh registry gets its own instruments, so tests never share series."""
    assert (
        LoopMetrics(registry=CollectorRegistry()).instruments
        is not LoopMetrics(CollectorRegistry()).instruments
    )


async def test_the_hot_path_never_resolves_labels(
    monkeypatch: pytest.MonkeyPatch, metrics: LoopMetrics
) -> None:
    """Once a loop has run, another run of it calls `.labels()` on no instrument: children are cached."""
    loop = AgentLoop(
        ScriptedClient(refund_script() + refund_script()),
        model="claude-sonnet-4-5",
        tools=TOOLS,
        budget=Budget(max_steps=6, max_consecutive_tool_errors=5),
        policy=Policy(forbidden={"issue_refund"}, on_forbidden="report"),
        name="refunds",
        observers=Observers(metrics=metrics),
    )
    first = await loop.run("Warm up.")
    calls: list[tuple[str, ...]] = []
    original: Callable[..., Any] = MetricWrapperBase.labels

    def counting(self: MetricWrapperBase, *values: Any, **labels: Any) -> Any:
        calls.append(tuple(str(v) for v in values))
        return original(self, *values, **labels)

    monkeypatch.setattr(MetricWrapperBase, "labels", counting)
    second = await loop.run("Again.")
    assert edges_taken(second) == edges_taken(first)
    assert calls == []


def exemplars(registry: CollectorRegistry, name: str) -> list[dict[str, str]]:
    """The exemplar labels on `name`'s buckets, as an OpenMetrics scrape shows them."""
    body, content_type = render(registry, accept=OPENMETRICS)
    assert content_type.startswith("application/openmetrics-text")
    families = text_string_to_metric_families(body.decode())  # type: ignore[no-untyped-call]  # untyped upstream
    return [
        sample.exemplar.labels
        for family in families
        for sample in family.samples
        if sample.name == name and sample.exemplar is not None
    ]


async def test_run_durations_carry_the_trace_id_as_exemplar(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """In OpenMetrics, the run-duration histogram carries the run's trace_id as an exemplar."""
    result = await refund_loop(metrics).run("Decide on O-104.")
    assert exemplars(registry, "boundloop_run_duration_seconds_bucket") == [
        {"trace_id": result.state.trace_id}
    ]


def test_slow_observations_carry_exemplars_fast_ones_do_not(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """Observations from `EXEMPLAR_MIN_S` on carry the trace_id; sub-millisecond ones skip the cost."""
    bound = metrics.bind("direct", ["read_order"])
    slow = EXEMPLAR_MIN_S * 10
    bound.transition("propose", "validate", slow, "trace-slow")
    bound.transition("assemble", "propose", EXEMPLAR_MIN_S / 10, "trace-fast")
    bound.model_request("end_turn", slow, "trace-model", (1, 1, 0, 0))
    bound.tool_call("read_order", "ok", slow, "trace-tool")
    assert exemplars(registry, "boundloop_transition_duration_seconds_bucket") == [{"trace_id": "trace-slow"}]
    assert exemplars(registry, "boundloop_model_request_duration_seconds_bucket") == [
        {"trace_id": "trace-model"}
    ]
    assert exemplars(registry, "boundloop_tool_duration_seconds_bucket") == [{"trace_id": "trace-tool"}]


def test_exemplars_can_be_turned_off(registry: CollectorRegistry) -> None:
    """`LoopMetrics(exemplars=False)` observes durations without exemplars."""
    bound = LoopMetrics(registry=registry, exemplars=False).bind("direct", [])
    bound.run_started()
    bound.run_finished("completed", 2.0, "trace")
    bound.transition("propose", "validate", 2.0, "trace")
    assert exemplars(registry, "boundloop_run_duration_seconds_bucket") == []
    assert exemplars(registry, "boundloop_transition_duration_seconds_bucket") == []


def test_metrics_off_records_nothing(registry: CollectorRegistry) -> None:
    """`Observers(metrics=None)` binds no instruments at all."""
    loop = AgentLoop(
        ScriptedClient([text("hi")]),
        model="claude-sonnet-4-5",
        tools=[read_order],
        budget=Budget(max_steps=1),
        observers=Observers(metrics=None),
    )
    assert loop.metrics is None
    assert series(registry) == set()


async def test_a_trace_id_too_long_for_an_exemplar_does_not_fail_the_run() -> None:
    """The caller's own trace id of 200 characters: the run completes and is counted, no exemplar."""
    registry = CollectorRegistry()
    trace_id = "t" * 200
    result = await refund_loop(LoopMetrics(registry=registry, exemplars=True)).run("goal", trace_id=trace_id)
    assert result.stop_reason is StopReason.COMPLETED
    assert value(registry, "boundloop_runs_total", loop="refunds", stop_reason="completed") == 1
    assert trace_id not in render(registry, "application/openmetrics-text")[0].decode()


def test_a_runs_exemplar_id_is_its_trace_id_when_exemplars_are_on_and_it_fits() -> None:
    on = LoopMetrics(registry=CollectorRegistry(), exemplars=True).bind("x", ())
    off = LoopMetrics(registry=CollectorRegistry(), exemplars=False).bind("x", ())
    assert on.exemplar_id("abc") == "abc"
    assert on.exemplar_id("t" * 200) is None
    assert off.exemplar_id("abc") is None
    assert on.edges() is on.edges()  # resolved once per thread
