"""A worker process for the budget pool tests: runs under one SQLite pool, or a holder to kill.

    python -m tests.pool_worker runs DB CEILING_NUSD RUNS
    python -m tests.pool_worker hold DB

`runs`: waits for a line on its standard input (so every worker starts together), then runs
RUNS runs at once, each under the pool `shared` (`max_cost_usd` = CEILING_NUSD nanodollars) in the
SQLite file DB, on the real `AsyncAnthropic` over `tests/pool_api.py`'s fake API; at every
request the fake reads the pool's row and live holds from DB and records it if spent and held
together are past the ceiling. Prints one line of JSON: each run's stop reason and stop
detail, the bill of each request (nanodollars), and the overdrafts seen.

`hold`: one run under the pool `shared` (a $1 ceiling, a 60 s lease) whose model call never
returns: prints `IN_FLIGHT` once the request is sent (so its hold is in DB), and waits to be
killed.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread
import httpx2

from boundloop import AgentLoop, Budget, BudgetPool, Observers, SQLitePoolStore, tool
from tests.fake_api import MODEL
from tests.pool_api import PoolAPI, worst_nusd

JSON = dict[str, Any]
IN_FLIGHT: Final = "IN_FLIGHT"
HANG_S: Final = 120.0
"""How long a worker waiting to be killed waits before it gives up (no orphans if a test dies)."""


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def committed(db: Path) -> int:
    """What the pool `shared` has spent and holds under live leases now, in nanodollars."""
    with sqlite3.connect(db) as read:
        spent = read.execute(
            "SELECT COALESCE(SUM(spent_nusd), 0) FROM boundloop_pools WHERE pool = 'shared'"
        ).fetchone()
        held = read.execute(
            "SELECT COALESCE(SUM(nusd), 0) FROM boundloop_pool_holds "
            "WHERE pool = 'shared' AND expires_at > ?",
            (time.time(),),
        ).fetchone()
    return int(spent[0]) + int(held[0])


def loop_for(api: PoolAPI, pool: BudgetPool) -> AgentLoop:
    return AgentLoop(
        api.client(),
        model=MODEL,
        max_tokens=100,
        tools=[lookup],
        budget=Budget(max_steps=4, count_tokens=True),
        observers=Observers(metrics=None, tracing=None),
        pools=[pool],
    )


async def runs(db: Path, ceiling: int, count: int) -> JSON:
    overdrawn: list[int] = []

    def check(body: JSON) -> None:
        del body
        seen = committed(db)
        if seen > ceiling:
            overdrawn.append(seen)

    api = PoolAPI(check)
    pool = BudgetPool("shared", max_cost_usd=ceiling / 1_000_000_000, store=SQLitePoolStore(db, timeout_s=30))
    loop = loop_for(api, pool)
    await anyio.to_thread.run_sync(sys.stdin.readline)  # the start line: every worker is ready
    reports: list[JSON] = []

    async def one(number: int) -> None:
        result = await loop.run("Look it up.", task_id=f"run-{number}")
        reports.append(
            {
                "stop_reason": str(result.stop_reason),
                "detail": result.state.stop_detail,
                "cost_usd": result.state.usage.cost_usd,
            }
        )

    async with anyio.create_task_group() as group:
        for number in range(count):
            group.start_soon(one, number)
    bills = [worst_nusd(body) for body in api.requests]
    assert bills == api.billed  # every request was answered and billed its worst case
    return {"runs": reports, "bills": bills, "overdrawn": overdrawn}


async def hold(db: Path) -> None:
    api = PoolAPI()
    answer = api.handler

    async def hang(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/count_tokens"):
            return await answer(request)
        print(IN_FLIGHT, flush=True)
        await anyio.sleep(HANG_S)
        raise SystemExit("not killed")

    api.handler = hang  # type: ignore[method-assign]
    pool = BudgetPool("shared", max_cost_usd=1.0, store=SQLitePoolStore(db), lease_s=60)
    await loop_for(api, pool).run("Look it up.")


def main(argv: list[str]) -> None:
    mode = argv[1]
    if mode == "runs":
        db, ceiling, count = argv[2:5]
        print(json.dumps(anyio.run(runs, Path(db), int(ceiling), int(count))), flush=True)
    elif mode == "hold":
        anyio.run(hold, Path(argv[2]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
