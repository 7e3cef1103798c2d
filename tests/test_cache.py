"""Prompt caching on by default (issue 24, item 1): the breakpoints `cache="auto"` places, and a
prefix that stays byte for byte the same from one request to the next."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

import boundloop
from boundloop import (
    AgentLoop,
    Budget,
    CacheSettings,
    ConfigurationError,
    LoopSpec,
    MemoryStore,
    ModelSettings,
    Observers,
    ScriptedClient,
    StopReason,
    tool,
)
from boundloop._base.cache import (
    LOOKBACK_BLOCKS,
    MAX_BREAKPOINTS,
    Heads,
    MessageMarkers,
    add_breakpoints,
    count_breakpoints,
)
from tests.api_rules import violations
from tests.docrun import python_blocks, runs_as_promised
from tests.helpers import text, tool_use
from tests.sdk_scripted import SDKScripted

JSON = dict[str, Any]
MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a careful support agent."
EPHEMERAL: JSON = {"type": "ephemeral"}
SEARCH: JSON = {"type": "web_search_20250305", "name": "web_search"}
COST = (Path(__file__).parent.parent / "docs" / "cost.md").read_text(encoding="utf-8")


@tool
def zeta(n: int) -> str:
    """Look up zeta."""
    return f"zeta {n}"


@tool
def alpha(n: int) -> str:
    """Look up alpha."""
    return f"alpha {n}"


@tool
def mid(n: int) -> str:
    """Look up mid."""
    return f"mid {n}"


TOOLS = [zeta, alpha, mid]  # registered out of alphabetical order: sent in this order, always


class RawSDK(SDKScripted):
    """`SDKScripted` keeping each request's HTTP body as sent, byte for byte."""

    def __init__(self, responses: list[JSON]) -> None:
        super().__init__(responses)
        self.bodies: list[bytes] = []

    async def _answer(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(request.content)
        return await super()._answer(request)


def turn(k: int, *, pause: bool = False) -> JSON:
    """The k-th response: thinking, text and 3 parallel tool calls (or a paused server call)."""
    thinking = {"type": "thinking", "thinking": f"Step {k}.", "signature": f"sig{k}"}
    if pause:
        return {
            "stop_reason": "pause_turn",
            "content": [
                thinking,
                {
                    "type": "server_tool_use",
                    "id": f"srvtoolu_{k}",
                    "name": "web_search",
                    "input": {"query": "q"},
                },
                {"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_{k}", "content": []},
                {"type": "text", "text": "Searching on."},
            ],
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    calls = [
        {"type": "tool_use", "id": f"toolu_{k}_{name}", "name": name, "input": {"n": k}}
        for name in ("zeta", "alpha", "mid")
    ]
    return {
        "stop_reason": "tool_use",
        "content": [thinking, {"type": "text", "text": f"Turn {k}."}, *calls],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def long_script() -> list[JSON]:
    script = [turn(k, pause=k == 20) for k in range(49)]
    return [*script, text("All done.")]


def long_loop(client: Any, **options: Any) -> AgentLoop:
    return AgentLoop(
        client,
        model=MODEL,
        system=SYSTEM,
        tools=[*TOOLS, SEARCH],
        budget=Budget(max_steps=60, max_tool_calls=200),
        settings=ModelSettings(thinking={"type": "enabled", "budget_tokens": 1024}),
        max_tokens=2048,
        observers=Observers(metrics=None),
        **options,
    )


def scripted_loop(
    script: list[JSON], *, system: str | None = SYSTEM, budget: Budget | None = None, **options: Any
) -> tuple[AgentLoop, ScriptedClient]:
    """A loop on a `ScriptedClient` playing `script`: the module's model and system prompt, one
    step unless `budget` says otherwise, no metrics, and `options` (tools, cache, settings...)."""
    client = ScriptedClient(script)
    loop = AgentLoop(
        client,
        model=MODEL,
        system=system,
        budget=Budget(max_steps=1) if budget is None else budget,
        observers=Observers(metrics=None),
        **options,
    )
    return loop, client


def raw_field(body: bytes, key: str) -> bytes:
    """The raw JSON text of a top-level field of a request body, as sent."""
    source = body.decode()
    start = source.index(f'"{key}":') + len(f'"{key}":')
    while source[start] == " ":
        start += 1
    _, end = json.JSONDecoder().raw_decode(source, start)
    return source[start:end].encode()


def assert_prefix_stable(bodies: list[bytes]) -> None:
    """Request n+1 starts with request n: the same tools, system and top-level cache_control,
    byte for byte, and its messages array starts with request n's messages (all of them, each
    byte for byte: only new messages follow). Nothing else may differ in the prefix: with
    automatic caching the moving breakpoint is the top-level `cache_control`, outside it."""
    for n in range(len(bodies) - 1):
        before, after = bodies[n], bodies[n + 1]
        for key in ("tools", "system", "cache_control"):
            assert raw_field(after, key) == raw_field(before, key), (n, key)
        previous, current = raw_field(before, "messages"), raw_field(after, "messages")
        assert current.startswith(previous[:-1] + b","), n  # `[m0, ..., mk` then `, mk+1, ...]`


async def test_fifty_turns_keep_a_byte_stable_prefix_on_the_scripted_model() -> None:
    """50 requests (3 parallel tools a turn, thinking, a pause_turn): each starts with the one
    before, byte for byte, as `json.dumps` serialises the keyword arguments."""
    client = ScriptedClient(long_script())
    result = await long_loop(client).run("Work through it.")
    assert result.stop_reason is StopReason.COMPLETED
    assert len(client.requests) == 50
    bodies = [json.dumps(request, sort_keys=False).encode() for request in client.requests]
    assert_prefix_stable(bodies)
    assert [tool["name"] for tool in client.requests[-1]["tools"]] == ["zeta", "alpha", "mid", "web_search"]
    assert violations(client.requests, long_script()) == []


async def test_fifty_turns_keep_a_byte_stable_prefix_in_the_http_bodies() -> None:
    """The same run through the real SDK: the HTTP bodies it sends keep the prefix byte for
    byte, and a second run of the same script sends the very same bytes (nothing
    time-dependent, nothing random)."""
    first, second = RawSDK(long_script()), RawSDK(long_script())
    assert (await long_loop(first).run("Work through it.")).stop_reason is StopReason.COMPLETED
    await long_loop(second).run("Work through it.")
    assert len(first.bodies) == 50
    assert_prefix_stable(first.bodies)
    assert first.bodies == second.bodies
    assert json.loads(first.bodies[4])["cache_control"] == EPHEMERAL


async def test_auto_sends_automatic_caching_and_the_system_prompt_as_a_marked_block() -> None:
    loop, client = scripted_loop(
        [tool_use(("alpha", {"n": 1})), text("ok")], tools=TOOLS, budget=Budget(max_steps=3)
    )
    result = await loop.run("go")
    for request in client.requests:
        assert request["cache_control"] == EPHEMERAL
        assert request["system"] == [{"type": "text", "text": SYSTEM, "cache_control": EPHEMERAL}]
        assert all("cache_control" not in tool for tool in request["tools"])  # the system block covers them
        assert count_breakpoints(request) == 2
    assert "cache_control" not in json.dumps(result.state.messages)  # the transcript is as sent/received
    assert loop.config.spec.system == SYSTEM


async def test_without_a_system_prompt_the_last_tool_is_marked_on_a_copy() -> None:
    loop, client = scripted_loop([text("ok")], system=None, tools=[*TOOLS, SEARCH])
    await loop.run("go")
    (request,) = client.requests
    assert "system" not in request
    assert request["tools"][-1] == {**SEARCH, "cache_control": EPHEMERAL}
    assert "cache_control" not in loop.config.tools.params[-1]


async def test_off_sends_no_cache_control_at_all() -> None:
    loop, client = scripted_loop(
        [tool_use(("alpha", {"n": 1})), text("ok")], tools=TOOLS, budget=Budget(max_steps=3), cache="off"
    )
    await loop.run("go")
    assert all("cache_control" not in json.dumps(request) for request in client.requests)
    assert client.requests[0]["system"] == SYSTEM


async def test_a_one_hour_ttl_is_sent_on_every_breakpoint() -> None:
    loop, client = scripted_loop([text("ok")], cache=CacheSettings(ttl="1h"))
    await loop.run("go")
    (request,) = client.requests
    assert request["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert request["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


async def test_prefix_false_leaves_the_system_prompt_a_string() -> None:
    loop, client = scripted_loop([text("ok")], cache=CacheSettings(prefix=False))
    await loop.run("go")
    assert client.requests[0]["system"] == SYSTEM
    assert client.requests[0]["cache_control"] == EPHEMERAL


async def test_the_users_own_cache_control_wins() -> None:
    """`ModelSettings(cache_control=...)` is sent as given, and the loop adds nothing."""
    mine = {"type": "ephemeral", "ttl": "1h"}
    loop, client = scripted_loop(
        [text("ok")], tools=TOOLS, settings=ModelSettings(cache_control={"type": "ephemeral", "ttl": "1h"})
    )
    await loop.run("go")
    (request,) = client.requests
    assert request["cache_control"] == mine
    assert request["system"] == SYSTEM
    assert count_breakpoints(request) == 1


def test_off_with_a_cache_control_setting_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match='cache="off"'):
        scripted_loop(
            [], system=None, settings=ModelSettings(cache_control={"type": "ephemeral"}), cache="off"
        )


@pytest.mark.parametrize("marked", [0, 1, 2, 3, 4])
async def test_never_more_than_four_breakpoints_with_the_users_own(marked: int) -> None:
    """Breakpoints the tools and the history carry count: the loop adds only what is left."""
    tools: list[Any] = [{**SEARCH, "cache_control": EPHEMERAL}] if marked >= 1 else [SEARCH]
    history: list[Any] = [
        {"role": "user" if k % 2 == 0 else "assistant", "content": [{"type": "text", "text": f"h{k}"}]}
        for k in range(4)
    ]
    for k in range(marked - 1):
        history[2 * (k % 2)]["content"][0]["cache_control"] = EPHEMERAL
    if marked == 4:
        history.append(
            {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": EPHEMERAL}]}
        )
        history.append({"role": "assistant", "content": [{"type": "text", "text": "y"}]})
    loop, client = scripted_loop([text("ok")], tools=tools)
    await loop.run(messages=[*history, {"role": "user", "content": "go"}])
    (request,) = client.requests
    assert count_breakpoints(request) == min(MAX_BREAKPOINTS, marked + 2)
    assert ("cache_control" in request) is (marked < MAX_BREAKPOINTS)


async def test_a_turn_past_the_lookback_marks_where_the_previous_request_ended() -> None:
    """A turn of 12 parallel calls adds more than 20 blocks: the next request also marks the
    last block of the previous request's last message, on a copy."""
    wide = tool_use(*[("alpha", {"n": k}, f"toolu_{k}") for k in range(12)])
    loop, client = scripted_loop(
        [tool_use(("mid", {"n": 0}, "toolu_m")), wide, text("ok")],
        tools=TOOLS,
        budget=Budget(max_steps=5, max_tool_calls=20),
    )
    result = await loop.run("go")
    second, third = client.requests[1], client.requests[2]
    assert 12 * 2 >= LOOKBACK_BLOCKS
    ended = second["messages"][-1]
    marked = third["messages"][len(second["messages"]) - 1]
    assert marked["content"][-1] == {**ended["content"][-1], "cache_control": EPHEMERAL}
    assert count_breakpoints(third) == 3
    assert count_breakpoints(second) == 2  # one call: no need
    assert "cache_control" not in json.dumps(result.state.messages)


async def test_the_final_answer_call_and_a_refusal_retry_keep_the_breakpoints() -> None:
    refusal = {"stop_reason": "refusal", "content": [{"type": "text", "text": ""}]}
    loop, client = scripted_loop(
        [refusal, tool_use(("alpha", {"n": 1})), text("best effort")],
        tools=TOOLS,
        budget=Budget(max_steps=1, on_exhausted="final_answer"),
        fallback_model="claude-opus-4-5",
    )
    result = await loop.run("go")
    assert result.answer == "best effort"
    first, retry, final = client.requests
    assert retry["model"] == "claude-opus-4-5"
    assert final["tool_choice"] == {"type": "none"}
    for request in (first, retry, final):
        assert request["cache_control"] == EPHEMERAL
        assert request["system"][0]["cache_control"] == EPHEMERAL


async def test_a_resumed_run_sends_the_same_breakpoints() -> None:
    @tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    store = MemoryStore()

    def make(script: list[JSON]) -> tuple[AgentLoop, ScriptedClient]:
        return scripted_loop(script, tools=[refund], budget=Budget(max_steps=4), store=store)

    loop, before = make([tool_use(("refund", {"order": "O-1"}, "toolu_r"))])
    assert (await loop.run("Refund O-1", task_id="t")).stop_reason is StopReason.NEEDS_HUMAN
    later, after = make([text("Refunded.")])
    result = await later.resume("t", approvals={"toolu_r": True})
    assert result.stop_reason is StopReason.COMPLETED
    (resumed,) = after.requests
    (original,) = before.requests
    for key in ("tools", "system", "cache_control"):
        assert json.dumps(resumed[key]) == json.dumps(original[key])
    assert json.dumps(resumed["messages"]).startswith(json.dumps(original["messages"])[:-1])


def test_cache_is_part_of_the_spec_the_contract_and_the_provenance() -> None:
    default, _ = scripted_loop([], system=None)
    assert default.config.spec.cache == "auto"
    assert default.config.provenance.cache_sha256 is None  # the default: provenance as before
    assert "cache" not in default.to_contract().to_dict()
    hour, _ = scripted_loop([], system=None, cache=CacheSettings(ttl="1h"))
    off, _ = scripted_loop([], system=None, cache="off")
    assert hour.config.provenance.cache_sha256 not in (None, off.config.provenance.cache_sha256)
    assert hour.to_contract().to_dict()["cache"] == {"ttl": "1h"}  # a setting at its default left out
    assert off.to_contract().to_dict()["cache"] == "off"
    spec = hour.to_contract().spec
    assert spec.cache == CacheSettings(ttl="1h")
    with pytest.raises(ConfigurationError, match="cache"):
        LoopSpec.of(model=MODEL, budget=Budget(max_steps=1), cache="sometimes")


def prompt_caching_blocks() -> list[str]:
    section = COST.split("## Prompt caching", 1)[1].split("\n## ", 1)[0]
    return python_blocks(section)


@pytest.mark.parametrize("on_sdk", [False, True])
def test_the_prompt_caching_docs_run(
    on_sdk: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cost.md "Prompt caching" runs and prints what it says: on `ScriptedClient`, and on
    the real SDK over a mock transport (`SDKScripted` in its place)."""
    if on_sdk:
        monkeypatch.setattr(boundloop, "ScriptedClient", SDKScripted)
    (source,) = prompt_caching_blocks()
    runs_as_promised(source, tmp_path / "prompt_caching.py", capsys)


def test_a_runs_marker_count_follows_its_transcript_as_it_grows_shrinks_and_is_extended() -> None:
    """`MessageMarkers` counts each message once, yet agrees with a fresh count whenever the
    transcript grows at its end, loses its head (a compaction), or has its tail extended in place."""
    marked: dict[str, Any] = {"type": "text", "text": "m", "cache_control": {"type": "ephemeral"}}

    def turn(role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
        return {"role": role, "content": [{"type": "text", "text": "x"}, *blocks]}

    markers = MessageMarkers()
    messages = [turn("user", marked), turn("assistant"), turn("user")]
    assert markers.count(messages) == 1
    messages += [turn("assistant"), turn("user", marked)]
    assert markers.count(messages) == 2
    messages[-1]["content"].append(dict(marked))  # the tail extended in place
    assert markers.count(messages) == 3
    messages = [turn("user"), *messages[3:]]  # the head replaced: the first marker is gone
    assert markers.count(messages) == MessageMarkers().count(messages) == 2


# -- a platform without automatic caching (docs/platforms.md) ------------------------------------


def block_breakpoints(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The request `add_breakpoints` makes of `messages` for a platform without automatic caching."""
    request: dict[str, Any] = {"model": "m", "max_tokens": 8, "system": "Be brief.", "messages": messages}
    add_breakpoints(request, CacheSettings(), automatic=False)
    return request


def test_without_automatic_caching_the_last_block_takes_the_breakpoint() -> None:
    """No top-level `cache_control`: the last block (a plain string made a text block) carries it,
    on a copy; the system prompt keeps its fixed breakpoint."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Where is O-1?"}]
    request = block_breakpoints(messages)
    assert "cache_control" not in request
    assert request["messages"][-1]["content"] == [
        {"type": "text", "text": "Where is O-1?", "cache_control": {"type": "ephemeral"}}
    ]
    assert messages == [{"role": "user", "content": "Where is O-1?"}]  # the transcript is not changed
    assert request["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert count_breakpoints(request) == 2


@pytest.mark.parametrize(
    "last",
    [
        {"type": "thinking", "thinking": "...", "signature": "s"},
        {"type": "text", "text": "marked", "cache_control": {"type": "ephemeral"}},
    ],
    ids=["unmarkable", "already-marked"],
)
def test_a_last_block_that_cannot_take_one_is_left_as_it_is(last: dict[str, Any]) -> None:
    """A thinking block cannot carry `cache_control`; a marked one has its breakpoint already."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [last]}]
    request = block_breakpoints(messages)
    assert "cache_control" not in request
    assert request["messages"][-1]["content"] == [last]
    assert request["system"][0]["cache_control"] == {"type": "ephemeral"}


async def test_the_runs_of_a_loop_share_the_marked_system_prompt_made_once() -> None:
    """The tools and system prompt every request carries are marked once for the loop (its
    `Heads`), not once per run: two runs send the same marked block, the same object."""
    loop, client = scripted_loop([text("one"), text("two")])
    await loop.run("first")
    await loop.run("second")
    first, second = client.requests
    assert first["system"] == [{"type": "text", "text": SYSTEM, "cache_control": EPHEMERAL}]
    assert second["system"] is first["system"]


def test_a_head_is_made_again_for_a_request_that_carries_other_tools() -> None:
    heads = Heads()
    settings = CacheSettings()
    tools: list[JSON] = [{"name": "a", "input_schema": {"type": "object"}}]
    other: list[JSON] = [{"name": "b", "input_schema": {"type": "object"}}]
    head = heads.head({"tools": tools}, settings)
    assert heads.head({"tools": tools}, settings) is head
    again = heads.head({"tools": other}, settings)
    assert again.marked == {"tools": [{**other[0], "cache_control": EPHEMERAL}]}
    assert head.marked == {"tools": [{**tools[0], "cache_control": EPHEMERAL}]}
    assert heads.head({"tools": tools}, CacheSettings(ttl="1h")).marked["tools"][0]["cache_control"] == {
        "type": "ephemeral",
        "ttl": "1h",
    }


def test_runs_whose_requests_carry_tools_of_their_own_make_their_head_once() -> None:
    """Two runs of one loop, each with its own tools (a loop whose MCP toolsets connect for each
    run), asking in turn: each keeps the head made for its tools, not one made again a request."""
    heads, settings = Heads(), CacheSettings()
    first, second = MessageMarkers(heads), MessageMarkers(heads)
    mine: list[JSON] = [{"name": "a", "input_schema": {"type": "object"}}]
    theirs: list[JSON] = [{"name": "b", "input_schema": {"type": "object"}}]
    made = first.head({"tools": mine}, settings), second.head({"tools": theirs}, settings)
    for _ in range(3):
        assert first.head({"tools": mine}, settings) is made[0]
        assert second.head({"tools": theirs}, settings) is made[1]
    assert made[0].marked["tools"][0]["name"] == "a"
    assert made[1].marked["tools"][0]["name"] == "b"
