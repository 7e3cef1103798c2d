"""The event log: a run's events appended to its store as it records them, and `loop.events`
following them, in this process and from another, across a killed worker and its resume."""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Final

import anyio
import pytest

from boundloop import (
    Budget,
    CheckpointStore,
    ConfigurationError,
    LoopState,
    MemoryStore,
    SQLiteStore,
    StoredRun,
    tool,
)
from boundloop.checkpoint import PostgresStore, Status
from boundloop.checkpoint.signed import SignedStore
from boundloop.events import Event, Resumed, Stop
from tests import crash_worker, pg_worker
from tests.docrun import python_blocks, runs_as_promised
from tests.helpers import scripted_loop, text, tool_use
from tests.test_crash import command, kill_at
from tests.test_pg_workers import wait_for_release, worker

ROOT: Final = Path(__file__).resolve().parents[1]
DEADLINE_S: Final = 30.0


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-{key}"


@tool(requires_approval=True)
async def refund(order_id: str) -> str:
    """Refund an order (a human approves it)."""
    return f"refunded {order_id}"


SCRIPT: Final = [tool_use(("lookup", {"key": "a"})), text("done")]


def dicts(events: Sequence[Event]) -> list[dict[str, object]]:
    return [event.to_dict() for event in events]


async def collect(events: AsyncIterator[Event]) -> list[Event]:
    with anyio.fail_after(DEADLINE_S):
        return [event async for event in events]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_run_logs_every_event_it_records_and_events_reads_them(kind: str, tmp_path: Path) -> None:
    """After a run, `loop.events` yields exactly the run's events, equal field for field, and
    `after=seq` the rest of them."""
    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "runs.db")
    loop = scripted_loop(list(SCRIPT), [lookup], store=store)
    result = await loop.run("goal", task_id="t-1")
    logged = await collect(loop.events("t-1"))
    assert dicts(logged) == dicts(result.events)
    assert isinstance(logged[-1], Stop)
    assert [event.seq for event in await collect(loop.events("t-1", after=5))] == list(
        range(6, len(result.events))
    )


async def test_a_follower_started_before_the_run_sees_it_live_to_its_stop() -> None:
    """A follower of a task not started yet waits, then yields the run's events as it logs them,
    and ends with its `Stop`."""
    store = MemoryStore()
    loop = scripted_loop(list(SCRIPT), [lookup], store=store)
    followed: list[Event] = []
    async with anyio.create_task_group() as group:

        async def follow() -> None:
            followed.extend(await collect(loop.events("t-live")))

        group.start_soon(follow)
        await anyio.wait_all_tasks_blocked()
        result = await loop.run("goal", task_id="t-live")
    assert dicts(followed) == dicts(result.events)


async def test_a_run_waiting_for_a_human_ends_the_iteration_and_its_resume_continues_the_log() -> None:
    """A run stopped `needs_human` ends `events` with its `Stop`; the resumed run's events follow
    with the next seqs, read with `after=` that stop's seq."""
    store = MemoryStore()
    first = await scripted_loop(
        [tool_use(("refund", {"order_id": "O-1"}, "toolu_r"))], [refund], store=store
    ).run("Refund O-1", task_id="t-human")
    assert str(first.stop_reason) == "needs_human"
    waiting = await collect(scripted_loop([], [refund], store=store).events("t-human"))
    assert isinstance(waiting[-1], Stop)
    assert waiting[-1].stop_reason == "needs_human"
    loop = scripted_loop([text("refunded")], [refund], store=store)
    resumed = await loop.resume("t-human", approvals={"toolu_r": True})
    later = await collect(loop.events("t-human", after=waiting[-1].seq))
    assert dicts(later) == dicts(resumed.events)
    assert isinstance(later[0], Resumed)
    assert later[0].seq == waiting[-1].seq + 1


async def test_a_signed_store_logs_through_its_inner_store() -> None:
    """With a `SignedStore` the checkpoints are signed; the events go to the inner store's log."""
    store = MemoryStore()
    loop = scripted_loop(list(SCRIPT), [lookup], store=SignedStore(store, b"secret"))
    result = await loop.run("goal", task_id="t-signed")
    assert dicts(await store.read("t-signed")) == dicts(result.events)


