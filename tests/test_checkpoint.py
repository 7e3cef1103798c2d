"""Checkpoint stores: a run's state saved per step and at the stop, read back identical."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from boundloop import CheckpointStore, LoopState, MemoryStore, SQLiteStore, StopReason, tool
from boundloop.checkpoint import EventLog
from boundloop.checkpoint.conformance import (
    CHECKS,
    EVENT_LOG_CHECKS,
    Check,
    LogCheck,
    RawWriter,
    sample_state,
)
from boundloop.checkpoint.sqlite import SCHEMA_VERSION, _use_wal
from boundloop.errors import CheckpointCorrupt
from boundloop.statemachine.table import Phase
from tests.helpers import scripted_loop, text, tool_use


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-{key}"


async def run_with(store: CheckpointStore, task_id: str) -> LoopState:
    script = [tool_use(("lookup", {"key": "a"})), text("done")]
    loop = scripted_loop(script, [lookup], store=store)
    return (await loop.run("goal", task_id=task_id)).state


async def test_sqlite_store_round_trips_a_finished_run(tmp_path: Path) -> None:
    """A run checkpointed to SQLite reads back equal, from a new store on the same file."""
    path = tmp_path / "runs.db"
    state = await run_with(SQLiteStore(path), "task-sql")
    loaded = await SQLiteStore(path).load("task-sql")
    assert loaded is not None
    assert loaded.stop_reason is StopReason.COMPLETED
    assert loaded.to_dict() == state.to_dict()
    assert await SQLiteStore(path).load("no-such-task") is None


async def test_sqlite_store_keeps_one_row_per_task_updated_in_place(tmp_path: Path) -> None:
    """Saving a task again replaces its row; other tasks are untouched."""
    store = SQLiteStore(tmp_path / "runs.db")
    first = await run_with(store, "task-1")
    await run_with(store, "task-2")
    first.answer = "changed"
    await store.save(first)
    loaded = await store.load("task-1")
    other = await store.load("task-2")
    assert loaded is not None
    assert loaded.answer == "changed"
    assert other is not None
    assert other.answer == "done"


async def test_memory_store_lists_its_tasks() -> None:
    """MemoryStore keeps JSON snapshots by task id, in first-saved order."""
    store = MemoryStore()
    await run_with(store, "a")
    await run_with(store, "b")
    assert store.task_ids() == ["a", "b"]
    assert await store.load("missing") is None


# -- the conformance suite, on every store -----------------------------------------------

STORES = ["memory", "sqlite"]


def make_store(kind: str, tmp_path: Path) -> tuple[CheckpointStore, RawWriter]:
    """A fresh store of one kind, and a writer of raw rows into it."""
    if kind == "memory":
        memory = MemoryStore()

        async def write_memory(task_id: str, raw: str) -> None:
            memory.write_raw(task_id, raw)

        return memory, write_memory
    sqlite = SQLiteStore(tmp_path / "runs.db")

    async def write_sqlite(task_id: str, raw: str) -> None:
        await anyio.to_thread.run_sync(sqlite.write_raw, task_id, raw)

    return sqlite, write_sqlite


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
async def test_store_conformance(kind: str, check: Check, tmp_path: Path) -> None:
    """Every store passes every check of `boundloop.checkpoint.conformance`."""
    store, write_raw = make_store(kind, tmp_path)
    await check(store, write_raw)


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("check", EVENT_LOG_CHECKS, ids=lambda check: check.__name__)
async def test_event_log_conformance(kind: str, check: LogCheck, tmp_path: Path) -> None:
    """Every store keeps an event log that passes every event-log check of the suite."""
    store, _ = make_store(kind, tmp_path)
    assert isinstance(store, MemoryStore | SQLiteStore)
    log: EventLog = store
    await check(log)


async def test_sqlite_store_uses_wal_and_its_schema_version(tmp_path: Path) -> None:
    """The file is in WAL mode, at the current schema version."""
    path = tmp_path / "runs.db"
    await SQLiteStore(path).save(sample_state("t-1"))

    def pragmas() -> tuple[str, int]:
        db = sqlite3.connect(path)
        try:
            return db.execute("PRAGMA journal_mode").fetchone()[0], db.execute(
                "PRAGMA user_version"
            ).fetchone()[0]
        finally:
            db.close()

    assert await anyio.to_thread.run_sync(pragmas) == ("wal", SCHEMA_VERSION)


async def test_sqlite_store_migrates_a_file_of_boundloop_0_1(tmp_path: Path) -> None:
    """A file written by boundloop 0.1 (no status columns, no user_version) is migrated in place."""
    path = tmp_path / "old.db"
    state = sample_state("t-old", phase=Phase.STOPPED, stop_reason=StopReason.COMPLETED)

    def write_old_layout() -> None:
        db = sqlite3.connect(path)
        try:
            db.execute(
                "CREATE TABLE checkpoints (task_id TEXT PRIMARY KEY, updated_at REAL NOT NULL, "
                "step INTEGER NOT NULL, stop_reason TEXT, state TEXT NOT NULL)"
            )
            db.execute(
                "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?)",
                ("t-old", 1.0, 1, "completed", state.to_json()),
            )
            db.execute(
                "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?)", ("t-crashed", 2.0, 1, None, state.to_json())
            )
            db.commit()
        finally:
            db.close()

    await anyio.to_thread.run_sync(write_old_layout)
    store = SQLiteStore(path)
    assert [(r.task_id, r.status) for r in await store.list()] == [
        ("t-crashed", "running"),
        ("t-old", "stopped"),
    ]
    loaded = await store.load("t-old")
    assert loaded is not None
    assert loaded.to_json() == state.to_json()


async def test_sqlite_store_refuses_a_file_from_a_newer_boundloop(tmp_path: Path) -> None:
    """A file whose schema version is newer than this boundloop's is refused, not overwritten."""
    path = tmp_path / "new.db"

    def write_future() -> None:
        db = sqlite3.connect(path)
        try:
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        finally:
            db.close()

    await anyio.to_thread.run_sync(write_future)
    with pytest.raises(CheckpointCorrupt, match="store schema"):
        await SQLiteStore(path).list()


