"""The events and records a run builds by position (for speed): one factory each, beside the
class, its fields in a pinned order; and a failing tool recorded as the tool's failure, not as a
human's decision."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable

import pytest

from boundloop import MemoryStore, tool
from boundloop.events import CallDecision, Proposal, ToolResult, Transition
from boundloop.records import CallResult, ModelResponse, Observation, ToolCall, Turn
from tests.helpers import scripted_loop, text, tool_use
from tests.test_resume import TWO_REFUNDS, Ledger
from tests.test_resume import make_loop as refund_loop

HEADER = ["seq", "task_id", "at", "step"]

POSITIONAL_FIELDS: dict[type, list[str]] = {
    Transition: [*HEADER, "source", "dest", "trigger", "duration_s"],
    Proposal: [
        *HEADER,
        "stop_reason",
        "tools",
        "duration_s",
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "server_tool_uses",
        "final_answer",
        "response",
    ],
    ToolResult: [
        *HEADER,
        "tool",
        "tool_use_id",
        "outcome",
        "is_error",
        "by_human",
        "reason",
        "attempts",
        "duration_s",
        "input",
        "content",
    ],
    CallDecision: ["tool", "tool_use_id", "decision", "reason"],
    ToolCall: ["id", "name", "input", "step"],
    CallResult: ["call", "outcome", "content", "duration_s", "attempts", "by_human", "reason"],
    Turn: [
        "calls",
        "keys",
        "answers",
        "decisions",
        "invoked",
        "same_as",
        "answered",
        "awaiting_human",
        "final",
    ],
    Observation: ["step", "tool_use_id", "tool", "input", "outcome", "content", "attempts", "by_human"],
    ModelResponse: [
        "id",
        "model",
        "stop_reason",
        "content_json",
        "usage_json",
        "stop_sequence",
        "extra_json",
    ],
}
"""Each positionally built class -> its fields that take a position, in order. Its factory (`of`)
passes them by position: a reordered declaration fails here before it swaps two values."""


@pytest.mark.parametrize("cls", list(POSITIONAL_FIELDS), ids=lambda cls: cls.__name__)
def test_the_field_order_of_a_positionally_built_class_is_pinned(cls: type) -> None:
    positional = [field.name for field in dataclasses.fields(cls) if field.init and not field.kw_only]
    assert positional == POSITIONAL_FIELDS[cls]


FACTORIES: list[Callable[..., object]] = [
    Transition.of,
    Proposal.of,
    ToolResult.of,
    CallDecision.of,
    ToolCall.of,
    CallResult.of,
    Turn.of,
    ModelResponse.of,
]
"""The factories that take each field by name (Observation's takes a `CallResult`)."""


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda factory: factory.__qualname__)
def test_the_factory_puts_each_named_value_in_its_field(factory: Callable[..., object]) -> None:
    """Every parameter of a factory gets a value of its own (a distinct object), and the built
    object holds each in the field of that name: no two fields trade values."""
    values: dict[str, object] = {name: object() for name in inspect.signature(factory).parameters}
    if factory == Turn.of:
        values["calls"] = [object(), object()]
    built = factory(**values)
    assert [name for name, value in values.items() if getattr(built, name) is not value] == []
    if isinstance(built, Turn):
        assert built.answers == [None, None]  # one per call, none decided yet


async def test_a_failing_tool_and_a_humans_decisions_are_told_apart() -> None:
    """A tool that raises is recorded `is_error=True, by_human=False`; on resume, the call a human
    approved runs and is recorded as the tool's (`by_human=False`), the one a human denied is
    recorded `by_human=True` with the reason."""

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        raise RuntimeError(f"no {key}")

    run = await scripted_loop([tool_use(("lookup", {"key": "a"})), text("gave up")], [lookup]).run("Look.")
    [failed] = [event for event in run.events if isinstance(event, ToolResult)]
    assert (failed.outcome, failed.is_error, failed.by_human) == ("error", True, False)
    assert run.state.observations[0].by_human is False

    store = MemoryStore()
    await refund_loop([TWO_REFUNDS], store, Ledger()).run("Refund?", task_id="t")
    later = refund_loop([text("done")], store, Ledger())
    resumed = await later.resume("t", approvals={"toolu_r1": True, "toolu_r2": "over the limit"})
    results = {event.tool_use_id: event for event in resumed.events if isinstance(event, ToolResult)}
    approved, denied = results["toolu_r1"], results["toolu_r2"]
    assert (approved.outcome, approved.is_error, approved.by_human) == ("ok", False, False)
    assert (denied.outcome, denied.is_error, denied.by_human) == ("denied", True, True)
    assert denied.reason == "over the limit"
