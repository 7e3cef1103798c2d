"""Checkpoint stores: a run's state saved per step and at the stop, read back identical."""

from __future__ import annotations

from pathlib import Path

from boundloop import AgentLoop, Budget, LoopState, MemoryStore, ScriptedClient, SQLiteStore, StopReason, tool
from boundloop.checkpoint import CheckpointStore
from tests.helpers import text, tool_use


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-{key}"


async def run_with(store: CheckpointStore, task_id: str) -> LoopState:
    script = [tool_use(("lookup", {"key": "a"})), text("done")]
    loop = AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=3),
        metrics=None,
        store=store,
    )
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
