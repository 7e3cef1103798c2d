"""Property tests: for any scripted sequence of responses, the run ends explained and within bounds."""

from __future__ import annotations

import itertools
from typing import Any, Literal

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boundloop import (
    AgentLoop,
    Budget,
    LoopResult,
    Observers,
    Policy,
    ScriptedClient,
    StopReason,
    UnhandledStop,
    tool,
)
from boundloop.transcript import transcript_errors

JSON = dict[str, Any]
API_STOP_REASONS = [
    "tool_use",
    "end_turn",
    "stop_sequence",
    "pause_turn",
    "max_tokens",
    "refusal",
    "model_context_window_exceeded",
]
# read_order succeeds, flaky fails, issue_refund is forbidden, ghost is not registered.
TOOL_NAMES = ["read_order", "flaky", "issue_refund", "ghost"]


@st.composite
def responses(draw: st.DrawFn) -> JSON:
    """One Messages API response: any stop reason (rarely an unknown one), any mix of blocks."""
    stop_reason = draw(st.sampled_from([*API_STOP_REASONS, "brand_new_reason"]))
    content: list[JSON] = []
    if draw(st.booleans()):
        content.append({"type": "text", "text": draw(st.text(max_size=20))})
    calls = draw(st.integers(0, 3)) if stop_reason in ("tool_use", "max_tokens", "end_turn") else 0
    for index in range(calls):
        tool_input = draw(
            st.one_of(
                st.fixed_dictionaries({"order_id": st.sampled_from(["O-1", "O-2"])}),
                st.dictionaries(
                    st.sampled_from(["order_id", "x"]), st.integers() | st.text(max_size=5), max_size=2
                ),
            )
        )
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{index}",
                "name": draw(st.sampled_from(TOOL_NAMES)),
                "input": tool_input,
            }
        )
    usage = {"input_tokens": draw(st.integers(0, 60)), "output_tokens": draw(st.integers(0, 30))}
    return {"stop_reason": stop_reason, "content": content, "usage": usage}


@st.composite
def budgets(draw: st.DrawFn) -> Budget:
    """Any budget a user might set."""
    on_exhausted: Literal["stop", "final_answer"] = draw(st.sampled_from(["stop", "final_answer"]))
    return Budget(
        max_steps=draw(st.integers(1, 5)),
        max_tool_calls=draw(st.none() | st.integers(0, 6)),
        max_total_tokens=draw(st.none() | st.integers(20, 300)),
        max_consecutive_tool_errors=draw(st.integers(1, 4)),
        max_repeated_calls=draw(st.integers(0, 3)),
        on_exhausted=on_exhausted,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=st.lists(responses(), min_size=6, max_size=6),
    budget=budgets(),
    on_forbidden=st.sampled_from(["stop", "report"]),
    continue_on_max_tokens=st.booleans(),
)
def test_any_script_ends_with_a_stop_reason_within_budget_and_a_valid_transcript(
    script: list[JSON], budget: Budget, on_forbidden: Literal["stop", "report"], continue_on_max_tokens: bool
) -> None:
    """Any model output ends with a StopReason or UnhandledStop, within budget, valid, nothing forbidden."""
    ran: list[str] = []

    @tool
    async def read_order(order_id: str) -> str:
        """Read an order."""
        ran.append("read_order")
        return f"order {order_id}"

    @tool
    async def flaky(order_id: str) -> str:
        """Fails."""
        ran.append("flaky")
        raise RuntimeError("down")

    @tool
    async def issue_refund(order_id: str) -> str:
        """Forbidden."""
        ran.append("issue_refund")
        return "refunded"

    client = ScriptedClient(script)
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[read_order, flaky, issue_refund],
        budget=budget,
        policy=Policy(
            forbidden={"issue_refund"},
            on_forbidden=on_forbidden,
            on_max_tokens="continue" if continue_on_max_tokens else "stop",
        ),
        observers=Observers(metrics=None),
    )

    async def run() -> tuple[LoopResult | None, UnhandledStop | None]:
        try:
            return await loop.run("goal"), None
        except UnhandledStop as exc:
            return exc.result, exc

    result, unhandled = anyio.run(run)
    if unhandled is not None:
        assert unhandled.stop_reason == "brand_new_reason"
    assert result is not None
    state = result.state
    assert isinstance(result.stop_reason, StopReason)
    assert "issue_refund" not in ran
    assert state.step <= budget.max_steps
    if budget.max_tool_calls is not None:
        assert state.tool_calls <= budget.max_tool_calls
    assert ran.count("read_order") + ran.count("flaky") == state.tool_calls
    if budget.max_total_tokens is not None:
        # Checked before every model call: no call starts at or over the limit, except the one
        # final-answer call that on_exhausted="final_answer" allows.
        used = [r.usage.input_tokens + r.usage.output_tokens for r in state.responses]
        started_over = sum(1 for i in range(len(used)) if sum(used[:i]) >= budget.max_total_tokens)
        assert started_over <= (1 if budget.on_exhausted == "final_answer" else 0)
    assert not transcript_errors(state.messages), transcript_errors(state.messages)
    assert [e.kind for e in result.events].count("stop") == 1
    assert result.events[-1].kind == "stop"
    transitions = [e for e in result.events if e.kind == "transition"]
    assert transitions[-1].dest == "stopped"
    assert all(a.dest == b.source for a, b in itertools.pairwise(transitions))
