"""The shipped eval cases (examples/evals) run in the test suite, as a user's suite would run theirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from boundloop.evals import Case, load_cases, run_case
from tests.sim_model import SimulatedModel, shipping_policy

EVALS = Path(__file__).resolve().parents[2] / "examples" / "evals"
PROMISED = {
    "completes_within_budget",
    "stops_at_max_steps",
    "stops_at_max_tool_calls",
    "malformed_tool_result",
    "shipping_lookup_repeated_failure",
    "shipping_lookup_repeated_failure_scripted",
    "forbidden_action_proposed",
    "completion_claimed_without_evidence",
    "replay_from_saved_state",
    "refund_investigation_demo",
    "parallel_calls_one_turn",
    "pause_turn_continues",
    "max_tokens_truncated",
    "refusal",
}


@pytest.mark.parametrize("case", load_cases(EVALS), ids=str)
async def test_shipped_case(case: Case) -> None:
    """Every expectation of the case holds, and the run replays from its trace identically (a
    live case on a simulated model that reads the delivery status as the case expects)."""
    client = SimulatedModel(shipping_policy()).client() if case.live else None
    result = await run_case(case, client=client)
    result.check()
    assert result.replay_identical is True


def test_the_promised_cases_ship() -> None:
    """The cases docs/evals.md promises are all in examples/evals."""
    assert PROMISED <= {case.case_id for case in load_cases(EVALS)}
