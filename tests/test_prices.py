"""Prices: genai-prices by default, the caller's `prices=` over it, a warning when there is none."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import warnings
from collections.abc import Mapping
from decimal import Decimal

import genai_prices
import pytest
from anthropic.types import CacheCreation
from anthropic.types import Usage as ApiUsage
from genai_prices.data_snapshot import DataSnapshot, get_snapshot, set_custom_snapshot
from hypothesis import given
from hypothesis import strategies as st

from boundloop import AgentLoop, Budget, Observers, Price, ScriptedClient
from boundloop import prices as prices_module
from boundloop.errors import ConfigurationError
from boundloop.prices import (
    PRICES,
    UnpricedModelWarning,
    default_price,
    from_genai_prices,
    resolve_price,
    warn_unpriced,
)

HOUSE = Price(input_per_mtok=2, output_per_mtok=8)


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with no model warned about yet."""
    monkeypatch.setattr(prices_module, "_warned", set())


def loop_on(model: str, prices: Mapping[str, Price] | None = None) -> AgentLoop:
    return AgentLoop(
        ScriptedClient([]),
        model=model,
        budget=Budget(max_steps=2),
        observers=Observers(metrics=None),
        prices=prices,
    )


def genai_cost(model: str, usage: ApiUsage) -> float:
    """What genai-prices itself charges for one response's usage on Anthropic's API."""
    cache_read = usage.cache_read_input_tokens or 0
    cache_write = usage.cache_creation_input_tokens or 0
    write_1h = 0 if usage.cache_creation is None else usage.cache_creation.ephemeral_1h_input_tokens
    calculation = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage.input_tokens + cache_read + cache_write,  # genai-prices: all input
            output_tokens=usage.output_tokens,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            cache_write_1h_tokens=write_1h,
        ),
        model,
        provider_id="anthropic",
    )
    return float(calculation.total_price)


# -- the default: genai-prices ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "genai_id"),
    [
        pytest.param("claude-sonnet-4-6", "claude-sonnet-4-6", id="alias"),
        pytest.param("claude-haiku-4-5-20251001", "claude-haiku-4-5", id="dated"),
        pytest.param("claude-sonnet-4-20250514", "claude-sonnet-4-0", id="dated-4-0"),
        pytest.param("claude-3-7-sonnet-20250219", "claude-3-7-sonnet-latest", id="latest"),
    ],
)
def test_a_known_claude_model_gets_the_genai_prices_price(model: str, genai_id: str) -> None:
    """A Claude model's price is genai-prices' current one, for the id genai-prices matches."""
    expected = genai_prices.calc_price(genai_prices.Usage(input_tokens=0, output_tokens=0), model).model_price
    assert default_price(model) is PRICES[genai_id]
    assert resolve_price(model) is PRICES[genai_id]
    assert dataclasses.replace(PRICES[genai_id], fast=None, batch=None) == from_genai_prices(expected)
    assert loop_on(model).config.price is PRICES[genai_id]


def test_the_default_table_is_genai_prices_anthropic_models() -> None:
    """PRICES lists every Anthropic model genai-prices prices, by its genai-prices id."""
    (anthropic,) = (provider for provider in get_snapshot().providers if provider.id == "anthropic")
    assert set(PRICES) == {model.id for model in anthropic.models}
    assert {"claude-sonnet-4-6", "claude-haiku-4-5", "claude-opus-4-1"} <= set(PRICES)
    assert PRICES["claude-sonnet-4-6"].input_per_mtok == 3
    assert PRICES["claude-sonnet-4-6"].output_per_mtok == 15


usages = st.builds(
    lambda input_tokens, output_tokens, cache_read, cache_write, share_1h: ApiUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_input_tokens=cache_read,
        cache_creation_input_tokens=cache_write,
        cache_creation=CacheCreation(
            ephemeral_1h_input_tokens=int(cache_write * share_1h),
            ephemeral_5m_input_tokens=cache_write - int(cache_write * share_1h),
        ),
    ),
    st.integers(0, 400_000),
    st.integers(0, 64_000),
    st.integers(0, 300_000),
    st.integers(0, 100_000),
    st.sampled_from([0.0, 0.5, 1.0]),
)


@given(model=st.sampled_from(sorted(PRICES)), usage=usages)
def test_a_cost_is_what_genai_prices_charges(model: str, usage: ApiUsage) -> None:
    """Cache reads, 5-minute and 1-hour writes and the long-context tiers cost what genai-prices says."""
    assert PRICES[model].cost(usage) == pytest.approx(genai_cost(model, usage), rel=1e-9, abs=1e-12)


