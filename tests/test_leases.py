"""Leases: a task runs in one place at a time; `run` and `resume` hold it while the run executes.

`MemoryStore` leases within its process, the same contract `PostgresStore` keeps across
processes (tests/test_postgres_store.py, tests/test_pg_workers.py).
"""

from __future__ import annotations

import functools
from pathlib import Path

import anyio
import pytest

from boundloop import AgentLoop, MemoryStore, SQLiteStore, StopReason, tool
from boundloop.checkpoint import LeasingStore
from boundloop.checkpoint.conformance import LEASE_CHECKS, LeaseCheck
from boundloop.errors import NotResumable, TaskBusy, TaskExists
from tests.helpers import scripted_loop, text, tool_use


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("check", LEASE_CHECKS, ids=lambda check: check.__name__)
async def test_memory_store_passes_the_lease_checks(check: LeaseCheck) -> None:
    """MemoryStore passes every lease check of the conformance suite."""
    await check(MemoryStore())


def test_which_stores_lease(tmp_path: Path) -> None:
    """MemoryStore leases; SQLiteStore (one process) does not, and runs as before."""
    assert isinstance(MemoryStore(), LeasingStore)
    assert not isinstance(SQLiteStore(tmp_path / "runs.db"), LeasingStore)


class Gate:
    """A tool that says it started and waits until the test lets it go on."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.go_on = anyio.Event()

    def loop(self, store: MemoryStore) -> AgentLoop:
        @tool
        async def wait_here(order_id: str) -> str:
            """Wait for the test."""
            self.started.set()
            await self.go_on.wait()
            return f"{order_id} done"

        script = [tool_use(("wait_here", {"order_id": "O-1"})), text("done")]
        return scripted_loop(script, [wait_here], store=store)


async def test_a_second_run_of_a_task_in_flight_is_busy_not_a_duplicate() -> None:
    """While a run of `t-1` is in flight, a second `run(task_id="t-1")` raises TaskBusy (not
    TaskExists, and it never starts); once the first stops, the id is taken for good."""
    store, gate = MemoryStore(), Gate()
    results: list[StopReason] = []

    async def first() -> None:
        results.append((await gate.loop(store).run("goal", task_id="t-1")).stop_reason)

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        await gate.started.wait()
        with pytest.raises(TaskBusy, match="'t-1' is being run by another worker"):
            await gate.loop(store).run("goal", task_id="t-1")
        with pytest.raises(TaskBusy):
            await gate.loop(store).resume("t-1")
        gate.go_on.set()
    assert results == [StopReason.COMPLETED]
    with pytest.raises(TaskExists):
        await gate.loop(store).run("goal", task_id="t-1")
    with pytest.raises(NotResumable):
        await gate.loop(store).resume("t-1")


async def test_a_run_without_a_task_id_is_leased_too() -> None:
    """A run with a generated task id is listed as running while in flight: a worker recovering
    interrupted runs finds it, and its lease keeps that worker from resuming it meanwhile."""
    store, gate = MemoryStore(), Gate()
    async with anyio.create_task_group() as group:
        group.start_soon(gate.loop(store).run, "goal")
        await gate.started.wait()
        [running] = await store.list(status="running")
        with pytest.raises(TaskBusy):
            await gate.loop(store).resume(running.task_id)
        gate.go_on.set()
    [stopped] = await store.list()
    assert (stopped.task_id, stopped.status) == (running.task_id, "stopped")


async def test_a_resumed_run_holds_its_lease_until_it_stops() -> None:
    """Of two resumes of one interrupted run at once, one runs it and the other gets TaskBusy;
    the lease is released when the resumed run stops."""
    store, gate = MemoryStore(), Gate()
    async with anyio.create_task_group() as group:
        group.start_soon(functools.partial(gate.loop(store).run, "goal", task_id="t-2"))
        await gate.started.wait()
        in_flight = await store.load("t-2")  # the checkpoint a crash here would leave
        group.cancel_scope.cancel()
    assert in_flight is not None
    await store.save(in_flight)
    [row] = await store.list()
    assert (row.task_id, row.status) == ("t-2", "running")

    gate = Gate()
    results: list[StopReason] = []

    async def resume() -> None:
        results.append((await gate.loop(store).resume("t-2")).stop_reason)

    async with anyio.create_task_group() as group:
        group.start_soon(resume)
        await gate.started.wait()
        with pytest.raises(TaskBusy):
            await gate.loop(store).resume("t-2")
        gate.go_on.set()
    assert results == [StopReason.COMPLETED]
    async with store.lease("t-2"):
        pass  # released
