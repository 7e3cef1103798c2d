"""The tree's in-memory ledger (`boundloop._core.ledger.TreeLedger`): reserve clamps to what is
left beside the other reservations, settle replaces a hold by what was billed, release frees it."""

from __future__ import annotations

import anthropic
import httpx2

from boundloop import AgentLoop, Budget, Observers, ScriptedClient, StopReason
from boundloop._core.ledger import TreeLedger
from boundloop.pools import Claim, Grant, Shortfall
from tests.helpers import text, tool_use

CLAIM = Claim(input_tokens=100, output_tokens=1_000, input_usd=1e-6, output_usd=1e-5)
"""A call worth $0.0001 of input and up to $0.01 of output."""


async def test_reserve_clamps_to_what_the_other_reservations_leave() -> None:
    ledger = TreeLedger(max_cost_usd=0.015, max_total_tokens=None)
    first = await ledger.reserve(CLAIM)
    second = await ledger.reserve(CLAIM)
    third = await ledger.reserve(CLAIM)
    assert isinstance(first, Grant)
    assert first.output_tokens == 1_000
    assert isinstance(second, Grant)
    # $0.015 - $0.0101 - $0.0001 of input, at $0.00001 a token: 480, less one where the float
    # sum lands a hair above the ceiling (rounding errs on the safe side, never over it).
    assert second.output_tokens in (479, 480)
    assert first.cost_usd + second.cost_usd <= 0.015
    assert isinstance(third, Shortfall)
    assert third.limit == "max_cost_usd"
    assert ledger.reserved_usd + 0.0001 > 0.015 - 1e-12


async def test_settle_replaces_the_hold_and_release_frees_it() -> None:
    ledger = TreeLedger(max_cost_usd=None, max_total_tokens=2_500)
    grant = await ledger.reserve(CLAIM)
    assert isinstance(grant, Grant)
    assert ledger.reserved_tokens == 1_100
    await ledger.settle(grant, cost_usd=0.001, tokens=300)
    await ledger.settle(grant, cost_usd=0.001, tokens=300)  # once only
    assert (ledger.spent_tokens, ledger.reserved_tokens) == (300, 0)
    held = await ledger.reserve(CLAIM)
    clamped = await ledger.reserve(CLAIM)
    assert isinstance(held, Grant)
    assert isinstance(clamped, Grant)
    assert clamped.output_tokens == 2_500 - 300 - 1_100 - 100
    refused = await ledger.reserve(CLAIM)
    assert isinstance(refused, Shortfall)
    assert refused.limit == "max_total_tokens"
    await ledger.release(held)
    again = await ledger.reserve(CLAIM)
    assert isinstance(again, Grant)
    assert again.output_tokens == 1_000


async def test_a_child_whose_call_fails_releases_its_reservation() -> None:
    """The first child's model call fails (an API error): what it held is free again, so the
    second child, started after it, is covered in full."""
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    failure = anthropic.InternalServerError("boom", response=httpx2.Response(500, request=request), body=None)
    model = ScriptedClient([failure, text("second")])
    child = AgentLoop(
        model,
        model="claude-sonnet-4-6",
        max_tokens=1_000,
        budget=Budget(max_steps=1),
        observers=Observers(metrics=None),
    )
    lead = AgentLoop(
        ScriptedClient(
            [tool_use(("research", {"task": "a"})), tool_use(("research", {"task": "b"})), text("done")]
        ),
        model="claude-sonnet-4-6",
        max_tokens=1_000,
        tools=[child.as_tool("research", description="Research.")],
        # $0.02: one child's worst case (1,000 output tokens, $0.015) fits, two held at once do not.
        budget=Budget(max_steps=3, max_cost_usd=0.02),
        observers=Observers(metrics=None),
    )
    result = await lead.run("go")
    assert [answer.outcome for answer in result.state.observations] == ["error", "ok"]
    assert [request["max_tokens"] for request in model.requests] == [1_000, 1_000]
    assert result.stop_reason is StopReason.COMPLETED
