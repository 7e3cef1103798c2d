"""PostgresPoolStore: budget pools in PostgreSQL, shared by the workers of a fleet.

    pip install 'boundloop[postgres]'

The driver is psycopg 3 with a `psycopg_pool.ConnectionPool`, every statement in a worker
thread (`anyio.to_thread`), as `PostgresStore` does, so it runs under asyncio and trio alike.

The tables are those of `boundloop/pools/store.py` (`BIGINT` nanodollars, `DOUBLE PRECISION`
lease times), created on first use under an advisory lock if missing (a database that has them
is only read and written, so a role without `CREATE` can use it). They sit beside
`PostgresStore`'s tables in the same database or in one of their own.

What each method sends (docs/pools.md, "The SQL on PostgreSQL"):

- `reserve`: one transaction of three statements. The first, an upsert of the pool's row,
  takes the row's lock, so the reservations of one pool and period run one after another
  across the fleet; the second reads the live holds' sums, on a snapshot taken after the lock
  (READ COMMITTED: every hold committed before is counted); the third inserts the hold with
  the output tokens `ledger.fit` granted (the one rule every store decides with, in Python) and
  deletes the pool's holds whose lease ended a day ago. A shortfall inserts no hold.
- `settle`: one statement that deletes the hold and adds the bill to the row of the hold's own
  pool and period (nothing, if the hold was settled or released already).
- `release`, `renew`: one statement each.

A store that cannot be reached (refused, unknown host, no connection within `timeout_s`)
raises `ConnectionError` with one sentence naming the server, so the call it was for is not
sent and the run fails saying so.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from types import TracebackType
from typing import Final, LiteralString, Self, TypeVar, final

import anyio
import anyio.to_thread

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.rows import TupleRow

    from .._base.pg_pool import Connections, LazyPool
except ModuleNotFoundError as exc:
    raise ModuleNotFoundError(
        f"PostgresPoolStore needs psycopg 3 and psycopg-pool ({exc.name} is not installed): "
        "pip install 'boundloop[postgres]'",
        name=exc.name,
    ) from exc

from .ledger import Shortfall
from .store import Hold, PoolUsage

__all__ = ["PRUNE_AFTER_S", "PostgresPoolStore", "SCHEMA", "SCHEMA_LOCK", "create_tables"]

SCHEMA: Final[tuple[LiteralString, ...]] = (
    "CREATE TABLE IF NOT EXISTS boundloop_pools (pool text NOT NULL, period text NOT NULL, "
    "spent_nusd bigint NOT NULL DEFAULT 0, spent_tokens bigint NOT NULL DEFAULT 0, "
    "max_nusd bigint, max_tokens bigint, PRIMARY KEY (pool, period))",
    "CREATE TABLE IF NOT EXISTS boundloop_pool_holds (id bigint PRIMARY KEY, pool text NOT NULL, "
    "period text NOT NULL, nusd bigint NOT NULL, tokens bigint NOT NULL, "
    "expires_at double precision NOT NULL, holder text NOT NULL)",
    "CREATE INDEX IF NOT EXISTS boundloop_pool_holds_live ON boundloop_pool_holds (pool, period, expires_at)",
)
"""The statements that create the pool tables (each `IF NOT EXISTS`)."""

SCHEMA_LOCK: Final = 0x626C706F6F6C7331  # "blpools1": the advisory lock the creation holds

_UPSERT: Final = (
    "INSERT INTO boundloop_pools (pool, period, max_nusd, max_tokens) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (pool, period) DO UPDATE "
    "SET max_nusd = excluded.max_nusd, max_tokens = excluded.max_tokens "
    "RETURNING spent_nusd, spent_tokens"
)
_HELD: Final = (
    "SELECT coalesce(sum(nusd), 0)::bigint, coalesce(sum(tokens), 0)::bigint FROM boundloop_pool_holds "
    "WHERE pool = %s AND period = %s AND expires_at > %s"
)
_INSERT_HOLD: Final = (
    "WITH pruned AS (DELETE FROM boundloop_pool_holds WHERE pool = %s AND expires_at < %s) "
    "INSERT INTO boundloop_pool_holds (id, pool, period, nusd, tokens, expires_at, holder) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_SETTLE: Final = (
    "WITH h AS (DELETE FROM boundloop_pool_holds WHERE id = %s RETURNING pool, period) "
    "UPDATE boundloop_pools p SET spent_nusd = p.spent_nusd + %s, spent_tokens = p.spent_tokens + %s "
    "FROM h WHERE p.pool = h.pool AND p.period = h.period"
)
_RELEASE: Final = "DELETE FROM boundloop_pool_holds WHERE id = %s"
_RENEW: Final = "UPDATE boundloop_pool_holds SET expires_at = %s WHERE id = %s AND expires_at < %s"
_USAGE: Final = (
    "SELECT p.pool, p.period, p.spent_nusd, p.spent_tokens, h.nusd, h.tokens, h.holds, "
    "p.max_nusd, p.max_tokens FROM boundloop_pools p CROSS JOIN LATERAL ("
    "SELECT coalesce(sum(nusd), 0)::bigint AS nusd, coalesce(sum(tokens), 0)::bigint AS tokens, "
    "count(*) AS holds "
    "FROM boundloop_pool_holds WHERE pool = p.pool AND period = p.period AND expires_at > %s) h "
)
_ONE: Final = _USAGE + "WHERE p.pool = %s AND p.period = %s"
_LATEST: Final = (
    _USAGE + "WHERE p.period = (SELECT max(period) FROM boundloop_pools q WHERE q.pool = p.pool) "
    "ORDER BY p.pool"
)
PRUNE_AFTER_S: Final = 86_400.0
"""Holds whose lease ended this long ago are deleted (their holder died; they no longer count)."""

_T = TypeVar("_T")


@final
class PostgresPoolStore:
    """A `PoolStore` in PostgreSQL, shared by every worker that reaches the database.

    No I/O happens here: the first call creates the tables (if missing) and opens the pool of
    connections. Close the store with `aclose()`, or use it as an async context manager.

    Args:
        dsn: a libpq connection string or URI (`postgresql://user@host:5432/db`).
        min_size: connections the pool keeps open.
        max_size: the most connections the pool opens (statements beyond wait for one).
        timeout_s: how long a statement waits for a connection (a server that cannot be
            reached included) before the store counts as unreachable: the call it was for is
            not sent.
    """

    __slots__ = ("_dsn", "_pool")

    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 10, timeout_s: float = 5.0) -> None:
        self._dsn = dsn
        self._pool = LazyPool(
            dsn,
            name="boundloop-pools",
            prepare=create_tables,
            min_size=min_size,
            max_size=max_size,
            timeout_s=timeout_s,
            connect_timeout=_seconds(timeout_s),
        )

    def __repr__(self) -> str:
        return f"PostgresPoolStore({self.server!r})"

    @property
    def server(self) -> str:
        """Where the store is, for messages: `host:port/dbname` from the DSN, never its password."""
        try:
            parts = conninfo_to_dict(self._dsn)
        except psycopg.ProgrammingError:
            return "an unreadable DSN"
        host = str(parts.get("host") or parts.get("hostaddr") or "localhost")
        return f"{host}:{parts.get('port') or 5432}/{parts.get('dbname') or parts.get('user') or ''}"

    # -- set-up and shutdown (blocking: called in worker threads) --------------------------

    def _ready(self) -> Connections:
        """The pool of connections, after creating the tables on first use."""
        return self._pool.get()

    def _close(self) -> None:
        self._pool.close()

    async def aclose(self) -> None:
        """Close the connections (opened again if the store is used afterwards)."""
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _call(self, work: Callable[[], _T]) -> _T:
        """`work()` in a worker thread; a server that cannot be reached raises `ConnectionError`."""
        try:
            return await anyio.to_thread.run_sync(work)
        except psycopg.OperationalError as exc:  # refused, unknown host, lost, no connection in time
            reason = next(iter(str(exc).strip().splitlines()), "") or type(exc).__name__
            raise ConnectionError(
                f"the PostgreSQL pool store at {self.server} cannot be reached: {reason}"
            ) from exc

    # -- the store (blocking halves) ---------------------------------------------------------

    def _reserve(self, hold: Hold) -> int | Shortfall:
        with self._ready().connection() as conn, conn.transaction():
            spent = conn.execute(_UPSERT, (hold.pool, hold.period, hold.max_nusd, hold.max_tokens)).fetchone()
            held = conn.execute(_HELD, (hold.pool, hold.period, hold.now)).fetchone()
            assert spent is not None  # an upsert returns its row
            assert held is not None  # sums are one row
            granted = hold.decide(int(spent[0]) + int(held[0]), int(spent[1]) + int(held[1]))
            if isinstance(granted, Shortfall):
                return granted
            nusd, tokens = hold.held(granted)
            conn.execute(
                _INSERT_HOLD,
                (
                    hold.pool,
                    hold.now - PRUNE_AFTER_S,
                    hold.id,
                    hold.pool,
                    hold.period,
                    nusd,
                    tokens,
                    hold.expires_at,
                    hold.holder,
                ),
            )
            return granted

    def _execute(self, statement: LiteralString, values: tuple[object, ...]) -> None:
        with self._ready().connection() as conn:
            conn.execute(statement, values)

    def _usage(self, pool: str, period: str, now: float) -> PoolUsage:
        with self._ready().connection() as conn:
            row = conn.execute(_ONE, (now, pool, period)).fetchone()
        return PoolUsage(pool=pool, period=period) if row is None else _usage(row)

    def _list(self, now: float) -> builtins.list[PoolUsage]:
        with self._ready().connection() as conn:
            return [_usage(row) for row in conn.execute(_LATEST, (now,)).fetchall()]

    # -- the store ---------------------------------------------------------------------------

    async def reserve(self, hold: Hold) -> int | Shortfall:
        """See `PoolStore.reserve`: one transaction, the pool's row locked first (module doc).

        Raises:
            ConnectionError: the server cannot be reached.
        """
        return await self._call(lambda: self._reserve(hold))

    async def settle(self, hold_id: int, *, nusd: int, tokens: int) -> None:
        """See `PoolStore.settle`: one statement."""
        await self._call(lambda: self._execute(_SETTLE, (hold_id, nusd, tokens)))

    async def release(self, hold_id: int) -> None:
        """See `PoolStore.release`: one statement."""
        await self._call(lambda: self._execute(_RELEASE, (hold_id,)))

    async def renew(self, hold_id: int, expires_at: float) -> None:
        """See `PoolStore.renew`: one statement."""
        await self._call(lambda: self._execute(_RENEW, (expires_at, hold_id, expires_at)))

    async def usage(self, pool: str, period: str, now: float) -> PoolUsage:
        """See `PoolStore.usage`: one statement."""
        return await self._call(lambda: self._usage(pool, period, now))

    async def list(self, now: float) -> builtins.list[PoolUsage]:
        """See `PoolStore.list`: one statement."""
        return await self._call(lambda: self._list(now))


def create_tables(conn: psycopg.Connection[TupleRow]) -> None:
    """Create the pool tables if they are missing, in one transaction under an advisory lock
    (workers starting together create them once); a database that has them is only read."""
    found = conn.execute("SELECT to_regclass('boundloop_pool_holds') IS NOT NULL").fetchone()
    if found is not None and found[0]:
        return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        for statement in SCHEMA:
            conn.execute(statement)


def _usage(row: tuple[int | str | None, ...]) -> PoolUsage:
    pool, period, spent_nusd, spent_tokens, nusd, tokens, holds, max_nusd, max_tokens = row
    return PoolUsage(
        pool=str(pool),
        period=str(period),
        spent_nusd=int(spent_nusd or 0),
        spent_tokens=int(spent_tokens or 0),
        reserved_nusd=int(nusd or 0),
        reserved_tokens=int(tokens or 0),
        holds=int(holds or 0),
        max_nusd=None if max_nusd is None else int(max_nusd),
        max_tokens=None if max_tokens is None else int(max_tokens),
    )


def _seconds(timeout_s: float) -> int:
    """libpq's `connect_timeout`: whole seconds, at least 2 (libpq's own floor)."""
    return max(2, round(timeout_s))
