"""The session's recorded events (`LoopResult.events`): a sequence that keeps a transition nobody
heard as its numbers.

A run records five transitions a turn. When nothing hears a transition as it happens (no
`on_event` hook, no span, no stream, no store to log or checkpoint it; the metrics read its
numbers), the run keeps it as its numbers alone: `seq`, `step`, its edge, `at` and
`duration_s`, 40 bytes in two arrays instead of a 160-byte `Transition` and its two floats.
The `Transition` is built when the events are first read, once: reading `LoopResult.events`
gives the same typed events, in the same order, as a run that built each one as it happened.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Final, cast, final, overload

from ..events import Event, Transition
from ..metrics.observer import RunMetrics

__all__ = ["EventTrail"]

Edge = tuple[str, str, str, str | None]
"""A transition's source, dest, trigger and guard."""

_EDGES: Final[list[Edge]] = []
"""Every edge a trail has kept, by number (the table's edges: a few dozen in a process)."""
_NUMBERS: Final[dict[Edge, int]] = {}
"""An edge -> its number in `_EDGES`."""


def _number(edge: Edge) -> int:
    number = _NUMBERS.get(edge)
    if number is None:
        number = _NUMBERS[edge] = len(_EDGES)
        _EDGES.append(edge)
    return number


@final
class EventTrail(Sequence[Event]):
    """A session's events in order: `append` an event, or `moved` for a transition kept as its
    numbers; reading it (index, slice, iteration) builds the kept transitions, once.

    Args:
        task_id: the run's task id (every event's `task_id`).
        numbers: whether the run keeps its transitions as numbers (nothing but its metrics
            hears them as they happen).
        metrics: the run's metrics, told each transition kept as numbers.
    """

    __slots__ = ("_counts", "_events", "_metrics", "_task_id", "_times", "numbers")

    def __init__(self, task_id: str, *, numbers: bool = False, metrics: RunMetrics | None = None) -> None:
        self._task_id = task_id
        self.numbers = numbers
        """Whether the run keeps its transitions as numbers (`moved`), or records each as a
        `Transition` told to its hooks."""
        self._metrics = metrics
        self._events: list[Event | None] = []
        """The events; None where a transition is kept as numbers (in order, in the arrays)."""
        self._counts = array("q")
        """Each kept transition's `seq`, `step` and edge number."""
        self._times = array("d")
        """Each kept transition's `at` and `duration_s`."""

    def append(self, event: Event) -> None:
        """Record an event."""
        self._events.append(event)

    def moved(self, seq: int, step: int, edge: Edge, at: float, duration_s: float) -> None:
        """Record a transition by its numbers (built as a `Transition` when the events are read);
        the run's metrics count it."""
        if self._metrics is not None:
            self._metrics.moved(edge[0], edge[1], at, duration_s)
        self._events.append(None)
        self._counts.extend((seq, step, _number(edge)))
        self._times.extend((at, duration_s))

    def _built(self) -> list[Event | None]:
        """The events, every kept transition built (from here on, held as such): no None left."""
        if self._counts:
            counts, times, events = self._counts, self._times, self._events
            kept = 0
            for position, event in enumerate(events):
                if event is None:
                    seq, step, number = counts[3 * kept : 3 * kept + 3]
                    source, dest, trigger, guard = _EDGES[number]
                    events[position] = Transition.of(
                        seq=seq,
                        task_id=self._task_id,
                        at=times[2 * kept],
                        step=step,
                        source=source,
                        dest=dest,
                        trigger=trigger,
                        guard=guard,
                        duration_s=times[2 * kept + 1],
                    )
                    kept += 1
            self._counts, self._times = array("q"), array("d")
        return self._events

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
