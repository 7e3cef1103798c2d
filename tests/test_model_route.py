"""The model route: `AgentLoop(fallback_model=[...])` names several fallback models, a refusal
is retried on each in order (once each) and the route is part of the run's provenance."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest

from boundloop import (
    AgentLoop,
    Budget,
    ConfigurationError,
    LoopState,
    Observers,
    ScriptedClient,
    StopReason,
    replay,
    tool,
)
from boundloop.contract import check_contract, load_contract
from boundloop.events import ModelRequest

JSON = dict[str, Any]
MODEL = "claude-sonnet-4-6"
ROUTE = ("claude-opus-4-5", "claude-opus-4-7")
CONTRACT = Path(__file__).resolve().parent.parent / "examples" / "contracts" / "refund_investigation.json"


def response(stop_reason: str, *content: JSON, **fields: Any) -> JSON:
    return {
        "stop_reason": stop_reason,
        "content": list(content) or [{"type": "text", "text": ""}],
        "usage": {"input_tokens": 10, "output_tokens": 5},
        **fields,
    }


def refusal(token: str) -> JSON:
    return response(
        "refusal", stop_details={"type": "refusal", "category": "cyber", "fallback_credit_token": token}
    )


def answer(value: str) -> JSON:
    return response("end_turn", {"type": "text", "text": value})


@tool
async def read_order(order_id: str) -> str:
    """Read one order by id."""
    return f"{order_id}: delivered"


def loop_of(script: list[JSON], fallback: object, **settings: Any) -> tuple[AgentLoop, ScriptedClient]:
    client = ScriptedClient(script, model=MODEL)
    settings.setdefault("budget", Budget(max_steps=3))
    route = typing.cast("str | list[str] | None", fallback)  # also what the type forbids: checked at run time
    loop = AgentLoop(
        client,
        model=MODEL,
        tools=[read_order],
        observers=Observers(metrics=None),
        fallback_model=route,
        **settings,
    )
    return loop, client


async def test_a_refusal_goes_through_the_fallback_models_in_order() -> None:
    """Refused by the model and by the first fallback: the second fallback answers; each retry
    is the same request body on the next model, with the refusal just answered's credit token."""
    loop, client = loop_of([refusal("fct_1"), refusal("fct_2"), answer("Here it is.")], list(ROUTE))
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.answer == "Here it is."
    assert [request["model"] for request in client.requests] == [MODEL, *ROUTE]
    assert [request.get("extra_body") for request in client.requests] == [
        None,
        {"fallback_credit_token": "fct_1"},
        {"fallback_credit_token": "fct_2"},
    ]
    assert client.requests[1]["messages"] == client.requests[2]["messages"] == client.requests[0]["messages"]
    assert result.state.step == 1  # the retries are the same step again
    assert result.state.provenance is not None
    assert result.state.provenance.fallback_model == ROUTE
    assert result.state.provenance.model_route == (MODEL, *ROUTE)


async def test_the_last_model_of_the_route_refusing_stops_the_run_refused() -> None:
    loop, client = loop_of([refusal("fct_1"), refusal("fct_2"), refusal("fct_3")], ROUTE)
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.REFUSED
    assert [request["model"] for request in client.requests] == [MODEL, *ROUTE]


async def test_a_later_refusal_starts_the_route_again_and_the_run_model_is_passed_over() -> None:
    """Each refusal has the whole route; a fallback that is the run's own model is not tried."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "read_order", "input": {"order_id": "A1"}}
    script = [refusal("fct_1"), response("tool_use", call), refusal("fct_2"), answer("done")]
    loop, client = loop_of(script, [MODEL, ROUTE[0], ROUTE[1]])
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.COMPLETED
    assert [request["model"] for request in client.requests] == [MODEL, ROUTE[0], MODEL, ROUTE[0]]


def test_one_fallback_model_is_recorded_as_before_and_old_provenance_loads() -> None:
    one, _ = loop_of([], "claude-opus-4-5")
    assert one.config.spec.fallback_model == ("claude-opus-4-5",)  # the spec holds the route
    assert one.config.provenance.fallback_model == "claude-opus-4-5"  # as recorded before routes
    assert one.config.provenance.model_route == (MODEL, "claude-opus-4-5")
    assert one.to_contract().to_dict()["fallback_model"] == "claude-opus-4-5"
    route, _ = loop_of([], ROUTE)
    assert route.to_contract().to_dict()["fallback_model"] == list(ROUTE)
    assert route.config.provenance.fallback_model == ROUTE
    none, _ = loop_of([], None)
    assert none.config.provenance.model_route == (MODEL,)


async def test_stored_provenance_with_one_model_or_a_route_loads() -> None:
    loop, _ = loop_of([answer("done")], ROUTE)
    result = await loop.run("goal")
    stored = json.loads(result.state.to_json())
    assert stored["provenance"]["fallback_model"] == list(ROUTE)
    assert LoopState.from_json(json.dumps(stored)).provenance == result.state.provenance
    stored["provenance"]["fallback_model"] = "claude-opus-4-5"  # a state stored before routes
    loaded = LoopState.from_json(json.dumps(stored)).provenance
    assert loaded is not None
    assert loaded.fallback_model == "claude-opus-4-5"
    assert loaded.model_route == (MODEL, "claude-opus-4-5")


async def test_replay_names_a_changed_route() -> None:
    recorded, _ = loop_of([answer("done")], "claude-opus-4-5")
    result = await recorded.run("goal")
    same, _ = loop_of([], "claude-opus-4-5")
    assert (await replay(result.state, same)).provenance_changes == []
    routed, _ = loop_of([], ROUTE)
    changed = await replay(result.state, routed)
    assert (
        "fallback_model claude-opus-4-5 -> [claude-opus-4-5, claude-opus-4-7]" in changed.provenance_changes
    )


@pytest.mark.parametrize("bad", [[], [""], "", 3])
def test_a_route_names_models(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="fallback_model"):
        loop_of([], bad)


def test_a_contract_names_a_route() -> None:
    document = json.loads(CONTRACT.read_text(encoding="utf-8"))
    document["system"] = {"text": "You investigate refunds."}
    document["policy"] = json.loads((CONTRACT.parent / "refund-policy.json").read_text(encoding="utf-8"))
    document["fallback_model"] = list(ROUTE)
    contract = load_contract(document)
    assert contract.spec.fallback_model == ROUTE
    assert contract.to_dict()["fallback_model"] == list(ROUTE)
    document["fallback_model"] = []
    assert check_contract(document) != []


async def test_each_model_call_is_announced_by_a_model_request_naming_its_model() -> None:
    """Before every call a `ModelRequest` event names the model the request goes to (a refusal's
    retry: its fallback), the messages it holds and its `max_tokens`; a `Proposal` follows it."""
    loop, client = loop_of([refusal("fct_1"), answer("Here it is.")], list(ROUTE))
    result = await loop.run("Tell me.")
    requests = [event for event in result.events if isinstance(event, ModelRequest)]
    assert [(event.model, event.messages) for event in requests] == [(MODEL, 1), (ROUTE[0], 1)]
    assert [event.max_tokens for event in requests] == [call["max_tokens"] for call in client.requests]
    kinds = [event.kind for event in result.events]
    for event in requests:
        assert kinds[result.events.index(event) + 1] == "proposal"
