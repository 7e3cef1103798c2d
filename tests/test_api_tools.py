"""Tools the API defines, its per-tool fields, the SDK's tool helpers and programmatic tool
calling, through the real `AsyncAnthropic` over the fake API (tests/fake_api.py).

The programmatic tool calling responses take the shape of a recorded one: a `server_tool_use`
of `code_execution` and a `tool_use` whose `caller` is `{"type": "code_execution_20260120",
"tool_id": ...}`, the next response the program's next call
(github.com/anthropics/anthropic-sdk-python/blob/009b035305e0724ce108ebd796935f91711fc6e1/tests/lib/tools/__inline_snapshot__/test_runners/TestSyncRunTools/092be1de-d3f8-4c22-a4ea-a7ad54689836.json,
in tests/recorded/sdk_exchanges.json). No public recording was found of a program calling one
tool several times with the same input, so those responses repeat the recorded call's shape
with one input. The tool search response is the shape the API documents for
`tool_search_tool_regex` (`tool_search_tool_result` holding `tool_reference` blocks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import beta_tool
from anthropic.tools.memory import BetaLocalFilesystemMemoryTool

from boundloop import AgentLoop, Budget, Policy, StopReason, Tool, ToolContext, tool
from boundloop.errors import ConfigurationError
from tests.fake_api import Body, FakeAPI, message, text_block, tool_use_block

JSON = dict[str, Any]
CODE_EXECUTION: JSON = {"type": "code_execution_20260120", "name": "code_execution"}
PROGRAM = "srvtoolu_017SzB73BSitzNFo1Xb3bq7S"
FROM_CODE: JSON = {"type": "code_execution_20260120", "tool_id": PROGRAM}


def from_code(call_id: str, name: str, tool_input: JSON) -> JSON:
    """A tool_use a program running in code execution made."""
    return {**tool_use_block(call_id, name, tool_input), "caller": FROM_CODE}


def program_turns(calls: list[list[str]]) -> list[Body]:
    """Responses of a program calling `roll_die(player1)`: each holds the calls of one list (the
    first also the program's `server_tool_use`), then the final answer."""
    replies: list[Body] = []
    for n, ids in enumerate(calls, start=1):
        content: list[JSON] = []
        if n == 1:
            code = "rolls = [await roll_die({'player': 'player1'}) for _ in range(7)]\nprint(rolls)"
            content.append(
                {
                    "type": "server_tool_use",
                    "id": PROGRAM,
                    "name": "code_execution",
                    "input": {"code": code},
                    "caller": {"type": "direct"},
                }
            )
        content += [from_code(call_id, "roll_die", {"player": "player1"}) for call_id in ids]
        container = {"id": "container_011CYVPF4iP8oD6Vsz1NhVih", "expires_at": "2026-02-25T20:07:37Z"}
        replies.append(Body(json=message(content, "tool_use", n=n, container=container)))
    replies.append(Body(json=message([text_block("Seven rolls.")], n=len(calls) + 1)))
    return replies


def results_sent(api: FakeAPI) -> list[JSON]:
    """Every tool_result block of the run, in order (the last request holds the whole history)."""
    return [
        block
        for turn in api.requests[-1]["messages"]
        if turn["role"] == "user" and isinstance(turn["content"], list)
        for block in turn["content"]
        if block.get("type") == "tool_result"
    ]


def dice() -> tuple[Tool, list[str]]:
    """A die that rolls 1, 2, 3, ... in turn (each call a new value), and the players it rolled for."""
    rolled: list[str] = []

    @tool(allowed_callers=["code_execution_20260120"])
    def roll_die(player: str) -> str:
        """Roll a die for a player."""
        rolled.append(player)
        return str(len(rolled))

    return roll_die, rolled


SEVEN = [["toolu_01"], ["toolu_02"], ["toolu_03"], ["toolu_04"], ["toolu_05"], ["toolu_06", "toolu_07"]]
"""Seven calls of one program: one a response, the last two in one response."""


async def test_a_program_calling_one_tool_seven_times_with_one_input_runs_it_seven_times() -> None:
    roll_die, rolled = dice()
    api = FakeAPI(program_turns(SEVEN))
    loop = AgentLoop(
        api.client(), model="claude-sonnet-4-6", tools=[roll_die, CODE_EXECUTION], budget=Budget(max_steps=10)
    )
    result = await loop.run("Roll seven times for player1.")
    assert result.stop_reason is StopReason.COMPLETED
    assert rolled == ["player1"] * 7
    sent = results_sent(api)
    # Seven rolls, seven values (the last two ran together, in either order).
    assert sorted(block["content"] for block in sent) == ["1", "2", "3", "4", "5", "6", "7"]
    assert not any(block.get("is_error") for block in sent)
    assert result.state.repeated_calls == 0
    assert result.state.tool_calls == 7
    # Each call keeps its own idempotency key: task:step:tool_use_id.
    assert (
        len({(observation.step, observation.tool_use_id) for observation in result.state.observations}) == 7
    )


async def test_the_model_repeating_itself_is_still_answered_from_the_history() -> None:
    roll_die, rolled = dice()
    direct = [
        Body(json=message([tool_use_block(f"toolu_{n}", "roll_die", {"player": "p"})], "tool_use", n=n))
        for n in (1, 2)
    ]
    api = FakeAPI([*direct, Body(json=message([text_block("done")], n=3))])
    loop = AgentLoop(api.client(), model="claude-sonnet-4-6", tools=[roll_die], budget=Budget(max_steps=5))
    result = await loop.run("Roll.")
    assert rolled == ["p"]
    assert result.state.repeated_calls == 1


async def test_calls_from_code_still_count_against_max_tool_calls() -> None:
    roll_die, rolled = dice()
    api = FakeAPI(program_turns(SEVEN))
    loop = AgentLoop(
        api.client(),
        model="claude-sonnet-4-6",
        tools=[roll_die, CODE_EXECUTION],
        budget=Budget(max_steps=10, max_tool_calls=3),
    )
    result = await loop.run("Roll seven times for player1.")
    assert result.stop_reason is StopReason.MAX_TOOL_CALLS
    assert rolled == ["player1"] * 3


async def test_calls_from_code_still_wait_for_approval() -> None:
    roll_die, rolled = dice()
    api = FakeAPI(program_turns(SEVEN))
    loop = AgentLoop(
        api.client(),
        model="claude-sonnet-4-6",
        tools=[roll_die, CODE_EXECUTION],
        policy=Policy(requires_approval=frozenset({"roll_die"})),
        budget=Budget(max_steps=10),
    )
    result = await loop.run("Roll seven times for player1.")
    assert result.stop_reason is StopReason.NEEDS_HUMAN
    assert rolled == []


def weather_tool() -> Tool:
    """A deferred tool with every per-tool field."""

    @tool(
        strict=True,
        defer_loading=True,
        allowed_callers=["direct", "code_execution_20260120"],
        input_examples=[{"city": "Paris"}],
        cache_control={"type": "ephemeral", "ttl": "1h"},
    )
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return weather


async def test_the_request_carries_each_per_tool_field_as_the_api_names_it() -> None:
    weather = weather_tool()
    api = FakeAPI([Body(json=message([text_block("ok")]))])
    tool_search = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
    loop = AgentLoop(
        api.client(), model="claude-sonnet-4-6", tools=[weather, tool_search], budget=Budget(max_steps=2)
    )
    await loop.run("Weather?")
    sent = api.requests[0]["tools"][0]
    assert sent == {
        "name": "weather",
        "description": "The weather in a city.",
        "input_schema": weather.input_schema,
        "strict": True,
        "defer_loading": True,
        "allowed_callers": ["direct", "code_execution_20260120"],
        "input_examples": [{"city": "Paris"}],
        "cache_control": {"type": "ephemeral", "ttl": "1h"},
    }


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("strict", "yes", "strict must be True or False"),
        ("defer_loading", 1, "defer_loading must be True or False"),
        ("allowed_callers", ["robot"], "callers the installed SDK does not know"),
        ("allowed_callers", [], "non-empty list"),
        ("input_examples", [{"city": 3}], r"\[0\] does not match the input schema"),
        ("input_examples", ["Paris"], r"\[0\] must be a JSON object"),
        ("cache_control", {"type": "persistent"}, "must be {'type': 'ephemeral'}"),
        ("cache_control", {"type": "ephemeral", "ttl": "2h"}, "ttl must be one of"),
    ],
)
def test_a_per_tool_field_the_api_does_not_take_is_a_configuration_error(
    field: str, value: object, says: str
) -> None:
    def city_weather(city: str) -> str:
        """The weather in a city."""
        return city

    with pytest.raises(ConfigurationError, match=says):
        tool(**{field: value})(city_weather)  # type: ignore[call-overload]


