"""A run whose transitions nothing but its metrics hears keeps each as its numbers
(`boundloop/_core/trail.py`): its events read back as the same typed `Transition`s, its
metrics count every one, and no `Transition` object exists until the events are read."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry

from boundloop import AgentLoop, LoopMetrics, LoopResult, Observers, tool
from boundloop.events import Event, Transition
from tests.helpers import scripted_loop, text, tool_use

SCRIPT = [
    tool_use(("lookup", {"key": "a"}), ("lookup", {"key": "b"})),
    tool_use(("lookup", {"key": "c"})),
    text("done"),
]


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def _loop(registry: CollectorRegistry | None = None, heard: list[Event] | None = None) -> AgentLoop:
    metrics = None if registry is None else LoopMetrics(registry=registry)
    on_event = None if heard is None else heard.append
    return scripted_loop(SCRIPT, [lookup], observers=Observers(metrics=metrics, on_event=on_event))


async def _run(
    registry: CollectorRegistry | None = None, heard: list[Event] | None = None
) -> LoopResult[str]:
    return await _loop(registry, heard).run("go", task_id="t-trail")


def _edges(events: Sequence[Event]) -> list[tuple[int, str, int, str, str, str, str | None]]:
    """Each transition's fields but its clock readings."""
    return [
        (event.seq, event.task_id, event.step, event.source, event.dest, event.trigger, event.guard)
        for event in events
        if isinstance(event, Transition)
    ]


def _transitions_alive() -> int:
    gc.collect()
    return sum(1 for thing in gc.get_objects() if type(thing) is Transition)


async def test_a_quiet_run_reads_back_the_transitions_a_heard_run_records() -> None:
    heard: list[Event] = []
    told = await _run(heard=heard)
    quiet = await _run()
    assert [event.kind for event in quiet.events] == [event.kind for event in told.events]
    assert _edges(quiet.events) == _edges(told.events) == _edges(heard)
    assert len(_edges(quiet.events)) == 13  # three turns: 5 + 5 + 3 edges
    moves = [event for event in quiet.events if isinstance(event, Transition)]
    # The clock readings are kept too: each `at` in order, each duration the time in `source`.
    assert all(move.duration_s >= 0 for move in moves)
    assert [move.at for move in moves] == sorted(move.at for move in moves)
    assert moves[1].at - moves[0].at == pytest.approx(moves[1].duration_s, abs=1e-6)


async def test_no_transition_is_built_until_the_events_are_read() -> None:
    before = _transitions_alive()
    result = await _run()
    assert _transitions_alive() == before  # kept as numbers: nothing built yet
    events = list(result.events)
    assert _transitions_alive() == before + 13
    assert list(result.events) == events  # built once: the same objects read again
    assert all(a is b for a, b in zip(result.events, events, strict=True))


async def test_a_heard_run_records_each_transition_as_it_happens() -> None:
    heard: list[Event] = []
    before = _transitions_alive()
    result = await _run(heard=heard)
    assert _transitions_alive() == before + 13
    assert [event for event in heard if isinstance(event, Transition)] == [
        event for event in result.events if isinstance(event, Transition)
    ]


async def test_the_metrics_count_every_transition_kept_as_numbers() -> None:
    counts: list[dict[tuple[str, str], float]] = []
    hearing: tuple[list[Event] | None, ...] = (None, [])
    for heard in hearing:
        registry = CollectorRegistry()
        await _run(registry, heard)
        counts.append(
            {
                (sample.labels["source"], sample.labels["dest"]): sample.value
                for family in registry.collect()
                if family.name == "boundloop_transitions"
                for sample in family.samples
                if sample.name == "boundloop_transitions_total"
            }
        )
    quiet, told = counts
    assert quiet == told
    assert quiet[("act", "observe")] == 2
    assert sum(quiet.values()) == 13


async def test_the_events_read_as_a_sequence() -> None:
    result = await _run()
    events = list(result.events)
    assert len(result.events) == len(events)
    assert result.events[2:5] == events[2:5]
    assert result.events[-1] is events[-1]
    assert result.events == events
    assert result.events != events[:-1]
