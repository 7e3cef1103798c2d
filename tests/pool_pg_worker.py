"""A worker process for the PostgreSQL budget pool tests: runs under one pool, or a holder to kill.

    python -m tests.pool_pg_worker runs DSN CEILING_NUSD RUNS
    python -m tests.pool_pg_worker hold DSN

As `tests/pool_worker.py` does for a SQLite pool, on a `PostgresPoolStore` at DSN. `runs`: waits
for a line on its standard input (every worker starts together), then runs RUNS runs at once
under the pool `shared` (`max_cost_usd` = CEILING_NUSD nanodollars) on the real `AsyncAnthropic`
over `tests/pool_api.py`'s fake API; at every request the fake reads the pool's spend and live
holds from the database (its own connection) and records it if they are past the ceiling.
Prints one line of JSON: each run's stop reason and detail, each request's bill (nanodollars),
the overdrafts seen. `hold`: one run (a $1 pool, a 60 s lease) whose model call never returns:
prints `IN_FLIGHT` once the request is sent, and waits to be killed.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import psycopg

from boundloop import BudgetPool
from boundloop.pools import PostgresPoolStore
from tests.pool_api import PoolAPI, worst_nusd
from tests.pool_worker import HANG_S, IN_FLIGHT, loop_for

JSON = dict[str, Any]


def committed(reader: psycopg.Connection[Any]) -> int:
    """What the pool `shared` has spent and holds under live leases now, in nanodollars."""
    row = reader.execute(
        "SELECT (SELECT coalesce(sum(spent_nusd), 0) FROM boundloop_pools WHERE pool = 'shared') + "
        "(SELECT coalesce(sum(nusd), 0) FROM boundloop_pool_holds WHERE pool = 'shared' AND expires_at > %s)",
        (time.time(),),
    ).fetchone()
    assert row is not None
    return int(row[0])


async def runs(dsn: str, ceiling: int, count: int) -> JSON:
    overdrawn: list[int] = []
    reader = psycopg.connect(dsn, autocommit=True)

    def check(body: JSON) -> None:
        del body
        seen = committed(reader)
        if seen > ceiling:
            overdrawn.append(seen)

    api = PoolAPI(check)
    async with PostgresPoolStore(dsn, max_size=4) as store:
        loop = loop_for(api, BudgetPool("shared", max_cost_usd=ceiling / 1_000_000_000, store=store))
        await anyio.to_thread.run_sync(sys.stdin.readline)  # the start line: every worker is ready
        reports: list[JSON] = []

        async def one(number: int) -> None:
            result = await loop.run("Look it up.", task_id=f"run-{number}")
            reports.append({"stop_reason": str(result.stop_reason), "detail": result.state.stop_detail})

        async with anyio.create_task_group() as group:
            for number in range(count):
                group.start_soon(one, number)
    reader.close()
    bills = [worst_nusd(body) for body in api.requests]
    assert bills == api.billed  # every request was answered and billed its worst case
    return {"runs": reports, "bills": bills, "overdrawn": overdrawn}


async def hold(dsn: str) -> None:
    api = PoolAPI()
    answer = api.handler

    async def hang(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/count_tokens"):
            return await answer(request)
        print(IN_FLIGHT, flush=True)
        await anyio.sleep(HANG_S)
        raise SystemExit("not killed")

    api.handler = hang  # type: ignore[method-assign]
    pool = BudgetPool("shared", max_cost_usd=1.0, store=PostgresPoolStore(dsn), lease_s=60)
    await loop_for(api, pool).run("Look it up.")


def main(argv: list[str]) -> None:
    mode = argv[1]
    if mode == "runs":
        dsn, ceiling, count = argv[2:5]
        print(json.dumps(anyio.run(runs, dsn, int(ceiling), int(count))), flush=True)
    elif mode == "hold":
        anyio.run(hold, argv[2])
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
