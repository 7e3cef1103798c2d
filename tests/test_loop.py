"""Trajectory tests of the core loop: the path through the table, the stop reason, the transcript."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from anthropic.types import ToolUseBlock

from boundloop import (
    AgentLoop,
    Budget,
    BudgetExceeded,
    LoopResult,
    Observers,
    Policy,
    ScriptedClient,
    StopReason,
    UnhandledStop,
    tool,
)
from boundloop.events import Stop
from boundloop.records import Exceeded
from tests.helpers import ScriptedTransport, assert_valid_transcript, blocks, text, tool_use

JSON = dict[str, Any]


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-{key}"


@tool
def lookup_sync(key: str) -> dict[str, str]:
    """Look a key up, synchronously (runs in a worker thread)."""
    return {"key": key, "value": "sync"}


@tool
async def broken(key: str) -> str:
    """Always fails."""
    raise RuntimeError(f"backend down for {key}")


def path(result: LoopResult) -> list[tuple[str | None, str | None]]:
    """The edges the run took, in order."""
    return [(e.source, e.dest) for e in result.events if e.kind == "transition"]


START = [("assemble", "propose"), ("propose", "validate")]
TOOL_ROUND = [("validate", "act"), ("act", "observe"), ("observe", "assemble"), *START]


def make_loop(client: Any, **kwargs: Any) -> AgentLoop:
    options: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "tools": [lookup, lookup_sync, broken],
        "budget": Budget(max_steps=6),
        "observers": Observers(metrics=None),
    }
    options.update(kwargs)
    return AgentLoop(client, **options)


TRAJECTORIES = [
    pytest.param(
        [tool_use(("lookup", {"key": "a"})), text("done")],
        {},
        [*START, *TOOL_ROUND, ("validate", "stopped")],
        StopReason.COMPLETED,
        id="tool-use-then-end-turn",
    ),
    pytest.param([text("done")], {}, [*START, ("validate", "stopped")], StopReason.COMPLETED, id="end-turn"),
    pytest.param(
        [text("done", stop_reason="stop_sequence")],
        {},
        [*START, ("validate", "stopped")],
        StopReason.COMPLETED,
        id="stop-sequence",
    ),
    pytest.param(
        [text("no", stop_reason="refusal")],
        {},
        [*START, ("validate", "stopped")],
        StopReason.REFUSED,
        id="refusal",
    ),
    pytest.param(
        [text("...", stop_reason="model_context_window_exceeded")],
        {},
        [*START, ("validate", "stopped")],
        StopReason.CONTEXT_EXCEEDED,
        id="context-window-exceeded",
    ),
    pytest.param(
        [text("half an ans", stop_reason="max_tokens")],
        {},
        [*START, ("validate", "stopped")],
        StopReason.TRUNCATED,
        id="max-tokens-stops",
    ),
    pytest.param(
        [text("half", stop_reason="max_tokens"), text("done")],
        {"policy": Policy(on_max_tokens="continue")},
        [*START, ("validate", "assemble"), *START, ("validate", "stopped")],
        StopReason.COMPLETED,
        id="max-tokens-continues",
    ),
    pytest.param(
        [text("searching", stop_reason="pause_turn"), text("done")],
        {},
        [*START, ("validate", "assemble"), *START, ("validate", "stopped")],
        StopReason.COMPLETED,
        id="pause-turn-resumes",
    ),
    pytest.param(
        [tool_use(("lookup", {"key": str(i)})) for i in range(3)],
        {"budget": Budget(max_steps=2)},
        [*START, *TOOL_ROUND, ("validate", "act"), ("act", "observe"), ("observe", "stopped")],
        StopReason.MAX_STEPS,
        id="max-steps",
    ),
    pytest.param(
        [tool_use(("lookup", {"key": "a"}), ("lookup", {"key": "b"}), ("lookup", {"key": "c"}))],
        {"budget": Budget(max_steps=4, max_tool_calls=2)},
        [*START, ("validate", "stopped")],
        StopReason.MAX_TOOL_CALLS,
        id="max-tool-calls",
    ),
    pytest.param(
        [tool_use(("lookup", {"key": "a"}), input_tokens=10), tool_use(("lookup", {"key": "b"}))],
        {"budget": Budget(max_steps=6, max_total_tokens=20)},
        # 15 tokens used; the next call's input alone (15) would pass 20: it never starts.
        [*START, ("validate", "act"), ("act", "observe"), ("observe", "assemble"), ("assemble", "stopped")],
        StopReason.TOKEN_BUDGET,
        id="token-budget",
    ),
]
"""(script, loop options, the edges taken, the stop reason): the core trajectories."""


@pytest.mark.parametrize(("script", "options", "expected_path", "expected_stop"), TRAJECTORIES)
async def test_trajectory(
    script: list[JSON],
    options: JSON,
    expected_path: list[tuple[str, str]],
    expected_stop: StopReason,
) -> None:
    """Each script takes exactly the expected edges of the table and ends with the expected reason."""
    client = ScriptedClient(script)
    result = await make_loop(client, **options).run("goal")
    assert path(result) == expected_path
    assert result.stop_reason is expected_stop
    assert [e.kind for e in result.events][-1] == "stop"
    assert_valid_transcript(result.messages)
    assert len(client.requests) == result.state.step


async def test_completed_run_returns_the_answer_usage_and_a_json_state() -> None:
    """A completed run has the final text, summed usage, and a state that round-trips through JSON."""
    client = ScriptedClient([tool_use(("lookup", {"key": "a"})), text("the answer")])
    result = await make_loop(client).run("goal")
    assert result.unwrap() == "the answer"
    assert result.usage.input_tokens == 20
    assert result.usage.output_tokens == 10
    assert result.state.tool_calls == 1
    restored = type(result.state).from_json(result.state.to_json())
    assert restored.to_dict() == result.state.to_dict()
    assert restored.responses[0].content[0] == result.state.responses[0].content[0]


async def test_budget_stops_raise_budget_exceeded_from_unwrap() -> None:
    """unwrap() raises BudgetExceeded naming the limit, its value, what was used and the partial result."""
    client = ScriptedClient([tool_use(("lookup", {"key": str(i)})) for i in range(3)])
    result = await make_loop(client, budget=Budget(max_steps=2)).run("goal")
    with pytest.raises(BudgetExceeded) as caught:
        result.unwrap()
    assert (caught.value.limit, caught.value.value, caught.value.used) == ("max_steps", 2, 2)
    assert caught.value.result is result


async def test_max_tool_calls_stops_before_any_call_of_the_batch_runs() -> None:
    """A batch larger than what is left of max_tool_calls is answered, never executed."""
    ran: list[str] = []

    @tool
    async def record(key: str) -> str:
        """Record the call."""
        ran.append(key)
        return key

    client = ScriptedClient([tool_use(("record", {"key": "a"}), ("record", {"key": "b"}))])
    loop = make_loop(client, tools=[record], budget=Budget(max_steps=3, max_tool_calls=1))
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.MAX_TOOL_CALLS
    assert ran == []
    assert result.state.exceeded == Exceeded(limit="max_tool_calls", value=1, used=0)
    assert "2 tool calls proposed, 1 left" in (result.state.stop_detail or "")
    assert [block["is_error"] for block in blocks(result.messages[-1])] == [True, True]
    assert_valid_transcript(result.messages)


async def test_timeout_stops_a_run_blocked_in_a_tool() -> None:
    """A tool waiting on an event that never fires is cancelled by the run's timeout, and answered."""
    never = anyio.Event()

    @tool
    async def wait_forever(key: str) -> str:
        """Never returns."""
        await never.wait()
        return key

    client = ScriptedClient([tool_use(("wait_forever", {"key": "a"}))])
    loop = make_loop(client, tools=[wait_forever], budget=Budget(max_steps=3, timeout_s=0.05))
    with anyio.fail_after(5):
        result = await loop.run("goal")
    assert result.stop_reason is StopReason.TIMEOUT
    assert path(result)[-1] == ("act", "stopped")
    assert result.state.exceeded is not None
    assert result.state.exceeded.limit == "timeout_s"
    assert result.state.observations[0].outcome == "cancelled"
    assert_valid_transcript(result.messages)
    with pytest.raises(BudgetExceeded):
        result.unwrap()


