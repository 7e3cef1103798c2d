"""A worker fleet as Prometheus sees it: each machine sums its worker processes, labels tell machines apart.

Two "machines" here are two multiprocess directories: machine `a` runs two worker processes,
machine `b` one. Each machine exposes the sum of its workers on its own port
(`multiprocess_registry`), and a real Prometheus scrapes both with a `machine` label from its
scrape config. The fleet's totals, and each machine's, are PromQL sums.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from boundloop.metrics import MetricsServer, multiprocess_registry, serve
from tests.metrics.prometheus_server import DEADLINE_S, Target, running_prometheus
from tests.metrics.test_multiprocess import run_worker

pytestmark = [pytest.mark.integration, pytest.mark.asyncio_only]  # one event loop is enough

LOOP = "fleet"
WORKERS = {"a": 2, "b": 1}
"""Machine label -> how many worker processes it runs."""


async def test_prometheus_tells_machines_apart_and_sums_the_fleet(tmp_path: Path) -> None:
    """Runs counted per machine by its `machine` label and `instance`, summed over the fleet."""
    directories = {machine: tmp_path / f"machine-{machine}" for machine in WORKERS}
    for directory in directories.values():
        directory.mkdir()
    with anyio.fail_after(DEADLINE_S):
        async with anyio.create_task_group() as group:
            for machine, count in WORKERS.items():
                for _ in range(count):
                    group.start_soon(run_worker, directories[machine], LOOP)

    endpoints = await anyio.to_thread.run_sync(machine_endpoints_entered, directories)
    try:
        targets = [Target(port=server.port, labels={"machine": m}) for m, server in endpoints.items()]
        async with running_prometheus(tmp_path, targets) as prometheus:
            completed = f'boundloop_runs_total{{loop="{LOOP}",stop_reason="completed"}}'
            with anyio.fail_after(DEADLINE_S):
                await prometheus.wait_for("count(up{job='boundloop'} == 1)", at_least=2)
                await prometheus.wait_for(f"sum({completed})", at_least=sum(WORKERS.values()))
            per_machine = {
                s["metric"]["machine"]: float(s["value"][1])
                for s in await prometheus.query(f"sum by (machine) ({completed})")
            }
            assert per_machine == {machine: float(count) for machine, count in WORKERS.items()}
            instances = await prometheus.query(f"count by (instance) ({completed})")
            assert len(instances) == len(WORKERS)  # one series per machine: its workers are summed
            active = await prometheus.query(f'sum(boundloop_runs_active{{loop="{LOOP}"}})')
            assert [float(s["value"][1]) for s in active] == [0.0]
    finally:
        for server in endpoints.values():
            await anyio.to_thread.run_sync(server.close)  # joins the server's thread


def machine_endpoints_entered(directories: dict[str, Path]) -> dict[str, MetricsServer]:
    """Start one `/metrics` per machine (blocking: reads the workers' files), serving their sum."""
    return {
        machine: serve(0, registry=multiprocess_registry(str(directory)))
        for machine, directory in directories.items()
    }
