"""Recorded real Claude traffic of other open-source projects, replayed through the real
`AsyncAnthropic` over tests/fake_api.py, and the requests the API accepted checked against the
request invariant.

tests/recorded/ holds, each entry with its `source` (`github.com/<owner>/<repo>/blob/<commit>/<path>`)
and, where a long string was cut, a `trimmed` note saying which and why that cannot matter:

- web_search_usage.json: responses of claude-sonnet-4-0, 4-5 and opus-4-1 whose
  `usage.server_tool_use` holds `web_search_requests` alone (no `web_fetch_requests`), as
  JSON bodies or as the recorded stream events;
- tool_search_exchanges.json: two runs with tool search and deferred tools, three streams
  each: the first ends (`tool_use`) with a client `tool_use` and then the search's
  `server_tool_use` without its result; the stream after the `tool_result` opens with it;
- accepted_requests.json: request bodies the API answered with 200 (multi-turn tool use,
  server tools, thinking, pause_turn continuations, code execution with its container, MCP,
  compaction, tool search, a server call in flight beside a client call, consecutive turns of
  one role).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from boundloop import AgentLoop, Budget, Observers, Tool
from boundloop._core.invariant import check_request, request_problem
from tests.api_rules import violations
from tests.fake_api import MODEL, Body, FakeAPI, Raw

JSON = dict[str, Any]
RECORDED = Path(__file__).parent / "recorded"
WEB_SEARCH: list[JSON] = json.loads((RECORDED / "web_search_usage.json").read_text("utf-8"))
TOOL_SEARCH: list[JSON] = json.loads((RECORDED / "tool_search_exchanges.json").read_text("utf-8"))
ACCEPTED: list[JSON] = json.loads((RECORDED / "accepted_requests.json").read_text("utf-8"))
SOURCE = re.compile(r"github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+")


def _id(entry: JSON) -> str:
    """The cassette's file name and the interactions taken from it."""
    name: str = entry["source"].rsplit("/", 1)[-1][:60]
    taken = entry.get("interaction", entry.get("interactions"))
    return name if taken is None else f"{name}-{taken}"


def _sse(events: list[JSON]) -> Raw:
    """A recorded stream as the API sends it: each event as `event:` and `data:` lines."""
    text = "".join(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events)
    return Raw(content=text.encode(), content_type="text/event-stream")


def _client_tools(names: set[str], ran: list[tuple[str, JSON]], *, deferred: bool = False) -> list[Tool]:
    def handler_for(name: str) -> Any:
        def answer(**arguments: object) -> str:
            ran.append((name, arguments))
            return f"{name}: recorded answer"

        return answer

    schema = {"type": "object", "additionalProperties": True}
    return [
        Tool(
            name=name,
            description=f"{name} (replayed)",
            input_schema=schema,
            handler=handler_for(name),
            defer_loading=True if deferred else None,
        )
        for name in sorted(names)
    ]


def _searches(entry: JSON) -> int:
    """The web searches the entry's responses report, from their usage as recorded."""
    usages = [body["usage"] for body in entry.get("responses", [])]
    for events in entry.get("streams", []):
        usages += [event["usage"] for event in events if event["type"] == "message_delta"]
    return sum((usage.get("server_tool_use") or {}).get("web_search_requests", 0) for usage in usages)


def test_every_recorded_entry_cites_its_source() -> None:
    for entry in (*WEB_SEARCH, *TOOL_SEARCH, *ACCEPTED):
        assert SOURCE.fullmatch(entry["source"]), entry["source"]
    assert len(ACCEPTED) >= 30
    assert {entry["source"].split("/")[1] for entry in ACCEPTED} >= {"pydantic", "simonw", "Mirascope"}


