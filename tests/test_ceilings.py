"""Ceilings that hold at every model a run calls, and requests the API would reject, refused.

- A refusal retried on a fallback model is priced, and its `max_tokens` clamped, at the
  fallback's price; an unpriced fallback under `max_cost_usd` is a `ConfigurationError`.
- `usage.iterations` entries the top-level usage leaves out (the advisor's) are counted, each
  at its own model's price.
- `CacheSettings(ttl="1h")` after a caller's 5-minute breakpoint: no 1-hour breakpoint follows a
  5-minute one; the request check refuses a request that has one, wherever it is (tools, system
  prompt, a message the caller wrote, the top-level `cache_control`, the loop's own), though it
  reads the order only of a request that may hold a 1-hour breakpoint.
- `boundloop eval --live --max-cost-usd`: every model the live cases call has a price.

Each runs the real `AsyncAnthropic` over the fake API (`tests/fake_api.py`), real prices.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import CacheControlEphemeralParam, Message

from boundloop import AgentLoop, Budget, CacheSettings, ModelSettings, Observers, tool
from boundloop._base.cache import MessageMarkers, add_breakpoints
from boundloop._core.invariant import RequestChecker, check_request
from boundloop.cli import main
from boundloop.errors import ConfigurationError, InvalidRequest
from boundloop.prices import UnpricedModelWarning, resolve_price
from boundloop.records import ModelResponse
from tests.fake_api import Body, FakeAPI, message, text_block
from tests.sim_model import SimulatedModel

RECORDED = Path(__file__).parent / "recorded" / "advisor_exchange.json"
SEED_CASE = (
    Path(__file__).resolve().parents[1] / "examples" / "evals" / "shipping_lookup_repeated_failure.json"
)


def bill(response: Message | ModelResponse) -> float:
    """What the API bills for a response: its top-level usage at the model that answered, and
    every advisor iteration at its own model."""
    usage = response.usage
    price = resolve_price(response.model)
    assert price is not None
    total = price.cost(usage)
    for entry in usage.model_dump().get("iterations") or ():
        if entry["type"] == "advisor_message":
            advisor = resolve_price(entry["model"])
            assert advisor is not None
            total += advisor.cost(usage.model_copy(update={**_tokens(entry), "iterations": None}))
    return total


def _tokens(entry: dict[str, Any]) -> dict[str, Any]:
    keys = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    return {key: entry.get(key) or 0 for key in keys} | {"cache_creation": None}


# -- a refusal retried on a fallback model -----------------------------------------------------


@pytest.mark.anyio
async def test_a_fallback_retry_is_priced_and_clamped_at_the_fallbacks_price() -> None:
    """haiku-4-5 refuses, opus-4-1 answers with all the output it is allowed: the retry's
    `max_tokens` is what $0.02 buys at opus-4-1's rates, and the run's cost is the bill."""
    refused = message([], "refusal", input_tokens=200, output_tokens=1, model="claude-haiku-4-5")
    answer = message(
        [text_block("the answer")], input_tokens=200, output_tokens=4096, model="claude-opus-4-1", n=2
    )
    api = FakeAPI([Body(json=refused), Body(json=answer)])  # output clamped to the request's max_tokens
    loop = AgentLoop(
        api.client(),
        model="claude-haiku-4-5",
        fallback_model="claude-opus-4-1",
        budget=Budget(max_steps=10, max_cost_usd=0.02),
        observers=Observers(metrics=None),
    )
    result = await loop.run("a question the first model refuses")
    assert [request["model"] for request in api.requests] == ["claude-haiku-4-5", "claude-opus-4-1"]
    cost = result.state.usage.cost_usd
    assert cost == pytest.approx(sum(bill(response) for response in result.state.responses))
    assert cost is not None
    assert cost <= 0.02  # was $0.30: clamped and priced at haiku's rates


def test_an_unpriced_fallback_under_a_cost_budget_is_refused_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="claude-unpriced-9"):
        AgentLoop(
            FakeAPI().client(),
            model="claude-haiku-4-5",
            fallback_model="claude-unpriced-9",
            budget=Budget(max_steps=10, max_cost_usd=1.0),
            observers=Observers(metrics=None),
        )


# -- the advisor tool ----------------------------------------------------------------------------


def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORDED.read_text("utf-8"))
    return data


@pytest.mark.anyio
async def test_the_advisors_tokens_are_counted_at_the_advisors_price() -> None:
    """A response whose `usage.iterations` holds an `advisor_message` (left out of the top-level
    usage): the run's cost is the bill, its tokens the bill's tokens."""
    exchange = recorded()
    api = FakeAPI([Body(json=exchange["response"])], honour_max_tokens=False)
    loop = AgentLoop(
        api.client(),
        model=exchange["response"]["model"],
        tools=[exchange["advisor_tool"]],
        budget=Budget(max_steps=1),
        observers=Observers(metrics=None),
    )
    result = await loop.run("a task the executor asks its advisor about")
    response = result.state.responses[0]
    assert result.state.usage.cost_usd == pytest.approx(bill(response))
    advisor = [
        entry for entry in exchange["response"]["usage"]["iterations"] if entry["type"] == "advisor_message"
    ]
    top = exchange["response"]["usage"]
    assert result.state.usage.output_tokens == top["output_tokens"] + sum(e["output_tokens"] for e in advisor)


def test_an_unpriced_advisor_under_a_cost_budget_is_refused_at_construction() -> None:
    advisor = {"type": "advisor_20260301", "name": "advisor", "model": "claude-unpriced-9"}
    with pytest.raises(ConfigurationError, match="claude-unpriced-9"):
        AgentLoop(
            FakeAPI().client(),
            model="claude-haiku-4-5",
            tools=[advisor],
            budget=Budget(max_steps=10, max_cost_usd=1.0),
        )


@pytest.mark.anyio
async def test_an_advisor_model_without_a_price_is_costed_at_the_highest_known_rates() -> None:
    """Without a cost budget, an advisor model no table prices is not free: the highest known
    rates, and an `unpriced_model` error in the run's record."""
    body = message([text_block("done")], input_tokens=10, output_tokens=5, model="claude-haiku-4-5")
    body["usage"]["iterations"] = [
        {"type": "message", "input_tokens": 10, "output_tokens": 5},
        {"type": "advisor_message", "model": "claude-unpriced-9", "input_tokens": 1000, "output_tokens": 100},
    ]
    api = FakeAPI([Body(json=body)])
    with warnings.catch_warnings():  # warned once per process: not what this test is about
        warnings.simplefilter("ignore", UnpricedModelWarning)
        loop = AgentLoop(
            api.client(),
            model="claude-haiku-4-5",
            tools=[{"type": "advisor_20260301", "name": "advisor", "model": "claude-unpriced-9"}],
            budget=Budget(max_steps=1),
            observers=Observers(metrics=None),
        )
    result = await loop.run("go")
    haiku = resolve_price("claude-haiku-4-5")
    assert haiku is not None
    own = haiku.cost(result.state.responses[0].usage)
    cost = result.state.usage.cost_usd
    assert cost is not None
    assert cost - own >= (1000 * 15 + 100 * 75) / 1_000_000  # opus-4-1's rates or more
    assert [error.kind for error in result.state.errors] == ["unpriced_model"]


