"""Structured output (`AgentLoop(output_type=...)`) and the answer check every final answer
passes: a blank or invalid answer gets one corrective turn, then stops `invalid_output`."""

from __future__ import annotations

import json
import re
from typing import Any, Literal, assert_type, cast

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from boundloop import (
    AgentLoop,
    Budget,
    ConfigurationError,
    InvalidOutput,
    LoopResult,
    LoopState,
    MemoryStore,
    ScriptedClient,
    StopReason,
    replay,
    tool,
)
from boundloop._base.output import OutputCheck, add_output_format, api_schema
from tests.helpers import text, tool_use

JSON = dict[str, Any]
MODEL = "claude-sonnet-4-6"


class RefundDecision(BaseModel):
    """A refund decision."""

    approve: bool
    amount_usd: float = Field(ge=0)
    reason: str


class Verdict(TypedDict):
    verdict: Literal["yes", "no"]


DECISION = {"approve": True, "amount_usd": 12.5, "reason": "late delivery"}


def loop(*script: JSON, max_steps: int = 5, **settings: Any) -> AgentLoop[Any]:
    client = ScriptedClient(list(script))
    return AgentLoop(client, model=MODEL, budget=Budget(max_steps=max_steps), **settings)


def user_texts(result: LoopResult[Any]) -> list[str]:
    """The text blocks of the run's user messages after the goal."""
    found: list[str] = []
    for message in result.messages[1:]:
        content = message["content"]
        if message["role"] == "user" and not isinstance(content, str):
            blocks = cast(list[dict[str, Any]], content)
            found += [block["text"] for block in blocks if block["type"] == "text"]
    return found


# -- the defect: a blank final answer ended completed ------------------------------------------


@pytest.mark.parametrize(
    "blank",
    [text("   \n"), {"stop_reason": "end_turn", "content": []}, text(" ", stop_reason="stop_sequence")],
)
async def test_a_blank_answer_is_never_completed(blank: JSON) -> None:
    """A blank final answer gets one corrective turn; blank again, the run stops invalid_output."""
    result = await loop(blank, blank).run("Answer.")
    assert str(result.stop_reason) == "invalid_output"  # on the code before: "completed"
    assert result.state.stop_detail is not None
    assert result.state.stop_detail.startswith("empty answer")
    assert result.state.step == 2
    assert result.output is None
    assert [error.kind for error in result.state.errors] == ["invalid_output", "invalid_output"]
    with pytest.raises(InvalidOutput):
        result.unwrap()


async def test_a_blank_answer_is_corrected_once() -> None:
    """The corrective turn says the answer was empty; an answer then completes the run."""
    result = await loop(text(""), text("42")).run("Answer.")
    assert result.stop_reason is StopReason.COMPLETED
    assert (result.answer, result.output) == ("42", "42")
    assert user_texts(result) == ["Your answer is empty. Reply with your final answer."]
    assert result.state.corrections == 1


# -- structured output --------------------------------------------------------------------------


async def test_a_pydantic_output_type_is_sent_and_validated() -> None:
    """The request carries the API's form of the schema; `output` is the validated model, typed."""
    client = ScriptedClient([text(json.dumps(DECISION))])
    agent = AgentLoop(client, model=MODEL, budget=Budget(max_steps=3), output_type=RefundDecision)
    result = await agent.run("Decide.")
    assert_type(result, LoopResult[RefundDecision])
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == RefundDecision(approve=True, amount_usd=12.5, reason="late delivery")
    fmt = client.requests[0]["output_config"]["format"]
    assert fmt == {"type": "json_schema", "schema": api_schema(RefundDecision.model_json_schema())}
    assert fmt["schema"]["additionalProperties"] is False
    amount = fmt["schema"]["properties"]["amount_usd"]
    assert amount == {"type": "number", "title": "Amount Usd", "description": "{minimum: 0}"}
    assert agent.config.spec.output_schema == RefundDecision.model_json_schema()
    assert result.to_dict()["output"] == DECISION


async def test_without_an_output_type_the_output_is_the_answer_text() -> None:
    client = ScriptedClient([text("done")])
    result = await AgentLoop(client, model=MODEL, budget=Budget(max_steps=2)).run("Go.")
    assert_type(result, LoopResult[str])
    assert result.output == "done"
    assert "output_config" not in client.requests[0]


