"""`python -m benchmarks.pools [--quick] [--dsn DSN]`: what a budget pool's reservation costs.

Workload 12 of the suite (`python -m benchmarks`), runnable on its own.

- *Per call, on each store*: a run of 50 turns x 1 instant tool on a zero-latency scripted
  model (`FastClient`, pre-parsed `Message`s), `metrics=None`, with one `BudgetPool` on
  `MemoryPoolStore`, `SQLitePoolStore` (a file in a temporary directory) and `PostgresPoolStore`
  (a throwaway server with durable commits, `fsync=on`, as `benchmarks/scaling.py` starts, or
  `--dsn`), against the same run without pools, in the same process, interleaved. Every model
  call reserves before it is sent and settles after: reported, the wall µs per model call,
  the ratio to the run without pools, and the difference (the reservation's cost per call).
  Wall, not CPU: the SQLite and PostgreSQL statements run in worker threads and the server.
- *1,000 concurrent runs sharing one PostgreSQL pool*: 1,000 runs of 2 calls each (a tool call,
  then the answer) started at once in one task group of one process, all under one pool on
  `PostgresPoolStore(max_size=10)`, against the same 1,000 runs without a pool: runs and model
  calls per second, and the ratio. The pool's ceiling covers them all; the pool is checked
  after: spent equals the calls' bill, nothing held.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._fixtures import FastClient, KeyedClient, instant, script, script_for_run, tools_of
from benchmarks._harness import Timing, compare, settle
from benchmarks.suite import Report, run_alone
from boundloop import AgentLoop, Budget, BudgetPool, MemoryPoolStore, Observers, SQLitePoolStore, StopReason
from boundloop.pools import PoolStore

TURNS: Final = 50
REPEAT: Final = 15
QUICK_REPEAT: Final = 5
CONCURRENT: Final = 1_000
NONE: Final = "no pool"
MODEL: Final = "claude-sonnet-4-6"


def loop_of(client: Any, pool: BudgetPool | None, steps: int) -> AgentLoop:
    return AgentLoop(
        client,
        model=MODEL,
        tools=tools_of(instant, 1),
        budget=Budget(max_steps=steps),
        max_tokens=1024,
        observers=Observers(metrics=None, tracing=None),
        pools=[] if pool is None else [pool],
    )


@contextlib.asynccontextmanager
async def postgres(dsn: str | None) -> AsyncIterator[str | None]:
    """A database: `dsn` when given, else one on a throwaway server; None without PostgreSQL."""
    if dsn is not None:
        yield dsn
        return
    from tests.postgres import PostgresServer, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        yield None
        return
    server = PostgresServer(bin_dir, fsync=True)
    await anyio.to_thread.run_sync(server.start)
    try:
        yield await anyio.to_thread.run_sync(server.create_database, "pools")
    finally:
        await anyio.to_thread.run_sync(server.stop)


async def per_call(stores: dict[str, PoolStore], repeat: int) -> dict[str, Timing]:
    """One run of `TURNS` turns with a pool on each store, and without: wall µs per model call."""
    responses = script(TURNS, 1)
    variants: dict[str, Callable[[], Awaitable[None]]] = {}
    for name, store in {NONE: None, **stores}.items():
        client = FastClient(responses)
        pool = None if store is None else BudgetPool(f"bench-{len(variants)}", max_cost_usd=1e9, store=store)
        loop = loop_of(client, pool, TURNS + 2)

        async def run(client: FastClient = client, loop: AgentLoop = loop) -> None:
            client.reset()
            result = await loop.run("go")
            assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail

        variants[name] = run
    settle()
    return await compare(variants, repeat=repeat, factor=1e6 / (TURNS + 1))


async def concurrent(store: PoolStore | None, runs: int) -> tuple[float, BudgetPool | None]:
    """`runs` runs of 2 calls at once under one pool on `store` (or none): seconds, the pool."""
    template = script(1, 1)
    scripts = {f"run {number}": script_for_run(template, number) for number in range(runs)}
    pool = None if store is None else BudgetPool("shared", max_cost_usd=1e6, store=store)
    loop = loop_of(KeyedClient(scripts), pool, 3)

    async def one(goal: str) -> None:
        result = await loop.run(goal)
        assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail

    began = time.perf_counter()
    async with anyio.create_task_group() as group:
        for goal in scripts:
            group.start_soon(one, goal)
    return time.perf_counter() - began, pool


async def measure(dsn: str | None, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        stores: dict[str, PoolStore] = {
            "MemoryPoolStore": MemoryPoolStore(),
            "SQLitePoolStore": SQLitePoolStore(Path(directory) / "pools.db"),
        }
        async with postgres(dsn) as database:
            if database is None:
                print("PostgreSQL not found (initdb, pg_ctl): its rows are left out", file=sys.stderr)
                return {"per_call": await per_call(stores, repeat), "concurrent": None}
            from boundloop.pools import PostgresPoolStore

            async with PostgresPoolStore(database) as pg, PostgresPoolStore(database, max_size=10) as shared:
                stores["PostgresPoolStore"] = pg
                timings = await per_call(stores, repeat)
                without, _ = await concurrent(None, CONCURRENT)
                with_pool, pool = await concurrent(shared, CONCURRENT)
                assert pool is not None
                status = await pool.status()
                assert status.reserved_usd == 0.0
                return {
                    "per_call": timings,
                    "concurrent": (without, with_pool, status.spent_usd),
                }


INTRO: Final = (
    f"A run of {TURNS} turns x 1 instant tool on a zero-latency scripted model, `metrics=None`, "
    "with one budget pool on each store and without, interleaved, wall µs per model call (median "
    "[min-max]); every call reserves before it is sent and settles after. PostgreSQL: a local "
    "throwaway server with durable commits. Then 1,000 runs of 2 calls at once in one process, "
    "sharing one PostgreSQL pool (10 connections), against the same runs without a pool."
)


async def workload(config: object, report: Report) -> None:
    """The suite's workload 12: the table."""
    dsn = sys.argv[sys.argv.index("--dsn") + 1] if "--dsn" in sys.argv else None
    figures = await measure(dsn, QUICK_REPEAT if "--quick" in sys.argv else REPEAT)
    timings: dict[str, Timing] = figures["per_call"]
    base = timings[NONE].wall.median
    rows = [
        [name, timing.wall.show(), f"{timing.wall.median / base:.2f}", f"{timing.wall.median - base:+.1f}"]
        for name, timing in timings.items()
    ]
    if figures["concurrent"] is not None:
        without, with_pool, spent = figures["concurrent"]
        calls = 2 * CONCURRENT
        rows.append(
            [
                f"{CONCURRENT:,} concurrent runs, no pool",
                f"{CONCURRENT / without:,.0f} runs/s ({calls / without:,.0f} calls/s)",
                "1.00",
                "",
            ]
        )
        rows.append(
            [
                f"{CONCURRENT:,} concurrent runs, one PostgreSQL pool",
                f"{CONCURRENT / with_pool:,.0f} runs/s ({calls / with_pool:,.0f} calls/s)",
                f"{with_pool / without:.2f} (time)",
                f"{(with_pool - without) / calls * 1e6:+.0f} µs per call; spent ${spent:.4f}",
            ]
        )
    report.section(
        "12. Budget pools: the reservation's cost per call on each store",
        INTRO,
        ["variant", "wall µs per call (or throughput)", "ratio to no pool", "difference"],
        rows,
    )


if __name__ == "__main__":
    run_alone(workload)
