"""Pages of `PostgresStore`'s runs: one query on an index, from a cursor (`boundloop.checkpoint.paging`).

Layout 3 adds three b-tree indexes, each ending in `(updated_at, task_id)`: every run, by
status, by stop reason. A page reads one of them backward from the cursor (a row comparison
`(updated_at, task_id) < (cursor)`, which PostgreSQL searches in the index) and stops after
`limit + 1` rows: no scan of the table, no sort, whatever the number of runs.

Task ids compare in the "C" collation (byte order: code point order for UTF-8), in the index
and the query alike, so the pages have the order of `SQLiteStore` and `MemoryStore`, whatever
the database's collation.
"""

from __future__ import annotations

import builtins
from typing import Final, LiteralString

import anyio.to_thread

from ._pg_events import PostgresEventLog
from .paging import DEFAULT_LIMIT, Cursor, RunPage, after_cursor, check_limit, decode_cursor
from .store import Status, StoredRun

INDEXES: Final[tuple[LiteralString, ...]] = (
    'CREATE INDEX boundloop_checkpoints_newest ON boundloop_checkpoints (updated_at, task_id COLLATE "C")',
    "CREATE INDEX boundloop_checkpoints_status_newest ON boundloop_checkpoints "
    '(status, updated_at, task_id COLLATE "C")',
    "CREATE INDEX boundloop_checkpoints_reason_newest ON boundloop_checkpoints "
    '(stop_reason, updated_at, task_id COLLATE "C")',
)
"""Layout 3: the indexes a page is read from (every run, by status, by stop reason)."""

_SELECT: Final = "SELECT task_id, updated_at, step, phase, status, stop_reason FROM boundloop_checkpoints"


def page_query(
    status: Status | None, stop_reason: str | None, limit: int, after: Cursor | None
) -> tuple[LiteralString, builtins.list[object]]:
    """The SQL and values of a page: at most `limit + 1` rows after `after`, newest first."""
    clauses: builtins.list[LiteralString] = []
    values: builtins.list[object] = []
    if stop_reason is not None:
        clauses.append("stop_reason = %s")
        values.append(stop_reason)
    if status is not None:
        clauses.append("status = %s")
        values.append(status)
    if after is not None:
        clauses.append('(updated_at, task_id COLLATE "C") < (%s::double precision, %s::text)')
        values.extend(after)
    where: LiteralString = " WHERE " + " AND ".join(clauses) if clauses else ""
    values.append(limit + 1)
    return _SELECT + where + ' ORDER BY updated_at DESC, task_id COLLATE "C" DESC LIMIT %s', values


class PostgresPages(PostgresEventLog):
    """`PagingStore` of `PostgresStore` (its base class): a page in a worker thread."""

    def _page(self, query: LiteralString, values: builtins.list[object]) -> builtins.list[StoredRun]:
        with self._ready().connection() as conn:
            rows = conn.execute(query, values).fetchall()
        return [
            StoredRun(task_id=r[0], updated_at=r[1], step=r[2], phase=r[3], status=r[4], stop_reason=r[5])
            for r in rows
        ]

    async def page(
        self,
        *,
        status: Status | None = None,
        stop_reason: str | None = None,
        limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
    ) -> RunPage:
        """The runs after `cursor`, newest save first, at most `limit`: one query on an index
        (`boundloop.checkpoint.paging`).

        Raises:
            ConfigurationError: the limit or the cursor is invalid.
        """
        after = None if cursor is None else decode_cursor(cursor)
        query, values = page_query(status, stop_reason, check_limit(limit), after)
        return after_cursor(await anyio.to_thread.run_sync(self._page, query, values), limit, after)
