"""Exposition: `serve()`, the ASGI app in Starlette and FastAPI, format negotiation, promtool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import REGISTRY, CollectorRegistry
from starlette.applications import Starlette
from starlette.routing import Mount, Route

from boundloop import LoopMetrics
from boundloop.metrics import asgi_app, exposed_registry, render, serve
from tests.conftest import require_binary
from tests.metrics.scripts import refund_loop

pytestmark = pytest.mark.asyncio_only  # servers, subprocesses and Prometheus need one event loop

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


@pytest.fixture
async def scraped(registry: CollectorRegistry, metrics: LoopMetrics) -> CollectorRegistry:
    """A registry holding one finished refund run."""
    await refund_loop(metrics).run("Decide on O-104.")
    return registry


async def test_serve_answers_scrapes_in_both_formats(scraped: CollectorRegistry) -> None:
    """`serve(0)` listens on loopback and answers text 0.0.4, or OpenMetrics when asked, until closed."""
    server = serve(0, registry=scraped)
    try:
        assert server.host == "127.0.0.1"
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        async with httpx.AsyncClient(timeout=5) as client:
            plain = await client.get(server.url)
            openmetrics = await client.get(server.url, headers={"Accept": OPENMETRICS})
    finally:
        await anyio.to_thread.run_sync(server.close)  # joins the server thread: off the loop
    assert plain.status_code == 200
    assert plain.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'boundloop_transitions_total{dest="observe",loop="refunds",source="act"} 2.0' in plain.text
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.endswith("# EOF\n")
    assert "# {trace_id=" in openmetrics.text
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient(timeout=5) as client:
            await client.get(server.url)


async def test_plain_text_exposition_passes_promtool(scraped: CollectorRegistry) -> None:
    """The text format of a real run passes `promtool check metrics` with no lint findings."""
    promtool = require_binary("promtool", "prometheus")
    body, _ = render(scraped)
    with anyio.fail_after(30):
        checked = await anyio.run_process([promtool, "check", "metrics"], input=body, check=False)
    assert checked.returncode == 0, checked.stderr.decode() + checked.stdout.decode()
    assert checked.stdout.decode().strip() == ""
    assert checked.stderr.decode().strip() == ""


async def get(app: Any, path: str, **headers: str) -> httpx.Response:
    """One request to an ASGI app, in process."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        return await client.get(path, headers=headers)


async def test_asgi_app_as_a_starlette_route(scraped: CollectorRegistry) -> None:
    """`Route("/metrics", asgi_app(registry))` serves the metrics at exactly `/metrics`."""
    app = Starlette(routes=[Route("/metrics", asgi_app(scraped))])
    response = await get(app, "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'boundloop_runs_total{loop="refunds",stop_reason="completed",version=""} 1.0' in response.text


async def test_asgi_app_in_fastapi(scraped: CollectorRegistry) -> None:
    """FastAPI serves the app as a `Route` at `/metrics`, and `mount` serves it under `/mounted/`."""
    app = FastAPI(routes=[Route("/metrics", asgi_app(scraped))])
    app.mount("/mounted", asgi_app(scraped))
    routed = await get(app, "/metrics", accept=OPENMETRICS)
    mounted = await get(app, "/mounted/")
    assert routed.status_code == mounted.status_code == 200
    assert routed.headers["content-type"].startswith("application/openmetrics-text")
    assert "boundloop_transitions_total" in routed.text
    assert "boundloop_transitions_total" in mounted.text


async def test_asgi_app_compresses_and_filters(scraped: CollectorRegistry) -> None:
    """The app gzips for `Accept-Encoding: gzip` and honours `name[]` filters, as Prometheus's clients do."""
    app = Starlette(routes=[Mount("/metrics", asgi_app(scraped))])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        response = await client.get(
            "/metrics/", params={"name[]": "boundloop_runs_active"}, headers={"Accept-Encoding": "gzip"}
        )
    assert response.headers["content-encoding"] == "gzip"
    lines = [line for line in response.text.splitlines() if not line.startswith("#")]
    assert lines == ['boundloop_runs_active{loop="refunds",version=""} 0.0']


async def test_asgi_app_speaks_lifespan() -> None:
    """Run standalone (e.g. `uvicorn boundloop...:app`), the app completes the lifespan protocol."""
    app = asgi_app(CollectorRegistry())
    inbox = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return inbox.pop(0)

    async def send(message: Any) -> None:
        sent.append(dict(message))

    with anyio.fail_after(5):
        await app({"type": "lifespan"}, receive, send)
    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]


def test_exposed_registry_defaults_to_the_process_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without multiprocess mode the endpoints expose the default `REGISTRY`, else the explicit one."""
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    monkeypatch.delenv("prometheus_multiproc_dir", raising=False)
    assert exposed_registry() is REGISTRY
    mine = CollectorRegistry()
    assert exposed_registry(mine) is mine


def test_exposed_registry_aggregates_in_multiprocess_mode(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With `PROMETHEUS_MULTIPROC_DIR` set, the default is a fresh registry reading that directory."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    exposed = exposed_registry()
    assert exposed is not REGISTRY
    assert list(exposed.collect()) == []  # no worker has written yet
    assert LoopMetrics(registry=CollectorRegistry()).exemplars is False


async def test_asgi_app_refuses_other_methods(scraped: CollectorRegistry) -> None:
    """Only GET and HEAD scrape: anything else is 405 with an Allow header."""
    app = asgi_app(scraped)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
        response = await client.post("/metrics")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"
