"""A worker process for the budget pool tests: runs under one shared pool, or a holder to kill.

    python -m tests.pool_worker runs STORE CEILING_NUSD RUNS
    python -m tests.pool_worker hold STORE

STORE is where the pool is kept: a SQLite file (`SQLitePoolStore`) or a `postgresql://` DSN
(`PostgresPoolStore`), as `boundloop pools --store` takes it.

`runs`: waits for a line on its standard input (so every worker starts together), then runs
RUNS runs at once, each under the pool `shared` (`max_cost_usd` = CEILING_NUSD nanodollars), on
the real `AsyncAnthropic` over `tests/pool_api.py`'s fake API; at every request the fake reads
the pool's spend and live holds from the store's file or database (a connection of its own)
and records it if spent and held together are past the ceiling. Prints one line of JSON: each
run's stop reason and stop detail, the bill of each request (nanodollars), and the overdrafts
seen.

`hold`: one run under the pool `shared` (a $1 ceiling, a 60 s lease) whose model call never
returns: prints `IN_FLIGHT` once the request is sent (so its hold is in the store), and waits
to be killed.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread
import httpx2

from boundloop import AgentLoop, Budget, BudgetPool, Observers, SQLitePoolStore, tool
from boundloop.pools import PoolStore
from tests.fake_api import MODEL
from tests.pool_api import PoolAPI, worst_nusd

JSON = dict[str, Any]
IN_FLIGHT: Final = "IN_FLIGHT"
HANG_S: Final = 120.0
"""How long a worker waiting to be killed waits before it gives up (no orphans if a test dies)."""
_COMMITTED: Final = (
    "SELECT (SELECT COALESCE(SUM(spent_nusd), 0) FROM boundloop_pools WHERE pool = 'shared') + "
    "(SELECT COALESCE(SUM(nusd), 0) FROM boundloop_pool_holds WHERE pool = 'shared' AND expires_at > {})"
)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def is_postgres(store: str) -> bool:
    return store.startswith(("postgresql://", "postgres://"))


@contextlib.asynccontextmanager
async def opened(store: str, **options: Any) -> AsyncIterator[PoolStore]:
    """The pool store at `store` (a SQLite file or a PostgreSQL DSN), closed afterwards."""
    if is_postgres(store):
        from boundloop.pools import PostgresPoolStore

        kept: SQLitePoolStore | PostgresPoolStore = PostgresPoolStore(store, **options)
    else:
        kept = SQLitePoolStore(Path(store), **options)
    try:
        yield kept
    finally:
        await kept.aclose()


@contextlib.contextmanager
def committed(store: str) -> Iterator[Callable[[], int]]:
    """A reader, on a connection of its own: what the pool `shared` has spent and holds under
    live leases now, in nanodollars."""
    if is_postgres(store):
        import psycopg

        with psycopg.connect(store, autocommit=True) as conn:
            yield lambda: _sum(conn.execute(_COMMITTED.format("%s"), (time.time(),)).fetchone())
        return
    reader = sqlite3.connect(store, isolation_level=None)
    try:
        yield lambda: _sum(reader.execute(_COMMITTED.format("?"), (time.time(),)).fetchone())
    finally:
        reader.close()


def _sum(row: tuple[Any, ...] | None) -> int:
    assert row is not None  # a sum is one row
    return int(row[0])


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


async def runs(store: str, ceiling: int, count: int) -> JSON:
    overdrawn: list[int] = []
    options = {"max_size": 4} if is_postgres(store) else {"timeout_s": 30}
    with committed(store) as read:

        def check(body: JSON) -> None:
            del body
            seen = read()
            if seen > ceiling:
                overdrawn.append(seen)

        api = PoolAPI(check)
        async with opened(store, **options) as kept:
            loop = loop_for(api, BudgetPool("shared", max_cost_usd=ceiling / 1_000_000_000, store=kept))
            await anyio.to_thread.run_sync(sys.stdin.readline)  # the start line: every worker is ready
            reports: list[JSON] = []

            async def one(number: int) -> None:
                result = await loop.run("Look it up.", task_id=f"run-{number}")
                reports.append({"stop_reason": str(result.stop_reason), "detail": result.state.stop_detail})

            async with anyio.create_task_group() as group:
                for number in range(count):
                    group.start_soon(one, number)
    bills = [worst_nusd(body) for body in api.requests]
    assert bills == api.billed  # every request was answered and billed its worst case
    return {"runs": reports, "bills": bills, "overdrawn": overdrawn}


async def hold(store: str) -> None:
    api = PoolAPI()
    answer = api.handler

    async def hang(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/count_tokens"):
            return await answer(request)
        print(IN_FLIGHT, flush=True)
        await anyio.sleep(HANG_S)
        raise SystemExit("not killed")

    api.handler = hang  # type: ignore[method-assign]
    async with opened(store) as kept:
        await loop_for(api, BudgetPool("shared", max_cost_usd=1.0, store=kept, lease_s=60)).run("Look it up.")


def main(argv: list[str]) -> None:
    mode = argv[1]
    if mode == "runs":
        store, ceiling, count = argv[2:5]
        print(json.dumps(anyio.run(runs, store, int(ceiling), int(count))), flush=True)
    elif mode == "hold":
        anyio.run(hold, argv[2])
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