def test_a_long_context_request_is_priced_at_its_tier() -> None:
    """claude-sonnet-4-5 above 200k input tokens: every token at the long-context rate."""
    price = PRICES["claude-sonnet-4-5"]
    assert [threshold for threshold, _ in price.tiers] == [200_000]
    assert price.at(200_000) is price
    assert price.at(200_001).input_per_mtok == 2 * price.input_per_mtok
    at_limit = ApiUsage(input_tokens=150_000, output_tokens=1, cache_read_input_tokens=50_000)
    above = ApiUsage(input_tokens=150_000, output_tokens=1, cache_read_input_tokens=50_001)
    assert price.cost(at_limit) == pytest.approx((150_000 * 3 + 15 + 50_000 * 0.3) / 1e6)
    assert price.cost(above) == pytest.approx((150_000 * 6 + 22.5 + 50_001 * 0.6) / 1e6)


def test_prices_come_with_the_package_and_work_offline() -> None:
    """The price data ships inside genai-prices: a lookup in a process without a network works."""
    assert not get_snapshot().from_auto_update
    script = """
import socket

def no_network(*args, **kwargs):
    raise OSError("network access during a price lookup")

socket.socket.connect = no_network
socket.getaddrinfo = no_network
socket.create_connection = no_network
from boundloop.prices import resolve_price
price = resolve_price("claude-sonnet-4-6")
assert price is not None and price.input_per_mtok == 3, price
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_newer_snapshot_of_genai_prices_is_used() -> None:
    """Data genai_prices.UpdatePrices fetched (a custom snapshot) replaces the bundled prices."""
    bundled = get_snapshot()
    (anthropic,) = (provider for provider in bundled.providers if provider.id == "anthropic")
    (sonnet,) = (model for model in anthropic.models if model.id == "claude-sonnet-4-6")
    cheaper = dataclasses.replace(
        sonnet, prices=genai_prices.types.ModelPrice(input_mtok=Decimal(1), output_mtok=Decimal(5))
    )
    models = [cheaper if model is sonnet else model for model in anthropic.models]
    providers = [
        dataclasses.replace(provider, models=models) if provider is anthropic else provider
        for provider in bundled.providers
    ]
    set_custom_snapshot(DataSnapshot(providers=providers, from_auto_update=True))
    try:
        price = resolve_price("claude-sonnet-4-6")
        assert price is not None
        assert (price.input_per_mtok, price.output_per_mtok) == (1, 5)
    finally:
        set_custom_snapshot(None)
    assert resolve_price("claude-sonnet-4-6") == Price(
        input_per_mtok=3,
        output_per_mtok=15,
        cache_read_per_mtok=0.3,
        cache_write_per_mtok=3.75,
        cache_write_1h_per_mtok=6,
        batch=Price(
            input_per_mtok=1.5,
            output_per_mtok=7.5,
            cache_read_per_mtok=0.15,
            cache_write_per_mtok=1.875,
            cache_write_1h_per_mtok=3,
        ),
    )


# -- the caller's prices win ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "key"),
    [
        pytest.param("claude-sonnet-4-6", "claude-sonnet-4-6", id="exact"),
        pytest.param("claude-sonnet-4-5-20250929", "claude-sonnet-4-5", id="alias-for-a-dated-id"),
        pytest.param("claude-sonnet-4-20250514", "claude-sonnet-4-0", id="genai-prices-id"),
        pytest.param("house-model-1", "house-model-1", id="a-model-genai-prices-lacks"),
        pytest.param("house-model-1-20260101", "house-model-1", id="a-dated-id-of-the-callers-own"),
    ],
)
def test_an_override_wins(model: str, key: str) -> None:
    """`prices={...}` wins over genai-prices: matched exactly, by genai-prices id, or by date."""
    assert resolve_price(model, {key: HOUSE}) is HOUSE
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a priced model never warns
        assert loop_on(model, prices={key: HOUSE}).config.price is HOUSE


def test_an_override_for_another_model_changes_nothing() -> None:
    """The caller's entries for other models leave the default price in place."""
    assert resolve_price("claude-sonnet-4-6", {"house-model-1": HOUSE}) is PRICES["claude-sonnet-4-6"]
    assert resolve_price("claude-sonnet-4-6", {}) is PRICES["claude-sonnet-4-6"]


def test_an_override_that_is_not_a_price_is_a_configuration_error() -> None:
    """A wrong-typed entry is found at construction, not mid-run."""
    with pytest.raises(ConfigurationError, match=r"prices\['claude-sonnet-4-5'\] must be a Price"):
        resolve_price("claude-sonnet-4-5-20250929", {"claude-sonnet-4-5": 3.0})  # type: ignore[dict-item]


# -- no price: a warning, once ----------------------------------------------------------------


@pytest.mark.parametrize("model", ["house-model-1", "gpt-4o", "claude", "claude-sonnet-4-x"])
def test_an_unknown_model_has_no_price(model: str) -> None:
    """A model neither the caller nor genai-prices (for Anthropic's API) prices has none."""
    assert default_price(model) is None
    assert resolve_price(model) is None
    assert resolve_price(model, {"claude-sonnet-4-6": HOUSE}) is None


