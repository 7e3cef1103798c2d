"""Checkpoint stores: the run's state saved outside the process, at every step and at the stop.

A store is what makes a run explainable after a crash, a cancellation or a human decision:
the loop saves `LoopState` (JSON) when a step completes and, shielded from cancellation,
when the run stops.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import Protocol, final

import anyio.to_thread

from ..state import LoopState


class CheckpointStore(Protocol):
    """Where the loop saves state; the two methods the loop and the CLI call."""

    async def save(self, state: LoopState) -> None:
        """Save (replace) the state of `state.task_id`."""
        ...

    async def load(self, task_id: str) -> LoopState | None:
        """The last saved state of a task, or None."""
        ...


@final
class MemoryStore:
    """Checkpoints in memory, as JSON snapshots (for tests and short-lived processes)."""

    def __init__(self) -> None:
        self._states: dict[str, str] = {}

    async def save(self, state: LoopState) -> None:
        """Snapshot the state as JSON."""
        self._states[state.task_id] = state.to_json()

    async def load(self, task_id: str) -> LoopState | None:
        """The last snapshot of `task_id`, or None."""
        raw = self._states.get(task_id)
        return None if raw is None else LoopState.from_json(raw)

    def task_ids(self) -> list[str]:
        """Saved task ids, in the order they were first saved."""
        return list(self._states)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    task_id     TEXT PRIMARY KEY,
    updated_at  REAL NOT NULL,
    step        INTEGER NOT NULL,
    stop_reason TEXT,
    state       TEXT NOT NULL
)
"""


@final
class SQLiteStore:
    """Checkpoints in one SQLite file; every query runs in a worker thread, never on the loop."""

    def __init__(self, path: str | Path) -> None:
        # No I/O here: a store may be built inside async code; the table is made on first use.
        self.path = Path(path)
        self._lock = threading.Lock()
        self._ready = False

    @contextlib.contextmanager
    def _connect(self) -> Generator[sqlite3.Connection, None, None]:
        db = sqlite3.connect(self.path, timeout=30)
        try:
            with db:  # commits, or rolls back on error
                if not self._ready:
                    db.execute(_SCHEMA)
                    self._ready = True
                yield db
        finally:
            db.close()

    def _save(self, task_id: str, step: int, stop_reason: str | None, state: str) -> None:
        with self._lock, self._connect() as db:
            db.execute(
                "INSERT INTO checkpoints (task_id, updated_at, step, stop_reason, state) "
                "VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(task_id) DO UPDATE SET updated_at=excluded.updated_at, step=excluded.step, "
                "stop_reason=excluded.stop_reason, state=excluded.state",
                (task_id, time.time(), step, stop_reason, state),
            )

    def _load(self, task_id: str) -> str | None:
        with self._connect() as db:
            row = db.execute("SELECT state FROM checkpoints WHERE task_id = ?", (task_id,)).fetchone()
        return None if row is None else str(row[0])

    async def save(self, state: LoopState) -> None:
        """Upsert the state's JSON under its task id."""
        reason = None if state.stop_reason is None else str(state.stop_reason)
        await anyio.to_thread.run_sync(self._save, state.task_id, state.step, reason, state.to_json())

    async def load(self, task_id: str) -> LoopState | None:
        """The last saved state of `task_id`, or None."""
        raw = await anyio.to_thread.run_sync(self._load, task_id)
        return None if raw is None else LoopState.from_json(raw)