# -- cache TTL order ------------------------------------------------------------------------------


def _ttls(request: dict[str, Any]) -> list[str]:
    """The TTL of every breakpoint, in the order the API reads them."""
    found: list[str] = []
    blocks = [
        *request.get("tools", []),
        *(request["system"] if isinstance(request.get("system"), list) else []),
    ]
    for message_ in request["messages"]:
        if isinstance(message_["content"], list):
            blocks += message_["content"]
    blocks.append(request)
    for block in blocks:
        control = block.get("cache_control")
        if control:
            found.append(control.get("ttl", "5m"))
    return found


@pytest.mark.anyio
async def test_one_hour_breakpoints_never_follow_a_callers_five_minute_one() -> None:
    """`ttl="1h"` and the caller's own 5-minute breakpoint in the history: every breakpoint the
    loop adds after it is written for 5 minutes (the API refuses a 1-hour one there)."""
    history: list[Any] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "a long document", "cache_control": {"type": "ephemeral"}}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "read it"}]},
        {"role": "user", "content": "and now the question"},
    ]
    api = FakeAPI([Body(json=message([text_block("answer")]))])
    loop = AgentLoop(
        api.client(),
        model="claude-sonnet-4-6",
        system="a system prompt",
        budget=Budget(max_steps=1),
        cache=CacheSettings(ttl="1h"),
        observers=Observers(metrics=None),
    )
    await loop.run(messages=history)
    ttls = _ttls(api.requests[0])
    assert ttls == ["1h", "5m", "5m"]  # the system prompt's, the caller's, the automatic one