# -- SQLiteStore: first use, and a store that fails ------------------------------------------


def test_a_database_that_cannot_use_wal_keeps_its_mode_and_the_switch_returns() -> None:
    """SQLite answers `PRAGMA journal_mode=WAL` with the mode it keeps (an in-memory database:
    `memory`): the switch returns at once instead of trying again (it spun forever once)."""
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    switch = threading.Thread(target=_use_wal, args=(db,), daemon=True)
    switch.start()
    switch.join(timeout=5)
    assert not switch.is_alive()
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "memory"


async def test_twenty_concurrent_first_loads_migrate_a_new_file_once(tmp_path: Path) -> None:
    """Twenty loads at once on a new file (ten through one store's threads, ten through stores
    of their own, as other processes would) all succeed, and the file stays usable: a new store
    on it saves, loads and lists."""
    path = tmp_path / "fresh.db"
    shared = SQLiteStore(path)
    found: list[LoopState | None] = []

    async def load(store: SQLiteStore) -> None:
        found.append(await store.load("t-none"))

    async with anyio.create_task_group() as group:
        for index in range(20):
            group.start_soon(load, shared if index % 2 else SQLiteStore(path))
    assert found == [None] * 20
    later = SQLiteStore(path)
    await later.save(sample_state("t-1"))
    assert await later.load("t-1") is not None
    assert [row.task_id for row in await SQLiteStore(path).list()] == ["t-1"]


async def test_a_half_migrated_file_migrates(tmp_path: Path) -> None:
    """A file whose columns of version 2 exist while it says version 1 (what two stores
    migrating at once left behind) is brought to the current version, its rows kept."""
    path = tmp_path / "half.db"
    state = sample_state("t-kept", phase=Phase.STOPPED, stop_reason=StopReason.COMPLETED)

    def write_half_migrated() -> None:
        db = sqlite3.connect(path)
        try:
            db.execute(
                "CREATE TABLE checkpoints (task_id TEXT PRIMARY KEY, updated_at REAL NOT NULL, "
                "step INTEGER NOT NULL, stop_reason TEXT, state TEXT NOT NULL, "
                "phase TEXT NOT NULL DEFAULT 'unknown', status TEXT NOT NULL DEFAULT 'stopped')"
            )
            db.execute(
                "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?)",
                ("t-kept", 1.0, 1, "completed", state.to_json(), "stopped", "stopped"),
            )
            db.execute("PRAGMA user_version = 1")
            db.commit()
        finally:
            db.close()

    await anyio.to_thread.run_sync(write_half_migrated)
    store = SQLiteStore(path)
    assert [(r.task_id, r.status) for r in await store.list()] == [("t-kept", "stopped")]
    await store.save(sample_state("t-new"))
    assert await store.load("t-new") is not None


async def test_a_store_that_cannot_open_its_file_fails_the_run_recorded(tmp_path: Path) -> None:
    """A SQLiteStore whose path is a directory fails every query (sqlite3.OperationalError).
    A run on it, with its own task id or a generated one, ends `failed` with the store's
    error recorded in state.errors, and raises nothing; the tool never runs."""
    calls: list[str] = []

    @tool
    async def record(key: str) -> str:
        """Record a call."""
        calls.append(key)
        return key

    broken = SQLiteStore(tmp_path)  # a directory: SQLite cannot open it
    for task_id in ("t-1", None):
        loop = scripted_loop([tool_use(("record", {"key": "a"})), text("done")], [record], store=broken)
        result = await loop.run("goal", task_id=task_id)
        assert result.stop_reason is StopReason.FAILED
        [error, *_] = result.state.errors
        assert (error.kind, error.type) == ("exception", "OperationalError")
        assert "unable to open database file" in error.message
    assert calls == []
