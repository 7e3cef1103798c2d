"""`Price`: what one response costs, from its `usage`, as the price list bills it.

`boundloop.prices` exports it, with the default prices (genai-prices) and the lookup.

A response's `usage` says how it is billed: its tokens of each kind (input, output, cache reads,
5-minute and 1-hour cache writes), `speed` (`"fast"`: the fast-mode rates), `service_tier`
(`"batch"`: the batch rates; `"priority"` is billed by commitment, at no list price: priced as
standard), `inference_geo` (`"us"`: US-only inference, 1.1x every token rate on the models that
take it) and `server_tool_use` (web searches at $10 per 1,000; web fetches are free). Code
execution is billed per container-hour beyond the organisation's free hours, which no response
reports: it is not in the cost.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final, cast, final

from .._lazy import claim
from ..errors import ConfigurationError

if TYPE_CHECKING:
    from anthropic.types import Usage as ApiUsage

FAST_MULTIPLIER: Final = 6.0
"""The fast-mode rates of a price without its own (`Price.fast`): the highest multiplier of the
standard rates Anthropic published for fast mode (Claude Opus 4.6), so a cost budget errs high."""
BATCH_MULTIPLIER: Final = 0.5
"""The batch rates of a price without its own (`Price.batch`): half the standard rates."""
US_INFERENCE: Final = (("us", 1.1),)
"""`usage.inference_geo` -> multiplier of every token rate: US-only inference costs 1.1x."""
_VARIANTS: Final = ("tiers", "fast", "batch", "inference_geo")
"""The fields that are not a rate."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """US dollars per million tokens of each kind, per 1,000 web searches, and the rates of a
    fast, a batch and a US-only response."""

    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None = None
    """Default: a tenth of the input price."""
    cache_write_per_mtok: float | None = None
    """Default: 1.25 x the input price (5-minute cache writes)."""
    cache_write_1h_per_mtok: float | None = None
    """Default: 2 x the input price (1-hour cache writes, from `usage.cache_creation`)."""
    web_search_per_1k: float = 10.0
    """US dollars per 1,000 web searches (`usage.server_tool_use.web_search_requests`)."""
    tiers: tuple[tuple[int, Price], ...] = ()
    """Long-context prices, `((threshold, Price(...)), ...)` by ascending threshold: a request
    whose input tokens (uncached, cache reads and cache writes together) exceed a threshold is
    priced, all of its tokens, at the price of the highest threshold it exceeds."""
    fast: Price | None = None
    """The price of a response with `usage.speed == "fast"`. Default: `FAST_MULTIPLIER` times
    every token rate (genai-prices' fast rates where it has them)."""
    batch: Price | None = None
    """The price of a response with `usage.service_tier == "batch"`. Default: half of every
    token rate (genai-prices' batch rates where it has them)."""
    inference_geo: tuple[tuple[str, float], ...] = US_INFERENCE
    """`(usage.inference_geo, multiplier)` pairs: every token rate of a response run in that
    geography is multiplied (web searches are not)."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in _VARIANTS or (value is None and field.name.startswith("cache_")):
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise ConfigurationError(f"Price.{field.name} must be a number >= 0, got {value!r}")
        _check_tiers(self.tiers)
        for name in ("fast", "batch"):
            variant = cast(object, getattr(self, name))
            if variant is not None and (
                not isinstance(variant, Price) or variant.fast is not None or variant.batch is not None
            ):
                raise ConfigurationError(
                    f"Price.{name} must be a Price without fast or batch prices of its own, got {variant!r}"
                )
        geo = cast(object, self.inference_geo)
        pairs = cast(tuple[object, ...], geo) if isinstance(geo, tuple) else (geo,)
        for pair in pairs:
            entry = cast(tuple[object, ...], pair) if isinstance(pair, tuple) else ()
            if not (
                len(entry) == 2
                and isinstance(entry[0], str)
                and isinstance(entry[1], int | float)
                and not isinstance(entry[1], bool)
                and entry[1] >= 0
            ):
                raise ConfigurationError(
                    f"Price.inference_geo must be a tuple of (geo, multiplier >= 0) pairs, got {geo!r}"
                )

    def at(self, input_tokens: int) -> Price:
        """The flat price of a request with `input_tokens` of input (cache reads and writes included)."""
        price = self
        for threshold, tier in self.tiers:
            if input_tokens > threshold:
                price = tier
        return price

    def billed_as(self, usage: ApiUsage) -> Price:
        """The price a response is billed at by its `usage.speed` and `usage.service_tier`
        (tiers not yet applied)."""
        if getattr(usage, "speed", None) == "fast":
            return self.fast or self.scaled(FAST_MULTIPLIER)
        if getattr(usage, "service_tier", None) == "batch":
            return self.batch or self.scaled(BATCH_MULTIPLIER)
        return self

    def scaled(self, factor: float) -> Price:
        """Every token rate times `factor` (the web search rate and the variants kept)."""

        def times(rate: float | None) -> float | None:
            return None if rate is None else rate * factor

        return dataclasses.replace(
            self,
            input_per_mtok=self.input_per_mtok * factor,
            output_per_mtok=self.output_per_mtok * factor,
            cache_read_per_mtok=times(self.cache_read_per_mtok),
            cache_write_per_mtok=times(self.cache_write_per_mtok),
            cache_write_1h_per_mtok=times(self.cache_write_1h_per_mtok),
            tiers=tuple((threshold, tier.scaled(factor)) for threshold, tier in self.tiers),
            fast=None,
            batch=None,
        )

    def cost(self, usage: ApiUsage) -> float:
        """The cost in USD of one response's usage: its tokens, at the rates its speed, service
        tier, geography and input size select, and its web searches."""
        billed, price, read, written, written_1h = self._billed(usage)
        read_rate, write_rate, write_1h_rate = price._cache_rates()
        tokens = (
            usage.input_tokens * price.input_per_mtok
            + usage.output_tokens * price.output_per_mtok
            + read * read_rate
            + (written - written_1h) * write_rate
            + written_1h * write_1h_rate
        ) / 1_000_000
        server = getattr(usage, "server_tool_use", None)
        searches = 0 if server is None else getattr(server, "web_search_requests", 0) or 0
        return tokens * self._geo(usage) + searches * billed.web_search_per_1k / 1000

    def cache_savings(self, usage: ApiUsage) -> float:
        """What caching saved on one response, in USD: its cost with every cache read and write
        billed as plain input, minus its cost as billed. Negative when the writes' premium
        exceeds what the reads saved (a write no later request read)."""
        if not usage.cache_read_input_tokens and not usage.cache_creation_input_tokens:
            return 0.0
        # One price either way (the input size that selects a tier counts cache reads and writes
        # as input too): only the cached tokens' part of the cost differs.
        _, price, read, written, written_1h = self._billed(usage)
        read_rate, write_rate, write_1h_rate = price._cache_rates()
        as_input = (read + written) * price.input_per_mtok
        as_billed = read * read_rate + (written - written_1h) * write_rate + written_1h * write_1h_rate
        return (as_input - as_billed) / 1_000_000 * self._geo(usage)

    def _billed(self, usage: ApiUsage) -> tuple[Price, Price, int, int, int]:
        """The price a response is billed at (`billed_as`), its tier for the response's input
        size, and its cache reads, cache writes and, of these, the 1-hour writes."""
        read = usage.cache_read_input_tokens or 0
        written = usage.cache_creation_input_tokens or 0
        billed = self.billed_as(usage)
        price = billed.at(usage.input_tokens + read + written) if billed.tiers else billed
        split = usage.cache_creation
        # a count the API leaves out is zero (the SDK marks both of `cache_creation` required)
        written_1h = 0 if split is None else min(split.ephemeral_1h_input_tokens or 0, written)
        return billed, price, read, written, written_1h

    def _cache_rates(self) -> tuple[float, float, float]:
        """The cache read, 5-minute write and 1-hour write rates, the defaults filled in."""
        base = self.input_per_mtok
        read, write, write_1h = (
            self.cache_read_per_mtok,
            self.cache_write_per_mtok,
            self.cache_write_1h_per_mtok,
        )
        return (
            base * 0.1 if read is None else read,
            base * 1.25 if write is None else write,
            base * 2 if write_1h is None else write_1h,
        )

    def _geo(self, usage: ApiUsage) -> float:
        """The multiplier of every token rate for the response's `usage.inference_geo`."""
        geo = getattr(usage, "inference_geo", None)
        for name, factor in self.inference_geo:
            if name == geo:
                return factor
        return 1.0


def _check_tiers(tiers: object) -> None:
    if not isinstance(tiers, tuple):
        raise ConfigurationError(f"Price.tiers must be a tuple of (threshold, Price), got {tiers!r}")
    previous = -1
    for tier in cast(tuple[object, ...], tiers):
        pair = cast(tuple[object, ...], tier) if isinstance(tier, tuple) else ()
        threshold, price = pair if len(pair) == 2 else (None, None)
        if (
            not isinstance(threshold, int)
            or isinstance(threshold, bool)
            or threshold <= previous
            or not isinstance(price, Price)
            or price.tiers
        ):
            raise ConfigurationError(
                "Price.tiers must be (threshold, Price) pairs by ascending int threshold, "
                f"the tier prices without tiers of their own; got {tier!r}"
            )
        previous = threshold


claim("boundloop", Price)  # reported at its public home
