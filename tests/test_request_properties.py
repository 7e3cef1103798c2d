"""Property test: whatever the model answers, every request the loop sends is one the API accepts.

Random response sequences (text, thinking, redacted thinking, client tool calls, server tool
calls with their results or paused before them, pause_turn, max_tokens cuts, compaction,
refusals, containers) under random budgets and policies; every request a run sends is checked
against the API's rules by tests/api_rules.py, independently of the loop's own check.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boundloop import AgentLoop, Budget, Observers, Policy, ScriptedClient, tool
from tests.api_rules import violations

JSON = dict[str, Any]
STOP_REASONS = [
    "end_turn",
    "tool_use",
    "pause_turn",
    "max_tokens",
    "stop_sequence",
    "compaction",
    "refusal",
    "model_context_window_exceeded",
]
CONTAINER: JSON = {"id": "container_011CYVPF4iP8oD6Vsz1NhVih", "expires_at": "2026-02-25T20:07:37Z"}


@tool
async def read_order(order_id: str) -> str:
    """Read one order by id."""
    return f"{order_id}: delivered"


def _search(call_id: str) -> JSON:
    return {"type": "server_tool_use", "id": call_id, "name": "web_search", "input": {"query": "orders"}}


def _result(call_id: str) -> JSON:
    return {
        "type": "web_search_tool_result",
        "tool_use_id": call_id,
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.com",
                "title": "t",
                "encrypted_content": "E",
            }
        ],
    }


@st.composite
def responses(draw: st.DrawFn, k: int) -> JSON:
    """Response `k` of a script: blocks in the order the API sends them, for its stop reason."""
    # Paused and cut turns twice as often: the requests after them are where the rules bite.
    stop_reason = draw(st.sampled_from([*STOP_REASONS, "pause_turn", "max_tokens"]))
    content: list[JSON] = []
    if draw(st.booleans()):
        content.append({"type": "thinking", "thinking": "Let me think.", "signature": f"sig{k}"})
    if draw(st.integers(0, 4)) == 0:
        content.append({"type": "redacted_thinking", "data": f"redacted{k}"})
    if stop_reason == "compaction":
        content = [{"type": "compaction", "content": "Summary so far.", "encrypted_content": f"enc{k}"}]
    for index in range(draw(st.integers(0, 2))):  # server calls the API ran, with their results
        content += [_search(f"srvtoolu_{k}_{index}"), _result(f"srvtoolu_{k}_{index}")]
    if draw(st.booleans()):
        content.append(
            {"type": "text", "text": draw(st.sampled_from(["", "Checking.", "O-1 is delivered."]))}
        )
    if stop_reason in ("tool_use", "max_tokens"):
        for index in range(draw(st.integers(0 if stop_reason == "max_tokens" else 1, 2))):
            order = draw(st.sampled_from(["O-1", "O-2"]))
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{k}_{index}",
                    "name": "read_order",
                    "input": {"order_id": order},
                }
            )
    if stop_reason in ("pause_turn", "max_tokens", "refusal") and draw(st.booleans()):
        content.append(_search(f"srvtoolu_{k}_open"))  # paused or cut before the server call ran
    body: JSON = {
        "stop_reason": stop_reason,
        "content": content,
        "usage": {"input_tokens": draw(st.integers(0, 50)), "output_tokens": draw(st.integers(0, 20))},
    }
    if draw(st.integers(0, 2)) == 0:
        body["container"] = CONTAINER
    if stop_reason == "refusal" and draw(st.booleans()):
        body["stop_details"] = {"type": "refusal", "category": "cyber", "fallback_credit_token": f"fct_{k}"}
    return body


@st.composite
def scripts(draw: st.DrawFn) -> list[JSON]:
    return [draw(responses(k)) for k in range(6)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=scripts(),
    max_steps=st.integers(1, 4),
    on_exhausted=st.sampled_from(["stop", "final_answer"]),
    on_max_tokens=st.sampled_from(["stop", "continue"]),
    fallback=st.sampled_from([None, "claude-opus-4-5"]),
)
def test_every_request_the_loop_sends_is_one_the_api_accepts(
    script: list[JSON],
    max_steps: int,
    on_exhausted: Literal["stop", "final_answer"],
    on_max_tokens: Literal["stop", "continue"],
    fallback: str | None,
) -> None:
    client = ScriptedClient([*script, *[{"stop_reason": "end_turn", "content": []}] * 4])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[read_order],
        budget=Budget(max_steps=max_steps, on_exhausted=on_exhausted),
        policy=Policy(on_max_tokens=on_max_tokens),
        fallback_model=fallback,
        observers=Observers(metrics=None),
    )
    result = anyio.run(loop.run, "Where is order O-1?")
    assert [error.message for error in result.state.errors if error.kind == "invalid_request"] == []
    assert violations(client.requests, [*script, *[{"content": []}] * 4]) == []


def test_a_nudge_never_follows_a_server_call_its_continuation_left_open() -> None:
    """Found by the property above: a paused server call whose continuation answers nothing,
    then an empty answer. The nudge for the empty answer is a user turn, which may not follow
    the open server call: the unfinished turn is dropped before it (as before the final-answer
    note), and the run goes on."""
    script: list[JSON] = [
        {"stop_reason": "pause_turn", "content": [_search("srvtoolu_open")]},
        {"stop_reason": "end_turn", "content": []},
        {"stop_reason": "end_turn", "content": [{"type": "text", "text": "O-1 is delivered."}]},
    ]
    client = ScriptedClient(script)
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[read_order],
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
    )
    result = anyio.run(loop.run, "Where is order O-1?")
    assert [error.message for error in result.state.errors if error.kind == "invalid_request"] == []
    assert violations(client.requests, script) == []
    assert (result.stop_reason, result.answer) == ("completed", "O-1 is delivered.")
    assert len(client.requests) == 3
