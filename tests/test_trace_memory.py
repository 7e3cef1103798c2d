"""The cheap constructors of trace events and records: the same objects as the public
constructors build, immutable, and small (shared data where there is nothing of their own)."""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import pickle
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from boundloop import tool, trace
from boundloop.records import CallResult, Observation, ToolCall, Turn
from boundloop.trace import TraceEvent, read_trace, write_trace
from tests.helpers import scripted_loop, text, tool_use


def public_transition(guard: str | None) -> TraceEvent:
    return TraceEvent(
        kind="transition",
        step=2,
        at=1_700_000_000.5,
        source="validate",
        dest="act",
        trigger="validated",
        duration_s=0.25,
        data={} if guard is None else {"guard": guard},
    )


def fast_transition(guard: str | None) -> TraceEvent:
    return TraceEvent.transition(2, 1_700_000_000.5, "validate", "act", "validated", 0.25, guard)


@pytest.mark.parametrize("guard", [None, "has_tool_calls"])
def test_transition_is_the_event_the_constructor_builds(guard: str | None) -> None:
    """Same type, fields, equality, repr, JSON and dataclass views as `TraceEvent(...)`."""
    fast, public = fast_transition(guard), public_transition(guard)
    assert type(fast) is TraceEvent
    assert fast == public
    assert public == fast
    assert repr(fast) == repr(public)
    assert fast.to_dict() == public.to_dict()
    assert json.dumps(fast.to_dict()) == json.dumps(public.to_dict())
    assert dataclasses.asdict(fast) == dataclasses.asdict(public)
    assert [field.name for field in dataclasses.fields(fast)] == [
        "kind",
        "step",
        "at",
        "source",
        "dest",
        "trigger",
        "duration_s",
        "data",
    ]
    assert dataclasses.replace(fast, step=3) == dataclasses.replace(public, step=3)
    assert TraceEvent.from_dict(fast.to_dict()) == fast


def test_of_is_the_event_the_constructor_builds() -> None:
    data: dict[str, Any] = {"stop_reason": "end_turn", "tools": ["lookup"], "duration_s": 0.5}
    fast = TraceEvent.of("proposal", 1, 12.5, data)
    public = TraceEvent(kind="proposal", step=1, at=12.5, data=data)
    assert type(fast) is TraceEvent
    assert fast == public
    assert repr(fast) == repr(public)
    assert fast.data is data  # kept, not copied
    assert TraceEvent.of("stop", 1, 0.0, {}) == TraceEvent(kind="stop", step=1, at=0.0)


@pytest.mark.parametrize(
    "event",
    [fast_transition(None), fast_transition("has_tool_calls"), TraceEvent.of("stop", 1, 0.0, {"x": 1})],
    ids=["unguarded", "guarded", "of"],
)
def test_fast_events_are_frozen(event: TraceEvent) -> None:
    for field in dataclasses.fields(event):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(event, field.name, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        del event.kind


def test_transitions_share_their_data() -> None:
    """One empty dict for every unguarded edge, one `{"guard": ...}` per guard label."""
    assert fast_transition(None).data is fast_transition(None).data
    assert fast_transition("a").data is fast_transition("a").data
    assert fast_transition("a").data is not fast_transition("b").data
    assert TraceEvent.of("stop", 1, 0.0, {}).data is fast_transition(None).data


MUTATIONS: list[Callable[[dict[str, Any]], object]] = [
    lambda data: data.__setitem__("guard", "other"),
    lambda data: data.__delitem__("guard"),
    lambda data: data.update(guard="other"),
    lambda data: data.setdefault("more", 1),
    lambda data: data.pop("guard"),
    lambda data: data.popitem(),
    lambda data: data.clear(),
    lambda data: data.__ior__({"more": 1}),
]


@pytest.mark.parametrize("mutate", MUTATIONS)
def test_shared_data_is_read_only(mutate: Callable[[dict[str, Any]], object]) -> None:
    """A change to shared data would show in every event holding it: refused."""
    event = fast_transition("read_only_guard")
    with pytest.raises(TypeError, match="read-only"):
        mutate(event.data)
    assert event.data == {"guard": "read_only_guard"}
    with pytest.raises(TypeError, match="read-only"):
        mutate(fast_transition(None).data)
    assert fast_transition(None).data == {}


def test_shared_data_is_a_dict_everywhere_else() -> None:
    data = fast_transition("g").data
    assert isinstance(data, dict)
    assert data == {"guard": "g"}
    assert repr(data) == "{'guard': 'g'}"
    assert json.dumps(data) == '{"guard": "g"}'
    assert data.get("guard") == "g"
    assert {**data} == {"guard": "g"}
    # Copies are the caller's: plain dicts.
    for copied in (data.copy(), copy.copy(data), copy.deepcopy(data), dict(data), data | {}):
        assert type(copied) is dict
        assert copied == {"guard": "g"}


def test_fast_events_copy_and_pickle() -> None:
    event = fast_transition("g")
    for copied in (copy.copy(event), copy.deepcopy(event), pickle.loads(pickle.dumps(event))):
        assert type(copied) is TraceEvent
        assert copied == event
    assert type(pickle.loads(pickle.dumps(event)).data) is dict


def test_many_guard_labels_are_not_all_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the bound, a label gets its own dict: the cache never grows with arbitrary labels."""
    monkeypatch.setattr(trace, "_GUARD_DATA", {})
    monkeypatch.setattr(trace, "_MAX_GUARDS", 2)
    events = [fast_transition(f"guard_{index}") for index in range(4)]
    assert [event.data for event in events] == [{"guard": f"guard_{index}"} for index in range(4)]
    assert len(trace._GUARD_DATA) == 2  # pyright: ignore[reportPrivateUsage]
    assert fast_transition("guard_3").data is not events[3].data


def test_written_and_read_back(tmp_path: Path) -> None:
    events = [
        fast_transition(None),
        fast_transition("has_tool_calls"),
        TraceEvent.of("tool_call", 1, 3.0, {"calls": [{"tool": "t", "tool_use_id": "toolu_1"}]}),
    ]
    path = tmp_path / "trace.jsonl"
    write_trace(events, path)
    assert read_trace(path) == events


def test_from_dict_keeps_its_format_and_errors() -> None:
    raw = {"kind": "stop", "step": "2", "at": "1.5", "data": {"stop_reason": "completed"}}
    assert TraceEvent.from_dict(raw) == TraceEvent(
        kind="stop", step=2, at=1.5, data={"stop_reason": "completed"}
    )
    assert TraceEvent.from_dict({"kind": "stop", "step": 1, "at": 0.0}).data == {}
    with pytest.raises(ValueError, match="kind 'nope'"):
        TraceEvent.from_dict({"kind": "nope", "step": 1, "at": 0.0})
    with pytest.raises(ValueError, match="not a trace event"):
        TraceEvent.from_dict({"kind": "stop", "at": 0.0})


def test_public_constructor_still_gives_each_event_its_own_dict() -> None:
    first, second = TraceEvent(kind="stop", step=1, at=0.0), TraceEvent(kind="stop", step=1, at=0.0)
    assert first.data == {}
    assert first.data is not second.data


def bytes_per_item(build: Callable[[int], object], count: int = 2_000) -> float:
    """Bytes still allocated per built object (what a run keeps for each)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [build(index) for index in range(count)]
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kept) == count
    return (after - before - 8 * count) / count  # less the list's own pointers


