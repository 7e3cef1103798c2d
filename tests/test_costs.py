"""Costs that match the bill: web searches, fast mode, batch, US-only inference and 1-hour cache
writes priced as the price list says; genai-prices (with its price context) is the reference."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import genai_prices
import pytest
from anthropic.types import Message, Usage

from boundloop import AgentLoop, Budget, Observers, Price, ScriptedClient, StopReason
from boundloop.errors import ConfigurationError
from boundloop.prices import PRICES, resolve_price
from boundloop.testing import parse_message

JSON = dict[str, Any]


def body(model: str, **usage: Any) -> JSON:
    """A Messages API response body as the API sends it, with this usage."""
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


SEARCHES = {"web_search_requests": 1, "web_fetch_requests": 0}

# Usage bodies in the shape the API records them (the fields the SDK's `Usage` models): one per
# way a response is billed. Each is priced by genai-prices below, never by hand.
BODIES = {
    "plain": body("claude-sonnet-4-6", input_tokens=1_234, output_tokens=567),
    "cache-read": body(
        "claude-sonnet-4-6", input_tokens=12, output_tokens=300, cache_read_input_tokens=48_000
    ),
    "cache-write-5m": body(
        "claude-haiku-4-5",
        input_tokens=20,
        output_tokens=90,
        cache_creation_input_tokens=9_000,
        cache_creation={"ephemeral_5m_input_tokens": 9_000, "ephemeral_1h_input_tokens": 0},
    ),
    "cache-write-1h": body(
        "claude-opus-4-6",
        input_tokens=20,
        output_tokens=90,
        cache_read_input_tokens=1_000,
        cache_creation_input_tokens=9_000,
        cache_creation={"ephemeral_5m_input_tokens": 2_000, "ephemeral_1h_input_tokens": 7_000},
    ),
    "long-context": body(
        "claude-sonnet-4-5", input_tokens=180_000, output_tokens=2_000, cache_read_input_tokens=40_000
    ),
    # The web search tool's usage: input, output and `server_tool_use` (as in the API's docs).
    "web-search": body("claude-haiku-4-5", input_tokens=2_100, output_tokens=2_000, server_tool_use=SEARCHES),
    "web-searches-cached": body(
        "claude-sonnet-4-6",
        input_tokens=105,
        output_tokens=6_039,
        cache_read_input_tokens=7_123,
        cache_creation_input_tokens=7_345,
        server_tool_use={"web_search_requests": 3, "web_fetch_requests": 2},
    ),
    "fast": body("claude-opus-4-8", input_tokens=3_000, output_tokens=1_500, speed="fast"),
    "fast-cached": body(
        "claude-opus-5-5",
        input_tokens=300,
        output_tokens=1_500,
        cache_read_input_tokens=20_000,
        cache_creation_input_tokens=4_000,
        cache_creation={"ephemeral_5m_input_tokens": 1_000, "ephemeral_1h_input_tokens": 3_000},
        speed="fast",
    ),
    "batch": body("claude-sonnet-4-6", input_tokens=5_000, output_tokens=700, service_tier="batch"),
    "standard-speed": body(
        "claude-opus-4-8", input_tokens=3_000, output_tokens=1_500, speed="standard", service_tier="standard"
    ),
}


def genai_cost(raw: JSON) -> float:
    """What genai-prices charges for a response body: its usage extracted by genai-prices itself,
    priced with the price context the usage reports (fast speed, batch processing)."""
    usage = raw["usage"]
    context: dict[str, str] = {}
    if usage.get("speed") == "fast":
        context["speed"] = "fast"
    if usage.get("service_tier") == "batch":
        context["processing"] = "batch"
    extracted = genai_prices.extract_usage(raw, provider_id="anthropic")
    return float(extracted.calc_price(price_context=context or None).total_price)


def our_cost(raw: JSON) -> float:
    price = resolve_price(raw["model"])
    assert price is not None
    return price.cost(Message.model_validate(raw).usage)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_a_recorded_usage_costs_what_genai_prices_charges(name: str) -> None:
    """To the micro-dollar (and closer): boundloop's cost of each usage is genai-prices' own."""
    raw = BODIES[name]
    assert our_cost(raw) == pytest.approx(genai_cost(raw), abs=1e-9)
    assert round(our_cost(raw), 6) == round(genai_cost(raw), 6)


def test_web_searches_are_in_the_cost() -> None:
    """Defect: one web search on claude-haiku-4-5 ($1/$5 per MTok, $10 per 1,000 searches) costs
    $0.0221; the tokens alone, $0.0121, were all boundloop counted."""
    raw = BODIES["web-search"]
    assert our_cost(raw) == pytest.approx(0.0221, abs=1e-12)
    assert genai_cost(raw) == pytest.approx(0.0221, abs=1e-12)


def test_fast_speed_is_priced_at_the_fast_rate() -> None:
    """Defect: `usage.speed == "fast"` was priced as standard (half of genai-prices' fast rate
    on claude-opus-4-8)."""
    raw = BODIES["fast"]
    standard = BODIES["standard-speed"]
    assert our_cost(raw) == pytest.approx(genai_cost(raw), abs=1e-12)
    assert our_cost(raw) == pytest.approx(2 * our_cost(standard), abs=1e-12)


def usage(**fields: Any) -> Usage:
    return Usage.model_validate({"input_tokens": 1_000_000, "output_tokens": 100_000, **fields})


HOUSE = Price(input_per_mtok=2, output_per_mtok=10)


def test_a_price_without_fast_rates_charges_the_published_multiplier() -> None:
    """A price of the caller's own with no `fast` rates: 6x, so a cost budget errs high."""
    standard = HOUSE.cost(usage())
    assert standard == pytest.approx(3.0)
    assert HOUSE.cost(usage(speed="fast")) == pytest.approx(6 * standard)
    fast = Price(input_per_mtok=4, output_per_mtok=20)
    assert Price(input_per_mtok=2, output_per_mtok=10, fast=fast).cost(usage(speed="fast")) == pytest.approx(
        6.0
    )


