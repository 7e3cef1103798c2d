"""`LocalStore`: plain Python values that scrape exactly as prometheus_client's instruments would.

The reference is prometheus_client itself: the same calls on a `BoundMetrics` over its real
instruments (`ClientInstruments`, the multiprocess backend) must render the same exposition,
in both formats, bucket edges, NaN and exemplars included.
"""

from __future__ import annotations

import math
import re
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import prometheus_client.metrics
import pytest
from prometheus_client import CollectorRegistry, Counter

from boundloop import LoopMetrics
from boundloop.metrics import BoundMetrics, render
from boundloop.metrics._client import ClientInstruments
from boundloop.metrics._families import FAMILIES, TRANSITION_BUCKETS
from boundloop.metrics._store import LocalStore
from boundloop.metrics.instruments import EXEMPLAR_MIN_S, pool_gauges_for

pytestmark = pytest.mark.asyncio_only  # servers, subprocesses and Prometheus need one event loop

TOOLS = frozenset({"read_order", "lookup"})
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def record(bound: BoundMetrics) -> None:
    """Every hot-path method, at bucket edges, outside the buckets, NaN, with and without exemplars."""
    bound.run_started()
    for duration in (*TRANSITION_BUCKETS, 0.0, -1.0, 1e4, math.inf, math.nan, 3e-4, 0.2):
        bound.transition("act", "observe", duration, TRACE)
        bound.transition("assemble", "propose", duration)
    bound.transition("propose", "validate", 2.0, "second-trace")
    bound.model_request("tool_use", 0.7, TRACE, (10, 5, 0, 3))
    bound.model_request(None, EXEMPLAR_MIN_S / 2, TRACE, None)
    bound.model_request("not_documented", 1.5, TRACE, (1, 0, 2, 0))
    bound.server_tool_uses({"web_search": 2, "code_execution": 1})
    bound.server_tool_uses({"web_fetch": 1})
    bound.tool_call("read_order", "ok", 0.003, TRACE)
    bound.tool_call("read_order", "ok", 1e-4, TRACE)
    bound.tool_call("lookup", "error", None, TRACE)
    bound.tool_call("lookup", "made_up_outcome", 0.5)
    bound.tool_call("invented", "invalid", None, TRACE)
    bound.tool_call("invented", "ok", 0.05, TRACE)
    bound.run_finished("completed", 3.0, TRACE)
    bound.run_started()
    bound.run_finished("not_a_stop_reason", 0.001, TRACE)
    bound.run_started()
    bound.pool_usage("tenant-a", 0.25, 0.0153)


def pair(
    exemplars: bool,
) -> tuple[tuple[CollectorRegistry, BoundMetrics], tuple[CollectorRegistry, BoundMetrics]]:
    """The same loop on `LocalStore` and on prometheus_client's instruments, each on its own registry."""
    local_registry, client_registry = CollectorRegistry(), CollectorRegistry()
    local = LoopMetrics(registry=local_registry, exemplars=exemplars).bind("parity", TOOLS, "v1")
    instruments = ClientInstruments(client_registry, "boundloop", FAMILIES)
    pools = pool_gauges_for(client_registry, "boundloop")
    client = BoundMetrics(instruments, "parity", TOOLS, version="v1", exemplars=exemplars, pools=pools)
    return (local_registry, local), (client_registry, client)


def comparable(body: bytes) -> list[str]:
    """An exposition without what differs by when it ran: `_created` values and exemplar times."""
    lines = body.decode().splitlines()
    lines = [re.sub(r"(_created\{[^}]*\}) \S+$", r"\1 <created>", line) for line in lines]
    return [re.sub(r"(# \{[^}]*\} \S+) \S+$", r"\1 <at>", line) for line in lines]


@pytest.mark.parametrize("exemplars", [True, False], ids=["exemplars", "no-exemplars"])
@pytest.mark.parametrize("created", [True, False], ids=["created", "no-created"])
def test_a_scrape_matches_prometheus_client_instruments(
    monkeypatch: pytest.MonkeyPatch, exemplars: bool, created: bool
) -> None:
    """Text 0.0.4 and OpenMetrics render line for line as prometheus_client's own instruments do."""
    monkeypatch.setattr(prometheus_client.metrics, "_use_created", created)
    (local_registry, local), (client_registry, client) = pair(exemplars)
    record(local)
    record(client)
    for accept in ("", OPENMETRICS):
        local_body, _ = render(local_registry, accept=accept)
        client_body, _ = render(client_registry, accept=accept)
        assert comparable(local_body) == comparable(client_body)
    text = render(local_registry, accept=OPENMETRICS)[0].decode()
    assert ("_created{" in text) is created
    assert ("# {trace_id=" in text) is exemplars
    assert (
        local_registry.get_sample_value(
            "boundloop_transitions_total", {"loop": "parity", "source": "act", "dest": "observe"}
        )
        == len(TRANSITION_BUCKETS) + 7
    )


