"""The cheap constructors of records: the same objects as the public constructors build,
slotted (no per-instance dict); and the `ToolStarted` event shares the `Validation` event's
records (its very list, when the whole batch runs)."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from boundloop import tool
from boundloop.events import ToolStarted, Validation
from boundloop.records import CallResult, Observation, ToolCall, Turn
from tests.helpers import scripted_loop, text, tool_use


def test_tool_call_of_is_the_record_the_constructor_builds() -> None:
    tool_input = {"key": "value"}
    fast = ToolCall.of(id="toolu_1", name="lookup", input=tool_input, step=3)
    public = ToolCall(id="toolu_1", name="lookup", input=tool_input, step=3)
    assert type(fast) is ToolCall
    assert fast == public
    assert repr(fast) == repr(public)
    assert dataclasses.asdict(fast) == dataclasses.asdict(public)
    assert not hasattr(fast, "__dict__")


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
    assert not hasattr(fast, "__dict__")


def test_turn_defaults_are_fresh_per_turn() -> None:
    first = Turn(calls=[], keys=[], answers=[])
    second = Turn(calls=[], keys=[], answers=[])
    first.decisions.append("execute")
    first.invoked.append(0)
    first.same_as[1] = 0
    assert (second.decisions, second.invoked, second.same_as) == ([], [], {})


async def test_the_tool_call_event_lists_the_validation_records_of_the_calls_it_runs() -> None:
    """One record per call in memory: `ToolStarted` holds the very records `Validation` decided with."""

    @tool
    async def lookup(key: str) -> str:
        """Return the key."""
        return key

    script = [tool_use(("lookup", {"key": "a"}), ("missing", {}), ("lookup", {"key": "b"})), text("done")]
    result = await scripted_loop(script, [lookup]).run("goal")
    validation = next(event for event in result.events if isinstance(event, Validation))
    started = next(event for event in result.events if isinstance(event, ToolStarted))
    decided = validation.calls
    assert [record.decision for record in decided] == ["execute", "deny", "execute"]
    assert started.calls == [decided[0], decided[2]]
    assert all(ran is record for ran, record in zip(started.calls, [decided[0], decided[2]], strict=True))
    assert started.calls is not decided  # some calls do not run: a list of those that do


async def test_a_batch_that_runs_whole_shares_the_validation_list() -> None:
    """Every decided call runs: `ToolStarted` holds the `Validation` event's own list (one list a
    turn in the trace, not two equal ones)."""

    @tool
    async def lookup(key: str) -> str:
        """Return the key."""
        return key

    script = [tool_use(("lookup", {"key": "a"}), ("lookup", {"key": "b"})), text("done")]
    result = await scripted_loop(script, [lookup]).run("goal")
    validation = next(event for event in result.events if isinstance(event, Validation))
    started = next(event for event in result.events if isinstance(event, ToolStarted))
    assert [record.decision for record in validation.calls] == ["execute", "execute"]
    assert started.calls is validation.calls