async def test_a_resumed_run_continues_after_events_its_checkpoint_does_not_count() -> None:
    """A worker killed after it logged events past its last checkpoint leaves them in the log:
    the resumed run numbers its events after them, so no seq is logged (or read) twice."""
    store = MemoryStore()
    script = [tool_use(("refund", {"order_id": "O-1"}, "toolu_r"))]
    first = await scripted_loop(script, [refund], store=store).run("Refund O-1", task_id="t-ahead")
    checkpoint = await store.load("t-ahead")
    assert checkpoint is not None
    assert checkpoint.next_seq == len(first.events)
    orphan = dataclasses.replace(first.events[-2], seq=checkpoint.next_seq)  # logged, never checkpointed
    await store.append([orphan])
    loop = scripted_loop([text("refunded")], [refund], store=store)
    resumed = await loop.resume("t-ahead", approvals={"toolu_r": True})
    assert resumed.events[0].seq == orphan.seq + 1
    logged = await collect(loop.events("t-ahead", after=first.events[-1].seq))
    assert [event.seq for event in logged] == list(range(orphan.seq, orphan.seq + 1 + len(resumed.events)))


class PlainStore:
    """A store that keeps no event log."""

    async def save(self, state: LoopState) -> None:
        pass

    async def load(self, task_id: str) -> LoopState | None:
        return None

    async def list(
        self, *, status: Status | None = None, stop_reason: str | None = None
    ) -> builtins.list[StoredRun]:
        return []

    async def delete(self, task_id: str) -> bool:
        return False


async def test_events_needs_a_store_with_an_event_log() -> None:
    """`events` of a loop whose store keeps no log (or without a store) is a ConfigurationError,
    at the call; such a store still checkpoints runs."""
    plain: CheckpointStore = PlainStore()
    for store in (None, plain):
        with pytest.raises(ConfigurationError, match="event log"):
            scripted_loop([], [lookup], store=store).events("t-1")
    result = await scripted_loop(list(SCRIPT), [lookup], store=plain).run("goal")
    assert str(result.stop_reason) == "completed"


def test_the_streaming_guide_on_following_a_run_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The python blocks of docs/streaming.md's section "Following a run from another process"
    run as scripts and print what their comments say."""
    guide = (ROOT / "docs" / "streaming.md").read_text(encoding="utf-8")
    section = guide.split("## Following a run from another process", 1)[1].split("\n## ", 1)[0]
    blocks = python_blocks(section)
    assert blocks
    for index, block in enumerate(blocks):
        runs_as_promised(block, tmp_path / f"following_{index}.py", capsys)


# -- across processes: a worker killed mid-run, another resuming it -----------------------


def assert_one_gapless_stream(seen: list[Event]) -> None:
    """Seqs 0, 1, 2, ... with no gap and no repeat, one `Resumed`, ending with a `Stop`."""
    assert [event.seq for event in seen] == list(range(len(seen)))
    assert sum(isinstance(event, Resumed) for event in seen) == 1
    assert isinstance(seen[-1], Stop)
    assert seen[-1].stop_reason == "completed"


@pytest.mark.asyncio_only
async def test_a_reader_reconnecting_follows_a_killed_sqlite_worker_and_its_resume(tmp_path: Path) -> None:
    """A worker runs until its model call after the batch and is SIGKILLed there; a reader in
    this process follows it, disconnects after seq 3, reconnects with that seq, and reads on
    through the resume a fresh worker makes: every seq once, in order, to the resumed run's stop."""
    db, ledger, task_id = tmp_path / "runs.db", tmp_path / "ledger.db", "t-killed"
    loop = scripted_loop([], [lookup], store=SQLiteStore(db))
    seen: list[Event] = []
    with anyio.fail_after(DEADLINE_S):
        async with contextlib.aclosing(loop.events(task_id)) as first:
            async with anyio.create_task_group() as group:
                group.start_soon(kill_before_model, db, ledger, task_id)
                async for event in first:
                    seen.append(event)
                    if event.seq == 3:
                        break
        # The worker is gone (or about to be); reconnect with the last seq seen.
        async with anyio.create_task_group() as group:
            group.start_soon(resume_in_worker, db, ledger, task_id)
            seen.extend(await collect(loop.events(task_id, after=seen[-1].seq)))
    assert_one_gapless_stream(seen)


