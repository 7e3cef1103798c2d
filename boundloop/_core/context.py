"""The one per-run object: what a run was given, its state, its events, its clock, and one
turn's scratch.

The driver drives a `RunContext`, the machine's guards read its state, and the work of every
state is given it. It holds no decision of its own: facts go into `LoopState`. Its fields are
of two lifetimes. `RunContext`'s own are fixed for the session (the wiring `drive` was given,
the clock, the run's caches); `Scratch` holds what one state's work hands the next within a
turn (the planned calls, a pending retry), none of it needed to continue a run: a continued
run starts with a fresh one and rebuilds it (a run saved in `act` is validated again). Each
field says why it is not part of the `LoopState`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final, TypeAlias, cast, final

import anthropic

from .._base.cache import MessageMarkers
from .._base.recorded import Deferred
from ..events import BaseEvent, CallDecision, Error, Event
from ..metrics.observer import RunMetrics
from ..records import ErrorRecord, ToolCall, Turn
from ..redaction import recorded_call_id
from ..tools import Tool
from .invariant import RequestChecker, ResponseShape
from .trail import EventTrail

if TYPE_CHECKING:
    from anthropic.types import Message

    from ..state import LoopState
    from ..statemachine.machine import RunModel
    from .config import EventHook, LoopConfig
    from .ledger import Node


YIELD_EVERY: Final = 500
"""Calls of a batch handled between two checkpoints when validating or starting it, so the run's
deadline and a cancellation cut into a batch of any size within a few milliseconds."""

ToolSpan: TypeAlias = Callable[[ToolCall], AbstractContextManager[object]]
"""`tool_span(call)`: a context the call's tool function runs in (each attempt), which makes the call's
`execute_tool` span the current span; the traced run's hook (`otel._tools.ToolSpans.current`)."""

ModelSpan: TypeAlias = Callable[[Mapping[str, Any]], AbstractContextManager[object]]
"""`model_span(request)`: a context the model call runs in, which makes its `chat` span the current
span (the anthropic SDK's own span is its child); the traced run's hook (`otel._chat.ChatSpans.current`)."""


DeltaSink = Callable[[Event], Awaitable[None]]
"""`await sink(delta)`: hands one delta to the stream's consumer (waits while its buffer is full)."""


@final
class Watch:
    """What a streamed run tells its stream, and the stream's request to stop after a turn."""

    __slots__ = ("after_turn", "deliver", "delta")

    def __init__(self, deliver: EventHook, delta: DeltaSink) -> None:
        self.deliver = deliver
        """Called with every recorded event (deltas are not recorded), after the `on_event` hooks."""
        self.delta = delta
        """Awaited with each delta of a model call, in order."""
        self.after_turn = False
        """Set: the run stops `cancelled` when it next enters `assemble` (its turn finished)."""


@final
@dataclasses.dataclass(slots=True)
class Planned:
    """A call validation let through: its block index, its tool and the validated arguments."""

    index: int
    tool: Tool
    arguments: dict[str, Any]


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Retry:
    """The next request goes to `model`, with the refusal's credit token when it gave one
    (`_core/refusals.py`)."""

    model: str
    credit_token: str | None
    position: int = 1
    """The model's place in the fallback route, from 1."""


@final
class Scratch:
    """What one state's work hands the next within a turn; never checkpointed (see the module)."""

    __slots__ = (
        "compact_now",
        "compacted_retry",
        "counted_input",
        "fallback",
        "plan",
        "plan_records",
        "received",
        "recorded",
        "recorded_for",
        "response",
        "retried",
        "tool_raised",
    )

    def __init__(self) -> None:
        self.plan: list[Planned] | None = None
        """The calls of the current turn that validation let through in this session; `act`
        runs only these (not state: holds `Tool` objects; a run continued in `act` is validated
        again)."""
        self.plan_records: list[CallDecision] = []
        """The validation event's decision of each call in `plan`, in its order: the
        `ToolStarted` event lists these same objects (one record per call in memory, not two),
        in the `Validation` event's own list when every decided call runs; not state: the
        events hold them."""
        self.recorded: list[tuple[str, str]] = []
        """`RunContext.recorded(turn)` of `recorded_for`: derived from the turn, cached."""
        self.recorded_for: Turn | None = None
        """The turn `recorded` was derived from (not state: a cache key)."""
        self.counted_input: int | None = None
        """The next request's input tokens, as `messages.count_tokens` counted them: read by the
        request it was counted for (not state: a continued run counts again)."""
        self.received: object = None
        """The transcript's assistant message made from the last response (`_core/invariant.py`);
        not state: the transcript holds it, this is the object to compare by identity."""
        self.response: Message | ResponseShape | None = None
        """The last response: its shape, what the next request's check (`_core/invariant.py`)
        reads of it, holding the SDK's `Message` as received (`ResponseShape.message`) for its
        validation; then (`RunContext.validated`) only the shape; dropped once that request is
        built. Not state: the
        state keeps its record (`ModelResponse`); a continued run builds the `Message` from that."""
        self.fallback: Retry | None = None
        """The refused request is to be retried on the fallback model (`_core/refusals.py`); not
        state: a continued run sends its next request to the loop's model."""
        self.retried = 0
        """The last response answered the retry on the N-th model of the fallback route (0: not
        a retry); priced and recorded at once, so not state."""
        self.compact_now = False
        """A full context window: the next request compacts first (`_core/compaction.py`); not
        state: a continued run that still overflows is told so again by the API."""
        self.compacted_retry = False
        """The last response answered a request that compacted first (read as it is handled)."""
        self.tool_raised: BaseException | None = None
        """A tool function's exception with `on_tool_error="raise"`, handed from `act` to the
        run's end: the one that leaves `run()` (an exception object; the state records it in
        `errors`)."""