def memory_call(call_id: str, tool_input: JSON, n: int) -> Body:
    return Body(json=message([tool_use_block(call_id, "memory", tool_input)], "tool_use", n=n))


CREATE: JSON = {"command": "create", "path": "/memories/notes.md", "file_text": "likes coffee\n"}


async def test_the_sdks_local_filesystem_memory_tool_runs_end_to_end(tmp_path: Path) -> None:
    memory = BetaLocalFilesystemMemoryTool(base_path=str(tmp_path))
    api = FakeAPI(
        [
            memory_call("toolu_1", CREATE, 1),
            memory_call("toolu_2", {"command": "view", "path": "/memories/notes.md"}, 2),
            memory_call("toolu_3", {"command": "view", "path": "/etc/passwd"}, 3),
            Body(json=message([text_block("Noted.")], n=4)),
        ]
    )
    loop = AgentLoop(api.client(), model="claude-sonnet-4-6", tools=[memory], budget=Budget(max_steps=6))
    result = await loop.run("Remember that I like coffee.")
    assert result.stop_reason is StopReason.COMPLETED
    assert (tmp_path / "memories" / "notes.md").read_text() == "likes coffee\n"
    sent = api.requests[0]["tools"]
    assert [{k: v for k, v in entry.items() if k != "cache_control"} for entry in sent] == [
        {"type": "memory_20250818", "name": "memory"}
    ]
    created, viewed, escaped = results_sent(api)
    assert created["content"] == "File created successfully at: /memories/notes.md"
    assert "likes coffee" in viewed["content"]
    assert escaped["is_error"] is True
    assert "must start with /memories" in escaped["content"]


