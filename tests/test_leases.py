"""Leases: a task runs in one place at a time; `run` and `resume` hold it while the run executes.

`MemoryStore` leases within its process; `SQLiteStore` across the processes using one file
(a lock file per task, tested here with a real second process); `PostgresStore` across the
processes using one database (tests/test_postgres_store.py, tests/test_pg_workers.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from boundloop import (
    AgentLoop,
    Budget,
    CheckpointStore,
    MemoryStore,
    Observers,
    ScriptedClient,
    SQLiteStore,
    StopReason,
    ToolContext,
    tool,
)
from boundloop.checkpoint import LeasingStore
from boundloop.checkpoint.conformance import LEASE_CHECKS, LeaseCheck
from boundloop.errors import NotResumable, TaskBusy, TaskExists
from tests.helpers import scripted_loop, text, tool_use


@pytest.mark.parametrize("check", LEASE_CHECKS, ids=lambda check: check.__name__)
async def test_memory_store_passes_the_lease_checks(check: LeaseCheck) -> None:
    """MemoryStore passes every lease check of the conformance suite."""
    await check(MemoryStore())


@pytest.mark.parametrize("check", LEASE_CHECKS, ids=lambda check: check.__name__)
async def test_sqlite_store_passes_the_lease_checks(check: LeaseCheck, tmp_path: Path) -> None:
    """SQLiteStore passes every lease check of the conformance suite."""
    await check(SQLiteStore(tmp_path / "runs.db"))


def test_which_stores_lease(tmp_path: Path) -> None:
    """MemoryStore and SQLiteStore both lease."""
    assert isinstance(MemoryStore(), LeasingStore)
    assert isinstance(SQLiteStore(tmp_path / "runs.db"), LeasingStore)


class Gate:
    """A tool that says it started and waits until the test lets it go on."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.go_on = anyio.Event()

    def loop(self, store: CheckpointStore) -> AgentLoop:
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


# -- racing resumes of one approved run ------------------------------------------------------


def stores(tmp_path: Path) -> dict[str, CheckpointStore]:
    return {"memory": MemoryStore(), "sqlite": SQLiteStore(tmp_path / "runs.db")}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_five_racing_resumes_of_an_approved_refund_run_it_once(kind: str, tmp_path: Path) -> None:
    """Five resumes at once of one run waiting for approval: the approved refund runs once, one
    resume completes the run and the four others get TaskBusy (the refund's tool holds the run
    until all four were refused, so every resume overlaps the one that runs it)."""
    store = stores(tmp_path)[kind]
    refunds: list[str] = []
    results: list[StopReason] = []
    busy: list[TaskBusy] = []
    settled = anyio.Event()

    def settle() -> None:
        if len(refunds) + len(busy) == 5:
            settled.set()

    @tool(side_effect=True, requires_approval=True)
    async def issue_refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order."""
        refunds.append(ctx.idempotency_key)
        settle()
        await settled.wait()
        return f"refunded {order_id}"

    def loop(script: list[Any]) -> AgentLoop:
        return AgentLoop(
            ScriptedClient(script),
            model="claude-sonnet-4-6",
            tools=[issue_refund],
            budget=Budget(max_steps=4),
            observers=Observers(metrics=None),
            store=store,
        )

    asked = tool_use(("issue_refund", {"order_id": "O-104"}, "toolu_refund"))
    first = await loop([asked]).run("Refund O-104?", task_id="t-refund")
    assert first.stop_reason is StopReason.NEEDS_HUMAN

    async def resume() -> None:
        try:
            result = await loop([text("Refunded.")]).resume("t-refund", approvals={"toolu_refund": True})
        except TaskBusy as exc:
            busy.append(exc)
            settle()
        else:
            results.append(result.stop_reason)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(resume)
    assert refunds == ["t-refund:1:toolu_refund"]
    assert results == [StopReason.COMPLETED]
    assert [exc.task_id for exc in busy] == ["t-refund"] * 4
    [row] = await store.list()
    assert (row.status, row.stop_reason) == ("stopped", "completed")


# -- SQLiteStore: leases across processes on one file --------------------------------------

ROOT: Final = Path(__file__).resolve().parents[1]

HOLDER: Final = """
import sys, anyio, anyio.to_thread
from boundloop import SQLiteStore

async def main() -> None:
    async with SQLiteStore(sys.argv[1]).lease(sys.argv[2]):
        print("held", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)  # until the parent says so
    print("released", flush=True)

anyio.run(main)
"""
"""A second process: takes a task's lease, says so, and holds it until told to let go."""


class Holder:
    """The process running `HOLDER`, read line by line."""

    def __init__(self, process: Process) -> None:
        assert process.stdout is not None
        self.process = process
        self.stdout = BufferedByteReceiveStream(process.stdout)

    async def line(self) -> str:
        with anyio.fail_after(30):
            return (await self.stdout.receive_until(b"\n", 1 << 16)).decode()

    async def let_go(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(b"go\n")


@contextlib.asynccontextmanager
async def holder(db: Path, task_id: str) -> AsyncIterator[Holder]:
    """A second process holding `task_id`'s lease on `db` (killed at the end if still running)."""
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", HOLDER, str(db), task_id]
    async with await anyio.open_process(command, env=env, stderr=None) as process:
        try:
            running = Holder(process)
            assert await running.line() == "held"
            yield running
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            with anyio.fail_after(30, shield=True):
                await process.wait()


async def test_a_sqlite_lease_held_by_another_process_makes_this_one_busy(tmp_path: Path) -> None:
    """While another process holds a task of the file, a lease, a run and a resume of it here
    get TaskBusy (and other tasks are free); once it lets go, the task is free here."""
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    async with holder(db, "t-1") as other:
        with pytest.raises(TaskBusy, match="'t-1'"):
            async with store.lease("t-1"):
                pass
        with pytest.raises(TaskBusy):
            await Gate().loop(store).run("goal", task_id="t-1")
        with pytest.raises(TaskBusy):
            await Gate().loop(store).resume("t-1")
        async with store.lease("t-2"):
            pass
        await other.let_go()
        assert await other.line() == "released"
        async with store.lease("t-1"):
            pass
    assert await store.list() == []  # the refused run saved nothing


async def test_a_sqlite_lease_dies_with_its_process(tmp_path: Path) -> None:
    """A process killed while it holds a task (SIGKILL: no clean-up of its own) leaves the
    task free: the operating system drops its lock with it."""
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    async with holder(db, "t-1") as other:
        with pytest.raises(TaskBusy):
            async with store.lease("t-1"):
                pass
        other.process.kill()
        with anyio.fail_after(30):
            await other.process.wait()
        async with store.lease("t-1"):
            pass


async def test_sqlite_stores_of_one_file_share_leases(tmp_path: Path) -> None:
    """Two SQLiteStore objects on one file, one through a symbolic link, exclude each other
    in one process; a released task leaves no lock file behind."""
    db = tmp_path / "runs.db"
    link = tmp_path / "link.db"
    link.symlink_to(db)
    one, two = SQLiteStore(db), SQLiteStore(link)
    async with one.lease("t-1"):
        with pytest.raises(TaskBusy):
            async with two.lease("t-1"):
                pass
    async with two.lease("t-1"):
        with pytest.raises(TaskBusy):
            async with one.lease("t-1"):
                pass
    assert list((tmp_path / "runs.db.locks").iterdir()) == []
