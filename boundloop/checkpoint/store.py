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
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Final, Literal, Protocol, TypeAlias, cast, final, runtime_checkable

import anyio
import anyio.to_thread

from .._base.names import MAX_NAME_LENGTH, name_problem
from ..errors import CheckpointCorrupt, InvalidTaskId, TaskBusy
from ..events import BaseEvent, Event
from ..records import StopReason
from ..state import LoopState, NonFinite
from ..statemachine.table import Phase
from ._integrity import check_state
from .eventlog import PAGE, decode, encode, first_duplicate

__all__ = [
    "CheckpointStore",
    "LeasingStore",
    "MAX_TASK_ID_LENGTH",
    "MemoryStore",
    "Status",
    "StoredRun",
    "check_task_id",
    "is_stored",
    "lease_in_thread",
    "lease_of",
    "log_rows",
    "parse",
    "status_of",
    "summary",
]

Status: TypeAlias = Literal["running", "waiting", "stopped"]
"""`running`: not stopped (in flight, or interrupted by a crash); `waiting`: stopped with
`needs_human` and calls or a question for a human; `stopped`: any other stop."""


MAX_TASK_ID_LENGTH: Final = MAX_NAME_LENGTH
"""The longest task id a run or a store takes, in characters."""


def check_task_id(task_id: object) -> str:
    """`task_id`, when every store can key a run by it: a string of 1 to 200 characters, not only
    whitespace, with no control character (NUL, a newline, ...) and no lone surrogate.

    `AgentLoop.run`, `AgentLoop.resume` and the stores' `save`, `load`, `delete` and `lease`
    call it, so a bad id is refused the same way whichever store is behind the loop.

    Raises:
        InvalidTaskId: the id, and what is wrong with it.
    """
    problem = name_problem(task_id, "task id")
    if problem is None and isinstance(task_id, str):
        return task_id
    raise InvalidTaskId(task_id, problem or "a task id is a string")


def log_rows(events: Sequence[BaseEvent]) -> builtins.list[tuple[str, int, str]]:
    """`(task_id, seq, json)` of each event to log.

    Raises:
        InvalidTaskId: an event's task id is no valid task id.
    """
    rows = encode(events)
    for task_id in {row[0] for row in rows}:
        check_task_id(task_id)
    return rows


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
            or is inconsistent (`boundloop.checkpoint._integrity.check_state`: the field is named).
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


async def is_stored(store: CheckpointStore | None, task_id: str | None) -> bool:
    """Whether the store holds `task_id` (a run given no task id makes a new one: not stored);
    an unreadable row is there too, and is never overwritten either."""
    if store is None or task_id is None:
        return False
    try:
        return await store.load(task_id) is not None
    except CheckpointCorrupt:
        return True


@final
class MemoryStore:
    """Checkpoints in memory, as JSON snapshots (for tests and short-lived processes).

    It leases tasks within its process (`LeasingStore`), so two concurrent runs of one task
    are refused with `TaskBusy` here as in a store shared by workers, and logs their events
    (`EventLog`; with `log_deltas`, the streamed deltas too).
    """

    def __init__(self, *, log_deltas: bool = False) -> None:
        self._states: dict[str, tuple[StoredRun, str]] = {}
        self._leased: set[str] = set()
        self._log_deltas = log_deltas
        self._events: dict[str, dict[int, str]] = {}
        self._appended: dict[str, anyio.Event] = {}
        """Set (and dropped) when the task's log grows: what `wait` waits on."""

    @contextlib.asynccontextmanager
    async def lease(self, task_id: str) -> AsyncGenerator[None]:
        """Hold `task_id` until the block exits.

        Raises:
            TaskBusy: a run of this store holds it already.
            InvalidTaskId: `task_id` is no valid task id.
        """
        check_task_id(task_id)
        if task_id in self._leased:
            raise TaskBusy(task_id)
        self._leased.add(task_id)
        try:
            yield
        finally:
            self._leased.discard(task_id)

    async def save(self, state: LoopState) -> None:
        """Snapshot the state as JSON."""
        check_task_id(state.task_id)
        self._states[state.task_id] = (summary(state), state.to_json())

    async def load(self, task_id: str) -> LoopState | None:
        """The last snapshot of `task_id`, or None.

        Raises:
            CheckpointCorrupt: the snapshot cannot be read.
        """
        entry = self._states.get(check_task_id(task_id))
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
        """Forget a task and its events; True if its state was there."""
        self._events.pop(check_task_id(task_id), None)
        return self._states.pop(task_id, None) is not None

    # -- the event log -------------------------------------------------------------------------

    @property
    def log_deltas(self) -> bool:
        """Whether runs log their streamed deltas too."""
        return self._log_deltas

    async def append(self, events: Sequence[Event]) -> None:
        """Append events, all or none.

        Raises:
            EventExists: one has a `seq` its task logged already.
            InvalidTaskId: an event's task id is no valid task id.
        """
        rows = log_rows(events)
        logged = {(task_id, seq) for task_id, seq, _ in rows if seq in self._events.get(task_id, {})}
        refusal = first_duplicate(rows, logged)
        if refusal is not None:
            raise refusal
        for task_id, seq, text in rows:
            self._events.setdefault(task_id, {})[seq] = text
        for task_id in {row[0] for row in rows}:
            appended = self._appended.pop(task_id, None)
            if appended is not None:
                appended.set()

    async def read(self, task_id: str, *, after: int = -1, limit: int = PAGE) -> builtins.list[Event]:
        """The task's events above `after`, in `seq` order, at most `limit`."""
        logged = self._events.get(check_task_id(task_id), {})
        return decode(logged[seq] for seq in sorted(seq for seq in logged if seq > after)[:limit])

    async def last_seq(self, task_id: str) -> int:
        """The highest `seq` logged for the task; -1 when none is."""
        return max(self._events.get(check_task_id(task_id), {-1: ""}))

    async def wait(self, task_id: str, *, after: int, timeout_s: float) -> bool:
        """Wait until the task has an event above `after` (True), at most `timeout_s` (False)."""
        if await self.last_seq(task_id) > after:
            return True
        appended = self._appended.setdefault(task_id, anyio.Event())
        with anyio.move_on_after(timeout_s):
            await appended.wait()
            return True
        return False

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


@contextlib.asynccontextmanager
async def lease_in_thread(
    task_id: str, take: Callable[[], bool], abandon: Callable[[], None], release: Callable[[], None]
) -> AsyncGenerator[None]:
    """A lease whose lock is taken, abandoned and released by blocking calls, each in a worker
    thread (SQLite's lock files, PostgreSQL's advisory locks).

    Raises:
        TaskBusy: `take` found the lock held.
    """
    try:
        taken = await anyio.to_thread.run_sync(take)
    except BaseException:
        # Cancelled while the worker thread may still take the lock (a native asyncio
        # cancellation does not wait for the thread): it must not stay taken for nobody.
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(abandon)
        raise
    if not taken:
        raise TaskBusy(task_id)
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(release)
