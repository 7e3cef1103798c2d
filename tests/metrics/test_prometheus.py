"""Integration: a real Prometheus scrapes a running loop's `/metrics` and answers PromQL about it.

Needs the `prometheus` binary (Debian package `prometheus`): skipped locally when absent, a
failure in CI (`BOUNDLOOP_REQUIRE_INTEGRATION=1`). Every wait polls Prometheus's HTTP API
under a deadline; the server is terminated and awaited in a `finally`.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import httpx
import pytest
from prometheus_client import CollectorRegistry

from boundloop import LoopMetrics, LoopResult
from boundloop.metrics import MetricsServer, serve
from tests.conftest import require_binary
from tests.metrics.scripts import edges_taken, refund_loop

pytestmark = pytest.mark.integration

DASHBOARD = Path(__file__).resolve().parents[2] / "examples" / "grafana" / "boundloop-dashboard.json"
LOOP = "scraped"
DEADLINE_S = 60


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def dashboard_expressions() -> list[str]:
    """Every PromQL expression of the Grafana dashboard, with its variables filled in."""
    board = json.loads(DASHBOARD.read_text())
    return [
        target["expr"].replace("$__rate_interval", "1m").replace("$loop", LOOP)
        for panel in board["panels"]
        for target in panel["targets"]
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class PrometheusFiles:
    """Where a test's Prometheus keeps its config, storage and log."""

    config: Path
    storage: Path
    log: IO[bytes]


@pytest.fixture
def metrics_endpoint(registry: CollectorRegistry) -> Iterator[MetricsServer]:
    """The loop's `/metrics`, served from the test's registry on a free loopback port."""
    server = serve(0, registry=registry)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def prometheus_files(tmp_path: Path, metrics_endpoint: MetricsServer) -> Iterator[PrometheusFiles]:
    """A scrape config pointing at the loop's endpoint every second, a storage dir and a log file."""
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: boundloop\n"
        "    scrape_interval: 1s\n"
        "    scrape_timeout: 1s\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_endpoint.port}']\n"
    )
    with (tmp_path / "prometheus.log").open("wb") as log:
        yield PrometheusFiles(config=config, storage=tmp_path / "data", log=log)


@dataclass(frozen=True, slots=True, kw_only=True)
class Prometheus:
    """A running Prometheus server and a client for its HTTP API."""

    api: httpx.AsyncClient
    log: Path

    async def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result vector; fails on any API error."""
        response = await self.api.get("/api/v1/query", params={"query": promql})
        body = response.json()
        assert response.status_code == 200, (promql, body)
        assert body["status"] == "success", (promql, body)
        assert body["data"]["resultType"] == "vector", (promql, body)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    async def wait_for(self, promql: str, *, at_least: float) -> None:
        """Poll until `promql` returns a sample of at least `at_least`."""
        while True:
            samples = await self.query(promql)
            if any(float(s["value"][1]) >= at_least for s in samples):
                return
            await anyio.sleep(0.25)


@pytest.fixture
async def prometheus(prometheus_files: PrometheusFiles) -> AsyncIterator[Prometheus]:
    """A real Prometheus on a free loopback port, scraping the loop; terminated and awaited after."""
    binary = require_binary("prometheus", "prometheus")
    port = free_port()
    process = await anyio.open_process(
        [
            binary,
            f"--config.file={prometheus_files.config}",
            f"--storage.tsdb.path={prometheus_files.storage}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--enable-feature=exemplar-storage",
            "--log.level=warn",
        ],
        stdin=subprocess.DEVNULL,
        stdout=prometheus_files.log,
        stderr=prometheus_files.log,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as api:
            with anyio.fail_after(DEADLINE_S):
                while True:
                    if process.returncode is not None:
                        log = await anyio.Path(prometheus_files.log.name).read_text()
                        pytest.fail(f"prometheus exited with {process.returncode}:\n{log}")
                    try:
                        if (await api.get("/-/ready")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await anyio.sleep(0.1)
            yield Prometheus(api=api, log=Path(prometheus_files.log.name))
    finally:
        process.terminate()
        with anyio.move_on_after(10, shield=True):
            await process.wait()
        if process.returncode is None:
            process.kill()
            with anyio.move_on_after(5, shield=True):
                await process.wait()


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
