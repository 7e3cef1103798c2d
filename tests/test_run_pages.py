"""Pages of stored runs (`boundloop.checkpoint.paging`): newest first, every run once, filtered,
and on SQLite and PostgreSQL one query on an index, whatever the number of runs."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import pytest

from boundloop import CheckpointStore, MemoryStore, SQLiteStore, StoredRun
from boundloop.checkpoint import _pg_pages
from boundloop.checkpoint._sqlite_pages import page_query
from boundloop.checkpoint.paging import PagingStore, RunPage, decode_cursor, encode_cursor, page_runs
from boundloop.checkpoint.signed import SignedStore
from boundloop.errors import ConfigurationError

if TYPE_CHECKING:
    from boundloop.checkpoint import PostgresStore

STATUSES = ("running", "waiting", "stopped")
REASONS = {"running": None, "waiting": "needs_human", "stopped": "completed"}


def rows(count: int) -> list[tuple[str, float, int, str | None, str, str, str]]:
    """`count` checkpoint rows; save times repeat (every two rows share one) so ties are paged too."""
    found: list[tuple[str, float, int, str | None, str, str, str]] = []
    for n in range(count):
        status = STATUSES[n % 3]
        found.append((f"task-{n:06d}", 1000.0 + n // 2, n, REASONS[status], "{}", "stopped", status))
    return found


def fill(path: Path, count: int) -> None:
    """Write `count` rows straight into the store's table (the states are never read here)."""
    db = sqlite3.connect(path)
    with db:
        db.executemany(
            "INSERT INTO checkpoints (task_id, updated_at, step, stop_reason, state, phase, status) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows(count),
        )
    db.close()


async def sqlite_store(tmp_path: Path, count: int) -> SQLiteStore:
    store = SQLiteStore(tmp_path / "runs.db")
    assert await store.list() == []  # makes the layout
    await anyio.to_thread.run_sync(fill, store.path, count)
    return store


async def postgres_store(dsn: str, count: int) -> PostgresStore:
    """A `PostgresStore` on `dsn` holding `count` rows (written straight into its table)."""
    import psycopg

    from boundloop.checkpoint import PostgresStore

    store = PostgresStore(dsn)
    assert await store.list() == []  # makes the layout

    def fill_postgres() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO boundloop_checkpoints "
                "(task_id, updated_at, step, stop_reason, state, phase, status) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                rows(count),
            )

    await anyio.to_thread.run_sync(fill_postgres)
    return store


