"""Budget pools across processes: the guarantee on a SQLite pool, and a holder killed.

Four OS processes run ten runs each, at once, against one SQLite pool that covers half of
them, on the real `AsyncAnthropic` over the fake API (`tests/pool_worker.py`,
`tests/pool_api.py`: every request billed exactly its worst case). Together they never spend
past the ceiling, no request is sent that the pool could not cover (at every request, what the
pool has spent and holds is within its ceiling), and the pool's spend is the fake's bills to the
nanodollar.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from boundloop import BudgetPool, SQLitePoolStore
from boundloop.pools import Claim, Shortfall
from tests.helpers import ROOT
from tests.pool_api import worst_nusd

RUN_NUSD = worst_nusd({"messages": [{}], "max_tokens": 100}) + worst_nusd(
    {"messages": [{}, {}, {}], "max_tokens": 100}
)
"""A run's two calls at their worst case, which the fake bills: $0.00324."""
PROCESSES = 4
RUNS = 10


def worker(*args: str, stdin: int | None = None, new_session: bool = False) -> subprocess.Popen[str]:
    """`python -m tests.pool_worker ARGS`, its output read as text."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.pool_worker", *args],
        cwd=ROOT,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )


@pytest.mark.asyncio_only  # the workers run on asyncio; the test only reads their results
async def test_four_processes_never_spend_past_a_shared_sqlite_pool(tmp_path: Path) -> None:
    """40 runs, a pool covering 20: the pool ends within its ceiling and nearly full, its spend
    is exactly what the fake billed, no request ever found the pool overdrawn, and every run
    either completed or stopped `cost_budget` naming the pool."""
    db = tmp_path / "pools.db"
    ceiling = RUN_NUSD * PROCESSES * RUNS // 2
    workers = [
        worker("runs", str(db), str(ceiling), str(RUNS), stdin=subprocess.PIPE) for _ in range(PROCESSES)
    ]
    for process in workers:  # all started: let them go
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    reports: list[dict[str, Any]] = []
    for process in workers:
        out, errors = process.communicate(timeout=120)
        assert process.returncode == 0, errors
        reports.append(json.loads(out))

    bills: list[int] = [bill for report in reports for bill in report["bills"]]
    runs: list[dict[str, str]] = [run for report in reports for run in report["runs"]]
    assert [report["overdrawn"] for report in reports] == [[]] * PROCESSES
    status = await BudgetPool("shared", max_cost_usd=ceiling / 1e9, store=SQLitePoolStore(db)).status()
    usage = await SQLitePoolStore(db).usage("shared", "", 0.0)
    assert usage.spent_nusd == sum(bills) <= ceiling
    assert (usage.reserved_nusd, status.reserved_usd) == (0, 0.0)
    assert ceiling - usage.spent_nusd < worst_nusd({"messages": [{}, {}, {}], "max_tokens": 1})
    assert len(runs) == PROCESSES * RUNS
    stops = sorted({run["stop_reason"] for run in runs})
    assert stops == ["completed", "cost_budget"]
    completed = [run for run in runs if run["stop_reason"] == "completed"]
    # At most the 20 runs the pool covers complete; how many do depends on the interleaving (a run
    # stopped at the ceiling after its first call spent part of the pool), not on the guarantee.
    assert 1 <= len(completed) <= 20
    for run in runs:
        if run["stop_reason"] == "cost_budget":
            assert run["detail"].startswith("the budget pool 'shared': max_cost_usd=")


@pytest.mark.asyncio_only
async def test_a_hold_of_a_killed_process_is_released_when_its_lease_ends(tmp_path: Path) -> None:
    """A process holds most of the pool for a call in flight and is killed with SIGKILL: its
    hold keeps counting until its 60 s lease has passed (no renewal comes), then no longer."""
    db = tmp_path / "pools.db"
    holder = worker("hold", str(db), new_session=True)
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.strip() == "IN_FLIGHT", line
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.communicate(timeout=30)
    assert holder.returncode == -signal.SIGKILL

    store = SQLitePoolStore(db)
    now = dt.datetime.now(dt.UTC)
    claim = Claim(input_tokens=0, output_tokens=60_000, output_usd=15e-6)  # $0.90 of the $1
    live = BudgetPool("shared", max_cost_usd=1.0, store=store, clock=lambda: now)
    assert (await live.status()).reserved_usd == pytest.approx(0.00156)  # the killed call's hold
    assert (await store.usage("shared", "", now.timestamp())).holds == 1
    later = BudgetPool("shared", max_cost_usd=1.0, store=store, clock=lambda: now + dt.timedelta(seconds=61))
    assert (await later.status()).reserved_usd == 0.0
    granted = await later.reserve(claim)
    assert not isinstance(granted, Shortfall)
    assert granted.output_tokens == 60_000
    tight = BudgetPool("shared", max_cost_usd=0.9, store=store, clock=lambda: now)
    assert isinstance(await tight.reserve(claim), Shortfall)  # the killed hold still counts now
