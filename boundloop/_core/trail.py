"""The session's recorded events (`LoopResult.events`): a sequence that keeps the events nobody
heard as their numbers.

A run records five transitions, a `Validation` and a `ToolStarted` a turn, and a `ToolResult` a
tool call. When nothing hears them as they happen (no `on_event` hook, no span, no stream, no
store to log or checkpoint them; the metrics read their numbers), the run keeps each as its
numbers alone, beside the object of the state that holds the rest of what it says: a
transition as `seq`, `step`, its edge, `at` and `duration_s` (40 bytes in two arrays instead of
a 160-byte `Transition` and its two floats); a tool result as the same numbers beside the run's
`Observation` of the call (instead of a 180-byte `ToolResult`, two floats and two `Deferred`
wrappers); a validation that lets the calls run and the batch's start as their numbers beside
the list of the calls' decisions, which both events hold (instead of the events and their
floats). The events are built when first read, once: reading `LoopResult.events` gives the same
typed events, in the same order, as a run that built each one as it happened, as long as the
state's record they are built from is not edited before they are read (the state is the run's
record: a `LoopResult.events` read after a caller reassigns a field of an `Observation` reads
that field's new value).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Final, cast, final, overload

from .._base.recorded import Deferred
from ..events import CallDecision, Event, ToolResult, ToolStarted, Transition, Validation
from ..metrics.observer import RunMetrics
from ..records import Observation

__all__ = ["EventTrail"]

Edge = tuple[str, str, str, str | None]
"""A transition's source, dest, trigger and guard."""

_EDGES: Final[list[Edge]] = []
"""Every edge a trail has kept, by number (the table's edges: a few dozen in a process)."""
_NUMBERS: Final[dict[Edge, int]] = {}
"""An edge -> its number in `_EDGES`."""
_ANSWER: Final = -1
"""The edge number kept for a tool result (its `Observation` is in the events' place)."""
_STARTED: Final = -2
"""The edge number kept for a batch's start (its calls' decisions are in the events' place)."""
_VALIDATED: Final = -3
"""The edge number kept for a validation that lets calls run (its decisions in the events' place)."""

Kept = Observation | list[CallDecision] | None
"""What stands in the place of an event kept as its numbers: None for a transition, the call's
`Observation` for a tool result, the turn's decisions for its validation and its batch's start."""


def _number(edge: Edge) -> int:
    number = _NUMBERS.get(edge)
    if number is None:
        number = _NUMBERS[edge] = len(_EDGES)
        _EDGES.append(edge)
    return number