def test_the_request_check_refuses_a_one_hour_breakpoint_after_a_five_minute_one() -> None:
    request: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 10,
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "q"}],
        "cache_control": {"type": "ephemeral", "ttl": "1h"},
    }
    with pytest.raises(InvalidRequest, match="1-hour cache breakpoint after the 5-minute one"):
        check_request(request, None, None)
    request["system"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    check_request(request, None, None)  # 1 hour, then 1 hour: in order


def test_a_runs_request_checker_finds_a_one_hour_breakpoint_after_a_five_minute_one_it_read_before() -> None:
    """A run's checker reads each message once: the 5-minute breakpoint of a message checked with
    an earlier request still counts against a 1-hour one in a later message, and a head that
    gains a 5-minute breakpoint has every message read again."""
    five = {
        "role": "user",
        "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}],
    }
    reply = {"role": "assistant", "content": [{"type": "text", "text": "a"}]}
    hour = {"type": "ephemeral", "ttl": "1h"}
    later = {"role": "user", "content": [{"type": "text", "text": "q2", "cache_control": hour}]}
    checker = RequestChecker()
    checker.check({"messages": [five]}, None, None)
    with pytest.raises(InvalidRequest, match=r"messages\[2\].content\[0\] is a 1-hour cache breakpoint"):
        checker.check({"messages": [five, reply, later]}, None, None)
    first = {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": hour}]}
    checker = RequestChecker()
    checker.check({"messages": [first]}, None, None)
    checker.check({"messages": [first, reply, later]}, None, None)  # 1 hour, then 1 hour
    system = [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}]
    with pytest.raises(InvalidRequest, match=r"messages\[0\].content\[0\] is a 1-hour cache breakpoint"):
        checker.check({"system": system, "messages": [first, reply, later]}, None, None)


FIVE: CacheControlEphemeralParam = {"type": "ephemeral"}
HOUR: CacheControlEphemeralParam = {"type": "ephemeral", "ttl": "1h"}


def _user(text: str, control: CacheControlEphemeralParam | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    return {"role": "user", "content": [block if control is None else {**block, "cache_control": control}]}


REPLY: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": "read it"}]}


@tool(cache_control=FIVE)
def first_lookup(key: str) -> str:
    """Look a key up."""
    return key


@tool(cache_control=HOUR)
def second_lookup(key: str) -> str:
    """Look a key up again."""
    return key


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("place", "cache"),
    [
        ("tools", "auto"),
        ("tools", "off"),
        ("history", "auto"),
        ("history", "off"),
        ("full history", "auto"),
        ("top-level", "auto"),
    ],
)
async def test_a_run_never_sends_a_one_hour_breakpoint_after_a_five_minute_one(
    place: str, cache: str
) -> None:
    """Wherever the caller puts the two (tool definitions; messages, with the loop's own
    breakpoints or caching off; a history holding all four breakpoints the API takes; the
    settings' top-level `cache_control` after a message's), the request is refused before it is
    sent: the run fails with the `invalid_request` error naming both, and the API sees nothing."""
    history: list[Any] = [_user("a long document", FIVE), REPLY, _user("the question", HOUR)]
    tools: list[Any] = []
    settings = None
    if place == "tools":
        history, tools = [_user("the question")], [first_lookup, second_lookup]
    elif place == "full history":  # no breakpoint left for the loop: it adds none
        history = [
            _user("a", FIVE),
            REPLY,
            _user("b", FIVE),
            REPLY,
            _user("c", FIVE),
            REPLY,
            _user("d", HOUR),
        ]
    elif place == "top-level":
        history, settings = (
            [_user("a long document", FIVE), REPLY, _user("the question")],
            ModelSettings(cache_control=HOUR),
        )
    api = FakeAPI([Body(json=message([text_block("answer")]))])
    loop = AgentLoop(
        api.client(),
        model="claude-sonnet-4-6",
        system="a system prompt",
        tools=tools,
        budget=Budget(max_steps=1),
        cache="off" if cache == "off" else "auto",
        settings=settings,
        observers=Observers(metrics=None),
    )
    result = await loop.run(messages=history)
    assert result.stop_reason == "failed"
    assert [error.kind for error in result.state.errors] == ["invalid_request"]
    assert "is a 1-hour cache breakpoint after the 5-minute one" in result.state.errors[0].message
    assert api.requests == []


def test_a_request_add_breakpoints_read_reports_where_a_one_hour_breakpoint_may_be() -> None:
    """`add_breakpoints` tells whether the request may hold a 1-hour breakpoint: the tools', the
    system prompt's, a message's, the loop's own (`ttl="1h"`), or unread (caching off, the
    caller's top-level one); a run's check reads the order of such a request, and of no other."""

    def request(**fields: Any) -> dict[str, Any]:
        return {"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": [_user("q")], **fields}

    five_minutes, hourly = CacheSettings(), CacheSettings(ttl="1h")
    assert add_breakpoints(request(), five_minutes, MessageMarkers()) is False
    assert (
        add_breakpoints(request(system="s", tools=[{"name": "t", "cache_control": FIVE}]), five_minutes)
        is False
    )
    assert add_breakpoints(request(messages=[_user("q", FIVE)]), five_minutes) is False
    for case in (
        request(tools=[{"name": "t", "cache_control": FIVE}, {"name": "u", "cache_control": HOUR}]),
        request(
            system=[
                {"type": "text", "text": "s", "cache_control": FIVE},
                {"type": "text", "text": "t", "cache_control": HOUR},
            ]
        ),
        request(messages=[_user("a", FIVE), REPLY, _user("b", HOUR)]),
    ):
        assert add_breakpoints(case, five_minutes, MessageMarkers()) is True
        with pytest.raises(InvalidRequest, match="1-hour cache breakpoint after the 5-minute one"):
            check_request(case, None, None)
    history = [_user("a", HOUR), REPLY, _user("b", FIVE), REPLY, _user("c", FIVE), REPLY, _user("d", FIVE)]
    full = request(messages=history)
    assert add_breakpoints(full, five_minutes, MessageMarkers()) is True  # no breakpoint left to add
    check_request(full, None, None)  # 1 hour, then 5 minutes: in order
    assert add_breakpoints(request(), None) is True  # caching off: nothing read
    assert add_breakpoints(request(cache_control=HOUR), five_minutes) is True  # the caller's: nothing read
    # The loop's own 1-hour breakpoints: a 5-minute one put before them (as a bug would, after
    # the request was read) is refused.
    built = request(system="s")
    hour = add_breakpoints(built, hourly, MessageMarkers())
    assert built["cache_control"] == HOUR
    built["messages"] = [_user("q", FIVE)]
    with pytest.raises(InvalidRequest, match="the top-level cache_control is a 1-hour cache breakpoint"):
        RequestChecker().check(built, None, None, hour=hour)


def test_a_run_check_that_skipped_the_ttl_order_reads_every_message_when_it_next_may_break() -> None:
    """A request holding no 1-hour breakpoint is not read for the order; the next one that may
    hold one has every message read, those of the skipped requests too."""
    checker = RequestChecker()
    checker.check({"messages": [_user("a")]}, None, None, hour=True)  # read: no 5-minute one
    five = _user("b", FIVE)
    checker.check({"messages": [five]}, None, None, hour=False)  # another history, not read
    with pytest.raises(InvalidRequest, match=r"messages\[2\].content\[0\] is a 1-hour cache breakpoint"):
        checker.check({"messages": [five, REPLY, _user("c", HOUR)]}, None, None, hour=True)


# -- eval --live --max-cost-usd ---------------------------------------------------------------------


def test_eval_live_refuses_a_cost_ceiling_over_a_fixtures_unpriced_model(
    served: SimulatedModel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fixture's model has no price: exit 2 before any call (it reported "$0.0000 of the
    ceiling" after billed calls)."""
    fixture = json.loads(SEED_CASE.read_text("utf-8"))
    fixture["model_name"] = "claude-unpriced-9"
    path = tmp_path / "case.json"
    path.write_text(json.dumps(fixture), "utf-8")
    assert main(["eval", str(path), "--live", "--max-cost-usd", "1"]) == 2
    assert "no price is known for claude-unpriced-9" in capsys.readouterr().err
    assert served.requests == []
