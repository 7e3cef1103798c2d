"""The event log of `SQLiteStore`: a table `events` of `(task_id, seq, event)`, keyed on
`(task_id, seq)`; a follower polls it (`POLL_S`), from this process or another."""

from __future__ import annotations

import builtins
import sqlite3
import threading
from contextlib import AbstractContextManager
from typing import Final

import anyio

from ..errors import EventExists
from ._threaded_log import ThreadedEventLog

POLL_S: Final = 0.05
"""How often `wait` looks for new events (SQLite tells no other connection of a commit)."""


def create_table(db: sqlite3.Connection) -> None:
    """Layout 3: the event log (idempotent)."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS events (task_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "event TEXT NOT NULL, PRIMARY KEY (task_id, seq)) WITHOUT ROWID"
    )


class SQLiteEventLog(ThreadedEventLog):
    """`EventLog` of `SQLiteStore` (its base class): every query in a worker thread."""

    _lock: threading.Lock

    def _connect(self, *, write: bool = False) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _append(self, rows: builtins.list[tuple[str, int, str]]) -> None:
        with self._lock, self._connect(write=True) as db:
            for task_id, seq, text in rows:
                try:
                    db.execute(
                        "INSERT INTO events (task_id, seq, event) VALUES (?, ?, ?)", (task_id, seq, text)
                    )
                except sqlite3.IntegrityError:
                    raise EventExists(task_id, seq) from None  # the transaction is rolled back

    def _read(self, task_id: str, after: int, limit: int) -> builtins.list[str]:
        with self._connect() as db:
            found = db.execute(
                "SELECT event FROM events WHERE task_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (task_id, after, limit),
            ).fetchall()
        return [str(row[0]) for row in found]

    def _last_seq(self, task_id: str) -> int:
        with self._connect() as db:
            found = db.execute("SELECT max(seq) FROM events WHERE task_id = ?", (task_id,)).fetchone()
        return -1 if found is None or found[0] is None else int(found[0])

    async def wait(self, task_id: str, *, after: int, timeout_s: float) -> bool:
        """Poll every `POLL_S` until the task has an event above `after` (True), at most
        `timeout_s` (False)."""
        with anyio.move_on_after(timeout_s):
            while True:
                if await self.last_seq(task_id) > after:
                    return True
                await anyio.sleep(POLL_S)  # another process appends: no event of ours to wait on
        return False
