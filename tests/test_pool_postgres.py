"""Budget pools on a real PostgreSQL, across processes: the guarantee, a holder killed, the server
unreachable.

Four OS processes run ten runs each, at once, against one `PostgresPoolStore` pool that covers
half of them, on the real `AsyncAnthropic` over the fake API (`tests/pool_pg_worker.py`,
`tests/pool_api.py`: every request billed exactly its worst case). Together they never spend
past the ceiling, no request is sent that the pool could not cover (at every request, what the
pool has spent and holds, read from the database, is within its ceiling), and the pool's spend
is the fake's bills to the nanodollar. Each test has a new database on the session's server.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from boundloop import BudgetPool, StopReason
from boundloop.pools import Claim, PostgresPoolStore, Shortfall
from tests.helpers import ROOT
from tests.pool_api import PoolAPI, worst_nusd
from tests.pool_worker import loop_for
from tests.postgres import free_port
from tests.test_pool_processes import PROCESSES, RUN_NUSD, RUNS

pytestmark = pytest.mark.asyncio_only  # the workers run on asyncio; the tests read their results


def worker(*args: str, stdin: int | None = None, new_session: bool = False) -> subprocess.Popen[str]:
    """`python -m tests.pool_pg_worker ARGS`, its output read as text."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.pool_pg_worker", *args],
        cwd=ROOT,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )


async def test_four_processes_never_spend_past_a_shared_postgres_pool(postgres_dsn: str) -> None:
    """40 runs in 4 processes, a PostgreSQL pool covering 20: no request found the pool
    overdrawn, its spend is exactly the fake's bills and within the ceiling, less than one call
    short of it, nothing is left held, and every run completed or stopped `cost_budget` naming
    the pool."""
    ceiling = RUN_NUSD * PROCESSES * RUNS // 2
    workers = [
        worker("runs", postgres_dsn, str(ceiling), str(RUNS), stdin=subprocess.PIPE) for _ in range(PROCESSES)
    ]
    for process in workers:  # all started: let them go
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    reports: list[dict[str, Any]] = []
    for process in workers:
        out, errors = process.communicate(timeout=180)
        assert process.returncode == 0, errors
        reports.append(json.loads(out))

    bills: list[int] = [bill for report in reports for bill in report["bills"]]
    runs: list[dict[str, str]] = [run for report in reports for run in report["runs"]]
    assert [report["overdrawn"] for report in reports] == [[]] * PROCESSES
    async with PostgresPoolStore(postgres_dsn) as store:
        usage = await store.usage("shared", "", 0.0)
        status = await BudgetPool("shared", max_cost_usd=ceiling / 1e9, store=store).status()
    assert usage.spent_nusd == sum(bills) <= ceiling
    assert (usage.reserved_nusd, usage.holds, status.reserved_usd) == (0, 0, 0.0)
    assert ceiling - usage.spent_nusd < worst_nusd({"messages": [{}, {}, {}], "max_tokens": 1})
    assert len(runs) == PROCESSES * RUNS
    assert sorted({run["stop_reason"] for run in runs}) == ["completed", "cost_budget"]
    # How many complete depends on the interleaving (40 first calls fit; then few second ones).
    assert sum(run["stop_reason"] == "completed" for run in runs) <= 20
    for run in runs:
        if run["stop_reason"] == "cost_budget":
            assert run["detail"].startswith("the budget pool 'shared': max_cost_usd=")


async def test_a_hold_of_a_killed_process_is_released_when_its_lease_ends(postgres_dsn: str) -> None:
    """A process holds part of a PostgreSQL pool for a call in flight and is killed with
    SIGKILL: its hold keeps counting until its 60 s lease has passed (no renewal comes), then
    no longer, and its room is granted again."""
    holder = worker("hold", postgres_dsn, new_session=True)
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.strip() == "IN_FLIGHT", line
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.communicate(timeout=30)
    assert holder.returncode == -signal.SIGKILL

    now = dt.datetime.now(dt.UTC)
    claim = Claim(input_tokens=0, output_tokens=1_000, output_usd=15e-6)
    async with PostgresPoolStore(postgres_dsn) as store:
        live = BudgetPool("shared", max_cost_usd=1.0, store=store, clock=lambda: now)
        assert (await live.status()).reserved_usd == pytest.approx(0.00156)  # the killed call's hold
        assert (await store.usage("shared", "", now.timestamp())).holds == 1
        full = BudgetPool("shared", max_cost_usd=0.00156, store=store, clock=lambda: now)
        assert isinstance(await full.reserve(claim), Shortfall)  # the killed hold still counts now
        after = now + dt.timedelta(seconds=61)
        later = BudgetPool("shared", max_cost_usd=0.00156, store=store, clock=lambda: after)
        assert (await later.status()).reserved_usd == 0.0
        granted = await later.reserve(claim)
        assert not isinstance(granted, Shortfall)
        assert granted.output_tokens == 104  # the killed call's room: $0.00156 at $15 a million


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


def test_the_pools_guide_names_these_tests() -> None:
    """docs/pools.md's PostgreSQL proofs name tests of this file that exist."""
    names = re.findall(r"tests/test_pool_postgres\.py::(test_\w+)", (ROOT / "docs" / "pools.md").read_text())
    assert len(names) == 2
    source = Path(__file__).read_text(encoding="utf-8")
    for name in names:
        assert f"async def {name}(" in source