@contextlib.asynccontextmanager
async def a_store(
    kind: str, count: int, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncGenerator[Any]:
    """A store of `kind` (sqlite, memory, postgres: a new database, closed afterwards) with `count` rows."""
    if kind == "sqlite":
        yield await sqlite_store(tmp_path, count)
    elif kind == "memory":
        yield await memory_store(count)
    else:
        store = await postgres_store(request.getfixturevalue("postgres_dsn"), count)
        assert isinstance(store, PagingStore)  # its own indexed pages, not the list cut
        try:
            yield store
        finally:
            await store.aclose()


async def memory_store(count: int) -> MemoryStore:
    store = MemoryStore()
    for task_id, updated_at, step, stop_reason, _, phase, status in rows(count):
        store.write_raw(task_id, "{}")
        store._states[task_id] = (  # pyright: ignore[reportPrivateUsage]  # a row of a chosen save time
            StoredRun(
                task_id=task_id,
                updated_at=updated_at,
                step=step,
                phase=phase,
                status=status,  # type: ignore[arg-type]
                stop_reason=stop_reason,
            ),
            "{}",
        )
    return store


async def every_page(store: CheckpointStore, limit: int, **filters: Any) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page: RunPage = await page_runs(store, limit=limit, cursor=cursor, **filters)
        pages.append([row.task_id for row in page.runs])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


@pytest.mark.parametrize("kind", ["sqlite", "memory", "postgres"])
@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"status": "waiting"},
        {"stop_reason": "completed"},
        {"status": "stopped", "stop_reason": "completed"},
    ],
)
async def test_pages_hold_every_run_once_newest_first(
    tmp_path: Path, kind: str, filters: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    """Paging by 7 gives every matching run once, newest save first (ties: task id descending),
    and the list's filters; the last page has no cursor."""
    async with a_store(kind, 50, tmp_path, request) as store:
        pages = await every_page(store, 7, **filters)
    expected = sorted(
        (
            row
            for row in rows(50)
            if all({"status": row[6], "stop_reason": row[3]}[k] == v for k, v in filters.items())
        ),
        key=lambda row: (row[1], row[0]),
        reverse=True,
    )
    assert [task_id for page in pages for task_id in page] == [row[0] for row in expected]
    assert all(len(page) == 7 for page in pages[:-1])
    assert 0 < len(pages[-1]) <= 7


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_page_of_an_empty_store_has_no_cursor(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    async with a_store(kind, 0, tmp_path, request) as store:
        assert await page_runs(store) == RunPage([], None)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("cursor", ["", "nonsense", "1.5", "nan:task", "1.5:"])
async def test_a_bad_cursor_is_refused(
    tmp_path: Path, kind: str, cursor: str, request: pytest.FixtureRequest
) -> None:
    async with a_store(kind, 3, tmp_path, request) as store:
        with pytest.raises(ConfigurationError, match="is not a page cursor"):
            await page_runs(store, cursor=cursor)
        with pytest.raises(ConfigurationError, match="a page holds 1 to 500 runs"):
            await store.page(limit=0)


@pytest.mark.parametrize("limit", [0, -1, 501])
async def test_a_bad_limit_is_refused(limit: int) -> None:
    with pytest.raises(ConfigurationError, match="a page holds 1 to 500 runs"):
        await page_runs(MemoryStore(), limit=limit)


def test_a_cursor_keeps_the_exact_time_and_any_task_id() -> None:
    row = StoredRun(
        task_id="a:b c",
        updated_at=1712345678.123456789,
        step=0,
        phase="x",
        status="stopped",
        stop_reason=None,
    )
    assert decode_cursor(encode_cursor(row)) == (row.updated_at, "a:b c")


@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"status": "waiting"},
        {"stop_reason": "completed"},
        {"status": "stopped", "stop_reason": "completed"},
    ],
)
@pytest.mark.parametrize("after", [None, (1500.0, "task-001000")])
async def test_a_sqlite_page_is_read_from_an_index(
    tmp_path: Path, filters: dict[str, Any], after: tuple[float, str] | None
) -> None:
    """Over 20,000 runs (analysed, as a long-lived file is), the page's query plan searches an
    index, in its order: no scan of the table, no sort of it (a temporary b-tree) — so a page
    costs the same at 100,000 runs as at 100."""
    store = await sqlite_store(tmp_path, 20_000)
    query, values = page_query(filters.get("status"), filters.get("stop_reason"), 50, after)

    def plan() -> list[str]:
        db = sqlite3.connect(store.path)
        try:
            db.execute("ANALYZE")
            return [str(row[3]) for row in db.execute("EXPLAIN QUERY PLAN " + query, values)]
        finally:
            db.close()

    steps = await anyio.to_thread.run_sync(plan)
    assert len(steps) == 1, steps
    assert "USING INDEX checkpoints_" in steps[0], steps
    assert "TEMP B-TREE" not in " ".join(steps), steps
    if filters or after:
        assert steps[0].startswith("SEARCH"), steps  # not a SCAN of the whole index either
    page = await page_runs(
        store, limit=50, cursor=None if after is None else f"{after[0]!r}:{after[1]}", **filters
    )
    assert len(page.runs) == 50


async def test_an_older_sqlite_file_gets_the_page_indexes(tmp_path: Path) -> None:
    """A file of layout 3 (before pages) is migrated: the indexes are made, the rows kept."""
    store = await sqlite_store(tmp_path, 10)

    def downgrade() -> None:
        db = sqlite3.connect(store.path)
        with db:
            for name in ("checkpoints_newest", "checkpoints_status_newest", "checkpoints_reason_newest"):
                db.execute(f"DROP INDEX {name}")
            db.execute("PRAGMA user_version = 3")
        db.close()

    await anyio.to_thread.run_sync(downgrade)
    reopened = SQLiteStore(store.path)
    assert len((await page_runs(reopened, limit=3)).runs) == 3
    assert [row.task_id for row in (await reopened.page(limit=20)).runs][:2] == ["task-000009", "task-000008"]


