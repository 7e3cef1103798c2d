"""A psycopg `ConnectionPool` opened on first use, after a set-up on a connection of its own.

The PostgreSQL stores (`checkpoint/postgres.py`, `pools/postgres.py`) do no I/O when they are
made: the first statement creates their tables (if missing) and opens the pool; closing it
lets a later statement open it again. Blocking: called in worker threads. Imported only by
modules that need psycopg 3 and psycopg-pool (they say how to install them when missing).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeAlias, final

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

__all__ = ["Connections", "LazyPool"]

Connections: TypeAlias = ConnectionPool[psycopg.Connection[TupleRow]]


@final
class LazyPool:
    """`get()`: the pool of autocommit connections, `prepare(connection)` run once before it
    opens; `close()`: the pool closed (opened again by the next `get()`).

    Args:
        dsn: a libpq connection string or URI.
        name: the pool's name (psycopg-pool's logs).
        prepare: run on a connection of its own before the pool opens (the tables created).
        min_size, max_size, timeout_s: the pool's (`timeout_s`: the wait for a connection).
        connect_timeout: libpq's `connect_timeout` of the set-up connection (None: libpq's).
    """

    __slots__ = (
        "_connect_timeout",
        "_dsn",
        "_lock",
        "_max_size",
        "_min_size",
        "_name",
        "_pool",
        "_prepare",
        "_timeout_s",
    )

    def __init__(
        self,
        dsn: str,
        *,
        name: str,
        prepare: Callable[[psycopg.Connection[TupleRow]], object],
        min_size: int,
        max_size: int,
        timeout_s: float,
        connect_timeout: int | None = None,
    ) -> None:
        self._dsn = dsn
        self._name = name
        self._prepare = prepare
        self._min_size = min_size
        self._max_size = max_size
        self._timeout_s = timeout_s
        self._connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._pool: Connections | None = None

    def get(self) -> Connections:
        """The open pool, after `prepare` on first use."""
        with self._lock:
            if self._pool is None:
                with psycopg.connect(
                    self._dsn, autocommit=True, connect_timeout=self._connect_timeout
                ) as conn:
                    self._prepare(conn)
                pool: Connections = ConnectionPool(
                    self._dsn,
                    connection_class=psycopg.Connection,
                    kwargs={"autocommit": True},
                    min_size=self._min_size,
                    max_size=self._max_size,
                    timeout=self._timeout_s,
                    check=ConnectionPool.check_connection,  # a restarted server: no stale connection
                    name=self._name,
                    open=False,
                )
                pool.open()
                self._pool = pool
            return self._pool

    def close(self) -> None:
        """Close the pool, if open."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