def test_threads_add_up_to_the_scrape_of_one() -> None:
    """Two threads' cells scrape as one thread's calls would: counts and sums added, the newest
    exemplar of each bucket kept."""
    (local_registry, local), (client_registry, client) = pair(exemplars=True)

    def turn(bound: BoundMetrics, trace_id: str) -> None:
        for duration in (2**-14, 2**-9, 0.5, 2.0):  # exact in binary: the sums do not depend on order
            bound.transition("act", "observe", duration, trace_id)
            bound.tool_call("read_order", "ok", duration, trace_id)
        bound.model_request("tool_use", 0.5, trace_id, (3, 2, 1, 0))

    first_done, second_done = threading.Event(), threading.Event()

    def both(index: int) -> None:
        # Both threads stay alive until both have recorded: two thread ids, two shards.
        if index == 0:
            turn(local, "first-thread")
            first_done.set()
            assert second_done.wait(10)
        else:
            assert first_done.wait(10)
            turn(local, "second-thread")
            second_done.set()

    run_in_threads(2, both)
    turn(client, "first-thread")
    turn(client, "second-thread")
    store = LoopMetrics(registry=local_registry).instruments
    assert isinstance(store, LocalStore)
    assert len(store._shards) == 3  # the binding thread's and the two workers'
    for accept in ("", OPENMETRICS):
        local_body, _ = render(local_registry, accept=accept)
        client_body, _ = render(client_registry, accept=accept)
        assert comparable(local_body) == comparable(client_body)


def test_an_overlong_trace_id_is_recorded_without_an_exemplar() -> None:
    """A caller's trace id too long for an exemplar (OpenMetrics: 128 characters) never fails a
    run: the observation counts, with no exemplar; a fitting id still gets one."""
    (local_registry, local), (client_registry, client) = pair(exemplars=True)
    long_trace = "x" * 121
    for bound in (local, client):
        bound.transition("act", "observe", 1.0, long_trace)
        bound.transition("act", "observe", 1.0, "y" * 120)
    for registry in (local_registry, client_registry):
        body = render(registry, accept=OPENMETRICS)[0].decode()
        assert long_trace not in body
        assert 'trace_id="' + "y" * 120 + '"' in body
        assert (
            registry.get_sample_value(
                "boundloop_transitions_total", {"loop": "parity", "source": "act", "dest": "observe"}
            )
            == 2
        )


def test_a_negative_token_count_is_refused_like_prometheus_client() -> None:
    """Counters only go up: a negative increment raises, as prometheus_client's `Counter.inc` does."""
    (_, local), (_, client) = pair(exemplars=True)
    for bound in (local, client):
        with pytest.raises(ValueError, match="non-negative"):
            bound.model_request("end_turn", 0.5, TRACE, (-1, 0, 0, 0))


def test_the_collector_reserves_its_names(registry: CollectorRegistry, metrics: LoopMetrics) -> None:
    """A clashing instrument still raises "Duplicated timeseries", and `name[]` filters find the series."""
    metrics.bind("names", TOOLS).tool_call("read_order", "ok", 0.01)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Counter("transitions_total", "Clash.", namespace="boundloop", registry=registry)
    restricted = registry.restricted_registry(["boundloop_tool_duration_seconds_count"])
    samples = [sample for family in restricted.collect() for sample in family.samples]
    assert [(s.labels, s.value) for s in samples] == [({"loop": "names", "tool": "read_order"}, 1.0)]


def run_in_threads(count: int, target: Callable[[int], None]) -> None:
    """`target(index)` in `count` threads started together; re-raise the first failure."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait()
            target(index)
        except BaseException as error:  # handed to the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


@pytest.fixture
def frequent_switches() -> Iterator[None]:
    """Threads switch every microsecond: an unguarded read-modify-write would lose increments."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