async def test_an_invalid_answer_gets_one_corrective_turn_with_the_error() -> None:
    result = await loop(
        text('{"approve": "maybe"}'), text(json.dumps(DECISION)), output_type=RefundDecision
    ).run("Decide.")
    assert result.stop_reason is StopReason.COMPLETED
    assert isinstance(result.output, RefundDecision)
    [nudge] = user_texts(result)
    assert nudge.startswith("Your answer is not accepted: it does not match the required output format (")
    assert "approve: Input should be a valid boolean" in nudge
    assert "amount_usd: Field required" in nudge
    [error] = result.state.errors
    assert (error.kind, error.step) == ("invalid_output", 1)


async def test_a_second_invalid_answer_stops_invalid_output() -> None:
    bad = text(json.dumps({**DECISION, "amount_usd": -1}))
    result = await loop(bad, bad, bad, output_type=RefundDecision).run("Decide.")
    assert result.stop_reason is StopReason.INVALID_OUTPUT
    assert result.state.step == 2
    detail = result.state.stop_detail
    assert (
        detail
        == "the answer does not match the output type: amount_usd: Input should be greater than or equal to 0"
    )
    assert [error.message for error in result.state.errors] == [detail.split(": ", 1)[1]] * 2
    assert result.answer == bad["content"][0]["text"]  # the answer not accepted, kept
    assert result.output is None


@pytest.mark.parametrize("corrections", [0, 1, 3])
async def test_budget_max_corrections_is_how_many_corrective_turns_a_run_gets(corrections: int) -> None:
    """`Budget.max_corrections` answers that many invalid answers with a corrective turn; the
    next one stops the run `invalid_output` (0: the first does)."""
    bad = text('{"approve": "maybe"}')
    client = ScriptedClient([bad] * (corrections + 2))
    budget = Budget(max_steps=10, max_corrections=corrections)
    result = await AgentLoop(client, model=MODEL, budget=budget, output_type=RefundDecision).run("Decide.")
    assert result.stop_reason is StopReason.INVALID_OUTPUT
    assert result.state.step == corrections + 1
    assert result.state.corrections == corrections
    assert len(user_texts(result)) == corrections


def test_max_corrections_is_a_count() -> None:
    with pytest.raises(ConfigurationError, match="max_corrections"):
        Budget(max_steps=1, max_corrections=-1)
    with pytest.raises(ConfigurationError, match="max_corrections"):
        Budget(max_steps=1, max_corrections=1.5)  # type: ignore[arg-type]  # a float, refused


async def test_the_corrective_turn_is_a_step_within_the_budget() -> None:
    """No budget left for the corrective turn: the run stops at the budget, not completed."""
    result = await loop(text("not json"), max_steps=1, output_type=RefundDecision).run("Decide.")
    assert result.stop_reason is StopReason.MAX_STEPS
    assert result.state.step == 1


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (Verdict, '{"verdict": "yes"}', {"verdict": "yes"}),
        (
            {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}, "required": ["n"]},
            '{"n": 2}',
            {"n": 2},
        ),
    ],
)
async def test_a_typeddict_or_a_json_schema(output_type: Any, answer: str, expected: object) -> None:
    result = await loop(text(answer), output_type=output_type).run("Go.")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == expected


async def test_a_json_schema_is_checked_whole_also_what_the_api_cannot_enforce() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}, "required": ["n"]}
    result = await loop(text('{"n": 9}'), text("[1]"), output_type=schema).run("Go.")
    assert result.stop_reason is StopReason.INVALID_OUTPUT
    assert result.state.errors[0].message == "n: 9 is greater than the maximum of 3"
    assert (
        result.state.stop_detail
        == "the answer does not match the output type: (answer): [1] is not of type 'object'"
    )


@pytest.mark.parametrize(
    ("output_type", "message"),
    [
        (int | str, "each (sub)schema needs a 'type'"),  # anyOf is fine: this one is not
        ({"type": "object", "properties": {"a": {}}}, "each (sub)schema needs a 'type'"),
        ({"type": "nope"}, "invalid JSON schema"),
        ({"$ref": "other.json"}, "output_type"),
        (object(), "pydantic cannot validate it"),
    ],
)
def test_an_output_type_the_loop_cannot_use_is_a_configuration_error(output_type: Any, message: str) -> None:
    if message.startswith("each") and output_type is not None and not isinstance(output_type, dict):
        OutputCheck(output_type)  # int | str: anyOf of typed schemas, accepted
        return
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        loop(output_type=output_type)


# -- the schema the API takes -------------------------------------------------------------------


