"""The kill test across processes: two DBOS workers share one PostgreSQL; the one running a run is
SIGKILLed while its side-effecting tool is in flight; the other recovers the run.

Coordination goes through the workers' stdout and stdin (no sleeps): worker 1 prints `IN_FLIGHT`
once `charge` has applied its effect, worker 2 prints `READY` once it serves the queue, and
`recover worker-1` on its stdin hands it the dead worker's run. The run completes with the effect
applied once, the model not asked again for the two turns DBOS recorded, and `read_order`, which
completed before the kill, not run again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from dbos import DBOSClient

from boundloop import StopReason
from boundloop.checkpoint import PostgresStore
from boundloop.integrations.dbos import retrieve, submit
from tests import dbos_worker
from tests.test_pg_workers import wait_for_release

pytestmark = pytest.mark.asyncio_only  # DBOS runs workflows and steps on asyncio event loops

ROOT: Final = Path(__file__).resolve().parents[2]
WORKER: Final = "tests/dbos_worker.py"
DEADLINE_S: Final = 60.0
"""The most a worker may take to start, to reach its marker or to finish (a slow, shared CI machine)."""


def command(dsn: str, executor: str, mode: str) -> list[str]:
    """A worker's command line."""
    return [sys.executable, WORKER, dsn, executor, mode]


async def read_until(stdout: BufferedByteReceiveStream, process: Process, marker: str) -> list[str]:
    """Read the worker's stdout line by line until it prints `marker`; the lines after it is
    not read here (the caller reads on)."""
    lines: list[str] = []
    while True:
        try:
            line = (await stdout.receive_until(b"\n", 1 << 20)).decode()
        except (anyio.EndOfStream, anyio.IncompleteRead):
            code = await process.wait()
            raise AssertionError(f"the worker exited ({code}) before {marker}; stdout: {lines}") from None
        if line == marker:
            return lines
        lines.append(line)


async def test_a_worker_killed_while_its_tool_is_in_flight_leaves_its_run_to_another(
    postgres_dsn: str,
) -> None:
    dsn = postgres_dsn
    await anyio.to_thread.run_sync(dbos_worker.init_tables, dsn)
    client = await anyio.to_thread.run_sync(lambda: DBOSClient(system_database_url=dsn))
    worker_1 = await anyio.open_process(command(dsn, "worker-1", "hang"), cwd=ROOT, stderr=None)
    worker_2: Process | None = None
    try:
        assert worker_1.stdout is not None
        out_1 = BufferedByteReceiveStream(worker_1.stdout)
        with anyio.fail_after(DEADLINE_S):
            await read_until(out_1, worker_1, dbos_worker.READY)
            await submit(
                client,
                workflow=dbos_worker.WORKFLOW,
                queue=dbos_worker.QUEUE,
                goal=dbos_worker.GOAL,
                task_id="kill-1",
            )
            await read_until(out_1, worker_1, dbos_worker.IN_FLIGHT)
            worker_2 = await anyio.open_process(command(dsn, "worker-2", "serve"), cwd=ROOT, stderr=None)
            assert worker_2.stdout is not None
            assert worker_2.stdin is not None
            out_2 = BufferedByteReceiveStream(worker_2.stdout)
            await read_until(out_2, worker_2, dbos_worker.READY)
        killed_pid = worker_1.pid
        worker_1.kill()
        with anyio.fail_after(DEADLINE_S):
            await worker_1.wait()
        assert worker_1.returncode == -signal.SIGKILL

        effects, calls, models = await anyio.to_thread.run_sync(dbos_worker.read_tables, dsn)
        key = "kill-1:2:toolu_charge"
        assert effects == [(key, "O-1")]  # the effect happened before the kill
        assert models == [("worker-1", 1), ("worker-1", 2)]
        run = await retrieve(client, "kill-1")
        assert await run.status() == "PENDING"  # left by the dead worker

        with anyio.fail_after(DEADLINE_S):
            await worker_2.stdin.send(b"recover worker-1\n")
            await read_until(out_2, worker_2, dbos_worker.RECOVERED)
            recovered = (await out_2.receive_until(b"\n", 1 << 20)).decode()
            result = await run.result()

        assert recovered == '["kill-1"]'
        assert result.stop_reason is StopReason.COMPLETED
        assert result.answer == "charged"
        assert result.state.task_id == "kill-1"
        assert [(o.tool_use_id, o.content) for o in result.state.observations] == [
            ("toolu_read", "O-1: confirmed, EUR 40"),
            ("toolu_charge", "charged O-1"),
        ]
        effects, calls, models = await anyio.to_thread.run_sync(dbos_worker.read_tables, dsn)
        assert effects == [(key, "O-1")]  # exactly once
        assert calls == [
            ("read_order", "kill-1:1:toolu_read", killed_pid),  # done before the kill: replayed, not run
            ("charge", key, killed_pid),
            ("charge", key, worker_2.pid),  # in flight at the kill: run again under the same key
        ]
        assert models == [("worker-1", 1), ("worker-1", 2), ("worker-2", 3)]  # turns 1-2 replayed
        status = (await client.list_workflows_async(workflow_ids=["kill-1"]))[0]
        assert status.status == "SUCCESS"
        assert status.executor_id == "worker-2"
        steps = await client.list_workflow_steps_async("kill-1")
        assert [s["function_name"] for s in steps] == [
            "boundloop.store.exists",
            "boundloop.messages.create",
            "boundloop.tool:read_order:toolu_read:1",
            "boundloop.messages.create",
            "boundloop.tool:charge:toolu_charge:1",
            "boundloop.messages.create",
        ]
        async with PostgresStore(dsn) as store:  # the loop's own checkpoints, shared by both workers
            saved = await store.load("kill-1")
        assert saved is not None
        assert saved.stop_reason is StopReason.COMPLETED

        await worker_2.stdin.aclose()
        with anyio.fail_after(DEADLINE_S):
            assert await worker_2.wait() == 0
    finally:
        for process in (worker_1, worker_2):
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                with anyio.fail_after(DEADLINE_S, shield=True):
                    await process.wait()
        await anyio.to_thread.run_sync(client.destroy)
    assert os.getpid() not in {pid for _, _, pid in calls}


