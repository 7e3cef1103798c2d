"""The kill test across processes: two DBOS workers share one PostgreSQL; the one running a run is
SIGKILLed while its side-effecting tool is in flight; the other recovers the run.

Coordination goes through the workers' stdout and stdin (no sleeps, `tests/integrations/
dbos_workers.py`): worker 1 prints `IN_FLIGHT` once `charge` has applied its effect, worker 2
prints `READY` once it serves the queue, and `recover worker-1` on its stdin hands it the dead
worker's run. The run completes with the effect applied once, the model not asked again for the
two turns DBOS recorded, and `read_order`, which completed before the kill, not run again.
"""

from __future__ import annotations

import os

import anyio
import anyio.to_thread
import pytest

from boundloop import StopReason
from boundloop.checkpoint import PostgresStore
from boundloop.integrations.dbos import retrieve
from tests import dbos_worker
from tests.integrations.dbos_workers import DEADLINE_S, workers
from tests.test_pg_workers import wait_for_release

pytestmark = pytest.mark.asyncio_only  # DBOS runs workflows and steps on asyncio event loops


async def test_a_worker_killed_while_its_tool_is_in_flight_leaves_its_run_to_another(
    postgres_dsn: str,
) -> None:
    dsn = postgres_dsn
    async with workers(dsn) as session:
        client = session.client
        worker_1 = await session.start("worker-1", "hang")
        with anyio.fail_after(DEADLINE_S):
            await session.submit("kill-1")
            await worker_1.read_until(dbos_worker.IN_FLIGHT)
        worker_2 = await session.start("worker-2", "serve")
        killed_pid = worker_1.pid
        await worker_1.kill()

        effects, calls, models = await anyio.to_thread.run_sync(dbos_worker.read_tables, dsn)
        key = "kill-1:2:toolu_charge"
        assert effects == [(key, "O-1")]  # the effect happened before the kill
        assert models == [("worker-1", 1), ("worker-1", 2)]
        run = await retrieve(client, "kill-1")
        assert await run.status() == "PENDING"  # left by the dead worker

        with anyio.fail_after(DEADLINE_S):
            recovered = await worker_2.recover("worker-1")
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
        await worker_2.finish()
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
    async with workers(dsn) as session:
        client = session.client
        worker_1 = await session.start("worker-1", "hang")
        with anyio.fail_after(DEADLINE_S):
            await session.submit("tree-1", lead=True)
            await worker_1.read_until(dbos_worker.IN_FLIGHT)
        worker_2 = await session.start("worker-2", "serve")
        killed_pid = worker_1.pid
        await worker_1.kill()

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
            recovered = await worker_2.recover("worker-1")
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
        await worker_2.finish()
