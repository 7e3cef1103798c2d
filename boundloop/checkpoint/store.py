"""Checkpoint stores: the run's state saved outside the process, so a run can be continued.

The loop saves `LoopState` before a batch of tool calls runs (the calls and their
idempotency keys, as intents), after their results are recorded, and, shielded from
cancellation, when the run stops. `AgentLoop.resume` loads it back.

A store that several workers share also leases tasks (`LeasingStore`): `run` and `resume`
hold the task's lease while the run executes, so two workers never run the same task at once.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import sqlite3
import threading
import time
from collections.abc import AsyncGenerator, Generator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Final, Literal, Protocol, TypeAlias, cast, final, runtime_checkable

import anyio.to_thread

from .._finite import NonFinite
from .._integrity import check_state
from ..errors import CheckpointCorrupt, TaskBusy
from ..state import LoopState, StopReason
from ..statemachine.table import Phase

Status: TypeAlias = Literal["running", "waiting", "stopped"]
"""`running`: not stopped (in flight, or interrupted by a crash); `waiting`: stopped with
`needs_human` and calls or a question for a human; `stopped`: any other stop."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoredRun:
    """One stored run, as `CheckpointStore.list` reports it (without loading its state)."""

    task_id: str
    updated_at: float
    """Epoch seconds of the last save."""
    step: int
    phase: str
    status: Status
    stop_reason: str | None


def status_of(state: LoopState) -> Status:
    """Where a run stands: running, waiting for a human, or stopped."""
    if state.phase is not Phase.STOPPED:
        return "running"
    waiting = state.stop_reason is StopReason.NEEDS_HUMAN and (
        bool(state.pending_approvals) or state.escalation is not None
    )
    return "waiting" if waiting else "stopped"


def summary(state: LoopState) -> StoredRun:
    """The `StoredRun` row of a state."""
    return StoredRun(
        task_id=state.task_id,
        updated_at=time.time(),
        step=state.step,
        phase=str(state.phase),
        status=status_of(state),
        stop_reason=None if state.stop_reason is None else str(state.stop_reason),
    )


def parse(task_id: str, raw: str | bytes) -> LoopState:
    """A stored state read back, and checked before anything continues from it.

    Raises:
        CheckpointCorrupt: it does not parse, has a schema version this boundloop cannot read,
            or is inconsistent (`boundloop._integrity.check_state`: the field is named).
    """
    try:
        state = LoopState.from_json(raw)
    except NonFinite as exc:
        raise CheckpointCorrupt(task_id, "NaN or an infinity is not a JSON number", field=exc.field) from None
    except ValueError as exc:
        raise CheckpointCorrupt(task_id, str(exc)) from None
    check_state(task_id, state)
    return state


class CheckpointStore(Protocol):
    """Where the loop saves state. Every method is async and safe to call from the event loop."""

    async def save(self, state: LoopState) -> None:
        """Save (replace) the state of `state.task_id`, in one transaction."""
        ...

    async def load(self, task_id: str) -> LoopState | None:
        """The last saved state of a task, or None.

        Raises:
            CheckpointCorrupt: the saved state cannot be read.
        """
        ...

    async def list(
        self, *, status: Status | None = None, stop_reason: str | None = None
    ) -> builtins.list[StoredRun]:
        """The stored runs, newest save first, filtered by status and stop reason."""
        ...

    async def delete(self, task_id: str) -> bool:
        """Forget a task; True if it was there."""
        ...


@runtime_checkable
class LeasingStore(CheckpointStore, Protocol):
    """A store that also gives a task to one holder at a time, across every process sharing it.

    `AgentLoop.run` and `AgentLoop.resume` hold the lease of their task for the whole run
    when the store is a `LeasingStore`; a second `run` or `resume` of the task meanwhile,
    in this process or in another worker, raises `TaskBusy` at once instead of running it too.
    """

    def lease(self, task_id: str) -> AbstractAsyncContextManager[None]:
        """Hold `task_id` exclusively until the block exits; released however it exits.

        Raises:
            TaskBusy: another holder has it (at once: a lease never waits).
        """
        ...