async def test_a_worker_killed_during_a_delegated_childs_tool_leaves_the_tree_to_another(
    postgres_dsn: str,
) -> None:
    """The lead's workflow delegates to the charges loop (its child, checkpointed in the shared
    PostgreSQL store); worker 1 is killed while the child's `charge` is in flight. Worker 2
    recovers the lead's workflow: DBOS replays the lead's model call, and the delegation's step,
    never recorded, runs again, which resumes that same child from its checkpoint (its task id
    from the call's idempotency key): the charge runs again under the same key, lands once, and
    the lead completes with the child's answer."""
    dsn = postgres_dsn
    await anyio.to_thread.run_sync(dbos_worker.init_tables, dsn)
    client = await anyio.to_thread.run_sync(lambda: DBOSClient(system_database_url=dsn))
    worker_1 = await anyio.open_process(command(dsn, "worker-1", "hang"), cwd=ROOT, stderr=None)
    worker_2: Process | None = None
    calls: list[tuple[str, str, int]] = []
    try:
        assert worker_1.stdout is not None
        out_1 = BufferedByteReceiveStream(worker_1.stdout)
        with anyio.fail_after(DEADLINE_S):
            await read_until(out_1, worker_1, dbos_worker.READY)
            await submit(
                client,
                workflow=dbos_worker.LEAD_WORKFLOW,
                queue=dbos_worker.QUEUE,
                goal="Charge O-1.",
                task_id="tree-1",
            )
            await read_until(out_1, worker_1, dbos_worker.IN_FLIGHT)
            worker_2 = await anyio.open_process(command(dsn, "worker-2", "serve"), cwd=ROOT, stderr=None)
            assert worker_2.stdout is not None
            assert worker_2.stdin is not None
            out_2 = BufferedByteReceiveStream(worker_2.stdout)
            await read_until(out_2, worker_2, dbos_worker.READY)
        killed_pid = worker_1.pid
        worker_1.kill()
        with anyio.fail_after(DEADLINE_S):
            await worker_1.wait()
        assert worker_1.returncode == -signal.SIGKILL

        async with PostgresStore(dsn) as store:
            lead = await store.load("tree-1")
            assert lead is not None
            (child_id,) = lead.children  # named as the child started
            child = await store.load(child_id)
            assert child is not None
            assert child.parent_task_id == "tree-1"
            assert str(child.phase) == "act"
        key = f"{child_id}:2:toolu_charge"
        effects, calls, _ = await anyio.to_thread.run_sync(dbos_worker.read_tables, dsn)
        assert effects == [(key, "O-1")]
        await anyio.to_thread.run_sync(wait_for_release, dsn, child_id)  # the dead worker's lease

        with anyio.fail_after(DEADLINE_S):
            await worker_2.stdin.send(b"recover worker-1\n")
            await read_until(out_2, worker_2, dbos_worker.RECOVERED)
            recovered = (await out_2.receive_until(b"\n", 1 << 20)).decode()
            result = await (await retrieve(client, "tree-1")).result()

        assert recovered == '["tree-1"]'
        assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail
        assert result.answer == "delegated"
        assert [(o.tool_use_id, o.content) for o in result.state.observations] == [
            (dbos_worker.DELEGATE_ID, "charged")
        ]
        assert result.state.children == [child_id]  # that same child: no fresh one
        assert result.state.tool_calls == 1
        effects, calls, models = await anyio.to_thread.run_sync(dbos_worker.read_tables, dsn)
        assert effects == [(key, "O-1")]  # exactly once
        assert calls == [
            ("read_order", f"{child_id}:1:toolu_read", killed_pid),
            ("charge", key, killed_pid),
            ("charge", key, worker_2.pid),  # in flight at the kill: run again under the same key
        ]
        assert models == [("worker-1", 1), ("worker-1", 2), ("worker-2", 3)]  # the child's turns
        steps = await client.list_workflow_steps_async("tree-1")
        assert [s["function_name"] for s in steps] == [
            "boundloop.store.exists",
            "boundloop.messages.create",
            f"boundloop.tool:charges:{dbos_worker.DELEGATE_ID}:1",
            "boundloop.messages.create",
        ]
        await worker_2.stdin.aclose()
        with anyio.fail_after(DEADLINE_S):
            assert await worker_2.wait() == 0
    finally:
        for process in (worker_1, worker_2):
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                with anyio.fail_after(DEADLINE_S, shield=True):
                    await process.wait()
        await anyio.to_thread.run_sync(client.destroy)
