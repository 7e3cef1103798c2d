"""Pages of stored runs (`boundloop.checkpoint.paging`): newest first, every run once, filtered,
and on SQLite one query on an index, whatever the number of runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from boundloop import CheckpointStore, MemoryStore, SQLiteStore, StoredRun
from boundloop.checkpoint._sqlite_pages import page_query
from boundloop.checkpoint.paging import RunPage, decode_cursor, encode_cursor, page_runs
from boundloop.errors import ConfigurationError

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


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
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
    tmp_path: Path, kind: str, filters: dict[str, Any]
) -> None:
    """Paging by 7 gives every matching run once, newest save first (ties: task id descending),
    and the list's filters; the last page has no cursor."""
    store = await sqlite_store(tmp_path, 50) if kind == "sqlite" else await memory_store(50)
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


async def test_a_page_of_an_empty_store_has_no_cursor(tmp_path: Path) -> None:
    assert await page_runs(await sqlite_store(tmp_path, 0)) == RunPage([], None)


@pytest.mark.parametrize("cursor", ["", "nonsense", "1.5", "nan:task", "1.5:"])
async def test_a_bad_cursor_is_refused(tmp_path: Path, cursor: str) -> None:
    with pytest.raises(ConfigurationError, match="is not a page cursor"):
        await page_runs(await sqlite_store(tmp_path, 3), cursor=cursor)


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
