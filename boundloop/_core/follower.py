"""`AgentLoop.events`: a task's events read from its store's event log, then followed live.

The follower reads the log in pages after the last `seq` it yielded; when it is at the end it
waits on the log (`EventLog.wait`: SQLite polls, PostgreSQL is woken by `NOTIFY`; each wait at
most `wait_s`, then it reads again), and it ends after the first `Stop` event it yields. A run
that stops waiting for a human ends with its `Stop` too; its resumed run continues the log,
read by a new `events(task_id, after=...)`. Asked for the events after a run's last `Stop`, it
ends at once when that stop is final (completed, failed, a budget, ...: nothing can follow),
and waits for a resume after a resumable one (`needs_human`, `cancelled`). docs/streaming.md
has the contract.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Final

import boundloop._core as _core  # its names load when a follower starts (the seam is lazy)

from ..checkpoint.eventlog import PAGE, EventLog
from ..checkpoint.store import CheckpointStore, check_task_id
from ..errors import ConfigurationError
from ..events import Event, Stop
from ..records import RESUMABLE

WAIT_S: Final = 1.0
"""The longest one wait on the log lasts before the follower reads it again."""


def follow(store: CheckpointStore | None, task_id: str, *, after: int = -1) -> AsyncGenerator[Event]:
    """The events of `task_id` above `after`, stored then live, up to its next `Stop`.

    Raises:
        ConfigurationError: the loop has no store, or its store keeps no event log.
        InvalidTaskId: `task_id` is no valid task id.
    """
    log = _core.event_log_of(store)
    if log is None:
        raise ConfigurationError(
            "loop.events needs a store that keeps an event log (MemoryStore, SQLiteStore, PostgresStore); "
            f"this loop's store is {store!r}"
        )
    return _follow(log, check_task_id(task_id), after)


async def _follow(log: EventLog, task_id: str, after: int) -> AsyncGenerator[Event]:
    first = True
    while True:
        page = await log.read(task_id, after=after, limit=PAGE)
        for event in page:
            yield event
            after = event.seq
            if event.kind == "stop":
                return
        if first and not page and await _ended_for_good(log, task_id):
            return  # asked for what follows a final stop: nothing ever will
        first = False
        if len(page) < PAGE:
            await log.wait(task_id, after=after, timeout_s=WAIT_S)


async def _ended_for_good(log: EventLog, task_id: str) -> bool:
    """Whether the task's last logged event is a `Stop` no resume can continue."""
    last = await log.last_seq(task_id)
    if last < 0:
        return False  # no run yet: one may start
    tail = await log.read(task_id, after=last - 1, limit=1)
    return bool(tail) and isinstance(tail[0], Stop) and tail[0].stop_reason not in RESUMABLE