@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"status": "waiting"},
        {"stop_reason": "completed"},
        {"status": "stopped", "stop_reason": "completed"},
    ],
)
@pytest.mark.parametrize("after", [None, (1500.0, "task-001000")])
async def test_a_postgres_page_is_read_from_an_index(
    postgres_dsn: str, filters: dict[str, Any], after: tuple[float, str] | None
) -> None:
    """Over 20,000 runs (analysed), the page's plan is an index scan of one of the page indexes,
    read from the cursor on (an index condition), in its order: no sequential scan, no sort."""
    store = await postgres_store(postgres_dsn, 20_000)
    query, values = _pg_pages.page_query(filters.get("status"), filters.get("stop_reason"), 50, after)

    try:
        top = await anyio.to_thread.run_sync(postgres_plan, postgres_dsn, query, values)
        nodes = list(_nodes(top))
        kinds = [node["Node Type"] for node in nodes]
        assert kinds == ["Limit", "Index Scan"], kinds
        [scan] = [node for node in nodes if node["Node Type"] == "Index Scan"]
        assert scan["Index Name"] in PAGE_INDEXES, scan
        assert scan["Scan Direction"] == "Backward", scan
        if after is not None:
            assert "task_id" in scan["Index Cond"], scan  # the cursor is searched, not filtered
        page = await page_runs(
            store, limit=50, cursor=None if after is None else f"{after[0]!r}:{after[1]}", **filters
        )
        assert len(page.runs) == 50
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({"status": "waiting"}, "boundloop_checkpoints_status_newest"),
        ({"stop_reason": "needs_human"}, "boundloop_checkpoints_reason_newest"),
    ],
)
async def test_a_postgres_page_of_rare_runs_reads_their_index(
    postgres_dsn: str, filters: dict[str, Any], index: str
) -> None:
    """Of 20,000 runs 34 wait: their page is read from the status (or stop reason) index,
    not by walking the newest runs until 51 waiting ones are found."""
    import psycopg

    store = await postgres_store(postgres_dsn, 20_000)

    def fewer_waiting() -> None:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE boundloop_checkpoints SET status = 'stopped', stop_reason = 'completed' "
                "WHERE status = 'waiting' AND step > 100"
            )

    try:
        await anyio.to_thread.run_sync(fewer_waiting)
        query, values = _pg_pages.page_query(filters.get("status"), filters.get("stop_reason"), 50, None)
        top = await anyio.to_thread.run_sync(postgres_plan, postgres_dsn, query, values)
        nodes = list(_nodes(top))
        assert [node["Node Type"] for node in nodes] == ["Limit", "Index Scan"], nodes
        assert nodes[1]["Index Name"] == index, nodes[1]
        assert len((await store.page(limit=50, **filters)).runs) == 34
    finally:
        await store.aclose()


PAGE_INDEXES = (
    "boundloop_checkpoints_newest",
    "boundloop_checkpoints_status_newest",
    "boundloop_checkpoints_reason_newest",
)


def postgres_plan(dsn: str, query: str, values: list[object]) -> dict[str, Any]:
    """The top node of the query's plan, after `ANALYZE` (blocking)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE boundloop_checkpoints")
        [(found,)] = conn.execute("EXPLAIN (FORMAT JSON) " + query, values).fetchall()  # pyright: ignore[reportArgumentType]
    plans: list[dict[str, Any]] = json.loads(found) if isinstance(found, str) else found
    top: dict[str, Any] = plans[0]["Plan"]
    return top


def _nodes(plan: dict[str, Any]) -> Any:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.parametrize("kind", ["sqlite", "memory", "postgres"])
async def test_a_signed_store_pages_as_its_inner_store(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """`SignedStore` (a loop's signed store) pages: from its inner store's index when
    it has one, else from its list; the same pages either way."""
    async with a_store(kind, 20, tmp_path, request) as inner:
        signed = SignedStore(inner, b"a key")
        assert isinstance(signed, PagingStore)
        for filters in ({}, {"status": "waiting"}):
            assert await every_page(signed, 3, **filters) == await every_page(inner, 3, **filters)
        first = await signed.page(limit=2)
        assert [row.task_id for row in first.runs] == ["task-000019", "task-000018"]
        assert first.next_cursor is not None
        with pytest.raises(ConfigurationError, match="is not a page cursor"):
            await signed.page(cursor="nonsense")
