"""Requests the API accepts, always (issue 23, item 4), and every stop reason handled (item 3).

Each run's requests are checked by `tests/api_rules.py`, independently of the loop's own check.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, cast

import pytest
from anthropic.types import StopReason as SDKStopReason
from anthropic.types.beta import BetaStopReason

from boundloop import (
    AgentLoop,
    Budget,
    ConfigurationError,
    InvalidRequest,
    Observers,
    Policy,
    ScriptedClient,
    StopReason,
    tool,
)
from boundloop._core.blocks import received_turn
from boundloop._core.invariant import RequestChecker, ResponseShape, request_problem
from boundloop.policy import Route, SignalContext, Verdict
from boundloop.signals import DEFAULT_HANDLERS, KNOWN_STOP_REASONS
from boundloop.testing import parse_message
from tests.api_rules import violations

JSON = dict[str, Any]
MODEL = "claude-sonnet-4-6"
SEARCH: JSON = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "boundloop"},
}
SEARCH_RESULT: JSON = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://example.com",
            "title": "Example",
            "encrypted_content": "EqwB",
            "page_age": None,
        }
    ],
}
CONTAINER: JSON = {"id": "container_011CYVPF4iP8oD6Vsz1NhVih", "expires_at": "2026-02-25T20:07:37.475893Z"}


def response(stop_reason: str, *content: JSON, **fields: Any) -> JSON:
    return {
        "stop_reason": stop_reason,
        "content": list(content),
        "usage": {"input_tokens": 10, "output_tokens": 5},
        **fields,
    }


def text(value: str) -> JSON:
    return {"type": "text", "text": value}


@tool
async def read_order(order_id: str) -> str:
    """Read one order by id."""
    return f"{order_id}: delivered"


async def run(script: list[JSON], **settings: Any) -> tuple[Any, ScriptedClient]:
    client = ScriptedClient(script, model=MODEL)
    settings.setdefault("budget", Budget(max_steps=5))
    loop = AgentLoop(client, model=MODEL, tools=[read_order], observers=Observers(metrics=None), **settings)
    return await loop.run("What is new about boundloop?"), client


# -- the defects -----------------------------------------------------------------------------------


async def test_a_final_answer_after_a_paused_server_call_drops_the_unfinished_turn() -> None:
    """Paused inside a web search, then a spent budget with on_exhausted="final_answer": the
    note never follows the unanswered server call (the API's 400); the unfinished turn is
    dropped from the transcript and the final answer asked from what came before."""
    script = [
        response("pause_turn", text("Let me search."), SEARCH),
        response("end_turn", text("My best answer.")),
    ]
    result, client = await run(script, budget=Budget(max_steps=1, on_exhausted="final_answer"))
    assert result.stop_reason is StopReason.MAX_STEPS
    assert result.answer == "My best answer."
    final = client.requests[-1]
    assert len(client.requests) == 2
    assert [message["role"] for message in final["messages"]] == ["user"]  # the paused turn dropped
    assert "budget of this run is spent" in final["messages"][0]["content"][-1]["text"]
    assert violations(client.requests, script) == []


async def test_a_max_tokens_cut_inside_a_server_call_is_never_continued() -> None:
    """A `max_tokens` cut inside a server_tool_use with on_max_tokens="continue": the cut call
    never runs and no continuation note follows it; the run stops truncated."""
    script = [response("max_tokens", text("Searching"), SEARCH), response("end_turn", text("done"))]
    result, client = await run(script, policy=Policy(on_max_tokens="continue"))
    assert result.stop_reason is StopReason.TRUNCATED
    assert "server_tool_use 'web_search'" in (result.state.stop_detail or "")
    assert len(client.requests) == 1
    assert violations(client.requests, script) == []


async def test_the_last_responses_container_is_sent_with_the_next_request() -> None:
    """Programmatic tool calling: the code execution waits in its container for the tool's
    result, so the next request names the container (else the API answers 400)."""
    code = {"type": "server_tool_use", "id": "srvtoolu_9", "name": "code_execution", "input": {"code": "x"}}
    call = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "read_order",
        "input": {"order_id": "O-1"},
        "caller": {"type": "code_execution_20260120", "tool_id": "srvtoolu_9"},
    }
    script = [
        response("tool_use", code, call, container=CONTAINER),
        response("end_turn", text("O-1 is delivered.")),
    ]
    result, client = await run(script)
    assert result.stop_reason is StopReason.COMPLETED
    assert "container" not in client.requests[0]
    assert client.requests[1]["container"] == CONTAINER["id"]
    assert violations(client.requests, script) == []


async def test_a_broken_rule_is_never_sent_and_fails_the_run() -> None:
    """A request that breaks a rule (here: a custom pause_turn handler nudging after a paused
    server call) is a bug: the run stops failed, saying which rule, and nothing is sent."""

    def nudge(message: Any, ctx: SignalContext) -> Route:
        return Route(verdict=Verdict.RESUME, nudge="Go on.")

    script = [response("pause_turn", text("Let me search."), SEARCH), response("end_turn", text("done"))]
    result, client = await run(script, policy=Policy(signal_handlers={"pause_turn": nudge}))
    assert result.stop_reason is StopReason.FAILED
    assert "would reject" in (result.state.stop_detail or "")
    assert "unfinished server_tool_use 'srvtoolu_1'" in (result.state.stop_detail or "")
    assert [error.kind for error in result.state.errors] == ["invalid_request"]
    assert len(client.requests) == 1


# -- the rules, one by one -------------------------------------------------------------------------


def test_each_rule_names_what_it_finds() -> None:
    """The invariant finds each broken rule: an unanswered or late tool_result, a stray one, a
    block sent as another type or without a field it had, a missing container."""
    last = parse_message(
        response(
            "tool_use",
            text("hi"),
            {"type": "tool_use", "id": "t1", "name": "x", "input": {}},
            container=CONTAINER,
        )
    )
    sent: JSON = {
        "role": "assistant",
        "content": [text("hi"), {"type": "tool_use", "id": "t1", "name": "x", "input": {}}],
    }
    answer = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}

    def problem(user: list[JSON], assistant: JSON = sent, container: object = CONTAINER["id"]) -> str | None:
        request: JSON = {
            "messages": [{"role": "user", "content": "q"}, assistant, {"role": "user", "content": user}]
        }
        if container is not None:
            request["container"] = container
        return request_problem(request, last, assistant)

    assert problem([answer, text("more")]) is None
    assert "not answered first" in (problem([text("first"), answer]) or "")
    assert "not answered first" in (problem([]) or "")
    assert "a tool_result for no tool_use" in (problem([answer, {**answer, "tool_use_id": "t2"}]) or "")
    assert "container" in (problem([answer], container=None) or "")
    assert "container" in (problem([answer], container="container_other") or "")
    mcp = parse_message(
        response(
            "end_turn", {"type": "mcp_tool_use", "id": "m1", "name": "x", "server_name": "s", "input": {}}
        )
    )
    lost = {"role": "assistant", "content": [{"type": "text", "text": None}]}
    found = request_problem({"messages": [{"role": "user", "content": "q"}, lost]}, mcp, lost)
    assert found is not None
    assert "sent as 'text', received as 'mcp_tool_use'" in found
    partial = {"role": "assistant", "content": [{"type": "mcp_tool_use", "id": "m1"}]}
    found = request_problem({"messages": [{"role": "user", "content": "q"}, partial]}, mcp, partial)
    assert found is not None
    assert "without the fields ['input', 'name', 'server_name']" in found
    # A field the SDK does not model (kept as an extra) must be sent back too.
    extra = parse_message(response("end_turn", {"type": "text", "text": "hi", "x_new": {"k": 1}}))
    kept = {"role": "assistant", "content": [{"type": "text", "text": "hi", "x_new": {"k": 1}}]}
    assert request_problem({"messages": [{"role": "user", "content": "q"}, kept]}, extra, kept) is None
    dropped = {"role": "assistant", "content": [text("hi")]}
    found = request_problem({"messages": [{"role": "user", "content": "q"}, dropped]}, extra, dropped)
    assert found is not None
    assert "without the fields ['x_new']" in found


def test_the_shape_read_with_the_transcript_message_still_finds_a_lost_field() -> None:
    """`received_turn` reads each block's type and sent fields off the SDK block as it makes the
    transcript's message (one pass, not a second one at validation): the next request's check
    still finds a field, an extra field or a type the message lost after it was made."""
    last = parse_message(
        response(
            "tool_use",
            {"type": "text", "text": "hi", "x_new": {"k": 1}},
            {"type": "tool_use", "id": "t1", "name": "x", "input": {}, "caller": {"type": "direct"}},
        )
    )
    sent, shapes = received_turn(last.content)
    shape = ResponseShape(last, shapes)
    text_block, call = cast(list[dict[str, Any]], sent["content"])  # the transcript's JSON

    def problem() -> str | None:
        return request_problem({"messages": [{"role": "user", "content": "q"}, sent]}, shape, sent)

    assert problem() is None
    del text_block["x_new"]
    assert "block 0 (text) is sent without the fields ['x_new']" in (problem() or "")
    text_block["x_new"] = {"k": 1}
    del call["caller"]
    assert "block 1 (tool_use) is sent without the fields ['caller']" in (problem() or "")
    call["caller"] = {"type": "direct"}
    call["type"] = "server_tool_use"
    assert "block 1 is sent as 'server_tool_use', received as 'tool_use'" in (problem() or "")


# -- every stop reason has a handler ---------------------------------------------------------------


def test_every_stop_reason_of_the_installed_sdk_has_a_handler() -> None:
    """Derived from the SDK's `StopReason` and beta `BetaStopReason`: a new one fails here."""
    api = set(typing.get_args(SDKStopReason)) | set(typing.get_args(BetaStopReason))
    assert api <= set(DEFAULT_HANDLERS)
    assert api <= KNOWN_STOP_REASONS
    assert set(DEFAULT_HANDLERS) <= KNOWN_STOP_REASONS


async def test_compaction_continues_with_the_block_as_received() -> None:
    """stop_reason compaction: the turn, its compaction block exactly as received, is sent
    back and the model continues it; no user turn in between."""
    compaction = {
        "type": "compaction",
        "content": "Earlier conversation summarized.",
        "encrypted_content": "EpwBCioIDxgCEAEYASJALd_opaque_compaction_payload",
    }
    script = [response("compaction", compaction), response("end_turn", text("Hello there!"))]
    result, client = await run(script)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.answer == "Hello there!"
    assert client.requests[1]["messages"][-1] == {"role": "assistant", "content": [compaction]}
    assert violations(client.requests, script) == []


REFUSAL_DETAILS: JSON = {
    "type": "refusal",
    "category": "cyber",
    "explanation": "Refused by policy.",
    "fallback_credit_token": "fct_0123",
}


async def test_a_refusal_is_retried_once_on_the_fallback_model_with_the_credit_token() -> None:
    """With fallback_model set, the refused request is sent again, the same body, to the
    fallback model with the refusal's fallback_credit_token; its answer completes the run."""
    script = [
        response("refusal", text(""), stop_details=REFUSAL_DETAILS),
        response("end_turn", text("Here it is.")),
    ]
    result, client = await run(script, fallback_model="claude-opus-4-5", budget=Budget(max_steps=1))
    assert result.stop_reason is StopReason.COMPLETED
    assert result.answer == "Here it is."
    assert result.state.step == 1  # the retry is the same step again
    first, retry = client.requests
    assert retry["model"] == "claude-opus-4-5"
    assert retry["extra_body"] == {"fallback_credit_token": "fct_0123"}
    assert retry["messages"] == first["messages"]
    assert {key: value for key, value in retry.items() if key not in ("model", "extra_body")} == {
        key: value for key, value in first.items() if key != "model"
    }
    assert violations(client.requests, script[:1] * 2) == []


async def test_a_refusal_of_the_fallback_model_stops_refused_with_its_details() -> None:
    """The retry is made once: the fallback's own refusal stops the run `refused`."""
    script = [response("refusal", text(""), stop_details=REFUSAL_DETAILS), response("refusal", text(""))]
    result, client = await run(script, fallback_model="claude-opus-4-5")
    assert result.stop_reason is StopReason.REFUSED
    assert len(client.requests) == 2
    assert "extra_body" not in client.requests[0]


async def test_without_a_fallback_model_a_refusal_stops_with_its_stop_details() -> None:
    script = [response("refusal", text(""), stop_details=REFUSAL_DETAILS)]
    result, client = await run(script)
    assert result.stop_reason is StopReason.REFUSED
    assert '"category":"cyber"' in (result.state.stop_detail or "")
    assert len(client.requests) == 1


def test_fallback_model_is_a_setting_of_the_spec_and_the_contract() -> None:
    loop = AgentLoop(
        ScriptedClient([]), model=MODEL, fallback_model="claude-opus-4-5", budget=Budget(max_steps=1)
    )
    assert loop.config.spec.fallback_model == ("claude-opus-4-5",)  # the spec holds the route
    assert loop.config.provenance.fallback_model == "claude-opus-4-5"
    assert loop.to_contract().to_dict()["fallback_model"] == "claude-opus-4-5"
    with pytest.raises(ConfigurationError):
        AgentLoop(ScriptedClient([]), model=MODEL, fallback_model="", budget=Budget(max_steps=1))


async def test_a_full_context_window_keeps_the_partial_answer() -> None:
    """model_context_window_exceeded: the text so far is kept in the state (the answer so far,
    not a completed one: the stop reason says so)."""
    script = [response("model_context_window_exceeded", text("The first half of the answer"))]
    result, _ = await run(script)
    assert result.stop_reason is StopReason.CONTEXT_EXCEEDED
    assert result.state.answer == "The first half of the answer"


# -- docs/claude-api.md ----------------------------------------------------------------------------

DOC = Path(__file__).resolve().parent.parent / "docs" / "claude-api.md"


def _section(heading: str) -> str:
    return DOC.read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_stop_reason_table_has_a_row_per_stop_reason() -> None:
    table = _section("## Stop reasons")
    api = set(typing.get_args(SDKStopReason)) | set(typing.get_args(BetaStopReason))
    for stop_reason in api:
        assert f"`{stop_reason}`" in table


def test_the_checker_checks_each_request_from_where_the_previous_one_changed() -> None:
    """A run's checker starts after what the previous request held as is: a replaced last
    user turn and a dropped tail are checked again."""
    call: JSON = {"type": "tool_use", "id": "t1", "name": "x", "input": {}}
    assistant: JSON = {"role": "assistant", "content": [call]}
    answered: JSON = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
    }
    goal: JSON = {"role": "user", "content": "q"}
    checker = RequestChecker()
    checker.check({"messages": [goal, assistant, answered]}, None, None)
    late: JSON = {"role": "user", "content": [text("first"), *answered["content"]]}
    with pytest.raises(InvalidRequest, match="not answered first"):
        checker.check({"messages": [goal, assistant, late]}, None, None)
    with pytest.raises(InvalidRequest, match="not answered first"):
        checker.check({"messages": [goal, assistant, {"role": "user", "content": []}]}, None, None)


def test_a_tail_extended_in_place_is_checked_again() -> None:
    """A run's checker skips the messages the previous request held, except a tail the loop
    extended in place (the same object, more blocks): a tool_result added to it is checked."""
    call: JSON = {"type": "tool_use", "id": "t1", "name": "x", "input": {}}
    assistant: JSON = {"role": "assistant", "content": [call]}
    answered: JSON = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
    }
    goal: JSON = {"role": "user", "content": "q"}
    checker = RequestChecker()
    messages = [goal, assistant, answered]
    checker.check({"messages": messages}, None, None)
    answered["content"].append({"type": "tool_result", "tool_use_id": "t9", "content": "stray"})
    with pytest.raises(InvalidRequest, match="no tool_use of the turn before"):
        checker.check({"messages": messages}, None, None)
