"""Budget pools across processes, on a SQLite file and on a real PostgreSQL: the guarantee, and
a holder killed.

Four OS processes run ten runs each, at once, against one pool that covers half of them, on the
real `AsyncAnthropic` over the fake API (`tests/pool_worker.py`, `tests/pool_api.py`: every
request billed exactly its worst case). Together they never spend past the ceiling, no request
is sent that the pool could not cover (at every request, what the pool has spent and holds,
read from the file or the database, is within its ceiling), and the pool's spend is the fake's
bills to the nanodollar. Each test is parametrized by store (PostgreSQL: a new database on the
session's server; missing PostgreSQL skips locally and fails in CI).
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

from boundloop import BudgetPool
from boundloop.pools import Claim, Shortfall
from tests.helpers import ROOT
from tests.pool_api import worst_nusd
from tests.pool_worker import IN_FLIGHT, opened

pytestmark = pytest.mark.asyncio_only  # the workers run on asyncio; the tests read their results

RUN_NUSD = worst_nusd({"messages": [{}], "max_tokens": 100}) + worst_nusd(
    {"messages": [{}, {}, {}], "max_tokens": 100}
)
"""A run's two calls at their worst case, which the fake bills: $0.00324."""
PROCESSES = 4
RUNS = 10


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the workers' pool is: a SQLite file, or a new PostgreSQL database's DSN."""
    if request.param == "sqlite":
        return str(tmp_path / "pools.db")
    return str(request.getfixturevalue("postgres_dsn"))


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


def run_workers(store: str, ceiling: int) -> list[dict[str, Any]]:
    """`PROCESSES` workers of `RUNS` runs each under the pool at `store`, started together: their
    reports."""
    workers = [
        worker("runs", store, str(ceiling), str(RUNS), stdin=subprocess.PIPE) for _ in range(PROCESSES)
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
    return reports


async def test_four_processes_never_spend_past_a_shared_pool(store: str) -> None:
    """40 runs in 4 processes, a pool covering 20: no request found the pool overdrawn, its
    spend is exactly the fake's bills and within the ceiling, less than one call short of it,
    nothing is left held, and every run completed or stopped `cost_budget` naming the pool."""
    ceiling = RUN_NUSD * PROCESSES * RUNS // 2
    reports = run_workers(store, ceiling)
    bills: list[int] = [bill for report in reports for bill in report["bills"]]
    runs: list[dict[str, str]] = [run for report in reports for run in report["runs"]]
    assert [report["overdrawn"] for report in reports] == [[]] * PROCESSES
    async with opened(store) as kept:
        usage = await kept.usage("shared", "", 0.0)
        status = await BudgetPool("shared", max_cost_usd=ceiling / 1e9, store=kept).status()
    assert usage.spent_nusd == sum(bills) <= ceiling
    assert (usage.reserved_nusd, usage.holds, status.reserved_usd) == (0, 0, 0.0)
    assert ceiling - usage.spent_nusd < worst_nusd({"messages": [{}, {}, {}], "max_tokens": 1})
    assert len(runs) == PROCESSES * RUNS
    unexpected = [run for run in runs if run["stop_reason"] not in ("completed", "cost_budget")]
    assert sorted({run["stop_reason"] for run in runs}) == ["completed", "cost_budget"], unexpected
    # At most the 20 runs the pool covers complete; how many do depends on the interleaving (a run
    # stopped at the ceiling after its first call spent part of the pool), not on the guarantee.
    assert sum(run["stop_reason"] == "completed" for run in runs) <= 20
    for run in runs:
        if run["stop_reason"] == "cost_budget":
            assert run["detail"].startswith("the budget pool 'shared': max_cost_usd=")


async def test_a_hold_of_a_killed_process_is_released_when_its_lease_ends(store: str) -> None:
    """A process holds part of the pool for a call in flight and is killed with SIGKILL: its
    hold keeps counting until its 60 s lease has passed (no renewal comes), then no longer, and
    its room is granted again."""
    holder = worker("hold", store, new_session=True)
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.strip() == IN_FLIGHT, line
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.communicate(timeout=30)
    assert holder.returncode == -signal.SIGKILL

    now = dt.datetime.now(dt.UTC)
    claim = Claim(input_tokens=0, output_tokens=1_000, output_usd=15e-6)
    async with opened(store) as kept:
        live = BudgetPool("shared", max_cost_usd=1.0, store=kept, clock=lambda: now)
        assert (await live.status()).reserved_usd == pytest.approx(0.00156)  # the killed call's hold
        assert (await kept.usage("shared", "", now.timestamp())).holds == 1
        full = BudgetPool("shared", max_cost_usd=0.00156, store=kept, clock=lambda: now)
        assert isinstance(await full.reserve(claim), Shortfall)  # the killed hold still counts now
        after = now + dt.timedelta(seconds=61)
        later = BudgetPool("shared", max_cost_usd=0.00156, store=kept, clock=lambda: after)
        assert (await later.status()).reserved_usd == 0.0
        granted = await later.reserve(claim)
        assert not isinstance(granted, Shortfall)
        assert granted.output_tokens == 104  # the killed call's room: $0.00156 at $15 a million