def test_api_schema_follows_the_structured_output_rules() -> None:
    schema = {
        "type": "object",
        "description": "Root.",
        "properties": {
            "child": {"$ref": "#/$defs/Child"},
            "choice": {"oneOf": [{"type": "string", "format": "email"}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^a"}, "minItems": 2},
            "one": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
            "kind": {"type": "string", "enum": ["a", "b"]},
            "when": {"type": "string", "format": "x-custom"},
        },
        "additionalProperties": True,
        "$defs": {"Child": {"type": "object", "properties": {"n": {"type": "number", "minimum": 0}}}},
    }
    assert api_schema(schema) == {
        "$defs": {
            "Child": {
                "type": "object",
                "properties": {"n": {"type": "number", "description": "{minimum: 0}"}},
                "additionalProperties": False,
            }
        },
        "type": "object",
        "description": "Root.",
        "properties": {
            "child": {"$ref": "#/$defs/Child"},
            "choice": {"anyOf": [{"type": "string", "format": "email"}, {"type": "null"}]},
            "tags": {
                "type": "array",
                "items": {"type": "string", "description": "{pattern: ^a}"},
                "description": "{minItems: 2}",
            },
            "one": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
            "kind": {"enum": ["a", "b"]},
            "when": {"type": "string", "description": "{format: x-custom}"},
        },
        "additionalProperties": False,
    }


def test_the_format_is_merged_into_the_settings_output_config() -> None:
    """Another setting's output_config (e.g. effort) is kept; the format is the output type's."""
    check = OutputCheck(Verdict)
    request: JSON = {"output_config": {"effort": "low"}}
    add_output_format(request, check)
    assert request == {"output_config": {"effort": "low", "format": check.format}}
    untouched: JSON = {"output_config": {"effort": "low"}}
    add_output_format(untouched, None)
    assert untouched == {"output_config": {"effort": "low"}}


# -- contract, provenance, resume, replay -------------------------------------------------------


async def test_the_contract_carries_the_schema_and_provenance_hashes_it() -> None:
    """A pydantic class comes back from its contract as its JSON schema; the output is JSON."""
    typed = loop(output_type=RefundDecision)
    document = typed.to_contract().to_dict()
    assert document["output_schema"] == RefundDecision.model_json_schema()
    client = ScriptedClient([text(json.dumps(DECISION))])
    again = AgentLoop.from_contract(document, handlers={}, client=client)
    assert again.config.spec.output_schema == RefundDecision.model_json_schema()
    assert again.to_contract().to_dict() == document
    result = await again.run("Decide.")
    assert result.output == DECISION
    assert typed.config.output is not None
    assert client.requests[0]["output_config"] == {"format": typed.config.output.format}
    hashes = {loop().config.provenance.output_sha256, typed.config.provenance.output_sha256}
    assert None in hashes
    assert len(hashes) == 2
    assert again.config.provenance == typed.config.provenance


async def test_a_replay_of_a_corrected_run_is_identical() -> None:
    result = await loop(text("{}"), text(json.dumps(DECISION)), output_type=RefundDecision).run("Decide.")
    report = await replay(result.state, loop(output_type=RefundDecision))
    assert report.identical, report.describe()
    assert report.provenance_changes == []
    other = await replay(result.state, loop(output_type=Verdict))
    assert other.provenance_changes == ["the output schema differs from the recording's"]


async def test_a_resumed_run_keeps_its_corrective_turn_spent() -> None:
    """Corrected once, then waiting for a human: after the resume, the next invalid answer stops
    the run, as it would have without the interruption."""

    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        return "refunded"

    store = MemoryStore()
    script = [text("nope"), tool_use(("refund", {"order_id": "O-1"}, "toolu_r")), text("still nope")]
    agent = AgentLoop(
        ScriptedClient(script),
        model=MODEL,
        tools=[refund],
        budget=Budget(max_steps=6),
        store=store,
        output_type=RefundDecision,
    )
    first = await agent.run("Decide.", task_id="t-1")
    assert first.stop_reason is StopReason.NEEDS_HUMAN
    saved = await store.load("t-1")
    assert saved is not None
    assert LoopState.from_json(saved.to_json()).corrections == 1
    result = await agent.resume("t-1", approvals={"toolu_r": True})
    assert result.stop_reason is StopReason.INVALID_OUTPUT
    assert result.output is None


# -- the docs -----------------------------------------------------------------------------------
