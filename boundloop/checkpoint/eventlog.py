"""The event log: a run's events, kept in its store, for any process to read and follow.

Every store of boundloop (`MemoryStore`, `SQLiteStore`, `PostgresStore`) is an `EventLog`.
The run appends its events, with their per-task `seq`, as it records them: the driver flushes
them after every transition, and always before the checkpoint saved there, so every event a
checkpoint counts is in the log first. A resumed run continues the log after its last `seq`
(a worker killed after it flushed events it never checkpointed leaves them there: what it
did), so a reader never sees a `seq` twice. `AgentLoop.events` reads and follows the log;
docs/streaming.md says what is logged (deltas only with `log_deltas=True`).

A `SignedStore` logs through its inner store: events are not signed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Final, Protocol, cast

from ..errors import EventExists
from ..events import BaseEvent, Event, from_dict, to_json_line

__all__ = [
    "DELTA_KINDS",
    "EventLog",
    "PAGE",
    "decode",
    "encode",
    "first_duplicate",
]

DELTA_KINDS: Final = frozenset({"text_delta", "thinking_delta", "tool_input_delta"})
"""The kinds a run logs only when its store has `log_deltas=True`."""

PAGE: Final = 500
"""The most events one `read` returns by default."""


class EventLog(Protocol):
    """A store's log of events, per task, in `seq` order; readable from any process sharing it.

    `(task_id, seq)` is unique: an append holding a `seq` already logged for its task is refused
    whole (`EventExists`), never kept twice. Every method refuses an invalid task id with
    `InvalidTaskId`, as the store's other methods do.
    """

    @property
    def log_deltas(self) -> bool:
        """Whether runs log their streamed deltas (`TextDelta`, ...) too; False by default."""
        ...

    async def append(self, events: Sequence[Event]) -> None:
        """Append events (of any tasks), all or none, in one transaction.

        Raises:
            EventExists: one of them has a `seq` its task logged already (nothing is appended).
        """
        ...

    async def read(self, task_id: str, *, after: int = -1, limit: int = PAGE) -> list[Event]:
        """The task's events with a `seq` above `after`, in `seq` order, at most `limit`."""
        ...

    async def last_seq(self, task_id: str) -> int:
        """The highest `seq` logged for the task; -1 when none is."""
        ...

    async def wait(self, task_id: str, *, after: int, timeout_s: float) -> bool:
        """Wait until the task has an event above `after` (True), at most `timeout_s` (False).

        True may come without one (read to see); False never while one is there at the start.
        """
        ...


def encode(events: Iterable[BaseEvent]) -> list[tuple[str, int, str]]:
    """`(task_id, seq, json)` of each event (the store checks the task ids)."""
    return [(event.task_id, event.seq, to_json_line(event)) for event in events]


def decode(rows: Iterable[str]) -> list[Event]:
    """The events of logged JSON texts."""
    return [from_dict(cast(dict[str, Any], json.loads(text))) for text in rows]


def first_duplicate(rows: Sequence[tuple[str, int, str]], logged: set[tuple[str, int]]) -> EventExists | None:
    """The refusal of the first row whose `(task_id, seq)` is logged or repeated in `rows`."""
    seen = set(logged)
    for task_id, seq, _ in rows:
        if (task_id, seq) in seen:
            return EventExists(task_id, seq)
        seen.add((task_id, seq))
    return None
