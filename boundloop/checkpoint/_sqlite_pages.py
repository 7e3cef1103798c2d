"""Pages of `SQLiteStore`'s runs: one query on an index, from a cursor (`boundloop.checkpoint.paging`)."""

from __future__ import annotations

import builtins
import sqlite3

from .paging import Cursor
from .store import Status, StoredRun

INDEXES = (
    "CREATE INDEX IF NOT EXISTS checkpoints_newest ON checkpoints (updated_at, task_id)",
    "CREATE INDEX IF NOT EXISTS checkpoints_status_newest ON checkpoints (status, updated_at, task_id)",
    "CREATE INDEX IF NOT EXISTS checkpoints_reason_newest ON checkpoints (stop_reason, updated_at, task_id)",
)
"""The indexes a page is read from: every run, by status, by stop reason (newest first)."""


def create_indexes(db: sqlite3.Connection) -> None:
    """Layout 4: the indexes of `page_query` (idempotent)."""
    for statement in INDEXES:
        db.execute(statement)


def page_query(
    status: Status | None, stop_reason: str | None, limit: int, after: Cursor | None
) -> tuple[str, builtins.list[object]]:
    """The SQL and values of a page: at most `limit + 1` rows after `after`, newest first.

    With a stop reason it reads that index (the status, if given too, is checked on its rows: a
    stop reason has one status or two); with a status alone, the status index; else the newest.
    """
    clauses: builtins.list[str] = []
    values: builtins.list[object] = []
    index = "checkpoints_newest"
    if stop_reason is not None:
        clauses.append("stop_reason = ?")
        values.append(stop_reason)
        index = "checkpoints_reason_newest"
    if status is not None:
        clauses.append("status = ?")
        values.append(status)
        if stop_reason is None:
            index = "checkpoints_status_newest"
    if after is not None:
        clauses.append("(updated_at, task_id) < (?, ?)")
        values.extend(after)
    query = (
        f"SELECT task_id, updated_at, step, phase, status, stop_reason FROM checkpoints INDEXED BY {index}"
    )
    if clauses:
        query += " WHERE " + " AND ".join(clauses)
    query += " ORDER BY updated_at DESC, task_id DESC LIMIT ?"
    values.append(limit + 1)
    return query, values


def page_rows(db: sqlite3.Connection, query: str, values: builtins.list[object]) -> builtins.list[StoredRun]:
    """The rows of `page_query`'s query."""
    return [
        StoredRun(task_id=r[0], updated_at=r[1], step=r[2], phase=r[3], status=r[4], stop_reason=r[5])
        for r in db.execute(query, values).fetchall()
    ]