@pytest.mark.parametrize("entry", WEB_SEARCH, ids=[_id(e) for e in WEB_SEARCH])
async def test_a_response_counting_web_searches_alone_replays_and_is_priced(entry: JSON) -> None:
    """sonnet-4-0 / 4-5 and opus-4-1 send `server_tool_use` without `web_fetch_requests`: a missing
    count is zero, not a broken response; the searches are counted and priced."""
    streamed = "streams" in entry
    replies = (
        [_sse(events) for events in entry["streams"]]
        if streamed
        else [Body(json=b) for b in entry["responses"]]
    )
    fake = FakeAPI(replies, honour_max_tokens=False)
    loop = AgentLoop(
        fake.client(), model=MODEL, budget=Budget(max_steps=len(replies)), observers=Observers(metrics=None)
    )
    if streamed:
        async with loop.stream("Replay the recorded exchange.") as run:
            async for _ in run:
                pass
        result = run.result
        assert result is not None
    else:
        result = await loop.run("Replay the recorded exchange.")
    assert result.state.errors == []
    assert str(result.stop_reason) == "completed"
    assert len(fake.requests) == len(replies)
    searches = _searches(entry)
    usage = result.state.usage
    assert usage.server_tool_uses.get("web_search", 0) == searches
    assert "web_fetch" not in usage.server_tool_uses
    assert usage.cost_usd is not None
    assert usage.cost_usd >= searches * 10 / 1000
    if not streamed:
        assert violations(fake.requests, entry["responses"]) == []


@pytest.mark.parametrize("entry", TOOL_SEARCH, ids=[e["server_tool"]["name"] for e in TOOL_SEARCH])
async def test_a_turn_ending_in_a_tool_search_beside_a_client_call_runs_end_to_end(entry: JSON) -> None:
    """The client tool runs, its result goes back after the unfinished search, and the next
    stream opens with the search's result; every request keeps the API's rules. The client
    tools are deferred (`defer_loading`, as recorded: the search found them), registered and
    gated from the start."""
    streams: list[list[JSON]] = entry["streams"]
    fake = FakeAPI([_sse(events) for events in streams], honour_max_tokens=False)
    ran: list[tuple[str, JSON]] = []
    loop = AgentLoop(
        fake.client(),
        model=MODEL,
        tools=[*_client_tools(set(entry["tools"]), ran, deferred=True), entry["server_tool"]],
        budget=Budget(max_steps=len(streams)),
        observers=Observers(metrics=None),
    )
    async with loop.stream("Add a bullet saying bye.") as run:
        async for _ in run:
            pass
    result = run.result
    assert result is not None
    assert result.state.errors == []
    assert str(result.stop_reason) == "completed"
    assert [name for name, _ in ran] == ["readNoteTree", "executeEditorOperation"]
    assert len(fake.requests) == 3
    for request in fake.requests:
        sent_tools = {tool["name"]: tool for tool in request["tools"]}
        assert all(sent_tools[name]["defer_loading"] is True for name in entry["tools"])
    first = [e["content_block"] for e in streams[0] if e["type"] == "content_block_start"]
    search, call = first[-1], first[-2]
    assert (search["type"], call["type"]) == ("server_tool_use", "tool_use")
    sent = fake.requests[1]["messages"]
    assert [block["type"] for block in sent[-2]["content"]][-2:] == ["tool_use", "server_tool_use"]
    assert sent[-2]["content"][-1]["id"] == search["id"]
    assert [(b["type"], b["tool_use_id"]) for b in sent[-1]["content"]] == [("tool_result", call["id"])]
    opened = next(e["content_block"] for e in streams[1] if e["type"] == "content_block_start")
    assert (opened["type"], opened["tool_use_id"]) == ("tool_search_tool_result", search["id"])
    assert fake.requests[2]["messages"][-2]["content"][0] == opened  # sent back as received
    for request in fake.requests:
        assert request_problem(request, None, None) is None
    assert not [p for p in violations(fake.requests, []) if "assistant turn that is no" not in p]


@pytest.mark.parametrize("entry", ACCEPTED, ids=[_id(e) for e in ACCEPTED])
def test_a_request_the_api_accepted_passes_the_request_invariant(entry: JSON) -> None:
    assert entry["status"] == 200
    request: JSON = entry["request"]
    assert request_problem(request, None, None) is None
    check_request(request, None, None)  # raises InvalidRequest on a broken rule
