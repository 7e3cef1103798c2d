"""The inspector's budget pools page (`/pools`): the pools of the pool store it was given, with
what each spent and holds, and the runs a pool stopped, linked (from the checkpoint store). Runs
on the real `AsyncAnthropic` over the fake API (`tests/pool_api.py`); the app over httpx's ASGI
transport; `boundloop serve --pools` with a store that is not there is an error in one line.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from boundloop import AgentLoop, Budget, BudgetPool, Observers, SQLitePoolStore, SQLiteStore, StopReason
from boundloop.cli import main
from boundloop.pools import PoolStore
from boundloop.web import app as inspector_app
from tests.fake_api import MODEL
from tests.pool_api import PoolAPI, worst_nusd
from tests.pool_worker import lookup

FIRST_CALL = worst_nusd({"messages": [{}], "max_tokens": 100})


@contextlib.asynccontextmanager
async def client_of(store: SQLiteStore, pools: PoolStore | None) -> AsyncIterator[httpx.AsyncClient]:
    app = inspector_app(store, pools=pools)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client,
    ):
        yield client


def cells(page: str, table: str) -> list[list[str]]:
    """The text of each cell of each body row of the table whose id is `table`."""
    found = re.search(rf'<table id="{table}">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert found is not None, page
    return [
        [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", found.group(1), re.S)
    ]


async def stopped_and_completed(tmp_path: Path) -> tuple[SQLiteStore, SQLitePoolStore]:
    """A tenant pool covering one call stops one run; a team pool lets another complete."""
    store = SQLiteStore(tmp_path / "runs.db")
    pools = SQLitePoolStore(tmp_path / "pools.db")
    api = PoolAPI()
    loop = AgentLoop(
        api.client(),
        model=MODEL,
        max_tokens=100,
        tools=[lookup],
        budget=Budget(max_steps=4, count_tokens=True),
        observers=Observers(metrics=None, tracing=None),
        store=store,
    )
    tight = BudgetPool("tenant-<b>", max_cost_usd=(FIRST_CALL + 1) / 1e9, store=pools)
    wide = BudgetPool("team", max_cost_usd=1.0, period="month", store=pools)
    stopped = await loop.run("Look it up.", task_id="t-stopped", pools=[tight])
    assert stopped.stop_reason is StopReason.COST_BUDGET
    assert (await loop.run("Look it up.", task_id="t-done", pools=[wide])).stop_reason is StopReason.COMPLETED
    return store, pools


async def test_the_pools_page_lists_each_pool_and_the_runs_a_pool_stopped(tmp_path: Path) -> None:
    """Each pool with its period, spend, holds, ceiling and how many listed runs it stopped; the
    run it stopped linked, with its detail and that it is resumable; names escaped."""
    store, pools = await stopped_and_completed(tmp_path)
    async with client_of(store, pools) as client:
        response = await client.get("/pools")
    assert response.status_code == 200
    page = response.text
    assert "tenant-&lt;b&gt;" in page
    assert "<b>" not in page.replace("<b>boundloop inspector</b>", "")
    rows = cells(page, "pools")
    assert [row[0] for row in rows] == ["team", "tenant-&lt;b&gt;"]
    assert rows[1][1:] == ["-", "$0.0016 (120 tokens)", "$0.0000 in 0 calls", "$0.0016", "1"]
    assert rows[0][5] == "0"
    stopped = cells(page, "stopped-by-pools")
    assert len(stopped) == 1
    pool, task, reason, detail, _, resumable = stopped[0]
    assert (pool, task, reason, resumable) == ("tenant-&lt;b&gt;", "t-stopped", "cost_budget", "yes")
    assert detail.startswith("the budget pool &#x27;tenant-&lt;b&gt;&#x27;: max_cost_usd=")
    assert 'href="/runs/t-stopped"' in page


async def test_without_a_pool_store_the_page_still_lists_the_runs_a_pool_stopped(tmp_path: Path) -> None:
    """No pool store given: the page says so and lists the stopped runs; every page links to it."""
    store, _ = await stopped_and_completed(tmp_path)
    async with client_of(store, None) as client:
        page = (await client.get("/pools")).text
        runs = (await client.get("/")).text
    assert 'id="no-pool-store"' in page
    assert [row[1] for row in cells(page, "stopped-by-pools")] == ["t-stopped"]
    assert '<a href="/pools">Pools</a>' in runs


async def test_a_pool_store_that_cannot_be_read_is_shown_not_a_500(tmp_path: Path) -> None:
    """A pool file that is no database: the page shows why in one line and still lists the runs."""
    store, _ = await stopped_and_completed(tmp_path)
    broken = tmp_path / "broken.db"
    broken.write_text("not a database", encoding="utf-8")
    async with client_of(store, SQLitePoolStore(broken)) as client:
        response = await client.get("/pools")
    assert response.status_code == 200
    assert (
        '<p class="error" id="pool-store-error">The pool store cannot be read: file is not a database</p>'
        in (response.text)
    )
    assert [row[1] for row in cells(response.text, "stopped-by-pools")] == ["t-stopped"]


def test_serve_with_a_missing_pool_store_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`boundloop serve --pools FILE` with no such file: exit 2, one line, before serving."""
    runs = tmp_path / "runs.db"
    runs.touch()
    assert main(["serve", "--store", str(runs), "--pools", str(tmp_path / "nope.db")]) == 2
    assert capsys.readouterr().err == (
        f"boundloop: error: --pools {tmp_path / 'nope.db'}: no such file "
        "(a pool's store is made by SQLitePoolStore(...))\n"
    )
