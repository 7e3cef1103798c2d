"""A run whose transitions and tool results nothing but its metrics hears keeps each as its
numbers (`boundloop/_core/trail.py`): its events read back as the same typed `Transition`s and
`ToolResult`s, its metrics count every one, and no such object exists until the events are read."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import cast

import pytest
from prometheus_client import CollectorRegistry

from boundloop import AgentLoop, LoopMetrics, LoopResult, Observers, tool
from boundloop.events import Event, ToolResult, ToolStarted, Transition, Validation
from boundloop.redaction import Redaction
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


def _transitions_alive(kind: type[Event] = Transition) -> int:
    gc.collect()
    return sum(1 for thing in gc.get_objects() if type(thing) is kind)


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


@tool
async def broken(key: str) -> str:
    """Fail."""
    raise RuntimeError(f"no {key}")


ANSWERS = [
    # ok, an error, a call of a tool the loop does not have (a name the trace redacts), a repeat
    tool_use(("lookup", {"key": "a"}), ("broken", {"key": "sk-ant-api03-" + "x" * 40})),
    tool_use(("made_up_sk-ant-api03-" + "y" * 40, {"key": "c"}), ("lookup", {"key": "a"})),
    text("done"),
]


def _answers_loop(registry: CollectorRegistry | None = None, heard: list[Event] | None = None) -> AgentLoop:
    metrics = None if registry is None else LoopMetrics(registry=registry)
    on_event = None if heard is None else heard.append
    return scripted_loop(
        ANSWERS,
        [lookup, broken],
        observers=Observers(metrics=metrics, on_event=on_event),
        redaction=Redaction(patterns=[r"key"]),
    )


def _results(events: Sequence[Event]) -> list[tuple[object, ...]]:
    """Each tool result's fields but its clock readings, `input` and `content` as written."""
    return [
        (
            event.seq,
            event.task_id,
            event.step,
            event.tool,
            event.tool_use_id,
            event.outcome,
            event.is_error,
            event.by_human,
            event.reason,
            event.attempts,
            None if event.input is None else event.input.json(),
            None if event.content is None else event.content.json(),
        )
        for event in events
        if isinstance(event, ToolResult)
    ]


async def test_a_quiet_run_reads_back_the_tool_results_a_heard_run_records() -> None:
    heard: list[Event] = []
    told = await _answers_loop(heard=heard).run("go", task_id="t-answers")
    quiet = await _answers_loop().run("go", task_id="t-answers")
    results = _results(quiet.events)
    assert results == _results(told.events) == _results(heard)
    assert [(result[5], result[6]) for result in results] == [
        ("ok", False),
        ("error", True),
        ("invalid", True),
        ("repeated", False),
    ]
    # Written with the loop's redactor: the secret in the input, the made-up name.
    assert "sk-ant" not in repr(results)
    assert "[REDACTED" in str(results[1][10])
    assert "key" not in str(results[0][10])
    ran = [event for event in quiet.events if isinstance(event, ToolResult) and event.attempts]
    assert ran
    assert all(event.duration_s > 0 for event in ran)


async def test_no_tool_result_is_built_until_the_events_are_read() -> None:
    quiet = await _run()
    before = _transitions_alive(ToolResult)
    events = list(quiet.events)  # the first read builds them
    assert _transitions_alive(ToolResult) == before + 3
    assert sum(isinstance(event, ToolResult) for event in events) == 3
    heard_before = _transitions_alive(ToolResult)
    told = await _run(heard=[])
    assert _transitions_alive(ToolResult) == heard_before + 3  # built as they happen
    del told


async def test_the_metrics_count_every_tool_result_kept_as_numbers() -> None:
    counts: list[dict[tuple[str, str], float]] = []
    hearing: tuple[list[Event] | None, ...] = (None, [])
    for heard in hearing:
        registry = CollectorRegistry()
        await _answers_loop(registry, heard).run("go", task_id="t-answers")
        counts.append(
            {
                (sample.labels["tool"], sample.labels["outcome"]): sample.value
                for family in registry.collect()
                for sample in family.samples
                if sample.name == "boundloop_tool_calls_total"
            }
        )
    quiet, told = counts
    assert quiet == told
    assert quiet[("lookup", "ok")] == 1
    assert quiet[("broken", "error")] == 1


async def test_a_quiet_run_reads_back_the_validations_and_batch_starts_a_heard_run_records() -> None:
    heard: list[Event] = []
    told = await _answers_loop(heard=heard).run("go", task_id="t-answers")
    before = _transitions_alive(ToolStarted), _transitions_alive(Validation)
    quiet = await _answers_loop().run("go", task_id="t-answers")
    # kept as numbers: nothing built yet
    assert (_transitions_alive(ToolStarted), _transitions_alive(Validation)) == before

    def turns(events: Sequence[Event]) -> list[tuple[object, ...]]:
        return [
            (event.seq, event.task_id, event.step, event.kind, event.calls)
            + (
                (event.decision, event.stop_reason, event.reason)
                if isinstance(event, Validation)
                else (None,)
            )
            for event in events
            if isinstance(event, ToolStarted | Validation)
        ]

    kept = turns(quiet.events)
    assert kept == turns(told.events) == turns(heard)
    # Two turns of calls; the second runs none (one is invalid, one a repeat).
    assert [(entry[3], entry[5], len(cast(list[object], entry[4]))) for entry in kept] == [
        ("validation", "execute", 2),
        ("tool_started", None, 2),
        ("validation", "execute", 2),
        ("tool_started", None, 0),
    ]
    clock = [event.at for event in quiet.events if not isinstance(event, ToolResult)]
    assert clock == sorted(clock)  # each one's clock reading in its place


async def test_a_validation_that_decides_more_than_execute_is_recorded_as_it_happens() -> None:
    """Only a validation that lets the calls run, with no stop reason or reason, is kept as its
    numbers: one that stops the run (a response cut at max_tokens) is built with what it says."""
    script = [tool_use(("lookup", {"key": "a"})), text("cut", stop_reason="max_tokens")]
    results = []
    heard: list[Event] = []
    for on_event in (None, heard.append):
        loop = scripted_loop(script, [lookup], observers=Observers(metrics=None, on_event=on_event))
        results.append(await loop.run("go", task_id="t-cut"))
    quiet, told = (
        [
            (event.seq, event.decision, event.stop_reason, event.reason, event.calls)
            for event in result.events
            if isinstance(event, Validation)
        ]
        for result in results
    )
    assert quiet == told
    assert [entry[1] for entry in quiet] == ["execute", "stop"]
    assert quiet[1][2] is not None


async def test_a_quiet_runs_tool_results_are_built_from_its_observations_as_they_are_when_read() -> None:
    """What `LoopResult.events` says: a tool result kept as its numbers is built from the run's
    `Observation` when the events are first read, so an edit made before then is read."""
    result = await _run()
    first = result.state.observations[0]
    first.content = "[scrubbed]"
    (built, *_) = [event for event in result.events if isinstance(event, ToolResult)]
    assert built.content is not None
    assert built.content.json() == "[scrubbed]"
    first.content = "edited after the read"
    assert built.content.json() == "[scrubbed]"  # built once: later edits are not read