async def test_unknown_stop_reason_raises_unhandled_stop() -> None:
    """A stop_reason outside the handler map raises UnhandledStop, with the run recorded as failed."""
    client = ScriptedClient([text("?", stop_reason="brand_new_reason")])
    with pytest.raises(UnhandledStop) as caught:
        await make_loop(client).run("goal")
    assert caught.value.stop_reason == "brand_new_reason"
    partial = caught.value.result
    assert partial is not None
    assert partial.stop_reason is StopReason.FAILED
    assert partial.events[-1].kind == "stop"


async def test_a_handler_override_routes_a_new_stop_reason() -> None:
    """Policy.signal_handlers can give an unknown stop_reason an explicit handler."""
    from boundloop.signals import stop

    client = ScriptedClient([text("?", stop_reason="brand_new_reason")])
    loop = make_loop(
        client,
        policy=Policy(
            signal_handlers={"brand_new_reason": lambda message, ctx: stop(StopReason.FAILED, "new")}
        ),
    )
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.FAILED
    assert result.state.stop_detail == "new"


async def test_three_tool_calls_run_concurrently_and_answer_in_one_message() -> None:
    """Three calls of one response are in flight together, and come back in block order in ONE message."""
    started: list[str] = []
    all_started = anyio.Event()

    @tool
    async def step_a(key: str) -> str:
        """Barrier participant A."""
        return await barrier("a", key)

    @tool
    async def step_b(key: str) -> str:
        """Barrier participant B."""
        return await barrier("b", key)

    @tool
    def step_c(key: str) -> str:
        """Barrier participant C, synchronous: it waits from a worker thread."""
        return anyio.from_thread.run(barrier, "c", key)

    async def barrier(name: str, key: str) -> str:
        started.append(name)
        if len(started) == 3:
            all_started.set()
        await all_started.wait()  # opens only when all three have started
        return f"{name}:{key}"

    script = [
        tool_use(
            ("step_a", {"key": "1"}, "id_a"),
            ("step_b", {"key": "2"}, "id_b"),
            ("step_c", {"key": "3"}, "id_c"),
        ),
        text("done"),
    ]
    loop = make_loop(ScriptedClient(script), tools=[step_a, step_b, step_c])
    with anyio.fail_after(5):
        result = await loop.run("goal")
    assert result.stop_reason is StopReason.COMPLETED
    assert sorted(started) == ["a", "b", "c"]
    user = result.messages[2]
    assert user["role"] == "user"
    assert user["content"] == [
        {"type": "tool_result", "tool_use_id": "id_a", "content": "a:1"},
        {"type": "tool_result", "tool_use_id": "id_b", "content": "b:2"},
        {"type": "tool_result", "tool_use_id": "id_c", "content": "c:3"},
    ]