async def test_a_memory_call_the_sdk_schema_refuses_is_answered_invalid(tmp_path: Path) -> None:
    memory = BetaLocalFilesystemMemoryTool(base_path=str(tmp_path))
    api = FakeAPI(
        [
            memory_call("toolu_1", {"command": "create", "path": "/memories/x"}, 1),
            Body(json=message([text_block("ok")], n=2)),
        ]
    )
    loop = AgentLoop(api.client(), model="claude-sonnet-4-6", tools=[memory], budget=Budget(max_steps=4))
    await loop.run("Write.")
    (answer,) = results_sent(api)
    assert answer["is_error"] is True
    assert "invalid input for memory" in answer["content"]
    assert not (tmp_path / "memories" / "x").exists()


@pytest.mark.parametrize(
    "policy",
    [
        Policy(forbidden=frozenset({"memory"}), on_forbidden="report"),
        Policy(requires_approval=frozenset({"memory"})),
    ],
    ids=["forbidden", "requires_approval"],
)
async def test_policy_and_approval_gate_a_tool_the_api_defines(tmp_path: Path, policy: Policy) -> None:
    memory = BetaLocalFilesystemMemoryTool(base_path=str(tmp_path))
    api = FakeAPI([memory_call("toolu_1", CREATE, 1), Body(json=message([text_block("ok")], n=2))])
    loop = AgentLoop(
        api.client(), model="claude-sonnet-4-6", tools=[memory], policy=policy, budget=Budget(max_steps=4)
    )
    result = await loop.run("Remember.")
    assert not (tmp_path / "memories" / "notes.md").exists()
    assert result.state.tool_calls == 0