def test_an_unknown_model_warns_once_in_one_line_at_the_callers_line() -> None:
    """The warning says cost is not tracked, how to track it, and points at the caller; once per model."""
    with pytest.warns(UnpricedModelWarning) as caught:
        warn_unpriced("house-model-1")
    (warning,) = caught
    message = str(warning.message)
    assert "\n" not in message
    assert message == (
        "no price known for model 'house-model-1': cost not tracked "
        "(pass prices={'house-model-1': Price(...)} to track it)"
    )
    assert warning.filename == __file__
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        warn_unpriced("house-model-1")
        warn_unpriced("house-model-1")
    assert again == []
    with pytest.warns(UnpricedModelWarning, match="'house-model-2'"):
        warn_unpriced("house-model-2")  # another model: its own warning


def test_a_misspelt_model_is_named_its_closest_priced_id() -> None:
    """A loop on a misspelt model id warns with the id it probably meant."""
    with pytest.warns(UnpricedModelWarning) as caught:
        AgentLoop(ScriptedClient([]), model="claude-sonet-4-5", budget=Budget(max_steps=1))
    (warning,) = caught
    assert str(warning.message) == (
        "no price known for model 'claude-sonet-4-5': did you mean claude-sonnet-4-5? If not, cost "
        "not tracked (pass prices={'claude-sonet-4-5': Price(...)} to track it)"
    )


def test_a_warning_turned_into_an_error_is_raised_every_time() -> None:
    """With warnings as errors (as in this suite), nothing was shown, so the next call raises again."""
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnpricedModelWarning)
            with pytest.raises(UnpricedModelWarning):
                warn_unpriced("house-model-1")


def test_the_warning_is_a_user_warning_one_can_filter() -> None:
    """UnpricedModelWarning is a UserWarning: `filterwarnings("ignore", category=...)` silences it."""
    assert issubclass(UnpricedModelWarning, UserWarning)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=UnpricedModelWarning)
        warn_unpriced("house-model-1")
    assert caught == []


# -- Price --------------------------------------------------------------------------------------


def test_a_flat_price_keeps_the_documented_cache_defaults() -> None:
    """Without cache prices: reads at a tenth of input, 5-minute writes at 1.25x, 1-hour writes at 2x."""
    usage = ApiUsage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_read_input_tokens=1_000_000,
        cache_creation_input_tokens=2_000_000,
        cache_creation=CacheCreation(
            ephemeral_1h_input_tokens=1_000_000, ephemeral_5m_input_tokens=1_000_000
        ),
    )
    assert Price(input_per_mtok=4, output_per_mtok=20).cost(usage) == pytest.approx(4 + 20 + 0.4 + 5 + 8)
    no_split = ApiUsage(input_tokens=0, output_tokens=0, cache_creation_input_tokens=1_000_000)
    assert Price(input_per_mtok=4, output_per_mtok=20).cost(no_split) == pytest.approx(5)


@pytest.mark.parametrize(
    "tiers",
    [
        pytest.param([(200_000, HOUSE)], id="a-list"),
        pytest.param(((200_000, HOUSE), (100_000, HOUSE)), id="descending"),
        pytest.param(((200_000, HOUSE), (200_000, HOUSE)), id="repeated"),
        pytest.param(((True, HOUSE),), id="bool-threshold"),
        pytest.param(((200_000, 3.0),), id="not-a-price"),
        pytest.param(((200_000,),), id="not-a-pair"),
        pytest.param(((1, Price(input_per_mtok=1, output_per_mtok=1, tiers=((2, HOUSE),))),), id="nested"),
    ],
)
def test_price_tiers_are_checked(tiers: object) -> None:
    """Tiers are (threshold, flat Price) pairs by ascending threshold."""
    with pytest.raises(ConfigurationError, match=r"Price\.tiers must be"):
        Price(input_per_mtok=1, output_per_mtok=1, tiers=tiers)  # type: ignore[arg-type]


def test_a_price_of_the_callers_own_can_have_tiers() -> None:
    """`at` picks the highest threshold exceeded; `cost` prices the whole request at it."""
    high = Price(input_per_mtok=10, output_per_mtok=10)
    higher = Price(input_per_mtok=100, output_per_mtok=100)
    price = Price(input_per_mtok=1, output_per_mtok=1, tiers=((10, high), (20, higher)))
    assert [price.at(tokens) for tokens in (0, 10, 11, 20, 21)] == [price, price, high, high, higher]
    assert price.cost(ApiUsage(input_tokens=5, output_tokens=1_000_000, cache_read_input_tokens=6)) == (
        pytest.approx(10 + 5e-5 + 6e-6)
    )
