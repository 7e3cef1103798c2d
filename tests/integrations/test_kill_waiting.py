"""A worker killed while its run waits for a human inside the workflow: the decision, sent through
a `DBOSClient` while no worker runs the workflow, is delivered durably; the worker that recovers
the run replays it up to the wait, receives the decision and completes the run, the approved
charge applied once and the model not asked again for the turns DBOS recorded."""

from __future__ import annotations

import anyio
import anyio.to_thread
import pytest

from boundloop import StopReason
from boundloop.integrations.dbos import decide, retrieve
from boundloop.integrations.dbos._wait import WAITING_EVENT
from tests import dbos_worker
from tests.integrations.dbos_workers import DEADLINE_S, workers

pytestmark = pytest.mark.asyncio_only  # DBOS runs workflows and steps on asyncio event loops


async def test_a_run_waiting_for_a_human_survives_its_worker_and_goes_on_with_the_decision(
    postgres_dsn: str,
) -> None:
    dsn = postgres_dsn
    async with workers(dsn) as session:
        client = session.client
        worker_1 = await session.start("worker-1", "approve")
        with anyio.fail_after(DEADLINE_S):
            run = await session.submit("wait-kill")
            published = await client.get_event_async("wait-kill", WAITING_EVENT, timeout_seconds=DEADLINE_S)
        assert [p["tool_use_id"] for p in published["pending"]] == ["toolu_charge"]
        killed_pid = worker_1.pid
        await worker_1.kill()
        assert await run.status() == "PENDING"

        # No worker runs the workflow: the decision is delivered, not answered yet.
        with pytest.raises(TimeoutError, match="delivered"):
            await decide(client, "wait-kill", approvals={"toolu_charge": True}, timeout_s=0.5)

        worker_2 = await session.start("worker-2", "approve")
        with anyio.fail_after(DEADLINE_S):
            await worker_2.recover("worker-1")
            result = await (await retrieve(client, "wait-kill")).result()

        assert result.stop_reason is StopReason.COMPLETED
        assert result.answer == "charged"
        effects, calls, models = await anyio.to_thread.run_sync(dbos_worker.read_tables, dsn)
        key = "wait-kill:2:toolu_charge"
        assert effects == [(key, "O-1")]
        assert calls == [
            ("read_order", "wait-kill:1:toolu_read", killed_pid),
            ("charge", key, worker_2.pid),  # once, after the approval, by the recovering worker
        ]
        assert models == [("worker-1", 1), ("worker-1", 2), ("worker-2", 3)]
        await worker_2.finish()


async def test_a_tree_waiting_for_a_human_survives_its_worker_and_the_decision_reaches_the_child(
    postgres_dsn: str,
) -> None:
    """The lead's workflow waits because its delegated child's charge waits for approval; the
    worker is killed. The recovering worker replays the lead's delegation step from DBOS's record
    (the child is not run again: the recorded outcome says it waits), so the lead waits again at
    the same step, receives the decision, and its delegation, run again, resumes the child, which
    charges once under its own key."""
    dsn = postgres_dsn
    async with workers(dsn) as session:
        client = session.client
        worker_1 = await session.start("worker-1", "approve")
        with anyio.fail_after(DEADLINE_S):
            await session.submit("tree-wait", lead=True)
            published = await client.get_event_async("tree-wait", WAITING_EVENT, timeout_seconds=DEADLINE_S)
        assert [p["tool_use_id"] for p in published["pending"]] == ["toolu_charge"]  # the child's call
        await worker_1.kill()
        with pytest.raises(TimeoutError, match="delivered"):
            await decide(client, "tree-wait", approvals={"toolu_charge": True}, timeout_s=0.5)

        worker_2 = await session.start("worker-2", "approve")
        with anyio.fail_after(DEADLINE_S):
            await worker_2.recover("worker-1")
            result = await (await retrieve(client, "tree-wait")).result()

        assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail
        (child_id,) = result.state.children
        assert [(o.tool_use_id, o.content) for o in result.state.observations] == [
            (dbos_worker.DELEGATE_ID, "charged")
        ]
        effects, calls, models = await anyio.to_thread.run_sync(dbos_worker.read_tables, dsn)
        key = f"{child_id}:2:toolu_charge"
        assert effects == [(key, "O-1")]
        assert [(tool, k, pid) for tool, k, pid in calls if tool == "charge"] == [
            ("charge", key, worker_2.pid)
        ]
        assert models == [("worker-1", 1), ("worker-1", 2), ("worker-2", 3)]  # the child's turns, once each
        await worker_2.finish()
