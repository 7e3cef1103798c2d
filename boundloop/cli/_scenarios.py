"""The demo's other endings: scripts that take the refund investigation to each stop reason.

`boundloop demo --scenario NAME` runs one; the default, `completed`, is the demo's `SCRIPT`.
Each starts as the demo does (or close to it) and then goes wrong the way a model can:

- `policy_blocked`: it tries `issue_refund` itself; the payment action is forbidden, so the
  attempt stops the run and nothing of its batch runs;
- `needs_human`: the carrier lookup of the return parcel fails twice in a row; the circuit
  breaker (`max_consecutive_tool_errors=2`) hands the run to a human;
- `evidence_missing`: it answers without reading the delivery status, evidence the policy
  requires;
- `max_steps`: it keeps searching the policy, one query after another, until the budget's
  8 model calls are spent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

Turn = dict[str, Any]


def _turn(text: str, *calls: tuple[str, str, dict[str, Any]], tokens: tuple[int, int] = (1200, 120)) -> Turn:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [{"type": "tool_use", "id": i, "name": name, "input": args} for i, name, args in calls]
    return {
        "stop_reason": "tool_use" if calls else "end_turn",
        "content": content,
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
    }


SCENARIO_NAMES: Final = ("completed", "policy_blocked", "needs_human", "evidence_missing", "max_steps")
"""The five refund stop reasons the demo reaches, `completed` first (the default)."""

_QUERIES: Final = (
    "damaged on arrival",
    "partial orders",
    "approval above EUR 100",
    "change of mind",
    "return shipping",
    "photos as evidence",
    "carrier damage record",
    "refund within 14 days",
)


def scenarios(first: Turn) -> Mapping[str, tuple[Turn, ...]]:
    """The scripts of every scenario but `completed`, each after the demo's `first` turn or not."""
    ask = (
        "toolu_04",
        "ask_customer_clarifying_question",
        {"customer_id": "C-2291", "question": "Were they worn?"},
    )
    refund = ("toolu_05", "issue_refund", {"order_id": "O-104", "amount": 164.0})
    return {
        "policy_blocked": (
            first,
            _turn("The damage is documented, so the refund is due: I'll issue it now.", ask, refund),
        ),
        "needs_human": (
            _turn(
                "I'll check the return parcel's tracking.",
                ("toolu_01", "read_delivery_status", {"order_id": "O-104-R"}),
            ),
            _turn(
                "The lookup failed; trying once more.",
                ("toolu_02", "read_delivery_status", {"order_id": "O-104-R"}),
            ),
        ),
        "evidence_missing": (
            _turn("I'll read the order.", ("toolu_01", "read_order", {"order_id": "O-104"})),
            _turn("The customer reports a split sole: the refund of EUR 164.00 is justified."),
        ),
        "max_steps": tuple(
            _turn(
                "I'll look at one more section of the policy.",
                (f"toolu_{n:02d}", "search_refund_policy", {"query": query}),
            )
            for n, query in enumerate(_QUERIES, start=1)
        ),
    }
