"""`RunStream`: a run watched as it happens (`AgentLoop.stream`, `AgentLoop.stream_resume`).

The run is a task of the stream's own task group: entering the stream starts it, leaving the
`async with` cancels it if it has not stopped and waits until it has, so no run outlives its
stream. Events travel through one memory object stream in the order the run records them;
deltas count against the buffer's bound (the producer waits for room), the other events never
wait and are never dropped (the run keeps them in `LoopResult.events` anyway).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Generic, TypeAlias, TypedDict, final

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

import boundloop._core as _core  # its names load when a stream starts (the seam is lazy)

from .._lazy import claim
from ..errors import ConfigurationError
from ..events import Event
from ..state import LoopResult, OutputT

if TYPE_CHECKING:
    from anthropic.types import MessageParam
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from .._base.model_settings import ModelSettings
    from ..pools.pool import BudgetPool
    from ..state import Budget
    from .config import EventHook, LoopConfig
    from .context import Watch

DEFAULT_BUFFER: Final = 64
"""Deltas a stream holds for a consumer that has not read them yet, by default."""

DELTA_KINDS: Final = frozenset({"text_delta", "thinking_delta", "tool_input_delta"})

RunTask: TypeAlias = "Callable[[Watch, anyio.Event], Awaitable[LoopResult[OutputT]]]"
"""The run a stream drives: `run(watch, cancel)`."""


class RunOptions(TypedDict, total=False):
    """The arguments of `AgentLoop.run` that `AgentLoop.stream` passes on (the handle cancels)."""

    task_id: str | None
    trace_id: str | None
    metadata: Mapping[str, object] | None
    messages: Sequence[MessageParam] | None
    on_event: EventHook | None
    settings: ModelSettings | None
    pools: Sequence[BudgetPool]


class ResumeOptions(TypedDict, total=False):
    """The arguments of `AgentLoop.resume` that `AgentLoop.stream_resume` passes on."""

    approvals: Mapping[str, bool | str] | None
    reply: str | None
    on_event: EventHook | None
    pools: Sequence[BudgetPool]
    budget: Budget | None


def stream_new(
    config: LoopConfig, goal: str | None, options: RunOptions, buffer: int, deps: object = None
) -> RunStream[Any]:
    """`AgentLoop.stream`: a new run as a stream."""
    return RunStream(
        lambda watch, cancel: _core.start_new(config, goal, cancel=cancel, watch=watch, deps=deps, **options),
        buffer=buffer,
    )


def stream_resumed(
    config: LoopConfig, task_id: str, options: ResumeOptions, buffer: int, deps: object = None
) -> RunStream[Any]:
    """`AgentLoop.stream_resume`: a stored run continued as a stream."""
    return RunStream(
        lambda watch, cancel: _core.resume_stored(
            config,
            task_id,
            approvals=options.get("approvals"),
            reply=options.get("reply"),
            on_event=options.get("on_event"),
            cancel=cancel,
            watch=watch,
            deps=deps,
        ),
        buffer=buffer,
    )


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StreamStatistics:
    """A stream's buffer at one moment (`RunStream.statistics()`)."""

    events_buffered: int
    """Events sent and not read yet, deltas included."""
    deltas_buffered: int
    """Deltas sent and not read yet: never more than `buffer`."""
    buffer: int
    """The bound on buffered deltas."""
    peak_deltas_buffered: int
    """The most deltas buffered at once so far."""
    producer_waiting: bool
    """The run is waiting for room for its next delta."""


