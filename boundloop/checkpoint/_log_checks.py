"""The event-log checks of the conformance suite (`conformance.EVENT_LOG_CHECKS`)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Final, TypeAlias, cast

import anyio

from ..errors import EventExists, InvalidTaskId
from ..events import Event, Stop, Transition
from ..state import LoopState
from .eventlog import EventLog
from .store import CheckpointStore

LogCheck: TypeAlias = Callable[[EventLog], Awaitable[None]]
"""A check of a fresh store's event log."""

INVALID_TASK_IDS: Final = ("", "   ", "nul\x00inside", "new\nline", "x" * 201, "lone \ud800 surrogate")
"""Task ids no store takes: empty, only whitespace, a NUL, a newline, too long, a lone surrogate."""

WAIT_BOUND_S: Final = 10.0
"""The longest a check lets a follower wait for an append it is owed (a slow, shared machine)."""


def sample_event(task_id: str, seq: int, *, stop: bool = False) -> Event:
    """A transition (or a `Stop`) of `task_id` numbered `seq`."""
    if stop:
        return Stop(
            seq=seq,
            task_id=task_id,
            at=time.time(),
            step=1,
            stop_reason="completed",
            detail=None,
            steps=1,
            tool_calls=0,
            duration_s=0.0,
            trace_id="trace",
        )
    return Transition(
        seq=seq,
        task_id=task_id,
        at=time.time(),
        step=1,
        source="assemble",
        dest="propose",
        trigger="assembled",
        duration_s=0.0,
    )


def _seqs(events: list[Event]) -> list[int]:
    return [event.seq for event in events]


async def appends_and_reads_in_order(log: EventLog) -> None:
    """Appended events read back in `seq` order, whatever order the batches came in, and equal."""
    events = [sample_event("t-log", 0), sample_event("t-log", 1), sample_event("t-log", 2)]
    events.append(sample_event("t-log", 3, stop=True))
    await log.append(events[:2])
    await log.append([events[3], events[2]])
    read = await log.read("t-log")
    assert _seqs(read) == [0, 1, 2, 3]
    assert [event.to_dict() for event in read] == [event.to_dict() for event in events]
    assert isinstance(read[3], Stop)
    assert await log.last_seq("t-log") == 3
    assert await log.read("t-none") == []
    assert await log.last_seq("t-none") == -1


async def reads_after_a_seq(log: EventLog) -> None:
    """`after` skips every event up to it; `limit` pages the rest."""
    await log.append([sample_event("t-after", seq) for seq in range(10)])
    assert _seqs(await log.read("t-after", after=6)) == [7, 8, 9]
    assert _seqs(await log.read("t-after", after=2, limit=3)) == [3, 4, 5]
    assert await log.read("t-after", after=9) == []


async def refuses_a_duplicate_seq(log: EventLog) -> None:
    """An append holding a `seq` the task logged (or twice in itself) is refused whole."""
    await log.append([sample_event("t-dup", 0), sample_event("t-dup", 1)])
    for batch in ([sample_event("t-dup", 2), sample_event("t-dup", 1)], [sample_event("t-dup", 5)] * 2):
        refusal: EventExists | None = None
        try:
            await log.append(batch)
        except EventExists as exc:
            refusal = exc
        assert refusal is not None, "a duplicate seq was appended"
        assert (refusal.task_id, refusal.seq) == ("t-dup", batch[-1].seq)
    assert _seqs(await log.read("t-dup")) == [0, 1]  # nothing of the refused batches was kept
    await log.append([sample_event("t-other", 1)])  # the same seq of another task is another event


async def keeps_tasks_apart(log: EventLog) -> None:
    """Appends of many tasks, interleaved and concurrent, each read back whole and in order."""

    async def write(task: int) -> None:
        for seq in range(0, 12, 3):
            await log.append([sample_event(f"t-many-{task}", seq + i) for i in range(3)])

    async with anyio.create_task_group() as group:
        for task in range(8):
            group.start_soon(write, task)
    for task in range(8):
        assert _seqs(await log.read(f"t-many-{task}")) == list(range(12))


async def wakes_a_follower(log: EventLog) -> None:
    """A follower waiting after the last `seq` returns once an event is appended after it started
    (within the bound), and at once when one is already there; it times out when none comes."""
    await log.append([sample_event("t-follow", 0)])
    assert await log.wait("t-follow", after=-1, timeout_s=WAIT_BOUND_S)
    assert not await log.wait("t-follow", after=0, timeout_s=0.05)
    woken: list[bool] = []
    waiting = anyio.Event()

    async def follower() -> None:
        waiting.set()
        woken.append(await log.wait("t-follow", after=0, timeout_s=WAIT_BOUND_S))

    with anyio.fail_after(WAIT_BOUND_S + 5):
        async with anyio.create_task_group() as group:
            group.start_soon(follower)
            await waiting.wait()
            await log.append([sample_event("t-other", 1)])  # another task's event wakes no one for good
            await log.append([sample_event("t-follow", 1)])
    assert woken == [True]
    assert _seqs(await log.read("t-follow", after=0)) == [1]


async def refuses_an_invalid_task_id_in_the_log(log: EventLog) -> None:
    """`append`, `read`, `last_seq` and `wait` refuse a bad task id with `InvalidTaskId`."""
    for task_id in INVALID_TASK_IDS:
        calls: list[Awaitable[object]] = [
            log.append([sample_event(task_id, 0)]),
            log.read(task_id),
            log.last_seq(task_id),
            log.wait(task_id, after=-1, timeout_s=0.01),
        ]
        for call in calls:
            refusal: InvalidTaskId | None = None
            try:
                await call
            except InvalidTaskId as exc:
                refusal = exc
            assert refusal is not None, f"the event log took the task id {task_id!r}"
            assert refusal.task_id == task_id


async def forgets_the_events_of_a_deleted_task(log: EventLog) -> None:
    """Deleting a task from the store deletes its events too (a new run of the id starts afresh)."""
    store = cast(CheckpointStore, log)  # every event log of boundloop is a store
    state = LoopState(task_id="t-gone", trace_id="trace", goal="g", started_at=time.time())
    await store.save(state)
    await log.append([sample_event("t-gone", 0), sample_event("t-kept", 0)])
    assert await store.delete("t-gone")
    assert await log.read("t-gone") == []
    assert await log.last_seq("t-gone") == -1
    assert _seqs(await log.read("t-kept")) == [0]


EVENT_LOG_CHECKS: Final[tuple[LogCheck, ...]] = (
    appends_and_reads_in_order,
    reads_after_a_seq,
    refuses_a_duplicate_seq,
    keeps_tasks_apart,
    wakes_a_follower,
    refuses_an_invalid_task_id_in_the_log,
    forgets_the_events_of_a_deleted_task,
)
"""Every check of a store's event log, in order."""
