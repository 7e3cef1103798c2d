"""SQLitePoolStore: budget pools in one SQLite file, shared by the processes of one machine.

Each reservation is one `BEGIN IMMEDIATE` transaction, which takes the file's write lock before
it reads: the spend and live holds it reads are what it decides on, and no other process writes
in between. Settling and releasing are one transaction each too. Every statement runs in a
worker thread, never on the event loop; the file is in WAL mode, so readers (`usage`) never wait
for a writer. The store keeps its connections open between statements (one for each statement
running at once, each used by one thread at a time); a statement that fails closes its
connection, and a process forked from one using the store opens its own. The tables are those
of `boundloop/pools/store.py`, created if missing (the file may be a `SQLiteStore`'s: the names
do not clash, and no `user_version` is set).
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sqlite3
import threading
import weakref
from collections.abc import Generator
from pathlib import Path
from typing import Final, final

import anyio.to_thread

from .ledger import Shortfall
from .store import Hold, PoolUsage

__all__ = ["SQLitePoolStore"]

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS boundloop_pools (pool TEXT NOT NULL, period TEXT NOT NULL, "
    "spent_nusd INTEGER NOT NULL DEFAULT 0, spent_tokens INTEGER NOT NULL DEFAULT 0, "
    "max_nusd INTEGER, max_tokens INTEGER, PRIMARY KEY (pool, period))",
    "CREATE TABLE IF NOT EXISTS boundloop_pool_holds (id INTEGER PRIMARY KEY, pool TEXT NOT NULL, "
    "period TEXT NOT NULL, nusd INTEGER NOT NULL, tokens INTEGER NOT NULL, "
    "expires_at REAL NOT NULL, holder TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS boundloop_pool_holds_live ON boundloop_pool_holds (pool, period, expires_at)",
    "CREATE INDEX IF NOT EXISTS boundloop_pool_holds_expiry ON boundloop_pool_holds (expires_at)",
)

_UPSERT: Final = (
    "INSERT INTO boundloop_pools (pool, period, max_nusd, max_tokens) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (pool, period) DO UPDATE SET max_nusd = excluded.max_nusd, max_tokens = excluded.max_tokens"
)
_USED: Final = (
    "SELECT p.spent_nusd, p.spent_tokens, "
    "(SELECT COALESCE(SUM(h.nusd), 0) FROM boundloop_pool_holds h "
    " WHERE h.pool = p.pool AND h.period = p.period AND h.expires_at > ?), "
    "(SELECT COALESCE(SUM(h.tokens), 0) FROM boundloop_pool_holds h "
    " WHERE h.pool = p.pool AND h.period = p.period AND h.expires_at > ?), "
    "(SELECT COUNT(*) FROM boundloop_pool_holds h "
    " WHERE h.pool = p.pool AND h.period = p.period AND h.expires_at > ?), "
    "p.max_nusd, p.max_tokens FROM boundloop_pools p WHERE p.pool = ? AND p.period = ?"
)
_INSERT_HOLD: Final = (
    "INSERT INTO boundloop_pool_holds (id, pool, period, nusd, tokens, expires_at, holder) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_PRUNE_AFTER_S: Final = 86_400.0
"""Holds whose lease ended this long ago are deleted (their holder died; they no longer count)."""


@final
class _Idle:
    """The connections of one store not in use, each used by one thread at a time; those a
    process inherited from the one that forked it are dropped, never used or closed."""

    __slots__ = ("_connections", "_lock", "_pid")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._connections: builtins.list[sqlite3.Connection] = []

    def take(self) -> sqlite3.Connection | None:
        with self._lock:
            if self._pid != os.getpid():
                self._pid, self._connections = os.getpid(), []
            return self._connections.pop() if self._connections else None

    def put(self, db: sqlite3.Connection) -> None:
        with self._lock:
            if self._pid == os.getpid():
                self._connections.append(db)

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
            mine = self._pid == os.getpid()
        for db in connections if mine else ():
            db.close()


@final
class SQLitePoolStore:
    """A `PoolStore` in a SQLite file, shared by the processes of one machine.

    Args:
        path: the database file (created if missing; may be a `SQLiteStore`'s file).
        timeout_s: how long a statement waits for another process's write lock before the store
            counts as unreachable (the call it was for is not sent).
    """

    __slots__ = ("__weakref__", "_idle", "_ready", "path", "timeout_s")

    def __init__(self, path: str | Path, *, timeout_s: float = 5.0) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        self._ready = False
        self._idle = _Idle()
        weakref.finalize(self, self._idle.close)

    def __repr__(self) -> str:
        return f"SQLitePoolStore({str(self.path)!r})"

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False)
        try:
            if not self._ready:
                db.execute("PRAGMA journal_mode=WAL")
                for statement in _SCHEMA:
                    db.execute(statement)
                self._ready = True
        except BaseException:
            db.close()
            raise
        return db

    @contextlib.contextmanager
    def _connect(self, *, write: bool) -> Generator[sqlite3.Connection]:
        db = self._idle.take() or self._open()
        try:
            if write:
                db.execute("BEGIN IMMEDIATE")  # the write lock before the read
            yield db
            if db.in_transaction:
                db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.close()  # rolls back what was begun; the next statement opens a new one
            raise
        self._idle.put(db)

    async def aclose(self) -> None:
        """Close the connections kept idle (the store opens new ones if it is used afterwards;
        they are closed too when the store is garbage-collected)."""
        await anyio.to_thread.run_sync(self._idle.close)

    def _reserve(self, hold: Hold) -> int | Shortfall:
        with self._connect(write=True) as db:
            db.execute(_UPSERT, (hold.pool, hold.period, hold.max_nusd, hold.max_tokens))
            row = db.execute(_USED, (hold.now, hold.now, hold.now, hold.pool, hold.period)).fetchone()
            spent_nusd, spent_tokens, reserved_nusd, reserved_tokens = (int(value) for value in row[:4])
            granted = hold.decide(spent_nusd + reserved_nusd, spent_tokens + reserved_tokens)
            if isinstance(granted, Shortfall):
                return granted
            nusd, tokens = hold.held(granted)
            db.execute(
                _INSERT_HOLD, (hold.id, hold.pool, hold.period, nusd, tokens, hold.expires_at, hold.holder)
            )
            db.execute("DELETE FROM boundloop_pool_holds WHERE expires_at < ?", (hold.now - _PRUNE_AFTER_S,))
            return granted

    def _settle(self, hold_id: int, nusd: int, tokens: int) -> None:
        with self._connect(write=True) as db:
            row = db.execute(
                "DELETE FROM boundloop_pool_holds WHERE id = ? RETURNING pool, period", (hold_id,)
            ).fetchone()
            if row is not None:
                db.execute(
                    "UPDATE boundloop_pools SET spent_nusd = spent_nusd + ?, spent_tokens = spent_tokens + ? "
                    "WHERE pool = ? AND period = ?",
                    (nusd, tokens, row[0], row[1]),
                )

    def _release(self, hold_id: int) -> None:
        with self._connect(write=False) as db:
            db.execute("DELETE FROM boundloop_pool_holds WHERE id = ?", (hold_id,))

    def _renew(self, hold_id: int, expires_at: float) -> None:
        with self._connect(write=False) as db:
            db.execute(
                "UPDATE boundloop_pool_holds SET expires_at = ? WHERE id = ? AND expires_at < ?",
                (expires_at, hold_id, expires_at),
            )

    def _usage(self, pool: str, period: str, now: float) -> PoolUsage:
        with self._connect(write=False) as db:
            row = db.execute(_USED, (now, now, now, pool, period)).fetchone()
        if row is None:
            return PoolUsage(pool=pool, period=period)
        return PoolUsage(
            pool=pool,
            period=period,
            spent_nusd=int(row[0]),
            spent_tokens=int(row[1]),
            reserved_nusd=int(row[2]),
            reserved_tokens=int(row[3]),
            holds=int(row[4]),
            max_nusd=None if row[5] is None else int(row[5]),
            max_tokens=None if row[6] is None else int(row[6]),
        )

    def _list(self, now: float) -> builtins.list[PoolUsage]:
        with self._connect(write=False) as db:
            latest = db.execute(
                "SELECT pool, MAX(period) FROM boundloop_pools GROUP BY pool ORDER BY pool"
            ).fetchall()
        return [self._usage(str(pool), str(period), now) for pool, period in latest]

    async def reserve(self, hold: Hold) -> int | Shortfall:
        """See `PoolStore.reserve`: one `BEGIN IMMEDIATE` transaction.

        Raises:
            sqlite3.Error: the file cannot be opened, or its write lock is not had in `timeout_s`.
        """
        return await anyio.to_thread.run_sync(self._reserve, hold)

    async def settle(self, hold_id: int, *, nusd: int, tokens: int) -> None:
        """See `PoolStore.settle`: one transaction."""
        await anyio.to_thread.run_sync(self._settle, hold_id, nusd, tokens)

    async def release(self, hold_id: int) -> None:
        """See `PoolStore.release`: one statement."""
        await anyio.to_thread.run_sync(self._release, hold_id)

    async def renew(self, hold_id: int, expires_at: float) -> None:
        """See `PoolStore.renew`: one statement."""
        await anyio.to_thread.run_sync(self._renew, hold_id, expires_at)

    async def usage(self, pool: str, period: str, now: float) -> PoolUsage:
        """See `PoolStore.usage`."""
        return await anyio.to_thread.run_sync(self._usage, pool, period, now)

    async def list(self, now: float) -> builtins.list[PoolUsage]:
        """See `PoolStore.list`."""
        return await anyio.to_thread.run_sync(self._list, now)
