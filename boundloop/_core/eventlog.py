"""The event log writer: it appends a run's events to its store's `EventLog`.

It observes the run's event stream as the checkpoint writer does (the driver awaits both):
the run records every event in `RunContext.events`, and the writer appends those it has not
appended yet, in one batch, before each checkpoint is saved (so a crash loses no event a
checkpoint counts), after each model call (entering `validate`: a follower sees the model's
answer when the run has it) and when the run stops. Deltas are left out unless the store
has `log_deltas=True`; those it logs are redacted as the recorded events are, each content
block's pieces together (`redacted_deltas`), so a secret the stream split across two deltas is
found too.

A run continues its task's log: before its first event it takes up the `seq` after the
log's last one, so the events a killed worker appended after its last checkpoint stay, and
no `seq` is appended twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, cast, final

from ..checkpoint.eventlog import DELTA_KINDS, EventLog
from ..checkpoint.signed import SignedStore
from ..events import Event, Transition
from ..statemachine.table import Phase
from .context import RunContext

if TYPE_CHECKING:
    from ..checkpoint.store import CheckpointStore


def event_log_of(store: CheckpointStore | None) -> EventLog | None:
    """The store's event log (a signed store's inner one: events are not signed), or None for a
    store that keeps none."""
    if isinstance(store, SignedStore):
        store = store.inner
    if store is None or getattr(store, "append", None) is None or getattr(store, "wait", None) is None:
        return None
    return cast("EventLog", store)  # checked above, as `lease_of` does (no runtime protocol check)


def flushes_after(event: Transition) -> bool:
    """Whether the log is written after this transition besides the checkpoint points (and the
    stop, `CheckpointWriter.last`): after a model call, when the run has the model's answer."""
    return event.dest == Phase.VALIDATE


@final
class EventLogWriter:
    """Appends one run's events to its store's event log."""

    __slots__ = ("_ctx", "_deltas", "_done", "_log")

    def __init__(self, ctx: RunContext, log: EventLog) -> None:
        self._ctx = ctx
        self._log = log
        self._deltas = log.log_deltas
        if self._deltas:  # the run keeps its streamed deltas for the log (RunContext.delta)
            ctx.deltas = []
        self._done = len(ctx.events)
        """How many of the run's events are appended (or left out) already."""

    async def catch_up(self) -> None:
        """Take up the `seq` after the task's last logged one, when the state is behind it."""
        state = self._ctx.state
        last = await self._log.last_seq(state.task_id)
        if last >= state.next_seq:
            state.next_seq = last + 1

    async def flush(self) -> None:
        """Append the events recorded since the last flush, in one batch.

        Raises:
            EventExists: the log holds one of their `seq`s (another writer of the task).
        """
        events = self._ctx.events
        end = len(events)
        batch = [event for event in events[self._done : end] if event.kind not in DELTA_KINDS]
        deltas = self._ctx.deltas
        if deltas:  # the streamed deltas since the last flush, redacted, in their place by seq
            batch = sorted([*batch, *redacted_deltas(deltas, self._ctx.redact)], key=lambda event: event.seq)
            deltas.clear()
        if batch:
            await self._log.append(batch)
        self._done = end


PIECES: Final = {"text_delta": "text", "thinking_delta": "thinking", "tool_input_delta": "partial_json"}
"""A delta's kind -> the field holding its piece."""


def redacted_deltas(deltas: Sequence[Event], redact: Callable[[str], str]) -> list[Event]:
    """The deltas as the log keeps them: the pieces of each content block (of each model call)
    redacted together, so a secret split across two deltas is found as one.

    A block the redaction leaves as it is keeps its pieces. One it changes keeps its deltas and
    their `seq`s (the log stays without a gap): the first holds the block's redacted text, the
    others an empty piece; put together they are the redacted text, as the recorded events
    hold it.
    """
    blocks: dict[tuple[str, int, int], list[Event]] = {}
    for event in deltas:
        index: int = getattr(event, "index", -1)
        blocks.setdefault((event.kind, event.step, index), []).append(event)
    logged: list[Event] = []
    for (kind, _, _), events in blocks.items():
        field = PIECES.get(kind)
        if field is None:  # not a delta: as it is
            logged.extend(events)
            continue
        whole = "".join(getattr(event, field) for event in events)
        clean = redact(whole)
        if clean == whole:
            logged.extend(events)
            continue
        for position, event in enumerate(events):
            piece: dict[str, Any] = {field: clean if position == 0 else ""}
            logged.append(dataclasses.replace(event, **piece))
    return logged
