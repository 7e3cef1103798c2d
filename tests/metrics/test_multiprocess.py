"""prometheus_client's multiprocess mode: two worker processes write, one scrape sums them."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from boundloop.metrics import asgi_app, multiprocess_registry

pytestmark = pytest.mark.asyncio_only  # servers, subprocesses and Prometheus need one event loop

ROOT = Path(__file__).resolve().parents[2]


async def run_worker(directory: Path, name: str, script: str = "refund") -> dict[str, Any]:
    """One real worker process running a scripted loop (`refund` or `search`); its JSON report."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory), "PYTHONPATH": str(ROOT)}
    done = await anyio.run_process(
        [sys.executable, "-m", "tests.metrics.multiprocess_worker", name, script],
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    report: dict[str, Any] = json.loads(done.stdout)
    return report


async def test_two_workers_are_summed_by_one_scrape(tmp_path: Path) -> None:
    """Counters and histograms written by two worker processes add up in a `MultiProcessCollector` scrape."""
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            reports: list[dict[str, Any]] = []

            async def worker() -> None:
                reports.append(await run_worker(tmp_path, "workers"))

            group.start_soon(worker)
            group.start_soon(worker)
    assert [r["stop_reason"] for r in reports] == ["completed", "completed"]
    assert reports[0]["pid"] != reports[1]["pid"]
    assert not any(r["exemplars"] for r in reports)  # multiprocess mode stores none

    registry = await anyio.to_thread.run_sync(multiprocess_registry, str(tmp_path))

    def value(name: str, **labels: str) -> float:
        if name.startswith("boundloop_runs_"):  # the run families carry the loop's version too
            labels = {"version": "", **labels}
        if name.startswith("boundloop_model_"):  # and the model families the platform
            labels = {"platform": "anthropic", **labels}
        return registry.get_sample_value(name, {"loop": "workers", **labels}) or 0.0

    assert value("boundloop_runs_total", stop_reason="completed") == 2
    for source, dest, count in reports[0]["edges"]:
        assert value("boundloop_transitions_total", source=source, dest=dest) == 2 * count
        assert value("boundloop_transition_duration_seconds_count", source=source, dest=dest) == 2 * count
    assert value("boundloop_model_requests_total", stop_reason="tool_use") == 4
    assert value("boundloop_model_tokens_total", kind="input") == 60
    assert value("boundloop_tool_calls_total", tool="flaky_lookup", outcome="error") == 2
    assert value("boundloop_tool_calls_total", tool="_unknown", outcome="invalid") == 2
    assert value("boundloop_runs_active") == 0


async def test_two_workers_server_tool_uses_are_summed(tmp_path: Path) -> None:
    """Each worker's web searches reach the mmap files: one scrape counts both workers'."""
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            reports: list[dict[str, Any]] = []

            async def worker() -> None:
                reports.append(await run_worker(tmp_path, "searchers", "search"))

            group.start_soon(worker)
            group.start_soon(worker)
    assert [r["server_tool_uses"] for r in reports] == [{"web_search": 3}, {"web_search": 3}]
    registry = await anyio.to_thread.run_sync(multiprocess_registry, str(tmp_path))

    def uses(kind: str) -> float | None:
        return registry.get_sample_value(
            "boundloop_server_tool_uses_total", {"loop": "searchers", "platform": "anthropic", "kind": kind}
        )

    assert (uses("web_search"), uses("web_fetch"), uses("other")) == (6, 0, 0)


async def test_the_asgi_app_serves_the_aggregate(tmp_path: Path) -> None:
    """`asgi_app(multiprocess_registry(dir))` serves the workers' sum, in OpenMetrics too."""
    with anyio.fail_after(60):
        await run_worker(tmp_path, "served")
    app = asgi_app(await anyio.to_thread.run_sync(multiprocess_registry, str(tmp_path)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
        response = await client.get("/", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert 'boundloop_runs_total{loop="served",stop_reason="completed",version=""} 1.0' in response.text
    assert response.text.endswith("# EOF\n")
