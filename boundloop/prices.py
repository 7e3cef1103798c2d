"""Model prices, for cost tracking and cost budgets.

The default prices come from genai-prices (https://github.com/pydantic/genai-prices), the
maintained price database PydanticAI and Logfire use. It ships its data inside the package, so a
lookup never touches the network; the data is read on the first lookup (about 20 ms, once per
process), not at import. The caller's `prices={model: Price(...)}` entries win over it. A model
with no price in either warns once (`UnpricedModelWarning`) and its cost is not tracked.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import warnings
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Final, cast, final

# At import, not at the first lookup: genai-prices' own import reads its package metadata, a
# blocking file read that must not happen on the event loop when a loop is built in async code.
from genai_prices.data_snapshot import get_snapshot
from genai_prices.types import TieredPrices

from .errors import ConfigurationError

if TYPE_CHECKING:
    from anthropic.types import Usage as ApiUsage
    from genai_prices.data_snapshot import DataSnapshot
    from genai_prices.types import ModelPrice

_DATED: Final = re.compile(r"\d{8}")
"""The date suffix of a model snapshot id."""

PROVIDER: Final = "anthropic"
"""The genai-prices provider whose prices apply: the Messages API's own."""


class UnpricedModelWarning(UserWarning):
    """A loop's model has no known price: its cost is not tracked.

    Issued once per model and process, at the `AgentLoop(...)` that names it. Give the model a
    price with `AgentLoop(prices={model: Price(...)})`, or silence it with
    `warnings.filterwarnings("ignore", category=UnpricedModelWarning)`.
    """


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """US dollars per million tokens of each kind."""

    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None = None
    """Default: a tenth of the input price."""
    cache_write_per_mtok: float | None = None
    """Default: 1.25 x the input price (5-minute cache writes)."""
    cache_write_1h_per_mtok: float | None = None
    """Default: 2 x the input price (1-hour cache writes, from `usage.cache_creation`)."""
    tiers: tuple[tuple[int, Price], ...] = ()
    """Long-context prices, `((threshold, Price(...)), ...)` by ascending threshold: a request
    whose input tokens (uncached, cache reads and cache writes together) exceed a threshold is
    priced, all of its tokens, at the price of the highest threshold it exceeds."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "tiers" or (value is None and field.name.startswith("cache_")):
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise ConfigurationError(f"Price.{field.name} must be a number >= 0, got {value!r}")
        tiers = cast(object, self.tiers)
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

    def at(self, input_tokens: int) -> Price:
        """The flat price of a request with `input_tokens` of input (cache reads and writes included)."""
        price = self
        for threshold, tier in self.tiers:
            if input_tokens > threshold:
                price = tier
        return price

    def cost(self, usage: ApiUsage) -> float:
        """The cost in USD of one response's usage."""
        cache_read = usage.cache_read_input_tokens or 0
        cache_write = usage.cache_creation_input_tokens or 0
        price = self.at(usage.input_tokens + cache_read + cache_write) if self.tiers else self
        split = usage.cache_creation
        write_1h = 0 if split is None else min(split.ephemeral_1h_input_tokens, cache_write)
        base = price.input_per_mtok
        read_rate = price.cache_read_per_mtok
        write_rate = price.cache_write_per_mtok
        write_1h_rate = price.cache_write_1h_per_mtok
        return (
            usage.input_tokens * base
            + usage.output_tokens * price.output_per_mtok
            + cache_read * (base * 0.1 if read_rate is None else read_rate)
            + (cache_write - write_1h) * (base * 1.25 if write_rate is None else write_rate)
            + write_1h * (base * 2 if write_1h_rate is None else write_1h_rate)
        ) / 1_000_000


# -- the default prices: genai-prices ---------------------------------------------------