async def kill_before_model(db: Path, ledger: Path, task_id: str) -> None:
    await kill_at(crash_worker.MODEL_CALL, db, ledger, "kill-before-model", task_id)


async def resume_in_worker(db: Path, ledger: Path, task_id: str) -> None:
    with anyio.fail_after(DEADLINE_S):
        done = await anyio.run_process(command(db, ledger, "resume", task_id), cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr.decode()


@pytest.mark.asyncio_only
async def test_a_reader_reconnecting_follows_a_killed_postgres_worker_and_its_resume(
    postgres_dsn: str,
) -> None:
    """On PostgreSQL: worker 1 is SIGKILLed while its tool is in flight; a reader here follows
    it (woken by NOTIFY), disconnects after seq 3 and reconnects with it, and reads on through
    worker 2's resume: every seq once, in order, to the resumed run's stop."""
    task_id = "t-pg-killed"
    await anyio.to_thread.run_sync(pg_worker.init_ledger, postgres_dsn)
    seen: list[Event] = []
    async with PostgresStore(postgres_dsn) as store:
        loop = scripted_loop([], [lookup], store=store)
        async with worker(postgres_dsn, "run", task_id, "--hold") as first:
            with anyio.fail_after(DEADLINE_S):
                async with contextlib.aclosing(loop.events(task_id)) as events:
                    async for event in events:
                        seen.append(event)
                        if event.seq == 3:
                            break
            await first.expect(pg_worker.IN_FLIGHT)
            await first.kill()
        await anyio.to_thread.run_sync(wait_for_release, postgres_dsn, task_id)
        async with worker(postgres_dsn, "resume", task_id) as second:
            await second.expect(pg_worker.READY)
            async with anyio.create_task_group() as group:

                async def read_on() -> None:
                    seen.extend(await collect(loop.events(task_id, after=seen[-1].seq)))

                group.start_soon(read_on)
                await second.tell()
                await second.expect(pg_worker.DONE)
    assert_one_gapless_stream(seen)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_following_a_run_after_its_final_stop_ends_at_once(kind: str, tmp_path: Path) -> None:
    """After a stop no resume can continue (completed, a budget, ...), `events(task_id,
    after=its seq)` ends at once with nothing: a reconnecting reader holds no connection."""
    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "runs.db")
    done = await scripted_loop(list(SCRIPT), [lookup], store=store).run("goal", task_id="t-done")
    limited = await scripted_loop(
        [tool_use(("lookup", {"key": "a"}))], [lookup], store=store, budget=Budget(max_steps=1)
    ).run("goal", task_id="t-steps")
    assert str(limited.stop_reason) == "max_steps"
    loop = scripted_loop([], [lookup], store=store)
    for task_id, result in (("t-done", done), ("t-steps", limited)):
        with anyio.fail_after(5):
            assert [event async for event in loop.events(task_id, after=result.events[-1].seq)] == []
            assert [event async for event in loop.events(task_id, after=10**6)] == []


async def test_following_a_run_after_a_resumable_stop_waits_for_its_resume() -> None:
    """After a `needs_human` stop the follower waits: the resumed run's events reach it, up to
    the resumed run's own stop."""
    store = MemoryStore()
    first = await scripted_loop(
        [tool_use(("refund", {"order_id": "O-1"}, "toolu_r"))], [refund], store=store
    ).run("Refund O-1", task_id="t-wait")
    assert str(first.stop_reason) == "needs_human"
    loop = scripted_loop([text("refunded")], [refund], store=store)
    followed: list[Event] = []
    async with anyio.create_task_group() as group:

        async def follow() -> None:
            followed.extend(await collect(loop.events("t-wait", after=first.events[-1].seq)))

        group.start_soon(follow)
        await anyio.wait_all_tasks_blocked()
        assert followed == []  # still waiting: a resume may follow
        resumed = await loop.resume("t-wait", approvals={"toolu_r": True})
    assert dicts(followed) == dicts(resumed.events)
