"""SQLiteStore: checkpoints in one SQLite file, leased to one process at a time.

Every query runs in a worker thread, never on the event loop. The layout is versioned with
`PRAGMA user_version` and migrated once, on first use, in one `BEGIN IMMEDIATE` transaction.
A lease is an exclusive `flock` on a lock file per task next to the database, which the
operating system drops with the process holding it (docs/scaling.md argues it against a
lease row with an expiry).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import os
import sqlite3
import sys
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator
from pathlib import Path
from typing import Final, final

import anyio.to_thread

from ..errors import CheckpointCorrupt
from ..state import LoopState
from ._sqlite_events import SQLiteEventLog, create_table
from ._sqlite_pages import create_indexes, page_query, page_rows
from .paging import DEFAULT_LIMIT, RunPage, after_cursor, check_limit, decode_cursor
from .store import Status, StoredRun, check_task_id, lease_in_thread, parse, summary

__all__ = [
    "SCHEMA_VERSION",
    "SQLiteStore",
]

SCHEMA_VERSION: Final = 4
"""The SQLite layout (`PRAGMA user_version`). 1: boundloop 0.1 (no status columns); 2: no event log;
3: no indexes for pages of runs."""


def _to_version_1(db: sqlite3.Connection) -> None:
    db.execute(
        "CREATE TABLE IF NOT EXISTS checkpoints (task_id TEXT PRIMARY KEY, updated_at REAL NOT NULL, "
        "step INTEGER NOT NULL, stop_reason TEXT, state TEXT NOT NULL)"
    )


def _to_version_2(db: sqlite3.Connection) -> None:
    columns = {str(row[1]) for row in db.execute("PRAGMA table_info(checkpoints)")}
    if "phase" not in columns:
        db.execute("ALTER TABLE checkpoints ADD COLUMN phase TEXT NOT NULL DEFAULT 'unknown'")
    if "status" not in columns:
        db.execute("ALTER TABLE checkpoints ADD COLUMN status TEXT NOT NULL DEFAULT 'stopped'")
        db.execute(
            "UPDATE checkpoints SET status = CASE WHEN stop_reason IS NULL THEN 'running' ELSE 'stopped' END"
        )
    db.execute("CREATE INDEX IF NOT EXISTS checkpoints_status ON checkpoints (status, updated_at)")


_MIGRATIONS: Final[dict[int, Callable[[sqlite3.Connection], None]]] = {
    1: _to_version_1,
    2: _to_version_2,
    3: create_table,
    4: create_indexes,
}
"""Version -> the step that brings the previous version to it; each step is idempotent (a column
or an index already there is kept), so a file a step was half applied to migrates too."""


@final
class _Attempt:
    """One `lease` call's attempt at a task's lock, shared by the event loop and the worker
    thread taking it (under the store's lease lock)."""

    __slots__ = ("abandoned", "fd", "path")

    def __init__(self) -> None:
        self.abandoned = False
        """Its caller is gone: the worker thread must not take the lock any more."""
        self.fd = -1
        """The open lock file it holds, once taken."""
        self.path: Path | None = None
        """That file's path."""


_BUSY_TIMEOUT_S: Final = 30.0
"""How long a connection waits for another's lock on the file."""


def _use_wal(db: sqlite3.Connection) -> None:
    """Put the file in WAL mode (outside a transaction, as SQLite requires; a database that
    cannot use WAL keeps its mode). When other connections switch it at the same moment, SQLite
    may answer "database is locked" at once, without waiting out the busy timeout: the mode is
    read again and the switch retried, within that timeout."""
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)  # noqa: TID251 - a worker thread (every caller runs in anyio.to_thread)