@final
class _Catalogue:
    """genai-prices' Anthropic prices as `Price`s, read from one data snapshot.

    The snapshot is the data bundled with genai-prices, or a newer one `genai_prices.UpdatePrices`
    fetched (opt-in, the caller's choice): a new snapshot gives a new catalogue. Prices that
    changed on a date are read as of the catalogue's first use.
    """

    __slots__ = ("by_id", "matches", "snapshot")

    def __init__(self, snapshot: DataSnapshot) -> None:
        self.snapshot = snapshot
        now = datetime.now(tz=UTC)
        self.by_id: dict[str, Price] = {}
        for provider in snapshot.providers:
            if provider.id == PROVIDER:
                for model in provider.models:
                    price = from_genai_prices(model.get_prices(now))
                    if price is not None:
                        self.by_id[model.id] = price
        self.matches: dict[str, str | None] = {}
        """Model name -> the genai-prices id it matches (None: none)."""

    def match(self, model: str) -> str | None:
        """The genai-prices id of the Anthropic model `model` names, or None."""
        if model in self.matches:
            return self.matches[model]
        try:
            _, info = self.snapshot.find_provider_model(model, None, PROVIDER, None)
        except LookupError:
            found = None
        else:
            found = info.id if info.id in self.by_id else None
        self.matches[model] = found
        return found


_catalogue: _Catalogue | None = None


def _current() -> _Catalogue:
    """The catalogue of genai-prices' current snapshot (built again when the snapshot changes)."""
    global _catalogue
    snapshot = get_snapshot()
    if _catalogue is None or _catalogue.snapshot is not snapshot:
        _catalogue = _Catalogue(snapshot)
    return _catalogue


_RATES: Final = {
    "input_per_mtok": "input_mtok",
    "output_per_mtok": "output_mtok",
    "cache_read_per_mtok": "cache_read_mtok",
    "cache_write_per_mtok": "cache_write_mtok",
    "cache_write_1h_per_mtok": "cache_write_1h_mtok",
}
"""`Price` field -> genai-prices price key."""


def from_genai_prices(model_price: ModelPrice) -> Price | None:
    """A genai-prices `ModelPrice` as a `Price`, its long-context tiers included; None without
    an input or an output price. Prices per request or per web search are left out."""
    rates: dict[str, Decimal | TieredPrices | None] = {
        field: getattr(model_price, key, None) for field, key in _RATES.items()
    }
    if rates["input_per_mtok"] is None or rates["output_per_mtok"] is None:
        return None
    starts = sorted(
        {tier.start for rate in rates.values() if isinstance(rate, TieredPrices) for tier in rate.tiers}
    )

    def flat(above: int) -> dict[str, float | None]:
        """The rates of a request with more than `above` input tokens."""
        flat_rates: dict[str, float | None] = {}
        for field, rate in rates.items():
            if isinstance(rate, TieredPrices):
                applicable = rate.base
                for tier in sorted(rate.tiers, key=lambda tier: tier.start):
                    if tier.start <= above:
                        applicable = tier.price
                rate = applicable
            flat_rates[field] = None if rate is None else float(rate)
        return flat_rates

    def price(rates: dict[str, float | None], tiers: tuple[tuple[int, Price], ...] = ()) -> Price:
        # As genai-prices counts them: tokens of a kind without a price of its own are priced as
        # the kind they are part of (a 1-hour write as a write, a write or a read as input).
        base = rates["input_per_mtok"] or 0.0
        write = rates["cache_write_per_mtok"]
        write = base if write is None else write
        read = rates["cache_read_per_mtok"]
        write_1h = rates["cache_write_1h_per_mtok"]
        return Price(
            input_per_mtok=base,
            output_per_mtok=rates["output_per_mtok"] or 0.0,
            cache_read_per_mtok=base if read is None else read,
            cache_write_per_mtok=write,
            cache_write_1h_per_mtok=write if write_1h is None else write_1h,
            tiers=tiers,
        )

    return price(flat(-1), tuple((start, price(flat(start))) for start in starts))


@final
class _DefaultPrices(Mapping[str, Price]):
    """genai-prices' Claude models by their genai-prices id, at today's prices (read on first use)."""

    def __getitem__(self, model: str) -> Price:
        return _current().by_id[model]

    def __iter__(self) -> Iterator[str]:
        return iter(_current().by_id)

    def __len__(self) -> int:
        return len(_current().by_id)

    def __repr__(self) -> str:
        return f"PRICES({dict(self)!r})"


