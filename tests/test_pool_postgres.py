"""Budget pools on a real PostgreSQL: the server unreachable, the tables made once. The
guarantee across processes and a holder killed are `tests/test_pool_processes.py`'s, on SQLite
and PostgreSQL alike. Each test has a new database on the session's server.
"""

from __future__ import annotations

import psycopg
import pytest

from boundloop import BudgetPool, StopReason
from boundloop.pools import Claim, PostgresPoolStore, Shortfall
from tests.pool_api import PoolAPI
from tests.pool_worker import loop_for
from tests.postgres import free_port

pytestmark = pytest.mark.asyncio_only  # a database each; the store on trio: tests/test_pool_conformance.py


async def test_a_postgres_pool_that_cannot_be_reached_fails_the_call_closed(postgres_dsn: str) -> None:
    """A pool whose server refuses connections, and one whose database is gone: no request is
    sent, and the run stops `failed` with one sentence naming the pool and the server."""
    port = free_port()
    down = PostgresPoolStore(f"postgresql://postgres:secret@127.0.0.1:{port}/pools", timeout_s=1)
    api = PoolAPI()
    pool = BudgetPool("tenant-a", max_cost_usd=1.0, store=down)
    result = await loop_for(api, pool).run("Look it up.")
    assert (result.stop_reason, api.requests) == (StopReason.FAILED, [])
    detail = result.state.stop_detail or ""
    assert detail.startswith(
        f"the budget pool 'tenant-a' could not be reached (ConnectionError: the PostgreSQL pool store "
        f"at 127.0.0.1:{port}/pools cannot be reached: connection failed:"
    )
    assert detail.endswith("so the model call was not sent")
    assert "\n" not in detail
    assert "secret" not in detail

    gone = postgres_dsn.rsplit("/", 1)[0] + "/no_such_database"
    async with PostgresPoolStore(gone, timeout_s=1) as missing:
        result = await loop_for(api, BudgetPool("tenant-b", max_cost_usd=1.0, store=missing)).run("Go.")
    assert (result.stop_reason, api.requests) == (StopReason.FAILED, [])
    assert 'database "no_such_database" does not exist' in (result.state.stop_detail or "")


async def test_the_tables_are_made_once_and_a_made_database_is_only_read(postgres_dsn: str) -> None:
    """Two stores starting on one database create the tables once; a role that may only read and
    write them (no CREATE) uses a database that has them."""
    async with PostgresPoolStore(postgres_dsn) as first, PostgresPoolStore(postgres_dsn) as second:
        assert await first.list(0.0) == await second.list(0.0) == []
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute("CREATE ROLE pooler LOGIN")
        admin.execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON boundloop_pools, boundloop_pool_holds TO pooler"
        )
        admin.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    as_pooler = postgres_dsn.replace("postgres@", "pooler@", 1)
    async with PostgresPoolStore(as_pooler) as store:
        pool = BudgetPool("tenant-a", max_cost_usd=1.0, store=store)
        granted = await pool.reserve(Claim(input_tokens=10, output_tokens=100, output_usd=15e-6))
        assert not isinstance(granted, Shortfall)
        assert (await pool.status()).reserved_usd == pytest.approx(0.0015)