async def test_one_failing_call_is_an_error_for_that_call_only() -> None:
    """A handler's exception becomes is_error for its own tool_use; its siblings succeed."""
    script = [
        tool_use(("lookup", {"key": "a"}), ("broken", {"key": "b"}), ("lookup_sync", {"key": "c"})),
        text("done"),
    ]
    result = await make_loop(ScriptedClient(script)).run("goal")
    answers = blocks(result.messages[2])
    assert [block.get("is_error", False) for block in answers] == [False, True, False]
    assert answers[1]["content"] == "RuntimeError: backend down for b"
    assert json.loads(answers[2]["content"]) == {"key": "c", "value": "sync"}
    assert [o.outcome for o in result.state.observations] == ["ok", "error", "ok"]


async def test_on_tool_error_raise_propagates_the_handlers_exception() -> None:
    """With on_tool_error="raise", the handler's own exception leaves run()."""
    client = ScriptedClient([tool_use(("broken", {"key": "b"}))])
    with pytest.raises(RuntimeError, match="backend down for b"):
        await make_loop(client, policy=Policy(on_tool_error="raise")).run("goal")


async def test_truncated_tool_use_is_never_executed() -> None:
    """max_tokens cutting through a tool_use block stops as truncated; the tool never runs."""
    ran: list[str] = []

    @tool
    async def record(key: str) -> str:
        """Record the call."""
        ran.append(key)
        return key

    client = ScriptedClient([tool_use(("record", {"key": "partial"}), stop_reason="max_tokens")])
    loop = make_loop(client, tools=[record], policy=Policy(on_max_tokens="continue"))
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.TRUNCATED
    assert ran == []
    assert result.answer is None
    assert_valid_transcript(result.messages)


async def test_pause_turn_sends_the_assistant_turn_back_unchanged() -> None:
    """The paused turn (server tool blocks included) is the last message of the next request, as received."""
    paused: JSON = {
        "stop_reason": "pause_turn",
        "content": [
            {"type": "text", "text": "Let me search."},
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {"query": "refund policy"},
            },
        ],
    }
    client = ScriptedClient([paused, text("done")])
    result = await make_loop(client).run("goal")
    assert result.stop_reason is StopReason.COMPLETED
    last = client.requests[1]["messages"][-1]
    assert last["role"] == "assistant"
    # Exactly the JSON the API sent, dumped once into the transcript: no field added or lost.
    assert last["content"] == paused["content"]
    assert result.messages[1]["content"] == paused["content"]