PRICES: Final[Mapping[str, Price]] = _DefaultPrices()
"""genai-prices' current list prices (USD per MTok) of Claude models, by genai-prices model id
(`claude-sonnet-4-6`, `claude-haiku-4-5`, ...); read-only."""


def default_price(model: str) -> Price | None:
    """genai-prices' current price of `model` on Anthropic's API, or None when it has none.

    genai-prices matches the names the API accepts: aliases, dated snapshots
    (`claude-haiku-4-5-20251001`), `-latest`; the price is the `PRICES` entry of the id matched.
    """
    catalogue = _current()
    found = catalogue.match(model)
    return None if found is None else catalogue.by_id[found]


def resolve_price(model: str, prices: Mapping[str, Price] | None = None) -> Price | None:
    """The price a loop on `model` is costed at: the caller's entry, else genai-prices', else None.

    The caller's `prices` win. Their entries are matched exactly, then by the genai-prices id the
    model belongs to (so `{"claude-sonnet-4-5": ...}` prices `claude-sonnet-4-5-20250929` too),
    then as `price_for` matches dated ids.

    Args:
        model: the model the loop calls.
        prices: the caller's prices (`AgentLoop(prices=...)`), by model name.

    Raises:
        ConfigurationError: the caller's entry found is not a `Price`.
    """
    if prices and model in prices:
        return _checked(model, prices[model])
    catalogue = _current()
    matched = catalogue.match(model)
    if prices:
        if matched is not None and matched in prices:
            return _checked(matched, prices[matched])
        found = price_for(model, prices)
        if found is not None:
            return found
    return None if matched is None else catalogue.by_id[matched]


_warned: set[str] = set()
"""Models warned about: a model is warned about once per process."""


def warn_unpriced(model: str) -> None:
    """Warn, once per model and process, that `model` has no price and its cost is not tracked.

    The warning points at the first line outside boundloop: the `AgentLoop(...)` call.

    Warns:
        UnpricedModelWarning: the first time for this model (every time while warnings of this
            category are errors, since none was shown).
    """
    if model in _warned:
        return
    warnings.warn(
        f"no price known for model {model!r}: cost not tracked "
        f"(pass prices={{{model!r}: Price(...)}} to track it)",
        UnpricedModelWarning,
        stacklevel=_outside_boundloop(),
    )
    _warned.add(model)  # after the warning: one turned into an error leaves the model unwarned


def _outside_boundloop() -> int:
    """The `stacklevel` of the first frame outside this package, for a warning from `resolve_price`."""
    level = 1
    frame = inspect.currentframe()
    frame = None if frame is None else frame.f_back  # this function's caller: resolve_price
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if name != "boundloop" and not name.startswith("boundloop."):
            break
        frame = frame.f_back
        level += 1
    return level


def price_for(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of `model` in the table `prices`: an exact entry, else the entry the dated id
    belongs to. Only the table is read; `resolve_price` adds genai-prices' prices.

    A dated id (`claude-haiku-4-5-20251001`) finds its alias by the longest prefix, so
    `claude-sonnet-4-5-...` never takes a shorter entry's price. An alias ending in `-latest`
    or `-0` names the snapshots without that suffix (`claude-sonnet-4-0` prices
    `claude-sonnet-4-20250514`), but only for a date, never for another version.

    Raises:
        ConfigurationError: the entry found is not a `Price`.
    """
    if model in prices:
        return _checked(model, prices[model])
    best: tuple[int, Price] | None = None
    for name, price in prices.items():
        base = name.removesuffix("-latest")
        if not model.startswith(base + "-"):
            short = base.removesuffix("-0")
            if short == base or not _DATED.fullmatch(model.removeprefix(short + "-")):
                continue
            base = short
        if best is None or len(base) > best[0]:
            best = (len(base), price)
    return None if best is None else _checked(model, best[1])


def _checked(model: str, price: object) -> Price:
    """A caller's entry is checked where it is picked: at construction, never mid-run."""
    if not isinstance(price, Price):
        raise ConfigurationError(f"prices[{model!r}] must be a Price, got {price!r}")
    return price