@final
class RunStream(Generic[OutputT]):
    """A run as an async iterator of its events, deltas included, in order; cancellable.

    `async with loop.stream(goal) as run:` starts the run, `async for event in run:` reads its
    events until its `Stop`, and `run.result` is then its `LoopResult`. Leaving the `async
    with` cancels a run still going (`cancelled`, checkpoint written) and waits for it: breaking
    out of the loop never leaves the run running.

    Deltas (`TextDelta`, `ThinkingDelta`, `ToolInputDelta`) come from the model's stream as it
    arrives; at most `buffer` of them wait for the consumer, then the run waits for it to read
    (backpressure). They are not kept in `LoopResult.events`, the trace or the hooks.

    An exception the run raises (`TaskExists`, `UnhandledStop`, a tool's with
    `on_tool_error="raise"`, ...) is raised by the iteration after the events before it, or on
    leaving the `async with` when the events were not read to the end.
    """

    def __init__(self, run: RunTask[OutputT], *, buffer: int = DEFAULT_BUFFER) -> None:
        if buffer < 1:
            raise ConfigurationError(f"a stream's buffer must hold at least one delta, not {buffer}")
        self._run = run
        self._buffer = buffer
        self._result: LoopResult[OutputT] | None = None
        self._error: Exception | None = None
        self._deltas = 0
        self._peak = 0
        self._group: TaskGroup | None = None
        self._watch = _core.Watch(self._deliver, self._delta)
        self._send: MemoryObjectSendStream[Event]
        self._receive: MemoryObjectReceiveStream[Event]
        self._room: anyio.Semaphore
        self._cancel: anyio.Event
        self._stopped: anyio.Event

    @property
    def result(self) -> LoopResult[OutputT] | None:
        """The run's result once it has stopped; None before, or when the run raised."""
        return self._result

    def statistics(self) -> StreamStatistics:
        """The buffer now: how many events and deltas wait for the consumer."""
        return StreamStatistics(
            events_buffered=self._receive.statistics().current_buffer_used,
            deltas_buffered=self._deltas,
            buffer=self._buffer,
            peak_deltas_buffered=self._peak,
            producer_waiting=self._room.statistics().tasks_waiting > 0,
        )

    async def cancel(self, *, after_turn: bool = False) -> None:
        """Stop the run `cancelled`.

        Now (the default): the model call or tool batch in progress is cancelled, every open
        call answered, the checkpoint written; returns once the run has stopped (`result` set).
        With `after_turn=True`: the turn in progress (its model call and tool batch) finishes
        first and the run stops before the next model call; returns at once (keep reading: the
        turn's deltas may be waiting for room in the buffer).
        """
        if after_turn:
            self._watch.after_turn = True
            return
        self._cancel.set()
        await self._stopped.wait()

    async def __aenter__(self) -> RunStream[OutputT]:
        self._send, self._receive = anyio.create_memory_object_stream[Event](math.inf)
        self._room = anyio.Semaphore(self._buffer)
        self._cancel = anyio.Event()
        self._stopped = anyio.Event()
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        group.start_soon(self._produce)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self._cancel.set()  # a run still going is cancelled; a stopped run ignores it
        assert self._group is not None
        try:
            suppressed = await self._group.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            if exc is not None and all(inner is exc for inner in group.exceptions):
                return None  # the body's own exception, as itself (not in a group)
            raise
        finally:
            self._receive.close()
        error, self._error = self._error, None
        if error is not None and exc_type is None:
            raise error
        return suppressed

    def __aiter__(self) -> RunStream[OutputT]:
        return self

    async def __anext__(self) -> Event:
        # An event already waiting is taken without a pass through the event loop (a cancelled
        # reader still stops here): the reader catches up with the run at once instead of one
        # event per pass, which would leave each delta waiting behind the ones before it.
        try:
            await anyio.lowlevel.checkpoint_if_cancelled()
            try:
                event = self._receive.receive_nowait()
            except anyio.WouldBlock:
                event = await self._receive.receive()
        except anyio.EndOfStream:
            error, self._error = self._error, None
            if error is not None:
                raise error from None
            raise StopAsyncIteration from None
        if event.kind in DELTA_KINDS:
            self._deltas -= 1
            self._room.release()
        return event

    async def _produce(self) -> None:
        try:
            self._result = await self._run(self._watch, self._cancel)
        except Exception as exc:  # raised to the consumer, after the events before it
            self._error = exc
        finally:
            self._stopped.set()
            self._send.close()

    def _deliver(self, event: Event) -> None:
        try:
            self._send.send_nowait(event)  # an unbounded buffer: never waits, never drops
        except (
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ):  # pragma: no cover  # the consumer is gone
            pass

    async def _delta(self, event: Event) -> None:
        # Waits only for room: the model's stream already yields between its events, a second
        # pass through the event loop per delta would only cost (one resumption of the run's
        # whole call stack).
        try:
            self._room.acquire_nowait()
        except anyio.WouldBlock:
            await self._room.acquire()
        self._deltas += 1
        self._peak = max(self._peak, self._deltas)
        self._send.send_nowait(event)


claim("boundloop", RunStream, StreamStatistics)  # reported at its public home