def lease_of(store: CheckpointStore | None, task_id: str) -> AbstractAsyncContextManager[None]:
    """The store's lease of `task_id`, or a no-op for a store that does not lease (or none)."""
    # Not isinstance(store, LeasingStore): a runtime protocol check costs 20-30 us per run.
    if store is None or getattr(store, "lease", None) is None:
        return _NO_LEASE
    return cast("LeasingStore", store).lease(task_id)


_NO_LEASE: Final[AbstractAsyncContextManager[None]] = contextlib.nullcontext()
"""The lease of a store that does not lease: nothing to hold (stateless, shared)."""


@final
class MemoryStore:
    """Checkpoints in memory, as JSON snapshots (for tests and short-lived processes).

    It leases tasks within its process (`LeasingStore`), so two concurrent runs of one task
    are refused with `TaskBusy` here as in a store shared by workers.
    """

    def __init__(self) -> None:
        self._states: dict[str, tuple[StoredRun, str]] = {}
        self._leased: set[str] = set()

    @contextlib.asynccontextmanager
    async def lease(self, task_id: str) -> AsyncGenerator[None]:
        """Hold `task_id` until the block exits.

        Raises:
            TaskBusy: a run of this store holds it already.
        """
        if task_id in self._leased:
            raise TaskBusy(task_id)
        self._leased.add(task_id)
        try:
            yield
        finally:
            self._leased.discard(task_id)

    async def save(self, state: LoopState) -> None:
        """Snapshot the state as JSON."""
        self._states[state.task_id] = (summary(state), state.to_json())

    async def load(self, task_id: str) -> LoopState | None:
        """The last snapshot of `task_id`, or None.

        Raises:
            CheckpointCorrupt: the snapshot cannot be read.
        """
        entry = self._states.get(task_id)
        return None if entry is None else parse(task_id, entry[1])

    async def list(
        self, *, status: Status | None = None, stop_reason: str | None = None
    ) -> builtins.list[StoredRun]:
        """The stored runs, newest save first, filtered by status and stop reason."""
        rows: builtins.list[StoredRun] = [row for row, _ in self._states.values()]
        return sorted(
            (row for row in rows if _matches(row, status, stop_reason)),
            key=lambda row: row.updated_at,
            reverse=True,
        )

    async def delete(self, task_id: str) -> bool:
        """Forget a task; True if it was there."""
        return self._states.pop(task_id, None) is not None

    def task_ids(self) -> builtins.list[str]:
        """Saved task ids, in the order they were first saved."""
        return list(self._states)

    def write_raw(self, task_id: str, raw: str) -> None:
        """Store `raw` as the task's state text, unchecked (for tests of unreadable rows)."""
        row = StoredRun(
            task_id=task_id, updated_at=time.time(), step=0, phase="?", status="running", stop_reason=None
        )
        self._states[task_id] = (row, raw)


def _matches(row: StoredRun, status: Status | None, stop_reason: str | None) -> bool:
    return (status is None or row.status == status) and (
        stop_reason is None or row.stop_reason == stop_reason
    )


SCHEMA_VERSION: Final = 2
"""The SQLite layout (`PRAGMA user_version`). 1: boundloop 0.1 (no status columns)."""

_MIGRATIONS: Final[dict[int, tuple[str, ...]]] = {
    1: (
        "CREATE TABLE IF NOT EXISTS checkpoints (task_id TEXT PRIMARY KEY, updated_at REAL NOT NULL, "
        "step INTEGER NOT NULL, stop_reason TEXT, state TEXT NOT NULL)",
    ),
    2: (
        "ALTER TABLE checkpoints ADD COLUMN phase TEXT NOT NULL DEFAULT 'unknown'",
        "ALTER TABLE checkpoints ADD COLUMN status TEXT NOT NULL DEFAULT 'stopped'",
        "UPDATE checkpoints SET status = CASE WHEN stop_reason IS NULL THEN 'running' ELSE 'stopped' END",
        "CREATE INDEX IF NOT EXISTS checkpoints_status ON checkpoints (status, updated_at)",
    ),
}
"""Version -> the statements that bring the previous version to it."""


