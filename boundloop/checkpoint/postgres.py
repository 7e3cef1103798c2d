"""PostgresStore: checkpoints in PostgreSQL, shared by workers on several machines.

    pip install 'boundloop[postgres]'

The driver is psycopg 3, synchronous, with a `psycopg_pool.ConnectionPool`; every query runs
in a worker thread (`anyio.to_thread`), never on the event loop, as `SQLiteStore` does.
psycopg's `AsyncConnection` waits on its socket through asyncio's event loop, so it cannot
run under trio, and boundloop runs on both (anyio); asyncpg is asyncio-only too. A checkpoint
is one short statement per save, so a thread hop (tens of microseconds) is small next to the
round trip, and the same driver serves the `dbos` extra.

Layout (`SCHEMA_VERSION`): a table `boundloop_schema` records the migrations applied; the runs
are in `boundloop_checkpoints` (one row per task, the state as the exact JSON text `LoopState`
wrote), with an index on `(status, updated_at)` and those of pages of runs (`_pg_pages`).
The first use of a store applies the missing migrations in one transaction under an advisory
lock, so workers starting together migrate once; a database of a newer boundloop is refused.

Leases (`LeasingStore`): a task is held with a session-level `pg_try_advisory_lock` on one
connection of the store's own, outside the pool, for the whole run. A worker that dies loses
its session and, with it, its leases: another worker can resume its runs. See docs/scaling.md.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import threading
from collections.abc import AsyncGenerator
from types import TracebackType
from typing import Final, LiteralString, Self, final

import anyio
import anyio.to_thread

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    from psycopg.rows import TupleRow

    from .._base.pg_pool import Connections, LazyPool
except ModuleNotFoundError as exc:
    raise ModuleNotFoundError(
        f"PostgresStore needs psycopg 3 and psycopg-pool ({exc.name} is not installed): "
        "pip install 'boundloop[postgres]'",
        name=exc.name,
    ) from exc

from ..errors import CheckpointCorrupt
from ..state import LoopState
from ._pg_events import CREATE
from ._pg_pages import INDEXES, PostgresPages
from .store import Status, StoredRun, check_task_id, lease_in_thread, parse, summary

__all__ = [
    "MIGRATIONS",
    "MIGRATION_LOCK",
    "PostgresStore",
    "SCHEMA_VERSION",
    "lease_key",
    "migrate",
]

SCHEMA_VERSION: Final = 3
"""The layout this boundloop reads and writes (`max(version)` of `boundloop_schema`)."""

MIGRATIONS: Final[dict[int, tuple[LiteralString, ...]]] = {
    1: (
        "CREATE TABLE boundloop_checkpoints ("
        "task_id text PRIMARY KEY, updated_at double precision NOT NULL, step integer NOT NULL, "
        "phase text NOT NULL, status text NOT NULL CHECK (status IN ('running', 'waiting', 'stopped')), "
        "stop_reason text, state text NOT NULL)",
        "CREATE INDEX boundloop_checkpoints_status ON boundloop_checkpoints (status, updated_at DESC)",
    ),
    2: (CREATE,),
    3: INDEXES,
}
"""Version -> the statements that bring the previous version to it."""

MIGRATION_LOCK: Final = 0x626F756E646C6F6F  # "boundloo": the advisory lock key migrations hold
"""The transaction-level advisory lock key under which a store migrates."""

_SAVE: Final = (
    "INSERT INTO boundloop_checkpoints (task_id, updated_at, step, phase, status, stop_reason, state) "
    "VALUES (%s, extract(epoch FROM clock_timestamp()), %s, %s, %s, %s, %s) "
    "ON CONFLICT (task_id) DO UPDATE SET updated_at = excluded.updated_at, step = excluded.step, "
    "phase = excluded.phase, status = excluded.status, stop_reason = excluded.stop_reason, "
    "state = excluded.state"
)
_LIST: Final = "SELECT task_id, updated_at, step, phase, status, stop_reason FROM boundloop_checkpoints"


def lease_key(task_id: str) -> int:
    """The advisory lock key of a task: 64 bits of a keyed BLAKE2b of its id, as a signed bigint."""
    digest = hashlib.blake2b(task_id.encode(), digest_size=8, person=b"boundloop-lease").digest()
    return int.from_bytes(digest, "big", signed=True)


@final
class PostgresStore(PostgresPages):
    """Checkpoints in PostgreSQL, shared by every worker that reaches the database.

    No I/O happens here: the first call migrates the schema and opens the pool. Close the
    store with `aclose()`, or use it as an async context manager.

    Args:
        dsn: a libpq connection string or URI (`postgresql://user@host:5432/db`); settings
            such as `connect_timeout`, `sslmode` or `options=-csearch_path=...` go in it.
        min_size: connections the pool keeps open.
        max_size: the most connections the pool opens (queries beyond wait for one).
        timeout_s: how long a query waits for a connection of the pool before it fails.
        lease_keepalive_s: the TCP keepalive idle time, in seconds, the server uses on the
            lease session (probes every third of it, three times), so a worker whose machine
            is lost releases its leases within about twice this; None keeps the server's.
        log_deltas: runs log their streamed deltas too (`EventLog`; followers `LISTEN`).
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout_s: float = 30.0,
        lease_keepalive_s: int | None = 30,
        log_deltas: bool = False,
    ) -> None:
        self._dsn = dsn
        self._log_deltas = log_deltas
        self._keepalive_s = lease_keepalive_s
        self._pool = LazyPool(
            dsn, name="boundloop", prepare=migrate, min_size=min_size, max_size=max_size, timeout_s=timeout_s
        )
        self._leases = threading.Lock()
        self._session: psycopg.Connection[TupleRow] | None = None
        self._held: dict[str, int] = {}
        self._owners: dict[str, object] = {}  # the lease attempt that took each held task (`_abandon`)
        self._abandoned: set[object] = set()

    # -- set-up and shutdown (blocking: called in worker threads) --------------------------

    def _ready(self) -> Connections:
        """The pool, after migrating the schema on first use."""
        return self._pool.get()

    def _close(self) -> None:
        self._pool.close()
        with self._leases:
            session, self._session = self._session, None
            held, self._held = self._held, {}
            if session is not None:
                if held and not session.closed and not session.broken:
                    # Released before this returns: the server ends a closed session a moment later.
                    with contextlib.suppress(psycopg.OperationalError):
                        session.execute("SELECT pg_advisory_unlock_all()")
                session.close()

    async def aclose(self) -> None:
        """Close the pool and the lease session (which releases the leases this store holds).

        The store opens them again if it is used afterwards.
        """
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- the store ---------------------------------------------------------------------------

    def _save(self, row: StoredRun, state: str) -> None:
        with self._ready().connection() as conn:
            conn.execute(_SAVE, (row.task_id, row.step, row.phase, row.status, row.stop_reason, state))

    def _load(self, task_id: str) -> str | None:
        with self._ready().connection() as conn:
            found = conn.execute(
                "SELECT state FROM boundloop_checkpoints WHERE task_id = %s", (task_id,)
            ).fetchone()
        return None if found is None else str(found[0])

    def _list(self, status: Status | None, stop_reason: str | None) -> builtins.list[StoredRun]:
        clauses: builtins.list[LiteralString] = []
        values: builtins.list[str] = []
        if status is not None:
            clauses.append("status = %s")
            values.append(status)
        if stop_reason is not None:
            clauses.append("stop_reason = %s")
            values.append(stop_reason)
        where: LiteralString = " WHERE " + " AND ".join(clauses) if clauses else ""
        with self._ready().connection() as conn:
            rows = conn.execute(_LIST + where + " ORDER BY updated_at DESC, task_id", values).fetchall()
        return [
            StoredRun(task_id=r[0], updated_at=r[1], step=r[2], phase=r[3], status=r[4], stop_reason=r[5])
            for r in rows
        ]

    def _delete(self, task_id: str) -> bool:
        with self._ready().connection() as conn, conn.transaction():
            conn.execute("DELETE FROM boundloop_events WHERE task_id = %s", (task_id,))
            deleted = conn.execute("DELETE FROM boundloop_checkpoints WHERE task_id = %s", (task_id,))
            return deleted.rowcount > 0

    def write_raw(self, task_id: str, raw: str) -> None:
        """Store `raw` as the task's state text, unchecked (for tests of unreadable rows); blocking."""
        self._save(
            StoredRun(task_id=task_id, updated_at=0.0, step=0, phase="?", status="running", stop_reason=None),
            raw,
        )

    async def save(self, state: LoopState) -> None:
        """Upsert the state's JSON under its task id (one statement, its own transaction).

        `updated_at` is the database server's clock, so workers with skewed clocks list in
        the order the saves happened. A bad task id raises `InvalidTaskId` (text holds no NUL).
        """
        check_task_id(state.task_id)
        await anyio.to_thread.run_sync(self._save, summary(state), state.to_json())

    async def load(self, task_id: str) -> LoopState | None:
        """The last saved state of `task_id`, or None.

        Raises:
            CheckpointCorrupt: the row cannot be read, or the database has a newer layout.
            InvalidTaskId: `task_id` is no valid task id.
        """
        raw = await anyio.to_thread.run_sync(self._load, check_task_id(task_id))
        return None if raw is None else parse(task_id, raw)

    async def list(
        self, *, status: Status | None = None, stop_reason: str | None = None
    ) -> builtins.list[StoredRun]:
        """The stored runs, newest save first, filtered by status and stop reason (indexed)."""
        return await anyio.to_thread.run_sync(self._list, status, stop_reason)

    async def delete(self, task_id: str) -> bool:
        """Forget a task and its events; True if its state was there."""
        return await anyio.to_thread.run_sync(self._delete, check_task_id(task_id))

    # -- leases ------------------------------------------------------------------------------

    def _open_session(self) -> psycopg.Connection[TupleRow]:
        """The lease session: its own connection, kept open while the store is."""
        session = self._session
        if session is not None and not session.closed and not session.broken:
            return session
        session = psycopg.connect(self._lease_dsn(), autocommit=True)
        # An idle session is how a lease looks: no server-wide idle timeout may drop it.
        if session.info.server_version >= 140000:
            session.execute("SET idle_session_timeout = 0")
        if self._keepalive_s is not None:
            for name, value in (
                ("tcp_keepalives_idle", self._keepalive_s),
                ("tcp_keepalives_interval", max(1, self._keepalive_s // 3)),
                ("tcp_keepalives_count", 3),
            ):
                session.execute("SELECT set_config(%s, %s, false)", (name, str(value)))
        self._session = session
        return session

    def _lease_dsn(self) -> str:
        """The DSN with libpq settings that bound how long this side waits on the lease session
        (the DSN's own win): a stalled server or a half-open connection fails a lease call
        instead of hanging every lease and unlock of the process."""
        if self._keepalive_s is None:
            return self._dsn
        idle, given = self._keepalive_s, conninfo_to_dict(self._dsn)
        wanted: dict[str, int] = {"connect_timeout": 10, "keepalives": 1, "keepalives_idle": idle}
        wanted |= {"keepalives_interval": max(1, idle // 3), "keepalives_count": 3}
        wanted["tcp_user_timeout"] = 2 * idle * 1000
        return make_conninfo(self._dsn, **{k: v for k, v in wanted.items() if k not in given})

    def _try_lock(self, task_id: str, attempt: object) -> bool:
        """Take `task_id`'s lock for `attempt`, unless that attempt was abandoned meanwhile."""
        key = lease_key(task_id)
        with self._leases:
            if attempt in self._abandoned:
                self._abandoned.discard(attempt)
                return False
            if task_id in self._held:
                return False
            try:
                row = self._open_session().execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            except psycopg.OperationalError:
                # The session was lost (a restarted server, a terminated backend): and with it
                # every lease it held. Take this one on a new session.
                row = self._open_session().execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if row is None or not row[0]:
                return False
            self._held[task_id] = key
            self._owners[task_id] = attempt
            return True

    def _abandon(self, task_id: str, attempt: object) -> None:
        """The caller of `attempt` is gone: give the lock back if it was taken, else make sure
        it never will be (both under the lease lock, so one of the two always holds)."""
        with self._leases:
            if self._owners.get(task_id) is not attempt:
                self._abandoned.add(attempt)
                return
        self._unlock(task_id)

    def _unlock(self, task_id: str) -> None:
        with self._leases:
            key = self._held.pop(task_id, None)
            self._owners.pop(task_id, None)
            session = self._session
            if key is None or session is None or session.closed or session.broken:
                return  # released with its session already
            with contextlib.suppress(psycopg.OperationalError):
                session.execute("SELECT pg_advisory_unlock(%s)", (key,))

    @contextlib.asynccontextmanager
    async def lease(self, task_id: str) -> AsyncGenerator[None]:
        """Hold `task_id` exclusively, across every process on this database, until the block exits.

        Raises:
            TaskBusy: another worker, or another run of this store, holds it (at once).
            InvalidTaskId: `task_id` is no valid task id.
        """
        check_task_id(task_id)
        attempt = object()
        async with lease_in_thread(
            task_id,
            functools.partial(self._try_lock, task_id, attempt),
            functools.partial(self._abandon, task_id, attempt),
            functools.partial(self._unlock, task_id),
        ):
            yield


def migrate(conn: psycopg.Connection[TupleRow]) -> int:
    """Bring the database to `SCHEMA_VERSION` in one transaction, under an advisory lock; the
    version it was at (blocking).

    A database already at `SCHEMA_VERSION` is only read: no lock, no DDL, so a role that may
    only read and write the tables (not create them) can use it.

    Raises:
        CheckpointCorrupt: the database has a newer layout than this boundloop knows.
    """
    current = _version_if_present(conn)
    if current is not None and current >= SCHEMA_VERSION:
        _refuse_newer(conn, current)
        return current
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS boundloop_schema ("
            "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        found = conn.execute("SELECT coalesce(max(version), 0) FROM boundloop_schema").fetchone()
        version = 0 if found is None else int(found[0])
        _refuse_newer(conn, version)
        for target in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[target]:
                conn.execute(statement)
            conn.execute("INSERT INTO boundloop_schema (version) VALUES (%s)", (target,))
    return version


def _version_if_present(conn: psycopg.Connection[TupleRow]) -> int | None:
    """The schema version when the version table exists, else None (read only, no lock)."""
    with conn.transaction():
        # In the first schema of the search path only, where CREATE TABLE would put it: a table
        # of the same name further down the path belongs to someone else.
        table = conn.execute("SELECT to_regclass(format('%I.boundloop_schema', current_schema()))").fetchone()
        if table is None or table[0] is None:
            return None
        found = conn.execute("SELECT coalesce(max(version), 0) FROM boundloop_schema").fetchone()
    return 0 if found is None else int(found[0])


def _refuse_newer(conn: psycopg.Connection[TupleRow], version: int) -> None:
    """Raise `CheckpointCorrupt` for a layout newer than this boundloop's."""
    if version > SCHEMA_VERSION:
        raise CheckpointCorrupt(
            "*",
            f"database {conn.info.dbname!r} has store schema {version}; "
            f"this boundloop reads up to {SCHEMA_VERSION}",
        )
