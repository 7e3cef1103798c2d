"""`ThreadedEventLog`: the `EventLog` face of the stores whose queries block (SQLite,
PostgreSQL): each query runs in a worker thread."""

from __future__ import annotations

from collections.abc import Sequence

import anyio.to_thread

from ..events import Event
from .eventlog import PAGE, decode
from .store import check_task_id, log_rows


class ThreadedEventLog:
    """An `EventLog` over blocking queries (SQLite, PostgreSQL): each runs in a worker thread.

    A store class derives from it and writes `_append`, `_read`, `_last_seq` (and `wait`).
    """

    _log_deltas: bool

    @property
    def log_deltas(self) -> bool:
        """Whether runs log their streamed deltas too."""
        return self._log_deltas

    def _append(self, rows: list[tuple[str, int, str]]) -> None:
        raise NotImplementedError

    def _read(self, task_id: str, after: int, limit: int) -> list[str]:
        raise NotImplementedError

    def _last_seq(self, task_id: str) -> int:
        raise NotImplementedError

    async def append(self, events: Sequence[Event]) -> None:
        """Append events, all or none, in one transaction.

        Raises:
            EventExists: one has a `seq` its task logged already (the primary key refuses it).
            InvalidTaskId: an event's task id is no valid task id.
        """
        rows = log_rows(events)
        if rows:
            await anyio.to_thread.run_sync(self._append, rows)

    async def read(self, task_id: str, *, after: int = -1, limit: int = PAGE) -> list[Event]:
        """The task's events above `after`, in `seq` order, at most `limit`."""
        return decode(await anyio.to_thread.run_sync(self._read, check_task_id(task_id), after, limit))

    async def last_seq(self, task_id: str) -> int:
        """The highest `seq` logged for the task; -1 when none is."""
        return await anyio.to_thread.run_sync(self._last_seq, check_task_id(task_id))