async def test_the_real_sdk_client_drives_a_full_run() -> None:
    """AsyncAnthropic over a scripted HTTP transport: valid Messages API payloads, thinking kept intact."""
    thinking = {"type": "thinking", "thinking": "check the order first", "signature": "sig-abc=="}
    transport = ScriptedTransport(
        [
            {
                "stop_reason": "tool_use",
                "content": [
                    thinking,
                    {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "O-104"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "lookup_sync", "input": {"key": "O-104"}},
                ],
            },
            {"stop_reason": "end_turn", "content": [{"type": "text", "text": "sufficient"}]},
        ]
    )
    loop = make_loop(transport.client(), system="You investigate.", max_tokens=512)
    result = await loop.run("Decide for O-104.")
    assert result.unwrap() == "sufficient"
    first, second = transport.requests
    assert first["model"] == "claude-sonnet-4-6"
    assert first["system"] == [
        {"type": "text", "text": "You investigate.", "cache_control": {"type": "ephemeral"}}
    ]
    assert first["max_tokens"] == 512
    assert {t["name"] for t in first["tools"]} == {"lookup", "lookup_sync", "broken"}
    assert first["messages"] == [{"role": "user", "content": "Decide for O-104."}]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][1]["content"][0] == thinking
    assert [b["tool_use_id"] for b in second["messages"][2]["content"]] == ["toolu_1", "toolu_2"]
    assert_valid_transcript(second["messages"])
    assert isinstance(result.state.responses[0].content[1], ToolUseBlock)


async def test_trace_is_written_as_json_lines(tmp_path: Any) -> None:
    """Every trace event is one JSON line, with the required kinds present."""
    client = ScriptedClient([tool_use(("lookup", {"key": "a"})), text("done")])
    result = await make_loop(client).run("goal")
    target = tmp_path / "run.jsonl"
    await anyio.to_thread.run_sync(result.write_events, target)
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(rows) == len(result.events)
    assert {"transition", "proposal", "validation", "tool_started", "tool_result", "stop"} <= {
        r["kind"] for r in rows
    }
    transitions = [r for r in rows if r["kind"] == "transition"]
    assert all(r["duration_s"] >= 0 and r["trigger"] for r in transitions)


async def test_a_scripted_client_that_runs_out_fails_clearly() -> None:
    """A script shorter than the run raises ScriptExhausted, with the run recorded as failed first."""
    from boundloop import ScriptExhausted

    stops: list[str] = []
    client = ScriptedClient([tool_use(("lookup", {"key": "a"}))])
    loop = make_loop(
        client,
        observers=Observers(
            metrics=None, on_event=lambda e: stops.append(e.stop_reason) if isinstance(e, Stop) else None
        ),
    )
    with pytest.raises(ScriptExhausted, match="ran out of responses after 1"):
        await loop.run("goal")
    assert stops == ["failed"]
    assert client.remaining == 0


async def test_concurrent_runs_of_one_loop_keep_their_own_state() -> None:
    """Two runs on one AgentLoop (one machine, two models) interleave without sharing state."""
    both_in_tool = anyio.Event()
    arrived: list[str] = []

    @tool
    async def rendezvous(key: str) -> str:
        """Wait until both runs are inside a tool."""
        arrived.append(key)
        if len(arrived) == 2:
            both_in_tool.set()
        await both_in_tool.wait()
        return f"seen-{key}"

    # One client serves both runs in request order: both first calls, then both final answers.
    loop = make_loop(
        ScriptedClient(
            [
                tool_use(("rendezvous", {"key": "a"})),
                tool_use(("rendezvous", {"key": "b"})),
                text("x"),
                text("y"),
            ]
        ),
        tools=[rendezvous],
    )
    results: dict[str, LoopResult] = {}

    async def one(task_id: str) -> None:
        results[task_id] = await loop.run(f"goal {task_id}", task_id=task_id)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(one, "run-1")
            group.start_soon(one, "run-2")
    assert sorted(arrived) == ["a", "b"]
    for task_id, result in results.items():
        assert result.stop_reason is StopReason.COMPLETED
        assert result.state.task_id == task_id
        assert result.state.step == 2
        assert result.messages[0] == {"role": "user", "content": f"goal {task_id}"}
        assert_valid_transcript(result.messages)
    assert {r.answer for r in results.values()} == {"x", "y"}