async def test_tool_defined_gives_the_handler_the_input_and_the_context() -> None:
    seen: list[tuple[JSON, str]] = []

    async def edit(tool_input: JSON, ctx: ToolContext) -> str:
        seen.append((tool_input, ctx.idempotency_key))
        return "edited"

    editor = Tool.defined(
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}, edit, side_effect=True
    )
    call = {"command": "view", "path": "/a.py"}
    api = FakeAPI(
        [
            Body(json=message([tool_use_block("toolu_1", "str_replace_based_edit_tool", call)], "tool_use")),
            Body(json=message([text_block("ok")], n=2)),
        ]
    )
    loop = AgentLoop(api.client(), model="claude-sonnet-4-6", tools=[editor], budget=Budget(max_steps=4))
    result = await loop.run("Look.")
    assert seen == [(call, f"{result.state.task_id}:1:toolu_1")]
    assert api.requests[0]["tools"][0]["type"] == "text_editor_20250728"


@pytest.mark.parametrize(
    ("definition", "says"),
    [
        (
            {"type": "web_search_20250305", "name": "web_search"},
            "not a tool the API defines and the client runs",
        ),
        ({"type": "memory_20250818", "name": "notes"}, "is named 'memory' by the API"),
        ({"type": "memory_20250818", "name": "memory", "strict": "yes"}, "strict must be True or False"),
    ],
)
def test_a_definition_that_is_not_a_client_tool_of_the_sdk_is_a_configuration_error(
    definition: JSON, says: str
) -> None:
    with pytest.raises(ConfigurationError, match=says):
        Tool.defined(definition, lambda tool_input: "x")


async def test_a_beta_tool_function_is_accepted_as_it_is() -> None:
    @beta_tool(strict=True)
    def add(x: int, y: int) -> str:
        """Add two numbers."""
        return str(x + y)

    api = FakeAPI(
        [
            Body(json=message([tool_use_block("toolu_1", "add", {"x": 2, "y": 3})], "tool_use")),
            Body(json=message([text_block("5")], n=2)),
        ]
    )
    loop = AgentLoop(api.client(), model="claude-sonnet-4-6", tools=[add], budget=Budget(max_steps=4))
    result = await loop.run("2 + 3?")
    assert result.stop_reason is StopReason.COMPLETED
    (answer,) = results_sent(api)
    assert answer["content"] == "5"
    sent = {k: v for k, v in api.requests[0]["tools"][0].items() if k != "cache_control"}
    assert sent == {k: v for k, v in add.to_dict().items()}


async def test_a_deferred_tool_is_called_after_a_tool_search() -> None:
    weather = weather_tool()
    search = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
    found = [
        {"type": "text", "text": "I'll search for tools to help with the weather information."},
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01ABC123",
            "name": "tool_search_tool_regex",
            "input": {"query": "weather"},
        },
        {
            "type": "tool_search_tool_result",
            "tool_use_id": "srvtoolu_01ABC123",
            "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": "weather"}],
            },
        },
        {"type": "text", "text": "I found a weather tool. Let me get the weather for Paris."},
        tool_use_block("toolu_01XYZ789", "weather", {"city": "Paris"}),
    ]
    api = FakeAPI([Body(json=message(found, "tool_use")), Body(json=message([text_block("Sunny.")], n=2))])
    loop = AgentLoop(
        api.client(), model="claude-sonnet-4-6", tools=[weather, search], budget=Budget(max_steps=4)
    )
    result = await loop.run("Weather in Paris?")
    assert result.stop_reason is StopReason.COMPLETED
    (answer,) = results_sent(api)
    assert answer["content"] == "sunny in Paris"
