"""Server tools in `tools=`: sent after the loop's tools, in the manifest, never answered or
counted as client calls; `Budget(max_server_tool_uses=...)` counts `usage.server_tool_use`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from boundloop import AgentLoop, Budget, LoopState, Observers, Policy, ScriptedClient, StopReason, tool
from boundloop.errors import BudgetExceeded, ConfigurationError
from boundloop.events import Proposal
from tests.helpers import assert_valid_transcript, text

JSON = dict[str, Any]
SEARCH: JSON = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
FETCH: JSON = {"type": "web_fetch_20250910", "name": "web_fetch"}


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def searched(count: int, stop_reason: str = "end_turn", answer: str = "found it") -> JSON:
    """A response that ran `count` web searches on the server: its blocks and its usage."""
    content: list[JSON] = []
    for n in range(count):
        content.append(
            {"type": "server_tool_use", "id": f"srvtoolu_{n}", "name": "web_search", "input": {"query": "q"}}
        )
        content.append({"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_{n}", "content": []})
    content.append({"type": "text", "text": answer})
    return {
        "stop_reason": stop_reason,
        "content": content,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "server_tool_use": {"web_search_requests": count, "web_fetch_requests": 0},
        },
    }


def loop_with(script: list[JSON], **options: Any) -> tuple[AgentLoop, ScriptedClient]:
    client = ScriptedClient(script)
    settings: dict[str, Any] = {
        "budget": Budget(max_steps=6),
        "observers": Observers(metrics=None),
        "tools": [lookup, SEARCH],
    }
    loop = AgentLoop(client, model="claude-sonnet-4-6", **(settings | options))
    return loop, client


async def test_server_tools_are_sent_after_the_loops_tools_in_the_order_given() -> None:
    loop, client = loop_with([text("done")], tools=[FETCH, lookup, SEARCH])
    await loop.run("Search.")
    sent = client.requests[0]["tools"]
    assert [entry.get("name") for entry in sent] == ["lookup", "web_fetch", "web_search"]
    # The definitions as given (max_uses not rewritten); without a system prompt the last one
    # carries the cache breakpoint (cache="auto"), on the request's copy only.
    assert sent[1:] == [FETCH, {**SEARCH, "cache_control": {"type": "ephemeral"}}]
    assert loop.config.tools.params[1:] == [FETCH, SEARCH]
    assert list(loop.tools) == ["lookup"]  # the registry holds the loop's own tools


def test_server_tools_are_part_of_the_spec_contract_and_provenance() -> None:
    loop, _ = loop_with([])
    bare, _ = loop_with([], tools=[lookup])
    assert loop.config.spec.server_tools == (SEARCH,)
    assert loop.config.provenance.tools[-1] == SEARCH
    assert loop.config.provenance.tools_sha256 != bare.config.provenance.tools_sha256
    contract = loop.to_contract()
    assert contract.to_dict()["server_tools"] == [SEARCH]
    again = AgentLoop.from_contract(
        contract,
        client=ScriptedClient([]),
        handlers={"lookup": lookup.handler},
        observers=Observers(metrics=None),
    )
    assert again.config.spec.server_tools == (SEARCH,)
    assert again.config.provenance == loop.config.provenance


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        ({"type": "web_serch_20250305", "name": "web_search"}, r"is not a server tool; server tool types"),
        ({"type": "memory_20250818", "name": "memory"}, r"run by the client: give it as Tool.defined"),
        ({"name": "web_search"}, r"web_search_20250305"),
        ({"type": "web_search_20250305"}, r"needs a name"),
    ],
)
def test_a_definition_that_is_not_a_server_tool_is_a_configuration_error(
    definition: JSON, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        loop_with([], tools=[lookup, definition])


def test_a_server_tool_named_like_a_tool_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"two tools are named 'lookup'"):
        loop_with([], tools=[lookup, {**SEARCH, "name": "lookup"}])


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (Policy(forbidden={"web_search"}), r"server tools \['web_search'\] are forbidden by the policy"),
        (Policy(allowed={"lookup"}), r"server tools \['web_search'\] are forbidden by the policy"),
        (Policy(requires_approval={"web_search"}), r"no approval or evidence can apply"),
    ],
)
def test_the_policy_decides_a_server_tool_at_construction(policy: Policy, message: str) -> None:
    """The API runs a server tool's calls: a policy that would deny one refuses to offer it."""
    with pytest.raises(ConfigurationError, match=message):
        loop_with([], policy=policy)
    loop_with([], policy=Policy(allowed={"lookup", "web_search"}))  # allowed: offered


async def test_server_tool_blocks_are_not_client_calls() -> None:
    """A response with server tool use and a client call: only the client call is answered and
    counted; the server blocks go back as received."""
    mixed = searched(2, stop_reason="tool_use")
    mixed["content"].append({"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "k"}})
    loop, client = loop_with([mixed, text("done")])
    result = await loop.run("Search.")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.state.tool_calls == 1
    answers = client.requests[1]["messages"][-1]["content"]
    assert [block["tool_use_id"] for block in answers] == ["toolu_1"]
    assert_valid_transcript(result.messages)
    assert result.usage.server_tool_uses == {"web_search": 2}
    proposals = [event for event in result.events if isinstance(event, Proposal)]
    assert [event.server_tool_uses for event in proposals] == [{"web_search": 2}, {}]


async def test_max_server_tool_uses_stops_the_run_before_the_next_call() -> None:
    loop, client = loop_with(
        [searched(2, "pause_turn"), searched(2, "pause_turn"), text("done")],
        budget=Budget(max_steps=6, max_server_tool_uses=4),
    )
    result = await loop.run("Search.")
    assert result.stop_reason is StopReason.MAX_TOOL_CALLS
    assert len(client.requests) == 2
    assert result.usage.server_tool_uses == {"web_search": 4}
    with pytest.raises(BudgetExceeded) as raised:
        result.unwrap()
    assert (raised.value.limit, raised.value.value, raised.value.used) == ("max_server_tool_uses", 4, 4)


async def test_server_tool_uses_below_the_ceiling_let_the_run_go_on() -> None:
    loop, _ = loop_with(
        [searched(2, "pause_turn"), searched(1)], budget=Budget(max_steps=6, max_server_tool_uses=4)
    )
    result = await loop.run("Search.")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.usage.total_server_tool_uses == 3


async def test_the_count_is_kept_in_the_state() -> None:
    """The count is the state's (its JSON too): a run continued from a checkpoint goes on from it."""
    loop, _ = loop_with([searched(3, "pause_turn")], budget=Budget(max_steps=1, max_server_tool_uses=4))
    first = await loop.run("Search.")
    assert first.stop_reason is StopReason.MAX_STEPS
    restored = LoopState.from_json(first.state.to_json())
    assert restored.usage.server_tool_uses == {"web_search": 3}
    assert restored.usage.total_server_tool_uses == 3


def test_max_server_tool_uses_is_checked() -> None:
    with pytest.raises(ConfigurationError, match=r"Budget.max_server_tool_uses must be > 0"):
        Budget(max_steps=1, max_server_tool_uses=0)


DOCS = Path(__file__).resolve().parent.parent / "docs" / "claude-api.md"