@final
class SQLiteStore:
    """Checkpoints in one SQLite file (WAL); every query runs in a worker thread, never on the loop.

    It does not lease tasks (it is no `LeasingStore`): it serves one process, which must not
    run one task twice at once. Workers sharing checkpoints use `PostgresStore`.
    """

    def __init__(self, path: str | Path) -> None:
        # No I/O here: a store may be built inside async code; the schema is made on first use.
        self.path = Path(path)
        self._lock = threading.Lock()
        self._ready = False

    @contextlib.contextmanager
    def _connect(self, *, write: bool = False) -> Generator[sqlite3.Connection, None, None]:
        """One transaction: `BEGIN IMMEDIATE` for writes, a deferred read otherwise."""
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            if not self._ready:
                self._migrate(db)
            db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    def _migrate(self, db: sqlite3.Connection) -> None:
        """Bring the file to `SCHEMA_VERSION`, one version per transaction."""
        db.execute("PRAGMA journal_mode=WAL")
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version == 0 and db.execute("SELECT 1 FROM sqlite_master WHERE name = 'checkpoints'").fetchone():
            version = 1  # made by boundloop 0.1, which did not set user_version
        if version > SCHEMA_VERSION:
            raise CheckpointCorrupt(
                "*", f"{self.path} has store schema {version}; this boundloop reads up to {SCHEMA_VERSION}"
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            db.execute("BEGIN IMMEDIATE")
            for statement in _MIGRATIONS[target]:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {target}")
            db.execute("COMMIT")
        self._ready = True

    def _save(self, row: StoredRun, state: str) -> None:
        with self._lock, self._connect(write=True) as db:
            db.execute(
                "INSERT INTO checkpoints (task_id, updated_at, step, stop_reason, state, phase, status) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(task_id) DO UPDATE SET updated_at=excluded.updated_at, step=excluded.step, "
                "stop_reason=excluded.stop_reason, state=excluded.state, phase=excluded.phase, "
                "status=excluded.status",
                (row.task_id, row.updated_at, row.step, row.stop_reason, state, row.phase, row.status),
            )

    def _load(self, task_id: str) -> str | None:
        with self._connect() as db:
            found = db.execute("SELECT state FROM checkpoints WHERE task_id = ?", (task_id,)).fetchone()
        return None if found is None else str(found[0])

    def _list(self, status: Status | None, stop_reason: str | None) -> builtins.list[StoredRun]:
        query = "SELECT task_id, updated_at, step, phase, status, stop_reason FROM checkpoints"
        clauses: list[str] = []
        values: list[str] = []
        if status is not None:
            clauses.append("status = ?")
            values.append(status)
        if stop_reason is not None:
            clauses.append("stop_reason = ?")
            values.append(stop_reason)
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        with self._connect() as db:
            rows = db.execute(query + " ORDER BY updated_at DESC", values).fetchall()
        return [
            StoredRun(task_id=r[0], updated_at=r[1], step=r[2], phase=r[3], status=r[4], stop_reason=r[5])
            for r in rows
        ]

    def _delete(self, task_id: str) -> bool:
        with self._lock, self._connect(write=True) as db:
            return db.execute("DELETE FROM checkpoints WHERE task_id = ?", (task_id,)).rowcount > 0

    def write_raw(self, task_id: str, raw: str) -> None:
        """Store `raw` as the task's state text, unchecked (for tests of unreadable rows); blocking."""
        row = StoredRun(
            task_id=task_id, updated_at=time.time(), step=0, phase="?", status="running", stop_reason=None
        )
        self._save(row, raw)

    async def save(self, state: LoopState) -> None:
        """Upsert the state's JSON under its task id, in one transaction."""
        await anyio.to_thread.run_sync(self._save, summary(state), state.to_json())

    async def load(self, task_id: str) -> LoopState | None:
        """The last saved state of `task_id`, or None.

        Raises:
            CheckpointCorrupt: the row cannot be read.
        """
        raw = await anyio.to_thread.run_sync(self._load, task_id)
        return None if raw is None else parse(task_id, raw)

    async def list(
        self, *, status: Status | None = None, stop_reason: str | None = None
    ) -> builtins.list[StoredRun]:
        """The stored runs, newest save first, filtered by status and stop reason."""
        return await anyio.to_thread.run_sync(self._list, status, stop_reason)

    async def delete(self, task_id: str) -> bool:
        """Forget a task; True if it was there."""
        return await anyio.to_thread.run_sync(self._delete, task_id)