@final
class EventTrail(Sequence[Event]):
    """A session's events in order: `append` an event, `moved` for a transition kept as its
    numbers, `answered` for a tool result, `validated` and `started` for a turn's validation
    and batch; reading it (index,
    slice, iteration) builds the kept events, once.

    Args:
        task_id: the run's task id (every event's `task_id`).
        numbers: whether the run keeps its transitions and tool results as numbers (nothing but
            its metrics hears them as they happen).
        metrics: the run's metrics, told each event kept as numbers.
        redact: the run's redactor, which a kept tool result's `input` and `content` are written
            with (as the events the run builds are).
    """

    __slots__ = ("_counts", "_events", "_metrics", "_redact", "_task_id", "_times", "numbers")

    def __init__(
        self,
        task_id: str,
        *,
        numbers: bool = False,
        metrics: RunMetrics | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self._task_id = task_id
        self.numbers = numbers
        """Whether the run keeps its transitions, tool results, validations and batch starts as
        numbers (`moved`, `answered`, `validated`, `started`), or records each as an event told
        to its hooks."""
        self._metrics = metrics
        self._redact = redact
        self._events: list[Event | Kept] = []
        """The events; a `Kept` where one is kept as its numbers (in order, in the arrays)."""
        self._counts = array("q")
        """Each kept event's `seq`, `step` and edge number (a negative number: not an edge, the
        kind of event kept)."""
        self._times = array("d")
        """Each kept event's `at` and `duration_s` (0 for one that has none)."""

    def append(self, event: Event) -> None:
        """Record an event."""
        self._events.append(event)

    def moved(self, seq: int, step: int, edge: Edge, at: float, duration_s: float) -> None:
        """Record a transition by its numbers (built as a `Transition` when the events are read);
        the run's metrics count it."""
        if self._metrics is not None:
            self._metrics.moved(edge[0], edge[1], at, duration_s)
        self._keep(seq, step, _number(edge), at, duration_s, None)

    def answered(self, seq: int, step: int, at: float, duration_s: float, observation: Observation) -> None:
        """Record a tool result by its numbers and the call's `observation` (built as a
        `ToolResult` when the events are read); the run's metrics count it. Only for a result
        whose event says nothing the observation does not: its tool name and id recorded as
        they are, no human's reason."""
        if self._metrics is not None:
            self._metrics.answered(
                observation.tool, observation.outcome, at, duration_s if observation.attempts else None
            )
        self._keep(seq, step, _ANSWER, at, duration_s, observation)

    def validated(self, seq: int, step: int, at: float, calls: list[CallDecision]) -> None:
        """Record a turn's validation that lets calls run (`decision="execute"`, no stop reason or
        reason) by its numbers and its calls' decisions (built as a `Validation` when the events
        are read); the metrics count nothing of it. Only after this session's first event
        (which began the run's metrics)."""
        assert self._events, "a validation follows the session's first event"
        self._keep(seq, step, _VALIDATED, at, 0.0, calls)

    def started(self, seq: int, step: int, at: float, calls: list[CallDecision]) -> None:
        """Record a batch's start by its numbers and its calls' decisions (built as a
        `ToolStarted` when the events are read); the metrics count nothing of it. Only after
        this session's first event (which began the run's metrics)."""
        assert self._events, "a batch starts after the session's first event"
        self._keep(seq, step, _STARTED, at, 0.0, calls)

    def _keep(self, seq: int, step: int, number: int, at: float, duration_s: float, held: Kept) -> None:
        self._events.append(held)
        self._counts.extend((seq, step, number))
        self._times.extend((at, duration_s))

    def _built(self) -> list[Event | Kept]:
        """The events, every kept one built (from here on, held as such): no `Kept` left."""
        if self._counts:
            counts, times, events = self._counts, self._times, self._events
            kept = 0
            for position, event in enumerate(events):
                if event is None or type(event) is Observation or type(event) is list:
                    seq, step, number = counts[3 * kept : 3 * kept + 3]
                    events[position] = self._event(
                        seq, step, number, times[2 * kept], times[2 * kept + 1], event
                    )
                    kept += 1
            self._counts, self._times = array("q"), array("d")
        return self._events

    def _event(self, seq: int, step: int, number: int, at: float, duration_s: float, held: Kept) -> Event:
        """The event kept as these numbers and `held`."""
        task_id = self._task_id
        if number >= 0:
            return self._transition(seq, step, number, at, duration_s)
        if number == _ANSWER:
            return self._tool_result(seq, step, cast(Observation, held), at, duration_s)
        calls = cast(list[CallDecision], held)
        if number == _STARTED:
            return ToolStarted.of(seq=seq, task_id=task_id, at=at, step=step, calls=calls)
        return Validation.of(
            seq=seq,
            task_id=task_id,
            at=at,
            step=step,
            decision="execute",
            stop_reason=None,
            reason=None,
            calls=calls,
        )

    def _transition(self, seq: int, step: int, number: int, at: float, duration_s: float) -> Transition:
        source, dest, trigger, guard = _EDGES[number]
        return Transition.of(
            seq=seq,
            task_id=self._task_id,
            at=at,
            step=step,
            source=source,
            dest=dest,
            trigger=trigger,
            guard=guard,
            duration_s=duration_s,
        )

    def _tool_result(
        self, seq: int, step: int, observation: Observation, at: float, duration_s: float
    ) -> ToolResult:
        return ToolResult.of(
            seq=seq,
            task_id=self._task_id,
            at=at,
            step=step,
            tool=observation.tool,
            tool_use_id=observation.tool_use_id,
            outcome=observation.outcome,
            is_error=observation.is_error,
            by_human=observation.by_human,
            reason=None,
            attempts=observation.attempts,
            duration_s=duration_s,
            input=Deferred(observation.input, self._redact),
            content=Deferred(observation.content, self._redact),
        )

    def __len__(self) -> int:
        return len(self._events)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        return cast(list[Event], self._built())[index]

    def __iter__(self) -> Iterator[Event]:
        return iter(cast(list[Event], self._built()))

    def __eq__(self, other: object) -> bool:
        """Equal to a sequence of the same events (a list of them included)."""
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return list(self) == list(cast(Sequence[object], other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EventTrail({list(self)!r})"
