"""What each model call costs, at the price of the model that ran it.

- A call is priced, and its `max_tokens` clamped (`_core/budget.py`), at its own model: the
  loop's, or the fallback model a refusal is retried on.
- `usage.iterations`: the entries the top-level usage leaves out are added to the run's tokens
  and cost, each at its own model: `compaction` at the call's model (the SDK's
  `BetaIterationsUsage`), `advisor_message` at its `model` (the advisor tool's "Usage and
  billing": "Top-level usage fields reflect executor tokens only"). `message` entries are in
  the top-level usage; so is a `fallback_message` entry (it takes the place of a `message`
  entry when a server-side fallback model served the turn), but it ran on its own model: its
  tokens are priced at that model's price instead of the call's.
- A model named at run time without a price (an advisor or server-side fallback model the loop
  could not know at construction) is not free: it is priced at the highest rates of every known
  price (`ceiling_price`), and an `unpriced_model` error is recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, cast

from anthropic.types import Usage
from anthropic.types.cache_creation import CacheCreation

from .._base.price import Price
from ..prices import PRICES, resolve_price
from ..records import Usage as RunUsage
from .blocks import field_of
from .context import RunContext

ADDED: Final = ("compaction", "advisor_message")
"""The `usage.iterations` entries the top-level usage leaves out: billed on top of it."""
REPRICED: Final = "fallback_message"
"""The entry in the top-level usage that ran on a model of its own (a server-side fallback)."""


def price_of(ctx: RunContext, model: str) -> Price | None:
    """The price of `model`: the loop's for its own model, else the caller's `prices` or the
    built-in table's; None when neither has one."""
    config = ctx.config
    if model == config.spec.model:
        return config.price
    return resolve_price(model, config.prices, config.platform, config.region)


def call_model(ctx: RunContext) -> str:
    """The model the next call goes to: a refusal's fallback model, or the loop's."""
    return ctx.scratch.fallback.model if ctx.scratch.fallback is not None else ctx.config.spec.model


def call_price(ctx: RunContext) -> Price | None:
    """The price of the next call's model."""
    return price_of(ctx, call_model(ctx))


def count_response(ctx: RunContext, usage: Usage, model: str) -> None:
    """Add one response's usage to the run's: its top-level tokens and cost at `model` (the
    model it was sent to), and every `usage.iterations` entry at its own model (above)."""
    totals = ctx.state.usage
    totals.input_tokens += usage.input_tokens
    totals.output_tokens += usage.output_tokens
    totals.cache_read_input_tokens += usage.cache_read_input_tokens or 0
    totals.cache_creation_input_tokens += usage.cache_creation_input_tokens or 0
    price = price_of(ctx, model)
    if price is None:  # the loop's model has no price: not tracked (a retry's is checked at construction)
        totals.cost_usd = totals.cache_savings_usd = None
    else:
        totals.cost_usd = (totals.cost_usd or 0.0) + price.cost(usage)
        totals.cache_savings_usd = (totals.cache_savings_usd or 0.0) + price.cache_savings(usage)
    iterations: Any = field_of(usage, "iterations")
    if iterations:
        _count_iterations(ctx, totals, usage, iterations, model, price)


def _count_iterations(
    ctx: RunContext,
    totals: RunUsage,
    usage: Usage,
    iterations: Iterable[object],
    model: str,
    price: Price | None,
) -> None:
    for entry in iterations:
        kind = field_of(entry, "type")
        if kind not in ADDED and kind != REPRICED:
            continue
        billed = entry_usage(entry, usage)
        if kind != REPRICED:  # tokens the top-level usage left out
            totals.input_tokens += billed.input_tokens
            totals.output_tokens += billed.output_tokens
            totals.cache_read_input_tokens += billed.cache_read_input_tokens or 0
            totals.cache_creation_input_tokens += billed.cache_creation_input_tokens or 0
        if price is None:  # cost not tracked
            continue
        named = field_of(entry, "model")
        own = model if kind == "compaction" or not isinstance(named, str) else named
        at = price if own == model else _named_price(ctx, own)
        if kind == REPRICED:  # counted at the call's price with the top-level usage: the difference
            totals.cost_usd = (totals.cost_usd or 0.0) + at.cost(billed) - price.cost(billed)
        else:
            totals.cost_usd = (totals.cost_usd or 0.0) + at.cost(billed)


def _named_price(ctx: RunContext, model: str) -> Price:
    """The price of a model an iteration names; without one, the highest known rates (recorded)."""
    found = price_of(ctx, model)
    if found is not None:
        return found
    ctx.error(
        "unpriced_model",
        LookupError(f"no price is known for {model}: its tokens are costed at the highest known rates"),
    )
    return ceiling_price(ctx.config.prices)


def entry_usage(entry: object, usage: object) -> Usage:
    """A `usage.iterations` entry as the `Usage` it is billed as (at the response's speed,
    service tier and geography; its 5-minute and 1-hour cache writes as it splits them)."""

    def count(name: str) -> int:
        return int(cast(int, field_of(entry, name) or 0))

    split: Any = field_of(entry, "cache_creation")
    return Usage(
        input_tokens=count("input_tokens"),
        output_tokens=count("output_tokens"),
        cache_read_input_tokens=count("cache_read_input_tokens"),
        cache_creation_input_tokens=count("cache_creation_input_tokens"),
        cache_creation=None
        if split is None
        else CacheCreation(
            ephemeral_1h_input_tokens=int(cast(int, field_of(split, "ephemeral_1h_input_tokens") or 0)),
            ephemeral_5m_input_tokens=int(cast(int, field_of(split, "ephemeral_5m_input_tokens") or 0)),
        ),
        service_tier=cast(Any, field_of(usage, "service_tier")),
        inference_geo=cast(Any, field_of(usage, "inference_geo")),
        speed=cast(Any, field_of(usage, "speed")),
    )


def ceiling_price(prices: Mapping[str, Price] | None = None) -> Price:
    """Every rate at its highest among the built-in prices and `prices` (long-context tiers
    included): what a model without a price is costed at, so that a cost errs high, never free."""
    flat = [
        price
        for entry in (*PRICES.values(), *(prices or {}).values())
        for price in (entry, *(tier for _, tier in entry.tiers))
    ]

    def rate(price: Price, name: str, default: float) -> float:
        value = cast(float | None, getattr(price, name))
        return price.input_per_mtok * default if value is None else value  # `Price`'s defaults

    return Price(
        input_per_mtok=max(price.input_per_mtok for price in flat),
        output_per_mtok=max(price.output_per_mtok for price in flat),
        cache_read_per_mtok=max(rate(price, "cache_read_per_mtok", 0.1) for price in flat),
        cache_write_per_mtok=max(rate(price, "cache_write_per_mtok", 1.25) for price in flat),
        cache_write_1h_per_mtok=max(rate(price, "cache_write_1h_per_mtok", 2.0) for price in flat),
        web_search_per_1k=max(price.web_search_per_1k for price in flat),
    )
