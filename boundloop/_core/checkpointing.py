"""The checkpoint writer: it saves a run's state at its start, after the transitions that
change what a resume must know, and once more when it stops.

It observes the run's `Transition` events; the driver awaits it after each one (saving is
async, the `on_event` hooks are not). The points saved after:

- entering `act`: the batch's calls and idempotency keys, as intents, before any runs;
- entering `observe`: the batch's results, recorded as observations;
- `assemble` entered on `validated`: a step without tools.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final, cast, final

import anyio

from .._recorded import redact_strings
from ..events import Transition
from ..state import LoopState
from ..statemachine.table import Phase, Trigger
from .context import RunContext

if TYPE_CHECKING:
    from ..checkpoint.store import CheckpointStore

CHECKPOINT_TIMEOUT_S: Final = 10.0
"""How long the shielded final checkpoint may take."""


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

    __slots__ = ("_ctx", "_store")

    def __init__(self, ctx: RunContext, store: CheckpointStore) -> None:
        self._ctx = ctx
        self._store = store

    async def start(self) -> None:
        """Save before anything runs: the run exists from its start (a resume's intents are durable)."""
        await self._store.save(for_store(self._ctx))

    async def observe(self, event: Transition) -> None:
        """Save after `event` when it is one of the points saved after."""
        if saves_after(event):
            await self._store.save(for_store(self._ctx))

    async def last(self) -> None:
        """Save the final state, shielded from the caller's cancellation, within
        `CHECKPOINT_TIMEOUT_S`.

        A failing store never replaces the run's outcome, an exception or a cancellation on
        its way out: its error is recorded in the state and the trace as a `checkpoint` error.
        """
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
