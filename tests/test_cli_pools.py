"""`boundloop pools --store S`: the budget pools of a SQLite file or a PostgreSQL database, in a
real process (`python -m boundloop`), and its errors in one line each."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import anyio
import pytest

from boundloop import BudgetPool, SQLitePoolStore
from boundloop.pools import Claim, Grant, PoolStore, PostgresPoolStore
from tests.helpers import boundloop_cli
from tests.postgres import free_port

NOW = dt.datetime(2025, 1, 15, 10, 30, tzinfo=dt.UTC)
CLAIM = Claim(input_tokens=100, output_tokens=1_000, input_usd=3e-6, output_usd=15e-6)
"""$0.0003 of input and up to $0.015 of output: $0.0153 held."""


async def seed(store: PoolStore) -> None:
    """A daily tenant pool that spent $0.004 and holds one call, and a token pool of no period."""
    tenant = BudgetPool("tenant-a", max_cost_usd=5.0, period="day", store=store, clock=lambda: NOW)
    spent = await tenant.reserve(CLAIM)
    await tenant.reserve(CLAIM)
    burn = BudgetPool("burn", max_total_tokens=100_000, store=store, clock=lambda: NOW)
    await burn.reserve(CLAIM)
    assert isinstance(spent, Grant)
    await tenant.settle(spent, cost_usd=0.004, tokens=600)


@pytest.fixture(params=["sqlite", "postgres"])
def seeded(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The `--store` argument of a pool store holding `seed`'s pools."""
    if request.param == "sqlite":
        path = str(tmp_path / "pools.db")
        anyio.run(seed, SQLitePoolStore(path))
        return path
    dsn: str = request.getfixturevalue("postgres_dsn")

    async def seed_postgres() -> None:
        async with PostgresPoolStore(dsn) as store:
            await seed(store)

    anyio.run(seed_postgres)
    return dsn


def test_pools_lists_each_pool_with_its_period_spend_holds_and_ceiling(seeded: str) -> None:
    """One line a pool, by name: its period (the latest), spent, reserved by calls not settled
    (their leases run a minute from the pool's clock, long past: none live now), the ceiling."""
    done = boundloop_cli("pools", "--store", seeded)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "POOL      PERIOD      SPENT                 RESERVED            CEILING",
        "burn      -           $0.0000 (0 tokens)    $0.0000 (0 tokens)  100,000 tokens",
        "tenant-a  2025-01-15  $0.0040 (600 tokens)  $0.0000 (0 tokens)  $5.0000",
    ]


def test_pools_json_gives_dollars_tokens_and_ceilings(seeded: str) -> None:
    """`--json`: each pool's period in dollars and tokens, and the ceilings (None: not limited)."""
    done = boundloop_cli("pools", "--store", seeded, "--json")
    assert done.returncode == 0, done.stderr
    pools = json.loads(done.stdout)["pools"]
    assert [pool["pool"] for pool in pools] == ["burn", "tenant-a"]
    assert pools[1] == {
        "pool": "tenant-a",
        "period": "2025-01-15",
        "spent_usd": 0.004,
        "spent_tokens": 600,
        "reserved_usd": 0.0,
        "reserved_tokens": 0,
        "holds": 0,
        "max_cost_usd": 5.0,
        "max_total_tokens": None,
    }
    assert (pools[0]["max_cost_usd"], pools[0]["max_total_tokens"], pools[0]["period"]) == (None, 100_000, "")


async def test_pools_shows_the_holds_of_calls_running_now(tmp_path: Path) -> None:
    """A call holding the pool now is counted as reserved, in so many calls."""
    path = tmp_path / "pools.db"
    pool = BudgetPool("tenant-a", max_cost_usd=1.0, store=SQLitePoolStore(path))
    await pool.reserve(CLAIM)
    await pool.reserve(CLAIM)
    done = await anyio.to_thread.run_sync(boundloop_cli, "pools", "--store", str(path))
    assert (
        done.stdout.splitlines()[1]
        == "tenant-a  -       $0.0000 (0 tokens)  $0.0306 (2,200 tokens) in 2 calls  $1.0000"
    )


def test_pools_errors_in_one_line(tmp_path: Path) -> None:
    """No such file, a directory, a file that is no database, a server that refuses: exit 2 and
    one line naming what is wrong (a DSN's password never shown)."""
    garbage = tmp_path / "garbage.db"
    garbage.write_text("not a database", encoding="utf-8")
    port = free_port()
    cases = {
        str(tmp_path / "missing.db"): f"--store {tmp_path / 'missing.db'}: no such file",
        str(tmp_path): f"--store {tmp_path} is a directory, not a SQLite file",
        str(garbage): f"cannot read the budget pools in {garbage}: file is not a database",
        f"postgresql://me:secret@127.0.0.1:{port}/pools": (
            f"the PostgreSQL pool store at 127.0.0.1:{port}/pools cannot be reached: connection failed:"
        ),
    }
    for store, expected in cases.items():
        done = boundloop_cli("pools", "--store", store)
        assert done.returncode == 2, (store, done.stdout)
        assert done.stderr.startswith(f"boundloop: error: {expected}"), done.stderr
        assert done.stderr.count("\n") == 1
        assert "secret" not in done.stderr


def test_pools_on_a_file_without_pools_says_so_and_writes_nothing(tmp_path: Path) -> None:
    """A SQLite file no pool has reserved in (a checkpoint store's, say): `no budget pool`, and
    the file is left as it was (the listing never creates the pool tables)."""
    path = tmp_path / "runs.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE checkpoints (task_id TEXT)")
    before = path.read_bytes()
    done = boundloop_cli("pools", "--store", str(path))
    assert (done.returncode, done.stdout) == (
        0,
        f"no budget pool in {path} (a pool's first reservation writes it there)\n",
    )
    assert path.read_bytes() == before
