"""Integration: a real Prometheus scrapes a running loop's `/metrics` and answers PromQL about it.

The server comes from `tests/metrics/prometheus_server.py` (skipped locally without the
`prometheus` binary, a failure in CI).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from prometheus_client import CollectorRegistry

from boundloop import LoopMetrics, LoopResult
from boundloop.metrics import MetricsServer, serve
from tests.metrics.prometheus_server import DEADLINE_S, Prometheus, Target, running_prometheus
from tests.metrics.scripts import edges_taken, refund_loop

pytestmark = [pytest.mark.integration, pytest.mark.asyncio_only]  # one event loop is enough

DASHBOARD = Path(__file__).resolve().parents[2] / "examples" / "grafana" / "boundloop-dashboard.json"
LOOP = "scraped"


def dashboard_expressions() -> list[str]:
    """Every PromQL expression of the Grafana dashboard, with its variables filled in."""
    board = json.loads(DASHBOARD.read_text())
    return [
        target["expr"].replace("$__rate_interval", "1m").replace("$loop", LOOP)
        for panel in board["panels"]
        for target in panel["targets"]
    ]


@pytest.fixture
def metrics_endpoint(registry: CollectorRegistry) -> Iterator[MetricsServer]:
    """The loop's `/metrics`, served from the test's registry on a free loopback port."""
    server = serve(0, registry=registry)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
async def prometheus(tmp_path: Path, metrics_endpoint: MetricsServer) -> AsyncIterator[Prometheus]:
    """A real Prometheus scraping the loop's endpoint every second."""
    async with running_prometheus(tmp_path, [Target(port=metrics_endpoint.port, labels={})]) as server:
        yield server


async def test_prometheus_scrapes_every_edge_the_run_took(
    metrics: LoopMetrics, prometheus: Prometheus
) -> None:
    """Prometheus scrapes the loop and answers edge counts, latency quantiles and every dashboard query."""
    loops = [refund_loop(metrics, name=LOOP) for _ in range(2)]  # binding creates the edges' series
    with anyio.fail_after(DEADLINE_S):
        # The first scrape sees the zero-initialised edges, so `rate()` sees the runs' increase.
        await prometheus.wait_for(f'count(boundloop_transitions_total{{loop="{LOOP}"}})', at_least=1)
        started = time.time()
        results: list[LoopResult] = []
        for loop, goal in zip(loops, ("Decide on O-104.", "Decide on O-105."), strict=True):
            results.append(await loop.run(goal))
        await prometheus.wait_for(f'sum(boundloop_runs_total{{loop="{LOOP}"}})', at_least=2)
        taken = edges_taken(results[0]) + edges_taken(results[1])

        counted = {
            (s["metric"]["source"], s["metric"]["dest"]): float(s["value"][1])
            for s in await prometheus.query(f'boundloop_transitions_total{{loop="{LOOP}"}}')
        }
        assert {edge: counted[edge] for edge in taken} == {edge: float(n) for edge, n in taken.items()}
        assert all(n == 0 for edge, n in counted.items() if edge not in taken)

        quantiles = await prometheus.query(
            "histogram_quantile(0.99, sum by (le, source, dest) "
            f'(rate(boundloop_transition_duration_seconds_bucket{{loop="{LOOP}"}}[1m])))'
        )
        by_edge = {(s["metric"]["source"], s["metric"]["dest"]): float(s["value"][1]) for s in quantiles}
        for edge in taken:
            assert math.isfinite(by_edge[edge]), (edge, by_edge[edge])
            assert 0 < by_edge[edge] <= 300, (edge, by_edge[edge])

        for expression in dashboard_expressions():
            assert await prometheus.query(expression), f"no data for dashboard expression {expression}"

        response = await prometheus.api.get(
            "/api/v1/query_exemplars",
            params={
                "query": f'boundloop_run_duration_seconds_bucket{{loop="{LOOP}"}}',
                "start": str(started - 60),
                "end": str(time.time() + 60),
            },
        )
        traced = {
            exemplar["labels"]["trace_id"]
            for group in response.json()["data"]
            for exemplar in group["exemplars"]
        }
        assert traced & {result.state.trace_id for result in results}
