"""The event log of `PostgresStore`: a table `boundloop_events` of `(task_id, seq, event)`
with its primary key on `(task_id, seq)`; followers are woken by `LISTEN/NOTIFY`.

An append inserts its rows and, in the same transaction, `NOTIFY`s the channel `CHANNEL` with
each task id: PostgreSQL delivers a notification only once its transaction commits, so a
follower woken by it reads the rows. A follower `LISTEN`s on a connection of the pool, then
looks for rows above its `seq` (none were missed between the two), then waits for a
notification of its task, at most its bound: a notification lost with a broken connection
costs one bound, never an event (the follower reads again either way).
"""

from __future__ import annotations

import builtins
from typing import Final, LiteralString

import anyio.to_thread
import psycopg
import psycopg.errors
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from ..errors import EventExists
from ._threaded_log import ThreadedEventLog
from .store import check_task_id

CHANNEL: Final = "boundloop_events"
"""The `NOTIFY` channel of appends; the payload is the task id."""

CREATE: Final[LiteralString] = (
    "CREATE TABLE boundloop_events (task_id text NOT NULL, seq bigint NOT NULL, "
    "event text NOT NULL, PRIMARY KEY (task_id, seq))"
)
"""Layout 2: the event log."""

_LAST: Final = "SELECT max(seq) FROM boundloop_events WHERE task_id = %s"


def _last(conn: psycopg.Connection[TupleRow], task_id: str) -> int:
    found = conn.execute(_LAST, (task_id,)).fetchone()
    return -1 if found is None or found[0] is None else int(found[0])


class PostgresEventLog(ThreadedEventLog):
    """`EventLog` of `PostgresStore` (its base class): every query in a worker thread."""

    def _ready(self) -> ConnectionPool[psycopg.Connection[TupleRow]]:
        raise NotImplementedError

    def _append(self, rows: builtins.list[tuple[str, int, str]]) -> None:
        with self._ready().connection() as conn, conn.transaction():
            for task_id, seq, text in rows:
                try:
                    conn.execute(
                        "INSERT INTO boundloop_events (task_id, seq, event) VALUES (%s, %s, %s)",
                        (task_id, seq, text),
                    )
                except psycopg.errors.UniqueViolation:
                    raise EventExists(task_id, seq) from None  # the transaction is rolled back
            for task_id in dict.fromkeys(row[0] for row in rows):
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, task_id))

    def _read(self, task_id: str, after: int, limit: int) -> builtins.list[str]:
        with self._ready().connection() as conn:
            found = conn.execute(
                "SELECT event FROM boundloop_events WHERE task_id = %s AND seq > %s ORDER BY seq LIMIT %s",
                (task_id, after, limit),
            ).fetchall()
        return [str(row[0]) for row in found]

    def _last_seq(self, task_id: str) -> int:
        with self._ready().connection() as conn:
            return _last(conn, task_id)

    def _wait(self, task_id: str, after: int, timeout_s: float) -> bool:
        with self._ready().connection() as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            try:
                if _last(conn, task_id) > after:
                    return True
                return any(note.payload == task_id for note in conn.notifies(timeout=timeout_s))
            finally:
                conn.execute(f"UNLISTEN {CHANNEL}")

    async def wait(self, task_id: str, *, after: int, timeout_s: float) -> bool:
        """Wait for a notification of the task (`LISTEN`) until it has an event above `after`
        (True), at most `timeout_s` (False); the connection it holds meanwhile is the pool's.

        A cancelled wait returns at once; its worker thread lets the connection go within
        `timeout_s`.
        """
        task_id = check_task_id(task_id)
        return await anyio.to_thread.run_sync(self._wait, task_id, after, timeout_s, abandon_on_cancel=True)