@pytest.mark.parametrize("guard", [None, "has_tool_calls"])
def test_a_transition_keeps_no_dict_of_its_own(guard: str | None) -> None:
    """A slotted event (~96 bytes) and nothing else: no per-event `data` dict (64-184 bytes)."""
    at, duration = 1.5, 0.25  # floats made once: the run makes its own, counted elsewhere
    fast = bytes_per_item(lambda step: TraceEvent.transition(step, at, "a", "b", "t", duration, guard))
    assert fast < 128, fast
    public = bytes_per_item(
        lambda step: TraceEvent(
            kind="transition",
            step=step,
            at=at,
            duration_s=duration,
            data={} if guard is None else {"guard": guard},
        )
    )
    assert public >= fast + 60, (public, fast)  # the dict of its own that the fast one saves


def test_tool_call_of_is_the_record_the_constructor_builds() -> None:
    tool_input = {"key": "value"}
    fast = ToolCall.of("toolu_1", "lookup", tool_input, 3)
    public = ToolCall(id="toolu_1", name="lookup", input=tool_input, step=3)
    assert type(fast) is ToolCall
    assert fast == public
    assert repr(fast) == repr(public)
    assert dataclasses.asdict(fast) == dataclasses.asdict(public)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.step = 4  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]


@pytest.mark.parametrize("by_human", [False, True])
def test_observation_of_is_the_record_the_constructor_builds(by_human: bool) -> None:
    call = ToolCall(id="toolu_1", name="lookup", input={"key": "value"}, step=3)
    result = CallResult(call=call, outcome="denied", content="no", attempts=0, by_human=by_human)
    fast = Observation.of(result)
    public = Observation(
        step=3,
        tool_use_id="toolu_1",
        tool="lookup",
        input={"key": "value"},
        outcome="denied",
        content="no",
        attempts=0,
        by_human=by_human,
    )
    assert type(fast) is Observation
    assert fast == public
    assert repr(fast) == repr(public)
    assert copy.deepcopy(fast) == public
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.outcome = "ok"  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]


def test_turn_defaults_are_fresh_per_turn() -> None:
    first = Turn(calls=[], keys=[], answers=[])
    second = Turn(calls=[], keys=[], answers=[])
    first.decisions.append("execute")
    first.invoked.append(0)
    first.same_as[1] = 0
    assert (second.decisions, second.invoked, second.same_as) == ([], [], {})


async def test_the_tool_call_event_lists_the_validation_records_of_the_calls_it_runs() -> None:
    """One record per call in memory: `tool_call` holds the very dicts `validation` decided with."""

    @tool
    async def lookup(key: str) -> str:
        """Return the key."""
        return key

    script = [tool_use(("lookup", {"key": "a"}), ("missing", {}), ("lookup", {"key": "b"})), text("done")]
    result = await scripted_loop(script, [lookup]).run("goal")
    validation = next(event for event in result.events if event.kind == "validation")
    tool_call = next(event for event in result.events if event.kind == "tool_call")
    decided = validation.data["calls"]
    assert [record["decision"] for record in decided] == ["execute", "deny", "execute"]
    assert tool_call.data["calls"] == [decided[0], decided[2]]
    assert all(
        ran is record for ran, record in zip(tool_call.data["calls"], [decided[0], decided[2]], strict=True)
    )