@final
class RunContext:
    """One run's wiring, state, events and clock, handed to each state's work; `scratch` holds
    one turn's hand-overs between states."""

    __slots__ = (
        "_hooks",
        "cancel_requested",
        "config",
        "deadline",
        "deltas",
        "deps",
        "entered",
        "epoch",
        "events",
        "markers",
        "model",
        "model_span",
        "relay",
        "request_checker",
        "scratch",
        "started",
        "state",
        "tool_span",
        "tree",
        "watch",
    )

    def __init__(
        self,
        config: LoopConfig,
        state: LoopState,
        model: RunModel,
        *,
        on_event: EventHook | None = None,
        observer: EventHook | None = None,
        tool_span: ToolSpan | None = None,
        model_span: ModelSpan | None = None,
        watch: Watch | None = None,
        deps: object = None,
    ) -> None:
        self.config = config
        """The loop's spec and wiring, as `drive` was given them: fixed for the run (not state: code
        and settings; the state records their provenance). A delegated run adds its tree's
        budget pools to its `pools` as it starts (`_core/tree.py`'s `enter`)."""
        self.state = state
        """The run: everything needed to continue it."""
        self.model = model
        """The run as the model of the loop's machine (`config.machine`), which fires its
        triggers (not state: the machine's handle on the run, added at its start, removed at its end)."""
        run_metrics = None if config.metrics is None else RunMetrics(config.metrics, state.trace_id)
        others = (observer, config.on_event, on_event, None if watch is None else watch.deliver)
        numbers = config.store is None and all(hook is None for hook in others)
        self.events = EventTrail(
            state.task_id,
            numbers=numbers,
            metrics=run_metrics if numbers else None,
            redact=config.redactor,
        )
        """The session's recorded events (not state: the event log and the result hold them). When
        nothing but the metrics hears a transition or a tool result as it happens (no hook, span,
        stream or store), the trail keeps it as its numbers and tells the metrics itself."""
        hooks = (None if run_metrics is None else run_metrics.observe, *others)
        self._hooks: tuple[EventHook, ...] = tuple(hook for hook in hooks if hook is not None)
        """Called with every event as it is recorded: the run's metrics (first: a hook raising on
        the `Stop` event cannot leave `runs_active` up), the run's `observer` (its spans, set only
        when the run is traced), neither ever raising; then the loop's hook, then the run's, then
        a streamed run's `watch` (never raising). Code, not state."""
        self.relay: tuple[EventHook, ...] = tuple(
            hook for hook in (config.on_event, on_event) if hook is not None
        )
        """The loop's and the run's `on_event` hooks: the runs this run delegates to tell them
        their events too (wiring)."""
        self.tree: Node | None = None
        """The run's place in a delegation tree (its ledger, depth and deadline): set when the run
        was started by a delegation, or at its first delegation; None for a run alone (wiring:
        the tree lives in this process)."""
        self.deps = deps
        """The run's dependencies (`run(goal, deps=...)`), handed to its tool functions in their
        `ToolContext`; never in the state, an event or a span (wiring: given again on resume)."""
        self.watch = watch
        """Set only when the run is streamed (`AgentLoop.stream`): the model is called with
        `messages.stream`, its deltas handed to the watch (`_core/streaming.py`). Wiring."""
        self.tool_span = tool_span
        """Set only when the run is traced: each tool function runs in `tool_span(call)`, so a span
        the tool function starts is a child of the call's `execute_tool` span. Wiring."""
        self.model_span = model_span
        """Set only when the run is traced: each model call runs in `model_span(request)`. Wiring."""
        now = time.perf_counter()
        self.started = now - state.elapsed_s
        """When the run would have started on the process clock had its earlier sessions run just
        before this one: `perf_counter() - started` is its elapsed time (not state: meaningless in
        another process)."""
        self.epoch = time.time() - now
        """Add `time.perf_counter()` to get epoch seconds: the events' `at`, one clock read per event."""
        self.deadline: float | None = None
        """The run's time limit on anyio's clock, when `Budget.timeout_s` is set (process clock)."""
        self.entered = now
        """When the run entered its current state (`time.perf_counter()`): the transition's duration."""
        self.cancel_requested = False
        """The run's cancel event was set: a cancelled scope means `cancelled`, not `timeout`
        (this session's cancel event, not the run's)."""
        self.request_checker = RequestChecker()
        """The request invariant's incremental check (derived from the transcript, rebuilt by a
        continued run)."""
        self.markers = MessageMarkers(config.heads)
        """The breakpoints the transcript holds, counted once per message (derived, rebuilt)."""
        self.deltas: list[Event] | None = None
        """The streamed deltas not yet in the event log; None: the run's store logs none
        (written to the log, never to the state)."""
        self.scratch = Scratch()
        """One turn's hand-overs between states (see `Scratch`)."""

    @property
    def elapsed_s(self) -> float:
        """Wall-clock seconds the run has taken, earlier sessions included."""
        return time.perf_counter() - self.started

    def next_seq(self) -> int:
        """The next event's `seq` (counted in the state: it goes on across resumes)."""
        state = self.state
        seq = state.next_seq
        state.next_seq = seq + 1
        return seq

    def event(self, cls: type[BaseEvent], /, **fields: Any) -> None:
        """Record an event of type `cls` now: its `seq`, `task_id`, `at` and `step` filled in."""
        state = self.state
        event: Any = cls(  # one of `Event`'s classes
            seq=self.next_seq(),
            task_id=state.task_id,
            at=self.epoch + time.perf_counter(),
            step=state.step,
            **fields,
        )
        self.emit(event)

    def delta(self, cls: type[BaseEvent], /, **fields: Any) -> Event:
        """A delta event of type `cls`, numbered like any event, neither recorded nor told to the
        hooks; kept for the event log only when its store logs deltas (`deltas` is a list)."""
        state = self.state
        event = cast(
            Event,
            cls(
                seq=self.next_seq(),
                task_id=state.task_id,
                at=self.epoch + time.perf_counter(),
                step=state.step,
                **fields,
            ),
        )
        if self.deltas is not None:
            self.deltas.append(event)
        return event

    def emit(self, event: Event) -> None:
        """Append to the events and tell the `on_event` hooks, as it happens."""
        self.events.append(event)
        for hook in self._hooks:
            try:
                hook(event)
            except Exception:
                # A failing hook fails the run; it is not called again while the run stops.
                self._hooks = tuple(other for other in self._hooks if other is not hook)
                raise

    def error(self, kind: str, exc: BaseException) -> None:
        """Record an exception in the state and the events, with secrets redacted."""
        status_code: int | None = None
        request_id: str | None = None
        if isinstance(exc, anthropic.APIStatusError):
            status_code = exc.status_code
            request_id = exc.request_id
        record = ErrorRecord(
            kind=kind,
            step=self.state.step,
            type=type(exc).__name__,
            message=self.redact(str(exc)),
            status_code=status_code,
            request_id=request_id,
        )
        self.state.errors.append(record)
        self.event(
            Error,
            error_kind=kind,
            type=record.type,
            message=record.message,
            status_code=status_code,
            request_id=request_id,
        )

    def response(self) -> Message:
        """The SDK `Message` of the last response: as received in this session, else built from
        its record (a run continued from a checkpoint)."""
        response = self.scratch.response
        if isinstance(response, ResponseShape) and response.message is not None:
            return response.message  # not validated yet: held with its shape
        if response is None or isinstance(response, ResponseShape):
            response = self.scratch.response = self.state.responses[-1].message()
        return response

    def validated(self) -> None:
        """The last response is validated: its SDK `Message` goes (a run holds no SDK object
        while its tools run), the next request's check keeps its `ResponseShape`."""
        scratch = self.scratch
        response = scratch.response
        if isinstance(response, ResponseShape):
            response.message = None  # its shape, made with the transcript's message, stays
        elif response is not None:
            scratch.response = ResponseShape(response)

    def deferred(self, value: object) -> Deferred:
        """`value` for an event: kept by reference, written as redacted JSON."""
        # The redactor itself: a bound `self.redact` per wrapper would cost 64 bytes and keep
        # this context alive for as long as the events.
        return Deferred(value, self.config.redactor)

    def redact(self, text: str) -> str:
        """Remove secrets (the default and your patterns, then your `redact` hook) from text."""
        return self.config.redactor(text)

    def recorded(self, turn: Turn) -> list[tuple[str, str]]:
        """Each call of `turn` as the events record it, (tool name, tool_use id), computed once a
        turn: a registered name as it is, a name the model made up redacted; the API's own ids as
        they are, anything else redacted."""
        scratch = self.scratch
        if scratch.recorded_for is not turn:
            tools, redact = self.config.tools, self.config.redactor
            scratch.recorded = [
                (call.name if call.name in tools else redact(call.name), recorded_call_id(call.id, redact))
                for call in turn.calls
            ]
            scratch.recorded_for = turn
        return scratch.recorded