@final
class SQLiteStore(SQLiteEventLog):
    """Checkpoints in one SQLite file (WAL); every query runs in a worker thread, never on the loop.

    It leases tasks (`LeasingStore`) to one holder at a time, among the runs of this process
    and of every process on this machine using the same file: a lease is an exclusive lock
    (`flock`) on a lock file of the task in a directory next to the database (`runs.db.locks/`),
    which the operating system releases when the process holding it dies. See
    docs/scaling.md for why a lock file and not a lease row.

    It logs the runs' events (`EventLog`, a table keyed on `(task_id, seq)`; with `log_deltas`,
    the streamed deltas too); a follower polls it.
    """

    def __init__(self, path: str | Path, *, log_deltas: bool = False) -> None:
        # No I/O here: a store may be built inside async code; the schema is made on first use.
        self.path = Path(path)
        self._log_deltas = log_deltas
        self._lock = threading.Lock()
        self._setup = threading.Lock()
        self._ready = False
        self._leases = threading.Lock()
        self._held: dict[str, _Attempt] = {}
        """The task ids this store holds the lock of, and the attempt that took each."""

    @contextlib.contextmanager
    def _connect(self, *, write: bool = False) -> Generator[sqlite3.Connection, None, None]:
        """One transaction: `BEGIN IMMEDIATE` for writes, a deferred read otherwise."""
        if not self._ready:
            self._migrate()
        db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    def _migrate(self) -> None:
        """Bring the file to `SCHEMA_VERSION` once: under `_setup` for this store's threads, and
        in one `BEGIN IMMEDIATE` transaction that reads the version it starts from, for every
        other connection to the file (other stores, other processes).

        Raises:
            CheckpointCorrupt: the file has a newer layout than this boundloop knows.
        """
        with self._setup:
            if self._ready:
                return
            db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
            try:
                if self._version(db) != SCHEMA_VERSION:  # a file up to date is only read: no write lock
                    _use_wal(db)
                    db.execute("BEGIN IMMEDIATE")
                    try:
                        version = self._version(db)  # again: another connection may have migrated it
                        for target in range(version + 1, SCHEMA_VERSION + 1):
                            _MIGRATIONS[target](db)
                        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    except BaseException:
                        db.execute("ROLLBACK")
                        raise
                    db.execute("COMMIT")
            finally:
                db.close()
            self._ready = True

    def _version(self, db: sqlite3.Connection) -> int:
        """The file's layout version.

        Raises:
            CheckpointCorrupt: it is newer than this boundloop's.
        """
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version == 0 and db.execute("SELECT 1 FROM sqlite_master WHERE name = 'checkpoints'").fetchone():
            version = 1  # made by boundloop 0.1, which did not set user_version
        if version > SCHEMA_VERSION:
            raise CheckpointCorrupt(
                "*", f"{self.path} has store schema {version}; this boundloop reads up to {SCHEMA_VERSION}"
            )
        return version

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
            db.execute("DELETE FROM events WHERE task_id = ?", (task_id,))
            return db.execute("DELETE FROM checkpoints WHERE task_id = ?", (task_id,)).rowcount > 0

    def write_raw(self, task_id: str, raw: str) -> None:
        """Store `raw` as the task's state text, unchecked (for tests of unreadable rows); blocking."""
        row = StoredRun(
            task_id=task_id, updated_at=time.time(), step=0, phase="?", status="running", stop_reason=None
        )
        self._save(row, raw)

    async def save(self, state: LoopState) -> None:
        """Upsert the state's JSON under its task id, in one transaction.

        Raises:
            InvalidTaskId: the state's task id is no valid task id.
        """
        check_task_id(state.task_id)
        await anyio.to_thread.run_sync(self._save, summary(state), state.to_json())

    async def load(self, task_id: str) -> LoopState | None:
        """The last saved state of `task_id`, or None.

        Raises:
            CheckpointCorrupt: the row cannot be read.
            InvalidTaskId: `task_id` is no valid task id.
        """
        raw = await anyio.to_thread.run_sync(self._load, check_task_id(task_id))
        return None if raw is None else parse(task_id, raw)

    async def list(
        self, *, status: Status | None = None, stop_reason: str | None = None
    ) -> builtins.list[StoredRun]:
        """The stored runs, newest save first, filtered by status and stop reason."""
        return await anyio.to_thread.run_sync(self._list, status, stop_reason)

    async def delete(self, task_id: str) -> bool:
        """Forget a task and its events; True if its state was there."""
        return await anyio.to_thread.run_sync(self._delete, check_task_id(task_id))

    async def page(
        self,
        *,
        status: Status | None = None,
        stop_reason: str | None = None,
        limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
    ) -> RunPage:
        """The runs after `cursor`, newest save first, at most `limit`: one query on an index
        (`boundloop.checkpoint.paging`).

        Raises:
            ConfigurationError: the limit or the cursor is invalid.
        """
        after = None if cursor is None else decode_cursor(cursor)
        query, values = page_query(status, stop_reason, check_limit(limit), after)

        def read() -> builtins.list[StoredRun]:
            with self._connect() as db:
                return page_rows(db, query, values)

        return after_cursor(await anyio.to_thread.run_sync(read), limit, after)

    # -- leases ------------------------------------------------------------------------------

    def _lock_path(self, task_id: str) -> Path:
        """The task's lock file: a hash of its id (any id is a safe file name) in `<file>.locks/`,
        next to the database with its symbolic links resolved (so every path to it shares them)."""
        database = Path(os.path.realpath(self.path))
        digest = hashlib.blake2b(task_id.encode(), digest_size=16, person=b"boundloop-lease").hexdigest()
        return database.with_name(f"{database.name}.locks") / digest

    def _take(self, task_id: str, attempt: _Attempt) -> bool:
        """Take `task_id`'s lock for `attempt`, unless this store holds it, another process
        does, or the attempt was abandoned meanwhile (blocking, but never waits on a holder)."""
        with self._leases:
            if attempt.abandoned or task_id in self._held:
                return False
            path = self._lock_path(task_id)
            fd = _lock_file(path)
            if fd is None:
                return False
            attempt.fd, attempt.path = fd, path
            self._held[task_id] = attempt
            return True

    def _abandon(self, task_id: str, attempt: _Attempt) -> None:
        """The caller of `attempt` is gone: give the lock back if it was taken, else make sure
        it never will be (both under the lease lock, so one of the two holds)."""
        with self._leases:
            attempt.abandoned = True
            if self._held.get(task_id) is not attempt:
                return
        self._release(task_id)

    def _release(self, task_id: str) -> None:
        with self._leases:
            attempt = self._held.pop(task_id, None)
            if attempt is not None and attempt.path is not None:
                _unlock_file(attempt.path, attempt.fd)

    @contextlib.asynccontextmanager
    async def lease(self, task_id: str) -> AsyncGenerator[None]:
        """Hold `task_id` exclusively, across every process using this file, until the block exits.

        Raises:
            TaskBusy: another process, or another run of this store, holds it (at once).
            InvalidTaskId: `task_id` is no valid task id.
            OSError: the lock directory cannot be made or written.
        """
        check_task_id(task_id)
        attempt = _Attempt()
        async with lease_in_thread(
            task_id,
            functools.partial(self._take, task_id, attempt),
            functools.partial(self._abandon, task_id, attempt),
            functools.partial(self._release, task_id),
        ):
            yield


def _lock_file(path: Path) -> int | None:
    """An open descriptor of `path` holding its exclusive lock, or None if another holds it.

    A holder removes the file as it lets go (so lock files do not pile up), which a lock taken on
    the file it removed would not see: after locking, the file at `path` must be the one locked,
    else the lock is of a removed file, and the lock is taken again on the file there now.
    """
    path.parent.mkdir(exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if not _try_lock(fd):
                os.close(fd)
                return None
            mine = os.fstat(fd)
            try:
                there = os.stat(path)
            except FileNotFoundError:
                there = None
        except BaseException:
            os.close(fd)
            raise
        if there is not None and (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino):
            return fd
        os.close(fd)  # a removed file's lock: try again on the file at `path` now


def _unlock_file(path: Path, fd: int) -> None:
    """Let go of a lock `_lock_file` took: remove the file (while holding it), then close it."""
    try:
        if sys.platform != "win32":  # Windows cannot remove an open file: it stays, unlocked
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    finally:
        os.close(fd)  # releases the lock


def _try_lock(fd: int) -> bool:
    """Lock the open file `fd` exclusively without waiting; False if another holder has it."""
    if sys.platform == "win32":
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
