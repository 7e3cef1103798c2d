"""A real Prometheus server for the integration tests, scraping the targets a test gives it.

Needs the `prometheus` binary (Debian package `prometheus`): skipped locally when absent, a
failure in CI (`BOUNDLOOP_REQUIRE_INTEGRATION=1`). Every wait polls Prometheus's HTTP API
under a deadline; the server is terminated and awaited on the way out.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import httpx
import pytest

from tests.conftest import require_binary
from tests.postgres import free_port

DEADLINE_S: Final = 60


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One scrape target: a loopback port and the labels Prometheus attaches to its series."""

    port: int
    labels: Mapping[str, str]


def scrape_config(targets: Sequence[Target]) -> str:
    """A Prometheus config scraping every target each second, one static group per target."""
    lines = [
        "global:",
        "  scrape_interval: 1s",
        "  evaluation_interval: 1s",
        "scrape_configs:",
        "  - job_name: boundloop",
        "    scrape_interval: 1s",
        "    scrape_timeout: 1s",
        "    static_configs:",
    ]
    for target in targets:
        lines.append(f"      - targets: ['127.0.0.1:{target.port}']")
        if target.labels:
            lines.append("        labels:")
            lines.extend(f"          {key}: {value!r}" for key, value in target.labels.items())
    return "\n".join(lines) + "\n"


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


@contextlib.asynccontextmanager
async def running_prometheus(directory: Path, targets: Sequence[Target]) -> AsyncIterator[Prometheus]:
    """A real Prometheus on a free loopback port scraping `targets`; its files under `directory`."""
    binary = require_binary("prometheus", "prometheus")
    config = directory / "prometheus.yml"
    config.write_text(scrape_config(targets))
    log_path = directory / "prometheus.log"
    port = free_port()
    with log_path.open("wb") as log:
        process = await anyio.open_process(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--enable-feature=exemplar-storage",
                "--log.level=warn",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as api:
                with anyio.fail_after(DEADLINE_S):
                    while True:
                        if process.returncode is not None:
                            text = await anyio.Path(log_path).read_text()
                            pytest.fail(f"prometheus exited with {process.returncode}:\n{text}")
                        try:
                            if (await api.get("/-/ready")).status_code == 200:
                                break
                        except httpx.TransportError:
                            pass
                        await anyio.sleep(0.1)
                yield Prometheus(api=api, log=log_path)
        finally:
            process.terminate()
            with anyio.move_on_after(10, shield=True):
                await process.wait()
            if process.returncode is None:
                process.kill()
                with anyio.move_on_after(5, shield=True):
                    await process.wait()