def test_batch_is_half_and_priority_is_standard() -> None:
    assert HOUSE.cost(usage(service_tier="batch")) == pytest.approx(1.5)
    assert HOUSE.cost(usage(service_tier="priority")) == pytest.approx(3.0)
    batch = Price(input_per_mtok=1, output_per_mtok=1)
    assert dataclass_cost(batch) == pytest.approx(1.1)


def dataclass_cost(batch: Price) -> float:
    return Price(input_per_mtok=2, output_per_mtok=10, batch=batch).cost(usage(service_tier="batch"))


def test_us_only_inference_costs_a_tenth_more_on_tokens_not_searches() -> None:
    searches = {"web_search_requests": 100, "web_fetch_requests": 7}
    assert HOUSE.cost(usage(inference_geo="global")) == pytest.approx(3.0)
    assert HOUSE.cost(usage(inference_geo="us", server_tool_use=searches)) == pytest.approx(3.3 + 1.0)
    plain = Price(input_per_mtok=2, output_per_mtok=10, inference_geo=())
    assert plain.cost(usage(inference_geo="us")) == pytest.approx(3.0)


def test_a_web_search_rate_of_the_callers_own() -> None:
    """Web fetches are free; web searches at the price's rate ($10 per 1,000 by default)."""
    searches = {"web_search_requests": 4, "web_fetch_requests": 9}
    assert HOUSE.cost(usage(input_tokens=0, output_tokens=0, server_tool_use=searches)) == pytest.approx(0.04)
    cheap = Price(input_per_mtok=2, output_per_mtok=10, web_search_per_1k=5)
    assert cheap.cost(usage(input_tokens=0, output_tokens=0, server_tool_use=searches)) == pytest.approx(0.02)


def test_genai_prices_fast_and_batch_rates_are_the_defaults() -> None:
    opus = PRICES["claude-opus-4-8"]
    assert opus.fast is not None
    assert opus.fast.input_per_mtok == 2 * opus.input_per_mtok
    assert opus.batch is not None
    assert opus.batch.input_per_mtok == opus.input_per_mtok / 2
    assert PRICES["claude-sonnet-4-6"].fast is None  # no fast mode: the multiplier applies
    assert PRICES["claude-sonnet-4-6"].web_search_per_1k == 10


@pytest.mark.parametrize(
    "options",
    [
        lambda: {"fast": "fast"},
        lambda: {"batch": Price(input_per_mtok=1, output_per_mtok=1, fast=HOUSE)},
        lambda: {"inference_geo": (("us", -1.0),)},
        lambda: {"inference_geo": ("us", 1.1)},
        lambda: {"web_search_per_1k": -1},
    ],
)
def test_price_variants_are_checked(options: Callable[[], dict[str, Any]]) -> None:
    with pytest.raises(ConfigurationError, match=r"^Price\."):
        Price(input_per_mtok=1, output_per_mtok=1, **options())


def test_a_runs_cost_and_its_cost_budget_count_web_searches() -> None:
    """Two responses with 30 searches each on a house price: $0.60 of searches spends a $0.50
    budget after the first tool round, though the tokens cost almost nothing."""
    search_turn = {
        "stop_reason": "pause_turn",
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
        ],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "server_tool_use": {"web_search_requests": 30, "web_fetch_requests": 0},
        },
    }
    loop = AgentLoop(
        ScriptedClient(
            [
                search_turn,
                search_turn,
                parse_message({"content": [{"type": "text", "text": "x"}], "stop_reason": "end_turn"}),
            ]
        ),
        model="house-model-1",
        budget=Budget(max_steps=5, max_cost_usd=0.5),
        prices={"house-model-1": Price(input_per_mtok=1, output_per_mtok=1)},
        observers=Observers(metrics=None),
    )
    result = anyio.run(loop.run, "Search.")
    assert result.stop_reason is StopReason.COST_BUDGET
    assert result.usage.cost_usd == pytest.approx(0.6 + 30 / 1e6)