@pytest.mark.usefixtures("frequent_switches")
def test_threads_lose_no_increment_while_scraped(registry: CollectorRegistry) -> None:
    """Threads recording on one loop (one `BoundMetrics`, or one each) while another scrapes: all counted."""
    threads, turns = 8, 3000
    shared = LoopMetrics(registry=registry).bind("threads", TOOLS)
    done = threading.Event()
    seen: list[float] = []

    def scrape() -> None:
        while not done.is_set():
            value = registry.get_sample_value(
                "boundloop_transitions_total", {"loop": "threads", "source": "act", "dest": "observe"}
            )
            seen.append(value or 0.0)

    def work(index: int) -> None:
        # Odd threads bind the same loop name on a second LoopMetrics: the same series.
        bound = shared if index % 2 == 0 else LoopMetrics(registry=registry).bind("threads", TOOLS)
        for _ in range(turns):
            bound.transition("act", "observe", 1e-4, TRACE)
            bound.tool_call("read_order", "ok", 0.002, TRACE)
            bound.model_request("tool_use", 0.5, TRACE, (2, 1, 0, 0))
            bound.server_tool_uses({"web_search": 1})

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        run_in_threads(threads, work)
    finally:
        done.set()
        scraper.join()

    def value(name: str, **labels: str) -> float | None:
        if name.startswith(("boundloop_model_", "boundloop_server_tool_uses")):
            labels = {"platform": "anthropic", **labels}
        return registry.get_sample_value(name, {"loop": "threads", **labels})

    total = threads * turns
    edge = {"source": "act", "dest": "observe"}
    assert value("boundloop_transitions_total", **edge) == total
    assert value("boundloop_transition_duration_seconds_count", **edge) == total
    assert value("boundloop_transition_duration_seconds_sum", **edge) == pytest.approx(total * 1e-4)
    assert value("boundloop_tool_calls_total", tool="read_order", outcome="ok") == total
    assert value("boundloop_tool_duration_seconds_count", tool="read_order") == total
    assert value("boundloop_model_requests_total", stop_reason="tool_use") == total
    assert value("boundloop_model_tokens_total", kind="input") == 2 * total
    assert value("boundloop_server_tool_uses_total", kind="web_search") == total
    assert seen == sorted(seen)  # a counter never went down between scrapes


def test_rebinding_a_loop_or_ending_threads_adds_no_cells(registry: CollectorRegistry) -> None:
    """A loop bound again and again (an `AgentLoop` per request) reuses its cells, and so does the
    next thread of a pool; what an ended thread recorded stays in the scrape."""
    metrics = LoopMetrics(registry=registry)
    store = metrics.instruments
    assert isinstance(store, LocalStore)

    def cells() -> int:
        return sum(len(shard) for shard in store._shards.values())

    metrics.bind("rebound", TOOLS).transition("act", "observe", 1e-4)
    before = cells()
    for _ in range(50):
        metrics.bind("rebound", TOOLS).transition("act", "observe", 1e-4)
    assert cells() == before

    def one_turn(_: int) -> None:
        metrics.bind("rebound", TOOLS).transition("act", "observe", 1e-4)

    for _ in range(20):  # one short-lived thread after another, as a pool replaces its workers
        run_in_threads(1, one_turn)
    assert len(store._shards) <= 5  # not one per thread: an ended thread's id (and shard) is reused
    assert (
        registry.get_sample_value(
            "boundloop_transitions_total", {"loop": "rebound", "source": "act", "dest": "observe"}
        )
        == 71
    )


def test_multiprocess_mode_records_on_prometheus_client_instruments(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With `PROMETHEUS_MULTIPROC_DIR` set the backend is prometheus_client's own instruments."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    registry = CollectorRegistry()
    metrics = LoopMetrics(registry=registry)
    assert isinstance(metrics.instruments, ClientInstruments)
    assert metrics.exemplars is False
    bound = metrics.bind("mp", TOOLS)
    bound.transition("act", "observe", 0.01, TRACE)
    bound.tool_call("read_order", "ok", 0.01, TRACE)
    bound.server_tool_uses({"web_search": 2, "code_execution": 1})
    labels = {"loop": "mp", "source": "act", "dest": "observe"}
    assert registry.get_sample_value("boundloop_transitions_total", labels) == 1
    assert registry.get_sample_value("boundloop_transition_duration_seconds_count", labels) == 1
    for kind, count in {"web_search": 2, "web_fetch": 0, "other": 1}.items():
        uses = {"loop": "mp", "platform": "anthropic", "kind": kind}
        assert registry.get_sample_value("boundloop_server_tool_uses_total", uses) == count
