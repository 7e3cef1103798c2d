"""The checkpoint writer: it saves a run's state at its start, after the transitions that
change what a resume must know, and once more when it stops.

It observes the run's `Transition` events; the driver awaits it after each one (saving is
async, the `on_event` hooks are not). With a store that keeps an event log, it has the log
written first (`_core/eventlog.py`): every event a checkpoint counts is logged before it. The
points saved after:

- entering `act`: the batch's calls and idempotency keys, as intents, before any runs;
- entering `observe`: the batch's results, recorded as observations;
- `assemble` entered on `validated`: a step without tools.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, cast, final

import anyio

from .._base.recorded import redact_strings
from ..events import Transition
from ..state import LoopState
from ..statemachine.table import Phase, Trigger
from .context import RunContext
from .eventlog import EventLogWriter, flushes_after

if TYPE_CHECKING:
    from ..checkpoint.store import CheckpointStore

CHECKPOINT_TIMEOUT_S: Final = 10.0
"""How long the shielded final checkpoint may take."""

SAVING: Final[ContextVar[CheckpointWriter | None]] = ContextVar("boundloop_saving", default=None)
"""The checkpoint writer of the run whose work runs in this task (its tool calls' tasks inherit
it): a delegation saves its parent when it starts a child (`save_now`)."""


def saves_after(event: Transition) -> bool:
    """Whether the run is saved after this transition."""
    dest = event.dest
    return (
        dest == Phase.ACT
        or dest == Phase.OBSERVE
        or (dest == Phase.ASSEMBLE and event.trigger == Trigger.VALIDATED)
    )


@final
class CheckpointWriter:
    """Saves one run's state to its store (redacted with `redact_checkpoints`)."""

    __slots__ = ("_ctx", "_lock", "_log", "_store")

    def __init__(self, ctx: RunContext, store: CheckpointStore, log: EventLogWriter | None = None) -> None:
        self._ctx = ctx
        self._store = store
        self._log = log
        self._lock: anyio.Lock | None = None

    async def catch_up(self) -> None:
        """Before the run's first event: its `seq`s continue the task's event log."""
        if self._log is not None:
            await self._log.catch_up()

    async def start(self) -> None:
        """Save before anything runs: the run exists from its start (a resume's intents are durable)."""
        if self._log is not None:
            await self._log.flush()
        await self._store.save(for_store(self._ctx))

    async def observe(self, event: Transition) -> None:
        """Save after `event` when it is one of the points saved after (the log written first)."""
        saves = saves_after(event)
        if self._log is not None and (saves or flushes_after(event)):
            await self._log.flush()
        if saves:
            await self._store.save(for_store(self._ctx))

    async def save_now(self) -> None:
        """Save in the middle of a batch (a delegated run started: the parent's checkpoint names
        it before the child runs), the log written first; the batch's calls save one at a time."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self._log is not None:
                await self._log.flush()
            await self._store.save(for_store(self._ctx))

    async def last(self) -> None:
        """Log the last events, then save the final state, each shielded from the caller's
        cancellation, within `CHECKPOINT_TIMEOUT_S`.

        A failing store never replaces the run's outcome, an exception or a cancellation on
        its way out: its error is recorded in the state and the trace as a `checkpoint` error.
        """
        if self._log is not None:
            try:
                with anyio.move_on_after(CHECKPOINT_TIMEOUT_S, shield=True):
                    await self._log.flush()
            except Exception as exc:  # recorded, and the checkpoint is saved all the same
                self._ctx.error("event_log", exc)
        try:
            with anyio.move_on_after(CHECKPOINT_TIMEOUT_S, shield=True):
                await self._store.save(for_store(self._ctx))
        except Exception as exc:  # never replaces the run's outcome: recorded instead
            self._ctx.error("checkpoint", exc)


def for_store(ctx: RunContext) -> LoopState:
    """The state as it is checkpointed: with `redact_checkpoints`, every string redacted."""
    state = ctx.state
    state.elapsed_s = ctx.elapsed_s
    if not ctx.config.spec.redact_checkpoints:
        return state
    plain = json.loads(state.to_json())
    # Keys too, inside tool inputs and metadata; the state's own field names must read back.
    redacted = cast(dict[str, Any], redact_strings(plain, ctx.redact, all_keys=False))
    # The repeat history's keys are digests: nothing to redact, and a resumed run compares
    # the digests of its calls with them, so no pattern or hook of yours may change them.
    redacted["succeeded"] = plain["succeeded"]
    if plain["turn"] is not None:
        redacted["turn"]["keys"] = plain["turn"]["keys"]
    return LoopState.from_json(json.dumps(redacted))
