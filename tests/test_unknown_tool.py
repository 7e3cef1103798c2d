"""`Policy(on_unknown_tool=...)`: a tool name the model invents is answered (`report`, the default)
or ends the run `failed` before any call of its batch runs (`stop`)."""

from __future__ import annotations

import pytest

from boundloop import ConfigurationError, Policy, ScriptedClient, StopReason, replay
from tests.helpers import assert_valid_transcript, blocks, text, tool_use
from tests.test_faults import Ledger, decisions, loop_for, stop_event

INVENTED = tool_use(("read_order", {"order_id": "O-1"}), ("lookup_refund_history", {"order_id": "O-1"}))


async def test_by_default_an_invented_tool_is_answered_and_the_run_goes_on() -> None:
    ledger = Ledger()
    client = ScriptedClient([INVENTED, text("done")])
    result = await loop_for(client, ledger).run("goal")
    assert result.stop_reason is StopReason.COMPLETED
    assert ledger.ran == [("read_order", {"order_id": "O-1"})]
    assert "unknown tool 'lookup_refund_history'" in blocks(result.messages[2])[1]["content"]
    assert decisions(result) == [("read_order", "execute"), ("lookup_refund_history", "deny")]


async def test_stop_makes_an_invented_tool_a_failure_and_nothing_in_the_batch_runs() -> None:
    """The seed's KeyError rule: `failed`, the name in the detail, the known sibling not run,
    every call answered (the transcript stays valid); the run replays identically."""
    ledger = Ledger()
    client = ScriptedClient([INVENTED])
    loop = loop_for(client, ledger, policy=Policy(on_unknown_tool="stop"))
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.FAILED
    assert result.state.stop_detail == "unknown tool proposed: lookup_refund_history"
    assert ledger.ran == []
    assert decisions(result) == [("read_order", "execute"), ("lookup_refund_history", "block")]
    assert stop_event(result).stop_reason == "failed"
    assert_valid_transcript(result.messages)
    replayed = await replay(result.state)
    assert replayed.identical


async def test_a_forbidden_call_next_to_an_invented_one_is_still_named() -> None:
    """Forbidden alone: policy_blocked as before, even with on_unknown_tool="stop"."""
    ledger = Ledger()
    client = ScriptedClient([tool_use(("issue_refund", {"order_id": "O-1", "amount": 1.0}))])
    policy = Policy(forbidden={"issue_refund"}, on_unknown_tool="stop")
    result = await loop_for(client, ledger, policy=policy).run("goal")
    assert result.stop_reason is StopReason.POLICY_BLOCKED
    assert result.state.stop_detail == "forbidden tool proposed: issue_refund"


def test_the_setting_is_checked_and_hashed_only_when_set() -> None:
    with pytest.raises(ConfigurationError, match="on_unknown_tool must be one of"):
        Policy(on_unknown_tool="raise")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert "on_unknown_tool" not in Policy().fingerprint()  # existing provenance hashes unchanged
    assert '"on_unknown_tool": "stop"' in Policy(on_unknown_tool="stop").fingerprint()
